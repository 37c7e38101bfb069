"""Dataset names -> paths under the output folder: the one place that knows the layout.

A published snapshot is one folder, `snapshots/<run_id>/`, holding everything a reader or
the next run reads: the DuckDB file, every table as Parquet, the vectors, the incremental
state and the run's record. `current` is a link to the live one; publishing replaces that
link in one rename, so the whole snapshot changes at once. Read through `current_snapshot()`,
which resolves the link once: every file then comes from the same run.

`correlations.duckdb` and `parquet/` at the top stay as fixed links through `current`, for
users and tools that open those paths; a reader that needs the DuckDB file and the Parquet
files of the same run resolves `current_snapshot()` instead of opening both fixed paths."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

TABLES = ("memories", "relationships", "tier_distribution", "tier_links", "rejects", "runs")
DATABASE_NAME = "correlations.duckdb"
RUN_RECORD_NAME = "run.json"
# Tables whose Parquet copy is a folder partitioned by namespace, hive-style
# (`relationships/namespace=<ns>/part-0.parquet`): a reader of one namespace reads its partition.
PARTITIONED_TABLES = ("memories", "relationships")
PARTITION_KEY = "namespace"
PARTITION_FILE = "part-0.parquet"
# Folder names are at most 255 bytes on common filesystems; "namespace=" takes 10.
MAX_PARTITION_VALUE_CHARS = 240


def partition_value(namespace: str) -> str:
    """A namespace as its partition folder spells it: percent-encoded but for letters, digits
    and `_.-~`, so no `/`, glob character or space reaches a path (DuckDB, polars and Spark
    decode it when they read the folder as hive partitions)."""
    return quote(namespace, safe="")


def partition_folder(namespace: str) -> str:
    return f"{PARTITION_KEY}={partition_value(namespace)}"


def parquet_path(folder: Path, table: str) -> Path:
    return folder / table if table in PARTITIONED_TABLES else folder / f"{table}.parquet"


def parquet_glob(folder: Path, table: str) -> str:
    path = parquet_path(folder, table)
    return str(path / "*" / "*.parquet") if table in PARTITIONED_TABLES else str(path)


@dataclass(frozen=True)
class SnapshotFiles:
    """The files of one published snapshot (resolved: they do not move when `current` does)."""

    dir: Path
    database: Path

    @property
    def run_id(self) -> str:
        return self.dir.name

    def parquet(self, table: str) -> Path:
        """The table's Parquet copy: a file, or the folder of its partitions (PARTITIONED_TABLES)."""
        return parquet_path(self.dir, table)

    def parquet_glob(self, table: str) -> str:
        """What DuckDB's read_parquet takes for the table (with hive_partitioning for a folder)."""
        return parquet_glob(self.dir, table)

    @property
    def embeddings(self) -> Path:
        """The snapshot's vectors (id, embedding), read by retrieval."""
        return self.parquet("embeddings")

    @property
    def run_record(self) -> Path:
        """The published run's record (the summary of the run that made this snapshot)."""
        return self.dir / RUN_RECORD_NAME


@dataclass(frozen=True)
class Catalog:
    root: Path

    @property
    def current(self) -> Path:
        """The link to the live snapshot folder: the one switch a publish flips."""
        return self.root / "current"

    @property
    def snapshots_dir(self) -> Path:
        return self.root / "snapshots"

    def snapshot_dir(self, run_id: str) -> Path:
        return self.snapshots_dir / run_id

    def current_snapshot(self) -> SnapshotFiles | None:
        """The live snapshot's files, the link read once; None before the first publish.
        A warehouse published before `current` existed is read from its old places."""
        try:
            target = os.readlink(self.current)
        except FileNotFoundError:
            return self._legacy_snapshot()
        folder = self.root / target
        return SnapshotFiles(folder, folder / DATABASE_NAME) if folder.is_dir() else None

    def _legacy_snapshot(self) -> SnapshotFiles | None:
        database = self.root / DATABASE_NAME
        if not database.is_file() or database.is_symlink():
            return None
        folder = self.parquet_dir.resolve() if self.parquet_dir.exists() else self.root
        return SnapshotFiles(folder, database)

    @property
    def database(self) -> Path:
        """A fixed link to current/correlations.duckdb (opening it follows `current`)."""
        return self.root / DATABASE_NAME

    @property
    def parquet_dir(self) -> Path:
        """A fixed link to `current` (the live snapshot's Parquet files)."""
        return self.root / "parquet"

    def parquet(self, table: str) -> Path:
        return parquet_path(self.parquet_dir, table)

    def parquet_glob(self, table: str) -> str:
        return parquet_glob(self.parquet_dir, table)

    @property
    def run_log(self) -> Path:
        """Every run, failed ones too, one JSON line each; outside any snapshot."""
        return self.root / "runs.jsonl"

    @property
    def manual_dir(self) -> Path:
        return self.root / "manual"

    @property
    def manual_log(self) -> Path:
        return self.manual_dir / "relationships.jsonl"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def dashboard(self) -> Path:
        return self.root / "dashboard.html"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def work_dir(self) -> Path:
        """Runs' partitions while they run (`work/<run_id>/`); nothing there outlives its run."""
        return self.root / "work"

    @property
    def embedding_cache(self) -> Path:
        return self.cache_dir / "embeddings"

    @property
    def embeddings(self) -> Path:
        """The live snapshot's vectors through the fixed `parquet` link; readers that pair
        them with the DuckDB file use `current_snapshot().embeddings`."""
        return self.parquet_dir / "embeddings.parquet"
