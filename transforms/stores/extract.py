"""Extract stage: tier stores -> canonical memory rows + reject rows.

Every adapter yields `RawRecord`s (a location, the raw text, and the parsed fields or
why they could not be parsed). One validator turns them into memories or rejects, so
each store kind obeys the same rules and records read = memories + rejects, always.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import json
import math
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl

from crosstier.core.catalog import MAX_PARTITION_VALUE_CHARS, partition_value
from crosstier.core.config import Settings, StoreConfig
from crosstier.transforms.sorted_rows import with_rows_inserted
from crosstier.transforms.stores.errors import ExtractError
from crosstier.transforms.stores.markdown import markdown_records
from crosstier.transforms.schema import MEMORY_SCHEMA, REJECT_SCHEMA, TIERS

RAW_PREVIEW_CHARS = 4000  # a reject keeps this much of the raw record: enough to find and fix it
MAX_ID_CHARS = 512
_LONG_DIGITS = re.compile(rb"\d{19,}")
_BATCH_ROWS = 16_384  # rows read, checked and held as Python objects at a time


@dataclass(frozen=True)
class RawRecord:
    """One record as read: where it came from, its raw text, and its fields or a parse error."""

    location: str
    raw: str
    fields: dict[str, Any] | None = None
    error: str | None = None
    vector: int | None = None  # its provided vector's row in the BulkVectors read before it


@dataclass
class StoreExtract:
    """What one store yielded."""

    store: str
    memories: pl.DataFrame
    rejects: pl.DataFrame
    records_read: int


@dataclass
class Extracted:
    """All stores together, after the cross-store id check."""

    memories: pl.DataFrame
    rejects: pl.DataFrame
    records_read: int
    per_store: dict[str, int] = field(default_factory=dict)


def content_hash(content: str) -> str:
    """sha256 of the content: the key for caching and change detection."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _preview(raw: str) -> str:
    if len(raw) <= RAW_PREVIEW_CHARS:
        return raw
    return raw[:RAW_PREVIEW_CHARS] + f"...[truncated, {len(raw)} chars in all]"


# ---------------------------------------------------------------- field rules


def _text_field(name: str, value: Any, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise ValueError(f"missing required field '{name}'")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"field '{name}' must be a string, got {type(value).__name__}")
    text = str(value)
    if "\x00" in text:
        raise ValueError(f"field '{name}' contains a NUL character")
    if required and not text.strip():
        raise ValueError(f"field '{name}' is empty")
    return text


def _from_json_text(name: str, value: Any, expected: str) -> Any:
    """SQLite, PostgreSQL text columns and pgvector's text form keep lists and objects as
    JSON text: parse it, or say what the field must be."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError(f"field '{name}' must be {expected}") from None


def _string_list(name: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    value = _from_json_text(name, value, "a list of strings (or JSON text of one)")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"field '{name}' must be a list of strings, got {type(value).__name__}")
    out = []
    for item in value:
        if not isinstance(item, str) or "\x00" in item:
            raise ValueError(f"field '{name}' must be a list of strings, got an item {item!r:.60}")
        out.append(item)
    return out


def parse_timestamp(value: Any) -> datetime | None:
    """A UTC datetime from ISO-8601 text, a datetime, a date or epoch seconds; naive means UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"timestamp must be ISO-8601 text or epoch seconds, got {value!r}")
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    elif isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"timestamp out of range: {value!r}")
        try:
            parsed = datetime.fromtimestamp(value, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"timestamp out of range: {value!r}") from None
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"unparseable timestamp {value!r:.80} (expected ISO-8601)") from None
    else:
        raise ValueError(f"timestamp must be ISO-8601 text or epoch seconds, got {type(value).__name__}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    try:
        return parsed.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise ValueError(f"timestamp out of range: {value!r:.80}") from None


def _metadata(value: Any) -> str | None:
    if value is None:
        return None
    value = _from_json_text("metadata", value, "an object (or JSON text of one)")
    if not isinstance(value, dict):
        raise ValueError(f"field 'metadata' must be an object, got {type(value).__name__}")
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"field 'metadata' is not JSON-serialisable: {exc}") from None


