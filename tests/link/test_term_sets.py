"""TermSets: the shared term weight of pairs, against a set intersection in Python; and the
numpy co_occurrence candidate search bounds with, against sql/pair_scores."""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl
import pytest

import crosstier.transforms.link.term_sets as term_sets
from crosstier import sql
from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.calibration import load_calibration
from crosstier.transforms.link.links import _params, link_memories, scoring_params, shared_term_weights
from crosstier.transforms.link.term_sets import TermSets

VOCABULARY = ["deploy", "kafka", "über", "重试", "v2.1", "a", "zz-top", "queue", "Rust", "rust", "", "tab"]


def _frame(seed: int, n: int = 60) -> pl.DataFrame:
    """Rows of messy term lists: empty, null, one term listed twice, terms of any script."""
    rng = np.random.default_rng(seed)
    terms, weights = [], []
    for i in range(n):
        if i % 11 == 0:
            terms.append(None)
            weights.append(None)
            continue
        picked = list(rng.choice(VOCABULARY, size=int(rng.integers(0, 7)), replace=True))
        terms.append(picked)
        weights.append([0.25 + VOCABULARY.index(t) / 7 for t in picked])  # a term's weight is its own
    return pl.DataFrame({"idx": np.arange(n), "terms": terms, "term_weights": weights},
                        schema={"idx": pl.Int64, "terms": pl.List(pl.String), "term_weights": pl.List(pl.Float64)})


def _expected(frame: pl.DataFrame, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    weight = {}
    for row in frame.iter_rows(named=True):
        weight[row["idx"]] = dict(zip(row["terms"] or [], row["term_weights"] or []))
    return np.array([sum(weight[x][t] for t in set(weight[x]) & set(weight[y])) for x, y in zip(a, b)])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("chunk", [3, 65_536])
@pytest.mark.parametrize("lookup", ["table", "search"])
def test_shared_weights_are_the_summed_weights_of_the_common_terms(monkeypatch, seed, chunk, lookup):
    monkeypatch.setattr(term_sets, "_CHUNK", chunk)  # chunk edges inside runs of one left end
    if lookup == "search":  # the sorted search a large vocabulary takes instead of the cell table
        monkeypatch.setattr(term_sets, "_TABLE_MIN_CELLS", 0)
        monkeypatch.setattr(term_sets, "_TABLE_CELLS_PER_KEY", 0)
    frame = _frame(seed)
    rng = np.random.default_rng(seed + 10)
    a = np.sort(rng.integers(frame.height, size=400))  # sorted, as candidate search gives them
    b = rng.integers(frame.height, size=400)
    sets = TermSets.of(frame)
    assert np.allclose(sets.shared_weights(a, b), _expected(frame, a, b), rtol=0, atol=1e-12)
    shuffled = rng.permutation(400)  # in any order
    assert np.allclose(sets.shared_weights(a[shuffled], b[shuffled]), _expected(frame, a[shuffled], b[shuffled]), rtol=0, atol=1e-12)
    assert (sets.shared_weights(a, b) > 0).sum() > 50  # the draw shares terms often enough to test something


@pytest.mark.parametrize("span", [5, 300, 10_000_000])
def test_distinct_ends_are_numpys_unique(span):
    """Sorted runs, a presence table over a small span, np.unique over a wide one: the same
    distinct ends and positions."""
    rng = np.random.default_rng(span)
    for a in (rng.integers(span, size=500) + 7, np.sort(rng.integers(span, size=500)), np.array([3]), np.zeros(0, dtype=np.int64)):
        left, position = term_sets._distinct_ends(a)
        expected, inverse = np.unique(a, return_inverse=True)
        assert left.tolist() == expected.tolist() and position.tolist() == inverse.tolist()


def test_the_same_pairs_get_the_same_bits_from_all_rows_or_their_ends_alone():
    """A pair's shared weight is summed in one order (by term) however many rows were coded:
    scores computed in a block and over the whole namespace must be equal, bit for bit."""
    frame = _frame(5, n=300)
    rng = np.random.default_rng(4)
    a, b = rng.integers(300, size=2000), rng.integers(300, size=2000)
    few = slice(0, 40)
    whole = TermSets.of(frame).shared_weights(a, b)[few]
    alone = TermSets.of_pairs(frame, a[few], b[few]).shared_weights(a[few], b[few])
    assert np.array_equal(whole, alone)
    pairs = pl.DataFrame({"a_idx": a[few], "b_idx": b[few]})
    assert np.array_equal(shared_term_weights(frame, pairs).to_numpy(), whole)
    # a column candidate search computed is read, not recomputed
    given = pairs.with_columns(shared_weight=pl.lit(7.0))
    assert shared_term_weights(frame, given).to_list() == [7.0] * 40


def test_no_pairs_and_no_terms():
    frame = _frame(0, n=5).with_columns(terms=pl.lit(None, dtype=pl.List(pl.String)), term_weights=pl.lit(None, dtype=pl.List(pl.Float64)))
    sets = TermSets.of(frame)
    assert sets.shared_weights(np.array([0, 1]), np.array([2, 3])).tolist() == [0.0, 0.0]
    assert sets.shared_weights(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)).shape == (0,)


def test_numpy_co_occurrence_is_the_sql_one():
    """Candidate search bounds each pair with Calibration.co_occurrence: it must be the
    component sql/pair_scores computes, or the bound could drop a pair that qualifies."""
    from links_helpers import memories

    rng = np.random.default_rng(0)
    words = ["kafka", "retry", "queue", "budget", "deploy", "ledger", "the", "orbit", "sable", "thread"]
    rows = [{"id": f"m{i:02d}", "tier": "semantic", "content": " ".join(rng.choice(words, size=int(rng.integers(1, 9))))} for i in range(40)]
    frame = link_memories(memories(*rows))
    a, b = np.triu_indices(frame.height, k=1)
    scoring = ScoringConfig()
    calibration = load_calibration(scoring.calibration)
    pairs = pl.DataFrame({"a_idx": a, "b_idx": b, "cosine": 0.5, "semantic": float(calibration.semantic(0.5))})
    pairs = pairs.with_columns(shared_term_weights(frame, pairs))
    con = duckdb.connect()
    con.register("pairs", pairs.to_arrow())
    con.register("link_memories", frame.drop("idx_in").to_arrow())
    got = pl.from_arrow(con.sql(sql.load("pair_scores"), params=_params("pair_scores", scoring_params(scoring))).to_arrow_table()).sort("a_idx", "b_idx")
    con.close()
    weight = frame["term_weights"].list.sum().fill_null(0.0).to_numpy()
    shared = pairs["shared_weight"].to_numpy()
    mine = calibration.co_occurrence(shared, weight[a], weight[b])
    assert 0 < (mine == 1.0).sum() < len(mine) and (mine > 0).sum() > len(mine) // 2
    assert np.allclose(mine, got["co_occurrence"].to_numpy(), rtol=0, atol=1e-12)
    # and the bound from the weights alone is never below it
    assert (calibration.co_occurrence_bound(weight[a], weight[b]) >= mine - 1e-12).all()
