"""Suite-wide set-up: one Prefect API server for the whole session, with a throwaway home,
and `sample_snapshot`: one real flow run over data/sample shared by the tests that read it.

The server starts as this file is imported, so it comes up while pytest collects; every
flow run of the suite (in this process, and `ctc run` subprocesses, which inherit
PREFECT_API_URL) uses it instead of starting a temporary server of its own, tens of seconds
each on a busy machine. Tests of the temporary server itself (`ctc serve`, a run ended by a
signal, the watcher) remove PREFECT_API_URL from their subprocess's environment."""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CONFIG = ROOT / "correlator.toml"

# Before anything imports prefect: no analytics, no state in the user's ~/.prefect.
_PREFECT_HOME = tempfile.mkdtemp(prefix="ctc-prefect-home-")
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


_SERVER, PREFECT_API, _SERVER_LOG = _start_prefect_server()
os.environ["PREFECT_API_URL"] = PREFECT_API
atexit.register(_stop_prefect_server, _SERVER)


@pytest.fixture(scope="session", autouse=True)
def prefect_api() -> str:
    """The session's Prefect API, up before the first test runs (fails with its log if it never comes up)."""
    deadline = time.monotonic() + 150
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while True:
        try:
            with opener.open(f"{PREFECT_API}/health", timeout=2) as reply:
                if reply.status == 200:
                    return PREFECT_API
        except OSError:
            pass
        if _SERVER.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the suite's Prefect server did not start: {_SERVER_LOG.read_text(errors='replace')[-2000:]}")
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
