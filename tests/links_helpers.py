"""Tiny memory frames and hand-made vectors for the link tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl

from crosstier.transforms.schema import MEMORY_SCHEMA
from crosstier.transforms.link.terms import with_terms

T0 = datetime(2026, 4, 3, 10, tzinfo=timezone.utc)


def at(hours: float = 0.0, days: float = 0.0) -> datetime:
    return T0 + timedelta(hours=hours, days=days)


def memories(*rows: dict) -> pl.DataFrame:
    """A frame with MEMORY_SCHEMA + terms; rows give id, tier, content and any other fields."""
    full = [{**{k: None for k in MEMORY_SCHEMA}, "namespace": "default", **row} for row in rows]
    return with_terms(pl.DataFrame(full, schema=MEMORY_SCHEMA))


def vectors(*cosines_to_first: float) -> np.ndarray:
    """Unit vectors: the first is e0, vector i has the given cosine to e0 (and is orthogonal to the others' rest)."""
    n = len(cosines_to_first) + 1
    out = np.zeros((n, n + 1), dtype=np.float32)
    out[0, 0] = 1.0
    for i, c in enumerate(cosines_to_first, start=1):
        out[i, 0] = c
        out[i, i] = np.sqrt(max(0.0, 1.0 - c * c))
    return out


def same(n: int) -> np.ndarray:
    """n identical unit vectors (cosine 1 between any two)."""
    return np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (n, 1))
