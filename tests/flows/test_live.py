"""The live path (transforms/live_state.py + deltas + the read-side overlay) equals a batch
run: after appends, an edit and a delete, a reader of snapshot plus deltas sees exactly the
relationships a full `correlate` run over the same stores publishes."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.config import load_settings
from crosstier.retrieval.live import delta_names
from live_helpers import assert_same_vectors, config_file, memory, view_memory_ids, view_read_paths, view_rejects, view_rows, view_vectors, write_lines

pytest.importorskip("prefect")

from crosstier.flows.correlate import correlate  # noqa: E402
from crosstier.flows.watch import published, snapshot_frames  # noqa: E402
from crosstier.transforms.live_state import advanced, seeded  # noqa: E402


def no_model(texts):
    raise AssertionError(f"the model was asked for {texts.height} texts: every memory here has a provided vector")


class Live:
    """A watcher's state driven by hand: seed over the snapshot, then one step per change."""

    def __init__(self, config: Path):
        self.config = config
        self.settings = load_settings(str(config))
        self.catalog = Catalog(self.settings.output_dir)
        self.files = self.catalog.current_snapshot()
        step = seeded(self.settings, self.files.run_id, snapshot_frames(self.files), self.catalog.manual_log, no_model)
        published(self.files, step)
        self.state = step.state

    def step(self, *stores: str) -> dict:
        """One micro-batch over the named stores (the `notes` store by default)."""
        step = advanced(self.state, list(stores or ["notes"]), self.settings, self.catalog.manual_log, no_model)
        published(self.files, step)
        self.state = step.state
        return step.stats


def started(folder: Path, records: list[dict]) -> tuple[Path, Path, Live]:
    """A notes store of these records, its config (top 2 links), a batch run and a watcher's state over it."""
    store = folder / "notes.jsonl"
    write_lines(store, records, "w")
    config = config_file(folder, store, max_links=2)
    correlate(config_path=str(config))
    return store, config, Live(config)


def batch_rows(config: Path, out: Path) -> list[tuple]:
    assert correlate(config_path=str(config), out=str(out), full=True)["status"] == "published"
    return view_rows(out)


