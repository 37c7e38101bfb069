"""The dashboard in a real browser: headless Debian Chromium (no browser download) loads the
page offline, every chart draws SVG marks, the console stays clean; a screenshot is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstier.core.catalog import Catalog
from crosstier.dashboards.browser import chromium_missing_reason, render_page
from crosstier.dashboards.build import CHART_IDS, build_dashboard
from crosstier.dashboards.synthetic import synthetic_tables
from crosstier.transforms.publish.snapshot import publish_snapshot

pytestmark = pytest.mark.browser

# The minimum each chart must draw: (container, kind of mark).
EXPECTED_MARKS = [
    ("chart-tiers", "bars"),
    ("chart-matrix", "heatmap"),
    ("chart-scores", "bars"),
    ("chart-graph", "points"),
    ("chart-graph", "lines"),
]


@pytest.fixture(scope="module")
def synthetic_snapshot(tmp_path_factory) -> Path:
    """A small synthetic snapshot: every tier, every relationship type, orphans, rejects."""
    root = tmp_path_factory.mktemp("dashboard-synthetic")
    publish_snapshot(synthetic_tables(400, links_per_memory=3.0, n_rejects=4), Catalog(root), "synthetic")
    return root


@pytest.fixture(params=["synthetic", "sample"])
def warehouse(request) -> Path:
    """The synthetic snapshot, and the sample run's (conftest's `sample_snapshot`)."""
    if request.param == "synthetic":
        return request.getfixturevalue("synthetic_snapshot")
    return Path(request.getfixturevalue("sample_snapshot"))


@pytest.fixture(scope="module")
def chromium() -> None:
    reason = chromium_missing_reason()
    if reason:
        pytest.skip(f"browser check needs headless Chromium: {reason}")


def test_dashboard_renders_in_chromium(warehouse, chromium, tmp_path):
    page = build_dashboard(warehouse)
    screenshot = tmp_path / "dashboard.png"
    seen = render_page(page, CHART_IDS, screenshot=screenshot)
    assert seen.status == "true", f"charts did not render: {seen.console_errors}"
    assert seen.console_errors == []
    assert seen.requests == [page.resolve().as_uri()]  # offline: nothing but the page itself
    for chart in CHART_IDS:
        assert seen.marks[chart]["main_svg"] > 0, f"{chart} has no plot"
    for chart, kind in EXPECTED_MARKS:
        assert seen.marks[chart][kind] > 0, f"{chart} drew no {kind}: {seen.marks[chart]}"
    assert screenshot.stat().st_size > 10_000
    assert seen.rendered_ms < 10_000  # the 3 s budget at 100k memories is bench/dashboard.py's