def _embedding(value: Any) -> list[float] | None:
    if value is None:
        return None
    value = _from_json_text("embedding", value, "a list of numbers")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError("field 'embedding' must be a non-empty list of numbers")
    if any(isinstance(item, bool) or not isinstance(item, (int, float)) for item in value):
        raise ValueError("field 'embedding' must hold finite numbers only")
    return stored_vector(value)


def stored_vector(values: list[float] | tuple[float, ...]) -> list[float]:
    """A provided vector checked as it will be stored and scored: cast to float32 every value
    must stay finite, and so must its float32 norm, which must not be zero (it is divided by).
    A Python float such as 3.5e38 is finite but overflows float32; raises ValueError saying so."""
    try:
        wide = np.asarray(values, dtype=np.float64)
    except (OverflowError, ValueError):  # an int past float64's range
        raise ValueError("field 'embedding' holds a number outside the float64 range") from None
    if not np.isfinite(wide).all():
        raise ValueError("field 'embedding' must hold finite numbers only")
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        narrow = wide.astype(np.float32)
        # the same expression provided_embeddings normalises with, row-wise on float32
        norm = np.linalg.norm(narrow[None, :], axis=1)[0]
    if not np.isfinite(narrow).all():
        at = int(np.argmin(np.isfinite(narrow)))
        raise ValueError(f"field 'embedding' value {float(wide[at])!r} at index {at} overflows float32 (max {float(np.finfo(np.float32).max):.4g})")
    if not np.isfinite(norm):
        raise ValueError("field 'embedding' has a length (norm) that overflows float32: its values are too large to normalise")
    if norm == 0:
        raise ValueError("field 'embedding' is all zeros as float32: it has no direction to compare")
    return wide.tolist()


def with_vector_length(extract: StoreExtract, dim: int) -> StoreExtract:
    """The store's memories whose provided vector has the model's `dim` values; a vector of
    another length makes its record a reject (the rest of the run goes on)."""
    if "embedding" not in extract.memories.columns or extract.memories.height == 0:
        return extract
    length = pl.col("embedding").list.len()
    wrong = pl.col("embedding").is_not_null() & (length != dim)
    bad = extract.memories.filter(wrong)
    if bad.height == 0:
        return extract
    rejects = bad.select(
        pl.lit(extract.store).alias("store"),
        "location",
        pl.col("_raw").alias("raw") if "_raw" in bad.columns else pl.lit("").alias("raw"),
        pl.format("field 'embedding' has {} values but the embedding model makes {}-dim vectors (set EMBEDDING_MODEL to the model that made them)", length, pl.lit(dim)).alias("reason"),
    )
    return StoreExtract(extract.store, extract.memories.filter(~wrong), pl.concat([extract.rejects, rejects.cast(REJECT_SCHEMA)]), extract.records_read)


