"""One writer at a time per warehouse: a batch run and a watcher (`ctc watch`) take the same
lock, so one waits while the other publishes. fcntl.flock: the kernel drops it when its
holder dies, even by SIGKILL, so a crash never leaves the warehouse locked."""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".writer.lock"
log = logging.getLogger(__name__)


@contextmanager
def writer_lock(root: str | os.PathLike) -> Iterator[Path]:
    """Hold the warehouse's writer lock (waiting for it if need be, and saying so: a run that
    seems stuck is waiting for a watcher or another run); yields the lock file."""
    folder = Path(root)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("waiting for the writer lock %s: another run or `ctc watch` is publishing to %s", path, folder)
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield path
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
