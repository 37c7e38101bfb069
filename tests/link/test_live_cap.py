"""The live path's incremental cap (transforms/link/live_cap.py) equals the batch run's cap over
every scored link, after any sequence of adds, edits and deletes: copies folded, one undated
origin per fact, a link pushed out of a memory's top max_links by a new one."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstier.transforms.link import links, live, live_cap
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA

T0 = datetime(2026, 4, 3, 10, tzinfo=timezone.utc)
# "todo: ..." variants fold into one copy group (case, punctuation, dates set aside)
TEXTS = ("Todo: rotate the vault keys", "todo - rotate the vault keys!", "TODO rotate the vault keys 2026-04-05",
         "deploy failed on friday", "the invoice rounding bug", "the invoice rounding bug.", "plain note")
TYPES = ("derives_from", "derives_from", "supports", "causal", "references", "temporal_sequence")
MAX_LINKS = 2
TAU = 7.0
MEMORY_SCHEMA = {"id": pl.String, "tier": pl.String, "namespace": pl.String, "content": pl.String, "timestamp": pl.Datetime("us", "UTC")}


def memory(rng: np.random.Generator, memory_id: str) -> dict:
    day = rng.integers(-1, 4)  # -1: undated
    return {"id": memory_id, "tier": str(rng.choice(["episodic", "semantic"])), "namespace": "default",
            "content": str(rng.choice(TEXTS)), "timestamp": None if day < 0 else T0 + timedelta(days=int(day))}


def link(rng: np.random.Generator, a: str, b: str) -> dict:
    """A scored link between a and b; scores from a few values so ranks tie on score."""
    source, target = (a, b) if rng.random() < 0.5 else (b, a)
    kind = str(rng.choice(TYPES))
    undated = kind == "derives_from" and rng.random() < 0.6
    explicit = rng.random() < 0.1
    return {"source_id": source, "source_tier": "episodic", "target_id": target, "target_tier": "semantic",
            "relationship_type": kind, "score": float(rng.choice([0.6, 0.7, 0.8, 0.9])), "semantic": 0.5, "co_occurrence": 0.5,
            "temporal": None if undated else 0.5, "cross_reference": 1.0 if explicit else 0.0, "reason": "r",
            "origin": "discovered", "namespace": "default", "run_id": None, "metadata": None}


def frames(world: dict[str, dict], pairs: dict[tuple[str, str], dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(memories sorted by id, scored links sorted as live.relinked sorts them)."""
    memories = pl.DataFrame(list(world.values()), schema=MEMORY_SCHEMA).sort("id")
    scored = pl.DataFrame(list(pairs.values()), schema=RELATIONSHIP_SCHEMA).sort("source_id", "target_id", "relationship_type")
    return memories, scored


def full_cap(scored: pl.DataFrame, memories: pl.DataFrame) -> pl.DataFrame:
    return links.capped_links(scored, MAX_LINKS, memories, tau_days=TAU).cast(RELATIONSHIP_SCHEMA).sort("source_id", "target_id", "relationship_type")


def relinked(world: dict[str, dict], pairs: dict, rng: np.random.Generator, memory_id: str) -> None:
    """Score memory_id again against every other memory: its old links go, new ones come."""
    for pair in [p for p in pairs if memory_id in p]:
        del pairs[pair]
    for other in world:
        if other != memory_id and rng.random() < 0.08:  # sparse: most memories lie outside the redone part
            pairs[tuple(sorted((memory_id, other)))] = link(rng, memory_id, other)


class Replay:
    """Applies adds, edits and deletes, keeping the incremental cap beside the full one."""

    def __init__(self, world: dict[str, dict], pairs: dict):
        self.world, self.pairs = world, pairs
        memories, self.scored = frames(world, pairs)
        self.keys = live_cap.copy_keys(memories)
        self.capped = full_cap(self.scored, memories)

    def step(self, touched: set[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(incremental cap, full cap) after the world changed at `touched`."""
        memories, scored = frames(self.world, self.pairs)
        keys = live_cap.copy_keys(memories, self.keys, touched)
        recap = live_cap.recapped_around(self.capped, self.scored, scored, memories, self.keys, keys, touched, MAX_LINKS, TAU)
        got = recap.capped
        # the rows it hands back to compare are exactly those with an end around, before and after
        assert in_order(recap.before).equals(in_order(live.touching(self.capped, recap.around)))
        assert in_order(recap.after).equals(in_order(live.touching(got, recap.around)))
        self.scored, self.keys, self.capped = scored, keys, got
        return got, full_cap(scored, memories)


def in_order(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows as live.capped orders them (the incremental cap returns them in no order)."""
    return frame.sort("source_id", "target_id", "relationship_type")


@settings(derandomize=True, max_examples=20, deadline=None)  # 20 sequences of up to 8 steps: ~10 s of the suite
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 8))
def test_incremental_cap_equals_the_full_cap_after_adds_edits_and_deletes(seed, steps):
    rng = np.random.default_rng(seed)
    world = {f"m{i:02d}": memory(rng, f"m{i:02d}") for i in range(30)}
    pairs: dict = {}
    for memory_id in world:
        relinked(world, pairs, rng, memory_id)
    replay = Replay(world, pairs)
    next_id = len(world)
    for _ in range(steps):
        op = rng.choice(["add", "edit", "delete"])
        if op == "add" or len(world) < 3:
            memory_id = f"m{next_id:02d}"
            next_id += 1
            world[memory_id] = memory(rng, memory_id)
        elif op == "edit":
            memory_id = str(rng.choice(sorted(world)))
            world[memory_id] = memory(rng, memory_id)
        else:
            memory_id = str(rng.choice(sorted(world)))
            del world[memory_id]
            for pair in [p for p in pairs if memory_id in p]:
                del pairs[pair]
            got, want = replay.step({memory_id})
            assert in_order(got).equals(in_order(want))
            continue
        relinked(world, pairs, rng, memory_id)
        got, want = replay.step({memory_id})
        assert in_order(got).equals(in_order(want))


