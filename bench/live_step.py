"""One live micro-batch at N memories, without the watcher process around it: where its time goes.

Builds the watcher's loaded state over N memories of bench/corpus.py (the batch run's
scored links, cap and evidence: built once, then cached under --cache), then appends
`--add` memories (the corpus's next ones, their synthetic vectors standing in for the
model's) and times the step the watcher runs per micro-batch after reading the stores and
embedding: texts and fingerprints, session context (only the touched sessions), then `live_state.stepped` (evidence,
candidate search, scoring, cap, published rows, delta). Repeats `--repeat` times from the
same state and prints seconds per part and a RESULT line.

    .venv/bin/python bench/live_step.py --n 20000
    .venv/bin/python bench/live_step.py --n 100000 --add 1 --repeat 5
"""

from __future__ import annotations

import argparse
import cProfile
import os
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

try:  # the watcher has torch loaded with its model; the partner search uses it (candidates.bf16_torch)
    import torch  # noqa: E402,F401
except ImportError:  # pragma: no cover
    pass

from bench.corpus import generate_corpus  # noqa: E402
from crosstier.core.config import Settings  # noqa: E402
from crosstier.transforms import live_state  # noqa: E402
from crosstier.transforms.embed.text import context_vectors, context_vectors_around  # noqa: E402
from crosstier.transforms.link import candidates, links, live, live_cap, namespace_terms  # noqa: E402
from crosstier.transforms.link.terms import with_terms  # noqa: E402

# (module, function, part): each is wrapped to add its seconds to the part; absent ones are skipped
PARTS = (
    (live, "refreshed_features", "features"),
    (live, "_common_terms", "common_terms"),
    (live, "candidate_pairs", "candidates"),
    (live, "partner_pairs", "candidates"),
    (links, "classified_pairs", "scoring"),
    (live, "capped", "cap"),
    (live, "recapped", "cap"),
    (live, "changed_ends", "changed_ends"),
    (live, "published_rows", "publish_rows"),
)
SECONDS: dict[str, float] = defaultdict(float)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def timed(part: str, function):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            SECONDS[part] += time.perf_counter() - start

    return wrapper


@contextmanager
def part(name: str):
    start = time.perf_counter()
    yield
    SECONDS[name] += time.perf_counter() - start


def corpus(n: int, add: int, same_text_same_vector: bool = False, copy_frequent: bool = False) -> tuple[pl.DataFrame, np.ndarray]:
    """n + add memories with terms and `_batch`, and their vectors, in corpus order; with
    same_text_same_vector, every memory of one content has that content's first vector, as a
    model gives (the corpus draws a vector per memory, so its many "ok" turns differ); with
    copy_frequent, every appended memory says the base's most frequent line again (an "ok")."""
    memories, vectors = generate_corpus(n + add, seed=0)
    if copy_frequent:
        frequent = memories.head(n).get_column("content").value_counts(sort=True).row(0)[0]
        memories = memories.with_columns(content=pl.when(pl.int_range(pl.len()) >= n).then(pl.lit(frequent)).otherwise(pl.col("content")))
    if same_text_same_vector:
        first = memories.with_row_index("_row").group_by("content", maintain_order=True).agg(pl.col("_row").first().alias("_first"))
        rows = memories.select("content").join(first, on="content", how="left", maintain_order="left").get_column("_first").to_numpy()
        vectors = vectors[rows]
    return with_terms(memories).with_columns(_batch=pl.lit(0, dtype=pl.Int64)), vectors


def prepared(memories: pl.DataFrame, contents: np.ndarray) -> tuple[pl.DataFrame, np.ndarray, pl.DataFrame, pl.DataFrame, np.ndarray]:
    """Sorted memories, their own vectors, texts, fingerprints and vectors with session context."""
    order = memories.with_row_index("_corpus").sort("id")
    rows = order.get_column("_corpus").to_numpy()
    memories, contents = order.drop("_corpus"), contents[rows]
    texts = live_state.hashed_texts(memories)
    fingerprints = live.incremental.memory_fingerprints(memories, texts)
    return memories, contents, texts, fingerprints, links.unit_rows(context_vectors(memories, contents))


