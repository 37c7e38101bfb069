"""All-or-nothing file writes: a synced temp file beside the target, then a rename."""

from __future__ import annotations

import os
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
