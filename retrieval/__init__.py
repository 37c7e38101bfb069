"""The read side: find_correlations, build_correlation_graph, discover_links, add_relationship,
retrieve_with_expansion, report. Every function opens the published snapshot read-only.

Names are imported on first use, so `import crosstier.retrieval` costs nothing heavy."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_WHERE = {
    "find_correlations": "crosstier.retrieval.correlations",
    "build_correlation_graph": "crosstier.retrieval.correlations",
    "discover_links": "crosstier.retrieval.discover",
    "add_relationship": "crosstier.retrieval.manual",
    "retrieve_with_expansion": "crosstier.retrieval.retrieve",
    "report": "crosstier.retrieval.workspace_report",
    "run_sql": "crosstier.retrieval.adhoc",
    "ReadSideError": "crosstier.retrieval.errors",
    "NoSnapshotError": "crosstier.retrieval.errors",
    "UnknownMemoryError": "crosstier.retrieval.errors",
    "InvalidArgumentError": "crosstier.retrieval.errors",
    "DiscoveryDisabledError": "crosstier.retrieval.errors",
    "EncoderUnavailableError": "crosstier.retrieval.errors",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'retrieval' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value
    return value
