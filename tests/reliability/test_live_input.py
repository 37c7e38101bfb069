"""Bad input appended live: the watcher's path (transforms/stores/follow.py, then
transforms/live_state.py) rejects hostile lines exactly as a batch run rejects them, and
loses nothing valid.

First property-based at the store: hostile records appended to a JSONL file in pieces cut
anywhere (mid-line, mid-character), read by offset after each piece, end with the memories,
rejects and counts the batch reader finds in the whole file. Then once end to end, in
process: a watcher state seeded over a snapshot steps over appended hostile lines, and a
reader of snapshot plus deltas sees the rejects, memories and relationships of a full
`correlate` run over the same file."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from crosstier.core.config import StoreConfig
from crosstier.transforms.stores.extract import combined_extracts, extract_store
from crosstier.transforms.stores.follow import prepared_extract, read_whole, refreshed
from reliability.hostile import BOUNDED, LIMIT, RAW_LINES, any_records, assert_accounted, assert_contract
from reliability.stats import count

DIM = 4  # provided vectors of another length are rejects, live as in the batch run
KEY = ["store", "location", "raw", "reason"]

OVER_RANGE = [
    {"id": "big", "tier": "semantic", "content": "past float32", "embedding": [3.5e38, 0.0, 0.0, 0.0]},
    {"id": "long", "tier": "semantic", "content": "norm overflows", "embedding": [1e20] * 4},
    {"id": "tiny", "tier": "semantic", "content": "zero as float32", "embedding": [1e-46, -1e-46, 0.0, 0.0]},
    {"id": "short", "tier": "semantic", "content": "three values", "embedding": [1.0, 0.0, 0.0]},
    {"id": "ok", "tier": "semantic", "content": "fine", "embedding": [1e18, 0.0, 0.0, 1.0]},
]
WRONG_TYPES = [
    {"id": 7, "tier": "semantic", "content": 12},
    {"id": "t", "tier": ["semantic"], "content": "a list tier"},
    {"id": "c", "tier": "episodic", "content": {"nested": "object"}},
    {"id": "r", "tier": "episodic", "content": "refs as text", "refs": "not-a-list"},
    {"id": "h", "tier": "episodic", "content": "x" * (LIMIT + 1)},
    {"id": "n", "tier": "episodic", "content": "nul\x00inside"},
    {"id": "ok", "tier": "semantic", "content": "the id again: both copies are rejects"},
]


def comparable(extract) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(memories, rejects) as readers get them: duplicate ids rejected, the micro-batch
    column dropped, in location order."""
    combined = combined_extracts([extract])
    memories = combined.memories.drop([c for c in ("_batch",) if c in combined.memories.columns]).sort("location")
    return memories, combined.rejects.select(KEY).sort(KEY, nulls_last=True)


@BOUNDED
@given(
    recs=any_records,
    raws=st.lists(st.sampled_from(RAW_LINES), max_size=3),
    cuts=st.lists(st.integers(0, 2**32), max_size=6),
    order=st.randoms(use_true_random=False),
)
@example(recs=OVER_RANGE + WRONG_TYPES, raws=list(RAW_LINES), cuts=[1, 40, 41, 500, 2**31], order=random.Random(0))
def test_hostile_lines_appended_in_pieces_end_as_the_batch_reader_reads_the_file(recs, raws, cuts, order):
    lines = [json.dumps(r).encode("utf-8") for r in recs] + raws
    order.shuffle(lines)
    data = b"\n".join(lines) + b"\n"
    points = sorted({c % (len(data) + 1) for c in cuts} | {len(data)})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.jsonl"
        store = StoreConfig(name="live-store", kind="jsonl", path=str(path))
        path.write_bytes(data[: points[0]])
        followed = read_whole(store, LIMIT, DIM, 0)
        for batch, (start, end) in enumerate(zip(points, points[1:]), start=1):
            with open(path, "ab") as handle:
                handle.write(data[start:end])  # a piece may end mid-line: that line waits for its newline
            followed = refreshed(followed, LIMIT, DIM, batch)
        assert len(followed.tails) == 1, "appends only: the file must never have been read again whole"
        batch_read = prepared_extract(extract_store(store, LIMIT), DIM, 0)
        assert_accounted(followed.extract, len(lines), store.name)  # nothing lost, nothing read twice
        assert_contract(followed.extract.memories, store.name)
        live_memories, live_rejects = comparable(followed.extract)
        batch_memories, batch_rejects = comparable(batch_read)
        assert live_rejects.equals(batch_rejects)
        assert live_memories.equals(batch_memories)


# ---------------------------------------------------------------- end to end, in process

