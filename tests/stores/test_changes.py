"""Has a store changed since the watcher read it (transforms/stores/changes.py)? SQLite by
its data_version (a WAL commit that leaves the main file as it was, a same-size rewrite, a
replaced file), PostgreSQL by NOTIFY on a channel or by a cursor column, against a real
server; and the mark/changed/read bookkeeping the watcher's loop relies on."""

from __future__ import annotations

import os
import sqlite3
import time

import psycopg
import pytest

from crosstier.core.config import StoreConfig
from crosstier.transforms.stores import changes
from reliability.pgserver import fresh_database, server_dsn

DSN_ENV = "CTC_TEST_WATCH_DSN"


def sqlite_store(path) -> StoreConfig:
    return StoreConfig(name="q", kind="sqlite", path=str(path), table="memories")


def file_state(path) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns


def test_a_wal_commit_is_seen_although_the_main_file_is_unchanged(tmp_path):
    db = tmp_path / "m.sqlite"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("pragma journal_mode=wal")
    writer.execute("create table memories (id text primary key, content text)")
    writer.execute("insert into memories values ('a', 'one')")
    writer.execute("pragma wal_checkpoint(truncate)")  # everything in the main file, the WAL empty
    probe = changes.SqliteProbe(sqlite_store(db))
    try:
        first = probe.token()
        assert first[0] == "data_version" and probe.token() == first  # nothing written: nothing to read
        main_before = file_state(db)
        writer.execute("insert into memories values ('b', 'two')")  # lands in the WAL only
        assert file_state(db) == main_before
        second = probe.token()
        assert second != first
        writer.execute("update memories set content = 'uno' where id = 'a'")
        assert probe.token() != second
        writer.execute("select count(*) from memories").fetchone()  # a read by someone else is no change
        third = probe.token()
        assert probe.token() == third
    finally:
        probe.close()
        writer.close()


def test_a_rollback_journal_rewrite_a_replaced_file_and_a_busy_writer(tmp_path):
    db = tmp_path / "m.sqlite"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("create table memories (id text primary key, content text)")
    writer.execute("insert into memories values ('a', 'one')")
    probe = changes.SqliteProbe(sqlite_store(db))
    try:
        first = probe.token()
        writer.execute("update memories set content = 'two' where id = 'a'")  # same size, maybe same mtime
        second = probe.token()
        assert second != first

        writer.execute("begin exclusive")  # a writer mid-commit: the probe does not wait for it
        writer.execute("insert into memories values ('b', 'three')")
        started = time.monotonic()
        assert probe.token() == second  # no decision now: asked again next tick
        assert time.monotonic() - started < 2
        writer.execute("commit")
        assert probe.token() != second

        other = tmp_path / "new.sqlite"
        with sqlite3.connect(other) as con:
            con.execute("create table memories (id text primary key, content text)")
        before = probe.token()
        os.replace(other, db)  # replaced by a rename: the old connection would never see it
        replaced = probe.token()
        assert replaced != before and replaced[1] == (os.stat(db).st_dev, os.stat(db).st_ino)
        assert probe.token() == replaced
    finally:
        probe.close()
        writer.close()


def test_a_file_that_is_not_a_database_yet_is_followed_by_its_bytes(tmp_path):
    db = tmp_path / "m.sqlite"
    probe = changes.SqliteProbe(sqlite_store(db))
    assert probe.token() == ("missing",)
    db.write_bytes(b"not a database at all, just some bytes" * 4)
    garbage = probe.token()
    assert garbage[0] == "files"
    db.write_bytes(b"other bytes")
    assert probe.token() != garbage
    db.unlink()
    with sqlite3.connect(db) as con:
        con.execute("create table memories (id text)")
    assert probe.token()[0] == "data_version"
    probe.close()


class Fixed:
    """A probe whose token a test sets."""

    def __init__(self, value):
        self.value = value

    def token(self):
        return self.value

    def close(self):
        pass


def test_a_store_is_read_again_when_its_token_moved_or_an_event_names_its_file(tmp_path):
    notes = StoreConfig(name="notes", kind="jsonl", path=str(tmp_path / "notes.jsonl"))
    workspace = StoreConfig(name="ws", kind="markdown", path=str(tmp_path / "ws"))
    db = StoreConfig(name="db", kind="sqlite", path=str(tmp_path / "m.sqlite"), table="memories")
    probes = {"notes": Fixed(1), "ws": Fixed(1), "db": Fixed(1)}
    watched = changes.StoreChanges([notes, workspace, db], probes)
    watched.mark()
    assert watched.changed(set()) == []
    assert watched.changed({str(tmp_path / "notes.jsonl")}) == ["notes"]
    assert watched.changed({str(tmp_path / "ws" / "memory" / "2026-12-01.md")}) == ["ws"]
    assert watched.changed({str(tmp_path / "m.sqlite-shm"), str(tmp_path / "m.sqlite")}) == []  # its data_version decides
    probes["db"].value = 2
    assert watched.changed(set()) == ["db"]
    probes["db"].value = 3  # written while the batch read it: the token of the tick is kept
    watched.read(["db"])
    assert watched.changed(set()) == ["db"]
    watched.read(["db"])
    assert watched.changed(set()) == []


