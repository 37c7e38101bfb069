"""The dashboard's DuckDB queries, one statement per file, loaded by name."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def load(name: str) -> str:
    """The text of dashboards/sql/<name>.sql."""
    return resources.files(__name__).joinpath(f"{name}.sql").read_text(encoding="utf-8")
