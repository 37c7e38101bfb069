"""The correlate flow end to end: sample run, incremental == full, disabled, manual links,
artifacts, `ctc run` on a real Dask cluster of worker processes, and `ctc serve` (a scheduled run,
and a cron deployment registered on a local Prefect server)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import polars as pl
import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.manual_log import append_record
from reliability.flowkit import TOPICS, relationships, write_config
from crosstier.transforms.link.links import audit_failures

ROOT = Path(__file__).resolve().parents[2]


def tiny_stores(folder: Path) -> Path:
    """A small config over JSONL stores: an agent's week in ~30 memories, two namespaces."""
    episodes, facts = [], []
    for day, (key, episode, fact) in enumerate(TOPICS[:5], start=2):
        for turn in range(3):
            episodes.append(
                {
                    "id": f"ep-{key}-{turn}",
                    "tier": "episodic",
                    "content": f"{episode} (turn {turn + 1})" if turn else episode,
                    "timestamp": f"2026-11-{day:02d}T09:{10 + turn:02d}:00Z",
                    "session_id": f"s-{key}",
                }
            )
        facts.append({"id": f"sem-{key}", "tier": "semantic", "content": fact, "timestamp": f"2026-11-{day:02d}T18:00:00Z", "refs": [f"ep-{key}-0"]})
    facts.append({"id": "sem-tabs-no", "tier": "semantic", "content": "Maya no longer prefers tabs for indentation", "timestamp": "2026-11-20T10:00:00Z"})
    ops = [{"id": "ops-pgvector", "tier": "episodic", "namespace": "ops", "content": "Set up pgvector 0.7.4 on search_staging with an HNSW index", "timestamp": "2026-11-02T09:10:00Z"}]
    return write_config(folder, {"episodes": episodes, "facts": facts, "ops": ops})


@pytest.fixture()
def cached_embeddings(shared_embedding_cache, monkeypatch):
    monkeypatch.setenv("EMBED_CACHE_DIR", str(shared_embedding_cache))


def test_sample_run_publishes_a_sound_read_only_warehouse(sample_snapshot):
    catalog = Catalog(sample_snapshot)
    for path in (catalog.database, catalog.parquet("memories"), catalog.parquet("relationships"), catalog.dashboard, catalog.reports_dir / "latest-run.md"):
        assert path.exists(), path
    con = duckdb.connect(str(catalog.database), read_only=True)
    try:
        counts = dict(con.execute("select 'memories', count(*) from memories union all select 'rejects', count(*) from rejects").fetchall())
        assert counts == {"memories": 499, "rejects": 8}
        run = con.execute("select status, mode, memories, rejects, records_read from runs").fetchall()
        assert run == [("published", "full", 499, 8, 507)]
        assert all(v == 0 for v in audit_failures(con).values())
        with pytest.raises(duckdb.Error):
            con.execute("insert into rejects values ('x', 'y', 'z', 'w', 'r')")
    finally:
        con.close()
    report = (catalog.reports_dir / "latest-run.md").read_text()
    assert "## Contradictions to review" in report and "## Orphan memories" in report


def test_second_run_is_incremental_and_embeds_nothing(tmp_path, cached_embeddings):
    from crosstier.flows.correlate import correlate

    config = tiny_stores(tmp_path / "stores")
    first = correlate(config_path=str(config))
    second = correlate(config_path=str(config))
    assert (first["mode"], second["mode"]) == ("full", "incremental")
    assert second["embedded"] == 0 and second["changed"] == 0 and second["pairs_scored"] == 0
    assert first["relationships"] == second["relationships"] > 0


def test_incremental_after_edits_equals_a_fresh_full_run(tmp_path, cached_embeddings):
    from crosstier.flows.correlate import correlate

    config = tiny_stores(tmp_path / "stores")
    correlate(config_path=str(config))
    episodes = tmp_path / "stores" / "episodes.jsonl"
    rows = [json.loads(line) for line in episodes.read_text().splitlines()]
    rows = [r for r in rows if r["id"] != "ep-deploy-2"]  # delete
    rows[0]["content"] = "Set up pgvector 0.8.0 on search_prod with an IVFFlat index"  # edit
    rows.append({"id": "ep-tabs-3", "tier": "episodic", "content": "Maya switched her editor from tabs to spaces", "timestamp": "2026-11-19T09:00:00Z", "session_id": "s-tabs"})  # add
    episodes.write_text("".join(json.dumps(r) + "\n" for r in rows))
    incremental = correlate(config_path=str(config))
    full = correlate(config_path=str(config), out=str(tmp_path / "full"), full=True)
    assert incremental["mode"] == "incremental" and 0 < incremental["changed"] < full["memories"]
    assert incremental["deleted"] == 1
    assert relationships(tmp_path / "stores" / "warehouse").equals(relationships(tmp_path / "full"))
    ids = set(relationships(tmp_path / "full").select("source_id", "target_id").to_series().to_list())
    assert "ep-deploy-2" not in ids


