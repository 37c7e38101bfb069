"""The live path's bookkeeping (transforms/link/live.py) against recomputing everything:
evidence kept between micro-batches, and the cap re-run over affected memories only."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from crosstier.core.config import ScoringConfig
from crosstier.transforms.link import links, live
from crosstier.transforms.link.terms import with_terms


def memories(rows: list[tuple[str, str, list[str]]]) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "id": [r[0] for r in rows],
            "tier": ["semantic"] * len(rows),
            "namespace": ["default"] * len(rows),
            "timestamp": [None] * len(rows),
            "session_id": [None] * len(rows),
            "content": [r[1] for r in rows],
            "entities": [[] for _ in rows],
            "refs": [r[2] for r in rows],
        },
        schema_overrides={"timestamp": pl.Datetime("us", "UTC"), "session_id": pl.String, "entities": pl.List(pl.String), "refs": pl.List(pl.String)},
    )
    return with_terms(frame).sort("id")


BASE = [
    ("a1", "deploy notes, see c9 for the fix", []),
    ("a2", "nothing cited here", ["c9"]),
    ("a3", "see a1 for the deploy", []),
    ("a4", "plain memory", []),
]


@pytest.mark.parametrize(
    "after, changed",
    [
        (BASE + [("c9", "the fix itself", [])], {"c9"}),  # a1 names c9, a2 refs it: both gain a ref
        ([r for r in BASE if r[0] != "a1"], set()),  # a3 named a1, which went
        ([("a1", "deploy notes, edited", [])] + BASE[1:], {"a1"}),
    ],
)
def test_kept_evidence_equals_evidence_recomputed_from_scratch(after, changed):
    previous = live.link_features_of(memories(BASE))
    current = memories(after)
    assert live.refreshed_features(previous, current, changed).equals(live.link_features_of(current))


def test_recapping_affected_memories_equals_capping_everything():
    rng = np.random.default_rng(3)
    ids = [f"m{i}" for i in range(8)]
    pairs = [(a, b) for i, a in enumerate(ids) for b in ids[i + 1:] if rng.random() < 0.7]
    scored = pl.DataFrame(
        {
            "source_id": [a for a, _ in pairs], "source_tier": "episodic", "target_id": [b for _, b in pairs], "target_tier": "episodic",
            "relationship_type": "references", "score": rng.random(len(pairs)).round(3), "semantic": 0.5, "co_occurrence": 0.5,
            "temporal": None, "cross_reference": 0.0, "reason": "x", "origin": "discovered", "namespace": "default", "run_id": "r", "metadata": None,
        }
    ).cast(links.empty_scored_links().schema)
    capped = links.capped_links(scored, 2)
    # m3's links change: one gets stronger than everything
    changed = scored.with_columns(pl.when((pl.col("source_id") == "m3") | (pl.col("target_id") == "m3")).then(0.999).otherwise(pl.col("score")).alias("score"))
    affected = {"m3"} | set(live.touching(scored, {"m3"}).select("source_id", "target_id").to_series(0).to_list()) | set(live.touching(scored, {"m3"}).get_column("target_id").to_list())
    expected = links.capped_links(changed, 2).sort("source_id", "target_id", "relationship_type")
    assert live.recapped(capped, changed, affected, 2).equals(expected)
    assert not capped.sort("source_id", "target_id").equals(expected.sort("source_id", "target_id"))  # the change mattered