def canonical_memory(fields: dict[str, Any], store: StoreConfig, location: str, max_content_bytes: int) -> dict[str, Any]:
    """One record's fields -> a canonical memory row; raises ValueError with the broken rule."""
    if not isinstance(fields, dict):
        raise ValueError(f"record must be an object, got {type(fields).__name__}")
    memory_id = _text_field("id", fields.get("id"), required=True)
    if len(memory_id) > MAX_ID_CHARS:
        raise ValueError(f"field 'id' longer than {MAX_ID_CHARS} characters")
    if any(ch < " " for ch in memory_id):
        raise ValueError("field 'id' contains control characters")
    tier_key = store.tier_column or "tier"
    tier = fields.get(tier_key)
    if tier is None or tier == "":
        tier = store.tier
    if tier is None:
        raise ValueError(f"missing required field '{tier_key}' (and the store sets no tier)")
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r:.40} (known: {', '.join(TIERS)})")
    content = fields.get("content")
    if isinstance(content, bytes):
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"content is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    content = _text_field("content", content, required=True)
    size = len(content.encode("utf-8"))
    if size > max_content_bytes:
        raise ValueError(f"content is {size} bytes, over the limit of {max_content_bytes}")
    namespace = _text_field("namespace", fields.get("namespace")) or store.namespace or "default"
    encoded = len(partition_value(namespace))
    if encoded > MAX_PARTITION_VALUE_CHARS:
        # the snapshot's partition folder is named by it: too long a name fails the publish
        raise ValueError(f"namespace is {encoded} characters once percent-encoded for its partition folder, over {MAX_PARTITION_VALUE_CHARS}")
    return {
        "id": memory_id,
        "tier": tier,
        "content": content,
        "timestamp": parse_timestamp(fields.get("timestamp")),
        "session_id": _text_field("session_id", fields.get("session_id")),
        "namespace": namespace,
        "readers": _string_list("readers", fields.get("readers")),
        "entities": _string_list("entities", fields.get("entities")) or [],
        "refs": _string_list("refs", fields.get("refs")) or [],
        "metadata": _metadata(fields.get("metadata")),
        "store": store.name,
        "location": location,
        "content_hash": content_hash(content),
        "embedding": _embedding(fields.get(store.embedding_column or "embedding")),
    }


def validated_records(records: Iterable[RawRecord], store: StoreConfig, max_content_bytes: int) -> StoreExtract:
    """Raw records of one store -> memories and rejects (every record lands in exactly one).

    A record may come with its provided vector already checked in bulk (`BulkVectors`, by the
    Parquet and JSONL readers): its fields then lack the vector, which joins the row at the end
    as one column, so no vector passes through Python floats. Accepted rows become a frame every
    _BATCH_ROWS and the bulk vectors are held as float32 (what the memories keep): at a million
    rows with 384 numbers each, Python dicts and float64 lists held to the end took ~14 GB."""
    schema = {**MEMORY_SCHEMA, "_raw": pl.String}
    frames: list[pl.DataFrame] = []
    rows: list[dict[str, Any]] = []
    rejects: list[dict[str, str]] = []
    bulk_rows: list[int] = []  # per accepted row: its vector's row in the bulk vectors, or -1
    bulk: list[pl.Series] = []
    base = total = 0  # where the latest bulk vectors start, and how many there are in all
    read = 0
    for record in records:
        if isinstance(record, BulkVectors):
            bulk.append(record.vectors.cast(pl.List(pl.Float32)))
            base, total = total, total + record.vectors.len()
            continue
        read += 1
        if record.error is not None:
            rejects.append({"store": store.name, "location": record.location, "raw": _preview(record.raw), "reason": record.error})
            continue
        try:
            row = canonical_memory(record.fields, store, record.location, max_content_bytes)
        except ValueError as exc:
            rejects.append({"store": store.name, "location": record.location, "raw": _preview(record.raw), "reason": str(exc)})
            continue
        rows.append({**row, "_raw": _preview(record.raw)})
        bulk_rows.append(base + record.vector if record.vector is not None else -1)
        if len(rows) == _BATCH_ROWS:
            frames.append(pl.DataFrame(rows, schema=schema))
            rows = []
    if rows or not frames:
        frames.append(pl.DataFrame(rows, schema=schema) if rows else pl.DataFrame(schema=schema))
    memories = pl.concat(frames) if len(frames) > 1 else frames[0]
    del frames, rows
    if total and memories.height:
        where = pl.Series(bulk_rows, dtype=pl.Int64)
        if where.len() == total and (where == pl.int_range(0, total, eager=True)).all():
            vectors = pl.concat(bulk, rechunk=False)  # every row accepted, in order: nothing to gather
        else:
            vectors = pl.concat(bulk, rechunk=False).gather(where.clip(0, None))
        del bulk
        if where.min() >= 0:  # every row's vector came in bulk: no per-row choice to make
            memories = memories.with_columns(embedding=vectors)
        else:
            memories = memories.with_columns(_bulk=vectors, _where=where).with_columns(
                embedding=pl.when(pl.col("_where") >= 0).then(pl.col("_bulk")).otherwise(pl.col("embedding"))
            ).drop("_bulk", "_where")
    return StoreExtract(store.name, memories, pl.DataFrame(rejects, schema=REJECT_SCHEMA), read)


