"""Link discovery speed and memory: terms, candidates, scoring + classification, cap, on a generated corpus.

    .venv/bin/python bench/score.py --memories 10000 100000 [--check-brute-force-at 10000]

Vectors are precomputed (synthetic, bench/corpus.py) and not timed. Per N, in a fresh
process: seconds per stage, total_s (terms + features + candidates + score+classify + cap),
pairs scored against N^2/2, links, and peak RSS of that process up to the end of the
pipeline (corpus and vectors included; before any brute force).

The comparison, at the --check-brute-force-at size, is what a user would otherwise run to
get the same links: score every pair with the same scoring code (all_pairs, then
classified_pairs in chunks), timed in the same process on the same features and vectors.
all_pairs_s is that time, pruned_s the pipeline's candidates + score+classify, and
all_pairs_over_pruned their ratio; found_share and identical say the links agree.
Last line: RESULT name=value ...
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import generate_corpus  # noqa: E402
from crosstier.core.config import ScoringConfig  # noqa: E402
from crosstier.transforms.link.candidates import all_pairs, candidate_pairs  # noqa: E402
from crosstier.transforms.link.links import capped_links, classified_pairs, link_memories, unit_rows  # noqa: E402
from crosstier.transforms.link.terms import with_terms  # noqa: E402


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(n: int, scoring: ScoringConfig, brute: bool) -> dict[str, float]:
    memories, embeddings = generate_corpus(n, seed=0)
    out: dict[str, float] = {}
    t = time.perf_counter()
    memories = with_terms(memories)
    out["terms_s"] = time.perf_counter() - t
    t = time.perf_counter()
    frame = link_memories(memories)
    vectors = unit_rows(embeddings)[frame["idx_in"].to_numpy()]
    out["features_s"] = time.perf_counter() - t
    t = time.perf_counter()
    pairs = candidate_pairs(frame, vectors, scoring)
    out["candidates_s"] = time.perf_counter() - t
    t = time.perf_counter()
    links = classified_pairs(frame, vectors, pairs, scoring)
    out["score_classify_s"] = time.perf_counter() - t
    t = time.perf_counter()
    capped = capped_links(links, scoring.max_links_per_memory)
    out["cap_s"] = time.perf_counter() - t
    out["total_s"] = out["terms_s"] + out["features_s"] + out["candidates_s"] + out["score_classify_s"] + out["cap_s"]
    out["pruned_s"] = out["candidates_s"] + out["score_classify_s"]
    out["pairs_scored"] = pairs.height
    out["pair_share"] = pairs.height / (n * (n - 1) / 2)
    out["links"] = links.height
    out["links_capped"] = capped.height
    out["rss_mib"] = rss_mib()
    if brute:
        t = time.perf_counter()
        everything = all_pairs(frame)
        chunks = []
        step = 2_000_000
        for start in range(0, everything.height, step):
            chunks.append(classified_pairs(frame, vectors, everything.slice(start, step), scoring))
        oracle = pl.concat(chunks).sort("source_id", "target_id")
        out["all_pairs_s"] = time.perf_counter() - t
        out["all_pairs_over_pruned"] = out["all_pairs_s"] / out["pruned_s"]
        key = ["source_id", "target_id", "relationship_type"]
        found = oracle.join(links, on=key, how="semi").height
        out["all_pairs_links"] = oracle.height
        out["found_share"] = found / oracle.height if oracle.height else 1.0
        out["identical"] = float(oracle.equals(links))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--check-brute-force-at", type=int, default=10_000)
    args = parser.parse_args()
    scoring = ScoringConfig()
    result: dict[str, float] = {}
    peak = 0.0
    for n in args.memories:
        with multiprocessing.get_context("spawn").Pool(1) as pool:  # a fresh process: its own peak RSS
            figures = pool.apply(run, (n, scoring, n == args.check_brute_force_at))
        peak = max(peak, figures["rss_mib"])
        print(f"N={n}: " + "  ".join(f"{k}={v:.4g}" for k, v in figures.items()), flush=True)
        tag = f"{n // 1000}k"
        for key, value in figures.items():
            result[f"{key}_{tag}"] = value
    result["peak_rss_mib"] = max(peak, rss_mib())
    print("command: .venv/bin/python bench/score.py " + " ".join(sys.argv[1:]))
    print("RESULT " + " ".join(f"{k}={v:.6g}" for k, v in result.items()))


if __name__ == "__main__":
    main()
