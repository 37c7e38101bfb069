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


@pytest.mark.parametrize("weight", [0.0, 0.2])
def test_context_vectors_computed_in_place_are_the_same_values(weight):
    """The run spends its own matrix (`overwrite`): the same bits as a fresh one, a row of zeros
    or NaNs included (0 where it cannot be normalised), and the input then holds no copy's worth."""
    vectors = np.random.default_rng(2).normal(size=(5, 8)).astype(np.float32)
    vectors[1] = 0.0  # t1: a turn with no direction of its own
    vectors[3] = np.nan  # o1: alone in its session
    fresh = context_vectors(FRAME, vectors, weight=weight)
    spent = vectors.copy()
    in_place = context_vectors(FRAME, spent, weight=weight, overwrite=True)
    assert np.array_equal(in_place, fresh, equal_nan=True) and not np.isnan(fresh[3]).any()
    assert (fresh[3] == 0).all() and (in_place is spent) == (weight == 0.0)
    assert np.array_equal(context_vectors(FRAME, vectors, weight=weight), fresh, equal_nan=True)  # the input untouched


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


def _moves(case: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(at, rows) of one micro-batch's row moves: out[at] = source[rows]."""
    if case == "one insertion":  # row 200 is new: the rest shift by one
        return np.r_[np.arange(200), np.arange(201, 501)], np.arange(500)
    if case == "deletions":  # rows 10 and 300 are gone
        rows = np.delete(np.arange(500), [10, 300])
        return np.arange(len(rows)), rows
    if case == "inserted and deleted":  # 3 new rows early, 2 gone later, 1 new near the end: runs move both ways
        rows = np.delete(np.arange(500), [250, 251])
        at = np.delete(np.arange(502), [5, 40, 41, 480])
        return at[: len(rows)], rows
    if case == "appended at the end":  # ids sorting after every kept one: nothing moves
        return np.arange(500), np.arange(500)
    if case == "scattered":
        return np.arange(500), rng.permutation(500)
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)


CASES = ["one insertion", "deletions", "inserted and deleted", "appended at the end", "scattered", "empty"]


@pytest.mark.parametrize("case", CASES)
def test_copy_rows_equals_a_gather_whatever_the_runs(case):
    """The watcher moves its matrices run by run; the result must be the plain gather's."""
    from crosstier.transforms.embed.text import copy_rows

    rng = np.random.default_rng(7)
    source = rng.normal(size=(500, 8)).astype(np.float32)
    at, rows = _moves(case, rng)
    out = np.zeros((502, 8), dtype=np.float32)
    expected = out.copy()
    expected[at] = source[rows]
    copy_rows(out, at, source, rows)
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("case", CASES)
def test_copy_rows_in_place_equals_a_gather_from_a_copy(case):
    """Moved within the matrix's own buffer (as the watcher does), every row ends where a
    gather from an untouched copy puts it: no run overwrites rows another has yet to read."""
    from crosstier.transforms.embed.text import copy_rows

    rng = np.random.default_rng(11)
    buffer = rng.normal(size=(520, 8)).astype(np.float32)
    source, out = buffer[:500], buffer[:502]
    at, rows = _moves(case, rng)
    expected = out.copy()
    expected[at] = source.copy()[rows]
    copy_rows(out, at, source, rows)
    assert np.array_equal(out[at], expected[at])


def test_buffer_rows_reuses_a_matrix_buffer_only_where_it_may():
    """The watcher's next matrix is the last one's buffer when it has room and is writable,
    else a new array with room to grow; never a view that would read other rows."""
    from crosstier.transforms.live_state import buffer_of, buffer_rows

    grown = buffer_rows(None, 100, 4)
    assert grown.shape == (100, 4) and buffer_of(grown).shape[0] > 100
    again = buffer_rows(grown, 101, 4)
    assert again.ctypes.data == grown.ctypes.data and again.shape == (101, 4)
    exact = np.zeros((10, 4), dtype=np.float32)
    assert buffer_rows(exact, 11, 4).ctypes.data != exact.ctypes.data  # no room
    frozen = np.zeros((20, 4), dtype=np.float32)
    frozen.flags.writeable = False
    assert buffer_rows(frozen, 10, 4).ctypes.data != frozen.ctypes.data
    transposed = np.zeros((4, 30), dtype=np.float32).T  # its base is another shape: not a buffer of rows
    assert buffer_of(transposed) is transposed
    assert buffer_rows(transposed[:20], 10, 4).ctypes.data != transposed.ctypes.data



def test_turns_sharing_a_timestamp_follow_their_numbered_ids():
    """A chat dated per session: every turn has the session's time, so the ids order them, naturally
    (D1:2 before D1:10, not after D1:1 as strings sort)."""
    turns = memories(*[
        {"id": f"D1:{k}", "tier": "episodic", "content": f"turn {k}", "session_id": "s1", "timestamp": at(0)}
        for k in (10, 1, 2, 9, 11)
    ])
    texts = dict(embedding_texts(turns, before=1, after=1).rows())
    assert texts["D1:2"] == "turn 2\nturn 1 | turn 9"
    assert texts["D1:9"] == "turn 9\nturn 2 | turn 10"
    assert texts["D1:10"] == "turn 10\nturn 9 | turn 11"
