"""Following stores between batch runs (`ctc watch`): each store's extract kept in memory
and brought up to date after a change.

A JSONL file is read from the byte offset reached last time: only the complete lines
appended since are parsed (by the batch reader's own line parser, numbered as it numbers
them), so an append costs what was appended. A JSONL file that was replaced or cut, a
gzipped one, and every other kind of store are read again whole. Every row carries the
micro-batch (`_batch`) that read it, so the caller knows which rows are new.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from crosstier.core.config import StoreConfig
from crosstier.transforms.link.terms import with_terms
from crosstier.transforms.stores.extract import (
    BulkVectors,
    RawRecord,
    StoreExtract,
    _store_files,
    extract_store,
    jsonl_line_records,
    validated_records,
    with_vector_length,
)


_GUARD = 256  # bytes at the start and before the offset that must be unchanged for an append


@dataclass(frozen=True)
class FileTail:
    """How far one JSONL file has been read: its inode, byte offset and line count there,
    and the bytes at its start and just before the offset (a file rewritten in place, even
    to a longer one, changes them: it is then read again whole, not taken for an append)."""

    inode: int
    offset: int
    lines: int
    head: bytes = b""
    before: bytes = b""


@dataclass(frozen=True)
class FollowedStore:
    """One store's extract (memories with terms and `_batch`, rejects) and, for a plain
    JSONL store, how far each of its files was read."""

    store: StoreConfig
    extract: StoreExtract
    tails: dict[Path, FileTail] = field(default_factory=dict)


def tailed(store: StoreConfig) -> bool:
    """Is the store followed by offset (plain JSONL) rather than read again whole?"""
    return store.kind == "jsonl" and not str(store.path or "").endswith(".gz")


def appended_records(path: Path, tail: FileTail | None, column: str = "embedding") -> tuple[list[RawRecord | BulkVectors], FileTail] | None:
    """Records of the complete lines written after `tail` (all of them without one), and the
    new tail; None when the file was replaced or cut since (read it again whole). A last
    line without its newline is left for the next call: it may still be being written."""
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())
        if tail is not None and (stat.st_ino != tail.inode or stat.st_size < tail.offset):
            return None
        start, number = (tail.offset, tail.lines) if tail is not None else (0, 0)
        if tail is not None and start:
            handle.seek(0)
            head = handle.read(min(_GUARD, start))
            handle.seek(max(0, start - _GUARD))
            before = handle.read(start - max(0, start - _GUARD))
            if head != tail.head or before != tail.before:
                return None
        handle.seek(start)
        data = handle.read()
        end = data.rfind(b"\n") + 1
        offset = start + end
        handle.seek(0)
        new_head = handle.read(min(_GUARD, offset))
        handle.seek(max(0, offset - _GUARD))
        new_before = handle.read(offset - max(0, offset - _GUARD))
    numbered = []
    for line in data[:end].split(b"\n")[:-1]:
        number += 1
        if line.strip():
            numbered.append((number, line + b"\n"))
    records = list(jsonl_line_records(numbered, path.name, column)) if numbered else []
    return records, FileTail(stat.st_ino, offset, number, new_head, new_before)


def store_signature(store: StoreConfig) -> tuple[tuple[str, int, int, int], ...]:
    """What the store's files look like on disk now (path, inode, size, mtime of each): two
    equal signatures mean nothing was written in between. The watcher compares them on its
    idle ticks, so a change whose file event it missed (written before the watch was in place,
    or on a file system without events) is still read within a tick. A store without files
    (postgres) has none."""
    if not store.path or store.kind == "postgres":
        return ()
    root = Path(store.path)
    if store.kind == "markdown":
        paths = sorted(root.rglob("*.md")) if root.is_dir() else []
    else:
        try:
            paths = _store_files(store)
        except Exception:  # noqa: BLE001 - a store missing now: the read reports it as the run does
            return ()
        if store.kind == "sqlite":
            paths += [Path(f"{path}{suffix}") for path in paths for suffix in ("-wal", "-journal")]
    signature = []
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            continue
        signature.append((str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns))
    return tuple(signature)


def prepared_extract(extract: StoreExtract, dim: int | None, batch: int) -> StoreExtract:
    """A store extract as the batch run checks it (a provided vector of the wrong length is
    a reject), with terms and the micro-batch number on every memory."""
    if dim is not None and extract.memories.height and extract.memories.get_column("embedding").is_not_null().any():
        extract = with_vector_length(extract, dim)
    memories = with_terms(extract.memories).with_columns(_batch=pl.lit(batch, dtype=pl.Int64))
    return replace(extract, memories=memories)


def _joined(a: StoreExtract, b: StoreExtract) -> StoreExtract:
    return StoreExtract(a.store, pl.concat([a.memories, b.memories]), pl.concat([a.rejects, b.rejects]), a.records_read + b.records_read)


def read_whole(store: StoreConfig, max_content_bytes: int, dim: int | None, batch: int) -> FollowedStore:
    """The whole store read now; a JSONL store through tails from offset 0."""
    if not tailed(store):
        return FollowedStore(store, prepared_extract(extract_store(store, max_content_bytes), dim, batch))
    records, tails = [], {}
    for path in _store_files(store):
        result = appended_records(path, None, store.embedding_column or "embedding")
        assert result is not None  # no tail: never a replaced file
        records += result[0]
        tails[path] = result[1]
    extract = validated_records(records, store, max_content_bytes)
    return FollowedStore(store, prepared_extract(extract, dim, batch), tails)


def refreshed(followed: FollowedStore, max_content_bytes: int, dim: int | None, batch: int) -> FollowedStore:
    """The store after a change: the appended lines of each JSONL file added, or the store
    read again whole when it cannot be followed by offset or a file was replaced, cut or
    removed."""
    store = followed.store
    if not tailed(store):
        return read_whole(store, max_content_bytes, dim, batch)
    paths = _store_files(store)
    if set(followed.tails) - set(paths):
        return read_whole(store, max_content_bytes, dim, batch)
    records, tails = [], dict(followed.tails)
    for path in paths:
        try:
            result = appended_records(path, followed.tails.get(path), store.embedding_column or "embedding")
        except FileNotFoundError:
            result = None
        if result is None:
            return read_whole(store, max_content_bytes, dim, batch)
        records += result[0]
        tails[path] = result[1]
    if not records:
        return replace(followed, tails=tails)
    added = prepared_extract(validated_records(records, store, max_content_bytes), dim, batch)
    return FollowedStore(store, _joined(followed.extract, added), tails)