MODEL_DIM = 384


def memory(i: int) -> dict:
    """A valid memory with a provided vector (no model time), on one of three topics."""
    rng = np.random.default_rng(i)
    vector = np.zeros(MODEL_DIM, np.float32)
    vector[i % 3] = 1.0
    vector += rng.normal(size=MODEL_DIM).astype(np.float32) * 0.03
    vector /= np.linalg.norm(vector)
    topics = ("deploy the staging proxy", "replica lag during backup", "typing rules for billing")
    return {"id": f"m{i:03d}", "tier": "episodic" if i % 2 else "semantic", "content": f"{topics[i % 3]}, note {i}",
            "timestamp": f"2024-05-01T{i % 24:02d}:00:00Z", "embedding": [round(float(x), 6) for x in vector]}


def line(record: dict) -> bytes:
    return json.dumps(record).encode("utf-8") + b"\n"


def seen(out: Path) -> dict[str, list[tuple]]:
    """What a reader of the warehouse (snapshot plus deltas) sees: rejects, memory ids, links."""
    from crosstier.retrieval.snapshot import close_all, open_snapshot

    close_all()
    snapshot = open_snapshot(out)
    try:
        rejects = snapshot.query("select store, location, raw, reason from rejects")
        ids = snapshot.query("select id from memories")
        links = snapshot.query("select source_id, target_id, relationship_type, score, reason, origin from relationships")
    finally:
        close_all()
    return {
        "rejects": sorted(tuple(r.values()) for r in rejects),
        "ids": sorted(r["id"] for r in ids),
        "links": sorted(tuple(round(v, 9) if isinstance(v, float) else v for v in r.values()) for r in links),
    }


@pytest.mark.timeout(300)
def test_hostile_lines_appended_while_watching_reach_rejects_as_in_a_batch_run(tmp_path):
    pytest.importorskip("prefect")
    from crosstier.core.catalog import Catalog
    from crosstier.core.config import load_settings
    from crosstier.flows.correlate import correlate
    from crosstier.flows.watch import published, snapshot_frames, vector_source
    from crosstier.transforms.live_state import advanced, seeded

    store = tmp_path / "notes.jsonl"
    store.write_bytes(b"".join(line(memory(i)) for i in range(6)))
    config = tmp_path / "correlator.toml"
    config.write_text(
        f'[output]\ndir = "warehouse"\n\n[extract]\nmax_content_bytes = {LIMIT}\n\n'
        f'[[stores]]\nname = "notes"\nkind = "jsonl"\npath = "{store.as_posix()}"\n\n[scoring]\nmin_correlation_score = 0.5\n',
        encoding="utf-8",
    )
    assert correlate(config_path=str(config))["status"] == "published"
    settings = load_settings(str(config))
    catalog = Catalog(settings.output_dir)
    files = catalog.current_snapshot()
    vectors_for = vector_source(settings, catalog.cache_dir)  # the model, for accepted lines that bring no vector
    step = seeded(settings, files.run_id, snapshot_frames(files), catalog.manual_log, vectors_for)
    published(files, step)
    state = step.state

    hostile = [line(r) for r in OVER_RANGE + WRONG_TYPES] + [raw + b"\n" for raw in RAW_LINES]
    hostile = [line(memory(6))] + hostile + [line(memory(0) | {"content": "m000 written twice"}), line(memory(7))]
    data = b"".join(hostile)
    cut = len(data) - len(line(memory(7))) // 2  # the last valid line arrives in two pieces
    for piece in (data[:cut], data[cut:]):
        with open(store, "ab") as handle:
            handle.write(piece)
        step = advanced(state, ["notes"], settings, catalog.manual_log, vectors_for)
        published(files, step)
        state = step.state

    live = seen(settings.output_dir)
    assert correlate(config_path=str(config), out=str(tmp_path / "batch"), full=True)["status"] == "published"
    batch = seen(tmp_path / "batch")
    assert live["rejects"] == batch["rejects"]
    assert live["ids"] == batch["ids"]
    assert live["links"] == batch["links"], (sorted(set(live["links"]) - set(batch["links"])), sorted(set(batch["links"]) - set(live["links"])))
    assert {"m001", "m006", "m007"} <= set(live["ids"])  # nothing valid lost, the line written in two pieces included
    assert "m000" not in live["ids"]  # written twice: both copies are rejects, as in the batch run
    reasons = " ".join(r[3] for r in live["rejects"])
    for expected in ("float32", "not valid JSON", "dim"):
        assert expected in reasons, (expected, reasons)
    count(inputs_tried=len(hostile))
