"""The postgres store: a table or query of a PostgreSQL database (often a pgvector memory table).

- The DSN comes from the environment variable the config names (`dsn_env`), never from the
  config file; errors name the store and the variable, never the password.
- Every read runs in a READ ONLY transaction, so neither a query nor a function it calls can
  write to the store.
- Rows are streamed through a server-side (named) cursor, `chunk_rows` per round trip: the
  whole table is never held in Python objects at once.
- Text values are decoded here, one value at a time, so a value that is not valid UTF-8 (a
  SQL_ASCII database) rejects its row, not the whole store. Timestamps arrive as ISO text and
  go through the same parser as every other store, so 'infinity' or a BC date is a reject too.
- An embedding column may be a float4[]/float8[] (a list) or a pgvector `vector` (its text
  form '[0.1,0.2]', JSON the validator parses); cast it (`embedding::float4[]`) in a query
  if you prefer.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict

from crosstier.core.config import StoreConfig
from crosstier.transforms.stores.errors import ExtractError

# What each yielded record is: (location, raw text, fields or None, error or None).
Record = tuple[str, str, dict[str, Any] | None, str | None]

CONNECT_TIMEOUT_S = 10
LOCATION_VALUE_CHARS = 120
# Types loaded as text and decoded here (per value) rather than by psycopg (per fetch).
# Timestamps among them: psycopg cannot load 'infinity' or year > 9999 and would fail the
# whole chunk; as text they reach the shared timestamp rule and become one reject each.
TEXT_TYPES = ("text", "varchar", "bpchar", "name", '"char"', "timestamp", "timestamptz", "date", "time", "timetz", "interval")
JSON_TYPES = ("json", "jsonb")
UNKNOWN_OID = 0  # the fallback loader: types psycopg does not know (pgvector's vector, enums, citext)


class BadText:
    """A text value that is not valid UTF-8: its bytes, kept so the row becomes a reject."""

    __slots__ = ("data", "reason")

    def __init__(self, data: bytes, reason: str):
        self.data = data
        self.reason = reason

    def __str__(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class LenientTextLoader(Loader):
    """Text as str, or a BadText when its bytes are not valid UTF-8 (never an exception)."""

    def load(self, data: Any) -> str | BadText:
        raw = bytes(data)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return BadText(raw, f"not valid UTF-8 ({exc.reason} at byte {exc.start})")


class LenientJsonLoader(Loader):
    """json/jsonb as Python objects, or a BadText when its bytes are not valid UTF-8."""

    def load(self, data: Any) -> Any:
        text = LenientTextLoader.load(self, data)  # type: ignore[arg-type]
        return text if isinstance(text, BadText) else json.loads(text)


def store_dsn(store: StoreConfig, env: dict[str, str] | None = None) -> str:
    """The store's DSN from its environment variable; ExtractError naming the store when unset."""
    env = os.environ if env is None else env
    name = store.dsn_env or ""
    dsn = env.get(name, "") if name else ""
    if not dsn.strip():
        raise ExtractError(
            f"store '{store.name}': environment variable {name or '(dsn_env not set)'} is not set; "
            "it must hold the PostgreSQL connection string (DSN)"
        )
    return dsn


def _secret_free(message: str, dsn: str) -> str:
    """An error message with the DSN's password (and the DSN itself) blanked out."""
    secrets = [dsn]
    try:
        password = conninfo_to_dict(dsn).get("password")
    except psycopg.Error:
        password = None
    if password:
        secrets.append(str(password))
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            message = message.replace(secret, "***")
    return message.strip()


def _target(dsn: str) -> str:
    """host:port/dbname as user, for messages (no password)."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "an unparseable DSN"
    host = info.get("host") or info.get("hostaddr") or "localhost"
    where = f"{host}:{info.get('port') or 5432}/{info.get('dbname') or '(default db)'}"
    return f"{where} as {info['user']}" if info.get("user") else where


def _connect(store: StoreConfig, dsn: str) -> psycopg.Connection:
    where = f"store '{store.name}'"
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.Error:
        # libpq's parse error quotes the DSN, password included: say only where it came from.
        raise ExtractError(f"{where}: ${store.dsn_env} is not a valid PostgreSQL connection string") from None
    extra: dict[str, Any] = {"application_name": "ctc-extract"}
    if "connect_timeout" not in info:
        extra["connect_timeout"] = CONNECT_TIMEOUT_S
    try:
        conn = psycopg.connect(dsn, autocommit=False, **extra)
    except psycopg.Error as exc:
        raise ExtractError(f"{where}: cannot connect to PostgreSQL at {_target(dsn)}: {_secret_free(str(exc), dsn)}") from None
    conn.read_only = True  # every transaction starts as BEGIN READ ONLY
    for name in (*TEXT_TYPES, UNKNOWN_OID):
        conn.adapters.register_loader(name, LenientTextLoader)
    for name in JSON_TYPES:
        conn.adapters.register_loader(name, LenientJsonLoader)
    return conn


def _client_encoding(conn: psycopg.Connection) -> str:
    """UTF8 on the wire; a SQL_ASCII database passes its bytes through as they are, unchecked
    (the server would refuse the whole query over one bad byte), and LenientTextLoader
    rejects the rows whose bytes are not UTF-8."""
    if conn.info.parameter_status("server_encoding") == "SQL_ASCII":
        return "set local client_encoding to 'SQL_ASCII'"
    return "set local client_encoding to 'UTF8'"


def table_identifier(table: str) -> sql.Identifier:
    """`table` or `schema.table` as a quoted identifier (never spliced in as text)."""
    parts = table.split(".")
    if len(parts) > 2 or not all(p.strip() for p in parts):
        raise ValueError(f"table must be 'name' or 'schema.name', got {table!r}")
    return sql.Identifier(*parts)


def _primary_key(cur: psycopg.Cursor, table: sql.Identifier) -> list[str]:
    """The table's primary-key columns in key order (empty when it has none)."""
    cur.execute(
        "select a.attname from pg_index i"
        " join pg_attribute a on a.attrelid = i.indrelid and a.attnum = any(i.indkey)"
        " where i.indrelid = %s::regclass and i.indisprimary"
        " order by array_position(i.indkey::int2[], a.attnum)",
        (table.as_string(cur),),
    )
    return [row[0] for row in cur.fetchall()]