def test_live_view_equals_a_batch_run_after_appends_a_cap_push_out_an_edit_and_a_delete(tmp_path, monkeypatch):
    import crosstier.flows.watch as watch_flow

    monkeypatch.setattr(watch_flow, "CHECKPOINT_EVERY", 2)  # every other delta a checkpoint: both kinds are read
    store, config, live = started(tmp_path, [memory(i, session="s1" if i % 2 else None) for i in range(9)])
    out = live.settings.output_dir

    # appends, one a hostile line: it is skipped like the batch run skips it, nothing stops
    write_lines(store, [memory(i, session="s1" if i % 2 else None) for i in range(9, 12)])
    with open(store, "a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    stats = live.step()
    assert stats["upserted"] == 3 and stats["embedded"] == 0
    # the stages the watcher logs per micro-batch add up to the batch's seconds
    stages = [stats["read_s"], stats["embed_s"], stats["context_s"], stats["link_s"]]
    assert min(stages) >= 0 and abs(sum(stages) - stats["seconds"]) < 0.01
    before = view_rows(out)
    assert before == batch_rows(config, tmp_path / "batch1")
    assert [r[1] for r in view_rejects(out)] == ["notes.jsonl:13"]  # the hostile line, as the batch run rejects it
    assert view_rejects(out) == view_rejects(tmp_path / "batch1")

    # a memory on topic 0 written at m006's hour outranks m006's links (closer in time): one drops out of its top 2
    write_lines(store, [memory(12, topic=0, noise=0.0, hour=6)])
    live.step()
    after = view_rows(out)
    assert after == batch_rows(config, tmp_path / "batch2")
    pairs_before = {(r[0], r[1]) for r in before}
    pairs_after = {(r[0], r[1]) for r in after}
    pushed_out = {p for p in pairs_before - pairs_after if "m012" not in p}
    assert pushed_out, "the new memory should push an older link out of a memory's top 2"

    # an edit (m003 moves to topic 2) and a delete (m004), by rewriting the file through a rename
    lines = [json.loads(line) for line in store.read_text().splitlines() if line.startswith("{\"")]
    lines = [memory(3, topic=2, text="python typing rules for the billing service, edited") if r["id"] == "m003" else r for r in lines if r["id"] != "m004"]
    rewritten = tmp_path / "notes.jsonl.tmp"
    write_lines(rewritten, lines, "w")
    os.replace(rewritten, store)
    stats = live.step()
    assert stats["deleted"] == 1
    assert view_rows(out) == batch_rows(config, tmp_path / "batch3")
    assert view_memory_ids(out) == view_memory_ids(tmp_path / "batch3")
    assert "m004" not in view_memory_ids(out)
    # every other read path too: the summary views, `ctc sql --as`, retrieval's vector search
    assert view_read_paths(out) == view_read_paths(tmp_path / "batch3")
    assert_same_vectors(view_vectors(out), view_vectors(tmp_path / "batch3"))
    assert delta_names(live.files.dir) == ("000000002", "000000003")  # a reader starts at the checkpoint
    write_lines(store, [memory(13)])
    live.step()  # delta 4, a checkpoint: delta 1 goes, 2 (the checkpoint before) stays for readers
    assert delta_names(live.files.dir) == ("000000004",)
    assert sorted(p.name for p in (live.files.dir / "deltas").iterdir()) == ["000000002", "000000003", "000000004"]
    assert "m013" in view_memory_ids(out) and "m004" not in view_memory_ids(out)
    assert view_rows(out) == batch_rows(config, tmp_path / "batch4")  # read from the checkpoint
    assert view_read_paths(out) == view_read_paths(tmp_path / "batch4")
    assert_same_vectors(view_vectors(out), view_vectors(tmp_path / "batch4"))
    # an edit after the reader's vectors were read: it reads delta 5 over what it holds
    lines = [json.loads(line) for line in store.read_text().splitlines() if line.startswith("{\"")]
    write_lines(rewritten, [memory(5, topic=0, text="deploy the staging nginx proxy config, edited") if r["id"] == "m005" else r for r in lines], "w")
    os.replace(rewritten, store)
    live.step()
    assert view_rows(out) == batch_rows(config, tmp_path / "batch5")
    assert view_read_paths(out) == view_read_paths(tmp_path / "batch5")
    assert_same_vectors(view_vectors(out), view_vectors(tmp_path / "batch5"))


def test_a_manual_link_reaches_readers_without_relinking(tmp_path):
    store = tmp_path / "notes.jsonl"
    write_lines(store, [memory(i) for i in range(6)], "w")
    config = config_file(tmp_path, store, max_links=2)
    correlate(config_path=str(config))
    live = Live(config)
    manual = live.catalog.manual_log
    manual.parent.mkdir(parents=True, exist_ok=True)
    manual.write_text(json.dumps({"source_id": "m000", "target_id": "m001", "relationship_type": "supports", "score": 0.9}) + "\n")
    stats = live.step()
    assert stats["pairs_scored"] == 0
    rows = view_rows(live.settings.output_dir)
    assert ("m000", "m001", "supports") in {r[:3] for r in rows}
    batch_out = tmp_path / "batch"
    (batch_out / "manual").mkdir(parents=True)
    (batch_out / "manual" / manual.name).write_bytes(manual.read_bytes())  # the log lives in the warehouse
    assert rows == batch_rows(config, batch_out)


def test_a_memory_a_store_re_embeds_with_the_same_text_is_linked_again(tmp_path):
    """Its fingerprint covers its text, which did not change; its vector did, and with it its links."""
    records = [memory(i, session="s1" if i % 2 else None) for i in range(9)]
    store, config, live = started(tmp_path, records)
    before = view_rows(live.settings.output_dir)
    moved = [records[0] | {"embedding": memory(0, topic=1, noise=0.0)["embedding"]}, records[3] | {"embedding": memory(3, topic=0, noise=0.0)["embedding"]}]
    rewritten = tmp_path / "notes.jsonl.tmp"
    write_lines(rewritten, moved + records[1:3] + records[4:], "w")  # m003 is a session turn: its neighbours' context moves too
    os.replace(rewritten, store)
    stats = live.step()
    after = view_rows(live.settings.output_dir)
    assert after != before and stats["pairs_scored"] > 0
    assert after == batch_rows(config, tmp_path / "batch")
    assert_same_vectors(view_vectors(live.settings.output_dir), view_vectors(tmp_path / "batch"))


@pytest.mark.parametrize("named", ["m099", "ws:skill/rotate-api-keys"])
def test_a_memory_naming_an_id_that_comes_or_goes_is_linked_again(tmp_path, named):
    """It starts (stops) citing, so cross_reference applies (no longer) to all its pairs."""
    records = [memory(i) for i in range(9)]
    records[0]["content"] += " (details in m099)" if named == "m099" else " (the rotate-api-keys skill does it)"
    store, config, live = started(tmp_path, records)
    uncited = view_rows(live.settings.output_dir)
    write_lines(store, [memory(99, topic=2, text="an unrelated note about lunch") | {"id": named}])
    live.step()
    cited = view_rows(live.settings.output_dir)
    assert cited != uncited and cited == batch_rows(config, tmp_path / "batch1")
    rewritten = tmp_path / "notes.jsonl.tmp"
    write_lines(rewritten, records, "w")
    os.replace(rewritten, store)
    live.step()
    assert view_rows(live.settings.output_dir) == batch_rows(config, tmp_path / "batch2") == uncited


def test_with_auto_discover_off_memories_are_recorded_not_linked(tmp_path, monkeypatch):
    store = tmp_path / "notes.jsonl"
    write_lines(store, [memory(i) for i in range(6)], "w")
    config = config_file(tmp_path, store, max_links=3)
    correlate(config_path=str(config))
    monkeypatch.setenv("AUTO_DISCOVER_ENABLED", "false")
    live = Live(config)
    out = live.settings.output_dir
    before = view_rows(out)
    assert any("m000" in r[:2] for r in before)
    lines = [json.loads(line) for line in store.read_text().splitlines()]
    write_lines(store, [r for r in lines if r["id"] != "m000"] + [memory(6), memory(7)], "w")
    stats = live.step()
    assert stats["pairs_scored"] == 0
    assert view_memory_ids(out) == [f"m{i:03d}" for i in range(1, 8)]  # recorded: readers find them
    assert view_rows(out) == [r for r in before if "m000" not in r[:2]]  # not linked; m000's links gone
    from crosstier.retrieval.adhoc import run_sql

    assert run_sql("select count(*) from memories where id in ('m006', 'm007', 'm000')", out=out)[1] == [(2,)]  # ctc sql too
    with pytest.raises(Exception, match="disabled|external"):
        run_sql(f"select * from read_csv('{store}')", out=out)  # shut off from other files like the snapshot's sandbox


def _apply(records: list[dict], op: tuple, next_id: int) -> tuple[list[dict], bool]:
    """One operation on the store's records; returns them and whether it was a pure append."""
    kind = op[0]
    if kind == "append":
        return records + [memory(next_id, topic=op[1], noise=op[2], session="s1" if op[1] == 0 else None)], True
    if not records:
        return records, True
    at = op[1] % len(records)
    if kind == "edit":
        edited = memory(int(records[at]["id"][1:]), topic=op[2], text=f"{records[at]['content']} (edited)")
        return records[:at] + [edited] + records[at + 1:], False
    return records[:at] + records[at + 1:], False


def test_property_any_sequence_of_appends_edits_and_deletes_equals_a_batch_run(tmp_path_factory):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    op = st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.sampled_from([0.0, 0.03, 0.2])),
        st.tuples(st.just("edit"), st.integers(0, 50), st.integers(0, 2)),
        st.tuples(st.just("delete"), st.integers(0, 50)),
    )

    @hypothesis.settings(max_examples=3, derandomize=True, deadline=None, suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(st.lists(op, min_size=2, max_size=4))
    def check(ops):
        folder = tmp_path_factory.mktemp("prop")
        store = folder / "notes.jsonl"
        records = [memory(i) for i in range(6)]
        write_lines(store, records, "w")
        config = config_file(folder, store, max_links=2)
        correlate(config_path=str(config))
        live = Live(config)
        for n, operation in enumerate(ops):
            records, appended = _apply(records, operation, 100 + n)
            if appended:
                write_lines(store, records[-1:] if operation[0] == "append" else [])
            else:
                write_lines(folder / "next.jsonl", records, "w")
                os.replace(folder / "next.jsonl", store)
            live.step()
        assert view_rows(live.settings.output_dir) == batch_rows(config, folder / "batch")
        assert view_memory_ids(live.settings.output_dir) == sorted(r["id"] for r in records)
        assert view_read_paths(live.settings.output_dir) == view_read_paths(folder / "batch")
        assert_same_vectors(view_vectors(live.settings.output_dir), view_vectors(folder / "batch"))

    check()


def test_a_memory_hidden_by_a_duplicate_id_in_another_store_comes_back_when_the_duplicate_goes(tmp_path):
    """Only what a micro-batch read again is hashed and fingerprinted again; a memory that
    comes back without its own store being read (the other store's copy of its id went, so
    neither is a reject any more) must still be published and linked as a batch run does."""
    notes, extra = tmp_path / "notes.jsonl", tmp_path / "extra.jsonl"
    write_lines(notes, [memory(i) for i in range(6)], "w")
    extra.write_text("")
    config = config_file(tmp_path, notes, max_links=2)
    config.write_text(config.read_text() + f'\n[[stores]]\nname = "extra"\nkind = "jsonl"\npath = "{extra.as_posix()}"\n', encoding="utf-8")
    correlate(config_path=str(config))
    live = Live(config)
    out = live.settings.output_dir
    assert any("m002" in r[:2] for r in view_rows(out))

    write_lines(extra, [memory(2, topic=1)])  # the same id in a second store: both are rejected
    assert live.step("extra")["deleted"] == 1
    assert "m002" not in view_memory_ids(out)
    assert view_rows(out) == batch_rows(config, tmp_path / "batch1")
    extra.write_text("")
    stats = live.step("extra")  # notes, where m002 is again the only one, is not read
    assert stats["upserted"] == 1 and stats["linked"] >= 1
    assert view_rows(out) == batch_rows(config, tmp_path / "batch2")
    assert view_memory_ids(out) == view_memory_ids(tmp_path / "batch2")
    assert any("m002" in r[:2] for r in view_rows(out))


def test_a_reader_loads_only_the_deltas_published_since_it_opened(tmp_path, monkeypatch):
    """open_snapshot keeps its overlaid connection and reads just the new deltas into it
    while they follow the ones it has; what it then answers equals a connection opened
    afresh over every delta, and a new checkpoint opens it afresh."""
    import crosstier.flows.watch as watch_flow
    from crosstier.retrieval.live import overlaid_connection
    from crosstier.retrieval.snapshot import close_all, open_snapshot

    monkeypatch.setattr(watch_flow, "CHECKPOINT_EVERY", 4)  # a checkpoint within a few deltas
    store, _config, live = started(tmp_path, [memory(i, session="s1" if i % 2 else None) for i in range(6)])
    out = live.settings.output_dir
    queries = ("select * from memories order by id", "select * exclude (run_id) from relationships order by source_id, target_id, relationship_type")
    close_all()
    first = open_snapshot(out)
    kinds = []
    for n in range(6, 6 + watch_flow.CHECKPOINT_EVERY + 1):
        write_lines(store, [memory(n, session="s1" if n % 2 else None)])
        live.step()
        reader = open_snapshot(out)
        kinds.append("extended" if reader is first else "reopened")
        names = reader.identity.deltas
        fresh = overlaid_connection(live.files.database, live.files.dir, names)
        try:
            for query in queries:
                assert reader.query(query) == [dict(zip([d[0] for d in fresh.execute(query).description], row)) for row in fresh.execute(query).fetchall()]
        finally:
            fresh.close()
        assert f"m{n:03d}" in {row["id"] for row in reader.query("select id from memories")}
        first = reader
    with open(store, "a", encoding="utf-8") as handle:
        handle.write("{not json\n")  # a delta that carries the rejects: the reader opens afresh to read them
    write_lines(store, [memory(40)])
    live.step()
    assert [row["location"] for row in open_snapshot(out).query("select location from rejects")] == [f"notes.jsonl:{6 + watch_flow.CHECKPOINT_EVERY + 2}"]
    close_all()
    # the first delta is read afresh (the reader had none), then each is added; the checkpoint
    # that starts a new list of deltas opens it afresh, and the next is added to that
    assert kinds[0] == "reopened" and kinds.count("reopened") == 2 and kinds[-1] == "extended"


def test_appended_texts_without_a_vector_are_embedded_once_each_on_the_side_and_land_on_their_rows(tmp_path):
    import numpy as np
    import polars as pl

    from crosstier.transforms.embed.vectors import text_hash

    store, config, live = started(tmp_path, [memory(i) for i in range(6)])
    asked: list[list[str]] = []
    threads: list[str] = []

    def model(texts: pl.DataFrame) -> pl.DataFrame:
        asked.append(sorted(texts.get_column("text").to_list()))
        threads.append(threading.current_thread().name)
        vectors = [memory(6, text=t, seed=len(t))["embedding"] for t in texts.get_column("text").to_list()]
        return pl.DataFrame({"text_hash": texts.get_column("text_hash"), "embedding": vectors}, schema={"text_hash": pl.String, "embedding": pl.List(pl.Float32)})

    unvectored = [{k: v for k, v in memory(i, text=f"note {i} on the nginx proxy").items() if k != "embedding"} for i in (6, 7)]
    write_lines(store, [*unvectored, memory(8)])  # m008 carries its vector: never asked for
    step = advanced(live.state, ["notes"], live.settings, live.catalog.manual_log, model)
    assert asked == [["note 6 on the nginx proxy", "note 7 on the nginx proxy"]]
    assert threads[0] != threading.current_thread().name  # beside the batch's other reading, not after it
    assert step.stats["embedded"] == 2 and step.stats["provided"] == 1
    ids = step.state.index.memories.get_column("id").to_list()
    expected = model(pl.DataFrame({"text_hash": [text_hash("note 6 on the nginx proxy")], "text": ["note 6 on the nginx proxy"]})).get_column("embedding").to_list()[0]
    assert np.array_equal(step.state.content_vectors[ids.index("m006")], np.array(expected, dtype=np.float32))


def test_content_vectors_fall_back_to_the_rows_own_sources_where_the_given_ones_miss_a_row():
    """The watcher passes the sources it made for the texts it read; a row they do not name
    (never expected: every row that cannot be reused was read) is still given its own vector."""
    import numpy as np
    import polars as pl

    from crosstier.transforms.live_state import content_sources, content_vectors_of

    memories = pl.DataFrame({"id": ["a", "b", "c"], "content": ["alpha text", "beta text", "gamma text"]})
    asked: list[str] = []

    def model(texts: pl.DataFrame) -> pl.DataFrame:
        asked.extend(texts.get_column("text").to_list())
        vectors = [[float(len(t)), float(t[0] == "b"), 1.0] for t in texts.get_column("text").to_list()]
        return pl.DataFrame({"text_hash": texts.get_column("text_hash"), "embedding": vectors}, schema={"text_hash": pl.String, "embedding": pl.List(pl.Float32)})

    only_b = content_sources(memories.filter(pl.col("id") == "b"), {}, 3)
    at = np.array([0])  # "a" reused from the matrix
    out, stats = content_vectors_of(memories, {}, at, np.array([0]), np.array([[9.0, 9.0, 9.0]], np.float32), 3, model, sources=only_b)
    assert sorted(asked) == ["beta text", "gamma text"]  # "c" was not in the given sources: found by its own
    assert out.tolist() == [[9.0, 9.0, 9.0], [9.0, 1.0, 1.0], [10.0, 0.0, 1.0]]
    assert stats == {"reused": 1, "provided": 0, "embedded": 2}

    asked.clear()
    both = content_sources(memories.filter(pl.col("id") != "a"), {}, 3)
    out, stats = content_vectors_of(memories, {}, at, np.array([0]), np.array([[9.0, 9.0, 9.0]], np.float32), 3, model, sources=both)
    assert sorted(asked) == ["beta text", "gamma text"] and stats["embedded"] == 2