def test_disabled_run_exits_cleanly(tmp_path, monkeypatch):
    from crosstier.flows.correlate import correlate

    config = tiny_stores(tmp_path / "stores")
    monkeypatch.setenv("CORRELATOR_ENABLED", "false")
    assert correlate(config_path=str(config)) == {"status": "disabled"}
    assert not (tmp_path / "stores" / "warehouse" / "correlations.duckdb").exists()
    done = subprocess.run([sys.executable, "-m", "crosstier.cli", "run", "--config", str(config)], capture_output=True, text=True, env={**os.environ})
    assert done.returncode == 0 and "disabled" in done.stdout


def test_manual_links_are_merged_and_override_discovered(tmp_path, cached_embeddings):
    from crosstier.flows.correlate import correlate

    config = tiny_stores(tmp_path / "stores")
    correlate(config_path=str(config))
    catalog = Catalog(tmp_path / "stores" / "warehouse")
    before = relationships(catalog.root)
    pair = before.filter(pl.col("origin") == "discovered").row(0, named=True)
    append_record(catalog.manual_log, {"source_id": pair["target_id"], "target_id": pair["source_id"], "relationship_type": "supports", "score": 0.42})
    append_record(catalog.manual_log, {"source_id": "sem-tabs", "target_id": "ep-billing-0", "relationship_type": "references"})
    log_before = catalog.manual_log.read_bytes()
    correlate(config_path=str(config))
    after = relationships(catalog.root)
    manual = after.filter(pl.col("origin") == "manual").select("source_id", "target_id", "relationship_type", "score").rows()
    assert sorted(manual) == sorted([(pair["target_id"], pair["source_id"], "supports", 0.42), ("sem-tabs", "ep-billing-0", "references", 1.0)])
    same_pair = after.filter(
        ((pl.col("source_id") == pair["source_id"]) & (pl.col("target_id") == pair["target_id"]))
        | ((pl.col("source_id") == pair["target_id"]) & (pl.col("target_id") == pair["source_id"]))
    )
    assert same_pair.height == 1
    assert catalog.manual_log.read_bytes() == log_before  # no run rewrites the log


def test_run_report_and_tier_table_artifacts(tmp_path, cached_embeddings):
    from prefect.client.orchestration import get_client

    from crosstier.flows.correlate import correlate

    config = tiny_stores(tmp_path / "stores")
    summary = correlate(config_path=str(config))
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts()
    reports = [a for a in artifacts if a.key == "correlator-run-report" and summary["run_id"] in a.data]
    assert len(reports) == 1
    assert "Contradictions to review" in reports[0].data and "dashboard.html" in reports[0].data
    tables = [a for a in artifacts if a.key == "correlator-tier-distribution" and a.flow_run_id == reports[0].flow_run_id]
    assert tables and tables[0].type == "table" and "episodic" in str(tables[0].data)


