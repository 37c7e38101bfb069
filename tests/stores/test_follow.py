"""Following a JSONL file by offset (transforms/stores/follow.py): appended complete lines
only, numbered as the batch reader numbers them; a rewrite is never taken for an append."""

from __future__ import annotations

import os

from crosstier.core.config import StoreConfig
from crosstier.transforms.stores.extract import RawRecord, jsonl_records
from crosstier.transforms.stores import follow


def appended_records(path, tail):
    """follow.appended_records with only the records (not the bulk vector batches before them)."""
    result = follow.appended_records(path, tail)
    return None if result is None else ([r for r in result[0] if isinstance(r, RawRecord)], result[1])


def test_appended_lines_are_read_from_the_offset_with_the_batch_readers_locations(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"id": "a"}\n\n{"id": "b"}\n')
    records, tail = appended_records(path, None)
    assert [r.fields["id"] for r in records] == ["a", "b"]
    with open(path, "ab") as handle:
        handle.write(b'{not json\n{"id": "c"}\n{"id": "d"')  # the last line is still being written
    records, tail = appended_records(path, tail)
    assert [(r.location, r.error is None) for r in records] == [("s.jsonl:4", False), ("s.jsonl:5", True)]
    with open(path, "ab") as handle:
        handle.write(b"}\n")
    records, tail = appended_records(path, tail)
    assert [(r.location, r.fields["id"]) for r in records] == [("s.jsonl:6", "d")]
    batch = [(r.location, r.error is None) for r in jsonl_records(StoreConfig(name="s", kind="jsonl", path=str(path))) if isinstance(r, RawRecord)]
    assert batch == [("s.jsonl:1", True), ("s.jsonl:3", True), ("s.jsonl:4", False), ("s.jsonl:5", True), ("s.jsonl:6", True)]
    assert appended_records(path, tail) == ([], tail)


def test_a_file_rewritten_in_place_cut_or_replaced_is_read_again_whole(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"id": "a", "content": "one"}\n')
    _, tail = appended_records(path, None)
    path.write_bytes(b'{"id": "a", "content": "two"}\n{"id": "b"}\n')  # same inode, longer
    assert appended_records(path, tail) is None
    _, tail = appended_records(path, None)
    path.write_bytes(b'{"id": "a"}\n')  # cut
    assert appended_records(path, tail) is None
    _, tail = appended_records(path, None)
    (tmp_path / "new.jsonl").write_bytes(b'{"id": "a"}\n{"id": "z"}\n')
    os.replace(tmp_path / "new.jsonl", path)  # replaced: another inode
    assert appended_records(path, tail) is None


def test_a_store_signature_changes_with_every_write_the_watcher_must_read(tmp_path):
    """The watcher's idle tick reads a store whose signature changed: an append, a same-size
    rewrite by rename, a SQLite WAL file and a new markdown note all change it."""
    jsonl = tmp_path / "s.jsonl"
    jsonl.write_bytes(b'{"id": "a"}\n')
    store = StoreConfig(name="s", kind="jsonl", path=str(jsonl))
    first = follow.store_signature(store)
    assert follow.store_signature(store) == first  # nothing written: nothing to read
    with open(jsonl, "ab") as handle:
        handle.write(b'{"id": "b"}\n')
    appended = follow.store_signature(store)
    assert appended != first
    replacement = tmp_path / "s.jsonl.tmp"
    replacement.write_bytes(jsonl.read_bytes().replace(b'"b"', b'"c"'))
    os.replace(replacement, jsonl)  # same size, new inode
    assert follow.store_signature(store) != appended

    db = tmp_path / "m.sqlite"
    db.write_bytes(b"")
    sqlite = StoreConfig(name="q", kind="sqlite", path=str(db), table="memories")
    before_wal = follow.store_signature(sqlite)
    (tmp_path / "m.sqlite-wal").write_bytes(b"x")
    assert follow.store_signature(sqlite) != before_wal

    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    markdown = StoreConfig(name="w", kind="markdown", path=str(workspace))
    empty = follow.store_signature(markdown)
    (workspace / "memory" / "2026-12-01.md").write_text("- met Ana\n")
    assert follow.store_signature(markdown) != empty
    assert follow.store_signature(StoreConfig(name="gone", kind="jsonl", path=str(tmp_path / "none.jsonl"))) == ()
