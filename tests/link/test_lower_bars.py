"""A dense namespace's first pass (links._dense_blocks_scored): scores bounded from below
(candidates.score_floors, cosine_floors), the bars they give (cap_reach.LowerBars) never above
the cap's, and the pairs those bars leave unscored changing no link."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import crosstier.transforms.link.cap_reach as cap_reach_module
import crosstier.transforms.link.candidates as candidates_module
import crosstier.transforms.link.links as links_module
from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.candidates import all_pairs, bf16_torch, cosine_floors, partner_pairs, score_floors
from crosstier.transforms.link.cap_reach import CapReach, LowerBars, cap_bars, cap_reach, within_reach
from crosstier.transforms.link.links import link_memories, scored_links, scored_links_with_count, unit_rows
from crosstier.transforms.link.neighbours import exact_pair_cosines
from crosstier.transforms.link.term_sets import TermSets
from crosstier.transforms.link.terms import with_terms

_spec = importlib.util.spec_from_file_location("bench_corpus", Path(__file__).parents[2] / "bench" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

KEYS = ["source_id", "target_id", "relationship_type"]
PAIR_TYPES = {"a_idx": pl.Int64, "b_idx": pl.Int64, "score": pl.Float64, "cross_reference": pl.Float64}


@pytest.fixture(scope="module")
def cited_corpus():
    """The bench corpus with references between memories near in time: some pairs are
    explicit references and their ends cite (cross_reference then speaks on their other pairs)."""
    memories, embeddings = corpus.generate_corpus(240, seed=5)
    in_time = memories.sort("timestamp", nulls_last=True, maintain_order=True)["id"].to_list()
    cited = {in_time[i]: [in_time[i + 30]] for i in range(40, len(in_time) - 30, 5)}
    memories = memories.with_columns(pl.Series("refs", [cited.get(i, []) for i in memories["id"].to_list()], dtype=pl.List(pl.String)))
    return with_terms(memories), embeddings


def _scoring(k: int = 3) -> ScoringConfig:
    return replace(ScoringConfig(), min_correlation_score=0.45, max_links_per_memory=k)


@pytest.mark.parametrize("seed", range(4))
def test_lower_bars_never_exceed_the_caps_bars_and_are_within_a_bin_of_them(seed):
    """Counting each pair's exact score as its lower bound: every bar is at most cap_bars' (the
    K-th best counted unit) and, with no copy, reference or unvouched end, within one bin of it;
    a copy's bar is NaN and the pairs of a copy, a reference or an unvouched memory are not counted."""
    rng = np.random.default_rng(seed)
    n = 30
    pairs = sorted({tuple(sorted(int(x) for x in rng.choice(n, 2, replace=False))) for _ in range(300)})
    a, b = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    scores = rng.uniform(0.5, 1.0, len(pairs))
    links = pl.DataFrame({"a_idx": a, "b_idx": b, "score": scores, "cross_reference": [None] * len(pairs)}, schema=PAIR_TYPES)
    plain = CapReach(pl.DataFrame({"id": range(n), "unit": range(n), "copied": [False] * n}, schema={"id": pl.Int64, "unit": pl.Int64, "copied": pl.Boolean}),
                     pl.DataFrame(schema={"memory": pl.Int64, "other": pl.Int64}), 4)
    exact = cap_bars(links.filter(pl.col("score") >= 0.6), plain, ("a_idx", "b_idx"), n, distinct_pairs=True)[1]
    lower = LowerBars(plain, n, 0.6, np.zeros(n, dtype=bool))
    lower.add(a, b, scores)
    bars = lower.bars()
    assert (np.isnan(bars) == np.isnan(exact)).all() and (~np.isnan(exact)).sum() > n // 2
    known = ~np.isnan(exact)
    assert (bars[known] <= exact[known]).all() and (bars[known] > exact[known] - 0.4 / 128 - 1e-9).all()
    # a copy (1 and 2, one group), a reference (3-4) and an unvouched memory (5)
    units = pl.DataFrame({"id": range(n), "unit": [1 if i == 2 else i for i in range(n)], "copied": [i in (1, 2) for i in range(n)]},
                         schema={"id": pl.Int64, "unit": pl.Int64, "copied": pl.Boolean})
    refs = pl.DataFrame({"memory": [3, 4], "other": [4, 3]}, schema={"memory": pl.Int64, "other": pl.Int64})
    reach = CapReach(units, refs, 4)
    unvouched = np.arange(n) == 5
    lower = LowerBars(reach, n, 0.6, unvouched)
    lower.add(a, b, scores)
    bars = lower.bars()
    exact = cap_bars(links.filter(pl.col("score") >= 0.6), reach, ("a_idx", "b_idx"), n, distinct_pairs=True)[1]
    assert np.isnan(bars[[1, 2, 5]]).all()
    known = ~np.isnan(bars)
    assert (bars[known] <= exact[known]).all()
    counted = lower.counts.reshape(n, -1).sum(axis=1)
    excluded = np.isin(a, [1, 2, 5]) | np.isin(b, [1, 2, 5]) | ((a == 3) & (b == 4)) | (scores < 0.6)
    assert counted.sum() == 2 * (~excluded).sum()


