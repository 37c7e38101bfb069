"""Bad input, property-based: hostile records in every store kind never crash extraction, every
reject says where and why, records read = memories + rejects, and every accepted row obeys the
memory contract. The stores are unchanged afterwards (isolation)."""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import random
import sqlite3
import tempfile
import uuid
from datetime import timezone
from pathlib import Path

import psycopg
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from psycopg import sql

from crosstier.core.config import StoreConfig
from reliability.hostile import (
    BAD_TIMESTAMPS,
    BOUNDED,
    HOSTILE_IDS,
    FLOAT32_MAX,
    FLOAT64_EDGES,
    LIMIT,
    RAW_LINES,
    accepted_matches_input,
    any_records,
    assert_accounted,
    assert_contract,
    contents,
)
from reliability.pgserver import fresh_database, server_dsn, table_fingerprint
from crosstier.transforms.stores.extract import ExtractError, StoreExtract, bulk_vector_ok, combined_extracts, extract_store, stored_vector, with_vector_length
from crosstier.transforms.schema import REJECT_SCHEMA

INVALID_UTF8 = [b"caf\xe9", b"\xff\xfe", b"\xc3", b"ok\xed\xa0\x80surrogate", b"\xf4\x90\x80\x80"]


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under root (names included): equal means the store is untouched."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def check_extract(store: StoreConfig, written: int, inputs: list | None = None, root: Path | None = None):
    """Extract one store and assert everything the suite promises about it."""
    before = tree_digest(root) if root else None
    result = extract_store(store, LIMIT)  # must not raise: bad records are rejects, not errors
    assert_accounted(result, written, store.name)
    assert_contract(result.memories, store.name)
    if inputs is not None:
        accepted_matches_input(result.memories, inputs)
    combined = combined_extracts([result])  # duplicate ids: every copy becomes a reject
    assert combined.memories.get_column("id").n_unique() == combined.memories.height
    assert combined.records_read == combined.memories.height + combined.rejects.height
    if root:
        assert tree_digest(root) == before, "extraction changed the store's files"
    return result


# ---------------------------------------------------------------- provided vectors, as float32

OVER_RANGE = [  # records that once failed the whole run (issue 17): kept as explicit cases
    {"id": "big", "tier": "semantic", "content": "past float32", "embedding": [3.5e38, 0.0, 0.0]},
    {"id": "long", "tier": "semantic", "content": "norm overflows", "embedding": [1e20] * 4},
    {"id": "tiny", "tier": "semantic", "content": "zero as float32", "embedding": [1e-46, -1e-46]},
    {"id": "ok", "tier": "semantic", "content": "fine", "embedding": [1e18, 0.0]},
]


@pytest.mark.parametrize(
    ("vector", "reason"),
    [
        ([3.5e38, 0.0], r"value 3\.5e\+38 at index 0 overflows float32"),
        ([0.0, -1e300], r"value -1e\+300 at index 1 overflows float32"),
        ([1e20] * 384, "length \\(norm\\) that overflows float32"),
        ([FLOAT32_MAX, FLOAT32_MAX], "length \\(norm\\) that overflows float32"),
        ([1e-46, 5e-324], "all zeros as float32"),
        ([0, 0, 0], "all zeros as float32"),
        ([float("nan"), 1.0], "finite numbers only"),
        ([2**1100, 1], "outside the float64 range"),
    ],
)
def test_a_vector_that_does_not_survive_float32_is_refused(vector, reason):
    with pytest.raises(ValueError, match=reason):
        stored_vector(vector)


@pytest.mark.parametrize("vector", [[1.0, 0.0], [1e18, 1.0], [1e-30, 1.0], [3, -4]])
def test_a_vector_that_survives_float32_is_kept_as_given(vector):
    assert stored_vector(vector) == [float(v) for v in vector]


def test_a_vector_of_the_wrong_length_for_the_model_is_a_reject():
    memories = pl.DataFrame({"id": ["a", "b", "c"], "location": ["m:1", "m:2", "m:3"], "_raw": ["ra", "rb", "rc"], "embedding": [[1.0, 0.0], [1.0, 0.0, 0.0], None]})
    checked = with_vector_length(StoreExtract("m", memories, pl.DataFrame(schema=REJECT_SCHEMA), 3), dim=2)
    assert checked.memories.get_column("id").to_list() == ["a", "c"]
    assert checked.rejects.rows() == [("m", "m:2", "rb", "field 'embedding' has 3 values but the embedding model makes 2-dim vectors (set EMBEDDING_MODEL to the model that made them)")]
    assert checked.records_read == checked.memories.height + checked.rejects.height


