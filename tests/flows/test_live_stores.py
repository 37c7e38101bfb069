"""The watcher follows SQLite and PostgreSQL stores: each tick asks every store whether it
changed (transforms/stores/changes.py, as flows/watch.py does), a changed store is read again
whole, and a reader of snapshot plus deltas then sees what a batch run over the store sees.
In process (the watcher's state driven by hand, no subprocess); vectors are provided."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import psycopg
import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.config import load_settings
from crosstier.transforms.stores.changes import StoreChanges
from live_helpers import memory, view_memory_ids, view_rows
from reliability.pgserver import fresh_database, server_dsn

pytest.importorskip("prefect")

from crosstier.flows.correlate import correlate  # noqa: E402
from crosstier.flows.watch import published, snapshot_frames  # noqa: E402
from crosstier.transforms.live_state import advanced, seeded  # noqa: E402

DSN_ENV = "CTC_TEST_LIVE_PG_DSN"


def no_model(texts):
    raise AssertionError(f"the model was asked for {texts.height} texts: every memory here has a provided vector")


def row(i: int, **kw) -> tuple:
    record = memory(i, **kw)
    return record["id"], record["tier"], record["content"], record["timestamp"], json.dumps(record["embedding"])


class Watched:
    """A watcher's state and its store probes, ticked by hand as flows/watch.py ticks them."""

    def __init__(self, config: Path, vectors_for=no_model):
        self.settings = load_settings(str(config))
        self.catalog = Catalog(self.settings.output_dir)
        self.files = self.catalog.current_snapshot()
        self.vectors_for = vectors_for
        self.changes = StoreChanges(self.settings.stores)
        self.changes.mark()
        step = seeded(self.settings, self.files.run_id, snapshot_frames(self.files), self.catalog.manual_log, vectors_for)
        published(self.files, step)
        self.state = step.state

    def tick(self, timeout: float = 5.0) -> list[str]:
        """The stores read on the first tick that finds a change (none within timeout: [])."""
        deadline = time.monotonic() + timeout
        while True:
            names = self.changes.changed(set())  # no file event: the probes alone decide
            if names or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if names:
            step = advanced(self.state, names, self.settings, self.catalog.manual_log, self.vectors_for)
            published(self.files, step)
            self.state = step.state
            self.changes.read(names)
        return names


def batch_view(config: Path, out: Path) -> tuple[list[str], list[tuple]]:
    assert correlate(config_path=str(config), out=str(out), full=True)["status"] == "published"
    return view_memory_ids(out), view_rows(out)


def config_for(folder: Path, store: str) -> Path:
    config = folder / "correlator.toml"
    config.write_text(f'[output]\ndir = "warehouse"\n\n{store}\n[scoring]\nmin_correlation_score = 0.5\nmax_links_per_memory = 2\n', encoding="utf-8")
    return config


def test_a_sqlite_store_in_wal_mode_is_followed_by_its_data_version(tmp_path):
    db = tmp_path / "memories.sqlite"
    writer = sqlite3.connect(db, isolation_level=None)  # an agent's connection, open throughout
    writer.execute("pragma journal_mode=wal")
    writer.execute("create table memories (id text primary key, tier text, content text, timestamp text, embedding text)")
    writer.executemany("insert into memories values (?, ?, ?, ?, ?)", [row(i) for i in range(6)])
    config = config_for(tmp_path, f'[[stores]]\nname = "notes"\nkind = "sqlite"\npath = "{db.as_posix()}"\ntable = "memories"\n')
    correlate(config_path=str(config))
    watched = Watched(config)
    try:
        out = watched.settings.output_dir
        assert watched.tick(timeout=0.3) == []  # nothing written: nothing read

        writer.executemany("insert into memories values (?, ?, ?, ?, ?)", [row(i) for i in range(6, 9)])  # into the WAL
        assert watched.tick() == ["notes"]
        assert {"m006", "m007", "m008"} <= set(view_memory_ids(out))

        writer.execute("delete from memories where id = 'm001'")
        writer.execute("update memories set content = ?, embedding = ? where id = 'm003'", row(3, topic=2, text="python typing rules, edited")[2::2])
        assert watched.tick() == ["notes"]
        assert (view_memory_ids(out), view_rows(out)) == batch_view(config, tmp_path / "batch")
        assert "m001" not in view_memory_ids(out)
    finally:
        watched.changes.close()
        writer.close()


