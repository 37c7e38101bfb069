"""run_sql: ad-hoc SQL on the snapshot, read-only. A write fails with DuckDB's own error.

With a principal the query runs on a copy holding only what that principal may read (its
memories, the links between them, the read views, tier_distribution and tier_links over
them), made from the snapshot plus a watcher's deltas and opened read-only in its turn."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from crosstier.core.config import Settings
from crosstier.retrieval.live import delta_names, overlaid_connection, quoted_path, read_views
from crosstier.retrieval.snapshot import close_snapshot, open_snapshot

# Read-only alone still lets a statement reach other files (COPY TO, ATTACH ... READ_WRITE,
# read_csv('/etc/passwd')): ad-hoc SQL gets a connection shut off from everything else.
SANDBOX = {"enable_external_access": False, "lock_configuration": True}


def run_sql(
    query: str,
    *,
    principal: str | None = None,
    out: str | os.PathLike | None = None,
    settings: Settings | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(column names, rows) of one query on the current snapshot. duckdb.Error propagates
    (a write on the read-only database, a syntax error, ...)."""
    snapshot = open_snapshot(out, settings)
    deltas = delta_names(snapshot.files.dir)
    if principal is None and deltas:
        # a watcher's deltas: the overlay (its tables loaded first), then shut off like the rest
        close_snapshot(snapshot)
        con = overlaid_connection(snapshot.files.database, snapshot.files.dir, deltas)
        try:
            for name, value in SANDBOX.items():
                con.execute(f"set {name} = {str(value).lower()}")
            return _result(con.execute(query))
        finally:
            con.close()
    if principal is None:
        # DuckDB allows one configuration per file and process: the shared read connection
        # steps aside (the next read reopens it) for the sandboxed one.
        close_snapshot(snapshot)
        return _sandboxed_result(snapshot.files.database, query)
    folder = Path(tempfile.mkdtemp(prefix="ctc-sql-"))
    try:
        path = folder / "visible.duckdb"
        _visible_copy(_source(snapshot.files.database, snapshot.files.dir, deltas), path, principal)
        return _sandboxed_result(path, query)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _sandboxed_result(path: Path, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run the query on its own read-only connection that cannot touch any other file."""
    con = duckdb.connect(str(path), read_only=True, config=SANDBOX)
    try:
        return _result(con.execute(query))
    finally:
        con.close()


def _result(cursor) -> tuple[list[str], list[tuple[Any, ...]]]:
    if cursor.description is None:
        return [], []
    return [d[0] for d in cursor.description], cursor.fetchall()


def _source(database: Path, snapshot_dir: Path, deltas: tuple[str, ...]) -> duckdb.DuckDBPyConnection:
    """A connection where `memories` and `relationships` read as readers see them: the
    snapshot plus the watcher's deltas where there are any."""
    if deltas:
        return overlaid_connection(database, snapshot_dir, deltas)
    con = duckdb.connect()
    con.execute(f"attach {quoted_path(database)} as snap (read_only)")
    for table in ("memories", "relationships"):
        con.execute(f"create view {table} as select * from snap.{table}")
    return con


def _visible_copy(source: duckdb.DuckDBPyConnection, path: Path, principal: str) -> None:
    """A database with the principal's memories, the links between them and the read views,
    copied out of `source` (closed here)."""
    try:
        source.execute(f"attach {quoted_path(path)} as visible")
        source.execute(
            "create table visible.memories as select * from memories "
            "where readers is null or list_contains(readers, $principal)",
            {"principal": principal},
        )
        source.execute(
            "create table visible.relationships as select r.* from relationships as r "
            "semi join visible.memories as a on a.id = r.source_id semi join visible.memories as b on b.id = r.target_id"
        )
        source.execute("detach visible")
    finally:
        source.close()
    con = duckdb.connect(str(path))
    try:
        read_views(con)
        con.execute("checkpoint")
    finally:
        con.close()
