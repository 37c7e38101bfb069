"""Live deltas: what the watcher publishes between batch runs, beside the snapshot it extends.

A delta is a folder `<snapshot>/deltas/<seq>/` with three Parquet files:
- `memories`: the memory rows it adds or replaces (published columns, plus `seq`);
- `changes`: one row per id it touches: `memory` ('upsert', 'delete' or null: the row is
  unchanged) and `links` (true: every relationship row at this id is the delta's);
- `relationships`: every published relationship row with an end among its `links` ids;
- `embeddings` (id, embedding): the vector, as the snapshot's embeddings.parquet holds it
  (snapshot.embedding_rows), of
  every memory whose vector it computed again (new and edited memories, and session turns
  whose neighbours changed): retrieval's vector search reads them over the snapshot's;
- `rejects` (only when they changed): every current reject, replacing the snapshot's.
It is written into `.<seq>.partial` and renamed into place, so a reader lists all of a
delta or none. Every so often the watcher writes a checkpoint instead: a delta holding
everything changed since the snapshot (marked by a `checkpoint` file inside it), so a
reader reads the latest checkpoint and the few deltas after it, never a growing list;
deltas older than the checkpoint before it are deleted. Deltas live inside the snapshot folder they extend: the next batch run's
snapshot re-reads the stores (folding them in) and readers of it never see the old ones;
pruning the old snapshot deletes them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from crosstier.core.atomic import fsync_dir

DELTAS_DIR = "deltas"
DELTA_TABLES = ("memories", "changes", "relationships")
CHECKPOINT_MARK = "checkpoint"
EMBEDDINGS_FILE = "embeddings.parquet"  # retrieval/vectors.py reads it (the read side only lists deltas)
CHANGES_SCHEMA = pl.Schema({"id": pl.String, "memory": pl.String, "links": pl.Boolean})


@dataclass(frozen=True)
class Delta:
    """One delta's frames, before they get their sequence number."""

    memories: pl.DataFrame
    changes: pl.DataFrame
    relationships: pl.DataFrame
    rejects: pl.DataFrame | None = None  # all current rejects, when they changed
    embeddings: pl.DataFrame | None = None  # (id, embedding) of the vectors computed again

    @property
    def empty(self) -> bool:
        return self.changes.height == 0 and self.rejects is None and (self.embeddings is None or self.embeddings.height == 0)


def deltas_dir(snapshot_dir: Path) -> Path:
    return snapshot_dir / DELTAS_DIR


def delta_dirs(snapshot_dir: Path) -> list[Path]:
    """The published deltas of a snapshot, oldest first (partial ones are not listed)."""
    folder = deltas_dir(snapshot_dir)
    try:
        names = [name for name in os.listdir(folder) if name.isdigit()]
    except FileNotFoundError:
        return []
    return [folder / name for name in sorted(names, key=int)]


def next_seq(snapshot_dir: Path) -> int:
    dirs = delta_dirs(snapshot_dir)
    return int(dirs[-1].name) + 1 if dirs else 1


def delta_frames(memories: pl.DataFrame, upserted: set[str], deleted: set[str], linked: set[str], relationships: pl.DataFrame) -> Delta:
    """The delta of one micro-batch: rows of `memories` (the current published rows) for the
    upserted ids, the change of every touched id, and the relationship rows at `linked`."""
    ids = sorted(upserted | deleted | linked)
    changes = pl.DataFrame(
        {
            "id": ids,
            "memory": ["delete" if i in deleted else "upsert" if i in upserted else None for i in ids],
            "links": [i in linked for i in ids],
        },
        schema=CHANGES_SCHEMA,
    )
    wanted = pl.Series(sorted(upserted), dtype=pl.String).implode()
    return Delta(memories.filter(pl.col("id").is_in(wanted)), changes, relationships)


def _write(frame: pl.DataFrame, path: Path) -> None:
    frame.write_parquet(path)
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def publish_delta(snapshot_dir: Path, delta: Delta, seq: int, *, checkpoint: bool = False) -> Path:
    """Write the delta as `<snapshot>/deltas/<seq>/` in one rename; returns the folder.
    A checkpoint (everything since the snapshot) is marked as one."""
    folder = deltas_dir(snapshot_dir)
    folder.mkdir(exist_ok=True)
    name = f"{seq:09d}"
    staging = folder / f".{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for table in DELTA_TABLES:
        _write(getattr(delta, table).with_columns(seq=pl.lit(seq, dtype=pl.Int64)), staging / f"{table}.parquet")
    if delta.rejects is not None:
        _write(delta.rejects, staging / "rejects.parquet")
    if delta.embeddings is not None:
        _write(delta.embeddings.with_columns(seq=pl.lit(seq, dtype=pl.Int64)), staging / EMBEDDINGS_FILE)
    if checkpoint:
        (staging / CHECKPOINT_MARK).write_bytes(b"")
    fsync_dir(staging)
    target = folder / name
    os.rename(staging, target)  # the one step that makes it visible
    fsync_dir(folder)
    return target


def drop_partial_deltas(snapshot_dir: Path) -> int:
    """Remove deltas a killed watcher left half-written; returns how many."""
    partials = list(deltas_dir(snapshot_dir).glob(".*.partial"))
    for partial in partials:
        shutil.rmtree(partial, ignore_errors=True)
    return len(partials)


def pruned_deltas(snapshot_dir: Path) -> int:
    """Delete the deltas before the second-latest checkpoint: readers start at the latest,
    and one that listed the folder just before it was written still finds its files."""
    dirs = delta_dirs(snapshot_dir)
    checkpoints = [d for d in dirs if (d / CHECKPOINT_MARK).exists()]
    if len(checkpoints) < 2:
        return 0
    keep_from = int(checkpoints[-2].name)
    old = [d for d in dirs if int(d.name) < keep_from]
    for folder in old:
        shutil.rmtree(folder, ignore_errors=True)
    return len(old)
