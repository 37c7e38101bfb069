"""Pruning scored links to the cap's reach (transforms/link/cap_reach.py): what the cap keeps is
unchanged, blocks pruned as they come equal one prune of everything, and an incremental run
that scores the refocused memories again stores exactly what a full run stores."""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import crosstier.transforms.link.candidates as candidates_module
import crosstier.transforms.link.links as links_module
from crosstier.core.config import ScoringConfig
from crosstier.transforms.link import namespace_terms
from crosstier.transforms import partitions
from crosstier.transforms.link.cap_reach import CapReach, beyond_reach, cap_bars, cap_reach, refocused, within_reach
from crosstier.transforms.link.links import capped_links, link_memories, scored_links, scored_links_with_count
from crosstier.transforms.link.terms import with_terms

_spec = importlib.util.spec_from_file_location("bench_corpus", Path(__file__).parents[2] / "bench" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)

KEYS = ["source_id", "target_id", "relationship_type"]


def _units(*copied: tuple[str, str], ids: str = "abcdefgh") -> pl.DataFrame:
    groups = dict(copied)
    return pl.DataFrame({
        "id": list(ids),
        "unit": [groups.get(i, i) for i in ids],
        "copied": [i in groups for i in ids],
    })


def _links(*rows: tuple[str, str, float, float | None]) -> pl.DataFrame:
    return pl.DataFrame(
        {"source_id": [r[0] for r in rows], "target_id": [r[1] for r in rows],
         "score": [r[2] for r in rows], "cross_reference": [r[3] for r in rows]},
        schema={"source_id": pl.String, "target_id": pl.String, "score": pl.Float64, "cross_reference": pl.Float64},
    )


NO_REFS = pl.DataFrame(schema={"memory": pl.String, "other": pl.String})
# with one link per memory: a-c is second at a (a-b is stronger) and second at c (c-d is stronger)
LINKS = _links(("a", "b", 0.9, None), ("a", "c", 0.8, None), ("c", "d", 0.95, None), ("b", "e", 0.7, None))


def test_a_link_outranked_at_both_ends_is_beyond_reach_and_only_that_one():
    flags = beyond_reach(LINKS, CapReach(_units(), NO_REFS, 1))
    assert flags.to_list() == [False, True, False, False]  # b-e is second at b but first at e: it stays


def test_a_copy_end_keeps_its_links_and_a_wider_cap_drops_nothing():
    assert not beyond_reach(LINKS, CapReach(_units(("c", "g1"), ("h", "g1")), NO_REFS, 1)).any()
    assert not beyond_reach(LINKS, CapReach(_units(), NO_REFS, 2)).any()


def test_a_unit_explicitly_referenced_does_not_count_against_the_cap():
    refs = pl.DataFrame({"memory": ["c"], "other": ["d"]})
    assert not beyond_reach(LINKS, CapReach(_units(), refs, 1)).any()
    # the same reference as an explicit link among the pruned ones counts too
    explicit = LINKS.with_columns(pl.when(pl.col("target_id") == "d").then(1.0).alias("cross_reference"))
    assert beyond_reach(explicit, CapReach(_units(), NO_REFS, 1)).to_list() == [False, False, False, False]


def test_ties_never_push_a_link_out():
    tied = _links(("a", "b", 0.8, None), ("a", "c", 0.8, None), ("c", "d", 0.8, None))
    assert not beyond_reach(tied, CapReach(_units(), NO_REFS, 1)).any()


