"""Manual links: validated against the snapshot, latest wins, override discovered links."""

from __future__ import annotations

import multiprocessing

import polars as pl

from crosstier.core.manual_log import append_record, read_records
from crosstier.transforms.link.manual import manual_relationships, merged_relationships
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA

MEMORIES = pl.DataFrame(
    {"id": ["a", "b", "c", "z"], "tier": ["episodic", "semantic", "procedural", "semantic"], "namespace": ["default", "default", "default", "ops"]}
)


def discovered(pairs: list[tuple[str, str, str]]) -> pl.DataFrame:
    rows = [{"source_id": s, "target_id": t, "relationship_type": k, "score": 0.7, "origin": "discovered", "namespace": "default"} for s, t, k in pairs]
    return pl.DataFrame(rows, schema=RELATIONSHIP_SCHEMA)


def test_manual_records_resolve_tiers_and_latest_wins():
    records = [
        {"source_id": "a", "target_id": "b", "relationship_type": "supports", "score": 0.5, "_line": 1},
        {"source_id": "b", "target_id": "a", "relationship_type": "derives_from", "_line": 2},
    ]
    frame, skipped = manual_relationships(records, MEMORIES, "r1")
    assert frame.select("source_id", "source_tier", "target_id", "relationship_type", "score", "origin").rows() == [
        ("b", "semantic", "a", "derives_from", 1.0, "manual")
    ]
    assert skipped == []


def test_manual_records_left_out_say_why():
    records = [
        {"source_id": "a", "target_id": "gone", "relationship_type": "supports", "_line": 1},
        {"source_id": "a", "target_id": "z", "relationship_type": "supports", "_line": 2},
        {"source_id": "a", "target_id": "b", "relationship_type": "likes", "_line": 3},
    ]
    frame, skipped = manual_relationships(records, MEMORIES, "r1")
    assert frame.height == 0
    assert skipped == [
        (1, "memory not in this snapshot: gone"),
        (2, "the two memories are in different namespaces"),
        (3, "unknown relationship type 'likes'"),
    ]


def test_manual_link_overrides_discovered_on_the_same_pair():
    manual, _ = manual_relationships([{"source_id": "b", "target_id": "a", "relationship_type": "contradicts", "score": 0.9}], MEMORIES, "r1")
    merged = merged_relationships(discovered([("a", "b", "supports"), ("a", "c", "references")]), manual)
    assert merged.select("source_id", "target_id", "relationship_type", "origin").rows() == [
        ("a", "c", "references", "discovered"),
        ("b", "a", "contradicts", "manual"),
    ]


def test_a_not_related_label_removes_the_discovered_link_and_is_never_published():
    records = [
        {"source_id": "a", "target_id": "b", "relationship_type": "supports", "_line": 1},
        {"source_id": "a", "target_id": "b", "relationship_type": "not_related", "_line": 2},  # latest wins
        {"source_id": "a", "target_id": "c", "relationship_type": "not_related", "_line": 3},
    ]
    manual, skipped = manual_relationships(records, MEMORIES, "r1")
    assert skipped == []
    merged = merged_relationships(discovered([("a", "b", "supports"), ("a", "c", "references"), ("b", "c", "references")]), manual)
    assert merged.select("source_id", "target_id", "origin").rows() == [("b", "c", "discovered")]
    assert "not_related" not in merged["relationship_type"].to_list()


def _append_many(path, writer, count):
    for i in range(count):
        append_record(path, {"source_id": f"{writer}-{i}", "target_id": "x", "relationship_type": "references"})


def test_concurrent_appends_lose_nothing(tmp_path):
    path = tmp_path / "manual" / "relationships.jsonl"
    procs = [multiprocessing.Process(target=_append_many, args=(path, w, 300)) for w in ("p", "q")]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    records, bad = read_records(path)
    assert bad == []
    assert len({r["source_id"] for r in records}) == 600


def test_torn_line_is_reported_and_next_append_survives(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"source_id": "a"}\n{"source_id": "b", "tar')
    append_record(path, {"source_id": "c"})
    records, bad = read_records(path)
    assert [r["source_id"] for r in records] == ["a", "c"]
    assert [b[0] for b in bad] == [2]
