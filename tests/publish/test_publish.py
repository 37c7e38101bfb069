"""Publish: Parquet + DuckDB snapshot swapped in atomically; readers only ever read."""

from __future__ import annotations

import json
import os
import shutil

import duckdb
import polars as pl
import pytest

from crosstier.core.catalog import Catalog
from crosstier.transforms.publish.snapshot import cleanup_leftovers, current_snapshot_dir, publish_snapshot, read_snapshot_table
from crosstier.transforms.schema import MEMORY_SCHEMA, empty_rejects, empty_relationships


def memories(ids: list[str]) -> pl.DataFrame:
    rows = [{"id": i, "tier": "semantic", "content": f"fact {i}", "namespace": "default", "store": "s", "content_hash": i, "entities": [], "refs": []} for i in ids]
    return pl.DataFrame(rows, schema=MEMORY_SCHEMA).drop("embedding").with_columns(terms=pl.lit(["fact"]))


def tables(ids: list[str]) -> dict[str, pl.DataFrame]:
    return {"memories": memories(ids), "relationships": empty_relationships(), "rejects": empty_rejects()}


def test_publish_writes_parquet_and_a_read_only_database(tmp_path):
    catalog = Catalog(tmp_path)
    published = publish_snapshot(tables(["a", "b"]), catalog, "run1", parquet_only={"state": pl.DataFrame({"x": [1]})})
    assert published.rows == {"memories": 2, "relationships": 0, "rejects": 0}
    assert read_snapshot_table(catalog, "memories").get_column("id").to_list() == ["a", "b"]
    assert read_snapshot_table(catalog, "state").height == 1
    con = duckdb.connect(str(catalog.database), read_only=True)
    try:
        assert con.execute("select count(*) from orphan_memories").fetchall() == [(2,)]
        assert "state" not in {r[0] for r in con.execute("show tables").fetchall()}
        with pytest.raises(duckdb.Error, match="read-only"):
            con.execute("delete from memories")
    finally:
        con.close()


def test_republish_swaps_and_keeps_a_reader_on_its_snapshot(tmp_path):
    catalog = Catalog(tmp_path)
    publish_snapshot(tables(["a"]), catalog, "run1")
    reader = duckdb.connect(str(catalog.database), read_only=True)
    try:
        publish_snapshot(tables(["a", "b", "c"]), catalog, "run2")
        assert reader.execute("select count(*) from memories").fetchall() == [(1,)]  # its old snapshot
    finally:
        reader.close()
    fresh = duckdb.connect(str(catalog.database), read_only=True)
    assert fresh.execute("select count(*) from memories").fetchall() == [(3,)]
    fresh.close()
    assert current_snapshot_dir(catalog).name == "run2"


def test_old_snapshots_pruned_and_leftovers_cleaned(tmp_path):
    catalog = Catalog(tmp_path)
    for run in ("run1", "run2", "run3"):
        publish_snapshot(tables(["a"]), catalog, run)
    assert sorted(p.name for p in (tmp_path / "snapshots").iterdir()) == ["run2", "run3"]
    (tmp_path / ".correlations.run9.duckdb.tmp").write_bytes(b"half")
    (tmp_path / "snapshots" / ".run9.partial").mkdir()
    assert cleanup_leftovers(catalog) == 2
    assert current_snapshot_dir(catalog).name == "run3"


def test_one_switch_makes_the_whole_snapshot_current_and_the_fixed_paths_follow_it(tmp_path):
    catalog = Catalog(tmp_path)
    publish_snapshot(tables(["a"]), catalog, "run1", parquet_only={"embeddings": pl.DataFrame({"id": ["a"]})}, record={"run_id": "run1", "status": "published"})
    files = catalog.current_snapshot()
    assert os.readlink(catalog.current) == "snapshots/run1" and files.dir == tmp_path / "snapshots" / "run1"
    assert sorted(p.name for p in files.dir.iterdir()) == ["correlations.duckdb", "embeddings.parquet", "memories", "rejects.parquet", "relationships", "run.json"]
    assert json.loads(files.run_record.read_text()) == {"run_id": "run1", "status": "published"}
    # the old paths stay: fixed links through `current`, made once
    assert os.readlink(catalog.database) == "current/correlations.duckdb" and os.readlink(catalog.parquet_dir) == "current"
    publish_snapshot(tables(["a", "b"]), catalog, "run2")
    assert os.readlink(catalog.database) == "current/correlations.duckdb"
    assert duckdb.sql(f"select count(*) from read_parquet('{catalog.parquet_glob('memories')}')").fetchall() == [(2,)]
    con = duckdb.connect(str(catalog.database), read_only=True)
    assert con.execute("select count(*) from memories").fetchall() == [(2,)]
    con.close()
    with pytest.raises(FileExistsError, match="live one"):
        publish_snapshot(tables(["a"]), catalog, "run2")


