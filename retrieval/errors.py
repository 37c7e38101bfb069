"""Errors of the read side. Each is something the caller can fix; the CLI prints the message
and exits with `exit_code` (2)."""

from __future__ import annotations


class ReadSideError(Exception):
    """Base of the read side's errors; the message says what is wrong and what to do."""

    exit_code = 2


class NoSnapshotError(ReadSideError):
    """No published snapshot in the warehouse folder yet."""


class UnknownMemoryError(ReadSideError, LookupError):
    """A memory id that is not in the snapshot (or that the principal may not read: the two
    are indistinguishable on purpose, so an error never confirms a hidden memory exists)."""

    def __init__(self, ids: list[str] | str, where: str = ""):
        self.ids = [ids] if isinstance(ids, str) else list(ids)
        shown = ", ".join(repr(i) for i in self.ids)
        noun = "memory" if len(self.ids) == 1 else "memories"
        super().__init__(f"unknown {noun} {shown}{' ' + where if where else ''}: not in the current snapshot")


class InvalidArgumentError(ReadSideError, ValueError):
    """An argument out of its range or of the wrong kind (unknown type or tier, score outside [0, 1], ...)."""


class DiscoveryDisabledError(ReadSideError):
    """discover_links with AUTO_DISCOVER_ENABLED=false."""


class EncoderUnavailableError(ReadSideError):
    """The snapshot's embedding model cannot be loaded here."""
