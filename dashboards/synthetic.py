"""A deterministic synthetic snapshot of any size: the tables `publish_snapshot` takes, for the
dashboard's tests and its benchmark (no embedding, no scoring: plausible shapes only)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl

from crosstier.transforms.schema import MEMORY_SCHEMA, REJECT_SCHEMA, RELATIONSHIP_SCHEMA, RELATIONSHIP_TYPES, TIERS

_WORDS = (
    "deploy cache invoice typescript migration retry schema customer latency token budget "
    "kubernetes release rollback dashboard index vector prompt agent session review"
).split()
_START = datetime(2025, 1, 1, tzinfo=timezone.utc)


def synthetic_memories(n: int, seed: int = 7) -> pl.DataFrame:
    """`n` memories spread over the three tiers, with short word-salad content."""
    rng = np.random.default_rng(seed)
    tiers = rng.choice(np.array(TIERS), size=n, p=[0.6, 0.3, 0.1])
    words = np.array(_WORDS)[rng.integers(0, len(_WORDS), size=(n, 8))]
    contents = [f"memory {i}: " + " ".join(row) for i, row in enumerate(words.tolist())]
    minutes = rng.integers(0, 60 * 24 * 90, size=n)
    frame = pl.DataFrame(
        {
            "id": [f"m{i:06d}" for i in range(n)],
            "tier": tiers.tolist(),
            "content": contents,
            "timestamp": [_START + timedelta(minutes=int(m)) for m in minutes],
            "session_id": [f"s{i // 20:05d}" for i in range(n)],
            "namespace": "default",
            "readers": [[] for _ in range(n)],
            "entities": [[] for _ in range(n)],
            "refs": [[] for _ in range(n)],
            "metadata": "{}",
            "store": [f"{t}-store" for t in tiers.tolist()],
            "location": [f"synthetic:{i}" for i in range(n)],
            "content_hash": [f"h{i:06d}" for i in range(n)],
            "embedding": [None] * n,
        },
        schema=MEMORY_SCHEMA,
    )
    return frame.with_columns(terms=pl.col("content").str.split(" ").list.slice(2, 3))


def synthetic_relationships(memories: pl.DataFrame, links_per_memory: float = 2.0, orphan_share: float = 0.1, seed: int = 7, run_id: str = "synthetic") -> pl.DataFrame:
    """About `links_per_memory` links per memory among all but `orphan_share` of them; no self
    links, no duplicate (source, target, type)."""
    rng = np.random.default_rng(seed + 1)
    ids = memories["id"].to_numpy()
    tiers = memories["tier"].to_numpy()
    linked = np.flatnonzero(rng.random(len(ids)) >= orphan_share)
    if len(linked) < 2:
        return pl.DataFrame(schema=RELATIONSHIP_SCHEMA)
    m = int(len(linked) * links_per_memory / 2)
    src = rng.choice(linked, size=m)
    dst = rng.choice(linked, size=m)
    types = rng.choice(np.array(RELATIONSHIP_TYPES), size=m, p=[0.1, 0.05, 0.05, 0.3, 0.1, 0.1, 0.2, 0.1])
    scores = np.round(0.6 + 0.4 * rng.beta(1.5, 3.0, size=m), 4)
    keep = src != dst
    src, dst, types, scores = src[keep], dst[keep], types[keep], scores[keep]
    # contradicts is stored once, ends in a deterministic order.
    swap = (types == "contradicts") & (ids[src] > ids[dst])
    src, dst = np.where(swap, dst, src), np.where(swap, src, dst)
    n = len(src)
    frame = pl.DataFrame(
        {
            "source_id": ids[src],
            "source_tier": tiers[src],
            "target_id": ids[dst],
            "target_tier": tiers[dst],
            "relationship_type": types,
            "score": scores,
            "semantic": np.round(rng.random(n), 4),
            "co_occurrence": np.round(rng.random(n), 4),
            "temporal": np.round(rng.random(n), 4),
            "cross_reference": np.zeros(n),
            "cosine": np.round(rng.random(n), 4),
            "reason": np.where(types == "contradicts", "Conflicting statements", "Content similarity"),
            "origin": np.where(rng.random(n) < 0.02, "manual", "discovered"),
            "namespace": "default",
            "run_id": run_id,
            "metadata": "{}",
        },
        schema=RELATIONSHIP_SCHEMA,
    )
    return frame.unique(subset=["source_id", "target_id", "relationship_type"], keep="first", maintain_order=True)


def synthetic_rejects(n: int, run_id: str = "synthetic") -> pl.DataFrame:
    """`n` rejected records from two stores."""
    frame = pl.DataFrame(
        {
            "store": ["episodic-store" if i % 3 else "skills" for i in range(n)],
            "location": [f"line {i + 1}" for i in range(n)],
            "raw": [json.dumps({"line": i}) for i in range(n)],
            "reason": ["missing field: id" if i % 2 else "unknown tier: scratch" for i in range(n)],
        },
        schema=REJECT_SCHEMA,
    )
    return frame.with_columns(run_id=pl.lit(run_id))


def synthetic_tables(n_memories: int, links_per_memory: float = 2.0, n_rejects: int = 5, seed: int = 7, run_id: str = "synthetic") -> dict[str, pl.DataFrame]:
    """Every table of a snapshot for `n_memories` synthetic memories."""
    memories = synthetic_memories(n_memories, seed)
    relationships = synthetic_relationships(memories, links_per_memory, seed=seed, run_id=run_id)
    rejects = synthetic_rejects(n_rejects, run_id)
    tier_distribution = memories.group_by("tier").agg(memories=pl.len()).sort("tier")
    tier_links = relationships.group_by("source_tier", "target_tier", "relationship_type").agg(links=pl.len()).sort(pl.all())
    started = datetime(2025, 4, 1, 12, 0, tzinfo=timezone.utc)
    runs = pl.DataFrame(
        {
            "run_id": [run_id],
            "started_at": [started],
            "finished_at": [started + timedelta(seconds=42.5)],
            "status": ["published"],
            "memories": [memories.height],
            "relationships": [relationships.height],
            "rejects": [rejects.height],
        }
    )
    return {
        "memories": memories,
        "relationships": relationships,
        "tier_distribution": tier_distribution,
        "tier_links": tier_links,
        "rejects": rejects,
        "runs": runs,
    }