def test_memories_and_relationships_are_partitioned_by_namespace_and_a_reader_of_one_reads_its_partition(tmp_path):
    odd = ["default", "a/b", "x y%*[1]", "ünï", ".."]
    frame = pl.concat([memories([f"{ns}-{i}" for i in range(3)]).with_columns(namespace=pl.lit(ns)) for ns in odd])
    relationships = empty_relationships()
    catalog = Catalog(tmp_path)
    publish_snapshot({"memories": frame, "relationships": relationships, "rejects": empty_rejects()}, catalog, "run1")
    files = catalog.current_snapshot()
    folders = sorted(p.name for p in files.parquet("memories").iterdir())
    assert folders == sorted(["namespace=default", "namespace=a%2Fb", "namespace=x%20y%25%2A%5B1%5D", "namespace=%C3%BCn%C3%AF", "namespace=.."])
    # the same rows back, from polars (state for the next run) and from DuckDB reading hive partitions
    assert read_snapshot_table(catalog, "memories").sort("id").equals(frame.sort("id"))
    by_namespace = "select namespace, count(*) from read_parquet($glob, hive_partitioning = true) group by all order by all"
    assert duckdb.execute(by_namespace, {"glob": files.parquet_glob("memories")}).fetchall() == sorted((ns, 3) for ns in odd)
    # a reader of one namespace opens its partition alone: another one, broken, is never read
    (files.parquet("memories") / "namespace=default" / "part-0.parquet").write_bytes(b"not parquet")
    one = "select id from read_parquet($glob, hive_partitioning = true) where namespace = $ns order by id"
    assert duckdb.execute(one, {"glob": files.parquet_glob("memories"), "ns": "x y%*[1]"}).fetchall() == [(f"x y%*[1]-{i}",) for i in range(3)]
    with pytest.raises(duckdb.Error):
        duckdb.execute("select count(*) from read_parquet($glob, hive_partitioning = true)", {"glob": files.parquet_glob("memories")}).fetchall()
    # an empty table is still a readable one, with its columns
    empty = duckdb.execute("select * from read_parquet($glob, hive_partitioning = true)", {"glob": files.parquet_glob("relationships")})
    assert empty.fetchall() == [] and [d[0] for d in empty.description] == relationships.columns
    assert read_snapshot_table(catalog, "relationships").schema == relationships.schema


def test_a_warehouse_of_the_older_layout_is_read_then_switched_over(tmp_path):
    """Before `current` existed: correlations.duckdb was a file at the top and parquet/ a link."""
    catalog = Catalog(tmp_path)
    publish_snapshot(tables(["a"]), catalog, "old")
    old_dir = catalog.current_snapshot().dir
    shutil.copyfile(old_dir / "correlations.duckdb", tmp_path / "legacy.duckdb")
    for path in (catalog.current, catalog.database, catalog.parquet_dir):
        path.unlink()
    catalog.parquet_dir.symlink_to("snapshots/old")
    (tmp_path / "legacy.duckdb").rename(catalog.database)
    (old_dir / "correlations.duckdb").unlink()
    (old_dir / "run.json").unlink()
    legacy = catalog.current_snapshot()
    assert legacy.database == catalog.database and legacy.dir == old_dir
    assert read_snapshot_table(catalog, "memories").height == 1
    publish_snapshot(tables(["a", "b", "c"]), catalog, "new")
    assert catalog.database.is_symlink() and catalog.current_snapshot().run_id == "new"
    con = duckdb.connect(str(catalog.database), read_only=True)
    assert con.execute("select count(*) from memories").fetchall() == [(3,)]
    con.close()


def test_a_snapshot_folder_left_by_a_run_killed_before_its_switch_is_replaced(tmp_path):
    catalog = Catalog(tmp_path)
    publish_snapshot(tables(["a"]), catalog, "run1")
    stale = tmp_path / "snapshots" / "run2"
    stale.mkdir()
    (stale / "memories.parquet").write_bytes(b"half")
    publish_snapshot(tables(["a", "b"]), catalog, "run2")
    assert read_snapshot_table(catalog, "memories").height == 2


def test_a_reader_whose_resolved_snapshot_was_pruned_resolves_current_again(tmp_path, monkeypatch):
    from crosstier.core.catalog import SnapshotFiles
    from crosstier.retrieval.snapshot import close_all, open_snapshot

    catalog = Catalog(tmp_path)
    publish_snapshot(tables(["a", "b"]), catalog, "run1")
    gone = tmp_path / "snapshots" / "pruned"
    real, calls = Catalog.current_snapshot, []

    def first_a_pruned_one(self):
        calls.append(1)
        return SnapshotFiles(gone, gone / "correlations.duckdb") if len(calls) == 1 else real(self)

    monkeypatch.setattr(Catalog, "current_snapshot", first_a_pruned_one)
    snapshot = open_snapshot(tmp_path)
    try:
        assert snapshot.run_id == "run1" and len(calls) == 2
        assert snapshot.query("select count(*) as n from memories") == [{"n": 2}]
    finally:
        close_all()
