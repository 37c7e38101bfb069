"""The postgres store against a real server: fields and embeddings, rejects, chunked streaming,
read-only reads, and errors that name the store without leaking the password.

The server is $CTC_TEST_PG_DSN (`make test` starts one), else a cluster this session starts;
each test loads its fixtures into a fresh database it creates."""

from __future__ import annotations

import json
import os

import psycopg
import pytest

from crosstier.core.config import StoreConfig
from reliability.pgserver import fresh_database, server_dsn, table_fingerprint
from crosstier.transforms.stores.extract import ExtractError, extract_store
from crosstier.transforms.stores.postgres import postgres_records

LIMIT = 64 * 1024
DSN_ENV = "CTC_TEST_STORE_DSN"

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(monkeypatch):
    """A fresh UTF8 database; its DSN is in $CTC_TEST_STORE_DSN for the store to read."""
    with fresh_database(server_dsn()) as dsn:
        monkeypatch.setenv(DSN_ENV, dsn)
        yield dsn


@pytest.fixture
def pg_sql_ascii(monkeypatch):
    """A fresh SQL_ASCII database: the server stores any bytes, so invalid UTF-8 can occur."""
    with fresh_database(server_dsn(), encoding="SQL_ASCII") as dsn:
        monkeypatch.setenv(DSN_ENV, dsn)
        yield dsn


def load(dsn: str, *statements: str, rows: list[tuple] | None = None, insert: str | None = None) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)
        if insert:
            with conn.cursor() as cur:
                cur.executemany(insert, rows or [])


def store(**kw) -> StoreConfig:
    return StoreConfig(name=kw.pop("name", "pg"), kind="postgres", dsn_env=kw.pop("dsn_env", DSN_ENV), **kw)


def assert_balanced(result) -> None:
    assert result.records_read == result.memories.height + result.rejects.height


MEMORIES_DDL = """
create table memories (
    id text primary key,
    tier text,
    content text,
    timestamp timestamptz,
    session_id text,
    namespace text,
    readers text[],
    entities text[],
    refs jsonb,
    metadata jsonb,
    embedding {vector_type}
)"""
INSERT = "insert into memories values (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
ROWS = [
    ("e1", "episodic", "Deployed billing-api v2.3", "2026-11-02T09:12:00+01:00", "s1", None, ["maya"], ["billing-api"], json.dumps(["f1"]), json.dumps({"by": "ci"}), [1.0, 0.0, 0.0]),
    ("f1", "semantic", "billing-api runs on Python 3.12", None, None, "ops", None, None, None, None, [0.0, 0.5, 0.25]),
]


@pytest.mark.parametrize("vector_type", ["float4[]", "float8[]", "numeric[]"])
def test_table_rows_become_memories_with_their_float_array_embeddings(pg, vector_type):
    load(pg, MEMORIES_DDL.format(vector_type=vector_type), rows=ROWS, insert=INSERT)
    result = extract_store(store(table="memories"), LIMIT)
    assert result.rejects.height == 0
    rows = {r["id"]: r for r in result.memories.iter_rows(named=True)}
    e1, f1 = rows["e1"], rows["f1"]
    assert e1["timestamp"].isoformat() == "2026-11-02T08:12:00+00:00"
    assert (e1["session_id"], e1["namespace"], e1["readers"], e1["entities"], e1["refs"]) == ("s1", "default", ["maya"], ["billing-api"], ["f1"])
    assert json.loads(e1["metadata"]) == {"by": "ci"}
    assert (e1["embedding"], f1["embedding"]) == ([1.0, 0.0, 0.0], [0.0, 0.5, 0.25])
    assert (f1["namespace"], f1["timestamp"]) == ("ops", None)
    assert (e1["location"], f1["location"]) == ("memories:id=e1", "memories:id=f1")


def test_schema_qualified_table_with_odd_names_and_a_named_embedding_column(pg):
    load(
        pg,
        'create schema "agent mem"',
        'create table "agent mem"."Memories; drop" (memory_id int primary key, id text, tier text, content text, vec float4[])',
        "insert into \"agent mem\".\"Memories; drop\" values (7, 'p1', 'procedural', 'Run deploy.sh', '{0.5,0.5}')",
    )
    result = extract_store(store(table='agent mem.Memories; drop', embedding_column="vec"), LIMIT)
    row = result.memories.row(0, named=True)
    assert (row["id"], row["embedding"], row["location"]) == ("p1", [0.5, 0.5], "agent mem.Memories; drop:memory_id=7")


