"""The live path's partner search (candidates.partner_pairs: one product of the few changed
memories' vectors against all) finds every pair candidate_pairs finds for those memories, and
scoring its pairs gives exactly candidate_pairs' links, on generated memories and random focus."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from crosstier.core.config import ScoringConfig
from crosstier.transforms.link import live
from crosstier.transforms.link.candidates import _BF16_PRODUCT_ERROR, candidate_pairs, focus_products, partner_cosine_floor, partner_pairs
from crosstier.transforms.link.links import classified_pairs, link_memories, unit_rows
from crosstier.transforms.link.terms import with_terms

_spec = importlib.util.spec_from_file_location("bench_corpus", Path(__file__).parents[2] / "bench" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

SETTINGS = [
    pytest.param(ScoringConfig(), id="defaults"),
    pytest.param(replace(ScoringConfig(), min_correlation_score=0.45), id="threshold-0.45"),
    pytest.param(replace(ScoringConfig(), min_correlation_score=0.3), id="threshold-0.3-similarity-only"),
    pytest.param(replace(ScoringConfig(), weights={"semantic": 0.1, "co_occurrence": 0.6, "temporal": 0.1, "cross_reference": 0.2}),
                 id="term-heavy-weights"),
    pytest.param(replace(ScoringConfig(), tau_days=0.5, min_correlation_score=0.5), id="short-tau"),
]


@pytest.fixture(scope="module")
def generated():
    memories, embeddings = corpus.generate_corpus(400, seed=5)
    frame = link_memories(with_terms(memories))
    return frame, unit_rows(embeddings)[frame["idx_in"].to_numpy()]


def pair_set(pairs: pl.DataFrame) -> set[tuple[int, int]]:
    return set(pairs.select("a_idx", "b_idx").iter_rows())


def products(kind: str):
    """The focus products' kernel: numpy float32, or torch bfloat16 (emulated where the CPU
    has no bf16 units: the same numbers, slower)."""
    return None if kind == "float32" else pytest.importorskip("torch")


@pytest.mark.parametrize("kind", ["float32", "bfloat16"])
@pytest.mark.parametrize("scoring", SETTINGS)
@pytest.mark.parametrize("seed", range(4))
def test_partner_pairs_hold_candidate_pairs_and_score_to_the_same_links(generated, scoring, seed, kind):
    frame, vectors = generated
    assert frame.height < scoring.ann_min_memories  # candidate_pairs' own search is exact here
    rng = np.random.default_rng(seed)
    focus = pl.Series(rng.random(frame.height) < [0.002, 0.01, 0.03, 0.1][seed])
    want = candidate_pairs(frame, vectors, scoring, focus)
    got = partner_pairs(frame, vectors, scoring, focus, torch=products(kind))
    assert pair_set(want) <= pair_set(got)
    named = set(frame.filter(focus)["idx"].to_list())
    assert all(a in named or b in named for a, b in pair_set(got))
    links = classified_pairs(frame, vectors, want, scoring)
    assert classified_pairs(frame, vectors, got, scoring).equals(links)
    # and scored over only the rows the pairs name, as the live path scores them: the same rows;
    # co_occurrence is a float sum over shared terms whose order polars may pick by frame size
    # (its last bit can move with the frame's size), so floats compare to 1e-12
    live_links = live.scored_pairs(frame, vectors, got, scoring)
    floats = [c for c, t in links.schema.items() if t == pl.Float64]
    assert live_links.drop(floats).equals(links.drop(floats))
    for column in floats:
        assert np.allclose(live_links[column].to_numpy(), links[column].to_numpy(), rtol=0, atol=1e-12, equal_nan=True)
    if seed == 3:
        assert links.height > 0


def test_no_pair_below_the_partner_floor_passes_the_bound(generated):
    frame, vectors = generated
    scoring = ScoringConfig()
    everything = pl.Series([True] * frame.height)
    floor = partner_cosine_floor(scoring)
    pairs = candidate_pairs(frame, vectors, scoring, everything)
    cosines = np.einsum("ij,ij->i", vectors[pairs["a_idx"].to_numpy()], vectors[pairs["b_idx"].to_numpy()])
    referenced = pairs.join(live_refs(frame), on=["a_idx", "b_idx"], how="semi").height
    assert (cosines < floor - 1e-5).sum() <= referenced  # only explicit references lie below it
    assert -1.0 < floor < 1.0


def live_refs(frame: pl.DataFrame) -> pl.DataFrame:
    from crosstier.transforms.link.candidates import reference_pairs
    return reference_pairs(frame, None)


def test_bf16_products_bound_the_float32_cosines_and_find_every_pair_above_the_floor():
    rng = np.random.default_rng(3)
    # clustered unit vectors, so many products sit near any floor
    centres = rng.standard_normal((20, 384))
    vectors = unit_rows((centres[rng.integers(0, 20, 3000)] + 0.8 * rng.standard_normal((3000, 384))).astype(np.float32))
    rows = np.sort(rng.choice(3000, 300, replace=False))
    exact = vectors @ vectors[rows].T
    torch = pytest.importorskip("torch")
    half = torch.from_numpy(vectors).to(torch.bfloat16)
    error = np.abs((half @ half[torch.from_numpy(rows)].T).float().numpy() - exact).max()
    assert 0 < error <= _BF16_PRODUCT_ERROR
    floor = float(np.quantile(exact, 0.9))
    want = {(int(rows[j]), int(i)) for i, j in zip(*np.nonzero(exact >= floor))}
    a, b, bound = focus_products(vectors, rows, floor, torch)
    found = dict(zip(zip(a.tolist(), b.tolist()), bound.tolist()))
    assert want <= set(found)
    position = {int(r): j for j, r in enumerate(rows)}
    assert all(found[pair] >= exact[pair[1], position[pair[0]]] for pair in want)  # an upper bound
    a32, b32, cos32 = focus_products(vectors, rows, floor, None)
    assert set(zip(a32.tolist(), b32.tolist())) == want


@pytest.mark.parametrize("kind", ["float32", "bfloat16"])
def test_a_pair_just_above_the_partner_floor_is_found(kind):
    # same words, same time: co_occurrence and temporal at their best, so a cosine just above
    # the floor is all the pair needs; a search that started higher would miss it
    from links_helpers import at, memories

    scoring = ScoringConfig()
    floor = partner_cosine_floor(scoring)
    rows = memories(*({"id": i, "tier": "episodic", "content": "rotate the vault keys for billing", "timestamp": at()} for i in ("a", "b")))
    frame = link_memories(rows)
    cosine = floor + 0.002
    vectors = unit_rows(np.array([[1.0, 0.0], [cosine, np.sqrt(1 - cosine**2)]], dtype=np.float32))[frame["idx_in"].to_numpy()]
    focus = pl.Series([False, True])
    want = candidate_pairs(frame, vectors, scoring, focus)
    assert pair_set(want) == {(0, 1)}
    assert pair_set(partner_pairs(frame, vectors, scoring, focus, torch=products(kind))) == {(0, 1)}


@pytest.mark.parametrize("scoring", SETTINGS)
def test_one_query_classification_equals_qualifying_then_classified(generated, scoring):
    """classified_pairs runs the three SQL files as one query over views; the batch run's
    blocks run qualifying_pairs and classified apart (pruned in between): the same links."""
    from crosstier.transforms.link.links import classified, qualifying_pairs

    frame, vectors = generated
    pairs = candidate_pairs(frame, vectors, scoring, None)
    links = classified_pairs(frame, vectors, pairs, scoring)
    assert links.height > 0
    assert links.equals(classified(frame, qualifying_pairs(frame, vectors, pairs, scoring), scoring))


@pytest.mark.parametrize(("partners", "want", "want_half_settled"), [(10, False, False), (20, False, True), (40, True, True)])
def test_products_pay_where_the_pairs_are_many_and_the_hits_not_many_more(partners, want, want_half_settled):
    """300 identical vectors: a row hits every unsettled row over the partner floor. A row has
    2 x `partners` route pairs (counted at both ends): 20 are too few to be worth a product
    (_DENSE_PAIRS_PER_ROW 32); 40 are, but 300 hits are more than _HITS_PER_PAIR (4) x 40; 80
    pay. With half the rows settled, the product is against the other 150 only, so 40 pay too."""
    from crosstier.transforms.link.candidates import products_pay

    vectors = np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (300, 1))
    a = np.repeat(np.arange(300), partners)
    b = (a + 1 + np.tile(np.arange(partners), 300)) % 300
    pairs = pl.DataFrame({"a_idx": np.minimum(a, b), "b_idx": np.maximum(a, b)}).unique()
    assert products_pay(vectors, ScoringConfig(), pairs, np.arange(300), None) is want
    settled = np.arange(300) >= 150
    assert products_pay(vectors, ScoringConfig(), pairs, np.arange(150), settled) is want_half_settled
