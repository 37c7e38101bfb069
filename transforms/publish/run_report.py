"""The run's summary, its `runs` row, and the markdown report shown as a Prefect artifact."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from crosstier.transforms.schema import TIERS

RUNS_SCHEMA = pl.Schema(
    {
        "run_id": pl.String,
        "status": pl.String,
        "mode": pl.String,
        "started_at": pl.String,
        "finished_at": pl.String,
        "seconds": pl.Float64,
        "records_read": pl.Int64,
        "memories": pl.Int64,
        "rejects": pl.Int64,
        "relationships": pl.Int64,
        "embedded": pl.Int64,
        "cached": pl.Int64,
        "pairs_scored": pl.Int64,
        "changed": pl.Int64,
        "deleted": pl.Int64,
        "embedding_model": pl.String,
        "calibration": pl.String,
        "settings_fingerprint": pl.String,
        "stage_seconds": pl.String,
        "stage_peak_mib": pl.String,
        "links_by_type": pl.String,
        "memories_by_tier": pl.String,
        "error": pl.String,
    }
)


def runs_table(log: list[dict]) -> pl.DataFrame:
    """The `runs` table from the run log, one row per run (latest record of a run id wins)."""
    latest: dict[str, dict] = {}
    for record in log:
        if isinstance(record, dict) and record.get("run_id"):
            latest[record["run_id"]] = record
    rows = []
    for record in latest.values():
        row = {}
        for name, dtype in RUNS_SCHEMA.items():
            value = record.get(name)
            if isinstance(value, (dict, list)):
                value = json.dumps(value, sort_keys=True)
            row[name] = value
        rows.append(row)
    frame = pl.DataFrame(rows, schema=RUNS_SCHEMA, strict=False) if rows else pl.DataFrame(schema=RUNS_SCHEMA)
    return frame.sort("started_at", "run_id")


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The run summary as the CLI prints it."""
    tiers = summary.get("memories_by_tier", {})
    links = summary.get("links_by_type", {})
    stages = summary.get("stage_seconds", {})
    lines = [
        f"run {summary['run_id']} ({summary['mode']}): {summary['status']}",
        "memories: " + ", ".join(f"{t} {tiers.get(t, 0)}" for t in TIERS) + f" (total {summary.get('memories', 0)})",
        f"rejects: {summary.get('rejects', 0)} of {summary.get('records_read', 0)} records read",
        f"embedded: {summary.get('embedded', 0)} new, {summary.get('cached', 0)} from cache",
        f"memories rescored: {summary.get('changed', 0)} changed, {summary.get('deleted', 0)} deleted",
        f"pairs scored: {summary.get('pairs_scored', 0)}",
        *([f"calibration: {summary['calibration']}"] if summary.get("calibration") else []),
        "links: " + (", ".join(f"{k} {v}" for k, v in sorted(links.items())) or "none") + f" (total {summary.get('relationships', 0)})",
        "seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()) + f" (total {summary.get('seconds', 0):.2f})",
    ]
    if summary.get("stage_peak_mib"):
        lines.append("peak memory MiB after each stage: " + ", ".join(f"{k} {v:.0f}" for k, v in summary["stage_peak_mib"].items()))
    lines += [f"warning: {warning}" for warning in summary.get("warnings", [])]
    return lines


def _table(frame: pl.DataFrame, columns: list[str]) -> list[str]:
    if frame.height == 0:
        return ["_none_"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in frame.select(columns).iter_rows():
        cells = [f"{v:.2f}" if isinstance(v, float) else str(v).replace("|", "\\|").replace("\n", " ")[:80] for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run_report_markdown(
    summary: dict[str, Any],
    relationships: pl.DataFrame,
    memories: pl.DataFrame,
    tier_distribution: pl.DataFrame,
    *,
    dashboard_path: str | None = None,
    top: int = 10,
) -> str:
    """The markdown run report: counts, top links, contradictions to review, orphans."""
    linked = pl.concat([relationships.get_column("source_id"), relationships.get_column("target_id")]).unique()
    orphans = memories.filter(~pl.col("id").is_in(linked.implode())).sort("tier", "id")
    contradictions = relationships.filter(pl.col("relationship_type") == "contradicts").sort("score", descending=True)
    strongest = relationships.sort(["score", "source_id", "target_id"], descending=[True, False, False]).head(top)
    lines = [f"# Correlator run {summary['run_id']}", "", *[f"- {line}" for line in summary_lines(summary)], ""]
    if dashboard_path:
        lines += [f"Dashboard: [{dashboard_path}](file://{dashboard_path})", ""]
    lines += ["## Tier distribution", "", *_table(tier_distribution, tier_distribution.columns), ""]
    lines += [f"## Top {top} links", "", *_table(strongest, ["source_id", "target_id", "relationship_type", "score", "reason"]), ""]
    lines += [f"## Contradictions to review ({contradictions.height})", "", *_table(contradictions.head(top), ["source_id", "target_id", "score", "reason"]), ""]
    lines += [f"## Orphan memories ({orphans.height})", "", *_table(orphans.head(top), ["id", "tier", "store"]), ""]
    return "\n".join(lines)
