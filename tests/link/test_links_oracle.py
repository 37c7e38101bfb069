"""The pruned pipeline equals brute force (every pair scored) on generated memories, and incremental equals full."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import math

import numpy as np
import polars as pl
import pytest

import crosstier.transforms.link.candidates as candidates
from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.calibration import load_calibration, weighted_overlap
from crosstier.transforms.link.candidates import candidate_pairs, route_bounds
from crosstier.transforms.link import copies
from crosstier.transforms.link.links import (
    brute_force_links, capped_links, link_memories, pair_cosines, qualifying_pairs, scored_links, scored_links_with_count,
    shared_term_weights, unit_rows,
)
from crosstier.transforms.link.terms import with_terms

_spec = importlib.util.spec_from_file_location("bench_corpus", Path(__file__).parents[2] / "bench" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


@pytest.fixture(scope="module")
def generated():
    memories, embeddings = corpus.generate_corpus(360, seed=3)
    return with_terms(memories), embeddings


@pytest.fixture(scope="module")
def lopsided():
    """The generated memories, every fourth one made long: its content followed by two other
    memories' of its namespace, as a chat turn that several short facts were drawn from."""
    memories, embeddings = corpus.generate_corpus(360, seed=3)
    contents = memories["content"].to_list()
    namespaces = memories["namespace"].to_list()
    longer = []
    for i, text in enumerate(contents):
        same = [j for j in range(len(contents)) if namespaces[j] == namespaces[i] and j != i]
        longer.append(f"{text} {contents[same[(7 * i) % len(same)]]} {contents[same[(13 * i + 5) % len(same)]]}" if i % 4 == 0 else text)
    return with_terms(memories.with_columns(pl.Series("content", longer))), embeddings


