"""report: the seed's markdown report for one memory (direct correlations, the correlation
graph as a tree, the tier distribution of its graph, recommendations)."""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

from crosstier.core.config import TIERS, Settings
from crosstier.retrieval.correlations import build_correlation_graph, find_correlations, snippet, span_text
from crosstier.retrieval.snapshot import open_snapshot

STRONG_LINK_SCORE = 0.85  # a direct correlation at or above this is recommended as strong
MAX_DIRECT = 10  # rows of the direct correlations table
MAX_CHILDREN = 5  # children shown per node in the tree; the rest are counted
MAX_LISTED = 5  # strong links, contradictions and orphans listed in the recommendations
TREE_SNIPPET = 80  # characters of text beside each id in the tree and the recommendations
NEIGHBOUR_HOURS = 24  # an unlinked memory this close in time to the seed is its neighbour


def tree_lines(graph: dict[str, Any], root: str, max_children: int = MAX_CHILDREN) -> list[str]:
    """The graph's breadth-first tree under root, drawn with box characters."""
    children: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in graph["nodes"]:
        if node["parent"] is not None:
            children[node["parent"]].append(node)
    for kids in children.values():
        kids.sort(key=lambda n: (-n["score"], n["id"]))
    texts = {n["id"]: n.get("snippet") or "" for n in graph["nodes"]}

    def label(node_id: str) -> str:
        text = snippet(texts.get(node_id), TREE_SNIPPET)
        return f"{node_id} — {text}" if text else node_id

    lines = [label(root)]

    def walk(node_id: str, prefix: str) -> None:
        kids = children.get(node_id, [])
        shown, hidden = kids[:max_children], len(kids) - max_children
        for n, kid in enumerate(shown):
            last = n == len(shown) - 1 and hidden <= 0
            lines.append(f"{prefix}{'└── ' if last else '├── '}{kid['id']} ({kid['relationship_type']}, {kid['score']:.2f})"
                         + (f" — {snippet(texts.get(kid['id']), TREE_SNIPPET)}" if texts.get(kid["id"]) else ""))
            walk(kid["id"], prefix + ("    " if last else "│   "))
        if hidden > 0:
            lines.append(f"{prefix}└── … {hidden} more")

    walk(root, "")
    return lines


def _cell(text: Any) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def _quoted(text: str | None) -> str:
    return f"“{_cell(snippet(text, TREE_SNIPPET))}”" if text else ""


def recommendations_for(
    memory_id: str, direct: dict[str, Any], graph: dict[str, Any], texts: dict[str, str], neighbours: list[dict[str, Any]]
) -> list[str]:
    """What to look at about this memory and its neighbourhood: its copies, its changes of state,
    its strong links, the contradictions in its graph, and the unlinked memories beside it."""
    out = []
    if not direct["correlations"]:
        out.append(f"**Orphan memory** — {memory_id} has no correlations; the unlinked memories beside it are listed below")
    copies = next((c["copies"] for c in direct["correlations"] if c.get("copies")), None)
    if copies:
        out.append(f"**Carried forward** — this memory {span_text(copies)}: settle it, or keep it once (MEMORY.md) instead of copying it on")
    for c in [c for c in direct["correlations"] if (c["reason"] or "").startswith("Changed:")][:MAX_LISTED]:
        out.append(f"**State changed** — {c['reason']}: {c['target_id']} {_quoted(c['target_snippet'])}; check which one holds now")
    for c in [c for c in direct["correlations"] if c["score"] >= STRONG_LINK_SCORE and not c.get("copies")][:MAX_LISTED]:
        out.append(f"**Strong link detected** — {memory_id} → {c['target_id']} ({c['score']:.2f}, {c['relationship_type']}) {_quoted(c['target_snippet'])}")
    contradictions = sorted(
        (e for e in graph["edges"] if e["relationship_type"] == "contradicts"), key=lambda e: (-e["score"], e["source_id"], e["target_id"])
    )
    for e in contradictions[:MAX_LISTED]:
        out.append(f"**Potential contradiction** — {e['source_id']} {_quoted(texts.get(e['source_id']))} ↔ {e['target_id']} "
                   f"{_quoted(texts.get(e['target_id']))} (review needed: {_cell(e['reason'])})")
    for o in neighbours:
        out.append(f"**Orphan memory** — {o['id']} ({o['tier']}, {o['why']}) {_quoted(o['content'])} has no correlations")
    if neighbours and neighbours[0]["total"] > len(neighbours):
        out.append(f"**Orphan memories** — {neighbours[0]['total'] - len(neighbours)} more beside it (`ctc sql \"select * from orphan_memories\"`)")
    return out


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
    neighbours = snapshot.rows("neighbour_orphans", {
        "memory_id": memory_id, "namespace": seed_namespace, "principal": principal, "hours": NEIGHBOUR_HOURS, "limit": MAX_LISTED,
    })
    stamp = (generated_at or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    texts = {n["id"]: n.get("snippet") or "" for n in graph["nodes"]}

    lines = [
        "# Cross-Tier Correlation Report",
        "",
        f"**Generated:** {stamp}",
        f"**Seed Memory:** {memory_id} ({direct['memory_tier']}, namespace {seed_namespace})",
        f"> {direct['memory_snippet']}" if direct.get("memory_snippet") else "",
        "",
        f"## Direct Correlations ({direct['total_found']})",
        "",
    ]
    if direct["correlations"]:
        lines += ["| Target | Text | Type | Relationship | Score | Reason |", "|--------|------|------|--------------|-------|--------|"]
        for c in direct["correlations"]:
            lines.append(f"| {_cell(c['target_id'])} | {_cell(c['target_snippet'])} | {c['target_tier']} | {c['relationship_type']} | {c['score']:.2f} | {_cell(c['reason'])} |")
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

    recommendations = recommendations_for(memory_id, direct, graph, texts, neighbours)
    lines += ["", "## Recommendations", ""]
    lines += [f"{n}. {text}" for n, text in enumerate(recommendations, start=1)] or ["None."]
    lines += ["", "---", "", "*Cross-Tier Correlator — Connecting experiences to knowledge.*", ""]
    return "\n".join(lines)
