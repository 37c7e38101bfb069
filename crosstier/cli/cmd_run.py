"""`ctc run`: the correlate flow once, then its summary and where the outputs are."""

from __future__ import annotations

import argparse
import functools
import os
import sys


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", help="rescore everything, ignoring the last snapshot")
    mode.add_argument("--incremental", action="store_true", help="only new, edited and deleted memories (the default when a snapshot exists)")
    parser.add_argument("--task-runner", choices=("default", "dask"), default="default", help="where mapped tasks run")
    parser.add_argument("--dask-address", help="scheduler address (tcp://host:port) of an existing Dask cluster; default: a local one")


def prefect_environment() -> None:
    """Prefect runs here without a server (its temporary local API) and sends no analytics."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
    # Prefect gives its temporary server 20 s to answer; a busy machine (a run beside other
    # work, a CI box) was seen to need more, and a failed start loses the whole run.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def tie_prefect_server_to_this_process() -> None:
    """Prefect's temporary API server is a child process that outlives a run ended by a signal
    (SIGTERM from a scheduler, SIGKILL) and keeps running on its own. On Linux, ask the kernel
    to send it SIGTERM when the thread that started it dies; `ctc run` starts it from the main
    thread, which lives as long as the run."""
    import ctypes
    import signal
    import subprocess
    import sys
    import threading

    if not sys.platform.startswith("linux"):
        return
    from prefect.server.api import server

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def die_with_parent() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)

    original = server.SubprocessASGIServer._run_uvicorn_command

    def run_uvicorn_command(self):
        if threading.current_thread() is not threading.main_thread():
            return original(self)  # a thread that may end before the run: leave it as it is
        popen = subprocess.Popen
        subprocess.Popen = functools.partial(popen, preexec_fn=die_with_parent)
        try:
            return original(self)
        finally:
            subprocess.Popen = popen

    server.SubprocessASGIServer._run_uvicorn_command = run_uvicorn_command


def with_task_runner(flow_fn, runner: str, address: str | None):
    if runner != "dask":
        return flow_fn
    from prefect_dask import DaskTaskRunner

    return flow_fn.with_options(task_runner=DaskTaskRunner(address=address) if address else DaskTaskRunner())


def main(args: argparse.Namespace) -> int:
    prefect_environment()
    from crosstier.cli.settings_arg import settings_from_args
    from crosstier.transforms.stores.extract import ExtractError
    from crosstier.transforms.publish.run_report import summary_lines

    settings = settings_from_args(args)  # validate before starting Prefect: config errors fail fast
    if not settings.enabled:
        print("correlator is disabled (CORRELATOR_ENABLED=false): nothing to do")
        return 0
    from crosstier.flows.correlate import correlate

    tie_prefect_server_to_this_process()
    flow_fn = with_task_runner(correlate, args.task_runner, args.dask_address)
    try:
        summary = flow_fn(config_path=args.config, out=str(settings.output_dir), full=args.full)
    except ExtractError as exc:
        print(f"ctc: {exc}", file=sys.stderr)
        return 1
    print()
    for line in summary_lines(summary):
        print(line)
    for name, path in summary.get("outputs", {}).items():
        if path:
            print(f"{name}: {path}")
    return 0
