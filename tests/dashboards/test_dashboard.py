"""The run dashboard builder: sections, caps, SQL-side aggregation, self-containment, the CLI."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from crosstier.core.catalog import Catalog
from crosstier.dashboards.build import CHART_IDS, Limits, NoSnapshotError, build_dashboard, force_layout, latest_run, run_seconds
from crosstier.transforms.publish.snapshot import publish_snapshot
from crosstier.transforms.schema import MEMORY_SCHEMA, RELATIONSHIP_SCHEMA, empty_rejects

CONFIG = Path(__file__).resolve().parents[2] / "correlator.toml"
T0 = datetime(2025, 4, 1, 12, 0, tzinfo=timezone.utc)
EVIL = "</script><script>alert(1)</script>"


def memories(rows: list[tuple[str, str, str]]) -> pl.DataFrame:
    data = [{"id": i, "tier": t, "content": c, "namespace": "default", "store": f"{t}-store", "content_hash": i, "entities": [], "refs": []} for i, t, c in rows]
    return pl.DataFrame(data, schema=MEMORY_SCHEMA).with_columns(terms=pl.lit(["x"]))


def links(rows: list[tuple[str, str, str, str, str, float]]) -> pl.DataFrame:
    data = [
        {"source_id": s, "source_tier": st, "target_id": t, "target_tier": tt, "relationship_type": k, "score": score, "reason": "Content similarity", "origin": "discovered", "namespace": "default", "run_id": "run1"}
        for s, st, t, tt, k, score in rows
    ]
    return pl.DataFrame(data, schema=RELATIONSHIP_SCHEMA)


MEMORIES = [("e1", "episodic", "deployed on friday"), ("e2", "episodic", EVIL), ("s1", "semantic", "never deploy on friday"), ("p1", "procedural", "how to deploy"), ("o1", "semantic", "an orphan")]
LINKS = [
    ("e1", "episodic", "s1", "semantic", "contradicts", 0.9),
    ("e1", "episodic", "p1", "procedural", "supports", 1.0),
    ("e2", "episodic", "e1", "episodic", "temporal_sequence", 0.6),
    ("s1", "semantic", "p1", "procedural", "supports", 0.75),
]
RUNS = pl.DataFrame({"run_id": ["run0", "run1"], "started_at": [T0 - timedelta(days=1), T0], "finished_at": [T0 - timedelta(days=1) + timedelta(seconds=5), T0 + timedelta(seconds=90)]})


def publish(root: Path, extra: dict[str, pl.DataFrame] | None = None) -> Path:
    tables = {"memories": memories(MEMORIES), "relationships": links(LINKS), "rejects": empty_rejects().with_columns(run_id=pl.lit("run1")), "runs": RUNS}
    tables.update(extra or {})
    publish_snapshot(tables, Catalog(root), "run1")
    return root


def payload(page: str) -> dict:
    """The JSON the page renders from."""
    match = re.search(r'<script type="application/json" id="dashboard-data">(.*?)</script>', page, re.S)
    assert match, "no data block"
    return json.loads(match.group(1))


@pytest.fixture
def snapshot(tmp_path) -> Path:
    return publish(tmp_path / "warehouse")


def test_build_writes_one_self_contained_page_with_every_section(snapshot):
    path = build_dashboard(snapshot)
    assert path == Catalog(snapshot).dashboard
    page = path.read_text(encoding="utf-8")
    for section in ("summary", "tiers", "scores", "graph", "contradictions", "orphans", *CHART_IDS, "table-contradictions", "table-orphans"):
        assert f'id="{section}"' in page
    assert not re.search(r"<script[^>]*\ssrc=", page, re.I)
    assert not re.search(r"<link[^>]*\shref=", page, re.I)
    # outside plotly.js (whose code holds map-tile attribution strings), no external URL at all;
    # the browser test checks that the page requests nothing but itself
    ours = re.sub(r"<script>.*?</script>", "", page, count=1, flags=re.S)
    assert not re.search(r"https?://", ours)
    assert len(page) > 1_000_000 and "Plotly" in page  # plotly.js itself is inlined
    assert [p.name for p in snapshot.glob(".dashboard*")] == []  # no temp file left


def test_summary_counts_tiers_links_and_run_time(snapshot):
    page = build_dashboard(snapshot).read_text(encoding="utf-8")
    summary = page[page.index('id="summary"') : page.index('id="tiers"')]
    for value, label in [("5", "memories"), ("2", "episodic memories"), ("4", "relationships"), ("1", "contradictions"), ("1", "orphans"), ("0", "rejects"), ("90.0 s", "run time")]:
        assert f'<div class="value">{value}</div><div class="label">{label}</div>' in summary
    assert "run run1" in page  # the latest run, by finished_at


def test_figures_hold_aggregates_not_raw_points(snapshot):
    data = payload(build_dashboard(snapshot, Limits(bins=4)).read_text(encoding="utf-8"))
    matrix = data["figures"]["chart-matrix"]["data"][0]
    assert matrix["y"] == ["episodic", "semantic", "procedural"]
    assert matrix["z"] == [[1, 1, 1], [0, 0, 1], [0, 0, 0]]
    scores = {t["name"]: t["y"] for t in data["figures"]["chart-scores"]["data"]}
    # 4 bins over [0, 1]: 0.6 -> bin 2, 0.75 -> bin 3, 0.9 -> bin 3, 1.0 -> the last bin
    assert scores == {"contradicts": [0, 0, 0, 1], "supports": [0, 0, 0, 2], "temporal_sequence": [0, 0, 1, 0]}
    tiers = data["figures"]["chart-tiers"]["data"]
    assert tiers[0]["x"] == ["episodic", "semantic", "procedural"] and tiers[0]["y"] == [2, 2, 1] and tiers[1]["y"] == [0, 1, 0]


@pytest.mark.parametrize(("max_edges", "max_rows", "edges", "orphan_rows"), [(2, 1, 2, 1), (500, 1000, 4, 1), (1, 0, 1, 0)])
def test_caps_bound_the_graph_and_tables(snapshot, max_edges, max_rows, edges, orphan_rows):
    data = payload(build_dashboard(snapshot, Limits(max_edges=max_edges, max_table_rows=max_rows)).read_text(encoding="utf-8"))
    lines = [t for t in data["figures"]["chart-graph"]["data"] if t["mode"] == "lines"]
    assert sum(t["x"].count(None) for t in lines) == edges
    orphans = data["tables"]["table-orphans"]
    assert len(orphans["rows"]) == orphan_rows and orphans["total"] == 1


def test_graph_keeps_the_strongest_links(snapshot):
    data = payload(build_dashboard(snapshot, Limits(max_edges=2)).read_text(encoding="utf-8"))
    kept = {t["name"] for t in data["figures"]["chart-graph"]["data"] if t["mode"] == "lines"}
    assert kept == {"supports", "contradicts"}  # 1.0 and 0.9; not 0.75 or 0.6


def test_memory_content_cannot_break_out_of_the_page(snapshot):
    page = build_dashboard(snapshot).read_text(encoding="utf-8")
    assert EVIL not in page
    hover = [text for t in payload(page)["figures"]["chart-graph"]["data"] for text in t.get("text", [])]
    assert any("&lt;/script&gt;&lt;script&gt;alert(1)" in text for text in hover)  # shown as text, escaped
    assert page.count("<script") == 3  # plotly, the data block, the page script


def test_rebuild_overwrites_and_leaves_the_database_untouched(snapshot):
    database = Catalog(snapshot).database
    before = database.stat().st_mtime_ns
    first = build_dashboard(snapshot).read_text(encoding="utf-8")
    second = build_dashboard(snapshot).read_text(encoding="utf-8")
    assert first == second  # deterministic, layout included
    assert database.stat().st_mtime_ns == before


def test_a_snapshot_without_runs_or_rejects_still_builds(tmp_path):
    root = tmp_path / "w"
    publish_snapshot({"memories": memories(MEMORIES[:2]), "relationships": links([])}, Catalog(root), "r")
    page = build_dashboard(root).read_text(encoding="utf-8")
    assert "The snapshot holds no run record." in page and "No relationships." in page


def test_missing_snapshot_is_a_clear_error(tmp_path):
    with pytest.raises(NoSnapshotError, match="no snapshot"):
        build_dashboard(tmp_path)


@pytest.mark.parametrize(
    ("runs", "run_id", "seconds"),
    [
        ([], None, None),
        ([{"run_id": "a"}, {"run_id": "b"}], "b", None),  # no time columns: the last row
        ([{"run_id": "a", "started_at": T0, "duration_s": 3.5}, {"run_id": "b", "started_at": T0 - timedelta(1), "duration_s": 1}], "a", 3.5),
        ([{"run_id": "a", "started_at": T0, "finished_at": T0 + timedelta(seconds=12)}], "a", 12.0),
        ([{"run_id": "a", "started_at": T0, "finished_at": None, "status": "failed"}], "a", None),
    ],
)
def test_latest_run_tolerates_whatever_columns_runs_has(runs, run_id, seconds):
    run = latest_run(runs)
    assert (run or {}).get("run_id") == run_id
    assert run_seconds(run) == seconds


def test_force_layout_is_deterministic_and_separates_components():
    sources, targets = np.array([0, 1, 3]), np.array([1, 2, 4])
    pos = force_layout(5, sources, targets, np.ones(3), iterations=80)
    assert pos.shape == (5, 2) and np.isfinite(pos).all() and np.abs(pos).max() == pytest.approx(1.0)
    assert np.array_equal(pos, force_layout(5, sources, targets, np.ones(3), iterations=80))
    linked = np.linalg.norm(pos[0] - pos[1])
    assert linked < np.linalg.norm(pos[0] - pos[4])


def test_cli_rebuilds_and_prints_the_path(snapshot, capsys, monkeypatch):
    from crosstier.cli import main as cli

    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url) or True)
    assert cli.main(["dashboard", "--config", str(CONFIG), "--out", str(snapshot), "--open"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == str(Catalog(snapshot).dashboard.resolve())
    assert opened == [Catalog(snapshot).dashboard.resolve().as_uri()]


def test_cli_without_a_snapshot_fails_with_a_message(tmp_path, capsys):
    from crosstier.cli import main as cli

    assert cli.main(["dashboard", "--config", str(CONFIG), "--out", str(tmp_path)]) == 1
    assert "no snapshot" in capsys.readouterr().err


def test_page_reads_the_snapshot_read_only(snapshot):
    # in one process DuckDB refuses a second open of a file with a different configuration,
    # so this passes only because the builder opens it read-only too
    reader = duckdb.connect(str(Catalog(snapshot).database), read_only=True)
    try:
        assert build_dashboard(snapshot).is_file()
    finally:
        reader.close()


def test_reliability_chart_shows_the_calibrations_measured_share_per_score_bucket(snapshot):
    from crosstier.transforms.link.calibration import load_calibration

    data = payload(build_dashboard(snapshot).read_text(encoding="utf-8"))
    bars = data["figures"]["chart-reliability"]["data"][0]
    measured = [(b, n, t) for b, n, t in load_calibration(None).reliability if n]
    assert measured, "the bundled calibration carries its measured curve"
    assert bars["x"] == [b for b, _, _ in measured]
    assert bars["y"] == [pytest.approx(t / n, abs=1e-4) for _, n, t in measured]
    assert all(0.0 <= y <= 1.0 for y in bars["y"])
