"""Publish a snapshot atomically: every file of the run (Parquet tables, the DuckDB file
built from them, the vectors, the incremental state, the run's record) is written into a new
folder `snapshots/<run_id>/`, then `current` is switched to it in ONE rename. A reader sees
the old snapshot or the new one, whole, never a mix; a run that dies at any step before the
switch leaves the last snapshot as it was, and one that dies after it has published."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from crosstier import sql
from crosstier.core.atomic import fsync_dir, leftover_links, switch_link
from crosstier.core.catalog import DATABASE_NAME, PARTITION_FILE, PARTITION_KEY, PARTITIONED_TABLES, Catalog, SnapshotFiles, partition_folder

# Views created in every snapshot, one sql/<name>.sql each (the read side's named queries).
VIEWS = ("links_both_ways", "contradictions_to_review", "orphan_memories")
# The step names publish_snapshot reports after each write and rename, in order; a
# `wrote <table>.parquet` step comes for every table in between (tests kill at each one).
SWITCHED = "switched current"
STEPS = ("wrote run.json", f"wrote {DATABASE_NAME}", "renamed the snapshot folder", SWITCHED, "linked the fixed paths", "pruned old snapshots")

Checkpoint = Callable[[str], None]


@dataclass(frozen=True)
class Published:
    """What a publish wrote."""

    run_id: str
    database: Path
    snapshot_dir: Path
    rows: dict[str, int]


EMBEDDING_SCHEMA = pl.Schema({"id": pl.String, "embedding": pl.List(pl.Float32)})


def embedding_rows(ids: pl.Series, vectors: np.ndarray) -> pl.DataFrame:
    """(id, embedding) rows of row-aligned ids and vectors, as embeddings.parquet holds them
    (in the snapshot, and in a watcher's deltas)."""
    return pl.DataFrame({"id": ids.cast(pl.String), "embedding": pl.Series(np.asarray(vectors, dtype=np.float32)).cast(pl.List(pl.Float32))})


def embedding_parts(ids: pl.Series, vectors: np.ndarray, rows: int = 65_536) -> Iterator[pl.DataFrame]:
    """embedding_rows of `rows` ids at a time, for a writer that holds one part: as one frame,
    a million vectors as lists were a 1.5 GB copy beside the matrix at publish."""
    for start in range(0, len(ids), rows):
        yield embedding_rows(ids.slice(start, rows), vectors[start:start + rows])


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    frame.write_parquet(path)
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _write_partitions(frame: pl.DataFrame, folder: Path) -> None:
    """One Parquet file per namespace, `folder/namespace=<ns>/part-0.parquet`, each holding the
    namespace column too (a file read alone is whole). An empty table still gets one empty
    file (under `namespace=default`), so readers globbing the folder find its columns."""
    folder.mkdir()
    groups = frame.partition_by(PARTITION_KEY, maintain_order=True, as_dict=True) if frame.height else {("default",): frame}

    def write(namespace: str, part: pl.DataFrame) -> None:
        partition = folder / partition_folder(namespace)
        partition.mkdir()
        _write_parquet(part, partition / PARTITION_FILE)
        fsync_dir(partition)

    # threads: each partition waits on its fsyncs (1,000 namespaces one by one: 1.5 s)
    with ThreadPoolExecutor(max_workers=min(8, len(groups))) as pool:
        for done in [pool.submit(write, namespace, part) for (namespace,), part in groups.items()]:
            done.result()
    fsync_dir(folder)


def _write_table(name: str, frame: pl.DataFrame | Path, staging: Path) -> None:
    if isinstance(frame, Path):  # a partition the run already wrote (a full run's stored links)
        shutil.copyfile(frame, staging / f"{name}.parquet")
        with open(staging / f"{name}.parquet", "rb") as handle:
            os.fsync(handle.fileno())
    elif name in PARTITIONED_TABLES:
        _write_partitions(frame, staging / name)
    else:
        _write_parquet(frame, staging / f"{name}.parquet")


def _write_json(record: dict, path: Path) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(record, handle, sort_keys=True, default=str)
        handle.flush()
        os.fsync(handle.fileno())


def snapshot_database(tables: dict[str, pl.DataFrame], path: Path) -> None:
    """Build the DuckDB file of a snapshot from its frames, with the views of sql/."""
    con = duckdb.connect(str(path))
    try:
        for name, frame in tables.items():
            con.register("staged", frame.to_arrow())
            # Table names come from our own catalog, never from input.
            con.execute(f"create table {name} as select * from staged")
            con.unregister("staged")
        # Point lookups by id are the read side's hot path (find_correlations, graph levels).
        if "relationships" in tables:
            con.execute("create index relationships_source on relationships(source_id)")
            con.execute("create index relationships_target on relationships(target_id)")
        if "memories" in tables:
            con.execute("create index memories_id on memories(id)")
        for view in VIEWS:
            con.execute(sql.load(view))
        con.execute("checkpoint")
    finally:
        con.close()


def current_snapshot_dir(catalog: Catalog) -> Path | None:
    """The live snapshot's folder (what `current` points at), or None before the first publish."""
    files = catalog.current_snapshot()
    return files.dir if files is not None else None


def publish_snapshot(
    tables: dict[str, pl.DataFrame],
    catalog: Catalog,
    run_id: str,
    *,
    parquet_only: dict[str, pl.DataFrame | Path] | None = None,
    record: dict | None = None,
    checkpoint: Checkpoint | None = None,
) -> Published:
    """Write every table as Parquet, the run's `record` and the DuckDB file built from the
    tables into a new snapshot folder, then make it current in one rename. `parquet_only`
    tables (vectors, incremental state) go into the folder but not the DuckDB file; one given
    as the path of a Parquet partition is copied as it is.
    `checkpoint(step)` is called after every write and rename (see STEPS). Returns what was written."""
    step = checkpoint or (lambda _: None)
    snapshots = catalog.snapshots_dir
    snapshots.mkdir(parents=True, exist_ok=True)
    snapshot_dir = catalog.snapshot_dir(run_id)
    live = current_snapshot_dir(catalog)
    if live is not None and live.name == run_id:
        raise FileExistsError(f"snapshot {run_id} is the live one: a publish needs a new run id")
    shutil.rmtree(snapshot_dir, ignore_errors=True)  # a run killed before its switch: never live
    staging = snapshots / f".{run_id}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name, frame in {**tables, **(parquet_only or {})}.items():
        _write_table(name, frame, staging)
        step(f"wrote {name}.parquet")
    _write_json(record or {"run_id": run_id}, staging / "run.json")
    step("wrote run.json")
    snapshot_database(tables, staging / DATABASE_NAME)
    with open(staging / DATABASE_NAME, "rb") as handle:
        os.fsync(handle.fileno())
    step(f"wrote {DATABASE_NAME}")
    fsync_dir(staging)
    os.replace(staging, snapshot_dir)
    fsync_dir(snapshots)
    step("renamed the snapshot folder")
    switch_link(catalog.current, Path("snapshots") / run_id)  # THE switch: everything at once
    step(SWITCHED)
    link_fixed_paths(catalog)
    step("linked the fixed paths")
    _prune_snapshots(snapshots, keep={snapshot_dir.name, live.name if live else ""})
    step("pruned old snapshots")
    return Published(run_id, catalog.database, snapshot_dir, {name: frame.height for name, frame in tables.items()})


def link_fixed_paths(catalog: Catalog) -> None:
    """`correlations.duckdb` -> current/correlations.duckdb and `parquet` -> current, made once
    (and over the files of a warehouse published before `current` existed); they never change
    after, so they are no part of the switch."""
    fixed = {catalog.database: Path("current") / DATABASE_NAME, catalog.parquet_dir: Path("current")}
    for link, target in fixed.items():
        if link.is_symlink() and Path(os.readlink(link)) == target:
            continue
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)  # a plain folder from an older layout
        switch_link(link, target)


