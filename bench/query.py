"""Read-side latency on a synthetic snapshot: find_correlations, build_correlation_graph, retrieve_with_expansion.

    .venv/bin/python bench/query.py --memories 100000 [--out DIR] [--queries 300]

Builds a deterministic snapshot (synthetic frames published with publish_snapshot: the
same tables, views and Parquet layout a flow run writes), then times the read functions
in one warm process. Every figure names what it timed:

- find_*, graph_d2_*: find_correlations / build_correlation_graph(depth 2) on the snapshot as
  publish_snapshot writes it (with its point-lookup indexes);
- retrieve_given_vector_*: retrieve_with_expansion with the query vector passed in (search +
  expansion, no encoding); retrieve_p50_s (query text in, encoding included) only with the model;
- noindex_find_* / noindex_graph_d2_*: the same calls on a copy of the snapshot whose indexes
  were dropped, which is what the indexes buy (--no-index-comparison skips it).

The last line is machine-readable:
RESULT find_p50_s=... find_p99_s=... graph_d2_p50_s=... retrieve_given_vector_p50_s=... ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TIER_SHARE = {"episodic": 0.6, "semantic": 0.3, "procedural": 0.1}
TYPES = ("references", "supports", "derives_from", "temporal_sequence", "generalizes", "causal", "contradicts")
TYPE_SHARE = (0.30, 0.20, 0.15, 0.15, 0.10, 0.07, 0.03)
WORDS = (
    "postgres pgvector billing invoice rounding typescript deploy sentry latency backup vault stripe sendgrid "
    "rotation incident runbook migration schema index query cache worker queue retry timeout release hotfix "
    "dashboard export pdf csv webhook secret kubernetes docker pipeline test fixture flaky midnight decimal"
).split()


def synthetic_tables(n: int, *, dim: int = 384, mean_links: float = 10.0, seed: int = 7, run_id: str = "bench"):
    """Snapshot frames for n memories: ~mean_links links per memory (capped at 50), 90% in
    namespace default, 10% readable only by alice or bob. Returns (tables, parquet_only)."""
    import polars as pl
    import pyarrow as pa

    from crosstier.transforms.schema import MEMORY_SCHEMA, RELATIONSHIP_SCHEMA, REJECT_SCHEMA

    rng = np.random.default_rng(seed)
    ids = np.array([f"m{i:07d}" for i in range(n)])
    tiers = rng.choice(list(TIER_SHARE), size=n, p=list(TIER_SHARE.values()))
    namespaces = np.where(rng.random(n) < 0.9, "default", "ops")
    reader_draw = rng.random(n)
    readers = [None if r >= 0.1 else (["alice"] if r < 0.05 else ["bob"]) for r in reader_draw]
    base = np.datetime64("2026-01-01T00:00:00", "us")
    offsets = rng.integers(0, 300 * 86400, size=n).astype("timedelta64[s]")
    stamps = [(base + o).item() if t == "episodic" else None for o, t in zip(offsets, tiers)]
    word_idx = rng.integers(0, len(WORDS), size=(n, 6))
    contents = [" ".join(WORDS[j] for j in row) + f" note {i}" for i, row in enumerate(word_idx)]
    terms = [sorted({WORDS[j] for j in row}) for row in word_idx]
    memories = pl.DataFrame(
        {
            "id": ids,
            "tier": tiers,
            "content": contents,
            "timestamp": pl.Series(stamps, dtype=pl.Datetime("us")).dt.replace_time_zone("UTC"),
            "session_id": [f"s{i // 20}" if t == "episodic" else None for i, t in enumerate(tiers)],
            "namespace": namespaces,
            "readers": pl.Series(readers, dtype=pl.List(pl.String)),
            "entities": pl.Series([[] for _ in range(n)], dtype=pl.List(pl.String)),
            "refs": pl.Series([[] for _ in range(n)], dtype=pl.List(pl.String)),
            "metadata": pl.Series([None] * n, dtype=pl.String),
            "store": "synthetic",
            "location": [f"synthetic:{i}" for i in range(n)],
            "content_hash": [f"h{i}" for i in range(n)],
        },
        schema_overrides={k: v for k, v in MEMORY_SCHEMA.items() if k != "embedding"},
    ).with_columns(terms=pl.Series(terms, dtype=pl.List(pl.String)))

    # Links: a per-memory degree (geometric, capped at 50), targets near in id order within the
    # namespace (sessions and topics cluster), each pair stored once.
    by_ns = {ns: np.flatnonzero(namespaces == ns) for ns in ("default", "ops")}
    sources, targets = [], []
    for ns, rows in by_ns.items():
        if rows.size < 2:
            continue
        degree = np.minimum(rng.geometric(1 / (mean_links / 2), size=rows.size), 50)
        src = np.repeat(np.arange(rows.size), degree)
        jump = rng.integers(1, min(rows.size, 2000), size=src.size)
        dst = (src + jump) % rows.size
        sources.append(rows[src])
        targets.append(rows[dst])
    src = np.concatenate(sources)
    dst = np.concatenate(targets)
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    pairs = np.unique(np.stack([lo, hi], axis=1), axis=0)
    flip = rng.random(len(pairs)) < 0.5
    a = np.where(flip, pairs[:, 1], pairs[:, 0])
    b = np.where(flip, pairs[:, 0], pairs[:, 1])
    m = len(a)
    kinds = rng.choice(TYPES, size=m, p=TYPE_SHARE)
    # contradicts is stored once, ends in id order
    a, b = np.where(kinds == "contradicts", np.minimum(a, b), a), np.where(kinds == "contradicts", np.maximum(a, b), b)
    semantic = rng.uniform(0.3, 1.0, m)
    co = rng.uniform(0.1, 1.0, m)
    score = np.clip(0.4 * semantic + 0.25 * co + 0.35 * rng.uniform(0.4, 1.0, m), 0.6, 1.0)
    relationships = pl.DataFrame(
        {
            "source_id": ids[a],
            "source_tier": tiers[a],
            "target_id": ids[b],
            "target_tier": tiers[b],
            "relationship_type": kinds,
            "score": score,
            "semantic": semantic,
            "co_occurrence": co,
            "temporal": pl.Series([None] * m, dtype=pl.Float64),
            "cross_reference": np.zeros(m),
            "cosine": semantic,  # a synthetic raw cosine: the read side only carries it through
            "reason": np.where(co > 0.5, "Entity match: " + np.array(WORDS)[rng.integers(0, len(WORDS), m)], "Content similarity"),
            "origin": "discovered",
            "namespace": namespaces[a],
            "run_id": run_id,
            "metadata": pl.Series([None] * m, dtype=pl.String),
        },
        schema=RELATIONSHIP_SCHEMA,
    ).sort("source_id", "target_id", "relationship_type")

    both = pl.concat(
        [
            relationships.select(tier="source_tier", score="score"),
            relationships.select(tier="target_tier", score="score"),
        ]
    )
    tier_distribution = memories.group_by("tier").agg(memories=pl.len()).join(
        both.group_by("tier").agg(links=pl.len(), avg_score=pl.col("score").mean()), on="tier", how="left"
    ).sort("tier")
    tier_links = relationships.group_by("source_tier", "target_tier", "relationship_type").agg(
        links=pl.len(), avg_score=pl.col("score").mean()
    ).sort("source_tier", "target_tier", "relationship_type")
    from crosstier.transforms.publish.run_report import runs_table

    runs = runs_table([{"run_id": run_id, "status": "published", "mode": "full", "started_at": "2026-11-30T00:00:00+00:00",
                        "memories": n, "relationships": m, "embedding_model": "all-MiniLM-L6-v2"}])
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    flat = pa.array(vectors.reshape(-1), type=pa.float32())
    emb = pa.ListArray.from_arrays(pa.array(np.arange(0, n * dim + 1, dim, dtype=np.int32)), flat)
    embeddings = pl.from_arrow(pa.table({"id": ids.tolist(), "embedding": emb}))
    tables = {
        "memories": memories,
        "relationships": relationships,
        "tier_distribution": tier_distribution,
        "tier_links": tier_links,
        "rejects": pl.DataFrame(schema=REJECT_SCHEMA).with_columns(run_id=pl.lit(None, pl.String)),
        "runs": runs,
    }
    return tables, {"embeddings": embeddings}


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered) + 0.5)) - 1))]


def drop_indexes(database: Path) -> list[str]:
    """Drop every index of this bench's own copy of a snapshot file; returns their names."""
    import duckdb

    con = duckdb.connect(str(database))
    try:
        names = [r[0] for r in con.execute("select index_name from duckdb_indexes()").fetchall()]
        for name in names:
            con.execute(f'drop index "{name}"')  # names from DuckDB's own catalog
        con.execute("checkpoint")
    finally:
        con.close()
    return names


