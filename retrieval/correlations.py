"""find_correlations and build_correlation_graph: a memory's links from its own point of view,
and the graph around some memories by breadth-first expansion. Read-only, principal-aware."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

from crosstier.core.config import TIERS, Settings
from crosstier.retrieval.errors import InvalidArgumentError, UnknownMemoryError
from crosstier.retrieval.snapshot import Snapshot, memories_by_id, open_snapshot, visible
from crosstier.core.vocabulary import RELATIONSHIP_TYPES

REDACTED = "[hidden memory]"
SNIPPET_CHARS = 80  # the text shown next to an id
_TOKEN = re.compile(r"[A-Za-z0-9][\w.:/#@-]*[\w]|[A-Za-z0-9]")


def snippet(text: str | None, width: int = SNIPPET_CHARS) -> str:
    """The start of a memory's text on one line, cut at a word with an ellipsis past `width` characters."""
    flat = " ".join((text or "").split())
    if len(flat) <= width:
        return flat
    cut = flat[: width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,;:") + "…"


def copy_group(metadata: str | None) -> str | None:
    """The copy group a carried-forward link's metadata names ({"copy_group": key}), or None."""
    if not metadata or '"copy_group"' not in metadata:
        return None
    try:
        group = json.loads(metadata).get("copy_group")
    except (ValueError, AttributeError):
        return None
    return group if isinstance(group, str) else None


def copy_spans(snapshot: Snapshot, groups: Iterable[str | None]) -> dict[str, dict[str, Any]]:
    """copy group -> its figures (copies, days, first, last): read from each group's chain
    (sql/copy_spans.sql), as no chain row holds them."""
    groups = sorted({g for g in groups if g is not None})
    if not groups:
        return {}
    return {s["copy_group"]: {k: s[k] for k in ("copies", "days", "first", "last")} for s in snapshot.rows("copy_spans", {"groups": groups})}


def span_text(copies: dict[str, Any]) -> str:
    """A copy group's figures in words: "appears on 3 days, first D1, last D2", or "appears 3 times" undated."""
    if copies.get("days"):
        return f"appears on {copies['days']} days, first {copies['first']}, last {copies['last']}"
    return f"appears {copies['copies']} times"


def check_score(name: str, value: float | None) -> float | None:
    """A score bound in [0, 1] or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise InvalidArgumentError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def check_types(types: list[str] | tuple[str, ...] | None) -> list[str] | None:
    """Known relationship types, or None for all."""
    if types is None:
        return None
    if isinstance(types, str):
        types = [types]
    unknown = sorted(set(types) - set(RELATIONSHIP_TYPES))
    if unknown:
        raise InvalidArgumentError(f"unknown relationship type {unknown[0]!r} (known: {', '.join(RELATIONSHIP_TYPES)})")
    return sorted(set(types))


def check_tiers(tiers: list[str] | tuple[str, ...] | None, name: str = "tiers") -> set[str] | None:
    """Known tiers, or None for all."""
    if tiers is None:
        return None
    if isinstance(tiers, str):
        tiers = [tiers]
    unknown = sorted(set(tiers) - set(TIERS))
    if unknown:
        raise InvalidArgumentError(f"{name}: unknown tier {unknown[0]!r} (known: {', '.join(TIERS)})")
    return set(tiers)


def check_count(name: str, value: int, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgumentError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def readable_memories(
    snapshot: Snapshot, ids: list[str], *, principal: str | None, namespace: str | None
) -> dict[str, dict[str, Any]]:
    """The memories among ids that exist, are in `namespace` (when given) and that the principal may read."""
    found = memories_by_id(snapshot, ids)
    return {
        i: row
        for i, row in found.items()
        if visible(row["readers"], principal) and (namespace is None or row["namespace"] == namespace)
    }


def require_memories(
    snapshot: Snapshot, ids: list[str], *, principal: str | None, namespace: str | None
) -> dict[str, dict[str, Any]]:
    """The readable memories for ids; UnknownMemoryError naming any that is not (missing and
    hidden look the same, so the error confirms nothing about hidden memories)."""
    rows = readable_memories(snapshot, ids, principal=principal, namespace=namespace)
    missing = [i for i in dict.fromkeys(ids) if i not in rows]
    if missing:
        raise UnknownMemoryError(missing, f"in namespace {namespace!r}" if namespace else "")
    return rows


def visible_links(
    snapshot: Snapshot,
    seeds: dict[str, dict[str, Any]],
    *,
    principal: str | None,
    min_score: float | None = None,
    types: list[str] | None = None,
    known: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The links of the seed memories that stay in the seed's namespace and end at a memory
    the principal may read, strongest first per seed, reasons redacted; plus the other
    ends' memory rows (those looked up here or found in `known`)."""
    if not seeds:
        return [], {}
    rows = snapshot.rows("memory_links", {"ids": list(seeds), "min_score": min_score, "types": types})
    rows = [r for r in rows if r["namespace"] == seeds[r["memory_id"]]["namespace"]]
    # The other ends: readable by the principal, and in the seed's namespace (checked on the
    # memories themselves, not only on the link's namespace column). Ids named in reasons
    # are looked up in the same query, to redact the hidden ones.
    known = known or {}
    tokens = {t for r in rows if r["reason"] for t in _TOKEN.findall(r["reason"])} if principal is not None else set()
    wanted = {r["other_id"] for r in rows} | tokens
    others = {i: known[i] for i in wanted if i in known}
    others.update(memories_by_id(snapshot, sorted(wanted - set(others))))
    rows = [
        r
        for r in rows
        if r["other_id"] in others
        and visible(others[r["other_id"]]["readers"], principal)
        and others[r["other_id"]]["namespace"] == r["namespace"]
    ]
    redact_reasons(rows, {i for i in tokens if i in others and not visible(others[i]["readers"], principal)})
    return rows, others


def redact_reasons(rows: list[dict[str, Any]], hidden: set[str]) -> None:
    """Replace, in place, every hidden memory id named in a reason."""
    if not hidden:
        return
    for r in rows:
        if r["reason"]:
            r["reason"] = _TOKEN.sub(lambda m: REDACTED if m.group(0) in hidden else m.group(0), r["reason"])


def correlation_entry(row: dict[str, Any], others: dict[str, dict[str, Any]], spans: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A link row as find_correlations returns it, with the start of the other memory's text."""
    entry = {
        "target_id": row["other_id"],
        "target_snippet": snippet(others[row["other_id"]]["content"]) if row["other_id"] in others else "",
        "target_tier": row["other_tier"],
        "relationship_type": row["relationship_type"],
        "direction": row["direction"],
        "score": row["score"],
        "reason": row["reason"],
        "origin": row["origin"],
    }
    group = copy_group(row.get("metadata"))
    if spans and group in spans:
        entry["copies"] = spans[group]
    return entry


def find_correlations(
    memory_id: str,
    *,
    max_results: int = 10,
    min_score: float | None = None,
    relationship_types: list[str] | None = None,
    principal: str | None = None,
    namespace: str | None = None,
    out: str | os.PathLike | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """The memory's correlations from its own point of view, strongest first:
    {memory_id, memory_tier, correlations: [...], total_found} (total before max_results)."""
    check_count("max_results", max_results)
    min_score = check_score("min_score", min_score)
    types = check_types(relationship_types)
    snapshot = open_snapshot(out, settings)
    seed = require_memories(snapshot, [memory_id], principal=principal, namespace=namespace)
    rows, others = visible_links(snapshot, seed, principal=principal, min_score=min_score, types=types)
    shown = rows[:max_results]
    spans = copy_spans(snapshot, (copy_group(r.get("metadata")) for r in shown))
    return {
        "memory_id": memory_id,
        "memory_snippet": snippet(seed[memory_id]["content"]),
        "memory_tier": seed[memory_id]["tier"],
        "correlations": [correlation_entry(r, others, spans) for r in shown],
        "total_found": len(rows),
    }


def build_correlation_graph(
    memory_ids: list[str] | str,
    *,
    include_tiers: list[str] | None = None,
    max_depth: int = 2,
    min_score: float | None = None,
    relationship_types: list[str] | None = None,
    principal: str | None = None,
    namespace: str | None = None,
    max_nodes: int = 2000,
    out: str | os.PathLike | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """The graph around the memories by breadth-first expansion to max_depth:
    {nodes: [{id, snippet, tier, namespace, depth, parent, relationship_type, direction, score}],
     edges: [{source_id, target_id, relationship_type, score, reason, origin}], truncated}.

    One query per level (sql/memory_links over the whole frontier); a memory is expanded
    once, at the depth it was first reached, so cycles end. Seeds are always nodes; other
    memories only when their tier is in include_tiers, the principal may read them and they
    share the seed's namespace. Each node records the link it was reached by (its `parent`,
    and the type from the parent's point of view) for the tree view. At most max_nodes
    nodes: past that, `truncated` is true."""
    ids = [memory_ids] if isinstance(memory_ids, str) else list(memory_ids)
    if not ids:
        raise InvalidArgumentError("build_correlation_graph needs at least one memory id")
    check_count("max_depth", max_depth)
    check_count("max_nodes", max_nodes, low=1)
    min_score = check_score("min_score", min_score)
    types = check_types(relationship_types)
    tiers = check_tiers(include_tiers, "include_tiers")
    snapshot = open_snapshot(out, settings)
    seeds = require_memories(snapshot, ids, principal=principal, namespace=namespace)

    known = dict(seeds)  # memory rows seen so far
    nodes: dict[str, dict[str, Any]] = {}
    for i in dict.fromkeys(ids):
        m = seeds[i]
        nodes[i] = {"id": i, "snippet": snippet(m["content"]), "tier": m["tier"], "namespace": m["namespace"], "depth": 0,
                    "parent": None, "relationship_type": None, "direction": None, "score": None}
    edges: dict[tuple[str, str, str], dict[str, Any]] = {}
    chained: dict[tuple[str, str, str], str] = {}  # carried-forward edges: their copy group
    frontier = list(nodes)
    truncated = False
    for depth in range(1, max_depth + 1):
        if not frontier:
            break
        rows, others = visible_links(
            snapshot, {i: known[i] for i in frontier}, principal=principal, min_score=min_score, types=types, known=known
        )
        known.update(others)
        order = {i: n for n, i in enumerate(frontier)}
        rows.sort(key=lambda r: (order[r["memory_id"]], -r["score"], -(r["cosine"] if r["cosine"] is not None else -2.0), r["other_id"], r["relationship_type"]))
        next_frontier = []
        for r in rows:
            other = r["other_id"]
            if other not in nodes:
                if tiers is not None and r["other_tier"] not in tiers:
                    continue
                if len(nodes) >= max_nodes:
                    truncated = True
                    continue
                nodes[other] = {"id": other, "snippet": snippet(known[other]["content"]) if other in known else "",
                                "tier": r["other_tier"], "namespace": r["namespace"], "depth": depth,
                                "parent": r["memory_id"], "relationship_type": r["relationship_type"],
                                "direction": r["direction"], "score": r["score"]}
                next_frontier.append(other)
            key = (r["source_id"], r["target_id"], r["stored_type"])
            if key not in edges:
                edges[key] = {"source_id": r["source_id"], "target_id": r["target_id"], "relationship_type": r["stored_type"],
                              "score": r["score"], "reason": r["reason"], "origin": r["origin"]}
                group = copy_group(r.get("metadata"))
                if group is not None:
                    chained[key] = group
        frontier = next_frontier
    spans = copy_spans(snapshot, chained.values())
    for key, group in chained.items():
        if group in spans:
            edges[key]["copies"] = spans[group]
    return {"nodes": list(nodes.values()), "edges": list(edges.values()), "truncated": truncated}