# ---------------------------------------------------------------- vectors in bulk

_FLOAT32_MAX = float(np.finfo(np.float32).max)
# Sums of squares (in float64) whose float32 norm is surely finite and non-zero: below 1e38
# a float32 accumulation cannot reach its max (3.4e38); above 1e-30 some square is far above
# float32's smallest subnormal (1.4e-45) for any length up to 1e14.
_SAFE_SUM_OF_SQUARES = (1e-30, 1e38)


@dataclass(frozen=True)
class BulkVectors:
    """Provided vectors read as one column, for the records that follow it (their `vector` indexes it)."""

    vectors: pl.Series


def bulk_vector_ok(vectors: pl.Series) -> pl.Series:
    """Per row, whether a list of numbers surely passes the embedding rule: non-empty, every
    item a finite number that float32 holds, and a sum of squares well inside float32's range
    (its norm cannot overflow, nor underflow to zero, in any summation order). The rest (null,
    empty, NaN, huge, near either edge) go through `stored_vector` one by one, which decides
    exactly and says why, so the bulk check changes no verdict."""
    finite = vectors.list.eval(pl.element().is_not_null() & pl.element().is_finite() & (pl.element().abs() <= _FLOAT32_MAX)).list.all()
    squares = vectors.list.eval(pl.element().cast(pl.Float64).pow(2)).list.sum()
    inside = (squares > _SAFE_SUM_OF_SQUARES[0]) & (squares < _SAFE_SUM_OF_SQUARES[1])
    return (vectors.is_not_null() & (vectors.list.len() > 0) & finite & inside).fill_null(False)


def _numeric_list(dtype: pl.DataType) -> bool:
    """A list of integers or float32/float64: what Python reads as int and float items, which
    the embedding rule accepts (decimals and halves it does not, so they go per record)."""
    if not isinstance(dtype, (pl.List, pl.Array)):
        return False
    inner = dtype.inner
    return inner.is_integer() or inner in (pl.Float32, pl.Float64)


# ---------------------------------------------------------------- adapters


def _store_files(store: StoreConfig) -> list[Path]:
    pattern = store.path or ""
    if glob.has_magic(pattern):
        files = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        if not files:
            raise ExtractError(f"store '{store.name}': no file matches {pattern}")
        return files
    path = Path(pattern)
    if not path.exists():
        raise ExtractError(f"store '{store.name}': path not found: {path}")
    if path.is_dir():
        raise ExtractError(f"store '{store.name}': {path} is a folder; a {store.kind} store needs a file or a glob")
    return [path]


