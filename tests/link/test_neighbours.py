"""Cosine range search: the exact kernel equals brute force over every pair, and the approximate
index finds nearly all of them (and nothing that does not reach the floor)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import crosstier.transforms.link.neighbours as neighbours
from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.neighbours import approximate_pairs, exact_pairs, inverted_lists, similar_pairs


def clustered(n: int, dim: int = 32, clusters: int = 12, seed: int = 0) -> np.ndarray:
    """Unit vectors around a few centres: members of a centre sit at cosine ~0.6 from each other."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    v = centres[rng.integers(clusters, size=n)] + 0.8 * rng.normal(size=(n, dim)) / np.sqrt(dim)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def brute_force(vectors: np.ndarray, members: np.ndarray, queries: np.ndarray, floor: np.ndarray) -> set[tuple[int, int]]:
    """Every pair, its cosine in float64: the oracle."""
    sims = vectors.astype(np.float64) @ vectors.astype(np.float64).T
    member_set, query_set = set(members.tolist()), set(queries.tolist())
    return {
        (a, b)
        for a in member_set for b in member_set
        if a < b and (a in query_set or b in query_set) and sims[a, b] >= max(floor[a], floor[b])
    }


def as_set(pairs: np.ndarray) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a, b in pairs}


@pytest.mark.parametrize("tiny_tiles", [False, True])
@pytest.mark.parametrize("subset", ["all-queries", "some-queries", "some-members"])
def test_exact_pairs_equal_brute_force(monkeypatch, tiny_tiles, subset):
    if tiny_tiles:  # many row blocks and column tiles, and the diagonal tile of each
        monkeypatch.setattr(neighbours, "_ROWS", 7)
        monkeypatch.setattr(neighbours, "_TILE_CELLS", 7 * 11)
    vectors = clustered(300)
    floor = np.where(np.arange(300) % 3 == 0, 0.75, 0.55)  # two floors: a pair needs the higher of its ends'
    members = np.arange(300) if subset != "some-members" else np.arange(0, 300, 2)
    queries = members if subset == "all-queries" else members[members % 5 == 0]
    found = exact_pairs(vectors, members, queries, floor)
    oracle = brute_force(vectors, members, queries, floor)
    assert len(oracle) > 100
    assert as_set(found) == oracle
    assert len(found) == len(oracle)  # each pair once, a < b
    assert (found[:, 0] < found[:, 1]).all()


def test_approximate_pairs_find_nearly_all_and_only_pairs_at_the_floor():
    vectors = clustered(4000, dim=48, clusters=40, seed=1)
    members = np.arange(4000)
    floor = np.full(4000, 0.6)
    oracle = as_set(exact_pairs(vectors, members, members, floor))
    found = as_set(approximate_pairs(vectors, members, members, floor, probes=8))
    assert len(oracle) > 5000
    assert found <= oracle  # a pair found has its full cosine: never a pair below the floor
    assert len(found) / len(oracle) >= 0.99


def test_approximate_search_with_every_list_probed_is_exact():
    vectors = clustered(2000, dim=24, seed=2)
    members = np.arange(0, 2000, 2)
    queries = members[:100]
    floor = np.where(np.arange(2000) < 1000, 0.7, 0.5)
    probes = inverted_lists(len(members))
    found = approximate_pairs(vectors, members, queries, floor, probes=probes)
    assert as_set(found) == brute_force(vectors, members, queries, floor)


@pytest.mark.parametrize(("ann_min", "expect"), [(10**9, "exact"), (1000, "approximate")])
def test_similar_pairs_switches_at_the_configured_size(monkeypatch, ann_min, expect):
    used = []
    monkeypatch.setattr(neighbours, "exact_pairs", lambda *a: used.append("exact") or np.zeros((0, 2), np.int64))
    monkeypatch.setattr(neighbours, "approximate_pairs", lambda *a: used.append("approximate") or np.zeros((0, 2), np.int64))
    members = np.arange(1000)
    similar_pairs(clustered(1000), members, members, np.full(1000, 0.5), ann_min_memories=ann_min, ann_probes=4)
    assert used == [expect]


def test_scoring_config_reads_the_ann_size_from_the_environment(tmp_path):
    from crosstier.core.config import ConfigError, load_settings

    config = tmp_path / "c.toml"
    config.write_text('[output]\ndir = "w"\n[[stores]]\nname = "s"\nkind = "jsonl"\npath = "m.jsonl"\n')
    assert load_settings(str(config), env={}).scoring.ann_min_memories == ScoringConfig().ann_min_memories
    assert load_settings(str(config), env={"ANN_MIN_MEMORIES": "1234"}).scoring.ann_min_memories == 1234
    with pytest.raises(ConfigError, match="ann_min_memories"):
        load_settings(str(config), env={"ANN_MIN_MEMORIES": "-1"})


@pytest.mark.parametrize("threshold", [0.3, 0.45])
def test_candidates_through_the_approximate_index_equal_brute_force_when_every_list_is_probed(threshold):
    """candidate_pairs' similarity source goes through the index from ann_min_memories on; with
    every list probed (a small namespace has fewer lists than ann_probes) the links are exact."""
    import importlib.util
    from pathlib import Path

    from crosstier.transforms.link.links import brute_force_links, scored_links
    from crosstier.transforms.link.terms import with_terms

    spec = importlib.util.spec_from_file_location("bench_corpus", Path(__file__).parents[2] / "bench" / "corpus.py")
    corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(corpus)
    memories, embeddings = corpus.generate_corpus(300, seed=5)
    memories = with_terms(memories)
    scoring = replace(ScoringConfig(), min_correlation_score=threshold, ann_min_memories=0, ann_probes=64)
    assert inverted_lists(300) <= scoring.ann_probes
    pruned = scored_links(memories, embeddings, scoring)
    assert pruned.height > 0
    assert pruned.equals(brute_force_links(memories, embeddings, scoring))