def _beyond_by_definition(links: pl.DataFrame, reach: CapReach) -> list[bool]:
    """The module docstring's rule, spelled out link by link: beyond reach when, at both ends
    (neither a copy), K units other than the link's own have a counted best link scoring
    strictly higher; explicit links, and links of a unit that explicitly references the end,
    are not counted and never dropped."""
    unit = dict(zip(reach.units["id"].to_list(), reach.units["unit"].to_list()))
    copied = set(reach.units.filter("copied")["id"].to_list())
    rows = list(zip(links["source_id"].to_list(), links["target_id"].to_list(), links["score"].to_list(),
                    [(x or 0) > 0 for x in links["cross_reference"].to_list()]))
    explicit = {(m, unit.get(o, o)) for m, o in zip(reach.references["memory"].to_list(), reach.references["other"].to_list())}
    explicit |= {(m, unit.get(o, o)) for a, b, _, x in rows if x for m, o in ((a, b), (b, a))}
    best: dict[tuple[str, str], float] = {}
    for a, b, score, x in rows:
        for m, o in ((a, b), (b, a)):
            if not x and (m, unit.get(o, o)) not in explicit:
                best[m, unit.get(o, o)] = max(best.get((m, unit.get(o, o)), -1.0), score)

    def outranked(m: str, o: str, score: float) -> bool:
        own = unit.get(o, o)
        if m in copied or (m, own) in explicit:
            return False
        higher = sum(1 for (mm, u), v in best.items() if mm == m and u != own and v > score)
        return higher >= reach.max_links

    return [not x and outranked(a, b, s) and outranked(b, a, s) for a, b, s, x in rows]


@pytest.mark.parametrize("seed", range(6))
def test_beyond_reach_follows_its_definition_on_random_links(seed):
    rng = np.random.default_rng(seed)
    ids = [f"m{i}" for i in range(14)]
    pairs = {tuple(sorted(rng.choice(ids, 2, replace=False))) for _ in range(60)}
    scores = rng.choice([0.6, 0.65, 0.7, 0.8, 0.9], len(pairs))  # ties on purpose
    links = _links(*((a, b, float(sc), (1.0 if rng.random() < 0.08 else None)) for (a, b), sc in zip(sorted(pairs), scores)))
    groups = {"m1": "g", "m2": "g", "m5": "h", "m6": "h"} if seed % 2 else {}
    units = pl.DataFrame({"id": ids[:12], "unit": [groups.get(i, i) for i in ids[:12]],  # m12, m13 unlisted: units of their own
                          "copied": [i in groups and seed % 3 == 1 for i in ids[:12]]})
    refs = pl.DataFrame({"memory": ["m3", "m7"], "other": ["m4", "m8"]}) if seed % 3 == 2 else NO_REFS
    # the same links between row numbers, as a run's blocks prune them (ids are their own codes there)
    number = {i: int(i[1:]) for i in ids}
    unit_number = {u: 100 + n for n, u in enumerate(sorted(set(groups.values())))} | number
    rows = links.select(pl.col("source_id").replace_strict(number).alias("a_idx"), pl.col("target_id").replace_strict(number).alias("b_idx"),
                        "score", "cross_reference")
    row_units = units.select(pl.col("id").replace_strict(number), pl.col("unit").replace_strict(unit_number), "copied")
    row_refs = refs.select(pl.col("memory").replace_strict(number, return_dtype=pl.Int64), pl.col("other").replace_strict(number, return_dtype=pl.Int64))
    for k in (1, 2, 3):
        reach = CapReach(units, refs, k)
        want = _beyond_by_definition(links, reach)
        assert beyond_reach(links, reach).to_list() == want
        assert beyond_reach(rows, CapReach(row_units, row_refs, k), ("a_idx", "b_idx")).to_list() == want
    assert any(_beyond_by_definition(links, CapReach(units, refs, 1)))


