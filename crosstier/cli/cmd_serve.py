"""`ctc serve`: run the correlate flow on a schedule (Prefect's `flow.serve`).

Schedules need a real Prefect API. With PREFECT_API_URL set, that server is used; without
it, a local `prefect server` (SQLite, 127.0.0.1, a free port, state in the warehouse's
.prefect folder) is started here, health-checked, and stopped on exit."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--cron", default=None, help='cron schedule, e.g. "*/30 * * * *" (the default)')
    when.add_argument("--interval", type=float, help="seconds between runs instead of a cron schedule")
    parser.add_argument("--name", default="correlate", help="deployment name")
    parser.add_argument("--full", action="store_true", help="every scheduled run rescans everything")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(url: str) -> bool:
    import urllib.request  # here, not at the top: `ctc --help` and read commands stay light

    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def local_prefect_server(home: Path, timeout_s: float = 90.0):
    """A `prefect server start` on loopback for as long as the block runs; yields its API URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_UI_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "ab")
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while not _healthy(url):
            if server.poll() is not None:
                raise RuntimeError(f"prefect server exited with {server.returncode}; see {home / 'server.log'}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"prefect server not healthy after {timeout_s:.0f}s; see {home / 'server.log'}")
            time.sleep(0.5)
        print(f"started a local Prefect server at {url} (state in {home})", flush=True)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def serve(args: argparse.Namespace, out: Path) -> None:
    from crosstier.flows.correlate import correlate

    schedule = {"interval": args.interval} if args.interval else {"cron": args.cron or "*/30 * * * *"}
    parameters = {"config_path": args.config, "out": str(out), "full": args.full}
    print(f"serving deployment correlate/{args.name} with {schedule}; Ctrl-C stops", flush=True)
    correlate.serve(name=args.name, parameters=parameters, **schedule)


def main(args: argparse.Namespace) -> int:
    from crosstier.cli.settings_arg import settings_from_args

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    settings = settings_from_args(args)
    if args.config:
        args.config = str(Path(args.config).resolve())
    if os.environ.get("PREFECT_API_URL"):
        serve(args, settings.output_dir)
        return 0
    with local_prefect_server(settings.output_dir / ".prefect") as url:
        os.environ["PREFECT_API_URL"] = url
        serve(args, settings.output_dir)
    return 0
