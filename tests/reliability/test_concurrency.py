"""Concurrency: readers querying continuously while runs publish see only complete snapshots
and never fail; concurrent add_relationship writers lose no link."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from crosstier.core.manual_log import read_records
from reliability.flowkit import query, write_config
from reliability.stats import count
from crosstier.retrieval.testing import LINKS, MEMORIES, publish_tiny

TESTS = Path(__file__).resolve().parents[1]
READERS, PUBLISHES, WRITERS, LINKS_PER_WRITER = 8, 3, 2, 1000


def worker(*args: str, log: Path) -> subprocess.Popen:
    """A worker process; its stderr goes to a file (a pipe nobody reads can fill and block it)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    with open(log, "w") as stderr:
        return subprocess.Popen([sys.executable, "-m", "reliability._workers", *args], env=env, cwd=TESTS.parent, stdout=subprocess.DEVNULL, stderr=stderr)


def test_readers_see_only_complete_snapshots_while_runs_publish(tmp_path):
    root = publish_tiny(tmp_path / "wh", run_id="r0")
    stop = tmp_path / "stop"
    expect = json.dumps({"memories": len(MEMORIES), "relationships": len(LINKS)})
    readers = [worker("reader", str(root), str(stop), str(tmp_path / f"reader{i}.json"), expect, log=tmp_path / f"reader{i}.log") for i in range(READERS)]
    try:
        time.sleep(1.0)  # readers are querying before the first publish
        for run in range(1, PUBLISHES + 1):
            publish_tiny(root, run_id=f"r{run}")
            time.sleep(0.3)
    finally:
        stop.touch()
        for proc in readers:
            proc.wait(timeout=120)
    results = [json.loads((tmp_path / f"reader{i}.json").read_text()) for i in range(READERS)]
    queries = sum(r["queries"] for r in results)
    count(readers=READERS, reader_queries=queries)
    assert all(proc.returncode == 0 for proc in readers), [(tmp_path / f"reader{i}.log").read_text()[-2000:] for i in range(READERS)]
    assert [r["errors"] for r in results if r["error_count"]] == []
    assert all(r["queries"] > 0 for r in results)
    # every reader was there while the snapshot changed: it saw at least two, in publish order
    assert all(len(r["snapshots"]) >= 2 for r in results), [r["snapshots"] for r in results]
    assert all(r["snapshots"] == sorted(r["snapshots"]) for r in results), [r["snapshots"] for r in results]


MANUAL_MEMORIES = 70  # 70 * 69 / 2 = 2,415 distinct pairs, enough for 2,000 distinct links


def test_concurrent_manual_link_writers_lose_nothing(tmp_path, shared_embedding_cache, monkeypatch):
    """Two writer processes append 1,000 links each (2,000 distinct unordered pairs, since a run
    keeps the latest record per pair) to a flow-published snapshot; every one is in the log,
    and every one is a manual row of the relationships table after the next run."""
    from crosstier.flows.correlate import correlate

    monkeypatch.setenv("EMBED_CACHE_DIR", str(shared_embedding_cache))
    records = [{"id": f"n{i:02d}", "tier": ("episodic", "semantic", "procedural")[i % 3], "content": f"Note {i} about subject {i * 7919 % 997}"}
               for i in range(MANUAL_MEMORIES)]
    config = write_config(tmp_path / "stores", {"notes": records})
    root = tmp_path / "wh"
    assert correlate(config_path=str(config), out=str(root), full=True)["status"] == "published"
    pairs = list(itertools.combinations([r["id"] for r in records], 2))[: WRITERS * LINKS_PER_WRITER]
    written = {}
    writers = []
    for i in range(WRITERS):
        mine = pairs[i * LINKS_PER_WRITER : (i + 1) * LINKS_PER_WRITER]
        written[f"w{i}"] = mine
        (tmp_path / f"pairs{i}.json").write_text(json.dumps(mine))
        writers.append(worker("writer", str(root), f"w{i}", str(LINKS_PER_WRITER), str(tmp_path / f"pairs{i}.json"), log=tmp_path / f"writer{i}.log"))
    for proc in writers:
        proc.wait(timeout=240)
    assert all(proc.returncode == 0 for proc in writers), [(tmp_path / f"writer{i}.log").read_text()[-2000:] for i in range(WRITERS)]
    logged, bad = read_records(root / "manual" / "relationships.jsonl")
    seen = {(r["metadata"]["writer"], r["metadata"]["n"]) for r in logged}
    assert bad == []
    assert len(logged) == len(seen) == WRITERS * LINKS_PER_WRITER

    summary = correlate(config_path=str(config), out=str(root))
    assert summary["status"] == "published"
    published = set(query(root, "select source_id, target_id from relationships where origin = 'manual' and relationship_type = 'references'"))
    expected = {tuple(p) for mine in written.values() for p in mine}
    count(inputs_tried=WRITERS * LINKS_PER_WRITER, lost_records=len(expected - published))
    assert len(expected) == WRITERS * LINKS_PER_WRITER
    assert expected - published == set(), f"{len(expected - published)} manual links missing from the relationships table"
    assert query(root, "select count(*) from relationships where origin = 'manual'") == [(WRITERS * LINKS_PER_WRITER,)]


def test_readers_never_fail_while_flow_runs_publish(tmp_path, shared_embedding_cache, monkeypatch):
    """The same readers while 3 real flow runs (extract .. publish) replace the snapshot."""
    from crosstier.flows.correlate import correlate

    monkeypatch.setenv("EMBED_CACHE_DIR", str(shared_embedding_cache))
    records = [
        {"id": f"ep{i}", "tier": "episodic", "content": f"Deployed billing-api v2.{i} with deploy.sh after the pgvector migration",
         "timestamp": f"2026-11-0{1 + i % 9}T09:00:00Z", "session_id": f"s{i % 3}"}
        for i in range(1, 13)
    ] + [{"id": "sem1", "tier": "semantic", "content": "billing-api deploys go through deploy.sh", "refs": ["ep1"]}]
    config = write_config(tmp_path / "stores", {"notes": records})
    root = tmp_path / "wh"
    first = correlate(config_path=str(config), out=str(root), full=True)
    expect = json.dumps({"memories": first["memories"], "relationships": first["relationships"]})
    stop = tmp_path / "stop"
    readers = [worker("reader", str(root), str(stop), str(tmp_path / f"reader{i}.json"), expect, log=tmp_path / f"reader{i}.log") for i in range(READERS)]
    try:
        time.sleep(1.0)
        for _ in range(PUBLISHES):
            assert correlate(config_path=str(config), out=str(root), full=True)["relationships"] == first["relationships"]
    finally:
        stop.touch()
        for proc in readers:
            proc.wait(timeout=120)
    results = [json.loads((tmp_path / f"reader{i}.json").read_text()) for i in range(READERS)]
    count(readers=READERS, reader_queries=sum(r["queries"] for r in results))
    assert all(proc.returncode == 0 for proc in readers), [(tmp_path / f"reader{i}.log").read_text()[-2000:] for i in range(READERS)]
    assert [r["errors"] for r in results if r["error_count"]] == []
    assert all(r["queries"] > 0 for r in results)
    # every reader was there while the snapshot changed: it saw at least two, in publish order
    assert all(len(r["snapshots"]) >= 2 for r in results), [r["snapshots"] for r in results]
    assert all(r["snapshots"] == sorted(r["snapshots"]) for r in results), [r["snapshots"] for r in results]
