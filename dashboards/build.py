"""The run dashboard: one self-contained HTML page built from the current snapshot.

The snapshot is read through DuckDB opened read-only; everything the page shows is aggregated
or capped in SQL (histograms are binned, the graph is the strongest links, tables are cut to a
page budget), so the page stays small and fast whatever the number of memories. Plotly's JS
is inlined: the page needs no network."""

from __future__ import annotations

import html
import json
import math
import os
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np

from crosstier.core.catalog import Catalog
from crosstier.dashboards import sql as dashboard_sql
from crosstier.core.atomic import write_atomically
from crosstier.transforms.link.calibration import load_calibration
from crosstier.transforms.schema import RELATIONSHIP_TYPES, TIERS

TIER_COLORS = {"episodic": "#1f77b4", "semantic": "#2ca02c", "procedural": "#ff7f0e"}
OTHER_TIER_COLOR = "#7f7f7f"
TYPE_COLORS = {
    "references": "#8c564b",
    "derives_from": "#9467bd",
    "contradicts": "#d62728",
    "supports": "#2ca02c",
    "generalizes": "#17becf",
    "specializes": "#bcbd22",
    "temporal_sequence": "#1f77b4",
    "causal": "#e377c2",
}
# Columns of `runs` that may hold the run time, and the ones that may order runs.
DURATION_COLUMNS = ("duration_s", "duration_seconds", "wall_s", "elapsed_s", "seconds", "duration")
TIME_COLUMNS = ("finished_at", "ended_at", "completed_at", "started_at", "timestamp", "created_at")
# Force layout: edges pull this much harder than plain FR, so linked memories sit visibly
# closer than unlinked ones even when the sample is many small components.
ATTRACTION = 8.0
CHART_IDS = ("chart-tiers", "chart-matrix", "chart-scores", "chart-reliability", "chart-graph")


class NoSnapshotError(FileNotFoundError):
    """There is no published snapshot to build the dashboard from."""


@dataclass(frozen=True)
class Limits:
    """What the page carries at most, so it loads fast on any snapshot."""

    max_edges: int = 500  # the graph view: the strongest links
    max_table_rows: int = 1000  # rows embedded per table (the page paginates them)
    page_size: int = 25  # table rows shown per page
    bins: int = 20  # score histogram bins over [0, 1]
    snippet_chars: int = 160  # content cut for tables and hover text
    layout_iterations: int = 120  # force layout steps
    max_reject_groups: int = 20  # (store, reason) rows in the rejects table


def _rows(con: Any, name: str, **params: Any) -> list[dict[str, Any]]:
    """All rows of dashboards/sql/<name>.sql as dicts."""
    cursor = con.execute(dashboard_sql.load(name), params)
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row)) for row in cursor.fetchall()]


def _tables(con: Any) -> set[str]:
    """Names of the snapshot's tables and views."""
    return {row[0] for row in con.execute("select table_name from information_schema.tables").fetchall()}


