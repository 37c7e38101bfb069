"""Terms common within a namespace (transforms/link/namespace_terms.py): which terms, their
lowered weight, and the memories whose pairs a change of the common terms reweighs."""

from __future__ import annotations

import polars as pl
import pytest

from crosstier.transforms.link import namespace_terms as nt


def frame(rows: list[tuple[str, str, list[str]]]) -> pl.DataFrame:
    """(id, namespace, terms) rows, each term weighing 1 but `the` (0.05)."""
    return pl.DataFrame(
        {"id": [r[0] for r in rows], "namespace": [r[1] for r in rows], "terms": [r[2] for r in rows],
         "term_weights": [[0.05 if t == "the" else 1.0 for t in r[2]] for r in rows]},
        schema={"id": pl.String, "namespace": pl.String, "terms": pl.List(pl.String), "term_weights": pl.List(pl.Float64)},
    )


def namespace(name: str, size: int, holders: int, term: str = "gina") -> list[tuple[str, str, list[str]]]:
    """`size` memories of one namespace, the first `holders` holding `term`, each its own word too."""
    return [(f"{name}{i:03d}", name, sorted({f"w{i}", "the"} | ({term} if i < holders else set()))) for i in range(size)]


@pytest.mark.parametrize(
    "size, holders, common",
    [
        (100, 20, True),  # 20 holders, 20% of the namespace
        (100, 19, False),  # fewer than COMMON_LEAST holders
        (300, 29, False),  # under COMMON_SHARE of the namespace
        (300, 30, True),  # exactly COMMON_SHARE
        (10, 10, False),  # a small namespace has none, whatever the share
    ],
)
def test_a_term_is_common_with_enough_holders_and_share_of_its_namespace(size, holders, common):
    found = nt.common_terms(frame(namespace("ns", size, holders)))
    assert (("ns", "gina") in set(found.iter_rows())) == common


def test_common_terms_are_counted_per_namespace_and_once_per_memory():
    rows = namespace("a", 100, 25) + namespace("b", 300, 25)
    rows[0] = (rows[0][0], "a", rows[0][2] + ["gina"])  # a term listed twice in one memory counts once
    found = nt.common_terms(frame(rows))
    assert found.rows() == [("a", "gina"), ("a", "the"), ("b", "the")]  # 25 of 300 in b: under 10%


def test_weights_of_common_terms_drop_to_the_common_weight_and_nothing_else_moves():
    rows = namespace("a", 40, 20) + [("lone", "a", []), ("b1", "b", ["gina", "the"])]
    memories = frame(rows)
    weighted = nt.weighted(memories)
    assert weighted.drop("term_weights").equals(memories.drop("term_weights"))
    by_id = dict(zip(weighted["id"].to_list(), weighted["term_weights"].to_list()))
    assert by_id["a000"] == [nt.COMMON_WEIGHT, 0.05, 1.0]  # gina lowered; the (0.05, under the cap) kept; w0 kept
    assert by_id["a030"] == [0.05, 1.0]
    assert by_id["lone"] == []  # an empty list stays empty
    assert by_id["b1"] == [1.0, 0.05]  # gina is not common in b
    assert nt.with_namespace_weights(memories, nt.common_terms(frame(rows[:5]))).equals(memories)  # none common: unchanged


def test_the_holders_of_a_term_that_became_or_stopped_being_common_are_reweighed():
    before = frame(namespace("a", 100, 19) + namespace("b", 100, 30, term="jon"))
    after = frame(namespace("a", 101, 20) + namespace("b", 100, 30, term="jon")[:-1])
    reweighed = nt.holders_of_changed(nt.common_terms(before), nt.common_terms(after), after)
    assert reweighed == {f"a{i:03d}" for i in range(20)}  # gina became common in a; jon stays common in b
    gone = frame(namespace("a", 100, 19) + namespace("b", 100, 30, term="jon"))
    assert nt.holders_of_changed(nt.common_terms(after), nt.common_terms(gone), gone) == {f"a{i:03d}" for i in range(19)}
    assert nt.holders_of_changed(nt.common_terms(after), nt.common_terms(after), after) == set()


def test_counts_kept_through_adds_edits_and_deletes_give_the_common_terms_of_the_memories_now():
    """The watcher's TermCounts against common_terms counted afresh, step by step: a namespace
    growing past the share's edge, a holder edited away, a deleted holder, a new namespace."""
    rows = namespace("a", 100, 19) + namespace("b", 60, 20, term="jon")
    counts = nt.TermCounts.of(frame(rows))
    assert counts.common().equals(nt.common_terms(frame(rows)))
    steps = [
        ([], [("a900", "a", ["gina", "x"])]),  # gina's 20th holder: common in a
        ([("b000", "b", ["jon", "the", "w0"])], [("b000", "b", ["the", "w0"])]),  # an edit takes jon away: 19
        ([("b001", "b", ["jon", "the", "w1"])], []),  # a deleted holder
        ([], [(f"c{i}", "c", ["kai"]) for i in range(25)]),  # a namespace comes, kai common there
        ([], [(f"a9{i:02d}", "a", ["w"]) for i in range(1, 99)]),  # a grows to 199: gina's 20 are 10.05% still
        ([], [("a-late1", "a", ["w"]), ("a-late2", "a", ["w"])]),  # 201: 20 under 10% now
    ]
    current = {r[0]: r for r in rows}
    for gone, came in steps:
        before = counts
        change = counts.change(frame(gone), frame(came))
        for row in gone:
            del current[row[0]]
        current.update({row[0]: row for row in came})
        want = nt.common_terms(frame(list(current.values())))
        assert counts.common(change).equals(want)
        was = counts.common()
        counts = counts.applied(change)
        assert counts.common().equals(want)
        assert before.common().equals(was)  # the counts a change was applied to stay as they were
    assert ("a", "gina") not in set(counts.common().iter_rows()) and ("c", "kai") in set(counts.common().iter_rows())


def test_a_reason_names_no_term_common_in_the_namespace_and_keeps_its_order():
    rows = namespace("a", 40, 20) + [("b1", "b", ["gina", "studio"])]
    memories = frame(rows).with_columns(
        name_terms=pl.Series([["gina", "studio"] if i < 20 else [] for i in range(40)] + [["gina"]], dtype=pl.List(pl.String)),
        word_terms=pl.Series([["studio", "gina", "w"] for _ in range(40)] + [["studio", "gina"]], dtype=pl.List(pl.String)),
    )
    weighted = nt.weighted(memories)
    assert weighted["name_terms"].to_list()[:21] == [["studio"]] * 20 + [[]]
    assert weighted["word_terms"].to_list()[0] == ["studio", "w"]  # gina out, the order kept
    assert weighted["name_terms"].to_list()[-1] == ["gina"] and weighted["word_terms"].to_list()[-1] == ["studio", "gina"]  # not common in b
