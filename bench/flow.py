"""The whole correlate flow on a generated corpus: a full run, then an incremental run after
adding 1% new memories. Prints seconds per stage of both and ends with a RESULT line.

    .venv/bin/python bench/flow.py --n 10000            # real embeddings (the default model)
    .venv/bin/python bench/flow.py --n 10000 --provided # the corpus's synthetic vectors as provided embeddings
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl  # noqa: E402

from bench.corpus import generate_corpus  # noqa: E402


def write_store(memories: pl.DataFrame, path: Path) -> None:
    """The corpus as a Parquet tier store (vectors kept only with --provided)."""
    memories.write_parquet(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--added", type=float, default=0.01, help="share of memories added before the incremental run")
    parser.add_argument("--provided", action="store_true", help="use the corpus's synthetic vectors instead of the model")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from crosstier.flows.correlate import correlate

    total = int(args.n * (1 + args.added))
    memories, vectors = generate_corpus(total, seed=0)
    if args.provided:
        memories = memories.with_columns(embedding=pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32)))
    else:
        memories = memories.with_columns(embedding=pl.lit(None, dtype=pl.List(pl.Float32)))
    # The 1% added are spread over the corpus, as new memories land in many sessions.
    added = memories.sample(n=total - args.n, seed=1)
    base = memories.join(added.select("id"), on="id", how="anti")

    work = args.out or Path(tempfile.mkdtemp(prefix="ctc-bench-flow-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "corpus.parquet"
    config = work / "correlator.toml"
    config.write_text(f'[output]\ndir = "warehouse"\n[[stores]]\nname = "corpus"\nkind = "parquet"\npath = "{store.name}"\n')

    write_store(base, store)
    started = time.perf_counter()
    full = correlate(config_path=str(config), full=True)
    full_wall = time.perf_counter() - started
    write_store(memories, store)
    started = time.perf_counter()
    inc = correlate(config_path=str(config))
    inc_wall = time.perf_counter() - started

    for name, run, wall in (("full", full, full_wall), (f"incremental (+{total - args.n})", inc, inc_wall)):
        print(f"{name}: {run['memories']} memories, {run['embedded']} embedded, {run['cached']} cached, "
              f"{run['changed']} rescored, {run['pairs_scored']} pairs scored, {run['relationships']} links, {wall:.1f} s wall")
        print("  " + ", ".join(f"{k} {v:.2f}s" for k, v in run["stage_seconds"].items()))
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    stage = lambda run, key: run["stage_seconds"].get(key, 0.0)  # noqa: E731
    print(f"reproduce: .venv/bin/python bench/flow.py --n {args.n}{' --provided' if args.provided else ''}")
    print(
        "RESULT "
        f"n={args.n} added={total - args.n} provided={int(args.provided)} "
        f"full_seconds={full_wall:.2f} full_extract_s={stage(full, 'extract'):.2f} full_terms_s={stage(full, 'terms'):.2f} "
        f"full_embed_s={stage(full, 'embed'):.2f} full_score_s={stage(full, 'score'):.2f} full_publish_s={stage(full, 'publish'):.2f} "
        f"full_dashboard_s={stage(full, 'dashboard'):.2f} "
        f"inc_seconds={inc_wall:.2f} inc_extract_s={stage(inc, 'extract'):.2f} inc_terms_s={stage(inc, 'terms'):.2f} "
        f"inc_embed_s={stage(inc, 'embed'):.2f} inc_score_s={stage(inc, 'score'):.2f} inc_publish_s={stage(inc, 'publish'):.2f} "
        f"inc_embedded={inc['embedded']} inc_rescored={inc['changed']} links={inc['relationships']} rss_mib={rss_mib:.0f}"
    )


if __name__ == "__main__":
    main()