def latest_run(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest run: by the first time column the table has, else its last row."""
    if not runs:
        return None
    for column in TIME_COLUMNS:
        stamped = [r for r in runs if isinstance(r.get(column), (datetime, date))]
        if stamped:
            return max(stamped, key=lambda r: r[column])
    return runs[-1]


def run_seconds(run: dict[str, Any] | None) -> float | None:
    """The run time in seconds: a duration column, else finished minus started; None if neither."""
    if not run:
        return None
    for column in DURATION_COLUMNS:
        value = run.get(column)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    started = run.get("started_at")
    for column in ("finished_at", "ended_at", "completed_at"):
        finished = run.get(column)
        if isinstance(started, datetime) and isinstance(finished, datetime):
            try:
                return (finished - started).total_seconds()
            except TypeError:  # one naive, one aware
                return None
    return None


def snapshot_data(con: Any, limits: Limits = Limits()) -> dict[str, Any]:
    """Everything the page shows, read from an open snapshot connection."""
    edges = _rows(con, "strongest_links", max_edges=limits.max_edges)
    node_ids = sorted({e["source_id"] for e in edges} | {e["target_id"] for e in edges})
    nodes = _rows(con, "graph_nodes", ids=node_ids, snippet_chars=limits.snippet_chars) if node_ids else []
    present = _tables(con)
    # `runs` and `rejects` may be missing from an older or partial snapshot: the page says so.
    runs = _rows(con, "runs") if "runs" in present else []
    return {
        "tier_counts": _rows(con, "tier_counts"),
        "link_counts": _rows(con, "link_counts"),
        "tier_matrix": _rows(con, "tier_matrix"),
        "score_histogram": _rows(con, "score_histogram", bins=limits.bins),
        "strongest_links": edges,
        "graph_nodes": nodes,
        "contradictions": _rows(con, "contradictions_page", max_rows=limits.max_table_rows, snippet_chars=limits.snippet_chars),
        "orphans": _rows(con, "orphans_page", max_rows=limits.max_table_rows, snippet_chars=limits.snippet_chars),
        "reject_counts": _rows(con, "reject_counts", max_rows=limits.max_reject_groups) if "rejects" in present else [],
        "latest_run": latest_run(runs),
        "run_count": len(runs),
        "reliability": reliability_rows(latest_run(runs)),
    }


def reliability_rows(run: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The reliability curve of the calibration the run used (score bucket, labelled pairs, true
    links, share), as measured when it was made; none for a calibration without one."""
    label = (run or {}).get("calibration") or ""
    if label and not label.startswith("bundled"):
        path = label.rsplit(" (", 1)[0]
        try:
            calibration = load_calibration(path)
        except ValueError:
            return []
    else:
        calibration = load_calibration(None)
    return [{"bucket": b, "pairs": n, "true": t, "share": (t / n) if n else None, "calibration": calibration.source}
            for b, n, t in calibration.reliability]


def force_layout(n: int, sources: np.ndarray, targets: np.ndarray, weights: np.ndarray, iterations: int = 120, seed: int = 0) -> np.ndarray:
    """Fruchterman-Reingold positions (n x 2, in [-1, 1]) for a graph of n nodes, with a
    little gravity so separate components stay on screen. Deterministic for a given seed."""
    if n == 0:
        return np.zeros((0, 2))
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-1.0, 1.0, size=(n, 2)).astype(np.float32)
    if n == 1:
        return np.zeros((1, 2))
    k = np.float32(2.0 / math.sqrt(n))  # ideal edge length in a 2 x 2 box
    k2 = k * k
    w = weights.astype(np.float32)
    temperature = np.float32(0.2)
    cooling = np.float32((0.005 / 0.2) ** (1.0 / max(iterations, 1)))
    for _ in range(iterations):
        dx = pos[:, 0, None] - pos[None, :, 0]
        dy = pos[:, 1, None] - pos[None, :, 1]
        d2 = dx * dx + dy * dy + np.float32(1e-4)
        push = k2 / d2  # repulsion k^2 / d along the unit vector = k^2 * delta / d^2
        disp = np.stack([(dx * push).sum(axis=1), (dy * push).sum(axis=1)], axis=1)
        delta = pos[sources] - pos[targets]
        dist = np.sqrt((delta * delta).sum(axis=1)) + np.float32(1e-6)
        pull = delta * (dist * w * ATTRACTION / k)[:, None]  # attraction d^2 / k along the unit vector
        np.add.at(disp, sources, -pull)
        np.add.at(disp, targets, pull)
        disp -= pos * (np.float32(0.1) * n * k)  # gravity toward the centre
        length = np.sqrt((disp * disp).sum(axis=1)) + np.float32(1e-9)
        pos += disp * (np.minimum(length, temperature) / length)[:, None]
        temperature *= cooling
    pos -= pos.mean(axis=0)
    scale = np.abs(pos).max()
    return (pos / scale if scale > 0 else pos).astype(np.float64)


def _tier_order(*groups: list[str]) -> list[str]:
    """The known tiers in their canonical order, then any others alphabetically."""
    seen = {t for g in groups for t in g if t is not None}
    return [t for t in TIERS if t in seen] + sorted(seen - set(TIERS))


def _type_order(types: set[str]) -> list[str]:
    return [t for t in RELATIONSHIP_TYPES if t in types] + sorted(types - set(RELATIONSHIP_TYPES))