def _prune_snapshots(snapshots: Path, keep: set[str]) -> None:
    """Drop every snapshot folder but the new and the previous one (a reader may still hold
    it), and the leftovers of killed runs."""
    for partial in snapshots.glob(".*.partial"):
        shutil.rmtree(partial, ignore_errors=True)
    for old in snapshots.iterdir():
        if old.is_dir() and not old.name.startswith(".") and old.name not in keep:
            shutil.rmtree(old, ignore_errors=True)


def cleanup_leftovers(catalog: Catalog) -> int:
    """Remove what a killed run left behind (half-written snapshot folders, temp links and
    files); returns how many. Never touches the live snapshot."""
    removed = 0
    if not catalog.root.is_dir():
        return 0
    temps = [*catalog.root.glob(".correlations.*.duckdb.tmp*"), *catalog.root.glob(".parquet.*.tmp")]
    temps += leftover_links(catalog.root, catalog.current.name) + leftover_links(catalog.root, DATABASE_NAME)
    for leftover in sorted(set(temps)):
        leftover.unlink(missing_ok=True)
        removed += 1
    if catalog.snapshots_dir.is_dir():
        for partial in catalog.snapshots_dir.glob(".*.partial"):
            shutil.rmtree(partial, ignore_errors=True)
            removed += 1
    return removed


