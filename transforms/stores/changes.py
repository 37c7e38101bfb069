"""Has a store changed since the watcher last read it? One probe per store kind, asked on
every tick of `ctc watch` (a batch of file events or an idle second). No Prefect here.

Each probe gives a token: what the store looks like now. Two equal tokens mean nothing the
watcher must read was written in between; the watcher keeps the token it took before its
last read of each store and reads a store again when the token moved.

- JSONL, Parquet, markdown: the files' signatures (path, inode, size, mtime), plus the
  file-system events under the store's path (a write within one mtime tick at equal size).
- SQLite: `PRAGMA data_version` on a read-only connection kept open (it changes with every
  commit by another connection, in WAL mode too, where the main file is not touched) and
  the file's inode (a database replaced by a rename). When the file cannot be opened as a
  database, its files' signatures as for the other file stores.
- PostgreSQL: notifications on the store's `notify_channel` (LISTEN on a connection of its
  own; the user's trigger sends them) and/or `max(cursor_column), count(*)` of the table or
  query (an insert or update moves the max, a delete the count). Neither set: the store is
  not followed live; the next batch run reads it. Nothing here writes to the database.
"""

from __future__ import annotations

import fnmatch
import sqlite3
import time
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any, Protocol

from crosstier.core.config import StoreConfig
from crosstier.transforms.stores.errors import ExtractError
from crosstier.transforms.stores.follow import store_signature

SQLITE_BUSY_TIMEOUT_S = 0.2  # a tick waits this long for a writer's lock, then asks again next tick
PG_CONNECT_TIMEOUT_S = 5
PG_RETRY_S = 10.0  # after a failed connect, ticks leave the server alone this long (a tick must not block each second)


class Probe(Protocol):
    """What one store looks like now, as a token; close() releases what it holds."""

    def token(self) -> Hashable: ...

    def close(self) -> None: ...


def paths_match(store: StoreConfig, paths: Iterable[str]) -> bool:
    """Is one of the changed paths (resolved) a file of this store?"""
    if not store.path or store.kind in ("postgres", "sqlite"):
        return False  # sqlite: its data_version decides (our own reads touch its -shm file)
    root = str(Path(store.path).resolve())
    for path in paths:
        if store.kind == "markdown" and (path == root or path.startswith(root + "/")):
            return True
        if path == root or fnmatch.fnmatch(path, root):
            return True
    return False


class FileProbe:
    """JSONL, Parquet and markdown stores: their files' signatures."""

    def __init__(self, store: StoreConfig):
        self.store = store

    def token(self) -> Hashable:
        return store_signature(self.store)

    def close(self) -> None:
        pass


class SqliteProbe:
    """A SQLite store: (inode, data_version) of a read-only connection kept open; the files'
    signatures while the file cannot be opened as a database."""

    def __init__(self, store: StoreConfig):
        self.store = store
        self.path = Path(store.path or "")
        self.con: sqlite3.Connection | None = None
        self.inode: tuple[int, int] | None = None
        self.last: Hashable = None

    def _open(self, inode: tuple[int, int]) -> sqlite3.Connection:
        self.close()
        con = sqlite3.connect(f"file:{self.path.resolve()}?mode=ro", uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False)
        self.con, self.inode = con, inode
        return con

    def token(self) -> Hashable:
        try:
            stat = self.path.stat()
        except OSError:
            self.close()
            self.last = ("missing",)
            return self.last
        inode = (stat.st_dev, stat.st_ino)
        try:
            con = self.con if self.con is not None and self.inode == inode else self._open(inode)
            version = con.execute("pragma data_version").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return self.last  # a writer holds the file now: ask again next tick
            self.close()
            self.last = ("files", store_signature(self.store))
            return self.last
        except sqlite3.DatabaseError:  # not a database (yet): its bytes decide
            self.close()
            self.last = ("files", store_signature(self.store))
            return self.last
        self.last = ("data_version", inode, version)
        return self.last

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
        self.con, self.inode = None, None