@pytest.mark.parametrize("distinct_pairs", [False, True], ids=["any-links", "distinct-pairs"])
@pytest.mark.parametrize("seed", range(4))
def test_cap_bars_are_each_memorys_kth_best_unit_and_a_pair_under_both_is_beyond_reach(seed, distinct_pairs):
    """cap_bars on links between row numbers: the survivors are within_reach's; each bar is the
    K-th best counted unit's score at that memory (NaN for a copy or with fewer than K); and a
    new pair scoring under the bars at both ends is beyond reach once it is among the links."""
    rng = np.random.default_rng(seed)
    n = 14
    pairs = sorted({tuple(sorted(int(x) for x in rng.choice(n, 2, replace=False))) for _ in range(60)})
    scores = rng.choice([0.6, 0.65, 0.7, 0.8, 0.9], len(pairs))
    links = pl.DataFrame({"a_idx": [a for a, _ in pairs], "b_idx": [b for _, b in pairs], "score": scores,
                          "cross_reference": [1.0 if rng.random() < 0.08 else None for _ in pairs]},
                         schema={"a_idx": pl.Int64, "b_idx": pl.Int64, "score": pl.Float64, "cross_reference": pl.Float64})
    groups = {1: 100, 2: 100} if seed % 2 else {}
    units = pl.DataFrame({"id": list(range(n)), "unit": [groups.get(i, i) for i in range(n)], "copied": [i in groups for i in range(n)]},
                         schema={"id": pl.Int64, "unit": pl.Int64, "copied": pl.Boolean})
    refs = pl.DataFrame({"memory": [3, 4], "other": [4, 3]}, schema={"memory": pl.Int64, "other": pl.Int64})
    ends = ("a_idx", "b_idx")
    for k in (1, 2, 3):
        reach = CapReach(units, refs, k)
        survivors, bars = cap_bars(links, reach, ends, n, distinct_pairs=distinct_pairs)  # the pairs are distinct
        assert survivors.equals(within_reach(links, reach, ends))
        unit = dict(zip(units["id"].to_list(), units["unit"].to_list()))
        explicit = {(3, 4), (4, 3)} | {(m, unit[o]) for a, b, x in zip(links["a_idx"], links["b_idx"], links["cross_reference"])
                                       if x for m, o in ((a, b), (b, a))}
        best: dict[tuple[int, int], float] = {}
        for a, b, sc, x in links.iter_rows():
            for m, o in ((a, b), (b, a)):
                if not x and (m, unit[o]) not in explicit:
                    best[m, unit[o]] = max(best.get((m, unit[o]), -1.0), sc)
        for m in range(n):
            ranked = sorted((v for (mm, _), v in best.items() if mm == m), reverse=True)
            want = ranked[k - 1] if len(ranked) >= k and m not in groups else None
            assert (bars[m] if not np.isnan(bars[m]) else None) == want
        under = [(a, b) for a in range(n) for b in range(a + 1, n) if (a, b) not in pairs and (a, b) not in ((3, 4),)
                 and not np.isnan(bars[a]) and not np.isnan(bars[b])]
        assert under or k == 3
        for a, b in under:
            score = min(bars[a], bars[b]) - 0.01
            grown = pl.concat([links, pl.DataFrame({"a_idx": [a], "b_idx": [b], "score": [score], "cross_reference": [None]}, schema=links.schema)])
            assert beyond_reach(grown, reach, ends)[-1]


@pytest.fixture(scope="module")
def generated():
    memories, embeddings = corpus.generate_corpus(240, seed=5)
    return with_terms(memories), embeddings


def _scoring(k: int) -> ScoringConfig:
    # a lowered threshold: most pairs of a topic qualify, as in a big namespace, so the cap binds
    return replace(ScoringConfig(), min_correlation_score=0.45, max_links_per_memory=k)


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(KEYS)


