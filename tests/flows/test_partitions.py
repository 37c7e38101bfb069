"""Partitions written a part at a time (the score task's links)."""

from __future__ import annotations

import polars as pl
import pytest

from crosstier.transforms import partitions

SCHEMA = pl.Schema({"id": pl.String, "score": pl.Float64, "note": pl.String})


def test_parts_written_as_they_come_read_back_as_one_frame(tmp_path):
    written = []

    def parts():
        for i in range(3):
            part = pl.DataFrame({"note": [None, "x"], "score": pl.Series([i, i + 1], dtype=pl.Int32), "id": [f"a{i}", f"b{i}"]})  # columns out of order, ints for floats
            written.append(part)
            yield part

    path, rows = partitions.write_frames(parts(), tmp_path / "links.parquet", SCHEMA)
    back = partitions.read_frame(path)
    assert rows == 6 and back.schema == SCHEMA
    assert back.equals(pl.concat([p.select(SCHEMA.names()).cast(dict(SCHEMA)) for p in written]))


def test_no_parts_give_an_empty_partition_with_the_columns(tmp_path):
    path, rows = partitions.write_frames(iter([]), tmp_path / "links.parquet", SCHEMA)
    assert rows == 0 and partitions.read_frame(path).schema == SCHEMA and partitions.read_frame(path).height == 0


def test_a_producer_that_fails_leaves_neither_the_partition_nor_a_temporary(tmp_path):
    def parts():
        yield pl.DataFrame({"id": ["a"], "score": [1.0], "note": ["x"]})
        raise RuntimeError("classification failed")

    with pytest.raises(RuntimeError, match="classification failed"):
        partitions.write_frames(parts(), tmp_path / "links.parquet", SCHEMA)
    assert list(tmp_path.iterdir()) == []
