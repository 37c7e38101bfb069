"""Column contracts of the frames passed between stages (DESIGN.md, Input and Output)."""

from __future__ import annotations

import polars as pl

from crosstier.core.vocabulary import RELATIONSHIP_TYPES, TIERS  # noqa: F401 (re-exported)

# One row per accepted memory. `metadata` is a JSON object serialised as text so the
# frame has one fixed schema whatever the stores carry; `embedding` holds a provided
# vector (null when the store gave none).
MEMORY_SCHEMA = pl.Schema(
    {
        "id": pl.String,
        "tier": pl.String,
        "content": pl.String,
        "timestamp": pl.Datetime("us", "UTC"),
        "session_id": pl.String,
        "namespace": pl.String,
        "readers": pl.List(pl.String),
        "entities": pl.List(pl.String),
        "refs": pl.List(pl.String),
        "metadata": pl.String,
        "store": pl.String,
        "location": pl.String,
        "content_hash": pl.String,
        "embedding": pl.List(pl.Float32),
    }
)

# One row per record that broke a rule: kept, with why.
REJECT_SCHEMA = pl.Schema(
    {
        "store": pl.String,
        "location": pl.String,
        "raw": pl.String,
        "reason": pl.String,
    }
)

# One row per directed (or, for contradicts, canonically ordered) link.
RELATIONSHIP_SCHEMA = pl.Schema(
    {
        "source_id": pl.String,
        "source_tier": pl.String,
        "target_id": pl.String,
        "target_tier": pl.String,
        "relationship_type": pl.String,
        "score": pl.Float64,
        "semantic": pl.Float64,
        "co_occurrence": pl.Float64,
        "temporal": pl.Float64,
        "cross_reference": pl.Float64,
        "cosine": pl.Float64,
        "reason": pl.String,
        "origin": pl.String,
        "namespace": pl.String,
        "run_id": pl.String,
        "metadata": pl.String,
    }
)


def empty_memories() -> pl.DataFrame:
    """An empty memory frame with the canonical schema."""
    return pl.DataFrame(schema=MEMORY_SCHEMA)


def empty_rejects() -> pl.DataFrame:
    """An empty reject frame with the canonical schema."""
    return pl.DataFrame(schema=REJECT_SCHEMA)


def empty_relationships() -> pl.DataFrame:
    """An empty relationship frame with the canonical schema."""
    return pl.DataFrame(schema=RELATIONSHIP_SCHEMA)