def _jsonl_batches(path: Path) -> Iterator[list[tuple[int, bytes]]]:
    """(line number, bytes) of the non-blank lines of a .jsonl or .jsonl.gz file, _BATCH_ROWS at a time."""
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    batch: list[tuple[int, bytes]] = []
    with opener(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                batch.append((number, line))
                if len(batch) == _BATCH_ROWS:
                    yield batch
                    batch = []
    if batch:
        yield batch


def _parsed_line(line: bytes, text: str) -> Any:
    """json.loads(text), parsed by orjson when it can (3-4x faster on long number lists): for
    standard JSON both give the same objects; what orjson refuses (NaN, lone surrogates, a byte
    order mark) goes to json, which accepts it or raises the error a reject reports. A line with
    a run of 19+ digits goes to json directly: orjson reads an integer past 64 bits as a float."""
    if _LONG_DIGITS.search(line) is None:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def jsonl_records(store: StoreConfig) -> Iterator[RawRecord | BulkVectors]:
    """One record per non-blank line of each file (.jsonl or .jsonl.gz).

    Provided vectors (lists of numbers) are taken out of the parsed lines and checked in bulk
    (`BulkVectors` before the records that use them); a line that holds JSON true/false
    anywhere keeps its vector in its fields, since a bulk list would read a boolean as 1.0."""
    column = store.embedding_column or "embedding"
    for path in _store_files(store):
        try:
            for lines in _jsonl_batches(path):
                yield from jsonl_line_records(lines, path.name, column)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise ExtractError(f"store '{store.name}': cannot read {path}: {exc}") from exc


def jsonl_line_records(lines: list[tuple[int, bytes]], file_name: str, column: str) -> Iterator[RawRecord | BulkVectors]:
    """Records of numbered non-blank JSONL lines of one file (their vectors checked in bulk).
    The watcher (`ctc watch`) parses appended lines with it, so both paths read alike."""
    records: list[RawRecord] = []
    lists: list[list] = []
    for number, line in lines:
        location = f"{file_name}:{number}"
        try:
            text = line.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            raw = line.decode("utf-8", errors="replace").rstrip("\r\n")
            records.append(RawRecord(location, raw, error=f"invalid UTF-8 ({exc.reason} at byte {exc.start})"))
            continue
        try:
            fields = _parsed_line(line, text)
        except json.JSONDecodeError as exc:
            records.append(RawRecord(location, text, error=f"not valid JSON: {exc.msg} at column {exc.colno}"))
            continue
        except RecursionError:
            records.append(RawRecord(location, text, error="not valid JSON: nested too deeply"))
            continue
        if not isinstance(fields, dict):
            records.append(RawRecord(location, text, error=f"a line must hold a JSON object, got {type(fields).__name__}"))
            continue
        value = fields.get(column)
        if type(value) is list and value and b"true" not in line and b"false" not in line:
            records.append(RawRecord(location, text, fields, vector=len(lists)))
            lists.append(value)
        else:
            records.append(RawRecord(location, text, fields))
    yield from _with_bulk_vectors(records, lists, column)


def _with_bulk_vectors(records: list[RawRecord], lists: list[list], column: str) -> Iterator[RawRecord | BulkVectors]:
    """The records, their bulk-readable vectors checked as one column first; a record whose
    vector fails the bulk check (or all of them, when the lists do not form one numeric
    column) gets its vector back in its fields, for the per-record rule to judge."""
    try:
        vectors = pl.Series("v", lists, dtype=pl.List(pl.Float64), strict=True)
        ok = bulk_vector_ok(vectors).to_list()
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        vectors, ok = pl.Series("v", [], dtype=pl.List(pl.Float64)), [False] * len(lists)
    yield BulkVectors(vectors)
    for record in records:
        if record.vector is None:
            yield record
        elif ok[record.vector]:
            fields = dict(record.fields)
            del fields[column]
            yield RawRecord(record.location, record.raw, fields, vector=record.vector)
        else:
            yield RawRecord(record.location, record.raw, record.fields)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def parquet_records(store: StoreConfig) -> Iterator[RawRecord | BulkVectors]:
    """One record per row of each Parquet file, read in record batches.

    A numeric list column of provided vectors is checked in bulk (`BulkVectors`) and left out
    of each row's fields and raw text (the raw says how many numbers it held); rows whose
    vector fails the bulk check get it back in their fields for the per-record rule."""
    import pyarrow.parquet as pq

    column = store.embedding_column or "embedding"
    for path in _store_files(store):
        try:
            parquet = pq.ParquetFile(path)
            row = 0
            for batch in parquet.iter_batches(batch_size=_BATCH_ROWS):
                vectors = None
                if column in batch.schema.names:
                    as_series = pl.from_arrow(batch.column(column))
                    if isinstance(as_series, pl.Series) and _numeric_list(as_series.dtype):
                        vectors = as_series.cast(pl.List(pl.Float64))
                        batch = batch.drop_columns([column])
                if vectors is None:
                    for fields in batch.to_pylist():
                        row += 1
                        raw = json.dumps(fields, default=_json_default, ensure_ascii=False)
                        yield RawRecord(f"{path.name}:row {row}", raw, fields)
                    continue
                ok = bulk_vector_ok(vectors).to_list()
                sizes = vectors.list.len().to_list()
                yield BulkVectors(vectors)
                for i, fields in enumerate(batch.to_pylist()):
                    row += 1
                    location = f"{path.name}:row {row}"
                    if ok[i]:  # the vector is valid: the raw text names it rather than spelling it out
                        raw = json.dumps({**fields, column: f"<{sizes[i]} numbers>"}, default=_json_default, ensure_ascii=False)
                        yield RawRecord(location, raw, fields, vector=i)
                    else:
                        vector = vectors[i]
                        fields = {**fields, column: None if vector is None else vector.to_list()}
                        yield RawRecord(location, json.dumps(fields, default=_json_default, ensure_ascii=False), fields)
        except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) on corrupt files
            raise ExtractError(f"store '{store.name}': cannot read {path}: {exc}") from exc


