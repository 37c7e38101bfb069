"""Extract stage: every adapter, every reject rule, and records read = memories + rejects."""

from __future__ import annotations

import gzip
import json
import sqlite3
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crosstier.core.config import StoreConfig
from crosstier.transforms.stores import extract as extract_module
from crosstier.transforms.stores.extract import (
    BulkVectors,
    ExtractError,
    combined_extracts,
    content_hash,
    extract_store,
    parquet_records,
    parse_timestamp,
)

LIMIT = 64 * 1024


def write_jsonl(path: Path, records: list) -> Path:
    lines = [r if isinstance(r, (str, bytes)) else json.dumps(r) for r in records]
    path.write_bytes(b"\n".join(l if isinstance(l, bytes) else l.encode() for l in lines) + b"\n")
    return path


def jsonl_store(path: Path, **kw) -> StoreConfig:
    return StoreConfig(name=kw.pop("name", "s"), kind="jsonl", path=str(path), **kw)


def assert_balanced(result) -> None:
    assert result.records_read == result.memories.height + result.rejects.height


GOOD = {"id": "e1", "tier": "episodic", "content": "Deployed billing-api v2.3", "timestamp": "2026-11-02T09:12:00+01:00"}


def test_jsonl_good_record_is_canonical(tmp_path):
    result = extract_store(jsonl_store(write_jsonl(tmp_path / "a.jsonl", [GOOD])), LIMIT)
    row = result.memories.row(0, named=True)
    assert row["id"] == "e1"
    assert row["timestamp"] == datetime(2026, 11, 2, 8, 12, tzinfo=timezone.utc)  # stored UTC
    assert row["namespace"] == "default"
    assert row["content_hash"] == content_hash("Deployed billing-api v2.3")
    assert row["location"] == "a.jsonl:1"
    assert result.rejects.height == 0


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({"tier": "episodic", "content": "x"}, "missing required field 'id'"),
        ({"id": "a", "tier": "episodic"}, "missing required field 'content'"),
        ({"id": "a", "tier": "episodic", "content": "   "}, "field 'content' is empty"),
        ({"id": "a", "tier": "dream", "content": "x"}, "unknown tier"),
        ({"id": "a", "content": "x"}, "missing required field 'tier'"),
        ({"id": "a", "tier": "episodic", "content": "x", "timestamp": "yesterday"}, "unparseable timestamp"),
        ({"id": "a", "tier": "episodic", "content": "x", "timestamp": 1e30}, "timestamp out of range"),
        ({"id": "a", "tier": "episodic", "content": 42.5}, "field 'content' must be a string"),
        ({"id": ["a"], "tier": "episodic", "content": "x"}, "field 'id' must be a string"),
        ({"id": "a", "tier": "episodic", "content": "x\u0000y"}, "NUL character"),
        ({"id": "a", "tier": "episodic", "content": "x", "readers": "alice"}, "field 'readers' must be a list"),
        ({"id": "a", "tier": "episodic", "content": "x", "refs": [1, 2]}, "field 'refs' must be a list of strings"),
        ({"id": "a", "tier": "episodic", "content": "x", "metadata": [1]}, "field 'metadata' must be an object"),
        ({"id": "a", "tier": "episodic", "content": "x", "embedding": ["a"]}, "field 'embedding' must hold finite numbers"),
        ({"id": "a\nb", "tier": "episodic", "content": "x"}, "control characters"),
        ({"id": "a", "tier": "episodic", "content": "x", "namespace": "é" * 41}, "namespace is 246 characters once percent-encoded"),
        ("[1, 2]", "must hold a JSON object"),
        ("{not json", "not valid JSON"),
        (b'{"id": "a", "tier": "episodic", "content": "caf\xe9"}', "invalid UTF-8"),
    ],
)
def test_jsonl_reject_rules(tmp_path, record, reason):
    result = extract_store(jsonl_store(write_jsonl(tmp_path / "a.jsonl", [GOOD, record])), LIMIT)
    assert result.memories.get_column("id").to_list() == ["e1"]
    assert result.rejects.height == 1
    reject = result.rejects.row(0, named=True)
    assert reason in reject["reason"]
    assert reject["store"] == "s" and reject["location"] == "a.jsonl:2"
    assert reject["raw"]
    assert_balanced(result)


