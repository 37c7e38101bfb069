"""Embedding throughput: our stage (torch fp32, torch bf16, onnx) against a bare SentenceTransformer.encode.

    .venv/bin/python bench/embed.py --n 1000

On one deterministic corpus (half short 15-30 word memories, half long 80-150 word ones) it
measures, in one process: a bare float32 `SentenceTransformer.encode`, `embed_with_cache` on
a cold cache with each backend and precision, and a rerun on the warm cache. Quality of
each path against the bare vectors: the lowest cosine, and the share of each text's 10
nearest neighbours in the corpus that stay the same. Every path is warmed up first, then the paths take turns
on slices of the corpus, `--rounds` times, keeping each slice's best time: on a shared
machine bursts of other work are larger than the differences measured. Our stage's
time includes reading and writing its cache (one cold call per slice). Model loading is
timed separately.
The last line is `RESULT name=value ...`.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crosstier.transforms.embed import vectors as embed  # noqa: E402
from crosstier.transforms.embed import encoders as embed_encoders  # noqa: E402

SUBJECTS = ["the user", "the agent", "the deploy job", "our team", "the billing service", "the nightly build", "the database", "the customer", "the API gateway", "the test suite"]
VERBS = ["fixed", "reported", "deployed", "rolled back", "reviewed", "migrated", "configured", "prefers", "broke", "documented", "scheduled", "discussed"]
OBJECTS = ["the TypeScript build", "dark mode in the editor", "the Postgres index", "a flaky integration test", "the release notes", "the payment webhook", "the staging cluster", "the retry policy", "the onboarding checklist", "the cache eviction bug", "the quarterly report", "the Kubernetes manifests"]
TAILS = ["after the standup", "because the latency doubled", "before the Friday release", "on version 2.4.1", "with help from Dana", "so the alerts stopped", "in the morning session", "without downtime", "for the third time this week", "as agreed in the review"]


def sentence(rng: random.Random) -> str:
    """One plausible memory sentence."""
    return f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}."


def memory_text(rng: random.Random, low: int, high: int) -> str:
    """Sentences until the text holds between `low` and `high` words."""
    target = rng.randint(low, high)
    words: list[str] = []
    while len(words) < target:
        words.extend(sentence(rng).split())
    return " ".join(words[:target])


def corpus(n: int, seed: int = 7) -> list[str]:
    """n deterministic memories, alternating short (15-30 words) and long (80-150 words)."""
    rng = random.Random(seed)
    return [memory_text(rng, 15, 30) if i % 2 == 0 else memory_text(rng, 80, 150) for i in range(n)]


def rss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn) -> tuple[float, object]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _stage(encoder, part: pl.DataFrame, cache: Path, batch_size: int) -> np.ndarray:
    """Our stage on one slice: embed_with_cache into `cache`, vectors as a matrix."""
    out, stats = embed.embed_with_cache(part, encoder, cache, batch_size=batch_size)
    assert stats.hits == 0, "the bench corpus must not repeat texts"
    return np.array(out["embedding"].to_list(), dtype=np.float32)


def top10_overlap(reference: np.ndarray, other: np.ndarray) -> float:
    """Mean share of each text's 10 nearest neighbours (by cosine) that `other` keeps."""
    def neighbours(vectors: np.ndarray) -> np.ndarray:
        similarity = vectors @ vectors.T
        np.fill_diagonal(similarity, -np.inf)
        return np.argsort(-similarity, axis=1)[:, :10]

    kept = [len(set(a) & set(b)) / 10 for a, b in zip(neighbours(reference), neighbours(other))]
    return float(np.mean(kept))


