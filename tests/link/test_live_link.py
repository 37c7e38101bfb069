"""The live path's bookkeeping (transforms/link/live.py) against recomputing everything:
evidence kept between micro-batches, and the cap re-run over affected memories only."""

from __future__ import annotations

import polars as pl
import pytest

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


def test_changed_ends_names_both_ends_of_every_row_that_came_went_or_changed():
    base = links.empty_scored_links().schema
    row = {"source_tier": "episodic", "target_tier": "episodic", "relationship_type": "references", "semantic": 0.5, "co_occurrence": 0.5,
           "temporal": None, "cross_reference": 0.0, "reason": "x", "origin": "discovered", "namespace": "default", "metadata": None}
    before = pl.DataFrame([{**row, "source_id": "a", "target_id": "b", "score": 0.7, "run_id": "r1"},
                           {**row, "source_id": "c", "target_id": "d", "score": 0.7, "run_id": "r1"},
                           {**row, "source_id": "e", "target_id": "f", "score": 0.7, "run_id": "r1"}], schema=base)
    after = pl.DataFrame([{**row, "source_id": "a", "target_id": "b", "score": 0.7, "run_id": "r2"},  # same but run_id
                          {**row, "source_id": "c", "target_id": "d", "score": 0.8, "run_id": "r1"},  # score changed
                          {**row, "source_id": "g", "target_id": "h", "score": 0.7, "run_id": "r1"}], schema=base)  # e-f went, g-h came
    assert live.changed_ends(before, after) == {"c", "d", "e", "f", "g", "h"}
