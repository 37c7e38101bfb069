"""`ctc run` before its flow starts: the imports it warms while Prefect's temporary server
starts, and a local Dask cluster's workers reporting to that one server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from crosstier.cli.cmd_run import encodes_here, shared_with_local_workers
from crosstier.core.config import load_settings
from crosstier.transforms.stores.extract import provides_vector_column
from reliability.flowkit import relationships, write_config
from test_flow import tiny_stores


def parquet_store(folder: Path, with_vectors: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    frame = pl.DataFrame({"id": ["a"], "tier": ["semantic"], "content": ["Deploys go out on Fridays"]})
    if with_vectors:
        frame = frame.with_columns(embedding=pl.Series([[0.1] * 384], dtype=pl.List(pl.Float32)))
    frame.write_parquet(folder / "facts.parquet")
    config = folder / "correlator.toml"
    config.write_text('[output]\ndir = "warehouse"\n[[stores]]\nname = "facts"\nkind = "parquet"\npath = "facts.parquet"\n')
    return config


@pytest.mark.parametrize(
    ("store", "runner", "expected"),
    [
        ("jsonl", "default", True),  # a record may come without a vector
        ("parquet", "default", True),  # no vector column
        ("parquet+vectors", "default", False),  # every memory comes with its vector
        ("jsonl", "dask", False),  # the workers encode, not this process
    ],
)
def test_the_run_warms_the_model_libraries_only_where_it_may_encode(tmp_path, store, runner, expected):
    if store == "jsonl":
        config = write_config(tmp_path, {"facts": [{"id": "a", "tier": "semantic", "content": "x"}]})
    else:
        config = parquet_store(tmp_path, with_vectors=store.endswith("vectors"))
    assert encodes_here(load_settings(str(config)), runner) is expected


def test_a_store_that_cannot_be_read_is_left_to_extract_to_report(tmp_path):
    settings = load_settings(str(parquet_store(tmp_path, with_vectors=True)))
    (tmp_path / "facts.parquet").write_bytes(b"not parquet")
    assert provides_vector_column(settings.stores[0]) is False
    (tmp_path / "facts.parquet").unlink()
    assert provides_vector_column(settings.stores[0]) is False


def test_warmed_imports_load_the_encoder_libraries_in_a_fresh_process(tmp_path):
    config = write_config(tmp_path, {"facts": [{"id": "a", "tier": "semantic", "content": "x"}]})
    code = (
        "import sys\n"
        "from crosstier.cli.cmd_run import warmed_imports\n"
        "from crosstier.core.config import load_settings\n"
        "settings = load_settings(" + repr(str(config)) + ")\n"
        "before = 'sentence_transformers' in sys.modules\n"
        "warmed_imports(settings, 'default', encoder=False).join()\n"
        "without = 'sentence_transformers' in sys.modules\n"
        "warmed_imports(settings, 'default').join()\n"
        "print(before, without, 'sentence_transformers' in sys.modules, 'crosstier.flows.correlate' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False", "True", "True"]


def test_local_workers_get_the_servers_url_only_for_the_run(monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://elsewhere/api")
    with shared_with_local_workers("http://127.0.0.1:8123/api", "dask", None):
        assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:8123/api"
    assert os.environ["PREFECT_API_URL"] == "http://elsewhere/api"
    for runner, address in (("default", None), ("dask", "tcp://10.0.0.5:8786")):
        with shared_with_local_workers("http://127.0.0.1:8123/api", runner, address):
            assert os.environ["PREFECT_API_URL"] == "http://elsewhere/api"
    monkeypatch.delenv("PREFECT_API_URL")
    with shared_with_local_workers("http://127.0.0.1:8123/api", "dask", None):
        assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:8123/api"
    assert "PREFECT_API_URL" not in os.environ


@pytest.mark.timeout(300)
def test_a_local_dask_run_without_a_prefect_server_starts_one_temporary_server(tmp_path, shared_embedding_cache):
    """No PREFECT_API_URL: `ctc run` starts Prefect's temporary server, and the local cluster's
    two worker processes report to it instead of starting one each (they logged "Starting
    temporary server" twice before); the run publishes what a local run publishes."""
    config = tiny_stores(tmp_path / "stores")
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["EMBED_CACHE_DIR"] = str(shared_embedding_cache)
    env["PREFECT_LOGGING_LEVEL"] = "INFO"  # where a worker says it starts a server of its own
    runs = {}
    for runner in ("default", "dask"):
        runs[runner] = subprocess.run(
            [sys.executable, "-m", "crosstier.cli", "run", "--config", str(config), "--out", str(tmp_path / runner), "--full", "--task-runner", runner],
            capture_output=True, text=True, env=env, timeout=240,
        )
        assert runs[runner].returncode == 0, runs[runner].stderr[-3000:]
    output = runs["dask"].stdout + runs["dask"].stderr
    assert output.count("Starting temporary server") <= 1, output[-3000:]
    assert relationships(tmp_path / "dask").height > 0
    assert relationships(tmp_path / "dask").equals(relationships(tmp_path / "default"))


def test_the_run_asks_glibc_to_return_freed_memory_and_passes_it_to_its_workers():
    """`ctc run` fixes glibc's mmap threshold at start (freed memory goes back to the system:
    a lower peak at 100k) and puts it in the environment its local Dask workers inherit; a
    value the user set is left as it is. In processes of their own: the setting is process-wide."""
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's; elsewhere the run leaves malloc as it is")
    code = ("import os; from crosstier.cli.cmd_run import return_freed_memory; ok = return_freed_memory(); "
            "print(ok, os.environ['MALLOC_MMAP_THRESHOLD_'])")
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.split() == ["True", str(32 << 20)]
    mine = subprocess.run([sys.executable, "-c", code], env={**env, "MALLOC_MMAP_THRESHOLD_": "1048576"}, capture_output=True, text=True)
    assert mine.stdout.split() == ["True", "1048576"]