def recover(catalog: Catalog) -> dict | None:
    """Finish what a run killed after its switch left undone: the fixed links, and the run's
    record in the run log. Returns the record it appended, if any."""
    files = catalog.current_snapshot()
    if files is None or not catalog.current.is_symlink():
        return None
    link_fixed_paths(catalog)
    record = published_record(files)
    if record is None or any(r.get("run_id") == record.get("run_id") and r.get("status") == record.get("status") for r in run_log(catalog)):
        return None
    append_run_log(catalog, record)
    return record


def published_record(files: SnapshotFiles) -> dict | None:
    """The record of the run that made this snapshot (None for an older snapshot without one)."""
    try:
        return json.loads(files.run_record.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def read_snapshot_table(catalog: Catalog, name: str) -> pl.DataFrame | None:
    """A table of the current snapshot from its Parquet copy, or None when there is none."""
    files = catalog.current_snapshot()
    return snapshot_table(files, name) if files is not None else None


def snapshot_table(files: SnapshotFiles, name: str, columns: list[str] | None = None) -> pl.DataFrame | None:
    """One table of a resolved snapshot from its Parquet copy (only `columns` where given), or
    None when it has none (a partitioned table published before partitions existed is read
    from its one file)."""
    path = files.parquet(name)
    if path.is_dir():
        # every partition file holds the namespace column: no hive parsing of folder names
        # (polars' own misreads names with glob characters), and no glob of our paths either
        parts = sorted(path.glob(f"*/{PARTITION_FILE}"))
        return pl.read_parquet(parts, columns=columns, hive_partitioning=False, glob=False) if parts else None
    flat = files.dir / f"{name}.parquet"
    return pl.read_parquet(flat, columns=columns) if flat.is_file() else None


def append_run_log(catalog: Catalog, record: dict) -> None:
    """One line per finished run (published or failed) in runs.jsonl, outside any snapshot."""
    catalog.root.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True, default=str) + "\n"
    with open(catalog.run_log, "a+b") as handle:
        if handle.tell() > 0:
            handle.seek(-1, os.SEEK_END)
            if handle.read(1) != b"\n":
                line = "\n" + line  # a run killed mid-line: its torn line stays apart
        handle.write(line.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())


def run_log(catalog: Catalog) -> list[dict]:
    """Every run recorded in runs.jsonl (a torn last line from a killed run is skipped)."""
    path = catalog.run_log
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
