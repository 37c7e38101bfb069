"""Snapshot plus live deltas: the connection a reader gets while a watcher (`ctc watch`)
publishes deltas beside the snapshot.

An in-memory DuckDB with the snapshot's file attached read-only as `snap`, the deltas'
Parquet files loaded as tables, and views named like the snapshot's tables (`memories`,
`relationships`, ...) that overlay them (sql/live_memories.sql, sql/live_relationships.sql),
so every read query runs unchanged. No polars, Prefect or torch here.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from crosstier import sql

DELTAS_DIR = "deltas"  # transforms/publish/delta.py writes them; the read side only lists
CHECKPOINT_MARK = "checkpoint"
OVERLAID = {"memories": "live_memories", "relationships": "live_relationships"}
PASSED_THROUGH = ("rejects", "runs")
# the snapshot's summary tables, as views over the overlay: sql/<name>.sql is what the batch run publishes them with
SUMMARIES = ("tier_distribution", "tier_links")
REJECTS_FILE = "rejects.parquet"  # in a delta only when the rejects changed: then all of them
EMBEDDINGS_FILE = "embeddings.parquet"  # the vectors a delta computed again (retrieval/vectors.py)
VIEWS = ("links_both_ways", "contradictions_to_review", "orphan_memories")
DELTA_TABLES = ("memories", "changes", "relationships")  # each delta's files, loaded as delta_<name>
# what the overlay views read, derived from the delta tables whenever more deltas are loaded (in
# this order: the relationship rows read the owners); as views, every point lookup planned the
# deltas' grouping again (~5 ms, where a poll of the snapshot alone costs ~1 ms)
DERIVED_TABLES = ("delta_memory_ids", "delta_memory_rows", "delta_link_owners", "delta_relationship_rows")


def derived_tables(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)build the tables the overlay views read from the delta tables loaded now."""
    for table in DERIVED_TABLES:
        con.execute(f"create or replace table {table} as {sql.load(table)}")


def read_views(con: duckdb.DuckDBPyConnection) -> None:
    """The views a reader gets over the connection's memories and relationships:
    tier_distribution and tier_links, and links_both_ways, contradictions_to_review and
    orphan_memories."""
    for name in SUMMARIES:
        con.execute(f"create view {name} as {sql.load(name)}")
    for view in VIEWS:
        con.execute(sql.load(view))


def delta_names(snapshot_dir: Path) -> tuple[str, ...]:
    """Names of the deltas a reader needs, oldest first: the latest checkpoint (everything
    since the snapshot) and those after it. A partial delta is not listed."""
    folder = snapshot_dir / DELTAS_DIR
    try:
        names = sorted((name for name in os.listdir(folder) if name.isdigit()), key=int)
    except (FileNotFoundError, NotADirectoryError):
        return ()
    for at in range(len(names) - 1, -1, -1):
        if os.path.exists(folder / names[at] / CHECKPOINT_MARK):
            return tuple(names[at:])
    return tuple(names)


def quoted_path(path: Path) -> str:
    """A path as a DuckDB string literal (ATTACH takes no bound parameter)."""
    return "'" + path.as_posix().replace("'", "''") + "'"


def extended_overlay(con: duckdb.DuckDBPyConnection, snapshot_dir: Path, loaded: tuple[str, ...], names: tuple[str, ...]) -> bool:
    """Load into an overlaid connection of `loaded` deltas the ones `names` adds after them,
    in one transaction: True when done, False when the caller must open it afresh (another
    checkpoint came, the rejects changed, or a delta has columns the tables lack). Reopening
    read every delta since the checkpoint again (~0.14 s at 100k memories) per delta a
    watcher published, which every reader paid before it saw a new memory."""
    if not loaded or len(names) <= len(loaded) or names[: len(loaded)] != loaded:
        return False
    folders = [snapshot_dir / DELTAS_DIR / name for name in names[len(loaded):]]
    if any((folder / REJECTS_FILE).exists() for folder in folders):
        return False
    con.execute("begin transaction")
    try:
        for table in DELTA_TABLES:
            files = [str(folder / f"{table}.parquet") for folder in folders]
            con.execute(f"insert into delta_{table} by name select * from read_parquet($files, union_by_name = true)", {"files": files})
        derived_tables(con)
    except duckdb.Error:
        con.execute("rollback")
        return False
    con.execute("commit")
    return True


def overlaid_connection(database: Path, snapshot_dir: Path, names: tuple[str, ...]) -> duckdb.DuckDBPyConnection:
    """A connection where the snapshot's tables read as snapshot plus the named deltas."""
    con = duckdb.connect()
    try:
        con.execute(f"attach {quoted_path(database)} as snap (read_only)")
        folders = [snapshot_dir / DELTAS_DIR / name for name in names]
        for table in DELTA_TABLES:
            files = [str(folder / f"{table}.parquet") for folder in folders]
            con.execute(f"create table delta_{table} as select * from read_parquet($files, union_by_name = true)", {"files": files})
        derived_tables(con)
        for table, query in OVERLAID.items():
            con.execute(f"create view {table} as {sql.load(query)}")
        tables = {row[0] for row in con.execute("select table_name from duckdb_tables() where database_name = 'snap'").fetchall()}
        with_rejects = [folder / REJECTS_FILE for folder in folders if (folder / REJECTS_FILE).exists()]
        if with_rejects:  # the latest delta that carries rejects holds all of them
            con.execute("create table rejects as select * from read_parquet($file)", {"file": str(with_rejects[-1])})
            tables.discard("rejects")
        for table in PASSED_THROUGH:
            if table in tables:
                con.execute(f"create view {table} as select * from snap.{table}")
        read_views(con)
    except BaseException:
        con.close()
        raise
    return con