@pytest.mark.timeout(420)
def test_ctc_run_on_a_dask_cluster_of_worker_processes_gives_the_same_result(tmp_path, cached_embeddings):
    """`ctc run --task-runner dask --dask-address tcp://...` against a real `distributed`
    cluster of two worker processes started here: the mapped tasks run on the workers and
    the published links equal a local run's."""
    from distributed import Client, LocalCluster

    config = tiny_stores(tmp_path / "stores")
    local = subprocess.run([sys.executable, "-m", "crosstier.cli", "run", "--config", str(config), "--out", str(tmp_path / "local"), "--full"],
                           capture_output=True, text=True, env={**os.environ}, timeout=300)
    assert local.returncode == 0, local.stderr[-3000:]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1") as cluster, Client(cluster) as client:
        pids = client.run(os.getpid)  # worker address -> its process id
        assert len(pids) == 2 and len(set(pids.values())) == 2 and os.getpid() not in pids.values(), pids
        done = subprocess.run(
            [sys.executable, "-m", "crosstier.cli", "run", "--config", str(config), "--out", str(tmp_path / "dask"), "--full",
             "--task-runner", "dask", "--dask-address", cluster.scheduler_address],
            capture_output=True, text=True, env={**os.environ}, timeout=360,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        ran = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
        per_worker = client.run(lambda dask_worker: len(dask_worker.state.log))
    assert ran, "no task ran on the cluster"
    assert all(n > 0 for n in per_worker.values()), per_worker  # both worker processes took part
    assert relationships(tmp_path / "dask").equals(relationships(tmp_path / "local"))


def test_ctc_run_prints_summary_and_paths(tmp_path, shared_embedding_cache):
    config = tiny_stores(tmp_path / "stores")
    env = {**os.environ, "EMBED_CACHE_DIR": str(shared_embedding_cache)}
    done = subprocess.run([sys.executable, "-m", "crosstier.cli", "run", "--config", str(config), "--out", str(tmp_path / "wh")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "memories: episodic 16, semantic 6, procedural 0 (total 22)" in done.stdout
    assert f"database: {tmp_path / 'wh' / 'correlations.duckdb'}" in done.stdout
    # the flow's memory high-water mark after each stage: every stage timed, never falling
    seconds = next(line for line in done.stdout.splitlines() if line.startswith("seconds: "))
    peaks_line = next(line for line in done.stdout.splitlines() if line.startswith("peak memory MiB after each stage: "))
    peaks = [part.rsplit(" ", 1) for part in peaks_line.removeprefix("peak memory MiB after each stage: ").split(", ")]
    assert [stage for stage, _ in peaks] == [part.rsplit(" ", 1)[0] for part in seconds.removeprefix("seconds: ").rpartition(" (total ")[0].split(", ")]
    mib = [float(value) for _, value in peaks]
    assert mib == sorted(mib) and 50 < mib[0] < 64 * 1024, mib
    bad = tmp_path / "bad.toml"
    bad.write_text('[[stores]]\nname = "x"\nkind = "csv"\npath = "x.csv"\n')
    failed = subprocess.run([sys.executable, "-m", "crosstier.cli", "run", "--config", str(bad)], capture_output=True, text=True, env=env)
    assert failed.returncode == 2 and "stores[0] (x).kind: unknown store kind 'csv'" in failed.stderr


@pytest.mark.timeout(240)
def test_serve_fires_a_scheduled_run_on_the_server_prefect_api_url_names(tmp_path, shared_embedding_cache, prefect_api):
    """With PREFECT_API_URL set (the suite's server), `ctc serve` registers there and starts
    no server of its own; the cron test below covers the local server it starts otherwise."""
    config = tiny_stores(tmp_path / "stores")
    out = tmp_path / "wh"
    env = {**os.environ, "EMBED_CACHE_DIR": str(shared_embedding_cache), "PREFECT_API_URL": prefect_api}
    log = open(tmp_path / "serve.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "crosstier.cli", "serve", "--config", str(config), "--out", str(out), "--interval", "5"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline:
            runs = out / "runs.jsonl"
            if runs.exists() and '"status": "published"' in runs.read_text():
                break
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            time.sleep(1)
        else:
            pytest.fail("no scheduled run published: " + (tmp_path / "serve.log").read_text()[-3000:])
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
        log.close()
    assert Catalog(out).database.exists()
    assert "started a local Prefect server" not in (tmp_path / "serve.log").read_text()
    assert not (out / ".prefect").exists()


@pytest.mark.timeout(240)
def test_serve_cron_registers_the_deployment_with_its_schedule_on_a_local_server(tmp_path):
    config = tiny_stores(tmp_path / "stores")
    env = {**os.environ}
    env.pop("PREFECT_API_URL", None)
    log_path = tmp_path / "serve.log"
    log = open(log_path, "wb")
    server = subprocess.Popen([sys.executable, "-m", "crosstier.cli", "serve", "--config", str(config), "--out", str(tmp_path / "wh"), "--cron", "*/30 * * * *", "--name", "cron-test"],
                              env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deployment, deadline = None, time.monotonic() + 200
        while deployment is None and time.monotonic() < deadline:
            assert server.poll() is None, log_path.read_text()[-3000:]
            text = log_path.read_text()
            if "started a local Prefect server at " in text:
                url = text.split("started a local Prefect server at ", 1)[1].split()[0]
                request = urllib.request.Request(url.rstrip("/") + "/deployments/filter", data=b"{}", headers={"Content-Type": "application/json"})
                try:
                    found = json.loads(urllib.request.urlopen(request, timeout=5).read())
                except OSError:
                    found = []
                deployment = next((d for d in found if d["name"] == "cron-test"), None)
            time.sleep(1)
        assert deployment is not None, "no deployment registered: " + log_path.read_text()[-3000:]
        assert [s["schedule"].get("cron") for s in deployment["schedules"]] == ["*/30 * * * *"], deployment["schedules"]
        assert deployment["parameters"]["out"] == str(tmp_path / "wh")
    finally:
        os.killpg(server.pid, 15)
        rc = server.wait(timeout=60)
        log.close()
    assert rc in (0, -15, 130, 143), (rc, log_path.read_text()[-2000:])
    assert not any(_alive(p) for p in _children(server.pid)), "the local Prefect server outlived ctc serve"


def _children(pid: int) -> set[int]:
    """Process ids whose parent is pid (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("signum", [15, 9])
def test_a_run_ended_by_a_signal_leaves_no_prefect_server_behind(tmp_path, shared_embedding_cache, signum):
    config = tiny_stores(tmp_path / "stores")
    env = {**os.environ, "EMBED_CACHE_DIR": str(shared_embedding_cache), "CTC_FAULT_STAGE": ""}
    env.pop("PREFECT_API_URL", None)
    log = open(tmp_path / "run.log", "wb")
    run = subprocess.Popen([sys.executable, "-m", "crosstier.cli", "run", "--config", str(config)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    servers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while not servers and time.monotonic() < deadline and run.poll() is None:
            servers = {p for p in _children(run.pid) if "uvicorn" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")}
            time.sleep(0.2)
        assert servers, "the run started no temporary Prefect server: " + (tmp_path / "run.log").read_text()[-2000:]
        os.kill(run.pid, signum)
        run.wait(timeout=60)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in servers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in servers), "the Prefect server outlived its run"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, 9)
        for pid in servers:  # orphans by now, when the test failed
            if _alive(pid):
                os.kill(pid, 9)
        log.close()


def test_mapped_tasks_take_and_return_partition_paths_and_no_run_leaves_them_behind(tmp_path, cached_embeddings):
    """Extract and score tasks read and write partitions by path (what a Dask worker gets
    and returns), equal to calling the transforms on frames; a run removes its partitions
    and those of a run that died."""
    import numpy as np
    from prefect import flow

    from crosstier.core.config import load_settings
    from crosstier.flows.correlate import LINK_KEY, correlate, extract_task, score_task
    from crosstier.transforms import partitions
    from crosstier.transforms.link import links
    from crosstier.transforms.link.terms import with_terms
    from crosstier.transforms.stores.extract import extract_store

    config = tiny_stores(tmp_path / "stores")
    settings = load_settings(str(config))
    store = next(s for s in settings.stores if s.name == "episodes")
    direct = extract_store(store, settings.max_content_bytes)
    memories = with_terms(direct.memories.drop("_raw"))
    vectors = np.random.default_rng(3).normal(size=(memories.height, 384)).astype(np.float32)
    folder = tmp_path / "work" / "score" / "000000"
    partitions.write_frame(memories, folder / "memories.parquet")
    partitions.write_matrix(vectors, folder / "vectors.npy")

    @flow
    def mapped():
        return extract_task(store, settings.max_content_bytes, tmp_path / "work" / "extract" / "0000"), score_task("default", folder, settings.scoring, None)

    part, scored = mapped()
    assert isinstance(part, partitions.StorePart) and part.memories.exists() and part.rows == direct.memories.height
    assert part.read().memories.equals(direct.memories) and part.read().rejects.equals(direct.rejects)
    expected, expected_pairs = links.scored_links_with_count(memories, vectors, settings.scoring)
    assert scored.links == folder / "links.parquet" and scored.pairs == expected_pairs and scored.rows == expected.height
    assert partitions.read_frame(scored.links).equals(expected.sort(LINK_KEY))  # sorted by the link key
    # a full run's task caps its namespace: what the cap over its frame keeps
    capped = links.capped_links(expected, settings.scoring.max_links_per_memory, memories, tau_days=settings.scoring.tau_days)
    assert scored.capped == folder / "capped.parquet" and partitions.read_frame(scored.capped).equals(capped)
    assert not list((tmp_path / "work").rglob("*.tmp"))  # written by rename: no half partition left

    dead = settings.output_dir / "work" / "20260101T000000-dead" / "score" / "000000"
    dead.mkdir(parents=True)
    (dead / "memories.parquet").write_bytes(b"left by a killed run")
    assert correlate(config_path=str(config))["status"] == "published"
    assert not list((settings.output_dir / "work").rglob("*")), "partitions outlived their run"


def test_mapped_tasks_run_a_bounded_number_at_once():
    """Unbounded, Prefect ran every namespace's score task at once (a thread each): 100
    namespaces peaked at 4.4 GiB and load 9 on 2 cores. One per core (at least 4), or Prefect's setting."""
    from prefect.settings import PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS, temporary_settings
    from prefect.task_runners import ThreadPoolTaskRunner

    from crosstier.flows.correlate import correlate, local_task_threads

    assert isinstance(correlate.task_runner, ThreadPoolTaskRunner)
    assert correlate.task_runner._max_workers == local_task_threads() == max(4, os.cpu_count() or 4)
    with temporary_settings({PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS: 3}):
        assert local_task_threads() == 3