def test_score_floors_bound_the_sql_score_from_below(cited_corpus):
    """With the exact cosine for the floor, score_floors is the SQL score (within its margin)
    for every pair that is no reference, including pairs of a memory that cites something
    (cross_reference speaks there and lowers the score); with a lower cosine, lower."""
    memories, embeddings = cited_corpus
    frame = link_memories(memories)
    vectors = unit_rows(embeddings)[frame["idx_in"].to_numpy()]
    pairs = all_pairs(frame)
    a, b = pairs["a_idx"].to_numpy(), pairs["b_idx"].to_numpy()
    cosines = exact_pair_cosines(vectors, a, b)
    shared = TermSets.of(frame).shared_weights(a, b)
    scoring = ScoringConfig()
    con = links_module._connection()
    try:
        links_module._scored_pair_view(con, frame.select(links_module._SCORING_COLUMNS), vectors,
                                       pairs.with_columns(pl.Series("cosine", cosines), pl.Series("shared_weight", shared)), scoring)
        scored = pl.from_arrow(con.sql("select a_idx, b_idx, score, cross_reference from pair_scores order by a_idx, b_idx").to_arrow_table())
    finally:
        con.close()
    assert scored.select("a_idx", "b_idx").equals(pairs.select("a_idx", "b_idx"))
    plain = ~(scored["cross_reference"].fill_null(0.0) > 0).to_numpy()
    citing = (scored["cross_reference"] == 0).fill_null(False).to_numpy()
    assert citing.sum() > 100  # pairs where a memory cites something, not each other
    floors = score_floors(frame, scoring, a, b, cosines, shared)
    score = scored["score"].to_numpy()
    assert (floors[plain] <= score[plain]).all()
    assert (score[plain] - floors[plain] < 1e-5).all()
    lowered = score_floors(frame, scoring, a, b, cosines - 0.05, shared)
    assert (lowered[plain] <= floors[plain]).all() and (lowered[plain] < floors[plain]).mean() > 0.5


def test_cosine_floors_bound_the_exact_cosine_of_the_products_pairs(cited_corpus):
    memories, embeddings = cited_corpus
    frame = link_memories(memories)
    vectors = unit_rows(embeddings)[frame["idx_in"].to_numpy()]
    focus = pl.Series(np.arange(frame.height) < 60)
    for torch in {None, bf16_torch(load=True)}:
        loose = partner_pairs(frame, vectors, _scoring(), focus, torch=torch, loose=True)
        assert loose.height > 100 and set(loose.columns) == {"a_idx", "b_idx", "cosine", "shared_weight", "bound"}
        exact = exact_pair_cosines(vectors, loose["a_idx"].to_numpy(), loose["b_idx"].to_numpy())
        floors = cosine_floors(loose["cosine"].to_numpy(), torch)
        assert (floors <= exact).all() and (exact <= loose["cosine"].to_numpy() + 1e-5).all()


@pytest.mark.parametrize("products", ["bf16-where-the-cpu-has-it", "float32"])
def test_the_first_pass_bars_leave_pairs_unscored_and_change_no_link(cited_corpus, monkeypatch, products):
    """A dense namespace (blocks of 40, searched by product after the first): the same links as
    one prune of every pair (references included, each scored once), and fewer pairs scored
    than with the first pass's bars unknown (NaN). In float32 too, as on a CPU without bf16."""
    memories, embeddings = cited_corpus
    scoring = _scoring(3)
    if products == "float32":
        monkeypatch.setattr(links_module, "bf16_torch", lambda load=False: None)
    monkeypatch.setattr(links_module, "_BLOCK_ROWS", 40)
    monkeypatch.setattr(candidates_module, "_DENSE_PAIRS_PER_ROW", 0)
    monkeypatch.setattr(candidates_module, "_HITS_PER_PAIR", 1e9)
    monkeypatch.setattr(links_module, "_EXACT_ROWS", 500)  # the second pass's pairs in several chunks
    searched, torches = links_module.partner_pairs, set()
    monkeypatch.setattr(links_module, "partner_pairs", lambda *a, **kw: torches.add(kw["torch"] is None) or searched(*a, **kw))
    everything = scored_links(memories, embeddings, scoring)
    assert everything.filter(pl.col("cross_reference") > 0).height >= 20
    want = within_reach(everything, cap_reach(link_memories(memories), 3))
    pruned, pairs = scored_links_with_count(memories, embeddings, scoring, within_cap=3)
    assert pruned.sort(KEYS).equals(want.sort(KEYS))
    assert torches == {products == "float32" or bf16_torch(load=True) is None}
    monkeypatch.setattr(cap_reach_module.LowerBars, "bars", lambda self: np.full(self.rows, np.nan))
    blind, blind_pairs = scored_links_with_count(memories, embeddings, scoring, within_cap=3)
    assert blind.sort(KEYS).equals(want.sort(KEYS))
    assert pairs < blind_pairs
