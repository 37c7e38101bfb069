"""An id that comes or goes changes the links of every memory whose text names it: that memory
starts or stops citing, and whether a memory cites anything decides whether cross_reference
applies to each of its pairs. Its own fields, and so its fingerprint, stay the same; an
incremental run must still publish what a full run does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from live_helpers import config_file, memory, view_rows, write_lines  # noqa: E402

pytest.importorskip("prefect")

from crosstier.flows.correlate import correlate  # noqa: E402


def full_rows(config: Path, out: Path) -> list[tuple]:
    assert correlate(config_path=str(config), out=str(out), full=True)["status"] == "published"
    return view_rows(out)


@pytest.mark.parametrize("named", ["m099", "ws:skill/rotate-api-keys"])
def test_incremental_runs_equal_full_ones_as_a_named_id_comes_and_goes(tmp_path, named):
    store = tmp_path / "notes.jsonl"
    records = [memory(i) for i in range(9)]
    records[0]["content"] += " (details in m099)" if named == "m099" else " (the rotate-api-keys skill does it)"
    write_lines(store, records, "w")
    config = config_file(tmp_path, store, max_links=3)
    correlate(config_path=str(config))
    uncited = view_rows(tmp_path / "warehouse")

    write_lines(store, [memory(99, topic=2, text="an unrelated note about lunch") | {"id": named}])
    summary = correlate(config_path=str(config))
    cited = view_rows(tmp_path / "warehouse")
    assert summary["changed"] == 2  # the new memory and the one naming it, not a full run
    assert cited == full_rows(config, tmp_path / "full1") and cited != uncited

    write_lines(store, records, "w")  # it goes again
    summary = correlate(config_path=str(config))
    assert summary["deleted"] == 1 and summary["changed"] == 1
    assert view_rows(tmp_path / "warehouse") == full_rows(config, tmp_path / "full2") == uncited