def measured(paths: dict, frame: pl.DataFrame, size: int, rounds: int, work: Path) -> dict[str, tuple[list[float], np.ndarray]]:
    """Per path: best seconds of each slice over the rounds, and the vectors of all texts.

    The paths take turns slice by slice (in rotating order), so a burst of other work on
    the machine hits all of them alike instead of whichever ran during it.
    """
    parts = [frame.slice(i, size) for i in range(0, frame.height, size)]
    times = {name: [float("inf")] * len(parts) for name in paths}
    vectors: dict[str, list[np.ndarray]] = {name: [] for name in paths}
    names = list(paths)
    for round_ in range(rounds):
        cache = work / f"round-{round_}"
        for index, part in enumerate(parts):
            for name in names[index % len(names) :] + names[: index % len(names)]:
                seconds, out = timed(lambda: paths[name](part, cache))
                times[name][index] = min(times[name][index], seconds)
                if round_ == 0:
                    vectors[name].append(out)
        print(f"round {round_ + 1}: " + " ".join(f"{n} {sum(t):.2f}s" for n, t in times.items()) + " (best per slice so far)", flush=True)
    return {name: (times[name], np.concatenate(vectors[name])) for name in paths}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="memories in the corpus (default 1000: about 2 minutes on 2 cores)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2, help="timed repetitions of each path; the best time of each slice is kept")
    parser.add_argument("--slice", type=int, default=100, help="texts per slice; the paths take turns slice by slice")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    texts = corpus(args.n, args.seed)
    frame = pl.DataFrame({"text": texts}).with_columns(pl.col("text").map_elements(embed.text_hash, return_dtype=pl.String).alias("text_hash"))
    work = Path(tempfile.mkdtemp(prefix="ctc-bench-embed-"))
    warmup = texts[:64]

    load_torch_s, torch_enc = timed(lambda: embed.load_encoder(device="cpu", backend="torch", precision="fp32").load())
    bf16_enc = embed.load_encoder(device="cpu", backend="torch", precision="bf16").load()
    export_s, onnx_enc = timed(lambda: embed.load_encoder(device="cpu", backend="onnx", cache_dir=work / "models").load())
    default_enc = embed.load_encoder(device="cpu")  # what a run on this CPU uses
    default = {("torch", "fp32"): "torch", ("torch", "bf16"): "bf16", ("onnx", "fp32"): "onnx"}[(default_enc.backend, default_enc.precision)]
    print(f"bf16 in hardware (AVX-512 BF16, with or without AMX): {embed_encoders.cpu_has_fast_bf16()}; default CPU path: {default_enc.backend} {default_enc.precision}", flush=True)
    from sentence_transformers import SentenceTransformer

    bare_model = SentenceTransformer(embed.resolve_model("all-MiniLM-L6-v2"), device="cpu")
    encoders = {"torch": torch_enc, "bf16": bf16_enc, "onnx": onnx_enc}
    bare_model.encode(warmup, batch_size=args.batch_size)
    for encoder in encoders.values():
        encoder.encode(warmup)

    paths = {"bare": lambda part, cache: np.asarray(bare_model.encode(part["text"].to_list(), batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False))}
    for name, encoder in encoders.items():
        paths[name] = lambda part, cache, encoder=encoder, name=name: _stage(encoder, part, cache / name, args.batch_size)
    best = measured(paths, frame, args.slice, args.rounds, work)
    results = {name: vectors for name, (_, vectors) in best.items()}
    seconds = {name: sum(times) for name, (times, _) in best.items()}
    for name, encoder in encoders.items():
        cache = work / "round-0" / name  # warm: every text was embedded there in round 0
        warm_times = [timed(lambda: embed.embed_with_cache(frame, encoder, cache, batch_size=args.batch_size))[0] for _ in range(3)]
        seconds[f"{name}_warm"] = min(warm_times)
    best = seconds

    rate = {k: args.n / best[k] for k in ("bare", *encoders)}
    figures = {
        "n": args.n,
        "batch_size": args.batch_size,
        "bare_torch_texts_per_s": round(rate["bare"], 1),
        "stage_torch_texts_per_s": round(rate["torch"], 1),
        "stage_bf16_texts_per_s": round(rate["bf16"], 1),
        "stage_onnx_texts_per_s": round(rate["onnx"], 1),
        "ratio_stage_torch_vs_bare": round(rate["torch"] / rate["bare"], 3),
        "ratio_stage_bf16_vs_bare": round(rate["bf16"] / rate["bare"], 3),
        "ratio_stage_onnx_vs_bare": round(rate["onnx"] / rate["bare"], 3),
    }
    for name in encoders:
        figures[f"{name}_min_cosine"] = round(float((results[name] * results["bare"]).sum(axis=1).min()), 6)
        figures[f"{name}_top10_overlap"] = round(top10_overlap(results["bare"], results[name]), 4)
    figures |= {
        "default_cpu_path": default,
        "cold_seconds": round(best[default], 3),
        "warm_seconds": round(best[f"{default}_warm"], 4),
        "warm_speedup": round(best[default] / best[f"{default}_warm"], 1),
        "load_torch_seconds": round(load_torch_s, 2),
        "load_onnx_with_export_seconds": round(export_s, 2),
        "rss_mib": round(rss_mib(), 1),
        "load_average_1m": round(os.getloadavg()[0], 2),  # other work on the machine skews every figure
    }
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
    shutil.rmtree(work, ignore_errors=True)
    print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
