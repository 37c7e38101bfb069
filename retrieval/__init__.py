"""The read side: find_correlations, build_correlation_graph, discover_links, add_relationship,
retrieve_with_expansion, report. Every function opens the published snapshot read-only.

Names are imported on first use, so `import retrieval` costs nothing heavy."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "find_correlations": "retrieval.correlations",
    "build_correlation_graph": "retrieval.correlations",
    "discover_links": "retrieval.discover",
    "add_relationship": "retrieval.manual",
    "retrieve_with_expansion": "retrieval.retrieve",
    "report": "retrieval.report",
    "run_sql": "retrieval.adhoc",
    "ReadSideError": "retrieval.errors",
    "NoSnapshotError": "retrieval.errors",
    "UnknownMemoryError": "retrieval.errors",
    "InvalidArgumentError": "retrieval.errors",
    "DiscoveryDisabledError": "retrieval.errors",
    "EncoderUnavailableError": "retrieval.errors",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'retrieval' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