def test_query_store_reuses_a_pgvector_style_text_embedding(pg):
    load(pg, MEMORIES_DDL.format(vector_type="float4[]"), rows=ROWS, insert=INSERT)
    # What `embedding::text` of a pgvector column gives: '[1,0,0]', JSON the validator parses.
    query = "select id, tier, content, '[' || array_to_string(embedding, ',') || ']' as embedding from memories where tier = 'semantic'"
    result = extract_store(store(query=query), LIMIT)
    row = result.memories.row(0, named=True)
    assert (row["id"], row["embedding"], row["location"]) == ("f1", [0.0, 0.5, 0.25], "query:id=f1")


def test_pgvector_column_is_reused_as_is_and_cast(pg):
    with psycopg.connect(pg, autocommit=True) as conn:
        try:
            conn.execute("create extension if not exists vector")
        except psycopg.Error as exc:
            pytest.skip(f"pgvector is not installed on this server (CREATE EXTENSION vector: {exc.diag.message_primary}); Debian 12 ships no pgvector package")
    load(
        pg,
        "create table memories (id text primary key, tier text, content text, embedding vector(3))",
        "insert into memories values ('v1', 'semantic', 'pgvector row', '[0.25,0.5,1]')",
    )
    for kw in ({"table": "memories"}, {"query": "select id, tier, content, embedding::float4[] as embedding from memories"}, {"query": "select id, tier, content, embedding::text as embedding from memories"}):
        result = extract_store(store(**kw), LIMIT)
        assert result.memories.get_column("embedding").to_list() == [[0.25, 0.5, 1.0]], kw


def test_bad_rows_are_rejects_with_reasons_and_row_keys(pg):
    load(
        pg,
        "create table memories (id text, tier text, content text, timestamp timestamptz, refs text)",
        "insert into memories values ('ok', 'episodic', 'fine', '2026-11-02', null), "
        "('t1', 'episodic', 'at the end of time', 'infinity', null), "
        "('t2', 'dream', 'unknown tier', null, null), "
        "(null, 'episodic', 'no id', null, null), "
        "('r1', 'episodic', 'bad refs', null, 'not-a-list'), "
        "('c1', 'episodic', '   ', null, null)",
    )
    result = extract_store(store(table="memories"), LIMIT)
    assert result.memories.get_column("id").to_list() == ["ok"]
    reasons = dict(zip(result.rejects.get_column("location"), result.rejects.get_column("reason")))
    assert "unparseable timestamp 'infinity'" in reasons["memories:id=t1"]
    assert "unknown tier 'dream'" in reasons["memories:id=t2"]
    assert "missing required field 'id'" in reasons["memories:row 4"]  # no key: the row number
    assert "field 'refs' must be a list" in reasons["memories:id=r1"]
    assert "field 'content' is empty" in reasons["memories:id=c1"]
    assert all(json.loads(raw) for raw in result.rejects.get_column("raw"))
    assert_balanced(result)


def test_composite_primary_key_names_the_row(pg):
    load(
        pg,
        "create table m (agent text, n int, id text, tier text, content text, primary key (agent, n))",
        "insert into m values ('a''b', 1, 'x1', 'semantic', '')",
    )
    result = extract_store(store(table="m"), LIMIT)
    assert result.rejects.get_column("location").to_list() == ["m:agent=a'b,n=1"]


def test_invalid_utf8_in_a_sql_ascii_database_rejects_that_row_only(pg_sql_ascii):
    load(
        pg_sql_ascii,
        "create table memories (id text primary key, tier text, content text, entities text[])",
        "insert into memories values ('good', 'episodic', 'caf' || chr(195) || chr(169), null)",
        r"insert into memories values ('bad', 'episodic', E'caf\xe9', null)",
        r"insert into memories values ('bad-list', 'episodic', 'fine', array['ok', E'\xff'])",
    )
    result = extract_store(store(table="memories"), LIMIT)
    assert result.memories.get_column("content").to_list() == ["caf\u00e9"]
    reasons = dict(zip(result.rejects.get_column("location"), result.rejects.get_column("reason")))
    assert reasons == {
        "memories:id=bad": "column 'content' is not valid UTF-8 (unexpected end of data at byte 3)",
        "memories:id=bad-list": "column 'entities' is not valid UTF-8 (invalid start byte at byte 0)",
    }
    assert_balanced(result)


def test_rows_stream_in_chunks_through_a_server_side_cursor(pg, monkeypatch):
    load(pg, MEMORIES_DDL.format(vector_type="float4[]"))
    load(pg, rows=[(f"m{i}", "semantic", f"fact {i}", None, None, None, None, None, None, None, None) for i in range(5)], insert=INSERT)
    fetched: list[int] = []
    real_fetchmany = psycopg.ServerCursor.fetchmany

    def spy(self, size=0):
        rows = real_fetchmany(self, size)
        fetched.append(len(rows))
        return rows

    def no_fetchall(self):
        raise AssertionError("the adapter must not fetch the whole table")

    monkeypatch.setattr(psycopg.ServerCursor, "fetchmany", spy)
    monkeypatch.setattr(psycopg.ServerCursor, "fetchall", no_fetchall)
    records = postgres_records(store(table="memories", chunk_rows=2))
    first = next(records)
    assert first[0] == "memories:id=m0" and fetched == [2]  # one chunk in memory, not five rows
    rest = list(records)
    assert fetched == [2, 2, 1, 0]
    assert len(rest) == 4


