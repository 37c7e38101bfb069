"""Run dashboard at scale: build the page from a synthetic snapshot and load it in Chromium.

    .venv/bin/python bench/dashboard.py --memories 100000 [--links-per-memory 10] [--loads 3] [--out DIR]

Publishes a deterministic synthetic snapshot (dashboards/synthetic.py, through
publish_snapshot), times `build_dashboard` (median of --builds), measures the page's size,
then loads it --loads times in headless Debian Chromium, each in a fresh profile, and takes
the median time from navigation start to the page's "rendered" mark (every chart drawn).
The budget is 3 s at 100k memories. The last line is machine-readable:
RESULT memories=... relationships=... html_bytes=... build_s=... load_ms=... rendered_ms=... ...
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RENDER_BUDGET_MS = 3000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--links-per-memory", type=float, default=10.0)
    parser.add_argument("--builds", type=int, default=3)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--out", help="warehouse folder to (re)use; default: a temp folder")
    parser.add_argument("--screenshot", help="save a screenshot of the last load here")
    args = parser.parse_args()

    from crosstier.core.catalog import Catalog
    from crosstier.dashboards.browser import chromium_missing_reason, render_page
    from crosstier.dashboards.build import CHART_IDS, build_dashboard
    from crosstier.dashboards.synthetic import synthetic_tables
    from crosstier.transforms.publish.snapshot import publish_snapshot

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="ctc-bench-dashboard-"))
    started = time.perf_counter()
    run_id = time.strftime("bench-%Y%m%dT%H%M%S")  # a new snapshot each time: --out may be reused
    tables = synthetic_tables(args.memories, links_per_memory=args.links_per_memory, n_rejects=50, run_id=run_id)
    publish_snapshot(tables, Catalog(out), run_id)
    print(f"snapshot: {out} ({tables['memories'].height:,} memories, {tables['relationships'].height:,} relationships) in {time.perf_counter() - started:.1f} s")

    build_times = []
    for _ in range(args.builds):
        t0 = time.perf_counter()
        page = build_dashboard(out)
        build_times.append(time.perf_counter() - t0)
    size = page.stat().st_size
    print(f"build: {', '.join(f'{t:.2f}' for t in build_times)} s; page {size / 1e6:.2f} MB: {page}")

    fields = {
        "memories": tables["memories"].height,
        "relationships": tables["relationships"].height,
        "html_bytes": size,
        "build_s": round(statistics.median(build_times), 3),
    }
    reason = chromium_missing_reason()
    if reason:
        print(f"no browser measurement: {reason}")
        fields.update(load_ms="na", rendered_ms="na", within_budget="na")
    else:
        loads, rendered, errors = [], [], 0
        for i in range(args.loads):
            shot = Path(args.screenshot) if args.screenshot and i == args.loads - 1 else None
            seen = render_page(page, CHART_IDS, screenshot=shot)
            if seen.status != "true" or seen.console_errors:
                errors += 1
                print(f"load {i + 1}: status={seen.status!r} errors={seen.console_errors}")
            loads.append(seen.load_ms)
            rendered.append(seen.rendered_ms)
        print(f"chromium: load {', '.join(f'{x:.0f}' for x in loads)} ms; rendered {', '.join(f'{x:.0f}' for x in rendered)} ms")
        median_rendered = statistics.median(rendered)
        fields.update(
            load_ms=round(statistics.median(loads)),
            rendered_ms=round(median_rendered),
            rendered_max_ms=round(max(rendered)),
            render_errors=errors,
            within_budget=str(median_rendered < RENDER_BUDGET_MS and errors == 0).lower(),
        )
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