@BOUNDED
@given(vectors=st.lists(st.lists(st.sampled_from(FLOAT64_EDGES) | st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=6), min_size=1, max_size=8))
@example(vectors=[[1e20] * 4, [1e-20] * 3, [FLOAT32_MAX, 0.0], [1.8e19] * 2])
def test_the_bulk_vector_check_passes_only_what_the_per_record_rule_accepts(vectors):
    ok = bulk_vector_ok(pl.Series("v", vectors, dtype=pl.List(pl.Float64))).to_list()
    for vector, passed in zip(vectors, ok):
        if passed:
            stored_vector(vector)  # must not raise: the bulk path may not accept what the rule refuses


# ---------------------------------------------------------------- jsonl, jsonl.gz


@BOUNDED
@given(recs=any_records, raws=st.lists(st.sampled_from(RAW_LINES), max_size=3), gz=st.booleans(), order=st.randoms(use_true_random=False))
@example(recs=OVER_RANGE, raws=[], gz=False, order=random.Random(0))
def test_jsonl_hostile_records(recs, raws, gz, order):
    lines = [json.dumps(r).encode("utf-8") for r in recs] + raws
    order.shuffle(lines)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = b"\n".join(lines) + b"\n"
        path = root / ("m.jsonl.gz" if gz else "m.jsonl")
        path.write_bytes(gzip.compress(data) if gz else data)
        check_extract(StoreConfig(name="jsonl-store", kind="jsonl", path=str(path)), len(lines), recs + _parsed(raws), root)


def _parsed(raws: list[bytes]) -> list[dict]:
    out = []
    for raw in raws:
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


# ---------------------------------------------------------------- parquet

PARQUET_COLUMNS = {
    "id": {
        "string": (pa.string(), st.sampled_from(HOSTILE_IDS) | st.text(max_size=8) | st.none()),
        "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1) | st.none()),
    },
    "tier": {"string": (pa.string(), st.sampled_from(["episodic", "semantic", "procedural", "dream", "", "Episodic"]) | st.none())},
    "content": {
        "string": (pa.string(), contents.filter(lambda c: c is None or isinstance(c, str))),
        "binary": (pa.binary(), st.sampled_from(INVALID_UTF8) | st.binary(max_size=12) | st.text(max_size=10).map(str.encode) | st.none()),
    },
    "timestamp": {
        "string": (pa.string(), st.sampled_from([t for t in BAD_TIMESTAMPS if isinstance(t, str)]) | st.text(max_size=8) | st.none()),
        "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1) | st.none()),
        "float64": (pa.float64(), st.floats() | st.none()),
        "timestamp": (pa.timestamp("us", tz="UTC"), st.datetimes(timezones=st.just(timezone.utc)) | st.none()),
    },
    "refs": {
        "list": (pa.list_(pa.string()), st.lists(st.text(max_size=4) | st.none(), max_size=3) | st.none()),
        "string": (pa.string(), st.sampled_from(['["a"]', "nope", "[1]"]) | st.none()),
    },
    "metadata": {"string": (pa.string(), st.sampled_from(['{"k": 1}', "[1]", "{bad", None]))},
    "embedding": {"list": (pa.list_(pa.float64()), st.lists(st.floats() | st.sampled_from(FLOAT64_EDGES), max_size=3) | st.none())},
}


@BOUNDED
@given(data=st.data())
def test_parquet_hostile_rows(data):
    n = data.draw(st.integers(1, 10), label="rows")
    arrays, fields, inputs = {}, [], [{} for _ in range(n)]
    for column, kinds in PARQUET_COLUMNS.items():
        if column not in ("id", "content") and data.draw(st.booleans(), label=f"omit {column}"):
            continue  # a missing column is a missing field in every row
        kind = data.draw(st.sampled_from(sorted(kinds)), label=f"{column} type")
        arrow_type, values = kinds[kind]
        drawn = [data.draw(values, label=column) for _ in range(n)]
        arrays[column] = pa.array(drawn, type=arrow_type)
        fields.append(column)
        for record, value in zip(inputs, drawn):
            record[column] = value
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pq.write_table(pa.table(arrays), root / "m.parquet")
        check_extract(StoreConfig(name="parquet-store", kind="parquet", path=str(root / "m.parquet")), n, inputs, root)


