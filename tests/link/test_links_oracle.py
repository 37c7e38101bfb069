"""The pruned pipeline equals brute force (every pair scored) on generated memories, and incremental equals full."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

import crosstier.transforms.link.candidates as candidates
from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.candidates import candidate_pairs, route_bounds
from crosstier.transforms.link.links import brute_force_links, capped_links, link_memories, scored_links, unit_rows
from crosstier.transforms.link.terms import with_terms

_spec = importlib.util.spec_from_file_location("bench_corpus", Path(__file__).parents[2] / "bench" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


@pytest.fixture(scope="module")
def generated():
    memories, embeddings = corpus.generate_corpus(360, seed=3)
    return with_terms(memories), embeddings


SETTINGS = [
    pytest.param(ScoringConfig(), id="defaults"),
    pytest.param(replace(ScoringConfig(), min_correlation_score=0.45), id="threshold-0.45"),
    pytest.param(replace(ScoringConfig(), min_correlation_score=0.3), id="threshold-0.3-similarity-only"),
    pytest.param(
        replace(ScoringConfig(), weights={"semantic": 0.1, "co_occurrence": 0.6, "temporal": 0.1, "cross_reference": 0.2}),
        id="term-heavy-weights",
    ),
    pytest.param(replace(ScoringConfig(), tau_days=0.5, min_correlation_score=0.5), id="short-tau"),
]


@pytest.mark.parametrize("scoring", SETTINGS)
def test_pruned_links_equal_brute_force(generated, scoring):
    memories, embeddings = generated
    pruned = scored_links(memories, embeddings, scoring)
    oracle = brute_force_links(memories, embeddings, scoring)
    assert pruned.height > 0
    assert pruned.equals(oracle)
    k = scoring.max_links_per_memory
    assert capped_links(pruned, k).equals(capped_links(oracle, k))


@pytest.mark.parametrize(
    ("search_min_pairs", "max_term_share"),
    [
        pytest.param(10**12, 1.0, id="every-term-group-joined"),
        pytest.param(0, 1.0, id="every-term-group-searched-by-cosine"),
        pytest.param(10**12, 0.0, id="every-term-common"),
    ],
)
@pytest.mark.parametrize("scoring", [SETTINGS[0], SETTINGS[4]])
def test_joined_and_searched_term_groups_equal_brute_force(generated, monkeypatch, scoring, search_min_pairs, max_term_share):
    memories, embeddings = generated
    monkeypatch.setattr(candidates, "_SEARCH_MIN_PAIRS", search_min_pairs)
    scoring = replace(scoring, max_term_share=max_term_share)
    assert scored_links(memories, embeddings, scoring).equals(brute_force_links(memories, embeddings, scoring))


def test_near_steps_bound_temporal_by_bucket_distance():
    scoring = ScoringConfig()
    steps = candidates.near_steps(scoring)
    assert [d for d, _, _ in steps] == list(range(candidates._NEAR_STEPS + 1))
    assert steps[0][1:] == steps[1][1:] == pytest.approx((0.2, 0.5))
    c_mins = [c for _, c, _ in steps]
    assert c_mins == sorted(c_mins) and c_mins[-1] < route_bounds(scoring)["far"][0]
    floors = candidates.route_floors(scoring)
    assert floors == pytest.approx({"near": 0.5, "far": 0.8242492688, "untimed": 0.65})


def test_default_settings_score_far_fewer_pairs_than_all(generated):
    memories, embeddings = generated
    frame = link_memories(memories)
    pairs = candidate_pairs(frame, unit_rows(embeddings)[frame["idx_in"].to_numpy()], ScoringConfig())
    assert route_bounds(ScoringConfig())["near"][1] > 1  # no pair sharing no term can qualify
    assert pairs.height < memories.height * (memories.height - 1) / 2 / 5


def test_incremental_rescoring_of_changed_memories_equals_a_full_run(generated):
    memories, embeddings = generated
    scoring = ScoringConfig()
    before = scored_links(memories, embeddings, scoring)
    changed = memories["id"].gather(list(range(0, 360, 37))).to_list()
    edited = memories.with_columns(
        pl.when(pl.col("id").is_in(changed)).then(pl.col("content") + " pgvector rollout").otherwise(pl.col("content"))
        .alias("content")
    ).drop("terms")
    edited = with_terms(edited)
    kept = before.filter(~pl.col("source_id").is_in(changed) & ~pl.col("target_id").is_in(changed))
    rescored = scored_links(edited, embeddings, scoring, focus_ids=changed)
    incremental = pl.concat([kept, rescored]).sort("source_id", "target_id")
    assert incremental.equals(scored_links(edited, embeddings, scoring))
