"""The `ctc` command line. Each command lives in its own module, imported only when run,
so read commands never pay for Prefect or torch."""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> (module, one-line help). A module defines configure(parser) and main(args) -> int;
# its top level imports nothing heavy.
COMMANDS = {
    "run": ("crosstier.cli.cmd_run", "run the correlate flow over the configured stores"),
    "correlations": ("crosstier.cli.cmd_read", "links of one memory, strongest first"),
    "graph": ("crosstier.cli.cmd_read", "correlation graph around memories"),
    "discover": ("crosstier.cli.cmd_read", "links a new, unstored memory would get"),
    "link": ("crosstier.cli.cmd_read", "add a manual relationship"),
    "retrieve": ("crosstier.cli.cmd_read", "semantic search expanded with correlations"),
    "report": ("crosstier.cli.cmd_read", "markdown report for one memory"),
    "sql": ("crosstier.cli.cmd_read", "ad-hoc read-only SQL on the snapshot"),
    "dashboard": ("crosstier.cli.cmd_dashboard", "rebuild the HTML dashboard from the snapshot"),
    "watch": ("crosstier.cli.cmd_watch", "follow the stores and link each new memory live"),
    "serve": ("crosstier.cli.cmd_serve", "serve the flow on a cron schedule"),
    "cache": ("crosstier.cli.cmd_cache", "inspect or clear the embedding cache"),
    "calibrate": ("crosstier.cli.cmd_calibrate", "fit the score calibration from your labels (manual links, not_related, refs)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctc", description="Cross-tier memory correlator.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a command not built yet
        command = sub.add_parser(name, help=help_text, description=help_text)
        command.add_argument("--config", help="config file (default: ./correlator.toml or $CORRELATOR_CONFIG)")
        command.add_argument("--out", help="warehouse folder (default: output.dir of the config)")
        module.configure(name, command)
    return parser


def main(argv: list[str] | None = None) -> int:
    from crosstier.core.config import ConfigError

    parser = build_parser()
    args = parser.parse_args(argv)
    module = importlib.import_module(COMMANDS[args.command][0])
    try:
        return int(module.main(args) or 0)
    except ConfigError as exc:
        print(f"ctc: config error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
