"""sql/pair_scores.sql on tiny tables: each component's formula with hand-computable values, and the rescaling."""

from __future__ import annotations

import math
from dataclasses import replace

import duckdb
import numpy as np
import polars as pl
import pytest

from crosstier import sql
from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.links import _params, link_memories, scoring_params
from links_helpers import at, memories


def pair_scores(frame: pl.DataFrame, cosine: float, scoring: ScoringConfig = ScoringConfig()) -> dict:
    """The pair_scores row of the first two memories, given their cosine."""
    lm = link_memories(frame)
    pairs = pl.DataFrame({"a_idx": [0], "b_idx": [1], "cosine": [cosine]})
    con = duckdb.connect()
    con.register("pairs", pairs.to_arrow())
    con.register("link_memories", lm.drop("idx_in").to_arrow())
    rows = con.execute(sql.load("pair_scores"), _params("pair_scores", scoring_params(scoring))).fetchall()
    names = [d[0] for d in con.description]
    con.close()
    assert len(rows) == 1
    return dict(zip(names, rows[0]))


def two(a: dict, b: dict) -> pl.DataFrame:
    return memories({"id": "a", "tier": "semantic", **a}, {"id": "b", "tier": "semantic", **b})


@pytest.mark.parametrize(("cosine", "semantic"), [(1.0, 1.0), (0.5, 0.5), (0.0, 0.0), (-0.7, 0.0)])
def test_semantic_is_cosine_floored_at_zero(cosine, semantic):
    row = pair_scores(two({"content": "alpha"}, {"content": "beta"}), cosine)
    assert row["semantic"] == pytest.approx(semantic)


@pytest.mark.parametrize(
    ("content_a", "content_b", "jaccard"),
    [
        ("pgvector deploy", "pgvector deploy", 1.0),
        ("pgvector deploy", "pgvector rollback", 1 / 3),
        ("pgvector deploy friday", "kafka", 0.0),
        ("ok", "thanks", 0.0),  # no terms at all
    ],
)
def test_co_occurrence_is_the_jaccard_of_terms(content_a, content_b, jaccard):
    row = pair_scores(two({"content": content_a}, {"content": content_b}), 0.0)
    assert row["co_occurrence"] == pytest.approx(jaccard)


@pytest.mark.parametrize(("days", "temporal"), [(0, 1.0), (7, math.exp(-1)), (14, math.exp(-2)), (-3.5, math.exp(-0.5))])
def test_temporal_decays_with_tau(days, temporal):
    row = pair_scores(two({"content": "x", "timestamp": at()}, {"content": "y", "timestamp": at(days=days)}), 0.0)
    assert row["temporal"] == pytest.approx(temporal)


@pytest.mark.parametrize(
    ("refs_a", "content_b", "max_references", "cross_reference"),
    [
        ([], "nothing", 1, 0.0),
        (["b"], "nothing", 1, 1.0),
        (["b"], "as noted in a, yes", 1, 1.0),  # both ways, capped at 1
        (["b"], "see (a).", 2, 1.0),  # both ways, 2 / 2
        (["b"], "nothing", 2, 0.5),
        ([], "see a", 2, 0.5),  # an id mentioned in content counts
    ],
)
def test_cross_reference_counts_refs_and_mentions_both_ways(refs_a, content_b, max_references, cross_reference):
    scoring = replace(ScoringConfig(), max_references=max_references)
    row = pair_scores(two({"content": "first", "refs": refs_a}, {"content": content_b}), 0.0, scoring)
    assert row["cross_reference"] == pytest.approx(cross_reference)


def test_score_is_the_weighted_sum_when_every_component_applies():
    frame = two(
        {"content": "pgvector deploy", "timestamp": at(), "refs": ["b"]},
        {"content": "pgvector rollback", "timestamp": at(days=7)},
    )
    row = pair_scores(frame, 0.5)
    expected = 0.40 * 0.5 + 0.25 * (1 / 3) + 0.15 * math.exp(-1) + 0.20 * 1.0
    assert row["score"] == pytest.approx(expected)


def test_temporal_drops_out_and_the_other_weights_are_rescaled():
    frame = two({"content": "pgvector deploy", "timestamp": at()}, {"content": "pgvector rollback"})
    row = pair_scores(frame, 0.5)
    assert row["temporal"] is None
    assert row["score"] == pytest.approx((0.40 * 0.5 + 0.25 * (1 / 3)) / 0.85)


def test_similar_wording_alone_scores_at_most_055():
    frame = two({"content": "alpha", "timestamp": at()}, {"content": "beta", "timestamp": at()})
    assert pair_scores(frame, 1.0)["score"] == pytest.approx(0.55)


def test_custom_weights_are_bound_not_hard_coded():
    scoring = replace(ScoringConfig(), weights={"semantic": 1.0, "co_occurrence": 0.0, "temporal": 0.0, "cross_reference": 0.0})
    row = pair_scores(two({"content": "alpha"}, {"content": "beta"}), 0.3, scoring)
    assert row["score"] == pytest.approx(0.3)
