"""Rows put in place in a frame kept sorted by id, against concatenating and sorting."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstier.transforms import sorted_rows
from crosstier.transforms.sorted_rows import with_rows_inserted

SCHEMA = {"id": pl.String, "n": pl.Int64, "terms": pl.List(pl.String)}
keys = st.text(alphabet="abcde", min_size=0, max_size=3)


def frame(ids: list[str], start: int) -> pl.DataFrame:
    return pl.DataFrame({"id": ids, "n": list(range(start, start + len(ids))), "terms": [[i, "x"] for i in ids]}, schema=SCHEMA)


@settings(max_examples=200, deadline=None)
@given(st.lists(keys, max_size=30), st.lists(keys, max_size=12))
def test_inserted_rows_equal_a_stable_sort_of_both(kept_ids, fresh_ids):
    kept = frame(sorted(kept_ids), 0)
    fresh = frame(fresh_ids, 1000)  # in any order, ties with kept rows and among themselves
    expected = pl.concat([kept, fresh]).sort("id", maintain_order=True)
    assert with_rows_inserted(kept, fresh).equals(expected)


def test_chunks_are_merged_once_there_are_many():
    kept = frame([f"m{i:04d}" for i in range(0, 2000, 2)], 0)
    for round_ in range(3 * sorted_rows.MAX_CHUNKS):
        kept = with_rows_inserted(kept, frame([f"m{(round_ * 37) % 2000:04d}z"], round_))
        assert kept.n_chunks() <= sorted_rows.MAX_CHUNKS
    assert kept.get_column("id").is_sorted()
    assert kept.height == 1000 + 3 * sorted_rows.MAX_CHUNKS


def test_kept_per_frame_works_once_per_frame_held_and_forgets_the_oldest():
    from crosstier.transforms.sorted_rows import kept_per_frame

    calls = []

    @kept_per_frame(2)
    def doubled(frame: pl.DataFrame) -> pl.DataFrame:
        calls.append(frame)
        return frame.with_columns(pl.col("x") * 2)

    a, b, c = (pl.DataFrame({"x": [i]}) for i in (1, 2, 3))
    first = doubled(a)
    assert doubled(a) is first and len(calls) == 1  # the same frame: its result again
    assert doubled(pl.DataFrame({"x": [1]})).equals(first) and len(calls) == 2  # an equal frame is another frame
    doubled(b), doubled(c)  # a falls out of the last two
    assert doubled(a).equals(first) and len(calls) == 5