def _decoded_row(names: list[str], values: tuple) -> tuple[dict[str, Any] | None, str, str | None]:
    fields: dict[str, Any] = {}
    error = None
    for name, value in zip(names, values):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                error = f"column '{name}' is not valid UTF-8 ({exc.reason} at byte {exc.start})"
                value = value.decode("utf-8", errors="replace")
        fields[name] = value
    raw = json.dumps(fields, default=_json_default, ensure_ascii=False)
    return (None if error else fields), raw, error


def _quoted_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def provides_vector_column(store: StoreConfig) -> bool:
    """Whether every file of a Parquet store has the vector column (`embedding_column`, else
    `embedding`): its memories come with vectors, so the run may need no model for them.
    Reads the files' schemas only. False for other kinds (a record may or may not carry one)
    and for files that cannot be read (extract says why)."""
    if store.kind != "parquet":
        return False
    import pyarrow.parquet as pq

    column = store.embedding_column or "embedding"
    try:
        return all(column in pq.read_schema(path).names for path in _store_files(store))
    except (ExtractError, OSError, ValueError):
        return False


def sqlite_records(store: StoreConfig) -> Iterator[RawRecord]:
    """One record per row of the table or query; the file is opened read-only."""
    path = Path(store.path or "")
    if not path.is_file():
        raise ExtractError(f"store '{store.name}': sqlite file not found: {path}")
    try:
        con = sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ExtractError(f"store '{store.name}': cannot open {path}: {exc}") from exc
    # Bytes, so invalid UTF-8 in one row becomes a reject instead of an exception for all.
    con.text_factory = bytes
    try:
        if store.query:
            cursor = con.execute(store.query)
            key_column = None
        else:
            cursor = con.execute(f"select rowid as __rowid__, * from {_quoted_identifier(store.table or '')}")
            key_column = "__rowid__"
        names = [d[0] for d in cursor.description]
        number = 0
        while batch := cursor.fetchmany(1000):
            for values in batch:
                number += 1
                fields, raw, error = _decoded_row(names, values)
                if key_column:
                    location = f"{store.table}:rowid={values[0]}"
                    if fields is not None:
                        fields.pop(key_column, None)
                else:
                    location = f"query:row {number}"
                yield RawRecord(location, raw, fields, error)
    except sqlite3.Error as exc:
        raise ExtractError(f"store '{store.name}': cannot read {path}: {exc}") from exc
    finally:
        con.close()


def _markdown_records(store: StoreConfig) -> Iterator[RawRecord]:
    root = Path(store.path or "")
    if not root.is_dir():
        raise ExtractError(f"store '{store.name}': markdown workspace folder not found: {root}")
    try:
        for location, raw, fields, error in markdown_records(root, store.name, store.timezone):
            yield RawRecord(location, raw, fields, error)
    except OSError as exc:
        raise ExtractError(f"store '{store.name}': cannot read workspace {root}: {exc}") from exc


