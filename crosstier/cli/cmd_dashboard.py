"""`ctc dashboard [--open]`: rebuild the HTML dashboard from the current snapshot."""

from __future__ import annotations

import argparse
import sys


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--open", action="store_true", help="open the page in the default web browser")


def main(args: argparse.Namespace) -> int:
    from crosstier.cli.settings_arg import settings_from_args
    from crosstier.dashboards.build import NoSnapshotError, build_dashboard

    settings = settings_from_args(args)
    try:
        path = build_dashboard(settings.output_dir)
    except NoSnapshotError as exc:
        print(f"ctc: {exc}", file=sys.stderr)
        return 1
    path = path.resolve()
    print(path)
    if args.open:
        import webbrowser

        if not webbrowser.open(path.as_uri()):
            print("ctc: no web browser to open; the path is above", file=sys.stderr)
    return 0
