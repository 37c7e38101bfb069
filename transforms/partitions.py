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
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
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


def read_rows(path: Path, rows: np.ndarray | pl.Series) -> pl.DataFrame:
    """The rows of a Parquet partition at `rows` (ascending positions), read a row group at a
    time: only the rows asked for are ever held (the cap keeps ~0.9M of 4.07M stored links at
    100k dense memories; read whole, their reasons and components cost ~0.6 GB more)."""
    tables = list(_taken(pq.ParquetFile(path), rows))
    if not tables:
        return pl.DataFrame(schema=pl.read_parquet_schema(path))
    return pl.from_arrow(pa.concat_tables(tables))


def _taken(parquet: pq.ParquetFile, rows: np.ndarray | pl.Series) -> Iterator[pa.Table]:
    positions = np.asarray(rows, dtype=np.int64)
    start = 0
    for group in range(parquet.num_row_groups):
        size = parquet.metadata.row_group(group).num_rows
        low, high = np.searchsorted(positions, [start, start + size])
        if high > low:
            yield parquet.read_row_group(group).take(pa.array(positions[low:high] - start))
        start += size


def filtered_partition(source: Path, keep: pl.Expr, path: Path) -> Path:
    """The rows of `source` where `keep` holds, in their order, as a partition at `path`
    (atomically), streamed: an incremental run's kept links without reading the last
    snapshot's stored links into memory."""
    with _written_atomically(path) as tmp:
        pl.scan_parquet(source).filter(keep).sink_parquet(tmp, compression="lz4", statistics=False, maintain_order=True)
    return path


def concatenated_partition(sources: Sequence[Path], path: Path) -> Path:
    """The rows of `sources` one after another, in the sources' order, as one partition at
    `path` (atomically), streamed, with column statistics (so namespace_rows skips the row
    groups of other namespaces); columns of the same name take their common type."""
    with _written_atomically(path) as tmp:
        pl.concat([pl.scan_parquet(source) for source in sources], how="vertical_relaxed").sink_parquet(
            tmp, compression="lz4", statistics=True, maintain_order=True
        )
    return path


def namespace_rows(path: Path, namespace: str) -> pl.DataFrame:
    """The rows of one namespace of a partition with a `namespace` column (grouped by it: the
    row groups of others are skipped by their statistics)."""
    return pl.scan_parquet(path).filter(pl.col("namespace") == namespace).collect()


def sorted_partition(sources: Sequence[Path], path: Path, by: Sequence[str], *, memory_limit: str = "1GB",
                     leaving_out: pl.DataFrame | None = None) -> Path:
    """The rows of `sources` (Parquet partitions of one schema) as one partition at `path`,
    sorted by the columns `by` (strings in byte order, as polars sorts them), atomically.
    DuckDB sorts outside polars' heap and spills past `memory_limit` to a folder beside `path`
    (removed after), so a run's stored links (4.07M at 100k dense memories) are sorted without
    being held in the process: polars held the frame and a sorted copy of each column.
    `leaving_out`: values of the `by` columns whose rows are left out (in the same pass: an
    incremental run's stored links were sorted, then copied again without those out of reach).
    Up to _IN_MEMORY_SORT_ROWS rows polars sorts them instead: a DuckDB connection and its sort
    cost ~23 ms for a 1,000-memory namespace's 11k links, polars ~4 ms (1,000 such namespaces
    at 1M)."""
    leaving_out = None if leaving_out is None or leaving_out.height == 0 else leaving_out.select(by)
    if sum(pq.ParquetFile(source).metadata.num_rows for source in sources) <= _IN_MEMORY_SORT_ROWS:
        rows = pl.concat([pl.read_parquet(source) for source in sources], how="vertical_relaxed")
        if leaving_out is not None:
            rows = rows.join(leaving_out, on=list(by), how="anti")
        return write_frame(rows.sort(by), path)
    spill = path.with_name(f".{path.name}.spill")
    order = ", ".join(f'"{column}"' for column in by)
    rows = "read_parquet($files)" if leaving_out is None else f"read_parquet($files) anti join leaving_out using ({order})"
    with _written_atomically(path) as tmp:
        con = duckdb.connect(config={"memory_limit": memory_limit, "temp_directory": str(spill), "preserve_insertion_order": True})
        try:
            if leaving_out is not None:
                con.register("leaving_out", leaving_out.to_arrow())
            target = str(tmp).replace("'", "''")
            con.execute(
                f"copy (select * from {rows} order by {order}) to '{target}' (format parquet, compression lz4)",
                {"files": [str(source) for source in sources]},
            )
        finally:
            con.close()
            shutil.rmtree(spill, ignore_errors=True)
    return path


_IN_MEMORY_SORT_ROWS = 200_000  # links of a few thousand memories: tens of MB in polars


def write_matrix(matrix: np.ndarray, path: Path) -> Path:
    """A row-aligned float32 matrix as one .npy partition at path (atomically)."""
    with _written_atomically(path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, np.ascontiguousarray(matrix, dtype=np.float32), allow_pickle=False)
    return path


_NPY_SHAPE = re.compile(rb"'shape': \(([0-9, ]*)\)")


def read_matrix(path: Path) -> np.ndarray:
    """The matrix, mapped from the file rather than copied into memory.

    np.load parses a .npy header with Python's ast, whose constructor is not thread-safe in
    CPython 3.11 (two score tasks starting at once in the flow's threads failed with
    "AST constructor recursion depth mismatch"), so the header write_matrix wrote (float32, C
    order) is read here without it."""
    with open(path, "rb") as handle:
        major, _ = np.lib.format.read_magic(handle)
        header = handle.read(int.from_bytes(handle.read(2 if major == 1 else 4), "little"))
        offset = handle.tell()
    found = _NPY_SHAPE.search(header)
    if found is None or b"'descr': '<f4'" not in header or b"'fortran_order': False" not in header:
        raise ValueError(f"{path} is not a float32 matrix partition (header {header[:80]!r})")
    shape = tuple(int(size) for size in found.group(1).split(b",") if size.strip())
    if 0 in shape:  # nothing to map
        return np.zeros(shape, dtype=np.float32)
    return np.memmap(path, dtype="<f4", mode="r", offset=offset, shape=shape)


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


@dataclass(frozen=True)
class ScorePart:
    """One namespace's score task in the work folder: its stored links (every link within the
    cap's reach, sorted by the link key), in a full run its links after the cap too, how many
    pairs were scored to find them, and its memories' classifier evidence."""

    namespace: str
    links: Path
    capped: Path | None
    pairs: int
    rows: int
    evidence: Path  # live.link_features_of's frame, sorted by id


def removed_work(folder: Path) -> None:
    """The work folder gone (a run's partitions are derived data: the snapshot holds the result)."""
    shutil.rmtree(folder, ignore_errors=True)