def test_a_store_is_read_in_a_read_only_transaction(pg):
    load(pg, MEMORIES_DDL.format(vector_type="float4[]"), rows=ROWS, insert=INSERT)
    before = table_fingerprint(pg, "memories")
    seen = extract_store(store(query="select 'ro' as id, 'semantic' as tier, current_setting('transaction_read_only') as content"), LIMIT)
    assert seen.memories.get_column("content").to_list() == ["on"]
    extract_store(store(table="memories"), LIMIT)
    assert table_fingerprint(pg, "memories") == before


def test_the_adapters_own_connection_cannot_write_mid_read(pg, monkeypatch):
    load(pg, MEMORIES_DDL.format(vector_type="float4[]"), rows=ROWS, insert=INSERT)
    before = table_fingerprint(pg, "memories")
    opened: list[psycopg.Connection] = []
    real_connect = psycopg.connect

    def capture(*args, **kw):
        opened.append(real_connect(*args, **kw))
        return opened[-1]

    monkeypatch.setattr(psycopg, "connect", capture)
    records = postgres_records(store(table="memories", chunk_rows=1))
    next(records)  # the transaction is open, the cursor half-read
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        opened[0].execute("insert into memories (id) values ('sneaky')")
    with pytest.raises(ExtractError):  # the aborted transaction ends the read, as any error would
        list(records)
    assert table_fingerprint(pg, "memories") == before


@pytest.mark.parametrize(
    "query",
    [
        "with gone as (delete from memories returning *) select * from gone",
        "select *, ctc_sneaky_write() from memories",
        "update memories set content = 'x' returning *",
    ],
)
def test_a_write_inside_the_adapters_transaction_is_impossible(pg, query):
    load(
        pg,
        MEMORIES_DDL.format(vector_type="float4[]"),
        "create function ctc_sneaky_write() returns int language plpgsql as $$ begin insert into memories(id) values ('sneaky'); return 1; end $$",
    )
    load(pg, rows=ROWS, insert=INSERT)
    before = table_fingerprint(pg, "memories")
    with pytest.raises(ExtractError, match=r"store 'pg': .*(read-only transaction|must not contain data-modifying|syntax error)"):
        extract_store(store(query=query), LIMIT)
    assert table_fingerprint(pg, "memories") == before


def test_a_connection_lost_mid_stream_is_an_extract_error_naming_the_store(pg):
    load(pg, MEMORIES_DDL.format(vector_type="float4[]"))
    load(pg, rows=[(f"m{i}", "semantic", f"fact {i}", None, None, None, None, None, None, None, None) for i in range(6)], insert=INSERT)
    records = postgres_records(store(table="memories", chunk_rows=2))
    next(records)
    with psycopg.connect(pg, autocommit=True) as admin:
        admin.execute("select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'ctc-extract'")
    with pytest.raises(ExtractError, match="store 'pg': cannot read from PostgreSQL"):
        list(records)


def test_missing_table_names_the_store(pg):
    with pytest.raises(ExtractError, match=r"store 'pg': .*\"nope\" does not exist"):
        extract_store(store(table="nope"), LIMIT)


def test_missing_dsn_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("CTC_NO_SUCH_DSN", raising=False)
    with pytest.raises(ExtractError, match="store 'agent-db': environment variable CTC_NO_SUCH_DSN is not set"):
        extract_store(store(name="agent-db", dsn_env="CTC_NO_SUCH_DSN", table="memories"), LIMIT)


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        ("postgresql://agent:s3cret-pw@127.0.0.1:1/memories?connect_timeout=3", "cannot connect to PostgreSQL at 127.0.0.1:1/memories as agent"),
        ("host=127.0.0.1 password=s3cret-pw 'unterminated", "is not a valid PostgreSQL connection string"),
    ],
)
def test_connection_errors_name_the_store_and_never_the_password(monkeypatch, dsn, message):
    monkeypatch.setenv(DSN_ENV, dsn)
    with pytest.raises(ExtractError) as info:
        extract_store(store(table="memories"), LIMIT)
    assert message in str(info.value) and "store 'pg'" in str(info.value)
    assert "s3cret-pw" not in str(info.value)