def _location_value(value: Any) -> str:
    text = str(value)
    if any(ch < " " for ch in text):
        text = json.dumps(text, ensure_ascii=False)[1:-1]
    if len(text) > LOCATION_VALUE_CHARS:
        text = text[:LOCATION_VALUE_CHARS] + "..."
    return text


def _plain(value: Any, column: str, embedding_column: str) -> tuple[Any, str | None]:
    """A loaded value made plain for the validator, and why it is unreadable (or None)."""
    if isinstance(value, BadText):
        return value, f"column '{column}' is {value.reason}"
    if isinstance(value, list):
        out, error = [], None
        for item in value:
            item, item_error = _plain(item, column, embedding_column)
            error = error or item_error
            out.append(item)
        return out, error
    if isinstance(value, uuid.UUID):
        return str(value), None
    if isinstance(value, Decimal) and column == embedding_column:
        return float(value), None  # numeric[] vectors
    return value, None


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def row_record(names: list[str], values: tuple, location: str, embedding_column: str) -> Record:
    """One fetched row -> (location, raw JSON text, fields or None, error or None)."""
    fields: dict[str, Any] = {}
    error = None
    for name, value in zip(names, values):
        value, value_error = _plain(value, name, embedding_column)
        error = error or value_error
        fields[name] = value
    raw = json.dumps(fields, default=_json_default, ensure_ascii=False)
    return location, raw, (None if error else fields), error


def _locator(store: StoreConfig, names: list[str], key: list[str]):
    """A function (row number, values) -> location: the primary key, else `id`, else the row."""
    source = store.table if store.table and not store.query else "query"
    key = key if key and all(k in names for k in key) else (["id"] if "id" in names else [])
    positions = [names.index(k) for k in key]

    def locate(number: int, values: tuple) -> str:
        parts = [values[p] for p in positions]
        if not parts or any(p is None for p in parts):
            return f"{source}:row {number}"
        if len(parts) == 1:
            return f"{source}:{key[0]}={_location_value(parts[0])}"
        return f"{source}:" + ",".join(f"{k}={_location_value(v)}" for k, v in zip(key, parts))

    return locate


def postgres_records(store: StoreConfig) -> Iterator[Record]:
    """Every row of the store's table or query, read-only and streamed in chunks of chunk_rows."""
    where = f"store '{store.name}'"
    dsn = store_dsn(store)
    conn = _connect(store, dsn)
    try:
        with conn.cursor() as setup:
            # Explicit as well as conn.read_only: the first statement of the transaction.
            setup.execute("set transaction read only")
            setup.execute(_client_encoding(conn))
            setup.execute("set local timezone to 'UTC'")
            setup.execute("set local datestyle to 'ISO, YMD'")
            if store.query:
                query: sql.Composable = sql.SQL(store.query)
                key: list[str] = []
            else:
                try:
                    table = table_identifier(store.table or "")
                except ValueError as exc:
                    raise ExtractError(f"{where}: {exc}") from None
                key = _primary_key(setup, table)
                query = sql.SQL("select * from {}").format(table)
        embedding_column = store.embedding_column or "embedding"
        # A named cursor lives on the server; fetchmany pulls one chunk per round trip.
        with conn.cursor(name=f"ctc_extract_{uuid.uuid4().hex[:12]}") as cursor:
            cursor.itersize = store.chunk_rows
            cursor.execute(query)
            names = [d.name for d in cursor.description or []]
            locate = _locator(store, names, key)
            number = 0
            while chunk := cursor.fetchmany(store.chunk_rows):
                for values in chunk:
                    number += 1
                    yield row_record(names, values, locate(number, values), embedding_column)
    except ExtractError:
        raise
    except UnicodeError as exc:
        # psycopg encodes queries as ASCII on a SQL_ASCII database.
        raise ExtractError(f"{where}: cannot send the query ({exc.reason}); a SQL_ASCII database takes ASCII table names and queries only") from None
    except psycopg.Error as exc:
        # OperationalError (connection lost) is I/O: the flow retries ExtractError.
        raise ExtractError(f"{where}: cannot read from PostgreSQL at {_target(dsn)}: {_secret_free(str(exc), dsn)}") from None
    finally:
        try:
            conn.rollback()  # nothing to keep: the transaction only read
        except psycopg.Error:
            pass
        conn.close()