def test_a_parquet_store_rewritten_by_a_rename_and_a_markdown_workspace_are_followed(tmp_path):
    import polars as pl

    from crosstier.flows.watch import vector_source

    parquet = tmp_path / "ops.parquet"
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)

    def write_parquet(ids: list[int], edited: dict[int, str] | None = None) -> None:
        rows = [row(i, text=(edited or {}).get(i)) for i in ids]
        frame = pl.DataFrame({"id": [r[0] for r in rows], "tier": [r[1] for r in rows], "content": [r[2] for r in rows],
                              "timestamp": [r[3] for r in rows], "embedding": [json.loads(r[4]) for r in rows]})
        frame.write_parquet(tmp_path / "ops.tmp.parquet")
        (tmp_path / "ops.tmp.parquet").replace(parquet)  # as a writer replaces a Parquet file: whole, by a rename

    write_parquet(list(range(6)))
    (workspace / "memory" / "2024-05-01.md").write_text("# 2024-05-01\n\n## 09:00 Deploy\n\n- Deployed the staging nginx proxy config.\n")
    config = config_for(tmp_path, f'[[stores]]\nname = "ops"\nkind = "parquet"\npath = "{parquet.as_posix()}"\n\n'
                                  f'[[stores]]\nname = "ws"\nkind = "markdown"\npath = "{workspace.as_posix()}"\n')
    correlate(config_path=str(config))
    settings = load_settings(str(config))
    watched = Watched(config, vector_source(settings, Catalog(settings.output_dir).cache_dir))  # markdown memories are embedded
    try:
        out = watched.settings.output_dir
        assert watched.tick(timeout=0.3) == []
        write_parquet([0, 2, 3, 4, 5, 6], {3: "python typing rules, edited"})  # m001 deleted, m003 edited, m006 added
        assert watched.tick() == ["ops"]
        (workspace / "memory" / "2024-05-02.md").write_text("# 2024-05-02\n\n## 10:00 Backup\n\n- Postgres replica lag during the nightly backup.\n")
        assert watched.tick() == ["ws"]
        ids = view_memory_ids(out)
        assert "m001" not in ids and "m006" in ids
        assert (ids, view_rows(out)) == batch_view(config, tmp_path / "batch")
    finally:
        watched.changes.close()


# A statement-level trigger in the test's own database, as the README tells a user to add:
# the product only LISTENs.
NOTIFY_TRIGGER = """
create function ctc_notify_memories() returns trigger language plpgsql as $$
begin
  perform pg_notify('ctc_memories', tg_table_name);
  return null;
end $$;
create trigger ctc_memories_changed after insert or update or delete or truncate on memories
  for each statement execute function ctc_notify_memories();
"""


@pytest.mark.postgres
@pytest.mark.parametrize("follow", ['notify_channel = "ctc_memories"', 'cursor_column = "updated_at"'])
def test_a_postgres_store_is_followed_by_notify_or_a_cursor_column(tmp_path, monkeypatch, follow):
    with fresh_database(server_dsn()) as dsn:
        monkeypatch.setenv(DSN_ENV, dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create table memories (id text primary key, tier text, content text, timestamp text, embedding float8[],"
                         " updated_at timestamptz not null default clock_timestamp())")
            conn.execute(NOTIFY_TRIGGER)
        store = f'[[stores]]\nname = "notes"\nkind = "postgres"\ndsn_env = "{DSN_ENV}"\ntable = "memories"\n{follow}\n'
        config = config_for(tmp_path, store)

        def write(statement: str, rows: list[tuple] = ()) -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                if rows:
                    conn.cursor().executemany(statement, [(*r[:4], json.loads(r[4])) for r in rows])
                else:
                    conn.execute(statement)

        write("insert into memories (id, tier, content, timestamp, embedding) values (%s, %s, %s, %s, %s)", [row(i) for i in range(6)])
        correlate(config_path=str(config))
        watched = Watched(config)
        try:
            out = watched.settings.output_dir
            assert watched.tick(timeout=0.3) == []
            write("insert into memories (id, tier, content, timestamp, embedding) values (%s, %s, %s, %s, %s)", [row(i) for i in range(6, 8)])
            assert watched.tick() == ["notes"]
            assert {"m006", "m007"} <= set(view_memory_ids(out))
            write("delete from memories where id = 'm002'")
            assert watched.tick() == ["notes"]
            write("update memories set content = 'python typing rules, edited', updated_at = clock_timestamp() where id = 'm004'")
            assert watched.tick() == ["notes"]
            assert (view_memory_ids(out), view_rows(out)) == batch_view(config, tmp_path / "batch")
            assert "m002" not in view_memory_ids(out)
        finally:
            watched.changes.close()
