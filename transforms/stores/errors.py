"""The error every store adapter raises when a store cannot be read at all."""


class ExtractError(RuntimeError):
    """A store that cannot be read at all (missing path, unreadable file); names the store."""
