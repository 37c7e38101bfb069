"""Hostile records and the contract every accepted memory must satisfy.

The strategies draw what a careless or malicious writer puts in a tier store: missing fields,
wrong types, huge content, invalid UTF-8, NUL bytes, ids with quotes, semicolons and `../`,
unicode look-alikes, out-of-range timestamps and duplicate ids."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from crosstier.transforms.schema import TIERS

LIMIT = 4096  # max_content_bytes in the suite: small, so "huge" content stays cheap to generate
EXAMPLES = int(os.environ.get("CTC_RELIABILITY_EXAMPLES", "40"))

# Bounded: the suite must finish in minutes on 2 cores; no example database in the tree.
# Derandomized: every run of the suite draws the same examples, so a pass is a pass and a
# failure reproduces; the failures found so far are kept as explicit @example cases.
BOUNDED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture, HealthCheck.large_base_example],
)

HOSTILE_IDS = [
    "e1",
    "a'b",
    'a"b',
    "x; drop table memories; --",
    "'); delete from memories; --",
    "../../etc/passwd",
    "..\\..\\windows",
    "/absolute/path",
    "\u0435\u0031",  # Cyrillic e + 1: looks like "e1"
    "e\u200b1",  # zero-width space
    "\uff45\uff11",  # fullwidth e1
    "e\u03011",  # combining accent
    "\u202eevil",  # right-to-left override
    "%s%s%n",
    "{0}{__class__}",
    "$1",
    "NULL",
    "a\nb",
    "tab\there",
    "\x00",
    "nul\x00inside",
    " ",
    "",
    "x" * 600,
    "\U0001f600",
]
BAD_TIMESTAMPS = [
    "2026-11-02T09:12:00+01:00",
    "2026-11-02",
    "yesterday",
    "9999-12-31T23:59:59-05:00",  # past year 9999 once in UTC
    "0001-01-01T00:30:00+01:00",  # before year 1 once in UTC
    "10000-01-01",
    "2026-13-45",
    "infinity",
    "",
    1e30,
    -1e30,
    2**63,
    0,
    1_767_225_600,
    float("nan"),
    float("inf"),
    True,
]

ids = st.sampled_from(HOSTILE_IDS) | st.text(max_size=12) | st.integers(-(2**70), 2**70) | st.none() | st.just(["list", "id"]) | st.floats()
tiers = st.sampled_from([*TIERS, "dream", "", "Episodic", "semantic\u200b", "s\u0435mantic"]) | st.none() | st.integers()
contents = (
    st.text(max_size=40)
    | st.sampled_from(["  ", "\x00", "before\x00after", "x" * (LIMIT + 1), "\u00e9" * (LIMIT // 2 + 1), "ok \ufeff bom", "\u202ereversed"])
    | st.builds(lambda n: "word " * n, st.integers(0, LIMIT // 4))
    | st.integers()
    | st.floats()
    | st.booleans()
    | st.none()
    | st.lists(st.text(max_size=3), max_size=2)
)
timestamps = st.sampled_from(BAD_TIMESTAMPS) | st.none() | st.text(max_size=12) | st.integers(-(2**64), 2**64)
short_text = st.text(max_size=10) | st.sampled_from(HOSTILE_IDS)
string_lists = st.lists(short_text, max_size=3) | st.sampled_from(['["a", "b"]', "not-a-list", "[1, 2]", "{}"]) | st.lists(st.integers() | st.none(), max_size=2) | short_text | st.none()
metadatas = st.dictionaries(st.text(max_size=5), st.text(max_size=5) | st.integers() | st.none(), max_size=3) | st.sampled_from(['{"k": 1}', "[1]", "{broken", "null"]) | st.integers() | st.none()
FLOAT32_MAX = 3.4028234663852886e38
# float64 values at float32's edges: past its range (finite in Python, inf once stored), just
# inside it (finite, but a vector of them has a norm that overflows), below its smallest
# subnormal (zero once stored), and a norm that overflows although every value fits.
FLOAT64_EDGES = [3.5e38, -3.5e38, 1e300, FLOAT32_MAX, -FLOAT32_MAX, 1e20, 1e-46, -1e-300, 5e-324, 1.5e-45]
embeddings = (
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), max_size=4)
    | st.lists(st.sampled_from(FLOAT64_EDGES) | st.floats(width=64), min_size=1, max_size=4)
    | st.sampled_from([[3.5e38, 0.0], [1e20] * 4, [1e-46, -1e-46], [FLOAT32_MAX, FLOAT32_MAX], [2**200, 1]])
    | st.sampled_from(["[0.1, 0.2]", "[1, \"a\"]", "[", "[]"])
    | st.lists(st.text(max_size=2), max_size=2)
    | st.none()
)

FIELDS = {
    "tier": tiers,
    "content": contents,
    "timestamp": timestamps,
    "session_id": short_text | st.integers() | st.none(),
    "namespace": short_text | st.integers() | st.none(),
    "readers": string_lists,
    "entities": string_lists,
    "refs": string_lists,
    "metadata": metadatas,
    "embedding": embeddings,
}
# A record: any subset of the fields, each of any shape; id first so duplicates are common.
records = st.fixed_dictionaries({}, optional={"id": ids, **FIELDS})
# Mostly-valid records too, so accepted rows are plentiful enough to check the contract on.
good_records = st.fixed_dictionaries(
    {"id": st.sampled_from(HOSTILE_IDS[:17]) | st.text(min_size=1, max_size=8), "tier": st.sampled_from(TIERS), "content": st.text(min_size=1, max_size=30)},
    optional={k: v for k, v in FIELDS.items() if k not in ("tier", "content")},
)
any_records = st.lists(records | good_records, min_size=1, max_size=12)

RAW_LINES = [
    b"\xff\xfe{}",
    b'{"id": "a", "tier": "episodic", "content": "caf\xe9"}',
    b"{not json",
    b"[1, 2]",
    b'"just a string"',
    b"null",
    b"[" * 50_000 + b"]" * 50_000,
    b'{"id": "n", "tier": "episodic", "content": "nul\x00raw"}',
    b'{"id": "dup", "id": "dup2", "tier": "semantic", "content": "duplicate key"}',
    b"\xef\xbb\xbf" + b'{"id": "bom", "tier": "semantic", "content": "bom"}',
]


def stores_as_float32(vector: list[float]) -> bool:
    """What the embed stage needs of a provided vector, checked the way it computes it: finite
    float32 values with a finite, non-zero float32 norm."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        narrow = np.asarray(vector, dtype=np.float64).astype(np.float32)
        norm = np.linalg.norm(narrow[None, :], axis=1)[0]
    return len(vector) > 0 and bool(np.isfinite(narrow).all()) and bool(np.isfinite(norm)) and norm > 0