def test_content_size_limit_is_configurable(tmp_path):
    big = {**GOOD, "id": "big", "content": "x" * 101}
    result = extract_store(jsonl_store(write_jsonl(tmp_path / "a.jsonl", [GOOD, big])), 100)
    assert result.rejects.row(0, named=True)["reason"] == "content is 101 bytes, over the limit of 100"
    assert_balanced(result)


def test_store_tier_and_namespace_are_defaults(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [{"id": "f1", "content": "x"}, {"id": "f2", "content": "y", "namespace": "ops", "tier": "procedural"}])
    result = extract_store(jsonl_store(path, tier="semantic", namespace="team"), LIMIT)
    rows = result.memories.sort("id").select("tier", "namespace").rows()
    assert rows == [("semantic", "team"), ("procedural", "ops")]


def test_jsonl_gz_and_globs(tmp_path):
    with gzip.open(tmp_path / "a.jsonl.gz", "wb") as handle:
        handle.write((json.dumps(GOOD) + "\n").encode())
    write_jsonl(tmp_path / "b.jsonl", [{**GOOD, "id": "e2"}])
    result = extract_store(jsonl_store(tmp_path / "*.jsonl*"), LIMIT)
    assert sorted(result.memories.get_column("id").to_list()) == ["e1", "e2"]


