"""Publish a snapshot atomically: Parquet first (the source of truth), then the DuckDB file
rebuilt beside the old one and renamed into place, so a reader sees the old or the new,
never half, and a run that dies leaves the last snapshot as it was."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from crosstier import sql
from crosstier.core.catalog import Catalog

# Views created in every snapshot, one sql/<name>.sql each (the read side's named queries).
VIEWS = ("links_both_ways", "contradictions_to_review", "orphan_memories")
KEEP_SNAPSHOTS = 2  # the current one and the one before, for readers still holding it


@dataclass(frozen=True)
class Published:
    """What a publish wrote."""

    run_id: str
    database: Path
    snapshot_dir: Path
    rows: dict[str, int]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_parquet(frame: pl.DataFrame, path: Path) -> None:
    frame.write_parquet(path)
    with open(path, "rb") as handle:
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
    """The folder the `parquet` link points at, or None before the first publish."""
    link = catalog.parquet_dir
    if link.is_symlink() or link.is_dir():
        resolved = link.resolve()
        return resolved if resolved.is_dir() else None
    return None


def publish_snapshot(
    tables: dict[str, pl.DataFrame],
    catalog: Catalog,
    run_id: str,
    *,
    parquet_only: dict[str, pl.DataFrame] | None = None,
    before_swap: Callable[[], None] | None = None,
) -> Published:
    """Write every table as Parquet into a new snapshot folder, build the DuckDB file beside
    the live one, then swap both in with renames. `parquet_only` tables (vectors, incremental
    state) go into the snapshot folder but not the DuckDB file. Returns what was written."""
    root = catalog.root
    snapshots = root / "snapshots"
    snapshots.mkdir(parents=True, exist_ok=True)
    snapshot_dir = snapshots / run_id
    staging = snapshots / f".{run_id}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name, frame in {**tables, **(parquet_only or {})}.items():
        _write_parquet(frame, staging / f"{name}.parquet")
    _fsync_dir(staging)
    os.replace(staging, snapshot_dir)

    temp_db = root / f".correlations.{run_id}.duckdb.tmp"
    temp_db.unlink(missing_ok=True)
    try:
        snapshot_database(tables, temp_db)
        with open(temp_db, "rb") as handle:
            os.fsync(handle.fileno())
        if before_swap is not None:
            before_swap()
        # The DuckDB file first: it is what readers open. A reader holding the old file
        # keeps reading the old inode until it closes.
        os.replace(temp_db, catalog.database)
        link_tmp = root / f".parquet.{uuid.uuid4().hex}.tmp"
        os.symlink(Path("snapshots") / run_id, link_tmp)
        if catalog.parquet_dir.is_dir() and not catalog.parquet_dir.is_symlink():
            shutil.rmtree(catalog.parquet_dir)  # a plain folder from an older layout
        os.replace(link_tmp, catalog.parquet_dir)
        _fsync_dir(root)
    finally:
        temp_db.unlink(missing_ok=True)
    _prune_snapshots(snapshots, keep=snapshot_dir)
    return Published(run_id, catalog.database, snapshot_dir, {name: frame.height for name, frame in tables.items()})


def _prune_snapshots(snapshots: Path, keep: Path) -> None:
    """Drop old snapshot folders and leftovers of killed runs, keeping the newest few."""
    for partial in snapshots.glob(".*.partial"):
        shutil.rmtree(partial, ignore_errors=True)
    done = sorted((p for p in snapshots.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.stat().st_mtime)
    for old in done[:-KEEP_SNAPSHOTS]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


def cleanup_leftovers(catalog: Catalog) -> int:
    """Remove temp files a killed run left behind; returns how many. Never touches the live snapshot."""
    removed = 0
    if not catalog.root.is_dir():
        return 0
    for leftover in [*catalog.root.glob(".correlations.*.duckdb.tmp*"), *catalog.root.glob(".parquet.*.tmp")]:
        leftover.unlink(missing_ok=True)
        removed += 1
    snapshots = catalog.root / "snapshots"
    if snapshots.is_dir():
        for partial in snapshots.glob(".*.partial"):
            shutil.rmtree(partial, ignore_errors=True)
            removed += 1
    return removed


def read_snapshot_table(catalog: Catalog, name: str) -> pl.DataFrame | None:
    """A table of the current snapshot from its Parquet copy, or None when there is none."""
    snapshot = current_snapshot_dir(catalog)
    if snapshot is None:
        return None
    path = snapshot / f"{name}.parquet"
    return pl.read_parquet(path) if path.is_file() else None


def append_run_log(catalog: Catalog, record: dict) -> None:
    """One line per finished run (published or failed) in runs.jsonl, outside any snapshot."""
    catalog.root.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, sort_keys=True, default=str) + "\n"
    with open(catalog.root / "runs.jsonl", "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def run_log(catalog: Catalog) -> list[dict]:
    """Every run recorded in runs.jsonl (a torn last line from a killed run is skipped)."""
    path = catalog.root / "runs.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
