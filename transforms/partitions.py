"""Partitions by path: what the flow's mapped tasks (extract per store, embed per shard,
score per namespace) read and write in the run's work folder, so a task on a Dask worker
gets a path and returns a path, and no frame travels through the scheduler.

A partition is a Parquet file (a frame) or a .npy file (a matrix, row-aligned with a
frame). Each is written to a temporary name and renamed into place, so a reader never
opens half a partition, and a task retried after a crash overwrites what it left.
The work folder lives under the warehouse (`work/<run_id>/`): on a cluster every worker
must see it at the same path, as it sees the stores and the embedding cache.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from crosstier.transforms.stores.extract import StoreExtract


@contextmanager
def _written_atomically(path: Path) -> Iterator[Path]:
    """A temporary name beside `path` to write to: renamed into place when the block ends,
    removed when it fails, so no half partition (or stray temporary) is left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def write_frame(frame: pl.DataFrame, path: Path) -> Path:
    """The frame as one Parquet partition at path (atomically)."""
    with _written_atomically(path) as tmp:
        frame.write_parquet(tmp, compression="lz4", statistics=False)
    return path


def write_frames(frames: Iterable[pl.DataFrame], path: Path, schema: pl.Schema) -> tuple[Path, int]:
    """Frames of one schema as one Parquet partition at path (atomically), each written as it
    comes, so a producer of parts holds one at a time; returns the path and the rows written.
    (Holding a dense namespace's classified parts until one concat cost ~3.7x their size.)"""
    rows = 0
    with _written_atomically(path) as tmp, pq.ParquetWriter(
        tmp, pl.DataFrame(schema=schema).to_arrow().schema, compression="lz4", write_statistics=False
    ) as writer:
        for frame in frames:
            writer.write_table(frame.select(schema.names()).cast(dict(schema)).to_arrow())
            rows += frame.height
    return path, rows


def read_frame(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path)


def write_matrix(matrix: np.ndarray, path: Path) -> Path:
    """A row-aligned float32 matrix as one .npy partition at path (atomically)."""
    with _written_atomically(path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.ascontiguousarray(matrix, dtype=np.float32), allow_pickle=False)
    return path


def read_matrix(path: Path) -> np.ndarray:
    """The matrix, mapped from the file rather than copied into memory."""
    return np.load(path, mmap_mode="r", allow_pickle=False)


@dataclass(frozen=True)
class StorePart:
    """One store's extract in the work folder: its memories and rejects partitions."""

    store: str
    memories: Path
    rejects: Path
    records_read: int
    rows: int

    @classmethod
    def written(cls, extract: StoreExtract, folder: Path) -> StorePart:
        folder.mkdir(parents=True, exist_ok=True)
        return cls(extract.store, write_frame(extract.memories, folder / "memories.parquet"), write_frame(extract.rejects, folder / "rejects.parquet"), extract.records_read, extract.memories.height)

    def read(self) -> StoreExtract:
        return StoreExtract(self.store, read_frame(self.memories), read_frame(self.rejects), self.records_read)


def removed_work(folder: Path) -> None:
    """The work folder gone (a run's partitions are derived data: the snapshot holds the result)."""
    shutil.rmtree(folder, ignore_errors=True)
