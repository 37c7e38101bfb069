"""embedding_texts (a turn with its session neighbours' text) and context_vectors (its vector mixed with theirs), deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from links_helpers import at, memories
from crosstier.transforms.embed.text import context_vectors, embedding_texts

FRAME = memories(
    {"id": "t2", "tier": "episodic", "content": "yes, the staging one", "session_id": "s", "timestamp": at(1)},
    {"id": "t1", "tier": "episodic", "content": "which database?", "session_id": "s", "timestamp": at(0)},
    {"id": "t3", "tier": "episodic", "content": "done", "session_id": "s", "timestamp": at(2)},
    {"id": "o1", "tier": "episodic", "content": "other session", "session_id": "x", "timestamp": at(1)},
    {"id": "f", "tier": "semantic", "content": "a fact", "session_id": "s"},
)


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (0, 0, {"t2": "yes, the staging one", "t1": "which database?", "f": "a fact"}),
        (1, 0, {"t2": "yes, the staging one\nwhich database?", "t1": "which database?", "t3": "done\nyes, the staging one"}),
        (1, 1, {"t2": "yes, the staging one\nwhich database? | done", "o1": "other session", "f": "a fact"}),
    ],
)
def test_turns_carry_their_session_neighbours(before, after, expected):
    texts = dict(embedding_texts(FRAME, before=before, after=after).rows())
    assert list(texts) == ["t2", "t1", "t3", "o1", "f"]  # input row order kept
    for mem_id, text in expected.items():
        assert texts[mem_id] == text


def test_texts_do_not_depend_on_row_order():
    forward = dict(embedding_texts(FRAME).rows())
    backward = dict(embedding_texts(FRAME.reverse()).rows())
    assert forward == backward


def test_a_turn_vector_is_its_own_plus_its_neighbours_weighted_and_normalised():
    # rows of FRAME: t2, t1, t3, o1, f; one orthogonal unit vector each
    vectors = np.eye(5, dtype=np.float32) * 2.0  # not unit length: normalised first
    mixed = context_vectors(FRAME, vectors, weight=0.5)
    t2 = np.array([1.0, 0.5, 0.5, 0, 0]) / np.sqrt(1.5)  # t1 before it, t3 after it
    t1 = np.array([0.5, 1.0, 0, 0, 0]) / np.sqrt(1.25)  # first turn: only a next one
    assert mixed[0] == pytest.approx(t2, abs=1e-6)
    assert mixed[1] == pytest.approx(t1, abs=1e-6)
    assert mixed[3] == pytest.approx(np.eye(5)[3])  # alone in its session
    assert mixed[4] == pytest.approx(np.eye(5)[4])  # a fact has no session neighbours
    assert np.allclose(context_vectors(FRAME, vectors, weight=0.0), np.eye(5))


def test_context_vectors_do_not_depend_on_row_order():
    vectors = np.random.default_rng(1).normal(size=(5, 8)).astype(np.float32)
    forward = context_vectors(FRAME, vectors)
    backward = context_vectors(FRAME.reverse(), vectors[::-1])
    assert np.allclose(forward, backward[::-1], atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_context_around_a_micro_batch_equals_the_full_pass(data):
    """Reusing the previous context vectors and texts outside the touched sessions gives
    exactly what the full pass gives, after any mix of new, edited (content, time, session, tier) and
    deleted memories: a row reads its session alone."""
    import polars as pl

    from crosstier.transforms.embed.text import context_vectors_around, embedding_texts_around, touched_rows

    def memory(i: int) -> dict:
        return {
            "id": f"m{i:02d}", "content": f"c{i}",
            "tier": data.draw(st.sampled_from(["episodic", "episodic", "semantic"])),
            "namespace": data.draw(st.sampled_from(["a", "b"])),
            "session_id": data.draw(st.sampled_from(["s1", "s2", "s3", None])),
            "timestamp": at(data.draw(st.integers(0, 5))),
        }

    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    before = {i: memory(i) for i in range(data.draw(st.integers(1, 14)))}
    vector_of = {i: rng.normal(size=4).astype(np.float32) for i in before}
    old_vectors = np.stack([vector_of[i] for i in sorted(before)])
    after = dict(before)
    redo = set()
    for i in sorted(before):
        action = data.draw(st.sampled_from(["keep", "keep", "edit", "move", "delete"]))
        if action == "delete":
            del after[i]
        elif action == "edit":
            after[i] = {**before[i], "content": f"c{i} edited"}
            vector_of[i] = rng.normal(size=4).astype(np.float32)
        elif action == "move":
            after[i] = memory(i)
        if action != "keep":
            redo.add(f"m{i:02d}")
    for i in range(len(before), len(before) + data.draw(st.integers(0, 3))):
        after[i], vector_of[i] = memory(i), rng.normal(size=4).astype(np.float32)
        redo.add(f"m{i:02d}")
    old_frame = memories(*[before[i] for i in sorted(before)])
    new_frame = memories(*[after[i] for i in sorted(after)])
    previous = context_vectors(old_frame, old_vectors)
    new_vectors = np.array([vector_of[i] for i in sorted(after)], dtype=np.float32).reshape(-1, 4)
    rows = touched_rows(new_frame, old_frame, pl.Series(sorted(redo), dtype=pl.String))
    around = context_vectors_around(new_frame, new_vectors, previous, rows)
    assert np.array_equal(around, context_vectors(new_frame, new_vectors))
    texts = embedding_texts_around(new_frame, old_frame, embedding_texts(old_frame), rows)
    assert texts.equals(embedding_texts(new_frame))
    # previous texts in another order are aligned by id first: the same texts
    assert embedding_texts_around(new_frame, old_frame, embedding_texts(old_frame).reverse(), rows).equals(embedding_texts(new_frame))
    # the watcher's texts and hashes, taken by row: as hashing every text, and the rows to
    # fingerprint again are exactly those read now (`_batch`), new, or with another text
    from crosstier.transforms.live_state import hashed_texts, texts_around

    old_texts = hashed_texts(old_frame)
    read_now = pl.col("id").is_in(pl.Series(sorted(redo), dtype=pl.String).implode())
    batch_frame = new_frame.with_columns(_batch=pl.when(read_now).then(2).otherwise(1))
    hashed, again = texts_around(batch_frame, old_frame, old_texts, rows, 2)
    assert hashed.equals(hashed_texts(new_frame))
    old_hash = dict(zip(old_texts["id"].to_list(), old_texts["text_hash"].to_list()))
    expected = [i for i, (memory_id, text_hash) in enumerate(zip(hashed["id"].to_list(), hashed["text_hash"].to_list()))
                if memory_id in redo or old_hash.get(memory_id) != text_hash]
    assert again.tolist() == expected
    reordered, again_reordered = texts_around(batch_frame, old_frame, old_texts.reverse(), rows, 2)
    assert reordered.equals(hashed) and again_reordered.tolist() == expected


@pytest.mark.parametrize("case", ["one insertion", "deletions", "scattered", "empty"])
def test_copy_rows_equals_a_gather_whatever_the_runs(case):
    """The watcher moves its matrices run by run; the result must be the plain gather's."""
    from crosstier.transforms.embed.text import copy_rows

    rng = np.random.default_rng(7)
    source = rng.normal(size=(500, 8)).astype(np.float32)
    if case == "one insertion":  # row 200 is new: the rest shift by one
        at = np.r_[np.arange(200), np.arange(201, 501)]
        rows = np.arange(500)
    elif case == "deletions":  # rows 10 and 300 are gone
        rows = np.delete(np.arange(500), [10, 300])
        at = np.arange(len(rows))
    elif case == "scattered":
        rows = rng.permutation(500)
        at = np.arange(500)
    else:
        rows = at = np.zeros(0, dtype=np.int64)
    out = np.zeros((501, 8), dtype=np.float32)
    expected = out.copy()
    expected[at] = source[rows]
    copy_rows(out, at, source, rows)
    assert np.array_equal(out, expected)
