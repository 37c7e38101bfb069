"""Evidence recomputed for a few memories in a micro-batch resolves references against every
id, not only theirs: a new memory naming one that arrived in an earlier micro-batch cites it
as in a batch run (found by the reliability suite: an integer id 7, and "note 7" in a text)."""

from __future__ import annotations

import polars as pl
import pytest

from crosstier.transforms.link import live
from crosstier.transforms.link.terms import with_terms


def memories(rows: list[tuple[str, str, list[str]]]) -> pl.DataFrame:
    """(id, content, refs) rows as the linker takes them, all semantic, undated, one namespace."""
    n = len(rows)
    frame = pl.DataFrame(
        {"id": [r[0] for r in rows], "tier": ["semantic"] * n, "namespace": ["default"] * n, "timestamp": [None] * n,
         "session_id": [None] * n, "content": [r[1] for r in rows], "entities": [[] for _ in rows], "refs": [r[2] for r in rows]},
        schema_overrides={"timestamp": pl.Datetime("us", "UTC"), "session_id": pl.String, "entities": pl.List(pl.String), "refs": pl.List(pl.String)},
    )
    return with_terms(frame).sort("id")


@pytest.mark.parametrize(
    "earlier, later",
    [
        ([("7", "a memory with a numeric id", [])], [("m7", "typing rules, note 7", [])]),  # named in the text
        ([("c9", "the fix", [])], [("m8", "nothing named", ["c9"])]),  # a ref
        ([("ws:skill/deploy-app", "How to deploy the app", [])], [("m9", "ran the deploy-app skill today", [])]),  # a skill named
    ],
)
def test_a_new_memory_cites_an_id_from_an_earlier_micro_batch(earlier, later):
    base = [("a1", "plain memory", []), ("a2", "another one", [])]
    previous = live.link_features_of(memories(base + earlier))
    current = memories(base + earlier + later)
    refreshed = live.refreshed_features(previous, current, {later[0][0]})
    scratch = live.link_features_of(current)
    assert refreshed.equals(scratch)
    assert refreshed.filter(refreshed["id"] == later[0][0])["cites"].to_list() == [True]
    # as the watcher runs it: the ids kept from the last micro-batch, not read again
    ids = live.current_ids(frozenset(r[0] for r in base + earlier), current, {later[0][0]}, set())
    assert ids == set(current["id"].to_list())
    assert live.refreshed_features(previous, current, {later[0][0]}, ids).equals(scratch)


def test_the_kept_ids_follow_deletes_and_adds():
    current = memories([("a1", "plain", []), ("m2", "new", [])])
    assert live.current_ids(frozenset({"a1", "gone"}), current, {"m2"}, {"gone"}) == {"a1", "m2"}
    assert live.current_ids(None, current, set(), set()) == {"a1", "m2"}


@pytest.mark.parametrize("named, text", [("ws:skill/deploy-app", "ran the deploy-app skill today"), ("m7", "typing rules, see m7")])
def test_a_memory_named_before_it_existed_cites_it_once_it_comes(named, text):
    """The memory naming an id came first; the id comes in a later micro-batch: the earlier
    memory's `ref_ids` and `cites` change though its own fields do not. A skill is named by
    its folder name, which a search for the whole id does not find."""
    base = [("a1", "plain memory", []), ("m9", text, [])]
    previous = live.link_features_of(memories(base))
    assert previous.filter(previous["id"] == "m9")["cites"].to_list() == [False]
    current = memories(base + [(named, "How to deploy the app", [])])
    refreshed = live.refreshed_features(previous, current, {named})
    assert refreshed.equals(live.link_features_of(current))
    assert refreshed.filter(refreshed["id"] == "m9")["ref_ids"].to_list() == [[named]]
