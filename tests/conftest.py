"""Suite-wide set-up: one Prefect API server for the whole session, with a throwaway home,
and `sample_snapshot`: one real flow run over data/sample shared by the tests that read it.

The server starts at configure time, so it comes up while pytest collects; every flow run
of the suite (in this process, and `ctc run` subprocesses, which inherit PREFECT_API_URL)
uses it instead of starting a temporary server of its own, tens of seconds each on a busy
machine. Tests of the temporary server itself (`ctc serve`, a run ended by a signal, the
watcher) remove PREFECT_API_URL from their subprocess's environment.

`make test` runs the suite in two pytest-xdist worker processes (most of its time is spent
waiting on subprocesses and servers, so two workers on two cores nearly halve it): each
worker has its own server, home and sample snapshot; the controller, which runs no test,
starts none. The reliability suite's counts travel from the workers to the controller,
which prints them."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from reliability.stats import COUNTS, summary_line

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CONFIG = ROOT / "correlator.toml"

# Before anything imports prefect: no analytics, no state in the user's ~/.prefect.
_PREFECT_HOME = tempfile.mkdtemp(prefix="ctc-prefect-home-")
# registered first, so it runs last: after the Prefect server (whose log lies there) is stopped
atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")  # as `ctc run` sets it
os.environ.pop("PREFECT_API_URL", None)


def _start_prefect_server() -> tuple[subprocess.Popen, str, Path]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = Path(_PREFECT_HOME) / "server.log"
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": "WARNING"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}/api", log_path


def _stop_prefect_server(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


_server: dict[str, object] = {}


def _is_xdist_controller(config: pytest.Config) -> bool:
    """The process that hands tests to xdist workers and runs none itself."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


def pytest_configure(config: pytest.Config) -> None:
    if _is_xdist_controller(config):
        return
    _server["proc"], _server["api"], _server["log"] = _start_prefect_server()
    os.environ["PREFECT_API_URL"] = _server["api"]
    atexit.register(_stop_prefect_server, _server["proc"])


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: its reliability counts go to the controller
        workeroutput["reliability_counts"] = dict(COUNTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """(xdist controller) A worker finished: add its reliability counts to the session's."""
    COUNTS.update(getattr(node, "workeroutput", {}).get("reliability_counts", {}))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The reliability suite's counts, once per session that ran it (the controller's, under xdist)."""
    if not COUNTS or hasattr(config, "workerinput"):
        return
    line = summary_line()
    terminalreporter.write_sep("-", "reliability suite")
    terminalreporter.write_line(line)
    target = os.environ.get("CTC_RELIABILITY_SUMMARY")
    if target:  # CI can keep the counts as a file too
        with open(target, "w", encoding="utf-8") as handle:
            json.dump({**COUNTS, "summary": line}, handle, sort_keys=True)
            handle.write("\n")


@pytest.fixture(scope="session", autouse=True)
def prefect_api() -> str:
    """The session's Prefect API, up before the first test runs (fails with its log if it never comes up)."""
    api, server, log = _server["api"], _server["proc"], _server["log"]
    deadline = time.monotonic() + 150
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while True:
        try:
            with opener.open(f"{api}/health", timeout=2) as reply:
                if reply.status == 200:
                    return api
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the suite's Prefect server did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.3)


for name in ("MIN_CORRELATION_SCORE", "MAX_LINKS_PER_MEMORY", "EMBEDDING_MODEL", "CORRELATOR_ENABLED", "CORRELATOR_OUTPUT_DIR", "CORRELATOR_CONFIG", "EMBED_CACHE_DIR"):
    os.environ.pop(name, None)


@pytest.fixture(scope="session")
def shared_embedding_cache(tmp_path_factory) -> Path:
    """One embedding cache (and ONNX export) for flow runs that do not test the cache itself."""
    return tmp_path_factory.mktemp("embedding-cache")


@pytest.fixture(scope="session")
def sample_snapshot(tmp_path_factory, shared_embedding_cache) -> Path:
    """The warehouse folder of one full flow run over the bundled sample stores."""
    from crosstier.flows.correlate import correlate

    out = tmp_path_factory.mktemp("sample-warehouse")
    os.environ["EMBED_CACHE_DIR"] = str(shared_embedding_cache)
    try:
        summary = correlate(config_path=str(SAMPLE_CONFIG), out=str(out), full=True)
    finally:
        os.environ.pop("EMBED_CACHE_DIR", None)
    assert summary["status"] == "published"
    return out