SETTINGS = [
    pytest.param(ScoringConfig(), id="defaults"),
    pytest.param(replace(ScoringConfig(), min_correlation_score=0.45), id="threshold-0.45"),
    pytest.param(replace(ScoringConfig(), min_correlation_score=0.3), id="threshold-0.3-similarity-only"),
    pytest.param(
        replace(ScoringConfig(), weights={"semantic": 0.1, "co_occurrence": 0.6, "temporal": 0.1, "cross_reference": 0.2}),
        id="term-heavy-weights",
    ),
    pytest.param(replace(ScoringConfig(), tau_days=0.5, min_correlation_score=0.5), id="short-tau"),
    pytest.param(replace(ScoringConfig(), calibration=str(Path(__file__).parent / "data" / "linear_calibration.json")),
                 id="other-maps-linear-cosine"),
    pytest.param(replace(ScoringConfig(), min_correlation_score=0.8), id="threshold-0.8-no-search"),
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


@pytest.mark.parametrize("scoring", [SETTINGS[0], SETTINGS[3], SETTINGS[4]])
def test_pruned_links_equal_brute_force_where_short_memories_sit_inside_long_ones(lopsided, scoring):
    memories, embeddings = lopsided
    pruned = scored_links(memories, embeddings, scoring)
    assert pruned.equals(brute_force_links(memories, embeddings, scoring))
    # the case is exercised: some links have more term evidence than their Jaccard alone gives
    terms = dict(zip(memories["id"], memories["terms"].to_list()))
    calibration = load_calibration(scoring.calibration)
    by_jaccard = [min(1.0, weighted_overlap(terms[a], terms[b]) / calibration.co_full)
                  for a, b in zip(pruned["source_id"], pruned["target_id"])]
    assert (pruned["co_occurrence"].to_numpy() > np.array(by_jaccard) + 1e-9).sum() >= 5


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
    calibration = load_calibration(None)
    steps = candidates.near_steps(scoring)
    assert [d for d, _, _ in steps] == list(range(candidates._NEAR_STEPS + 1))
    # near, W = 0.8 (cross_reference silent): w_s*s + w_c*c >= 0.48 - 0.15 = 0.33. The cosine search
    # takes s >= split = (0.33 - 0.25*0.5) / 0.4 = 0.5125, so the join needs c >= (0.33 - 0.205) / 0.25
    # = 0.5; the floor is the cosine of s = (0.33 - 0.25) / 0.4 = 0.2
    assert candidates.search_splits(scoring) == pytest.approx({"timed": 0.5125, "untimed": 0.6625})
    assert steps[0][1:] == steps[1][1:] == pytest.approx((0.5, calibration.cosine_floor(0.2)))
    co_mins = [c for _, c, _ in steps]
    assert co_mins == sorted(co_mins) and co_mins[-1] <= candidates.route_co_mins(scoring)["far"]
    floors = candidates.route_floors(scoring)
    assert floors == pytest.approx({"near": 0.2, "far": (0.48 - 0.15 * math.exp(-2) - 0.25) / 0.4, "untimed": 0.35})


def test_cosine_floor_inverts_the_semantic_map():
    calibration = load_calibration(None)
    for s in (0.1, 0.3, 0.5, 0.8, 0.99, 1.0):
        floor = calibration.cosine_floor(s)
        assert calibration.semantic(floor) == pytest.approx(s, abs=1e-9)
        assert calibration.semantic(floor - 1e-4) < s
    assert calibration.cosine_floor(0.0) == -math.inf


def test_default_settings_score_far_fewer_pairs_than_all(generated):
    memories, embeddings = generated
    frame = link_memories(memories)
    pairs = candidate_pairs(frame, unit_rows(embeddings)[frame["idx_in"].to_numpy()], ScoringConfig())
    assert route_bounds(ScoringConfig())["near"][1] < 1  # calibrated: a pair sharing no term can qualify
    assert pairs.height < memories.height * (memories.height - 1) / 2 / 5


@pytest.mark.parametrize("scoring", SETTINGS[:3])
def test_candidates_carry_the_exact_cosine_scoring_would_compute(generated, scoring):
    """The cosine the search computed for its bound is the one scoring reads: bit for bit what
    links.pair_cosines computes for a pair without one, so reusing it changes no score."""
    memories, embeddings = generated
    frame = link_memories(memories)
    vectors = unit_rows(embeddings)[frame["idx_in"].to_numpy()]
    pairs = candidates.candidate_pairs_with_cosines(frame, vectors, scoring)
    assert pairs.select("a_idx", "b_idx").equals(candidate_pairs(frame, vectors, scoring))
    assert pairs.height > 100 and pairs["cosine"].is_not_null().all()
    assert np.array_equal(pairs["cosine"].to_numpy(), pair_cosines(vectors, pairs.drop("cosine")))


@pytest.mark.parametrize("scoring", SETTINGS[:2] + SETTINGS[3:4])
def test_candidates_carry_their_shared_term_weight_and_nearly_all_qualify(generated, scoring):
    """Each candidate's shared term weight is the one scoring would compute (bit for bit), and
    the bound that used it is the pair's score but for the float32 cosine: of the pairs
    without a reference, only those scoring within a hair of the threshold fail to qualify."""
    memories, embeddings = generated
    frame = link_memories(memories)
    vectors = unit_rows(embeddings)[frame["idx_in"].to_numpy()]
    pairs = candidates.candidate_pairs_with_cosines(frame, vectors, scoring)
    assert np.array_equal(pairs["shared_weight"].to_numpy(), shared_term_weights(frame, pairs.drop("shared_weight")).to_numpy())
    scored = qualifying_pairs(frame, vectors, pairs, scoring)
    missed = pairs.join(scored, on=["a_idx", "b_idx"], how="anti")
    assert pairs.height > 100 and scored.height > 0.9 * pairs.height, (scored.height, pairs.height)
    bound_slack = 1e-4  # the bound reads the float32 cosine plus _COS_SLACK; the score the exact one
    weight = frame["term_weights"].list.sum().fill_null(0.0).to_numpy()
    calibration = load_calibration(scoring.calibration)
    for row in missed.iter_rows(named=True):
        a, b = row["a_idx"], row["b_idx"]
        semantic = float(calibration.semantic(max(0.0, row["cosine"]) + bound_slack))
        co = float(calibration.co_occurrence(row["shared_weight"], weight[a], weight[b]))
        ts = frame["timestamp"].gather([a, b]).to_list()
        w = scoring.weights
        if None in ts:
            best = (w["semantic"] * semantic + w["co_occurrence"] * co) / (w["semantic"] + w["co_occurrence"])
        else:
            temporal = math.exp(-abs((ts[0] - ts[1]).total_seconds()) / (86400.0 * scoring.tau_days))
            best = (w["semantic"] * semantic + w["co_occurrence"] * co + w["temporal"] * temporal) / (w["semantic"] + w["co_occurrence"] + w["temporal"])
        # the pair reached the bound: it failed only on the cosine's last digits, a reference
        # it does not make (cites), or a text the model cannot vouch for (qualifying_pairs)
        assert best >= scoring.min_correlation_score - 1e-6


@pytest.mark.parametrize("seed", [0, 1])
def test_settled_rows_leave_exactly_their_pairs_out(generated, seed):
    """A block's search with the earlier blocks settled returns the pairs with an end in the
    block and none among the settled rows: exactly those of the search without settled rows."""
    memories, embeddings = generated
    frame = link_memories(memories)
    vectors = unit_rows(embeddings)[frame["idx_in"].to_numpy()]
    rng = np.random.default_rng(seed)
    block = rng.random(frame.height) < 0.3
    settled = ~block & (rng.random(frame.height) < 0.5)
    scoring = ScoringConfig()
    full = candidates.candidate_pairs_with_cosines(frame, vectors, scoring, pl.Series(block))
    a, b = full["a_idx"].to_numpy(), full["b_idx"].to_numpy()
    want = full.filter(pl.Series(~(settled[a] | settled[b])))
    got = candidates.candidate_pairs_with_cosines(frame, vectors, scoring, pl.Series(block), settled=settled)
    assert want.height < full.height and want.height > 50
    assert got.equals(want)


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


@pytest.fixture(scope="module")
def copied():
    """The generated memories as a model embeds them: one vector per distinct text, so every
    "ok" of the chats is alike; and twelve facts (some undated) that repeat an episode of
    their namespace word for word, copies across tiers."""
    memories, embeddings = corpus.generate_corpus(360, seed=3)
    contents = memories["content"].to_list()
    episodes = {}
    for i, (tier, namespace) in enumerate(zip(memories["tier"], memories["namespace"])):
        if tier == "episodic" and len(contents[i]) > 20:
            episodes.setdefault(namespace, []).append(i)
    facts = [i for i, tier in enumerate(memories["tier"]) if tier == "semantic"][:12]
    for n, i in enumerate(facts):
        pool = episodes[memories["namespace"][i]]
        contents[i] = contents[pool[(5 * n) % len(pool)]]
    first = {}
    rows = np.array([first.setdefault(text, i) for i, text in enumerate(contents)])
    return with_terms(memories.with_columns(pl.Series("content", contents))), embeddings[rows]


def test_pairs_of_copies_are_not_scored_and_the_published_links_are_the_same(copied):
    memories, embeddings = copied
    scoring = ScoringConfig()
    k = 6  # small enough that the cap binds
    pruned = scored_links(memories, embeddings, scoring)
    every_pair = brute_force_links(memories, embeddings, scoring, copy_pairs=True)
    key = dict(zip(memories["id"], copies.copy_key_column(memories).to_list()))
    inside = [key[a] == key[b] for a, b in zip(every_pair["source_id"], every_pair["target_id"])]
    assert sum(inside) >= 100  # the case is exercised: scoring every pair links copies to each other
    assert not any(key[a] == key[b] for a, b in zip(pruned["source_id"], pruned["target_id"]))
    assert pruned.equals(every_pair.filter(~pl.Series(inside)))
    published = capped_links(every_pair, k, memories)
    assert capped_links(pruned, k, memories).equals(published)
    within, _ = scored_links_with_count(memories, embeddings, scoring, within_cap=k)
    assert capped_links(within, k, memories).equals(published)
    # a fact that repeats an episode is that episode's copy: no link between the two, the carried-forward one instead
    assert published.filter(pl.col("reason").str.starts_with("Carried forward") & (pl.col("source_tier") != pl.col("target_tier"))).height >= 1