@pytest.mark.parametrize("by_product", [False, True], ids=["routes", "products-after-block-1"])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_blocks_pruned_as_they_come_equal_one_prune_of_all_links_and_the_cap_is_unchanged(generated, monkeypatch, k, by_product):
    memories, embeddings = generated
    scoring = _scoring(k)
    monkeypatch.setattr(links_module, "_BLOCK_ROWS", 40)  # six blocks
    monkeypatch.setattr(links_module, "_CLASSIFY_ROWS", 150)  # and the survivors classified in slices
    everything = scored_links(memories, embeddings, scoring)
    products = []
    if by_product:  # the first block says products pay: the other five are searched by product
        monkeypatch.setattr(candidates_module, "_DENSE_PAIRS_PER_ROW", 0)
        monkeypatch.setattr(candidates_module, "_HITS_PER_PAIR", 1e9)
        searched = links_module.partner_pairs
        monkeypatch.setattr(links_module, "partner_pairs", lambda *a, **kw: products.append(1) or searched(*a, **kw))
    calls = []
    pruned, pairs = scored_links_with_count(memories, embeddings, scoring, within_cap=k, progress=lambda *a: calls.append(a))
    assert len(products) == (5 if by_product else 0)
    # each pair scored once; the product finds the routes' pairs (the bound keeps the same ones),
    # less those under the cap's bars at both ends (cap_reach.cap_bars) once blocks were pruned
    unpruned = scored_links_with_count(memories, embeddings, scoring)[1]
    assert pairs == unpruned if not by_product else (pairs < unpruned if k == 1 else pairs <= unpruned)
    steps = 7 if by_product else 6  # by product: the five blocks bounded, then their pairs scored (one step)
    assert [c[:2] for c in calls] == [(b, steps) for b in range(1, steps + 1)] and calls[-1][2] == pairs
    assert calls[-1][3] >= pruned.height  # qualifying pairs kept; a few become no link when classified
    assert pruned.join(everything, on=KEYS, how="anti").height == 0
    if k <= 3:  # with about eight links a memory, a cap of 8 binds for few
        assert pruned.height < everything.height * 0.9
    exact = within_reach(everything, cap_reach(link_memories(memories), k))
    assert _sorted(pruned).equals(_sorted(exact))
    assert _sorted(capped_links(pruned, k, memories)).equals(_sorted(capped_links(everything, k, memories)))
    if not by_product:
        # the score task takes the same links a part (150 survivors classified) at a time
        parts, part_pairs = links_module.scored_link_parts(memories, embeddings, scoring, within_cap=k)
        parts = list(parts)
        assert part_pairs == pairs and len(parts) > 1 and all(part.height <= 150 for part in parts)
        assert pl.concat(parts).sort("source_id", "target_id").equals(pruned)


def test_a_namespace_of_many_blocks_decides_on_a_small_first_block_and_keeps_the_same_links(generated, monkeypatch):
    """More than one block: a first block of _FIRST_BLOCK_ROWS rows (searched by the routes, and
    what says products pay), then full blocks by product. The same links as one prune of all."""
    memories, embeddings = generated
    scoring = _scoring(3)
    everything = scored_links(memories, embeddings, scoring)
    monkeypatch.setattr(links_module, "_BLOCK_ROWS", 40)
    monkeypatch.setattr(links_module, "_FIRST_BLOCK_ROWS", 16)  # 16, then 6 blocks of 40 (the last 24)
    monkeypatch.setattr(candidates_module, "_PROBE_ROWS", 16)
    monkeypatch.setattr(candidates_module, "_DENSE_PAIRS_PER_ROW", 0)
    monkeypatch.setattr(candidates_module, "_HITS_PER_PAIR", 1e9)
    routes, products, calls = [], [], []
    searched, routed = links_module.partner_pairs, links_module.candidate_pairs_with_cosines
    monkeypatch.setattr(links_module, "partner_pairs", lambda *a, **kw: products.append(int(a[3].sum())) or searched(*a, **kw))
    monkeypatch.setattr(links_module, "candidate_pairs_with_cosines", lambda *a, **kw: routes.append(int(a[3].sum())) or routed(*a, **kw))
    pruned, _ = scored_links_with_count(memories, embeddings, scoring, within_cap=3, progress=lambda *a: calls.append(a))
    assert memories.height == 240 and routes == [16] and products == [40] * 5 + [24]
    assert [c[:2] for c in calls] == [(b, 8) for b in range(1, 9)]
    assert _sorted(pruned).equals(_sorted(within_reach(everything, cap_reach(link_memories(memories), 3))))
    # a namespace of one block is one block, whatever the first block's size
    monkeypatch.setattr(links_module, "_BLOCK_ROWS", 240)
    routes.clear()
    products.clear()
    alone, _ = scored_links_with_count(memories, embeddings, scoring, within_cap=3)
    assert routes == [240] and products == [] and _sorted(alone).equals(_sorted(pruned))


