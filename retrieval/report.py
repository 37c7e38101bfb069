"""report: the seed's markdown report for one memory (direct correlations, the correlation
graph as a tree, the tier distribution of its graph, recommendations)."""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

from crosstier.core.config import TIERS, Settings
from crosstier.retrieval.correlations import build_correlation_graph, find_correlations
from crosstier.retrieval.snapshot import open_snapshot

STRONG_LINK_SCORE = 0.85  # a direct correlation at or above this is recommended as strong
MAX_DIRECT = 10  # rows of the direct correlations table
MAX_CHILDREN = 5  # children shown per node in the tree; the rest are counted
MAX_LISTED = 5  # strong links, contradictions and orphans listed in the recommendations


def tree_lines(graph: dict[str, Any], root: str, max_children: int = MAX_CHILDREN) -> list[str]:
    """The graph's breadth-first tree under root, drawn with box characters."""
    children: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in graph["nodes"]:
        if node["parent"] is not None:
            children[node["parent"]].append(node)
    for kids in children.values():
        kids.sort(key=lambda n: (-n["score"], n["id"]))
    lines = [root]

    def walk(node_id: str, prefix: str) -> None:
        kids = children.get(node_id, [])
        shown, hidden = kids[:max_children], len(kids) - max_children
        for n, kid in enumerate(shown):
            last = n == len(shown) - 1 and hidden <= 0
            lines.append(f"{prefix}{'└── ' if last else '├── '}{kid['id']} ({kid['relationship_type']}, {kid['score']:.2f})")
            walk(kid["id"], prefix + ("    " if last else "│   "))
        if hidden > 0:
            lines.append(f"{prefix}└── … {hidden} more")

    walk(root, "")
    return lines


def _cell(text: Any) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def report(
    memory_id: str,
    *,
    principal: str | None = None,
    namespace: str | None = None,
    max_depth: int = 2,
    generated_at: datetime | None = None,
    out: str | os.PathLike | None = None,
    settings: Settings | None = None,
) -> str:
    """The markdown report for one memory, as the principal may see it."""
    where = {"principal": principal, "namespace": namespace, "out": out, "settings": settings}
    direct = find_correlations(memory_id, max_results=MAX_DIRECT, **where)
    graph = build_correlation_graph([memory_id], max_depth=max_depth, **where)
    seed_namespace = graph["nodes"][0]["namespace"]
    snapshot = open_snapshot(out, settings)
    orphans = snapshot.rows("visible_orphans", {"namespace": seed_namespace, "principal": principal, "limit": MAX_LISTED})
    stamp = (generated_at or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")

    lines = [
        "# Cross-Tier Correlation Report",
        "",
        f"**Generated:** {stamp}",
        f"**Seed Memory:** {memory_id} ({direct['memory_tier']}, namespace {seed_namespace})",
        "",
        f"## Direct Correlations ({direct['total_found']})",
        "",
    ]
    if direct["correlations"]:
        lines += ["| Target | Type | Relationship | Score | Reason |", "|--------|------|--------------|-------|--------|"]
        for c in direct["correlations"]:
            lines.append(f"| {_cell(c['target_id'])} | {c['target_tier']} | {c['relationship_type']} | {c['score']:.2f} | {_cell(c['reason'])} |")
        if direct["total_found"] > len(direct["correlations"]):
            lines += ["", f"_{direct['total_found'] - len(direct['correlations'])} more not shown (`ctc correlations {memory_id}`)._"]
    else:
        lines.append("No correlations.")

    lines += ["", "## Correlation Graph", "", "```text", *tree_lines(graph, memory_id), "```", ""]
    if graph["truncated"]:
        lines += ["_The graph was cut at its node limit._", ""]

    reached = [n for n in graph["nodes"] if n["depth"] > 0]
    lines += [f"## Tier Distribution", "", f"Memories in the correlation graph (depth {max_depth}), by tier:", ""]
    lines += ["| Tier | Count | Avg Score |", "|------|-------|-----------|"]
    for tier in TIERS:
        scores = [n["score"] for n in reached if n["tier"] == tier]
        avg = f"{sum(scores) / len(scores):.2f}" if scores else "-"
        lines.append(f"| {tier.capitalize()} | {len(scores)} | {avg} |")

    recommendations = []
    for c in [c for c in direct["correlations"] if c["score"] >= STRONG_LINK_SCORE][:MAX_LISTED]:
        recommendations.append(f"**Strong link detected** — {memory_id} → {c['target_id']} ({c['score']:.2f}, {c['relationship_type']})")
    contradictions = sorted(
        (e for e in graph["edges"] if e["relationship_type"] == "contradicts"), key=lambda e: (-e["score"], e["source_id"], e["target_id"])
    )
    for e in contradictions[:MAX_LISTED]:
        recommendations.append(f"**Potential contradiction** — {e['source_id']} ↔ {e['target_id']} (review needed: {_cell(e['reason'])})")
    for o in orphans:
        recommendations.append(f"**Orphan memory** — {o['id']} ({o['tier']}) has no correlations")
    if orphans and orphans[0]["total"] > len(orphans):
        recommendations.append(f"**Orphan memories** — {orphans[0]['total'] - len(orphans)} more in namespace {seed_namespace} (`ctc sql \"select * from orphan_memories\"`)")
    lines += ["", "## Recommendations", ""]
    lines += [f"{n}. {text}" for n, text in enumerate(recommendations, start=1)] or ["None."]
    lines += ["", "---", "", "*Cross-Tier Correlator — Connecting experiences to knowledge.*", ""]
    return "\n".join(lines)