def _layout(**extra: Any) -> dict[str, Any]:
    base = {"margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "paper_bgcolor": "white", "plot_bgcolor": "white", "font": {"size": 12}}
    base.update(extra)
    return base


def tier_figure(data: dict[str, Any]) -> dict[str, Any]:
    """Memories per tier, with how many of them are orphans."""
    by_tier = {r["tier"]: r for r in data["tier_counts"]}
    rows = [by_tier[t] for t in _tier_order(list(by_tier))]
    tiers = [r["tier"] for r in rows]
    colors = [TIER_COLORS.get(t, OTHER_TIER_COLOR) for t in tiers]
    traces = [
        {"type": "bar", "name": "memories", "x": tiers, "y": [r["memories"] for r in rows], "marker": {"color": colors}},
        {"type": "bar", "name": "orphans", "x": tiers, "y": [r["orphans"] for r in rows], "marker": {"color": "#c7c7c7"}},
    ]
    return {"data": traces, "layout": _layout(title={"text": "Memories per tier"}, barmode="group", yaxis={"title": {"text": "memories"}, "gridcolor": "#eee"})}


def matrix_figure(data: dict[str, Any]) -> dict[str, Any]:
    """The tier x tier link matrix (source rows, target columns), types in the hover."""
    rows = data["tier_matrix"]
    tiers = _tier_order([r["source_tier"] for r in rows], [r["target_tier"] for r in rows], [r["tier"] for r in data["tier_counts"]])
    index = {t: i for i, t in enumerate(tiers)}
    z = [[0 for _ in tiers] for _ in tiers]
    detail: list[list[list[str]]] = [[[] for _ in tiers] for _ in tiers]
    for r in rows:
        i, j = index[r["source_tier"]], index[r["target_tier"]]
        z[i][j] += r["links"]
        detail[i][j].append(f"{r['relationship_type']}: {r['links']}")
    custom = [["<br>".join(html.escape(d) for d in cell) or "no links" for cell in line] for line in detail]
    trace = {
        "type": "heatmap",
        "x": tiers,
        "y": tiers,
        "z": z,
        "customdata": custom,
        "colorscale": [[0, "#f7fbff"], [0.5, "#6baed6"], [1, "#08306b"]],
        "texttemplate": "%{z:,}",
        "hovertemplate": "%{y} → %{x}: %{z:,} links<br>%{customdata}<extra></extra>",
        "colorbar": {"title": {"text": "links"}},
    }
    return {
        "data": [trace],
        "layout": _layout(
            title={"text": "Links, source tier × target tier"},
            xaxis={"title": {"text": "target tier"}, "side": "bottom"},
            yaxis={"title": {"text": "source tier"}, "autorange": "reversed", "automargin": True},
            margin={"l": 100, "r": 20, "t": 40, "b": 50},
        ),
    }


def score_figure(data: dict[str, Any], bins: int) -> dict[str, Any]:
    """One small score histogram per relationship type (bins counted in SQL)."""
    rows = data["score_histogram"]
    types = _type_order({r["relationship_type"] for r in rows})
    width = 1.0 / bins
    columns = min(4, max(len(types), 1))
    grid_rows = max(1, math.ceil(len(types) / columns))
    traces, annotations, axes = [], [], {}
    for n, kind in enumerate(types, start=1):
        counts = [0] * bins
        for r in rows:
            if r["relationship_type"] == kind:
                counts[r["bin"]] = r["links"]
        suffix = "" if n == 1 else str(n)
        traces.append(
            {
                "type": "bar",
                "name": kind,
                "x": [round((b + 0.5) * width, 6) for b in range(bins)],
                "y": counts,
                "width": width,
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
                "marker": {"color": TYPE_COLORS.get(kind, OTHER_TIER_COLOR)},
                "hovertemplate": f"{html.escape(kind)}<br>score %{{x:.2f}}: %{{y}} links<extra></extra>",
                "showlegend": False,
            }
        )
        axes[f"xaxis{suffix}"] = {"range": [0, 1], "dtick": 0.25}
        axes[f"yaxis{suffix}"] = {"gridcolor": "#eee", "rangemode": "tozero"}
        annotations.append({"text": html.escape(kind), "xref": f"x{suffix} domain", "yref": f"y{suffix} domain", "x": 0.5, "y": 1.12, "showarrow": False})
    if not types:
        annotations.append({"text": "no relationships in this snapshot", "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False})
    layout = _layout(
        title={"text": "Score histogram per relationship type"},
        grid={"rows": grid_rows, "columns": columns, "pattern": "independent", "ygap": 0.45, "xgap": 0.12},
        annotations=annotations,
        height=max(300, 240 * grid_rows),
        margin={"l": 50, "r": 20, "t": 70, "b": 40},
        **axes,
    )
    return {"data": traces, "layout": layout}


def reliability_figure(data: dict[str, Any]) -> dict[str, Any]:
    """Score bucket -> observed share of true links on the calibration's labelled set: what a score means."""
    rows = data.get("reliability") or []
    measured = [r for r in rows if r["pairs"]]
    traces = [{
        "type": "bar",
        "x": [r["bucket"] for r in measured],
        "y": [round(r["share"], 4) for r in measured],
        "text": [f"{r['true']}/{r['pairs']}" for r in measured],
        "textposition": "outside",
        "marker": {"color": ["#2b8a3e" if float(r["bucket"].split("-")[0]) >= 0.6 else "#adb5bd" for r in measured]},
        "hovertemplate": "score %{x}: %{y:.0%} true links (%{text} labelled pairs)<extra></extra>",
    }]
    annotations = [] if measured else [{"text": "no reliability measured for this calibration", "xref": "paper",
                                        "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}]
    source = rows[0]["calibration"] if rows else ""
    layout = _layout(
        title={"text": f"Reliability: share of true links per score bucket ({html.escape(source)} calibration, labelled set)"},
        xaxis={"title": {"text": "score"}, "type": "category"},
        yaxis={"title": {"text": "share of true links"}, "range": [0, 1.15], "tickformat": ".0%", "gridcolor": "#eee"},
        annotations=annotations,
        height=320,
        margin={"l": 60, "r": 20, "t": 60, "b": 50},
    )
    return {"data": traces if measured else [], "layout": layout}


def graph_figure(data: dict[str, Any], iterations: int) -> dict[str, Any]:
    """The strongest links laid out force-directed: edges coloured by type, nodes by tier."""
    edges = data["strongest_links"]
    nodes = {n["id"]: n for n in data["graph_nodes"]}
    ids = sorted({e["source_id"] for e in edges} | {e["target_id"] for e in edges})
    index = {node_id: i for i, node_id in enumerate(ids)}
    sources = np.array([index[e["source_id"]] for e in edges], dtype=np.int64)
    targets = np.array([index[e["target_id"]] for e in edges], dtype=np.int64)
    weights = np.nan_to_num(np.array([e["score"] if e["score"] is not None else 0.5 for e in edges], dtype=np.float64), nan=0.5)
    pos = force_layout(len(ids), sources, targets, weights, iterations)
    degree = np.bincount(np.concatenate([sources, targets]), minlength=len(ids)) if len(ids) else np.zeros(0, dtype=np.int64)
    traces = []
    for kind in _type_order({e["relationship_type"] for e in edges}):
        xs: list[float | None] = []
        ys: list[float | None] = []
        for e, a, b in zip(edges, sources, targets):
            if e["relationship_type"] == kind:
                xs += [round(float(pos[a, 0]), 4), round(float(pos[b, 0]), 4), None]
                ys += [round(float(pos[a, 1]), 4), round(float(pos[b, 1]), 4), None]
        traces.append(
            {"type": "scatter", "mode": "lines", "name": kind, "x": xs, "y": ys, "hoverinfo": "skip", "legendgroup": "links", "line": {"width": 1.5, "color": TYPE_COLORS.get(kind, OTHER_TIER_COLOR)}, "opacity": 0.7}
        )
    tier_of = {}
    for e in edges:
        tier_of[e["source_id"]] = e["source_tier"]
        tier_of[e["target_id"]] = e["target_tier"]
    for tier in _tier_order(list(tier_of.values())):
        members = [node_id for node_id in ids if tier_of[node_id] == tier]
        texts = []
        for node_id in members:
            snippet = (nodes.get(node_id) or {}).get("snippet") or ""
            texts.append(f"<b>{html.escape(node_id)}</b> ({html.escape(tier)}, {degree[index[node_id]]} links)<br>{html.escape(snippet[:80])}")
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{tier} memory",
                "x": [round(float(pos[index[m], 0]), 4) for m in members],
                "y": [round(float(pos[index[m], 1]), 4) for m in members],
                "text": texts,
                "hovertemplate": "%{text}<extra></extra>",
                "legendgroup": "tiers",
                "marker": {
                    "color": TIER_COLORS.get(tier, OTHER_TIER_COLOR),
                    "size": [round(5 + 2 * math.sqrt(degree[index[m]]), 1) for m in members],
                    "line": {"width": 0.5, "color": "white"},
                },
            }
        )
    hidden = {"visible": False, "showgrid": False, "zeroline": False}
    annotations = [] if edges else [{"text": "no relationships in this snapshot", "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False}]
    return {
        "data": traces,
        "layout": _layout(
            title={"text": f"Strongest {len(edges)} links ({len(ids)} memories)"},
            xaxis=hidden,
            yaxis={**hidden, "scaleanchor": "x"},
            height=640,
            hovermode="closest",
            annotations=annotations,
            margin={"l": 10, "r": 10, "t": 40, "b": 10},
        ),
    }


def figures(data: dict[str, Any], limits: Limits = Limits()) -> dict[str, dict[str, Any]]:
    """The page's Plotly figures (plain dicts), keyed by chart container id."""
    return {
        "chart-tiers": tier_figure(data),
        "chart-matrix": matrix_figure(data),
        "chart-scores": score_figure(data, limits.bins),
        "chart-reliability": reliability_figure(data),
        "chart-graph": graph_figure(data, limits.layout_iterations),
    }


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (datetime, date)):
        return value.isoformat(sep=" ", timespec="seconds") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    return str(value)


def _table(rows: list[dict[str, Any]], columns: list[str], total: int) -> dict[str, Any]:
    return {"columns": columns, "rows": [[_text(r.get(c)) for c in columns] for r in rows], "total": total}


def _format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def _cards(items: list[tuple[str, str]]) -> str:
    return "".join(f'<div class="card"><div class="value">{html.escape(v)}</div><div class="label">{html.escape(k)}</div></div>' for k, v in items)


def _static_table(columns: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def summary_html(data: dict[str, Any]) -> str:
    """The run summary: headline numbers, links per type, rejects, the latest run's fields."""
    tiers = data["tier_counts"]
    links = data["link_counts"]
    run = data["latest_run"] or {}
    total_memories = sum(r["memories"] for r in tiers)
    total_links = sum(r["links"] for r in links)
    total_rejects = sum(r["rejects"] for r in data["reject_counts"])
    if isinstance(run.get("rejects"), int):
        total_rejects = max(total_rejects, run["rejects"])
    contradictions = sum(r["links"] for r in links if r["relationship_type"] == "contradicts")
    orphans = sum(r["orphans"] for r in tiers)
    cards = [("memories", f"{total_memories:,}")]
    cards += [(f"{r['tier']} memories", f"{r['memories']:,}") for r in tiers]
    cards += [("relationships", f"{total_links:,}"), ("contradictions", f"{contradictions:,}"), ("orphans", f"{orphans:,}"), ("rejects", f"{total_rejects:,}"), ("run time", _format_seconds(run_seconds(run)))]
    per_type: dict[str, dict[str, Any]] = {}
    for r in links:
        entry = per_type.setdefault(r["relationship_type"], {"discovered": 0, "manual": 0, "total": 0, "weighted": 0.0})
        origin = r["origin"] if r["origin"] in ("discovered", "manual") else "discovered"
        entry[origin] += r["links"]
        entry["total"] += r["links"]
        entry["weighted"] += (r["mean_score"] or 0.0) * r["links"]
    type_rows = [
        [kind, f"{e['total']:,}", f"{e['discovered']:,}", f"{e['manual']:,}", f"{e['weighted'] / e['total']:.3f}" if e["total"] else ""]
        for kind, e in ((k, per_type[k]) for k in _type_order(set(per_type)))
    ]
    parts = [f'<div class="cards">{_cards(cards)}</div>', '<div class="two">']
    parts.append("<div><h3>Links per type</h3>" + (_static_table(["type", "links", "discovered", "manual", "mean score"], type_rows, "num") if type_rows else "<p>No relationships.</p>") + "</div>")
    reject_rows = [[_text(r["store"]), _text(r["reason"]), f"{r['rejects']:,}"] for r in data["reject_counts"]]
    parts.append("<div><h3>Rejects by store and reason</h3>" + (_static_table(["store", "reason", "rejects"], reject_rows) if reject_rows else "<p>No rejected records.</p>") + "</div>")
    parts.append("</div>")
    if run:
        fields = [[k, _text(v)[:200]] for k, v in run.items()]
        label = f"Latest run fields ({data['run_count']} run{'s' if data['run_count'] != 1 else ''} in the snapshot)"
        parts.append(f'<details><summary>{html.escape(label)}</summary>{_static_table(["field", "value"], fields)}</details>')
    else:
        parts.append("<p>The snapshot holds no run record.</p>")
    return "".join(parts)


def _json_for_script(value: Any) -> str:
    """JSON safe to embed in a <script> element (no `</script>`, no HTML parsing surprises)."""
    text = json.dumps(value, default=str, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f6f7f9;color:#222}
header{background:#24364b;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}header p{margin:4px 0 0;font-size:13px;opacity:.85}
main{padding:12px 24px 40px;max-width:1400px;margin:auto}
section{background:#fff;border:1px solid #e1e4e8;border-radius:6px;padding:12px 16px;margin:14px 0}
section h2{margin:0 0 8px;font-size:16px}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #e1e4e8;border-radius:6px;padding:8px 14px;min-width:110px}
.card .value{font-size:20px;font-weight:600}.card .label{font-size:12px;color:#666}
.two{display:grid;grid-template-columns:1fr 1fr;gap:16px}.charts{display:grid;grid-template-columns:1fr 1fr;gap:16px}
@media (max-width:900px){.two,.charts{grid-template-columns:1fr}}
.chart{min-height:320px}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#fafbfc;position:sticky;top:0}table.num td+td{text-align:right}
td.content{max-width:420px;white-space:normal;word-break:break-word}
.pager{display:flex;gap:8px;align-items:center;margin:6px 0;font-size:13px}.pager input{padding:3px 6px}
.note{font-size:12px;color:#666}details{margin-top:10px;font-size:13px}
"""

# Renders the charts, then marks the page rendered (tests and the benchmark wait for it);
# paginates the embedded tables with textContent only (no HTML from the data).
_JS = """
(function(){
  var DATA = JSON.parse(document.getElementById('dashboard-data').textContent);
  var config = {displaylogo:false, responsive:true};
  var ids = Object.keys(DATA.figures);
  Promise.all(ids.map(function(id){
    var fig = DATA.figures[id];
    return Plotly.newPlot(id, fig.data, fig.layout, config);
  })).then(function(){
    window.dashboardRenderedMs = performance.now();
    document.body.setAttribute('data-rendered', 'true');
  }, function(err){
    document.body.setAttribute('data-rendered', 'error');
    console.error('dashboard: chart failed', err);
  });
  Object.keys(DATA.tables).forEach(function(id){ pager(id, DATA.tables[id], DATA.page_size); });
  function pager(id, table, size){
    var root = document.getElementById(id);
    var filter = root.querySelector('input'), info = root.querySelector('.info');
    var prev = root.querySelector('.prev'), next = root.querySelector('.next');
    var tbody = root.querySelector('tbody'), page = 0, rows = table.rows;
    var head = root.querySelector('thead tr');
    table.columns.forEach(function(c){ var th = document.createElement('th'); th.textContent = c; head.appendChild(th); });
    function draw(){
      var pages = Math.max(1, Math.ceil(rows.length / size));
      page = Math.min(page, pages - 1);
      tbody.textContent = '';
      rows.slice(page * size, (page + 1) * size).forEach(function(row){
        var tr = document.createElement('tr');
        row.forEach(function(v, i){
          var td = document.createElement('td'); td.textContent = v;
          if (/content/.test(table.columns[i])) td.className = 'content';
          tr.appendChild(td);
        });
        tbody.appendChild(tr);
      });
      info.textContent = rows.length ? ('rows ' + (page * size + 1) + '-' + Math.min((page + 1) * size, rows.length) + ' of ' + rows.length + ' shown here' + (table.total > table.rows.length ? ' (' + table.total + ' in the snapshot)' : '') + ', page ' + (page + 1) + '/' + pages) : 'no rows';
      prev.disabled = page === 0; next.disabled = page >= pages - 1;
    }
    prev.onclick = function(){ page--; draw(); };
    next.onclick = function(){ page++; draw(); };
    filter.oninput = function(){
      var q = filter.value.toLowerCase();
      rows = q ? table.rows.filter(function(r){ return r.join(' ').toLowerCase().indexOf(q) >= 0; }) : table.rows;
      page = 0; draw();
    };
    draw();
  }
})();
"""


def _paged_table(table_id: str, note: str) -> str:
    return (
        f'<div id="{table_id}" class="paged"><div class="pager"><input type="search" placeholder="filter rows"> '
        '<button class="prev">&lsaquo; prev</button><button class="next">next &rsaquo;</button> <span class="info"></span></div>'
        f'<table><thead><tr></tr></thead><tbody></tbody></table><p class="note">{html.escape(note)}</p></div>'
    )


def dashboard_html(data: dict[str, Any], plotly_js: str, limits: Limits = Limits()) -> str:
    """The whole page as one string: summary, charts, paginated tables, Plotly inlined."""
    tiers = data["tier_counts"]
    links = data["link_counts"]
    contradictions_total = sum(r["links"] for r in links if r["relationship_type"] == "contradicts")
    orphans_total = sum(r["orphans"] for r in tiers)
    contradiction_columns = ["score", "source_id", "source_tier", "source_content", "target_id", "target_tier", "target_content", "reason", "origin", "namespace"]
    orphan_columns = ["id", "tier", "namespace", "store", "content"]
    payload = {
        "figures": figures(data, limits),
        "tables": {
            "table-contradictions": _table(data["contradictions"], contradiction_columns, contradictions_total),
            "table-orphans": _table(data["orphans"], orphan_columns, orphans_total),
        },
        "page_size": limits.page_size,
    }
    run = data["latest_run"] or {}
    run_id = _text(run.get("run_id")) or "unknown run"
    when = next((_text(run[c]) for c in TIME_COLUMNS if run.get(c) is not None), "")
    cap_note = f"At most {limits.max_table_rows:,} rows are embedded in this page; query the full view with `ctc sql`."
    body = f"""<header><h1>Cross-tier correlator: run dashboard</h1><p>run {html.escape(run_id)}{(" · " + html.escape(when)) if when else ""}</p></header>
<main>
<section id="summary"><h2>Run summary</h2>{summary_html(data)}</section>
<section id="tiers"><h2>Tier distribution and tier × tier links</h2><div class="charts"><div id="chart-tiers" class="chart"></div><div id="chart-matrix" class="chart"></div></div></section>
<section id="scores"><h2>Scores per relationship type</h2><div id="chart-scores" class="chart"></div></section>
<section id="reliability"><h2>What a score means</h2><p class="note">Of the labelled pairs the calibration was checked on, the share that are true links, per score bucket; links are published from 0.6 (green). See docs/links.md.</p><div id="chart-reliability" class="chart"></div></section>
<section id="graph"><h2>Strongest links</h2><p class="note">The {limits.max_edges:,} strongest links at most, laid out force-directed; nodes coloured by tier, edges by type. Click a legend entry to hide it.</p><div id="chart-graph" class="chart"></div></section>
<section id="contradictions"><h2>Contradictions to review ({contradictions_total:,})</h2>{_paged_table("table-contradictions", cap_note.replace("the full view", "contradictions_to_review"))}</section>
<section id="orphans"><h2>Orphan memories ({orphans_total:,})</h2>{_paged_table("table-orphans", cap_note.replace("the full view", "orphan_memories"))}</section>
</main>"""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Correlator dashboard: {html.escape(run_id)}</title><style>{_CSS}</style>
<script>{plotly_js}</script></head>
<body>{body}
<script type="application/json" id="dashboard-data">{_json_for_script(payload)}</script>
<script>{_JS}</script>
</body></html>
"""


def _plotly_js() -> str:
    """Plotly's bundled, minified JS (ships with the plotly package; no network)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def build_dashboard(out: Path, limits: Limits = Limits()) -> Path:
    """Rebuild <out>/dashboard.html from the snapshot in `out`, atomically; returns its path."""
    import duckdb

    catalog = Catalog(Path(out))
    files = catalog.current_snapshot()  # resolved once: the page shows one whole run
    if files is None or not files.database.is_file():
        raise NoSnapshotError(f"no snapshot at {catalog.database}: run `ctc run` first")
    con = duckdb.connect(str(files.database), read_only=True)
    try:
        data = snapshot_data(con, limits)
    finally:
        con.close()
    page = dashboard_html(data, _plotly_js(), limits)
    target = catalog.dashboard
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    return write_atomically(target, temp, lambda handle: handle.write(page.encode("utf-8")))
