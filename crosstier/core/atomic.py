"""All-or-nothing file writes: a synced temp file beside the target, then a rename."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_atomically(target: Path, temp: Path, write: Callable[[BinaryIO], None]) -> Path:
    """Run `write` on `temp`, sync it and rename it onto `target`; a reader or a killed
    writer never leaves a half file at `target`. `temp` must be in target's folder."""
    try:
        with open(temp, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    return target


def fsync_dir(path: Path) -> None:
    """Make the renames inside `path` durable (the directory entry itself is synced)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def switch_link(link: Path, target: str | os.PathLike) -> None:
    """Point the symlink `link` at `target` in one rename: a temp link beside it, then
    os.replace over it. A reader resolving `link` meets the old target or the new, never
    none; a writer killed before the rename leaves the old one (and a `.tmp` to clean).
    `target` is stored as given: pass a path relative to link's folder to keep the tree
    movable. The snapshot switch uses it; so can anything else published beside it."""
    temp = link.with_name(f".{link.name}.{uuid.uuid4().hex}.tmp")
    os.symlink(target, temp)
    try:
        os.replace(temp, link)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(link.parent)


def leftover_links(folder: Path, name: str) -> list[Path]:
    """Temp links a killed switch_link(folder / name, ...) left behind."""
    return sorted(folder.glob(f".{name}.*.tmp"))