def test_a_postgres_store_without_a_channel_or_cursor_is_not_followed():
    plain = StoreConfig(name="pg", kind="postgres", dsn_env=DSN_ENV, table="memories")
    cursor = StoreConfig(name="pg2", kind="postgres", dsn_env=DSN_ENV, table="memories", cursor_column="updated_at")
    watched = changes.StoreChanges([plain, cursor, StoreConfig(name="j", kind="jsonl", path="/x.jsonl")], {"pg": Fixed(1), "pg2": Fixed(1), "j": Fixed(1)})
    assert watched.unfollowed() == ["pg"]
    assert changes.PostgresProbe(plain).token() == (None, None)  # never connects


# ---------------------------------------------------------------- PostgreSQL, a real server

MEMORIES = "create table memories (id text primary key, tier text, content text, updated_at timestamptz not null default now())"
# What the README tells a user to add: a statement-level trigger that notifies the channel.
TRIGGER = """
create function ctc_notify() returns trigger language plpgsql as $$
begin
  perform pg_notify('memories changed', tg_table_name);
  return null;
end $$;
create trigger ctc_memories_changed after insert or update or delete or truncate on memories
  for each statement execute function ctc_notify();
"""


@pytest.fixture
def pg(monkeypatch):
    with fresh_database(server_dsn()) as dsn:
        monkeypatch.setenv(DSN_ENV, dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(MEMORIES)
            conn.execute("insert into memories (id, tier, content) values ('a', 'semantic', 'one')")
        yield dsn


def settled(probe, previous, timeout: float = 5.0):
    """The probe's token once it differs from `previous` (a notification takes a moment to arrive)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        token = probe.token()
        if token != previous:
            return token
        time.sleep(0.02)
    return previous


def run(dsn: str, statement: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)


@pytest.mark.postgres
def test_notify_on_the_channel_moves_the_token_and_nothing_else_does(pg):
    run(pg, TRIGGER)  # the test's own database: the product never creates a trigger
    probe = changes.PostgresProbe(StoreConfig(name="pg", kind="postgres", dsn_env=DSN_ENV, table="memories", notify_channel="memories changed"))
    try:
        first = probe.token()
        assert first == ((1, 0), None)
        time.sleep(0.2)
        assert probe.token() == first  # nothing written, nothing sent
        run(pg, "select pg_notify('other channel', 'x')")
        time.sleep(0.2)
        assert probe.token() == first
        seen = first
        for statement in (
            "insert into memories (id, tier, content) values ('b', 'semantic', 'two')",
            "update memories set content = 'uno' where id = 'a'",
            "delete from memories where id = 'b'",
        ):
            run(pg, statement)
            token = settled(probe, seen)
            assert token != seen, statement
            seen = token
        with psycopg.connect(pg, autocommit=True) as conn:  # the listener's connection dies: the next one reads the store again
            conn.execute("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'ctc-watch'")
        deadline = time.monotonic() + 5
        while probe.token()[0][0] < 2 and time.monotonic() < deadline:  # notices the loss, reconnects after the pause
            probe.retry_at["listener"] = 0.0
            time.sleep(0.05)
        assert probe.token()[0][0] == 2
    finally:
        probe.close()
    with psycopg.connect(pg) as conn:
        assert conn.execute("select count(*) from pg_stat_activity where application_name = 'ctc-watch'").fetchone()[0] == 0


@pytest.mark.postgres
@pytest.mark.parametrize("source", [{"table": "memories"}, {"query": "select id, content, updated_at as seen_at from memories;"}])
def test_a_cursor_column_sees_inserts_edits_and_deletes(pg, source):
    column = "updated_at" if "table" in source else "seen_at"
    probe = changes.PostgresProbe(StoreConfig(name="pg", kind="postgres", dsn_env=DSN_ENV, cursor_column=column, **source))
    try:
        first = probe.token()
        assert first[0] is None and first[1][1] == 1
        assert probe.token() == first
        run(pg, "insert into memories (id, tier, content) values ('b', 'semantic', 'two')")
        second = probe.token()
        assert second[1][1] == 2
        run(pg, "update memories set content = 'uno', updated_at = now() where id = 'a'")
        third = probe.token()
        assert third != second and third[1][1] == 2
        run(pg, "delete from memories where id = 'b'")
        assert probe.token()[1][1] == 1
        with psycopg.connect(pg) as conn:  # the poll leaves no transaction open between ticks
            states = conn.execute("select state from pg_stat_activity where application_name = 'ctc-watch'").fetchall()
        assert states == [("idle",)]
    finally:
        probe.close()


def test_an_unreachable_server_keeps_the_token_and_does_not_block_each_tick(monkeypatch):
    monkeypatch.setenv(DSN_ENV, "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    now = [100.0]
    probe = changes.PostgresProbe(StoreConfig(name="pg", kind="postgres", dsn_env=DSN_ENV, table="memories", notify_channel="c", cursor_column="id"), clock=lambda: now[0])
    first = probe.token()
    assert first == ((0, 0), None)
    started = time.monotonic()
    assert probe.token() == first  # within the retry pause: no connection attempt
    assert time.monotonic() - started < 0.5
    now[0] += changes.PG_RETRY_S + 1
    assert probe.token() == first
    probe.close()
