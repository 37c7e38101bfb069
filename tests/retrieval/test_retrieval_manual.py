"""add_relationship: validation against the snapshot, the manual log record, concurrency-safe appends."""

from __future__ import annotations

import json
import math

import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.manual_log import read_records
from crosstier.retrieval import add_relationship
from crosstier.retrieval.errors import InvalidArgumentError, UnknownMemoryError
from crosstier.retrieval.testing import publish_tiny


@pytest.fixture
def out(tmp_path):
    return publish_tiny(tmp_path)


def test_appends_and_returns_the_stored_record(out):
    record = add_relationship("ep2", "proc1", "references", score=0.85, metadata={"discoveredBy": "auto", "context": "TypeScript"}, out=out)
    assert {k: record[k] for k in ("source_id", "target_id", "relationship_type", "score", "metadata", "namespace")} == {
        "source_id": "ep2", "target_id": "proc1", "relationship_type": "references", "score": 0.85,
        "metadata": {"context": "TypeScript", "discoveredBy": "auto"}, "namespace": "default",
    }
    records, bad = read_records(Catalog(out).manual_log)
    assert bad == [] and len(records) == 1
    assert {k: v for k, v in records[0].items() if k != "_line"} == record


def test_default_score_and_contradicts_order(out):
    record = add_relationship("sem2", "sem1", "contradicts", out=out)
    assert (record["source_id"], record["target_id"], record["score"]) == ("sem1", "sem2", None)


def test_the_log_is_what_the_flow_merges(out):
    from crosstier.transforms.link.manual import manual_relationships
    from crosstier.transforms.publish.snapshot import read_snapshot_table

    add_relationship("ep2", "proc1", "references", score=0.85, out=out)
    records, _ = read_records(Catalog(out).manual_log)
    frame, skipped = manual_relationships(records, read_snapshot_table(Catalog(out), "memories"), "r2")
    assert skipped == [] and frame.select("source_id", "target_id", "score", "origin").rows() == [("ep2", "proc1", 0.85, "manual")]


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (("ep1", "nope", "references"), {}, UnknownMemoryError, "nope"),
        (("nope", "ep1", "references"), {}, UnknownMemoryError, "nope"),
        (("ep1", "sem1", "likes"), {}, InvalidArgumentError, "unknown relationship type 'likes'"),
        (("ep1", "ep1", "references"), {}, InvalidArgumentError, "itself"),
        (("ep1", "sem1", "references"), {"score": 1.01}, InvalidArgumentError, "score"),
        (("ep1", "sem1", "references"), {"score": -0.5}, InvalidArgumentError, "score"),
        (("ep1", "sem1", "references"), {"score": math.nan}, InvalidArgumentError, "score"),
        (("ep1", "sem1", "references"), {"score": True}, InvalidArgumentError, "score"),
        (("ep1", "sem1", "references"), {"metadata": {"when": object()}}, InvalidArgumentError, "JSON"),
        (("ep1", "sem1", "references"), {"metadata": {"x": math.inf}}, InvalidArgumentError, "JSON"),
        (("ep1", "sem1", "references"), {"metadata": ["not", "an", "object"]}, InvalidArgumentError, "metadata"),
        (("ep1", "ops1", "references"), {}, InvalidArgumentError, "namespaces"),
        (("ops1", "ops2", "references"), {"namespace": "default"}, UnknownMemoryError, "ops1"),
    ],
)
def test_validation_writes_nothing(out, args, kwargs, error, match):
    with pytest.raises(error, match=match):
        add_relationship(*args, out=out, **kwargs)
    assert not Catalog(out).manual_log.exists()


def test_bounds_are_accepted(out):
    assert add_relationship("ep1", "sem1", "references", score=0, out=out)["score"] == 0.0
    assert add_relationship("ep1", "sem1", "references", score=1, out=out)["score"] == 1.0
    assert add_relationship("ops1", "ops2", "causal", namespace="ops", out=out)["namespace"] == "ops"
    assert len(read_records(Catalog(out).manual_log)[0]) == 3
