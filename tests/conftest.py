"""Suite-wide set-up: Prefect runs on its temporary local API with a throwaway home, and
`sample_snapshot` is one real flow run over data/sample shared by the tests that read it."""

from __future__ import annotations

import os
import tempfile
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