def _postgres_records(store: StoreConfig) -> Iterator[RawRecord]:
    from crosstier.transforms.stores.postgres import postgres_records

    for location, raw, fields, error in postgres_records(store):
        yield RawRecord(location, raw, fields, error)


ADAPTERS: dict[str, Callable[[StoreConfig], Iterator[RawRecord | BulkVectors]]] = {
    "jsonl": jsonl_records,
    "parquet": parquet_records,
    "markdown": _markdown_records,
    "sqlite": sqlite_records,
    "postgres": _postgres_records,
}


def extract_store(store: StoreConfig, max_content_bytes: int) -> StoreExtract:
    """Read one store into memories and rejects; raises ExtractError when it cannot be read."""
    return validated_records(ADAPTERS[store.kind](store), store, max_content_bytes)


def _merged_by_id(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Frames each sorted by id, merged into one sorted by id: the smaller ones' rows put in
    place between slices of the largest (polars' merge_sorted moved every column, ~77 ms at 100k)."""
    largest, *others = sorted(frames, key=lambda frame: -frame.height)
    merged = largest
    for frame in others:
        merged = with_rows_inserted(merged, frame)
    return merged


def combined_extracts(extracts: list[StoreExtract], *, sorted_by_id: bool = False) -> Extracted:
    """All stores' memories with ids unique across stores: every copy of a duplicate id is
    rejected, naming the other places it occurs, so no silent winner is picked.
    `sorted_by_id`: each store's memories come sorted by id, so they are merged, not sorted
    again (the watcher: sorting 100k rows per micro-batch cost ~25 ms)."""
    frames = [e.memories for e in extracts if e.memories.height]
    if not frames:
        memories = pl.DataFrame(schema={**MEMORY_SCHEMA, "_raw": pl.String})
    else:
        memories = _merged_by_id(frames) if sorted_by_id else pl.concat(frames)
    ids = memories.get_column("id")
    # places only of the duplicates: the watcher combines every store's rows per micro-batch.
    # Sorted, a duplicate sits beside its twin: one comparison of neighbours rules them out.
    if sorted_by_id and not (ids.slice(1) == ids.slice(0, max(ids.len() - 1, 0))).any():
        duplicated = pl.Series(np.zeros(ids.len(), dtype=bool))
    else:
        duplicated = ids.is_duplicated()
    duplicates = memories.filter(duplicated).with_columns(place=pl.col("store") + pl.lit(" ") + pl.col("location"))
    dup_rejects = []
    if duplicates.height:
        grouped = duplicates.group_by("id", maintain_order=True).agg(pl.col("place"))
        where = {row["id"]: row["place"] for row in grouped.iter_rows(named=True)}
        for row in duplicates.iter_rows(named=True):
            others = [p for p in where[row["id"]] if p != row["place"]]
            dup_rejects.append(
                {
                    "store": row["store"],
                    "location": row["location"],
                    "raw": row["_raw"],
                    "reason": f"duplicate id {row['id']!r}: also at {', '.join(others)}",
                }
            )
    kept = (memories.filter(~duplicated) if duplicates.height else memories).drop("_raw")
    kept = kept if sorted_by_id else kept.sort("id")
    rejects = pl.concat([*(e.rejects for e in extracts), pl.DataFrame(dup_rejects, schema=REJECT_SCHEMA)])
    return Extracted(
        memories=kept,
        rejects=rejects,
        records_read=sum(e.records_read for e in extracts),
        per_store={e.store: e.records_read for e in extracts},
    )


def extract_all(settings: Settings) -> Extracted:
    """Every configured store, extracted and combined."""
    return combined_extracts([extract_store(store, settings.max_content_bytes) for store in settings.stores])