def test_a_block_searched_in_parts_on_threads_scores_each_pair_once_and_keeps_the_same_links(generated, monkeypatch):
    """A dense block's search split over threads (links.searched_in_parts): each part but the
    last counts the later parts' rows as settled, so a pair inside the block is searched once,
    and the pairs and links are those of one search per block."""
    memories, embeddings = generated
    scoring = _scoring(3)
    monkeypatch.setattr(links_module, "_BLOCK_ROWS", 40)  # six blocks: the first by the routes, five by product
    monkeypatch.setattr(candidates_module, "_DENSE_PAIRS_PER_ROW", 0)
    monkeypatch.setattr(candidates_module, "_HITS_PER_PAIR", 1e9)
    monkeypatch.setattr(links_module, "_search_threads", lambda: 3)
    focus_rows, threads = [], set()
    searched = links_module.partner_pairs

    def recorded(*a, **kw):
        focus_rows.append(int(a[3].sum()))
        threads.add(threading.current_thread().name)
        return searched(*a, **kw)

    monkeypatch.setattr(links_module, "partner_pairs", recorded)
    monkeypatch.setattr(links_module, "_MIN_PART_ROWS", 10**9)  # one search a block
    whole, whole_pairs = scored_links_with_count(memories, embeddings, scoring, within_cap=3)
    assert sorted(focus_rows) == [40] * 5
    focus_rows.clear()
    threads.clear()
    monkeypatch.setattr(links_module, "_MIN_PART_ROWS", 8)  # three parts a block
    parted, parted_pairs = scored_links_with_count(memories, embeddings, scoring, within_cap=3)
    assert sorted(focus_rows) == sorted([13, 13, 14] * 5) and all(name.startswith("ctc-search") for name in threads)
    assert parted_pairs == whole_pairs
    assert parted.equals(whole)
    assert _sorted(parted).equals(_sorted(within_reach(scored_links(memories, embeddings, scoring), cap_reach(link_memories(memories), 3))))


def _edited(memories: pl.DataFrame, rng: np.random.Generator) -> tuple[pl.DataFrame, set[str], set[str]]:
    """Some memories edited, some deleted, two added (one a copy of a kept memory)."""
    ids = memories["id"].to_list()
    picked = rng.choice(len(ids), size=18, replace=False)
    edited = {ids[i] for i in picked[:8]}
    deleted = {ids[i] for i in picked[8:14]}
    copy_of = memories.filter(~pl.col("id").is_in(list(edited | deleted))).row(int(picked[14]) % 100, named=True)
    changed = memories.filter(~pl.col("id").is_in(list(deleted))).with_columns(
        pl.when(pl.col("id").is_in(list(edited))).then(pl.col("content") + " kafka rollout").otherwise(pl.col("content")).alias("content")
    )
    added = pl.DataFrame([{**copy_of, "id": "new-copy"}, {**memories.row(int(picked[15]), named=True), "id": "new-other", "content": "kafka rollout plan"}],
                         schema=memories.schema)
    return with_terms(pl.concat([changed.drop("terms"), added.drop("terms")])), edited | {"new-copy", "new-other"}, deleted


