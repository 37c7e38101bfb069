"""Counts the reliability suite reports at the end of the session (conftest's terminal summary)."""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[str] = Counter()
# What each count means, in the order the summary prints them.
LABELS = {
    "inputs_tried": "inputs tried",
    "faults_injected": "faults injected",
    "readers": "readers",
    "reader_queries": "reader queries",
    "principal_checks": "principal x memory checks",
    "principal_queries": "principal read calls",
    "lost_records": "lost records",
}


def count(**amounts: int) -> None:
    """Add to the suite's counts, e.g. count(inputs_tried=12)."""
    COUNTS.update(amounts)


def summary_line() -> str:
    """One line: every count, lost records last (it must read 0)."""
    parts = [f"{label} {COUNTS.get(key, 0)}" for key, label in LABELS.items() if key != "reader_queries" and key != "readers"]
    readers, queries = COUNTS.get("readers", 0), COUNTS.get("reader_queries", 0)
    parts.insert(2, f"readers x queries {readers} x {queries // readers if readers else 0} = {queries}")
    return "reliability: " + ", ".join(parts)
