"""sql/pair_scores.sql on tiny tables: each calibrated component with hand-computable values, silence, the rescaling."""

from __future__ import annotations

import math
from dataclasses import replace

import duckdb
import numpy as np
import polars as pl
import pytest

from crosstier import sql
from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.calibration import load_calibration, term_weight, weighted_overlap
from crosstier.transforms.link.links import _params, link_memories, scoring_params, shared_term_weights
from links_helpers import at, memories


def pair_scores(frame: pl.DataFrame, cosine: float, scoring: ScoringConfig = ScoringConfig()) -> dict:
    """The pair_scores row of the first two memories, given their cosine."""
    lm = link_memories(frame)
    semantic = float(load_calibration(scoring.calibration).semantic(cosine))
    pairs = pl.DataFrame({"a_idx": [0], "b_idx": [1], "cosine": [cosine], "semantic": [semantic]})
    pairs = pairs.with_columns(shared_term_weights(lm, pairs))
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


@pytest.mark.parametrize(("cosine", "semantic"), [(1.0, 1.0), (0.6, 1.0), (0.5, 0.8278), (0.4, 0.6297), (0.0, 0.0), (-0.7, 0.0)])
def test_semantic_is_the_calibrated_map_and_the_raw_cosine_is_kept(cosine, semantic):
    row = pair_scores(two({"content": "alpha"}, {"content": "beta"}), cosine)
    assert row["semantic"] == pytest.approx(semantic)
    assert row["cosine"] == pytest.approx(cosine)


@pytest.mark.parametrize(
    ("content_a", "content_b", "overlap"),
    [
        ("pgvector zorblax", "pgvector zorblax", 1.0),
        ("pgvector zorblax", "pgvector quuxify", 1 / 3),  # terms not among common English ones weigh 1
        ("pgvector zorblax friday", "kafka", 0.0),
        ("ok", "thanks", 0.0),  # no terms at all
    ],
)
def test_co_occurrence_is_the_weighted_jaccard_over_co_full(content_a, content_b, overlap):
    row = pair_scores(two({"content": content_a}, {"content": content_b}), 0.0)
    assert row["co_occurrence"] == pytest.approx(min(1.0, overlap / load_calibration(None).co_full))


@pytest.mark.parametrize(
    ("content_a", "content_b", "co_occurrence"),
    [
        # every term of the short one in the long one, two rare terms shared: full evidence
        # (its Jaccard, 2/6, would give only 0.67)
        ("pgvector zorblax", "pgvector zorblax quuxify frobnitz wibblet wobblex", 1.0),
        # contained, but one rare term is not two rare terms' worth: shared 1 / co_shared_full 2
        ("pgvector", "pgvector zorblax quuxify frobnitz", 0.5),
        # half of the short one contained: Jaccard 2/8 over its ceiling 4/6, 0.375 / co_full
        ("pgvector zorblax quuxify frobnitz", "pgvector zorblax wibblet wobblex gizmoqa gadgetz", 0.75),
    ],
)
def test_a_short_memory_inside_a_long_one_counts_its_containment(content_a, content_b, co_occurrence):
    frame = two({"content": content_a}, {"content": content_b})
    row = pair_scores(frame, 0.0)
    assert row["co_occurrence"] == pytest.approx(co_occurrence)
    # the candidate step's bound (Calibration.co_occurrence_bound) never falls below it
    weights = link_memories(frame)["term_weights"].list.sum().to_list()
    assert float(load_calibration(None).co_occurrence_bound(weights[0], weights[1])) >= co_occurrence


def test_a_shared_rare_term_counts_for_more_than_a_shared_common_one():
    assert term_weight("school") < 0.3 < term_weight("pgvector") == 1.0
    common = pair_scores(two({"content": "school pgvector"}, {"content": "school kafka"}), 0.0)["co_occurrence"]
    rare = pair_scores(two({"content": "pgvector school"}, {"content": "pgvector university"}), 0.0)["co_occurrence"]
    assert rare > common > 0
    assert common == pytest.approx(weighted_overlap(["school", "pgvector"], ["school", "kafka"]) / load_calibration(None).co_full)


@pytest.mark.parametrize(("days", "temporal"), [(0, 1.0), (7, math.exp(-1)), (14, math.exp(-2)), (-3.5, math.exp(-0.5))])
def test_temporal_decays_with_tau(days, temporal):
    row = pair_scores(two({"content": "x", "timestamp": at()}, {"content": "y", "timestamp": at(days=days)}), 0.0)
    assert row["temporal"] == pytest.approx(temporal)


@pytest.mark.parametrize(
    ("refs_a", "content_b", "max_references", "cross_reference"),
    [
        ([], "nothing", 1, None),  # neither cites anything: silent, not 0
        (["zz-elsewhere"], "nothing", 1, 0.0),  # a cites, but not b: evidence against
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
    assert row["cross_reference"] == (None if cross_reference is None else pytest.approx(cross_reference))


def test_score_is_the_weighted_sum_when_every_component_applies():
    frame = two(
        {"content": "pgvector zorblax", "timestamp": at(), "refs": ["b"]},
        {"content": "pgvector quuxify", "timestamp": at(days=7)},
    )
    row = pair_scores(frame, 0.5)
    co = (1 / 3) / load_calibration(None).co_full
    expected = 0.40 * 0.8278 + 0.25 * co + 0.15 * math.exp(-1) + 0.20 * 1.0
    assert row["score"] == pytest.approx(expected)


def test_silent_components_drop_out_and_the_other_weights_are_rescaled():
    frame = two({"content": "pgvector zorblax", "timestamp": at()}, {"content": "pgvector quuxify"})
    row = pair_scores(frame, 0.5)
    assert row["temporal"] is None and row["cross_reference"] is None
    co = (1 / 3) / load_calibration(None).co_full
    assert row["score"] == pytest.approx((0.40 * 0.8278 + 0.25 * co) / 0.65)


def test_a_cited_elsewhere_pair_counts_cross_reference_as_zero():
    frame = two({"content": "pgvector zorblax", "refs": ["zz-elsewhere"]}, {"content": "pgvector quuxify"})
    co = (1 / 3) / load_calibration(None).co_full
    assert pair_scores(frame, 0.5)["score"] == pytest.approx((0.40 * 0.8278 + 0.25 * co) / 0.85)


def test_the_same_thing_in_other_words_can_pass_the_threshold_on_content_alone():
    frame = two({"content": "alpha"}, {"content": "beta"})  # no shared term, no timestamps, no citations
    score = pair_scores(frame, 0.65)["score"]
    assert score == pytest.approx(0.40 / 0.65) and score > 0.6
    timed = two({"content": "alpha", "timestamp": at()}, {"content": "beta", "timestamp": at()})
    assert pair_scores(timed, 1.0)["score"] == pytest.approx(0.55 / 0.8)


def test_custom_weights_are_bound_not_hard_coded():
    scoring = replace(ScoringConfig(), weights={"semantic": 1.0, "co_occurrence": 0.0, "temporal": 0.0, "cross_reference": 0.0})
    row = pair_scores(two({"content": "alpha"}, {"content": "beta"}), 0.4, scoring)
    assert row["score"] == pytest.approx(0.6297)
