"""A tiny published snapshot for tests and examples: a handful of memories and links written
by crosstier.transforms.publish.snapshot.publish_snapshot, so the read side meets exactly what a run writes.

Layout (namespace default unless noted; `sem-secret` is readable by bob only, `ep-alice`
by alice only):

    ep1 -references-> sem1 (0.92)        proc1 -generalizes-> ep1 (0.81)
    ep1 -temporal_sequence-> ep2 (0.78)  sem1 <-contradicts-> sem2 (0.66)
    ep1 -supports-> sem-secret (0.95)    sem-secret -references-> sem3 (0.88)
    ep2 -supports-> sem1 (0.65, its reason names sem-secret)
    ep2 -references-> ep-alice (0.70)    orphan1: no links
    ops: ops1 -references-> ops2 (0.80)
    a corrupt row ep1 -references-> ops1 (0.99) crossing namespaces, which no read may return
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np

MODEL = "all-MiniLM-L6-v2"

MEMORIES = [
    # id, tier, content, timestamp, session, namespace, readers, vector
    ("ep1", "episodic", "Discussed PostgreSQL pgvector integration for semantic search", datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc), "s1", "default", None, (1.0, 0.0, 0.0, 0.0)),
    ("ep2", "episodic", "Benchmarked pgvector index build times on staging", datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc), "s1", "default", None, (0.0, 1.0, 0.0, 0.0)),
    ("ep-alice", "episodic", "Alice's private notes about her review", datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc), "s2", "default", ["alice"], (0.0, 0.0, 1.0, 0.0)),
    ("sem1", "semantic", "Embeddings live in Postgres with pgvector", None, None, "default", None, (0.8, 0.6, 0.0, 0.0)),
    ("sem2", "semantic", "Embeddings do not live in Postgres", None, None, "default", None, (0.0, 0.6, 0.8, 0.0)),
    ("sem3", "semantic", "Vault rotation happens quarterly", None, None, "default", None, (0.0, 0.0, 0.6, 0.8)),
    ("sem-secret", "semantic", "Bob's salary review notes about pgvector budget", None, None, "default", ["bob"], (0.9, 0.0, 0.0, 0.43588989)),
    ("proc1", "procedural", "How to set up PostgreSQL pgvector: install the extension, create the index", None, None, "default", None, (0.6, 0.0, 0.8, 0.0)),
    ("orphan1", "procedural", "How to water the office plants", None, None, "default", None, (0.0, 0.0, 0.0, 1.0)),
    ("ops1", "episodic", "Paged for disk pressure on db-2", datetime(2026, 11, 3, 3, 0, tzinfo=timezone.utc), "o1", "ops", None, (0.0, 0.8, 0.6, 0.0)),
    ("ops2", "semantic", "db-2 disks fill when WAL archiving stalls", None, None, "ops", None, (0.0, 0.6, 0.0, 0.8)),
]

LINKS = [
    # source, target, type, score, reason, origin, namespace
    ("ep1", "sem1", "references", 0.92, "Entity match: pgvector", "discovered", "default"),
    ("proc1", "ep1", "generalizes", 0.81, "Entity match: pgvector", "discovered", "default"),
    ("ep1", "ep2", "temporal_sequence", 0.78, "Sequential session", "discovered", "default"),
    ("sem1", "sem2", "contradicts", 0.66, "Contradiction: negation (not)", "discovered", "default"),
    ("ep1", "sem-secret", "supports", 0.95, "Entity match: pgvector", "discovered", "default"),
    ("sem-secret", "sem3", "references", 0.88, "Explicit reference", "discovered", "default"),
    ("ep2", "sem1", "supports", 0.65, "Manual link (after sem-secret)", "manual", "default"),
    ("ep2", "ep-alice", "references", 0.70, "Explicit reference", "discovered", "default"),
    ("ops1", "ops2", "references", 0.80, "Entity match: db-2", "discovered", "ops"),
    ("ep1", "ops1", "references", 0.99, "Corrupt: crosses namespaces", "discovered", "default"),
]


def tiny_tables(memories=MEMORIES, links=LINKS, run_id: str = "r1", model: str = MODEL):
    """(tables, parquet_only) frames of the tiny snapshot."""
    import polars as pl

    from crosstier.transforms.publish.run_report import runs_table
    from crosstier.transforms.schema import MEMORY_SCHEMA, REJECT_SCHEMA, RELATIONSHIP_SCHEMA
    from crosstier.transforms.link.terms import with_terms

    tier = {m[0]: m[1] for m in memories}
    frame = pl.DataFrame(
        [
            {"id": i, "tier": t, "content": c, "timestamp": ts, "session_id": s, "namespace": ns, "readers": r,
             "entities": [], "refs": [], "metadata": None, "store": "fixture", "location": f"fixture:{n}",
             "content_hash": f"h-{i}", "embedding": None}
            for n, (i, t, c, ts, s, ns, r, _) in enumerate(memories)
        ],
        schema=MEMORY_SCHEMA,
    )
    relationships = pl.DataFrame(
        [
            {"source_id": a, "source_tier": tier[a], "target_id": b, "target_tier": tier[b], "relationship_type": k,
             "score": s, "semantic": s, "co_occurrence": 0.5, "temporal": None, "cross_reference": 0.0, "reason": why,
             "origin": origin, "namespace": ns, "run_id": run_id, "metadata": None}
            for a, b, k, s, why, origin, ns in links
        ],
        schema=RELATIONSHIP_SCHEMA,
    )
    vectors = np.asarray([m[7] for m in memories], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    embeddings = pl.DataFrame({"id": [m[0] for m in memories]}).with_columns(
        embedding=pl.Series(vectors.tolist(), dtype=pl.List(pl.Float32))
    )
    runs = runs_table([{"run_id": run_id, "status": "published", "mode": "full", "started_at": "2026-11-30T00:00:00+00:00",
                        "memories": frame.height, "relationships": relationships.height, "embedding_model": model}])
    tables = {
        "memories": with_terms(frame.drop("embedding")),
        "relationships": relationships,
        "tier_distribution": frame.group_by("tier").agg(memories=pl.len()).sort("tier"),
        "tier_links": relationships.group_by("source_tier", "target_tier", "relationship_type").agg(links=pl.len()).sort(
            "source_tier", "target_tier", "relationship_type"
        ),
        "rejects": pl.DataFrame(schema=REJECT_SCHEMA).with_columns(run_id=pl.lit(None, pl.String)),
        "runs": runs,
    }
    return tables, {"embeddings": embeddings}


def publish_tiny(root: Path, run_id: str = "r1", **kw) -> Path:
    """Publish the tiny snapshot into root; returns root (the warehouse folder)."""
    from crosstier.core.catalog import Catalog
    from crosstier.transforms.publish.snapshot import publish_snapshot

    tables, parquet_only = tiny_tables(run_id=run_id, **kw)
    publish_snapshot(tables, Catalog(Path(root)), run_id, parquet_only=parquet_only, record={"run_id": run_id, "status": "published"})
    return Path(root)