def base_state(every: pl.DataFrame, vectors: np.ndarray, n: int, settings: Settings, cache: Path, tag: str = "") -> live_state.WatchState:
    """The watcher's state over the first n memories (links from cache when built before)."""
    memories, contents, texts, fingerprints, context = prepared(every.head(n), vectors[:n])
    scored_path = cache / f"scored-{n}-of-{every.height}{tag}.parquet"
    if scored_path.exists():
        scored = pl.read_parquet(scored_path)
    else:
        start = time.perf_counter()
        scored = links.scored_links(memories, context, settings.scoring).cast(live.RELATIONSHIP_SCHEMA)
        print(f"scored {n} memories in {time.perf_counter() - start:.1f}s (cached in {scored_path})", flush=True)
        cache.mkdir(parents=True, exist_ok=True)
        scored.write_parquet(scored_path)
    # as the watcher holds it after its first micro-batch (copy keys and link ends made at load, kept from then on)
    capped = live.capped(scored, memories, settings.scoring)
    counts = namespace_terms.TermCounts.of(memories)
    common = counts.common()
    features = namespace_terms.with_namespace_weights(live.link_features_of(memories), common)
    index = live.LinkIndex(memories, context, texts, fingerprints, scored, capped, features, copy_keys=live_cap.copy_keys(memories),
                           ends=live.IndexEnds.of(scored, capped), common_terms=common, term_counts=counts)
    published = live_state.published_memories(memories)
    return live_state.WatchState({}, index, pl.DataFrame(schema=live.RELATIONSHIP_SCHEMA), live.memory_row_hashes(published), 0, "bench", contents)


def one_step(state: live_state.WatchState, memories: pl.DataFrame, contents: np.ndarray, settings: Settings, manual: Path) -> dict:
    """The micro-batch after the stores were read and the new texts embedded."""
    index = state.index
    with part("texts_fingerprints"):
        rows = live_state.batch_rows(index, memories, 1)
    with part("context"):
        vectors = context_vectors_around(memories, contents, index.vectors, rows.touched, finish=links.unit_rows)
    with part("stepped"):
        new_state, delta, stats = live_state.stepped(replace(state, batch=1), memories, rows.texts, rows.fingerprints, vectors, manual, settings, rows.redone)
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="memories in the loaded index")
    parser.add_argument("--add", type=int, default=1, help="memories appended per micro-batch")
    parser.add_argument("--repeat", type=int, default=5, help="micro-batches timed (each from the same state)")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "ctc-live-step")
    parser.add_argument("--same-text-same-vector", action="store_true",
                        help="one vector per distinct content, as a model (and the embedding cache) gives")
    parser.add_argument("--copy-frequent", action="store_true",
                        help="each appended memory repeats the base's most frequent line (a copy joining a large copy group)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the timed steps here (pstats file)")
    args = parser.parse_args()

    settings = Settings(output_dir=args.cache, stores=())
    start = time.perf_counter()
    # one corpus for base and appends: the first n of a larger corpus are not those of a smaller one
    every, vectors = corpus(args.n, args.add * args.repeat, args.same_text_same_vector, args.copy_frequent)
    state = base_state(every, vectors, args.n, settings, args.cache, "-shared" if args.same_text_same_vector else "")
    print(f"state over {args.n} memories ready in {time.perf_counter() - start:.1f}s", flush=True)
    for module, name, label in PARTS:
        if hasattr(module, name):
            setattr(module, name, timed(label, getattr(module, name)))
    manual = args.cache / "no-manual-log.jsonl"
    totals, rows = [], []
    profiler = cProfile.Profile() if args.profile else None
    for i in range(args.repeat):
        # the first n and the i-th batch of appended ones (a fresh batch each time, from the same state)
        picked = np.r_[np.arange(args.n), args.n + np.arange(i * args.add, (i + 1) * args.add)]
        batch = every[picked].with_columns(_batch=pl.when(pl.int_range(pl.len()) >= args.n).then(1).otherwise(0).cast(pl.Int64))
        memories, contents, *_ = prepared(batch, vectors[picked])
        SECONDS.clear()
        begin = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        stats = one_step(state, memories, contents, settings, manual)
        if profiler is not None:
            profiler.disable()
        totals.append(time.perf_counter() - begin)
        row = dict(SECONDS)
        rows.append(row)
        print(f"step {i}: {totals[-1]:.3f}s " + " ".join(f"{k}={v:.3f}" for k, v in row.items())
              + f" links={stats['links']} pairs_scored={stats['pairs_scored']}", flush=True)
    names = sorted({k for row in rows for k in row})
    median = {k: percentile([row.get(k, 0.0) for row in rows], 50) for k in names}
    if profiler is not None:
        profiler.dump_stats(args.profile)
        print(f"profile of the timed steps: {args.profile} (python -m pstats {args.profile})")
    load = "/".join(open("/proc/loadavg").read().split()[:3])
    print(f"reproduce: .venv/bin/python bench/live_step.py --n {args.n} --add {args.add} --repeat {args.repeat}" + (" --same-text-same-vector" if args.same_text_same_vector else "")
          + (" --copy-frequent" if args.copy_frequent else ""))
    print(
        f"RESULT n={args.n} add={args.add} repeat={args.repeat} step_p50_s={percentile(totals, 50):.3f} step_max_s={max(totals):.3f} "
        + " ".join(f"{k}_p50_s={v:.3f}" for k, v in median.items()) + f" loadavg={load}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
