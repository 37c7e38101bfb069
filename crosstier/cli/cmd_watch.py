"""`ctc watch`: the live path. Catches up, prints a line with `watching`, then links each new
or changed memory within about a second, until SIGTERM or SIGINT (Ctrl-C)."""

from __future__ import annotations

import argparse


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debounce-ms", type=int, default=30, help="how long changes are gathered into one micro-batch")


def main(args: argparse.Namespace) -> int:
    import signal

    from crosstier.cli.cmd_run import prefect_environment, tie_prefect_server_to_this_process

    prefect_environment()
    tie_prefect_server_to_this_process()
    from crosstier.flows.watch import STOP, watch

    def stop(signum, frame) -> None:
        STOP.set()  # the watcher finishes the micro-batch it is in, then returns

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    result = watch(config_path=args.config, out=args.out, debounce_ms=args.debounce_ms)
    print(f"stopped after {result['batches']} micro-batches (snapshot {result['snapshot']})", flush=True)
    return 0