def timed(fn, args_list) -> list[float]:
    out = []
    for args in args_list:
        start = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - start)
    return out


def lookup_latencies(out: Path, n: int, queries: int, seed: int) -> dict[str, float]:
    """find_correlations and depth-2 graph latencies alone (the calls indexes can speed up)."""
    from crosstier.retrieval import build_correlation_graph, find_correlations
    from crosstier.retrieval.snapshot import close_all

    close_all()
    rng = np.random.default_rng(seed)
    ids = [f"m{i:07d}" for i in rng.integers(0, n, size=queries)]
    find_correlations(ids[0], out=out)
    t = timed(lambda i: find_correlations(i, out=out), [(i,) for i in ids])
    g = timed(lambda i: build_correlation_graph([i], max_depth=2, out=out), [(i,) for i in ids[: max(20, queries // 5)]])
    return {"find_p50_s": percentile(t, 0.5), "find_p99_s": percentile(t, 0.99), "graph_d2_p50_s": percentile(g, 0.5), "graph_d2_p99_s": percentile(g, 0.99)}


def run_queries(out: Path, n: int, queries: int, use_model: bool, seed: int) -> dict[str, float]:
    """Warm-process latencies of the read functions on the snapshot in `out`."""
    from crosstier.retrieval import build_correlation_graph, find_correlations, retrieve_with_expansion
    from crosstier.retrieval.snapshot import close_all, default_settings
    from crosstier.retrieval.vectors import embed_texts, snapshot_vectors
    from crosstier.retrieval.snapshot import open_snapshot

    close_all()
    rng = np.random.default_rng(seed)
    ids = [f"m{i:07d}" for i in rng.integers(0, n, size=queries)]
    find_correlations(ids[0], out=out)  # open the file once: connection set-up is not a query
    figures: dict[str, float] = {}
    t = timed(lambda i: find_correlations(i, out=out), [(i,) for i in ids])
    figures.update(find_p50_s=percentile(t, 0.5), find_p99_s=percentile(t, 0.99))
    readable = [r["id"] for r in open_snapshot(out).query(
        "select id from memories where readers is null or list_contains(readers, 'alice') order by id")]
    alice_ids = [readable[k] for k in rng.integers(0, len(readable), size=queries)]
    t = timed(lambda i: find_correlations(i, out=out, principal="alice"), [(i,) for i in alice_ids])
    figures.update(find_principal_p50_s=percentile(t, 0.5), find_principal_p99_s=percentile(t, 0.99))
    graph_ids = ids[: max(20, queries // 5)]
    sizes = []
    t = timed(lambda i: sizes.append(len(build_correlation_graph([i], max_depth=2, out=out)["nodes"])), [(i,) for i in graph_ids])
    figures.update(graph_d2_p50_s=percentile(t, 0.5), graph_d2_p99_s=percentile(t, 0.99), graph_d2_nodes_p50=percentile(sizes, 0.5))

    start = time.perf_counter()
    snapshot_vectors(open_snapshot(out))
    figures["vectors_load_s"] = time.perf_counter() - start
    settings = default_settings()
    texts = [" ".join(rng.choice(WORDS, size=5)) for _ in range(max(20, queries // 5))]
    if use_model:
        start = time.perf_counter()
        embed_texts("all-MiniLM-L6-v2", settings, ["warm up"])
        figures["model_load_s"] = time.perf_counter() - start
        # the real path: the query text is embedded inside each call (encode time included)
        t = timed(lambda q: retrieve_with_expansion(q, out=out, settings=settings), [(q,) for q in texts])
        qs = [embed_texts("all-MiniLM-L6-v2", settings, [q])[0] for q in texts]
    else:
        qs = [v / np.linalg.norm(v) for v in rng.standard_normal((len(texts), 384)).astype(np.float32)]
        t = None
    t2 = timed(lambda q: retrieve_with_expansion("q", query_embedding=q, out=out, settings=settings), [(q,) for q in qs])
    if t is not None:  # text in: encoding, search and expansion
        figures.update(retrieve_p50_s=percentile(t, 0.5), retrieve_p99_s=percentile(t, 0.99))
    # vector in: search and expansion only (never reported as retrieve_p50_s)
    figures.update(retrieve_given_vector_p50_s=percentile(t2, 0.5), retrieve_given_vector_p99_s=percentile(t2, 0.99))
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300, help="find_correlations calls timed (graph and retrieve: a fifth)")
    parser.add_argument("--out", help="warehouse folder to build (default: a temporary one)")
    parser.add_argument("--no-model", action="store_true", help="random unit query vectors instead of the real encoder")
    parser.add_argument("--no-index-comparison", action="store_true", help="skip timing a copy of the snapshot without its indexes")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    from crosstier.core.catalog import Catalog
    from crosstier.transforms.publish.snapshot import publish_snapshot

    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ctc-bench-query-"))
    start = time.perf_counter()
    run_id = time.strftime("bench-%Y%m%dT%H%M%S")  # a new snapshot each time: --out may be reused
    tables, parquet_only = synthetic_tables(args.memories, seed=args.seed, run_id=run_id)
    built = time.perf_counter() - start
    start = time.perf_counter()
    published = publish_snapshot(tables, Catalog(root), run_id, parquet_only=parquet_only)
    publish_s = time.perf_counter() - start
    print(f"snapshot: {published.rows['memories']} memories, {published.rows['relationships']} relationships in {root} "
          f"(generated {built:.1f} s, published {publish_s:.1f} s)")

    figures = run_queries(root, args.memories, args.queries, not args.no_model, args.seed)
    report = {"memories": args.memories, "relationships": published.rows["relationships"], **figures}
    print("as published:", json.dumps({k: round(v, 5) for k, v in figures.items()}))
    if not args.no_index_comparison:
        import shutil

        from crosstier.retrieval.snapshot import close_all

        close_all()
        bare = root.with_name(root.name + "-noindex")
        shutil.rmtree(bare, ignore_errors=True)
        shutil.copytree(root, bare, symlinks=True)
        dropped = drop_indexes(Catalog(bare).current_snapshot().database)
        plain = lookup_latencies(bare, args.memories, args.queries, args.seed)
        print(f"without the indexes {dropped}:", json.dumps({k: round(v, 5) for k, v in plain.items()}))
        report.update({f"noindex_{k}": v for k, v in plain.items()})
        shutil.rmtree(bare, ignore_errors=True)
    print("command: .venv/bin/python bench/query.py " + " ".join(sys.argv[1:]))
    print("RESULT " + " ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in report.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
