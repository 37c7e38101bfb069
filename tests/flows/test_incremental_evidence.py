"""An incremental run takes each memory's classifier evidence from the last snapshot where the
memory's inputs are the same, makes it only for the others, and publishes what a full run does;
a snapshot without that evidence (the watcher's, or one from before) only costs its making."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from live_helpers import config_file, memory, view_rows, write_lines  # noqa: E402

pytest.importorskip("prefect")

import crosstier.transforms.link.features as features  # noqa: E402
from crosstier.core.catalog import Catalog  # noqa: E402
from crosstier.flows.correlate import correlate  # noqa: E402


def _evidence_file(out: Path) -> Path:
    files = Catalog(out).current_snapshot()
    return files.parquet("memory_evidence")


def test_an_incremental_run_makes_evidence_only_for_the_memories_that_need_it(tmp_path, monkeypatch):
    store = tmp_path / "notes.jsonl"
    records = [memory(i) | {"namespace": "team-a" if i % 2 else "team-b"} for i in range(12)]
    records[3]["content"] += " (details in m099)"
    write_lines(store, records, "w")
    config = config_file(tmp_path, store, max_links=3)
    made: list[str] = []
    evidence_rows = features._evidence_rows

    def counted(memory_ids, *args):
        made.extend(memory_ids)
        return evidence_rows(memory_ids, *args)

    monkeypatch.setattr(features, "_evidence_rows", counted)
    assert correlate(config_path=str(config))["status"] == "published"
    assert sorted(made) == sorted(r["id"] for r in records)  # a first run makes every memory's
    first = pl.read_parquet(_evidence_file(tmp_path / "warehouse"))
    assert sorted(first.get_column("id").to_list()) == sorted(r["id"] for r in records)
    assert first.select("namespace", "id").equals(first.select("namespace", "id").sort("namespace", "id"))

    made.clear()
    edited = records[4]["id"]  # team-b
    records[4] = records[4] | {"content": records[4]["content"] + " rollout"}
    came = memory(99, topic=2, text="an unrelated note about lunch") | {"id": "m099", "namespace": "team-a"}
    write_lines(store, records + [came], "w")
    summary = correlate(config_path=str(config))
    assert summary["changed"] == 3  # the edit, the new memory and the one naming it (records[3], team-a)
    assert sorted(made) == sorted([edited, "m099", records[3]["id"]])
    incremental = view_rows(tmp_path / "warehouse")
    assert correlate(config_path=str(config), out=str(tmp_path / "full"), full=True)["status"] == "published"
    assert incremental == view_rows(tmp_path / "full")
    kept = pl.read_parquet(_evidence_file(tmp_path / "warehouse"))
    assert kept.equals(pl.read_parquet(_evidence_file(tmp_path / "full")))

    # a snapshot without the evidence: the next run makes it again, and publishes the same
    _evidence_file(tmp_path / "warehouse").unlink()
    made.clear()
    write_lines(store, records[:-1] + [came], "w")  # the last memory (team-a) deleted
    summary = correlate(config_path=str(config))
    assert summary["deleted"] == 1 and summary["changed"] == 0
    assert sorted(set(made)) == sorted(sorted(r["id"] for r in records[:-1] if r["namespace"] == "team-a") + ["m099"])
    # only the namespace scored has evidence now: team-b's is made again when it is next scored
    team_a = sorted(r["id"] for r in records[:-1] if r["namespace"] == "team-a") + ["m099"]
    assert pl.read_parquet(_evidence_file(tmp_path / "warehouse")).get_column("id").to_list() == sorted(team_a)
    assert correlate(config_path=str(config), out=str(tmp_path / "full2"), full=True)["status"] == "published"
    assert view_rows(tmp_path / "warehouse") == view_rows(tmp_path / "full2")

