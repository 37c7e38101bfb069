"""Open a dashboard page in headless Debian Chromium (driven by Playwright, no browser download)
and report what rendered: console errors, drawn SVG elements per chart, time to rendered.
Used by the browser test and the benchmark."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# No network, no background services, no first-run UI: the page must work offline.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# Drawn marks per chart container, by kind: Plotly's SVG roots, bars, scatter points,
# scatter lines, and heatmap images.
_COUNT_JS = """
(ids) => Object.fromEntries(ids.map((id) => {
  const el = document.getElementById(id);
  const n = (sel) => el ? el.querySelectorAll(sel).length : 0;
  return [id, {
    main_svg: n('svg.main-svg'),
    bars: n('g.trace.bars g.point path'),
    points: n('g.trace.scatter g.points path.point'),
    lines: n('g.trace.scatter path.js-line'),
    heatmap: n('g.hm image'),
  }];
}))
"""


@dataclass
class Rendered:
    """What the browser saw."""

    console_errors: list[str] = field(default_factory=list)
    marks: dict[str, dict[str, int]] = field(default_factory=dict)
    rendered_ms: float = 0.0  # navigation start to the page's own "rendered" mark
    load_ms: float = 0.0  # navigation start to the load event
    status: str = ""  # the page's data-rendered attribute: "true" or "error"
    requests: list[str] = field(default_factory=list)  # every URL the page asked for


def chromium_missing_reason() -> str | None:
    """Why the browser check cannot run here, or None when it can."""
    if not Path(CHROMIUM).is_file():
        return f"{CHROMIUM} not found (Debian's chromium package; the test set-up installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright (Python) is not installed"
    return None


def render_page(page_path: Path, chart_ids: tuple[str, ...], screenshot: Path | None = None, timeout_s: float = 30.0) -> Rendered:
    """Load `page_path` in a fresh headless Chromium profile, wait for the charts, and report."""
    from playwright.sync_api import sync_playwright

    result = Rendered()
    profile = Path(tempfile.mkdtemp(prefix="ctc-chromium-"))
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                str(profile),
                executable_path=CHROMIUM,
                headless=True,
                args=list(CHROMIUM_ARGS),
                viewport={"width": 1400, "height": 1000},
            )
            try:
                page = context.new_page()
                page.on("console", lambda m: result.console_errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: result.console_errors.append(f"uncaught: {e}"))
                page.on("request", lambda r: result.requests.append(r.url))
                page.goto(page_path.resolve().as_uri(), wait_until="load", timeout=timeout_s * 1000)
                page.wait_for_selector("body[data-rendered]", state="attached", timeout=timeout_s * 1000)
                result.status = page.get_attribute("body", "data-rendered") or ""
                timing = page.evaluate("() => ({rendered: window.dashboardRenderedMs || 0, load: performance.getEntriesByType('navigation')[0].loadEventEnd})")
                result.rendered_ms = float(timing["rendered"])
                result.load_ms = float(timing["load"])
                result.marks = page.evaluate(_COUNT_JS, list(chart_ids))
                if screenshot is not None:
                    page.screenshot(path=str(screenshot), full_page=True)
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return result
