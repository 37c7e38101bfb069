"""A term that becomes common in its namespace, or stops being one, weighs otherwise in every
pair of its holders (transforms/link/namespace_terms.py): an incremental run and the watcher
score those pairs again and publish what a full run does."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from live_helpers import NAMES, config_file, memory, view_rows, write_lines

pytest.importorskip("prefect")

from crosstier.flows.correlate import correlate  # noqa: E402
from crosstier.transforms.link import namespace_terms  # noqa: E402

from test_live import Live, batch_rows  # noqa: E402  (the watcher driven by hand)


def holder(i: int) -> dict:
    """Memory i naming the agent's project (zorblax) and a person: two memories of a topic
    (their vectors close) share zorblax alone, or zorblax and the person."""
    return memory(i, text=f"{NAMES[i % len(NAMES)]} wrote zorblax")


def stored_links(out: Path) -> pl.DataFrame:
    """The published snapshot's stored links (what the next incremental run keeps), without the run's id."""
    return pl.read_parquet(out / "current" / "scored_links.parquet").drop("run_id", strict=False)


def test_a_term_turning_common_or_rare_rescores_its_holders_pairs_in_incremental_and_live_runs(tmp_path):
    least = namespace_terms.COMMON_LEAST
    records = [holder(i) for i in range(least - 1)] + [memory(i) for i in range(least - 1, least + 5)]
    store = tmp_path / "notes.jsonl"
    write_lines(store, records, "w")
    config = config_file(tmp_path, store, max_links=2)
    correlate(config_path=str(config))  # the watcher's warehouse
    live = Live(config)
    incremental = tmp_path / "incremental"
    correlate(config_path=str(config), out=str(incremental))
    rare = view_rows(incremental)

    # one more holder: zorblax is in COMMON_LEAST memories now, common in the namespace
    write_lines(store, [holder(100)])
    live.step()
    assert correlate(config_path=str(config), out=str(incremental))["changed"] == 1
    common = batch_rows(config, tmp_path / "full1")
    assert view_rows(incremental) == common and view_rows(live.settings.output_dir) == common
    # and the links it keeps for the next run are a full run's: the same stored links, those out of the cap's reach left out
    assert stored_links(incremental).equals(stored_links(tmp_path / "full1"))
    old_pairs = {r[:3]: r for r in rare}
    reweighed = [r for r in common if "m100" not in r[:2] and r[:3] in old_pairs and r[5] < old_pairs[r[:3]][5]]
    assert reweighed, "links between the old holders should lose co_occurrence when zorblax turns common"

    # two holders gone: zorblax is rare again
    rewritten = tmp_path / "notes.jsonl.tmp"
    write_lines(rewritten, records[2:] + [holder(100)], "w")
    os.replace(rewritten, store)
    live.step()
    assert correlate(config_path=str(config), out=str(incremental))["deleted"] == 2
    again = batch_rows(config, tmp_path / "full2")
    assert view_rows(incremental) == again and view_rows(live.settings.output_dir) == again
    assert stored_links(incremental).equals(stored_links(tmp_path / "full2"))
    back = {r[:3]: r for r in again}
    assert any(r[:3] in back and back[r[:3]][5] > r[5] for r in reweighed)