class PostgresProbe:
    """A postgres store: the notifications received on its channel (counted; a new LISTEN
    connection is a change too, so what was sent while none listened is read) and the
    (max, count) of its cursor column. While the server is unreachable the token stands."""

    def __init__(self, store: StoreConfig, env: dict[str, str] | None = None, clock=time.monotonic):
        self.store = store
        self.env = env
        self.clock = clock
        self.retry_at = {"listener": 0.0, "poller": 0.0}
        self.listener: Any = None
        self.poller: Any = None
        self.listens = 0  # LISTEN connections made: a reconnect reads the store again
        self.notified = 0
        self.cursor: tuple[str | None, int] | None = None

    def token(self) -> Hashable:
        return (self._notify_token() if self.store.notify_channel else None, self._cursor_token() if self.store.cursor_column else None)

    def _notify_token(self) -> tuple[int, int]:
        import psycopg

        if self.listener is None and self.clock() < self.retry_at["listener"]:
            return self.listens, self.notified
        try:
            if self.listener is None or self.listener.closed:
                self.listener = self._listening()
                self.listens += 1
            # timeout 0: what has arrived, without waiting (the tick must not block)
            self.notified += sum(1 for _ in self.listener.notifies(timeout=0))
            if self.listener.broken or self.listener.pgconn.status != psycopg.pq.ConnStatus.OK:
                raise psycopg.OperationalError("the LISTEN connection was lost")  # e.g. the server restarted
        except (psycopg.Error, OSError, ExtractError):
            self._drop("listener", retry=True)
        return self.listens, self.notified

    def _listening(self):
        import psycopg
        from psycopg import sql

        from crosstier.transforms.stores.postgres import store_dsn

        # autocommit: a LISTEN takes effect, and notifications arrive, outside transactions
        conn = psycopg.connect(store_dsn(self.store, self.env), autocommit=True, application_name="ctc-watch", connect_timeout=PG_CONNECT_TIMEOUT_S)
        conn.execute(sql.SQL("listen {}").format(sql.Identifier(self.store.notify_channel or "")))
        return conn

    def _cursor_token(self) -> tuple[str | None, int] | None:
        import psycopg
        from psycopg import sql

        from crosstier.transforms.stores.postgres import store_dsn, table_identifier

        if self.poller is None and self.clock() < self.retry_at["poller"]:
            return self.cursor
        try:
            if self.poller is None or self.poller.closed:
                self.poller = psycopg.connect(store_dsn(self.store, self.env), autocommit=False, application_name="ctc-watch", connect_timeout=PG_CONNECT_TIMEOUT_S)
                self.poller.read_only = True  # BEGIN READ ONLY: the poll cannot write
            query_text = (self.store.query or "").strip().rstrip(";")
            source = sql.SQL("({}) as ctc_watched").format(sql.SQL(query_text)) if query_text else table_identifier(self.store.table or "")
            query = sql.SQL("select max({})::text, count(*) from {}").format(sql.Identifier(self.store.cursor_column or ""), source)
            try:
                row = self.poller.execute(query).fetchone()
            finally:
                self.poller.rollback()  # never left idle in a transaction between ticks
            self.cursor = (row[0], int(row[1]))
        except (psycopg.Error, OSError, ValueError, ExtractError):
            self._drop("poller", retry=True)
        return self.cursor

    def _drop(self, name: str, retry: bool = False) -> None:
        if retry:
            self.retry_at[name] = self.clock() + PG_RETRY_S
        conn = getattr(self, name)
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection: closing it is best effort
                pass
        setattr(self, name, None)

    def close(self) -> None:
        self._drop("listener")
        self._drop("poller")


def followed_live(store: StoreConfig) -> bool:
    """Does the watcher see this store's changes (every store but a postgres one that names
    neither a notify channel nor a cursor column)?"""
    return store.kind != "postgres" or bool(store.notify_channel or store.cursor_column)


def probe_for(store: StoreConfig) -> Probe:
    if store.kind == "sqlite":
        return SqliteProbe(store)
    if store.kind == "postgres":
        return PostgresProbe(store)
    return FileProbe(store)


class StoreChanges:
    """The stores a watcher follows, and the token each had when last read.

    mark() before the stores are read (a write during the read moves the token: it is read
    next tick); changed(paths) each tick names the stores to read now; read(names) once they
    were, so their tokens from that tick become the ones to compare against."""

    def __init__(self, stores: Iterable[StoreConfig], probes: dict[str, Probe] | None = None):
        self.stores = tuple(stores)
        self.probes = probes if probes is not None else {store.name: probe_for(store) for store in self.stores}
        self.seen: dict[str, Hashable] = {}
        self.now: dict[str, Hashable] = {}

    def unfollowed(self) -> list[str]:
        return [store.name for store in self.stores if not followed_live(store)]

    def mark(self) -> None:
        self.seen = {name: probe.token() for name, probe in self.probes.items()}

    def changed(self, paths: set[str]) -> list[str]:
        """Names of the stores whose token moved or one of whose files an event named."""
        self.now = {name: probe.token() for name, probe in self.probes.items()}
        return sorted(
            store.name for store in self.stores
            if self.now[store.name] != self.seen.get(store.name) or paths_match(store, paths)
        )

    def read(self, names: Iterable[str]) -> None:
        self.seen.update({name: self.now[name] for name in names if name in self.now})

    def close(self) -> None:
        for probe in self.probes.values():
            probe.close()