def assert_contract(memories, store_name: str, limit: int = LIMIT) -> None:
    """Every accepted row obeys DESIGN.md's memory table: types, required fields, UTC times."""
    for row in memories.iter_rows(named=True):
        memory_id = row["id"]
        assert isinstance(memory_id, str) and memory_id.strip() and len(memory_id) <= 512, row
        assert not any(ch < " " for ch in memory_id), row
        assert row["tier"] in TIERS, row
        content = row["content"]
        assert isinstance(content, str) and content.strip() and "\x00" not in content, row
        assert len(content.encode("utf-8")) <= limit, row
        assert row["content_hash"] == hashlib.sha256(content.encode("utf-8")).hexdigest()
        ts = row["timestamp"]
        assert ts is None or (isinstance(ts, datetime) and ts.utcoffset().total_seconds() == 0 and 1 <= ts.year <= 9999), row
        assert isinstance(row["namespace"], str) and row["namespace"] and "\x00" not in row["namespace"], row
        assert row["session_id"] is None or (isinstance(row["session_id"], str) and "\x00" not in row["session_id"])
        assert row["readers"] is None or all(isinstance(r, str) and "\x00" not in r for r in row["readers"]), row
        for name in ("entities", "refs"):
            assert isinstance(row[name], list) and all(isinstance(r, str) and "\x00" not in r for r in row[name]), row
        assert row["metadata"] is None or isinstance(json.loads(row["metadata"]), dict), row
        emb = row["embedding"]
        assert emb is None or stores_as_float32(emb), row
        assert row["store"] == store_name and row["location"], row


def assert_accounted(result, written: int, store_name: str) -> None:
    """records read = inputs written = memories + rejects; every reject says where and why."""
    from reliability.stats import count

    count(inputs_tried=written, lost_records=max(0, written - result.records_read))
    assert result.records_read == written, (result.records_read, written)
    assert result.records_read == result.memories.height + result.rejects.height
    for reject in result.rejects.iter_rows(named=True):
        assert reject["store"] == store_name and reject["location"] and reject["reason"], reject
        assert isinstance(reject["raw"], str)


def _as_written(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def accepted_matches_input(memories, inputs: list[dict]) -> None:
    """An accepted memory is its input record, validated: same id, content and provided
    vector, not a mangled one (an integer id or content is accepted as its decimal text)."""
    by_id: dict[str, list[dict]] = {}
    for record in inputs:
        if isinstance(record, dict) and record.get("id") is not None:
            by_id.setdefault(str(_as_written(record["id"])), []).append(record)
    for row in memories.iter_rows(named=True):
        assert row["id"] in by_id, row
        candidates = by_id[row["id"]]
        contents = [str(_as_written(r.get("content"))) for r in candidates if r.get("content") is not None]
        assert row["content"] in contents, (row, contents)
        if row["embedding"] is not None:
            vectors = []
            for r in candidates:
                vector = _as_written(r.get("embedding"))
                if isinstance(vector, str):
                    try:
                        vector = json.loads(vector)
                    except ValueError:
                        continue
                if hasattr(vector, "tolist"):
                    vector = vector.tolist()
                if isinstance(vector, (list, tuple)):
                    try:
                        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                            vectors.append(np.asarray(vector, dtype=np.float64).astype(np.float32).tolist())  # stored as float32
                    except (TypeError, ValueError, OverflowError):
                        continue  # not numbers: that record was a reject
            assert list(row["embedding"]) in vectors, (row["embedding"], vectors)