# ---------------------------------------------------------------- sqlite

SQLITE_COLUMNS = ("id", "tier", "content", "timestamp", "session_id", "namespace", "readers", "entities", "refs", "metadata", "embedding")


def sqlite_value(value):
    """What a writer would store in an untyped SQLite column for a drawn value."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        return str(value)
    return value


@BOUNDED
@given(
    recs=any_records,
    blobs=st.lists(st.tuples(st.sampled_from(["id", "content", "tier", "refs"]), st.sampled_from(INVALID_UTF8) | st.binary(max_size=8)), max_size=3),
    table=st.sampled_from(["memories", 'mem"; drop table memories; --', "tab'le", "../../etc", "\u0435mories", "select"]),
    by_query=st.booleans(),
)
def test_sqlite_hostile_rows(recs, blobs, table, by_query):
    rows = [[sqlite_value(r.get(c)) for c in SQLITE_COLUMNS] for r in recs]
    for i, (column, blob) in enumerate(blobs):  # invalid UTF-8 and NUL bytes as blobs
        rows[i % len(rows)][SQLITE_COLUMNS.index(column)] = blob
    quoted = '"' + table.replace('"', '""') + '"'
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "m.sqlite"
        con = sqlite3.connect(path)
        con.execute(f"create table {quoted} ({', '.join(SQLITE_COLUMNS)})")
        con.executemany(f"insert into {quoted} values ({', '.join('?' * len(SQLITE_COLUMNS))})", rows)
        con.commit()
        con.close()
        store = StoreConfig(name="sqlite-store", kind="sqlite", path=str(path), **({"query": f"select * from {quoted}"} if by_query else {"table": table}))
        written = [dict(zip(SQLITE_COLUMNS, row)) for row in rows]  # as stored, blobs included
        result = check_extract(store, len(rows), written, root)
        assert not list(root.glob("m.sqlite-*")), "a journal or WAL file appeared: the store was opened for writing"
        assert_contract(result.memories, "sqlite-store")


# ---------------------------------------------------------------- markdown


def _line(text) -> bytes:
    """One bullet line: the drawn text on a single line, prefixed so markdown syntax cannot
    turn it into a heading, a time stamp or a continuation."""
    if isinstance(text, bytes):
        body = text.replace(b"\n", b" ").replace(b"\r", b" ")
    else:
        body = str(text).replace("\n", " ").replace("\r", " ").encode("utf-8")
    return b"- x" + body


FRONT_MATTER = st.sampled_from(
    [
        "---\nname: deploy\ndescription: Ship it\n---\nRun deploy.sh\n",
        "---\nname: [unclosed\n---\nbody\n",
        "---\nname: !!python/object/apply:os.system ['echo pwned']\n---\nbody\n",
        "---\n- a list\n---\nbody\n",
        "---\nnever closed\n",
        "---\nname: &a [*a]\n---\nself reference\n",
        "---\ntags: [a, 1, null]\nname: x\n---\n",
        "no front matter at all",
        "",
        "---\nname: \x00nul\n---\nbody\n",
    ]
) | st.text(max_size=40)


@BOUNDED
@given(
    days=st.lists(st.tuples(st.sampled_from(["2026-11-04", "2026-02-30", "2026-11-05"]), st.lists(contents | st.sampled_from(INVALID_UTF8), min_size=1, max_size=4)), max_size=3, unique_by=lambda d: d[0]),
    facts=st.lists(st.tuples(contents | st.sampled_from(INVALID_UTF8), st.sampled_from(["memory/2026-11-04.md#L1-L3", "../../etc/passwd#L1-L2", "memory/2026-11-04.md#L999", "'; drop#L1"])), max_size=4),
    skills=st.lists(st.tuples(st.sampled_from(["deploy", "a;b'c", "..x", "\u0435dit", "%s", "sp ace"]), FRONT_MATTER | st.sampled_from([b"\xff\xfe---\n"])), max_size=3, unique_by=lambda s: s[0]),
)
def test_markdown_hostile_workspace(days, facts, skills):
    written = 0
    entries_by_file: dict[str, list[bytes]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "memory").mkdir()
        for day, entries in days:
            lines = [_line(e) for e in entries]
            (root / "memory" / f"{day}.md").write_bytes(b"# log\n\n" + b"\n\n".join(lines) + b"\n")
            entries_by_file[f"memory/{day}.md"] = lines
            written += len(entries)
        if facts:
            body = b"\n".join(_line(text) + b"\n  Source: " + source.encode() for text, source in facts)
            (root / "MEMORY.md").write_bytes(b"# Memory\n\n" + body + b"\n")
            entries_by_file["MEMORY.md"] = [_line(text) for text, _ in facts]
            written += len(facts)
        for name, text in skills:
            folder = root / "skills" / name
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
            written += 1
        result = check_extract(StoreConfig(name="markdown-store", kind="markdown", path=str(root)), written, None, root)
        accepted_entries_match_what_was_written(result.memories, entries_by_file, {name for name, _ in skills})


def _words(text: str) -> str:
    return " ".join(text.split())


def accepted_entries_match_what_was_written(memories, entries_by_file: dict[str, list[bytes]], skills: set[str]) -> None:
    """Each accepted log entry or fact is one written bullet's text (the `- ` dropped,
    whitespace as the reader folds it), from the file its location names; each skill comes
    from a SKILL.md that was written."""
    for row in memories.iter_rows(named=True):
        path = row["location"].split(":", 1)[0]
        if path.startswith("skills/"):
            assert path.split("/")[1] in skills and path.endswith("/SKILL.md"), row
            continue
        assert path in entries_by_file, row
        bodies = [_words(line[2:].decode("utf-8", errors="strict")) for line in entries_by_file[path] if _decodes(line)]
        assert _words(row["content"]) in bodies, (row["content"], bodies)


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_markdown_deeply_nested_front_matter_is_a_reject(tmp_path):
    folder = tmp_path / "skills" / "deep"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: " + "[" * 5000 + "]" * 5000 + "\n---\nbody\n")
    result = extract_store(StoreConfig(name="markdown-store", kind="markdown", path=str(tmp_path)), LIMIT)
    assert_accounted(result, 1, "markdown-store")
    assert result.memories.height == 0, "a skill whose front matter cannot be read was accepted"
    assert result.rejects.height == 1 and "front matter" in result.rejects.item(0, "reason"), result.rejects.rows()


@pytest.mark.timeout(5)
def test_markdown_huge_source_range_is_bounded(tmp_path):
    (tmp_path / "MEMORY.md").write_text("- a fact\n  Source: memory/2026-11-04.md#L1-L999999999999\n")
    result = extract_store(StoreConfig(name="markdown-store", kind="markdown", path=str(tmp_path)), LIMIT)
    assert_accounted(result, 1, "markdown-store")


# ---------------------------------------------------------------- postgres


@pytest.fixture(scope="module", params=["SQL_ASCII", "UTF8"])
def pg_database(request):
    """One database per encoding for the module: SQL_ASCII stores any bytes, so invalid UTF-8
    can occur; UTF8 takes any non-ASCII name."""
    with fresh_database(server_dsn(), encoding=request.param) as dsn:
        yield dsn, request.param


def _text_bytes(value) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, (list, dict)):
        data = json.dumps(value).encode("utf-8")
    else:
        data = str(value).encode("utf-8")
    return data.replace(b"\x00", b"")  # PostgreSQL text cannot hold NUL (bytea content can)


def _jsonb(value):
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except ValueError:
        return None
    return None if "\\u0000" in text else text


def _float_list(value):
    if isinstance(value, list) and all(isinstance(x, float) for x in value):
        return value
    return None


PG_TIMESTAMPS = ["2026-11-02 09:12:00+01", "infinity", "-infinity", "4713-01-01 00:00:00+00 BC", "294276-12-31 00:00:00+00", "1970-01-01", None]
PG_COLUMNS = {
    # column -> {type: (sql type, placeholder, value -> parameter)}
    "id": {"text": ("text", "convert_from(%s::bytea, 'SQL_ASCII')", _text_bytes)},
    "tier": {"text": ("text", "convert_from(%s::bytea, 'SQL_ASCII')", _text_bytes)},
    "content": {
        "text": ("text", "convert_from(%s::bytea, 'SQL_ASCII')", _text_bytes),
        "bytea": ("bytea", "%s::bytea", lambda v: v if isinstance(v, bytes) else (None if v is None else str(v).encode("utf-8"))),
    },
    "timestamp": {
        "text": ("text", "convert_from(%s::bytea, 'SQL_ASCII')", _text_bytes),
        "timestamptz": ("timestamptz", "%s::timestamptz", lambda v: v),
    },
    "namespace": {"text": ("text", "convert_from(%s::bytea, 'SQL_ASCII')", _text_bytes)},
    "refs": {
        "text[]": ("text[]", "%s::text[]", lambda v: [s.replace("\x00", "") for s in v] if isinstance(v, list) and all(isinstance(s, str) for s in v) else None),
        "jsonb": ("jsonb", "%s::jsonb", _jsonb),
    },
    "metadata": {"jsonb": ("jsonb", "%s::jsonb", _jsonb), "text": ("text", "convert_from(%s::bytea, 'SQL_ASCII')", _text_bytes)},
    "embedding": {"float8[]": ("float8[]", "%s::float8[]", _float_list), "text": ("text", "convert_from(%s::bytea, 'SQL_ASCII')", _text_bytes)},
}


@BOUNDED
@given(
    recs=any_records,
    blobs=st.lists(st.sampled_from(INVALID_UTF8 + [b"nul\x00byte"]), max_size=3),
    times=st.lists(st.sampled_from(PG_TIMESTAMPS), max_size=12),
    table=st.sampled_from(["memories", 'mem"; drop table memories; --', "tab'le", "\u0435mories", "select", "Mixed Case"]),
    data=st.data(),
)
def test_postgres_hostile_rows(pg_database, monkeypatch, recs, blobs, times, table, data):
    dsn, encoding = pg_database
    kinds = {column: data.draw(st.sampled_from(sorted(options)), label=f"{column} type") for column, options in PG_COLUMNS.items()}
    name = f"{table}_{uuid.uuid4().hex[:8]}"
    columns = [(c, *PG_COLUMNS[c][k]) for c, k in kinds.items()]
    rows = []
    for i, record in enumerate(recs):
        row = {c: record.get(c) for c in PG_COLUMNS}
        if blobs and i < len(blobs):
            row["content"] = blobs[i]  # invalid UTF-8, or NUL in a bytea column
        if kinds["timestamp"] == "timestamptz":
            row["timestamp"] = times[i] if i < len(times) else None
        params = [convert(row[c]) for c, _, _, convert in columns]
        if encoding == "UTF8":  # a UTF8 database refuses invalid bytes in text: store them replaced
            params = [p.decode("utf-8", "replace").encode("utf-8") if isinstance(p, bytes) and placeholder.startswith("convert_from") else p for p, (_, _, placeholder, _) in zip(params, columns)]
        rows.append(params)
    ident = sql.Identifier(name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set client_encoding to 'UTF8'")
        conn.execute(sql.SQL("create table {} ({})").format(ident, sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t, _, _ in columns)))
        insert = sql.SQL("insert into {} values ({})").format(ident, sql.SQL(", ").join(sql.SQL(p) for _, _, p, _ in columns))
        with conn.cursor() as cur:
            cur.executemany(insert, rows)
    monkeypatch.setenv("CTC_RELIABILITY_PG_DSN", dsn)
    before = table_fingerprint(dsn, name)
    chunk = data.draw(st.integers(1, 5), label="chunk_rows")
    try:
        store = StoreConfig(name="postgres-store", kind="postgres", dsn_env="CTC_RELIABILITY_PG_DSN", table=name, chunk_rows=chunk)
        if encoding == "SQL_ASCII" and not name.isascii():
            with pytest.raises(ExtractError, match="store 'postgres-store': .*SQL_ASCII database takes ASCII"):
                extract_store(store, LIMIT)
        else:
            written = [dict(zip([c for c, _, _, _ in columns], params)) for params in rows]  # as stored
            check_extract(store, len(rows), written)
        assert table_fingerprint(dsn, name) == before, "extraction changed the table"
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("set client_encoding to 'UTF8'")
            conn.execute(sql.SQL("drop table {}").format(ident))
