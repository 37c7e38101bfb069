"""The published snapshot as the read side sees it: one read-only DuckDB connection per
snapshot file, the settings, and who may read what.

Nothing here imports polars, numpy, Prefect or torch: `ctc correlations ID` stays fast.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import duckdb

from crosstier import sql
from crosstier.core.catalog import Catalog, SnapshotFiles
from crosstier.core.config import ConfigError, Settings, load_settings, settings_from_dict
from crosstier.retrieval.errors import NoSnapshotError
from crosstier.retrieval.live import delta_names, extended_overlay, overlaid_connection

_LOCK = threading.Lock()
_OPEN: dict[Path, "Snapshot"] = {}


def default_settings() -> Settings:
    """The config file's settings, or the built-in defaults (with environment overrides)
    when there is no config file."""
    try:
        return load_settings()
    except ConfigError as exc:
        if "config file not found" not in str(exc):
            raise
        return settings_from_dict({}, base=Path.cwd())


def warehouse(out: str | os.PathLike | None, settings: Settings | None = None) -> Path:
    """The warehouse folder: `out`, else output.dir of the settings."""
    if out is not None:
        return Path(out).resolve()
    return (settings or default_settings()).output_dir


def visible(readers: list[str] | None, principal: str | None) -> bool:
    """May `principal` read a memory with these readers? No principal: the trusted caller
    (sees everything); no readers list: everyone in the namespace."""
    return principal is None or readers is None or principal in readers


class SnapshotIdentity(NamedTuple):
    """What identifies a version of the snapshot a reader has open: the folder `current`
    points at, the DuckDB file's inode, size and mtime, the live deltas (`ctc watch`) and the
    run id. Two versions with the same base and more deltas are read as an extension."""

    folder: str
    inode: int
    size: int
    mtime_ns: int
    deltas: tuple[str, ...]
    run_id: str | None

    def same_base(self, other: SnapshotIdentity) -> bool:
        """The same snapshot file and run, whatever deltas either has."""
        return self._replace(deltas=()) == other._replace(deltas=())


@dataclass
class Snapshot:
    """One open snapshot: its files (resolved through `current` once), the DuckDB file
    opened read-only, and what identifies its version."""

    catalog: Catalog
    files: SnapshotFiles
    con: duckdb.DuckDBPyConnection
    identity: SnapshotIdentity

    def rows(self, name: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """All rows of sql/<name>.sql with bound parameters, as dicts."""
        return self.query(sql.load(name), params)

    def query(self, text: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """All rows of one statement as dicts (fetched whole: nothing is left open)."""
        with _LOCK:
            cursor = self.con.execute(text, params or {})
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, row)) for row in cursor.fetchall()]

    @property
    def run_id(self) -> str | None:
        return self.identity.run_id


def _current_files(catalog: Catalog) -> tuple[SnapshotFiles, SnapshotIdentity]:
    """The live snapshot's files and what changes when a publish switches `current`:
    the folder it points at, and the DuckDB file's inode, size and mtime."""
    files = catalog.current_snapshot()
    try:
        if files is None:
            raise FileNotFoundError
        stat = files.database.stat()
    except FileNotFoundError:
        raise NoSnapshotError(
            f"no snapshot in {catalog.root}: {catalog.database.name} is missing (run `ctc run` first, or pass --out)"
        ) from None
    # the live deltas (`ctc watch`) are part of the version: a new one reopens the view
    return files, SnapshotIdentity(str(files.dir), stat.st_ino, stat.st_size, stat.st_mtime_ns, delta_names(files.dir), files.run_id)


def open_snapshot(out: str | os.PathLike | None = None, settings: Settings | None = None) -> Snapshot:
    """The current snapshot of the warehouse, opened read-only; reused while `current` points
    at the same one, reopened after a publish switched it."""
    catalog = Catalog(warehouse(out, settings))
    key = catalog.root
    for attempt in range(3):
        try:
            files, identity = _current_files(catalog)
        except NoSnapshotError:
            if attempt == 2 or not catalog.current.is_symlink():
                raise
            continue  # the folder it resolved to was pruned by later publishes: resolve again
        with _LOCK:
            current = _OPEN.get(key)
            if current is not None and current.identity == identity:
                return current
            if current is not None and current.identity.same_base(identity):
                # the same snapshot with deltas after the ones loaded: only the new ones are read
                if extended_overlay(current.con, files.dir, current.identity.deltas, identity.deltas):
                    current.identity = identity
                    return current
            try:
                deltas = identity.deltas
                if deltas:
                    con = overlaid_connection(files.database, files.dir, deltas)
                else:
                    con = duckdb.connect(str(files.database), read_only=True)
            except duckdb.IOException:
                if attempt == 2:
                    raise
                continue  # two publishes pruned it between the readlink and the open: resolve again
            if current is not None:
                current.con.close()  # a reader holding its rows keeps them; the old file goes when pruned
            snapshot = Snapshot(catalog, files, con, identity)
            _OPEN[key] = snapshot
            return snapshot
    raise AssertionError("unreachable")


def close_snapshot(snapshot: Snapshot) -> None:
    """Close one snapshot's shared connection; the next open_snapshot reopens it."""
    with _LOCK:
        if _OPEN.get(snapshot.catalog.root) is snapshot:
            del _OPEN[snapshot.catalog.root]
        snapshot.con.close()


def close_all() -> None:
    """Close every snapshot this process opened (tests, and before deleting a warehouse)."""
    with _LOCK:
        for snapshot in _OPEN.values():
            snapshot.con.close()
        _OPEN.clear()


def memories_by_id(snapshot: Snapshot, ids: list[str]) -> dict[str, dict[str, Any]]:
    """id -> {id, tier, namespace, readers, timestamp, content} for the ids in the snapshot."""
    if not ids:
        return {}
    return {row["id"]: row for row in snapshot.rows("memories_by_id", {"ids": sorted(set(ids))})}


def embedding_model(snapshot: Snapshot, settings: Settings) -> str:
    """The model that embedded the snapshot (its latest published run), else the configured one."""
    rows = snapshot.query(
        "select embedding_model from runs where embedding_model is not null and coalesce(status, 'published') = 'published' "
        "order by started_at desc nulls last, run_id desc limit 1"
    )
    return rows[0]["embedding_model"] if rows else settings.embedding.model