def scored_row(a: str, b: str, score: float, kind: str = "causal") -> dict:
    rng = np.random.default_rng(0)
    row = link(rng, a, b)
    return {**row, "source_id": a, "target_id": b, "relationship_type": kind, "score": score, "temporal": 0.5, "cross_reference": 0.0}


def test_a_new_stronger_link_pushes_the_weakest_out_of_a_memorys_top_max_links():
    rng = np.random.default_rng(1)
    world = {i: {**memory(rng, i), "content": f"note {i}"} for i in ("a", "b", "c", "d")}
    pairs = {("a", "b"): scored_row("a", "b", 0.9), ("a", "c"): scored_row("a", "c", 0.7)}
    replay = Replay(world, pairs)
    world["d"] = {**memory(rng, "d"), "content": "note d"}
    pairs[("a", "d")] = scored_row("a", "d", 0.8)
    got, want = replay.step({"d"})
    assert in_order(got).equals(in_order(want))
    assert sorted(got.get_column("target_id").to_list()) == ["b", "d"]  # a-c went: a keeps its top 2


def test_a_new_copy_folds_into_its_group_and_is_carried_forward():
    rng = np.random.default_rng(2)
    world = {"a": {**memory(rng, "a"), "content": "Todo: rotate keys", "timestamp": T0},
             "x": {**memory(rng, "x"), "content": "the vault"}}
    pairs = {("a", "x"): scored_row("a", "x", 0.7)}
    replay = Replay(world, pairs)
    world["b"] = {**memory(rng, "b"), "content": "todo rotate keys!", "timestamp": T0 + timedelta(days=1)}
    pairs[("b", "x")] = scored_row("b", "x", 0.9)
    got, want = replay.step({"b"})
    assert in_order(got).equals(in_order(want))
    # one link from the group to x (the stronger), and a -> b carried forward
    assert in_order(got).select("source_id", "target_id", "relationship_type").rows() == [("a", "b", "temporal_sequence"), ("b", "x", "causal")]


def test_a_row_at_the_edge_of_the_redone_part_is_ranked_against_all_of_its_far_ends_links():
    # n - a - b: a's rows are redone (a link of a came), and a-b is decided by b's ranked list
    # too: b's stronger links to p and q (nowhere near n) push a-b out of b's top 2
    rng = np.random.default_rng(3)
    world = {i: {**memory(rng, i), "content": f"note {i}"} for i in ("a", "b", "p", "q")}
    pairs = {("a", "b"): scored_row("a", "b", 0.8), ("b", "p"): scored_row("b", "p", 0.9), ("b", "q"): scored_row("b", "q", 0.9)}
    replay = Replay(world, pairs)
    world["n"] = {**memory(rng, "n"), "content": "note n"}
    pairs[("a", "n")] = scored_row("a", "n", 0.7)
    got, want = replay.step({"n"})
    assert in_order(got).equals(in_order(want))
    assert ("a", "b") not in got.select("source_id", "target_id").rows()


@pytest.mark.parametrize("redo", [{"m01", "m05", "m09"}, {"m05"}, {"m05", "m09"}], ids=["all-that-changed", "added-and-gone-ids-missing", "an-added-id-missing"])
def test_copy_keys_kept_from_the_last_equal_those_made_afresh(redo):
    """copy_keys reuses the previous keys except for `redo` (the edited m05 is always in it);
    an id that came or went outside redo (not the watcher's case) must still end right."""
    rng = np.random.default_rng(3)
    before = {f"m{i:02d}": memory(rng, f"m{i:02d}") for i in range(9) if i != 1}  # m01 is new, m09 goes
    before["m09"] = memory(rng, "m09")
    after = {k: v for k, v in before.items() if k != "m09"} | {"m01": memory(rng, "m01"), "m05": {**before["m05"], "content": "the invoice rounding bug"}}
    previous = live_cap.copy_keys(frames(before, {})[0])
    memories = frames(after, {})[0]
    assert live_cap.copy_keys(memories, previous, redo).equals(live_cap.copy_keys(memories))