@pytest.mark.parametrize("small_group", [0, 6, 10**6])  # every group multiplied / mixed / every group gathered
def test_grouped_pairs_equal_brute_force_per_group(monkeypatch, small_group):
    monkeypatch.setattr(neighbours, "_SMALL_GROUP", small_group)
    monkeypatch.setattr(neighbours, "_GATHER", 5)  # several batches of groups and of pairs
    vectors = clustered(120, dim=16, seed=4)
    rng = np.random.default_rng(4)
    groups = [(rng.choice(120, size=rng.integers(0, 12), replace=False), rng.choice(120, size=rng.integers(1, 12), replace=False)) for _ in range(30)]
    groups.append((np.arange(40), np.arange(40)))  # one large symmetric group
    left = np.concatenate([g[0] for g in groups]).astype(np.int64)
    right = np.concatenate([g[1] for g in groups]).astype(np.int64)
    left_offsets = np.concatenate([[0], np.cumsum([len(g[0]) for g in groups])])
    right_offsets = np.concatenate([[0], np.cumsum([len(g[1]) for g in groups])])
    sims = vectors.astype(np.float64) @ vectors.astype(np.float64).T
    oracle = {(min(a, b), max(a, b)) for l, r in groups for a in l for b in r if a != b and sims[a, b] >= 0.5}
    found = neighbours.grouped_pairs_at_floor(left, left_offsets, right, right_offsets, vectors, 0.5)
    assert len(oracle) > 20
    assert as_set(found) == oracle


def test_pair_cosines_in_any_order():
    vectors = clustered(50, dim=8, seed=6)
    a = np.array([9, 3, 9, 0, 49, 3])
    b = np.array([1, 2, 3, 0, 7, 49])
    expected = (vectors[a].astype(np.float64) * vectors[b]).sum(axis=1)
    assert np.allclose(neighbours.pair_cosines(vectors, a, b), expected, atol=1e-6)


def test_links_pair_cosines_are_bit_identical_to_the_plain_float64_sum():
    """The buffered gather changes how rows are fetched, never a bit of a score."""
    import polars as pl

    from crosstier.transforms.link.links import pair_cosines as link_pair_cosines

    vectors = clustered(500, dim=384, seed=7)
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 500, 5000), rng.integers(0, 500, 5000)
    expected = (vectors[a].astype(np.float64) * vectors[b]).sum(axis=1)
    got = link_pair_cosines(vectors, pl.DataFrame({"a_idx": a, "b_idx": b}))
    assert np.array_equal(got, expected)
    assert len(link_pair_cosines(vectors, pl.DataFrame({"a_idx": a[:0], "b_idx": b[:0]}))) == 0


def test_gathered_cosines_give_the_exact_cosine_of_the_pairs_selected():
    """The exact cosines computed beside the float32 ones, for the pairs a bound selects, are
    bit for bit exact_pair_cosines' (in any chunk and order); the others are NaN."""
    vectors = clustered(500, dim=384, seed=8)
    rng = np.random.default_rng(8)
    a, b = rng.integers(0, 500, 7000), rng.integers(0, 500, 7000)  # more than one chunk
    cos32, exact = neighbours.gathered_cosines(vectors, a, b, lambda rows, cosines: cosines > 0.3)
    assert np.array_equal(cos32, neighbours.pair_cosines(vectors, a, b))
    chosen = cos32 > 0.3
    assert 100 < chosen.sum() < len(a)
    assert np.isnan(exact[~chosen]).all()
    assert np.array_equal(exact[chosen], neighbours.exact_pair_cosines(vectors, a[chosen], b[chosen]))
    assert np.array_equal(exact[chosen], (vectors[a[chosen]].astype(np.float64) * vectors[b[chosen]]).sum(axis=1))
    assert neighbours.gathered_cosines(vectors, a, b)[1] is None


def test_unique_rows_sorted_once_each():
    rows = [np.array([[3, 9], [0, 1]]), np.array([[3, 9], [2, 2], [0, 10]])]
    assert neighbours._unique_rows(rows).tolist() == [[0, 1], [0, 10], [2, 2], [3, 9]]
    assert neighbours._unique_rows([]).shape == (0, 2)


def test_the_index_is_reused_across_query_blocks_and_rebuilt_when_a_vector_changes():
    vectors = clustered(2000, seed=4)
    members = np.arange(len(vectors))
    floor = np.full(len(vectors), 0.5)
    first = approximate_pairs(vectors, members, members[:500], floor, probes=8)
    index = neighbours._last_index[0][1]
    second = approximate_pairs(vectors, members, members[500:], floor, probes=8)
    assert neighbours._last_index[0][1] is index  # one index for both blocks of queries
    whole = approximate_pairs(vectors, members, members, floor, probes=8)
    assert {tuple(r) for r in np.concatenate([first, second])} == {tuple(r) for r in whole}
    # an edited vector (same members, same shape) must not be searched in the stale index
    edited = vectors.copy()
    edited[1999] = edited[0]
    found = {tuple(r) for r in approximate_pairs(edited, members, members[:1], floor, probes=8)}
    assert neighbours._last_index[0][1] is not index
    assert (0, 1999) in found