def test_truncated_gzip_is_a_clear_error(tmp_path):
    data = gzip.compress((json.dumps(GOOD) + "\n").encode() * 200)
    (tmp_path / "a.jsonl.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ExtractError, match="store 's': cannot read"):
        extract_store(jsonl_store(tmp_path / "a.jsonl.gz"), LIMIT)


@pytest.mark.parametrize("path", ["missing.jsonl", "nothing-*.jsonl"])
def test_missing_path_names_the_store(tmp_path, path):
    with pytest.raises(ExtractError, match="store 'episodes'"):
        extract_store(jsonl_store(tmp_path / path, name="episodes"), LIMIT)


def test_duplicate_ids_across_stores_reject_both_naming_each_other(tmp_path):
    a = extract_store(jsonl_store(write_jsonl(tmp_path / "a.jsonl", [GOOD]), name="a"), LIMIT)
    b = extract_store(jsonl_store(write_jsonl(tmp_path / "b.jsonl", [{**GOOD, "content": "other"}, {**GOOD, "id": "e9"}]), name="b"), LIMIT)
    result = combined_extracts([a, b])
    assert result.memories.get_column("id").to_list() == ["e9"]
    reasons = dict(zip(result.rejects.get_column("store"), result.rejects.get_column("reason")))
    assert reasons["a"] == "duplicate id 'e1': also at b b.jsonl:1"
    assert reasons["b"] == "duplicate id 'e1': also at a a.jsonl:1"
    assert_balanced(result)


@pytest.mark.parametrize("twin", [None, "e3", "e1"], ids=["no-duplicate", "a-duplicate-in-the-middle", "a-duplicate-first"])
def test_stores_sorted_by_id_merge_to_what_concatenating_and_sorting_gives(tmp_path, twin):
    """The watcher hands combined_extracts each store's rows sorted by id and merges them;
    memories and rejects are those of the batch run's concatenate-then-sort."""
    a_rows = [{**GOOD, "id": i, "content": f"note {i}"} for i in ("e5", "e1", "e3")]
    b_rows = [{**GOOD, "id": i, "content": f"other {i}"} for i in ("e4", "e2", "e6") + ((twin,) if twin else ())]
    a = extract_store(jsonl_store(write_jsonl(tmp_path / "a.jsonl", a_rows), name="a"), LIMIT)
    b = extract_store(jsonl_store(write_jsonl(tmp_path / "b.jsonl", b_rows), name="b"), LIMIT)
    want = combined_extracts([a, b])
    got = combined_extracts([replace(e, memories=e.memories.sort("id")) for e in (a, b)], sorted_by_id=True)
    assert got.memories.equals(want.memories)
    assert got.rejects.sort("store", "location").equals(want.rejects.sort("store", "location"))
    assert got.memories.get_column("id").to_list() == sorted({"e1", "e2", "e3", "e4", "e5", "e6"} - {twin})


def test_parquet_store(tmp_path):
    table = pa.table(
        {
            "id": ["p1", "p2", None],
            "tier": ["semantic", "semantic", "semantic"],
            "content": ["Uses pgvector 0.7", "", "orphan"],
            "entities": [["pgvector"], None, None],
            "timestamp": pa.array([datetime(2026, 11, 3, tzinfo=timezone.utc), None, None], pa.timestamp("us", "UTC")),
        }
    )
    pq.write_table(table, tmp_path / "m.parquet")
    result = extract_store(StoreConfig(name="pq", kind="parquet", path=str(tmp_path / "m.parquet")), LIMIT)
    assert result.memories.get_column("id").to_list() == ["p1"]
    assert result.memories.get_column("entities").to_list() == [["pgvector"]]
    assert sorted(result.rejects.get_column("location").to_list()) == ["m.parquet:row 2", "m.parquet:row 3"]
    assert_balanced(result)


# Provided vectors are read and checked as one column (no Python float per number); each case
# must end exactly as the per-record rule says: the vector kept, or the record rejected why.
VECTOR_CASES = [
    ([0.5, -1.0, 2.0], None),
    ([1, 2, 3], None),  # integers are numbers
    ([], "field 'embedding' must be a non-empty list of numbers"),
    ([1.0, float("nan")], "field 'embedding' must hold finite numbers only"),
    ([1.0, float("inf")], "field 'embedding' must hold finite numbers only"),
    ([1.0, None], "field 'embedding' must hold finite numbers only"),
    ([0.0, 0.0], "all zeros"),
    ([1e-30, 0.0], "all zeros"),  # tiny: its float32 norm underflows, the per-record rule says so
    ([1e39, 1.0], "overflows float32"),
    ([3e38, 3e38], "norm"),
    (None, None),
]


@pytest.mark.parametrize(("arrow_type", "cases"), [
    (pa.list_(pa.float64()), VECTOR_CASES),
    (pa.list_(pa.float32()), [case for case in VECTOR_CASES if "float32" not in str(case[1]) and "norm" not in str(case[1])]),
    (pa.large_list(pa.float64()), VECTOR_CASES),
    (pa.list_(pa.int64()), [([1, 2, 3], None), ([], "non-empty"), ([4, None], "finite numbers only"), (None, None)]),
])
def test_parquet_vectors_checked_in_bulk_keep_every_verdict(tmp_path, arrow_type, cases):
    ids = [f"v{i}" for i in range(len(cases))]
    table = pa.table({
        "id": ids, "tier": ["semantic"] * len(cases), "content": [f"fact {i}" for i in range(len(cases))],
        "embedding": pa.array([vector for vector, _ in cases], type=arrow_type),
    })
    pq.write_table(table, tmp_path / "v.parquet")
    result = extract_store(StoreConfig(name="pq", kind="parquet", path=str(tmp_path / "v.parquet")), LIMIT)
    assert_balanced(result)
    kept = dict(zip(result.memories["id"], result.memories["embedding"].to_list()))
    reasons = dict(zip(result.rejects["location"], result.rejects["reason"]))
    for i, (vector, why) in enumerate(cases):
        if why is None:
            assert kept[f"v{i}"] == (None if vector is None else [float(x) for x in vector])
        else:
            assert f"v{i}" not in kept and why in reasons[f"v.parquet:row {i + 1}"]
    assert result.memories.schema["embedding"] == pl.List(pl.Float32)
    # and they were read as one column, not row by row
    first = next(iter(parquet_records(StoreConfig(name="pq", kind="parquet", path=str(tmp_path / "v.parquet")))))
    assert isinstance(first, BulkVectors) and first.vectors.len() == len(cases)


@pytest.mark.parametrize("with_rejects", [False, True])
def test_a_store_read_in_many_batches_equals_one_batch(tmp_path, monkeypatch, with_rejects):
    """Rows become a frame, and vectors a float32 chunk, every batch (a million rows held as dicts
    and float64 lists took ~14 GB); a store of many batches, bad rows among them or not, ends
    exactly as one batch does: the same rows in order, each with its own vector."""
    n = 23
    vectors = [[float(i), 1.0, -0.5] for i in range(n)]
    contents = [f"fact {i}" for i in range(n)]
    if with_rejects:
        vectors[4] = [1.0, float("nan"), 0.0]  # a vector that fails, in the second batch
        vectors[11] = None  # no vector: kept, to be embedded
        contents[17] = ""  # an empty content: rejected
    pq.write_table(pa.table({"id": [f"m{i:02d}" for i in range(n)], "tier": ["semantic"] * n, "content": contents,
                             "embedding": pa.array(vectors, type=pa.list_(pa.float64()))}), tmp_path / "b.parquet")
    store = StoreConfig(name="pq", kind="parquet", path=str(tmp_path / "b.parquet"))
    whole = extract_store(store, LIMIT)
    monkeypatch.setattr(extract_module, "_BATCH_ROWS", 4)
    assert sum(isinstance(r, BulkVectors) for r in parquet_records(store)) == 6  # read in six batches
    batched = extract_store(store, LIMIT)
    assert batched.memories.equals(whole.memories) and batched.rejects.equals(whole.rejects)
    assert batched.memories.schema["embedding"] == pl.List(pl.Float32)
    kept = dict(zip(batched.memories["id"], batched.memories["embedding"].to_list()))
    assert kept["m07"] == [7.0, 1.0, -0.5] and kept["m22"] == [22.0, 1.0, -0.5]
    assert (kept.get("m11", "gone"), "m04" in kept, "m17" in kept) == ((None, False, False) if with_rejects else ([11.0, 1.0, -0.5], True, True))
    assert batched.memories.height + batched.rejects.height == n


def test_parquet_fixed_size_vectors_and_raw_text_of_a_duplicate(tmp_path):
    vectors = pa.FixedSizeListArray.from_arrays(pa.array([1.0, 0.0, 0.0, 1.0], pa.float32()), 2)
    pq.write_table(pa.table({"id": ["a", "a"], "tier": ["semantic"] * 2, "content": ["x", "y"], "embedding": vectors}), tmp_path / "f.parquet")
    result = extract_store(StoreConfig(name="pq", kind="parquet", path=str(tmp_path / "f.parquet")), LIMIT)
    assert result.memories["embedding"].to_list() == [[1.0, 0.0], [0.0, 1.0]]
    rejects = combined_extracts([result]).rejects
    # a valid vector is named in the raw text, not spelled out: the preview keeps the fields a user fixes
    assert json.loads(rejects["raw"][0]) == {"id": "a", "tier": "semantic", "content": "x", "embedding": "<2 numbers>"}


@pytest.mark.parametrize(("line", "embedding", "reason"), [
    ({"embedding": [0.25, 1]}, [0.25, 1.0], None),
    ({"embedding": [0.25, True]}, None, "must hold finite numbers only"),  # a boolean is not a number
    ({"embedding": [1.0], "metadata": {"flag": False}}, [1.0], None),  # true/false elsewhere: read one by one
    ({"embedding": [1.0, "2"]}, None, "must hold finite numbers only"),
    ({"embedding": [[1.0]]}, None, "must hold finite numbers only"),
    ('{"embedding": [1.0, NaN]}', None, "must hold finite numbers only"),
    ({"embedding": []}, None, "non-empty list"),
])
def test_jsonl_vectors_checked_in_bulk_keep_every_verdict(tmp_path, line, embedding, reason):
    record = json.dumps({**GOOD, "id": "e2", **line}) if isinstance(line, dict) else line[:-1] + ', "id": "e2", "tier": "episodic", "content": "x"}'
    result = extract_store(jsonl_store(write_jsonl(tmp_path / "a.jsonl", [{**GOOD, "embedding": [3.0]}, record])), LIMIT)
    assert_balanced(result)
    kept = dict(zip(result.memories["id"], result.memories["embedding"].to_list()))
    assert kept["e1"] == [3.0]
    if reason is None:
        assert kept["e2"] == embedding
    else:
        assert "e2" not in kept and reason in result.rejects["reason"][0]
        assert result.rejects["raw"][0] == record  # a JSONL reject keeps its line as written


def make_sqlite(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("create table memories (id text, tier text, content blob, refs text, metadata text)")
    con.execute("insert into memories values ('q1', 'procedural', 'Run deploy.sh --prod', '[\"e1\"]', '{\"owner\": \"maya\"}')")
    con.execute("insert into memories values ('q2', 'procedural', x'6361ff', null, null)")  # invalid UTF-8
    con.execute("insert into memories values ('q3', 'procedural', 'x', 'not-a-list', null)")
    con.commit()
    con.close()
    return path


def test_sqlite_store_read_only_with_row_keys(tmp_path):
    path = make_sqlite(tmp_path / "m.sqlite")
    before = path.read_bytes()
    result = extract_store(StoreConfig(name="sq", kind="sqlite", path=str(path), table="memories"), LIMIT)
    row = result.memories.row(0, named=True)
    assert (row["id"], row["refs"], json.loads(row["metadata"])) == ("q1", ["e1"], {"owner": "maya"})
    reasons = dict(zip(result.rejects.get_column("location"), result.rejects.get_column("reason")))
    assert "not valid UTF-8" in reasons["memories:rowid=2"]
    assert "field 'refs' must be a list" in reasons["memories:rowid=3"]
    assert_balanced(result)
    assert path.read_bytes() == before


def test_sqlite_query_and_missing_table(tmp_path):
    path = make_sqlite(tmp_path / "m.sqlite")
    by_query = extract_store(StoreConfig(name="sq", kind="sqlite", path=str(path), query="select * from memories where id = 'q1'"), LIMIT)
    assert by_query.memories.get_column("location").to_list() == ["query:row 1"]
    with pytest.raises(ExtractError, match="store 'sq'"):
        extract_store(StoreConfig(name="sq", kind="sqlite", path=str(path), table="nope"), LIMIT)


def test_markdown_workspace(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "skills" / "deploy").mkdir(parents=True)
    (ws / "memory" / "2026-11-04.md").write_text(
        "# 2026-11-04\n"
        "\n"
        "## 09:00 Billing migration\n"
        "- 09:12 Maya asked to move billing-api to Python 3.12.\n"
        "- Ran the suite: 3 failures in\n"
        "  test_pgvector.py.\n"
        "\n"
        "A paragraph entry about backups.\n"
    )
    (ws / "MEMORY.md").write_text(
        "# Memory\n\n## Projects\n"
        "- billing-api targets Python 3.12.\n"
        "  Source: memory/2026-11-04.md#L4-L4\n"
        "- Untraced fact.\n"
        "  Source: memory/2026-11-01.md#L1-L2\n"
    )
    (ws / "skills" / "deploy" / "SKILL.md").write_text("---\nname: deploy-service\ndescription: Ship a service with deploy.sh\n---\n1. Run deploy.sh\n")
    result = extract_store(StoreConfig(name="ws", kind="markdown", path=str(ws)), LIMIT)
    assert_balanced(result)
    mem = result.memories
    episodes = mem.filter(pl.col("tier") == "episodic").sort("location")
    assert episodes.get_column("content").to_list() == [
        "Billing migration: Maya asked to move billing-api to Python 3.12.",
        "Billing migration: Ran the suite: 3 failures in\ntest_pgvector.py.",
        "Billing migration: A paragraph entry about backups.",
    ]
    assert episodes.get_column("location").to_list() == ["memory/2026-11-04.md:L4-L4", "memory/2026-11-04.md:L5-L6", "memory/2026-11-04.md:L8-L8"]
    stamps = episodes.get_column("timestamp").dt.strftime("%H:%M").to_list()
    assert stamps == ["09:12", "09:00", "09:00"]
    assert episodes.get_column("session_id").to_list()[:2] == ["2026-11-04/billing-migration"] * 2
    facts = mem.filter(pl.col("tier") == "semantic").sort("location")
    first_episode = episodes.get_column("id")[0]
    assert facts.get_column("refs").to_list() == [[first_episode], []]
    assert facts.get_column("content").to_list() == ["Projects: billing-api targets Python 3.12.", "Projects: Untraced fact."]
    assert json.loads(facts.get_column("metadata")[1])["unresolved_sources"] == ["memory/2026-11-01.md:1-2"]
    skill = mem.filter(pl.col("tier") == "procedural").row(0, named=True)
    assert skill["id"] == "ws:skill/deploy"
    assert json.loads(skill["metadata"])["description"] == "Ship a service with deploy.sh"
    assert skill["content"].startswith("deploy-service: Ship a service with deploy.sh")


def test_markdown_ids_survive_inserted_lines(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    log = ws / "memory" / "2026-11-04.md"
    store = StoreConfig(name="ws", kind="markdown", path=str(ws))
    log.write_text("# d\n- first entry\n- second entry\n")
    before = set(extract_store(store, LIMIT).memories.get_column("id"))
    log.write_text("# d\n- a new entry on top\n\n- first entry\n- second entry\n")
    after = set(extract_store(store, LIMIT).memories.get_column("id"))
    assert before < after and len(after - before) == 1


def test_markdown_bad_bytes_and_bad_front_matter_are_rejects(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "skills" / "x").mkdir(parents=True)
    (ws / "memory" / "2026-11-04.md").write_bytes(b"# d\n- good entry\n- bad \xff entry\n")
    (ws / "skills" / "x" / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    result = extract_store(StoreConfig(name="ws", kind="markdown", path=str(ws)), LIMIT)
    assert result.memories.get_column("content").to_list() == ["good entry"]
    assert sorted(result.rejects.get_column("reason").to_list()) == ["front matter is not valid YAML: while parsing a flow sequence", "invalid UTF-8 in entry"]
    assert_balanced(result)


def test_markdown_missing_folder_names_store(tmp_path):
    with pytest.raises(ExtractError, match="store 'ws': markdown workspace folder not found"):
        extract_store(StoreConfig(name="ws", kind="markdown", path=str(tmp_path / "nope")), LIMIT)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-02T09:12:00Z", datetime(2026, 11, 2, 9, 12, tzinfo=timezone.utc)),
        ("2026-11-02T09:12:00-05:00", datetime(2026, 11, 2, 14, 12, tzinfo=timezone.utc)),
        ("2026-11-02", datetime(2026, 11, 2, tzinfo=timezone.utc)),
        (0, datetime(1970, 1, 1, tzinfo=timezone.utc)),
        (None, None),
    ],
)
def test_parse_timestamp(value, expected):
    assert parse_timestamp(value) == expected


def test_markdown_hash_inside_an_entry_is_text_not_a_heading(tmp_path):
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-04.md").write_text("# d\n- Reviewed the fix\n  #501: pool size bumped\n#hashtag line stays too\n")
    result = extract_store(StoreConfig(name="ws", kind="markdown", path=str(ws)), LIMIT)
    assert result.memories.get_column("content").to_list() == ["Reviewed the fix\n#501: pool size bumped\n#hashtag line stays too"]


@pytest.mark.parametrize("text", [
    '{"a": [1.5, 2e-7, -0.0, 123456789012345678901234567890]}',  # an integer past 64 bits
    '{"a": NaN, "b": Infinity}',
    '{"a": "\\ud800"}',  # a lone surrogate
    '\ufeff{"a": 1}',  # a byte order mark
    '{"a": 1, "a": 2}',  # a repeated key: the last wins
    '[' * 5000 + ']' * 5000,  # nested too deeply
    '{"a": 1} {"b": 2}',
    '{"a": 1,}',
])
def test_jsonl_lines_parse_exactly_as_json_does(text):
    """The fast parser is only a shortcut: every line gives json.loads' object or its error."""
    from crosstier.transforms.stores.extract import _parsed_line

    try:
        expected = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        with pytest.raises(type(exc)):
            _parsed_line(text.encode("utf-8", errors="surrogatepass"), text)
        return
    got = _parsed_line(text.encode("utf-8", errors="surrogatepass"), text)
    assert json.dumps(got) == json.dumps(expected)  # NaN-safe comparison
