"""`ctc watch`: the live path. Catches up, prints a line with `watching`, then links each new
or changed memory within about a second, until SIGTERM or SIGINT (Ctrl-C)."""

from __future__ import annotations

import argparse


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debounce-ms", type=int, default=30, help="how long changes are gathered into one micro-batch")


def keep_freed_memory() -> bool:
    """Ask glibc to serve large arrays from its heap and keep what is freed there.

    By default each array over 32 MB is mapped fresh and unmapped when freed, so every
    micro-batch page-faults its vector matrices (150 MB each at 100k memories) in again: a
    gather that takes 0.1 s cold-cached took up to 0.9 s inside the watcher. A long-running
    process holding the same working set gains by reusing it. False where this is not glibc."""
    from crosstier.cli.cmd_run import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, mallopt

    return mallopt((M_MMAP_THRESHOLD, 1 << 30), (M_TRIM_THRESHOLD, (1 << 31) - 1))


def yield_idle_threads() -> None:
    """Let the model's OpenMP threads sleep when idle instead of spinning, unless the user set it.

    The watcher shares its cores with the readers it serves. With OpenMP's default spin-wait,
    embedding 1000 texts took 5.6-6.1 s beside one busy process on 2 cores, against 1.6 s
    with passive waiting (0.9 s and 1.1-1.2 s with the cores to itself); a burst is embedded
    while readers poll. Read when torch loads its OpenMP runtime: called before that."""
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main(args: argparse.Namespace) -> int:
    import signal

    keep_freed_memory()
    yield_idle_threads()

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