@pytest.mark.parametrize("dense", [False, True], ids=["one-block", "dense-blocks"])
@pytest.mark.parametrize("k, seed", [(1, 0), (3, 1), (2, 2)])
def test_incremental_with_refocus_stores_what_a_full_run_stores(generated, monkeypatch, tmp_path, k, seed, dense):
    memories, embeddings = generated
    scoring = _scoring(k)
    passes = []
    if dense:  # blocks of 16 searched by product in two passes (links._dense_blocks_scored), the focus's too
        monkeypatch.setattr(links_module, "_BLOCK_ROWS", 16)
        monkeypatch.setattr(candidates_module, "_DENSE_PAIRS_PER_ROW", 0)
        monkeypatch.setattr(candidates_module, "_HITS_PER_PAIR", 1e9)
        two_passes = links_module._dense_blocks_scored
        monkeypatch.setattr(links_module, "_dense_blocks_scored", lambda *a: passes.append(int((a[5] < a[6]).sum())) or two_passes(*a))
    stored = scored_links_with_count(memories, embeddings, scoring, within_cap=k)[0]
    vector_of = dict(zip(memories["id"].to_list(), embeddings))
    rng = np.random.default_rng(seed)
    after, changed, deleted = _edited(memories, rng)
    vector_of["new-copy"], vector_of["new-other"] = rng.normal(size=(2, embeddings.shape[1])).astype(np.float32)
    vectors = np.stack([vector_of[i] for i in after["id"].to_list()])

    reach = cap_reach(after, k)
    # as the flow does: holders of a term that became common in the namespace, or stopped being one, too
    reweighed = namespace_terms.holders_of_changed(namespace_terms.common_terms(memories), namespace_terms.common_terms(after), after)
    focus = refocused(changed | reweighed, deleted, stored, reach)
    assert focus > changed - deleted  # neighbours of the edited and deleted ones are scored again
    kept = stored.filter(~pl.col("source_id").is_in(list(focus | deleted)) & ~pl.col("target_id").is_in(list(focus | deleted)))
    fresh = scored_links_with_count(after, vectors, scoring, focus_ids=focus, within_cap=k)[0]
    incremental = within_reach(pl.concat([kept, fresh]), reach)

    full = scored_links_with_count(after, vectors, scoring, within_cap=k)[0]
    assert _sorted(incremental).equals(_sorted(full))
    # the flow's own way: the kept and fresh partitions sorted into one, the keys out of reach left out in that pass
    from crosstier.flows.correlate import LINK_KEY, beyond_reach_keys

    paths = [partitions.write_frame(kept, tmp_path / "kept.parquet"), partitions.write_frame(fresh, tmp_path / "fresh.parquet")]
    out = beyond_reach_keys(paths, reach)
    assert out.height == kept.height + fresh.height - full.height > 0
    merged = partitions.sorted_partition(paths, tmp_path / "links.parquet", LINK_KEY, leaving_out=out)
    assert partitions.read_frame(merged).equals(full.sort(LINK_KEY))
    if dense:  # the focus (its rows in blocks) went the two passes' way as well as the full runs
        assert len(passes) == 3 and passes[1] == len(focus) > 16
    everything = scored_links(after, vectors, scoring)
    assert _sorted(capped_links(incremental, k, after)).equals(_sorted(capped_links(everything, k, after)))


