"""The append-only log of manual relationships (manual/relationships.jsonl).

Appends take an exclusive flock and write one whole line, so concurrent writers in several
processes never interleave or lose a record. No run ever rewrites or deletes this file."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path


def append_record(path: Path, record: dict) -> None:
    """Append one JSON record as a line, durably, under an exclusive lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            # A writer killed mid-line leaves a torn line; start ours on a fresh one.
            size = os.fstat(fd).st_size
            if size:
                with open(path, "rb") as reader:
                    reader.seek(size - 1)
                    if reader.read(1) != b"\n":
                        line = b"\n" + line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def read_records(path: Path) -> tuple[list[dict], list[tuple[int, str, str]]]:
    """The log's records in order, and its unreadable lines as (line number, raw, reason)."""
    if not path.is_file():
        return [], []
    records, bad = [], []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                bad.append((number, text, f"not valid JSON: {exc.msg}"))
                continue
            if not isinstance(record, dict):
                bad.append((number, text, "a line must hold a JSON object"))
                continue
            records.append({**record, "_line": number})
    return records, bad
