"""The read commands end to end through `ctc` (subprocesses run from a folder without a
config file, so --out alone is enough)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.manual_log import read_records
from crosstier.retrieval.testing import publish_tiny


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return publish_tiny(tmp_path_factory.mktemp("warehouse"))


def ctc(out, *args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "crosstier.cli", *args, "--out", str(out)],
        capture_output=True, text=True, cwd=cwd or out, timeout=60,
    )


def test_correlations_json_and_text(out):
    done = ctc(out, "correlations", "ep1", "--json", "--max-results", "2")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["total_found"] == 4 and [c["target_id"] for c in result["correlations"]] == ["sem-secret", "sem1"]
    text = ctc(out, "correlations", "ep1", "--as", "alice", "--min-score", "0.8").stdout
    assert text.splitlines()[0] == "ep1 (episodic): 2 correlations"
    assert "sem1" in text and "sem-secret" not in text


def test_correlations_imports_neither_prefect_nor_torch(out):
    probe = (
        "import sys, json, time; from crosstier.cli.main import main; t = time.perf_counter(); "
        f"rc = main(['correlations', 'ep1', '--json', '--out', {str(out)!r}]); "
        "print(json.dumps({'rc': rc, 'seconds': time.perf_counter() - t, "
        "'heavy': sorted(m for m in ('prefect', 'torch', 'polars', 'sentence_transformers', 'numpy') if m in sys.modules)}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=out, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["rc"] == 0
    assert report["heavy"] == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["correlations", "nope"], "unknown memory 'nope'"),
        (["correlations", "sem-secret", "--as", "alice"], "unknown memory 'sem-secret'"),
        (["correlations", "ep1", "--type", "likes"], "unknown relationship type"),
        (["graph", "ep1", "nope"], "unknown memory 'nope'"),
        (["link", "ep1", "ep1", "references"], "itself"),
        (["link", "ep1", "sem1", "references", "--metadata", "{bad"], "--metadata"),
        (["report", "nope"], "unknown memory"),
    ],
)
def test_errors_exit_2_with_one_line(out, args, message):
    done = ctc(out, *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def test_no_snapshot_exits_2(tmp_path):
    done = ctc(tmp_path, "correlations", "ep1")
    assert done.returncode == 2 and "no snapshot" in done.stderr


def test_graph_prints_the_tree(out):
    done = ctc(out, "graph", "ep1", "--depth", "2", "--as", "alice")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ep1 — Discussed PostgreSQL pgvector integration for semantic search"
    assert lines[1] == "├── sem1 (references, 0.92) — Embeddings live in Postgres with pgvector"
    assert "sem-secret" not in done.stdout and lines[-1].endswith("edges")
    graph = json.loads(ctc(out, "graph", "ep1", "ep2", "--depth", "1", "--tier", "semantic", "--json").stdout)
    assert {n["id"] for n in graph["nodes"]} == {"ep1", "ep2", "sem1", "sem-secret"}


def test_link_appends_to_the_manual_log(tmp_path):
    out = publish_tiny(tmp_path / "w")
    done = ctc(out, "link", "ep2", "proc1", "references", "--score", "0.8", "--metadata", '{"by": "test"}', "--json")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert (record["source_id"], record["target_id"], record["score"], record["metadata"]) == ("ep2", "proc1", 0.8, {"by": "test"})
    assert len(read_records(Catalog(out).manual_log)[0]) == 1


def test_report_prints_markdown(out):
    done = ctc(out, "report", "ep1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Cross-Tier Correlation Report") and "## Recommendations" in done.stdout


def test_sql_formats(out):
    table = ctc(out, "sql", "select id, tier from memories where namespace = 'ops' order by id")
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines() == ["id    tier", "----  --------", "ops1  episodic", "ops2  semantic", "(2 rows)"]
    csv = ctc(out, "sql", "select id, tier from memories where namespace = 'ops' order by id", "--format", "csv")
    assert csv.stdout == "id,tier\nops1,episodic\nops2,semantic\n"
    rows = json.loads(ctc(out, "sql", "select count(*) as n from memories", "--json").stdout)
    assert rows == [{"n": 11}]
    alice = json.loads(ctc(out, "sql", "select count(*) as n from memories", "--json", "--as", "alice").stdout)
    assert alice == [{"n": 10}]


@pytest.mark.parametrize(
    "statement",
    [
        "delete from memories",
        "insert into relationships select * from relationships",
        "create table t as select 1",
        "drop view links_both_ways",
    ],
)
def test_sql_refuses_writes_with_duckdb_error(out, statement):
    done = ctc(out, "sql", statement)
    assert done.returncode == 2
    assert "read-only" in done.stderr
    assert json.loads(ctc(out, "sql", "select count(*) as n from memories", "--json").stdout) == [{"n": 11}]


def test_sql_syntax_error(out):
    done = ctc(out, "sql", "selec 1")
    assert done.returncode == 2 and "Parser Error" in done.stderr


def test_retrieve_and_discover_commands_are_wired(out, tmp_path):
    help_text = ctc(out, "retrieve", "--help").stdout + ctc(out, "discover", "--help").stdout
    assert "--recency-weight" in help_text and "--search-space" in help_text
    env_off = {"AUTO_DISCOVER_ENABLED": "false"}
    import os

    done = subprocess.run(
        [sys.executable, "-m", "crosstier.cli", "discover", "pgvector setup", "--tier", "episodic", "--out", str(out)],
        capture_output=True, text=True, cwd=tmp_path, timeout=60, env={**os.environ, **env_off},
    )
    assert done.returncode == 2 and "AUTO_DISCOVER_ENABLED=false" in done.stderr