def _texts(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select("id", pl.col("content").hash().cast(pl.String).alias("text_hash"))


@pytest.mark.parametrize("seed", [0])
def test_the_watcher_started_from_a_pruned_snapshot_publishes_what_the_batch_run_does(generated, seed):
    from crosstier.transforms.link import incremental, live

    memories, embeddings = generated
    k = 2
    scoring = _scoring(k)
    memories = memories.with_row_index("_r").sort("id")
    embeddings = embeddings[memories["_r"].to_numpy()]
    memories = memories.drop("_r")
    stored = scored_links_with_count(memories, embeddings, scoring, within_cap=k)[0]
    texts = _texts(memories)
    index = live.LinkIndex(memories, embeddings, texts, incremental.memory_fingerprints(memories, texts), stored,
                           capped_links(stored, k, memories))
    rng = np.random.default_rng(seed)
    vector_of = dict(zip(memories["id"].to_list(), embeddings))
    for _ in range(2):  # the first step makes the index's copy keys; the second uses them
        after, changed, deleted = _edited(index.memories, rng)
        after = after.unique("id", keep="last").sort("id")
        vector_of["new-copy"], vector_of["new-other"] = rng.normal(size=(2, embeddings.shape[1])).astype(np.float32)
        vectors = np.stack([vector_of[i] for i in after["id"].to_list()])
        index = live.relinked(index, after, vectors, _texts(after), scoring).index
        batch = capped_links(scored_links(after, vectors, scoring), k, after)
        assert _sorted(index.capped).equals(_sorted(batch))


def test_copy_keys_the_watcher_holds_and_the_runs_groups_give_the_same_units_as_hashing_every_text(generated):
    from crosstier.transforms.link import live_cap

    memories, embeddings = generated
    hashed = cap_reach(memories, 2).units.sort("id")
    held = cap_reach(memories, 2, groups=live_cap.grouped(live_cap.copy_keys(memories))).units.sort("id")
    assert hashed["copied"].sum() > 0  # the corpus's filler turns ("ok", "sure") are copies
    assert held.equals(hashed)
    # the run's copy groups, computed once for the reach and the cap, give the same too
    from crosstier.transforms.link import copies

    groups = copies.copy_groups(memories)
    assert cap_reach(memories, 2, groups=groups).units.sort("id").equals(hashed)
    stored = scored_links_with_count(memories, embeddings, _scoring(2), within_cap=2)[0]
    assert _sorted(capped_links(stored, 2, memories, groups=groups)).equals(_sorted(capped_links(stored, 2, memories)))


def test_a_new_copy_rescores_only_a_memory_it_made_a_copy(generated, monkeypatch):
    """A copy joining a group of copies leaves their stored links as they were (a copy's
    links are all kept), so none of them is scored again; one joining a memory on its own
    makes it a copy, so that memory is. Either way the stored links equal a full run's."""
    # the copy rule alone: a memory more moves the share that makes a term common in the
    # namespace, and the holders of a term at its edge would be scored again too (the flow's
    # reweighed_ids; tested with the flow in tests/flows/test_namespace_terms_flow.py)
    monkeypatch.setattr(namespace_terms, "COMMON_LEAST", 10**9)
    memories, embeddings = generated
    k = 2
    scoring = _scoring(k)
    stored = scored_links_with_count(memories, embeddings, scoring, within_cap=k)[0]
    units = cap_reach(memories, k).units
    group = units.filter(pl.col("copied")).group_by("unit").agg("id").filter(pl.col("id").list.len() >= 2).row(0, named=True)
    alone = units.filter(~pl.col("copied")).join(stored.select(pl.col("source_id").alias("id")), on="id", how="anti")["id"][0]
    rng = np.random.default_rng(5)
    for original, old_copies in ((group["id"][0], set(group["id"])), (alone, set())):
        row = memories.filter(pl.col("id") == original).row(0, named=True)
        after = with_terms(pl.concat([memories.drop("terms"), pl.DataFrame([{**row, "id": "zz-new-copy"}], schema=memories.schema).drop("terms")]))
        vectors = np.vstack([embeddings, rng.normal(size=(1, embeddings.shape[1])).astype(np.float32)])
        reach = cap_reach(after, k)
        focus = refocused({"zz-new-copy"}, set(), stored, reach)
        assert not focus & old_copies
        assert (original in focus) == (not old_copies)
        kept = stored.filter(~pl.col("source_id").is_in(list(focus)) & ~pl.col("target_id").is_in(list(focus)))
        fresh = scored_links_with_count(after, vectors, scoring, focus_ids=focus, within_cap=k)[0]
        full = scored_links_with_count(after, vectors, scoring, within_cap=k)[0]
        assert _sorted(within_reach(pl.concat([kept, fresh]), reach)).equals(_sorted(full))
