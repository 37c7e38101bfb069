"""The reliability suite's summary: its counts, printed at the end of every session that ran it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from reliability.stats import COUNTS, summary_line


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not COUNTS:
        return
    line = summary_line()
    terminalreporter.write_sep("-", "reliability suite")
    terminalreporter.write_line(line)
    target = os.environ.get("CTC_RELIABILITY_SUMMARY")
    if target:  # CI can keep the counts as a file too
        with open(target, "w", encoding="utf-8") as handle:
            json.dump({**COUNTS, "summary": line}, handle, sort_keys=True)
            handle.write("\n")


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """One Prefect API server for the suite's `ctc run` subprocesses (PREFECT_API_URL).

    Without it every `ctc run` starts its own ephemeral server (tens of seconds on a busy
    machine), and a run killed by SIGKILL leaves that server behind as an orphan that holds
    the run's stdout/stderr open. The server runs in its own process group, ended at teardown."""
    home = tmp_path_factory.mktemp("prefect-server-home")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prefect = Path(sys.executable).with_name("prefect")
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING"}
    env.pop("PREFECT_API_URL", None)
    log = open(home / "server.log", "wb")
    proc = subprocess.Popen([str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 150
        while True:
            try:
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{url}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Prefect server did not start: {(home / 'server.log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
