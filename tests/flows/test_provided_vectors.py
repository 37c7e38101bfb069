"""A provided vector that is fine as a Python float but not as the float32 it is stored as
makes its record a reject, with its reason; the run goes on and publishes the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb

DIM = 384  # all-MiniLM-L6-v2


def _unit(i: int) -> list[float]:
    vector = [0.0] * DIM
    vector[i] = 1.0
    return vector


def test_ctc_run_rejects_over_range_vectors_and_publishes_the_good_record(tmp_path, shared_embedding_cache):
    records = [
        {"id": "good", "tier": "semantic", "content": "billing-api runs on Python 3.12", "embedding": _unit(0)},
        {"id": "too-big", "tier": "semantic", "content": "a value past float32", "embedding": [3.5e38] + [0.0] * (DIM - 1)},
        {"id": "norm-overflows", "tier": "semantic", "content": "every value fits, the length does not", "embedding": [1e20] * DIM},
    ]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "c.toml").write_text('[output]\ndir = "out"\n\n[[stores]]\nname = "vectors"\nkind = "jsonl"\npath = "m.jsonl"\n')
    env = {**os.environ, "EMBED_CACHE_DIR": str(shared_embedding_cache), "PREFECT_LOGGING_LEVEL": "WARNING"}
    done = subprocess.run([sys.executable, "-m", "crosstier.cli", "run", "--config", str(tmp_path / "c.toml")], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rejects: 2 of 3 records read" in done.stdout, done.stdout
    con = duckdb.connect(str(tmp_path / "out" / "correlations.duckdb"), read_only=True)
    try:
        assert con.execute("select id from memories").fetchall() == [("good",)]
        rejects = dict(con.execute("select location, reason from rejects order by location").fetchall())
        status = con.execute("select status from runs").fetchall()
    finally:
        con.close()
    assert rejects == {
        "m.jsonl:2": "field 'embedding' value 3.5e+38 at index 0 overflows float32 (max 3.403e+38)",
        "m.jsonl:3": "field 'embedding' has a length (norm) that overflows float32: its values are too large to normalise",
    }, rejects
    assert status == [("published",)]


def test_an_incremental_run_after_a_store_re_embeds_a_memory_equals_a_full_run(tmp_path, monkeypatch, shared_embedding_cache):
    """The text is the same, the provided vector is not: the memory's links must move with it
    (its fingerprint covers its text only)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from live_helpers import config_file, memory, view_rows, write_lines

    from crosstier.flows.correlate import correlate

    monkeypatch.setenv("EMBED_CACHE_DIR", str(shared_embedding_cache))
    store = tmp_path / "notes.jsonl"
    records = [memory(i) for i in range(12)]
    write_lines(store, records, "w")
    config = str(config_file(tmp_path, store, max_links=3))
    correlate(config_path=config)
    before = view_rows(tmp_path / "warehouse")
    records[0]["embedding"] = _unit(1)  # m000 leaves its topic (0) for topic 1's direction
    write_lines(store, records, "w")
    summary = correlate(config_path=config)
    incremental = view_rows(tmp_path / "warehouse")
    correlate(config_path=config, full=True)
    assert incremental == view_rows(tmp_path / "warehouse")
    assert incremental != before and summary["changed"] == 1  # incremental, and only the moved memory
