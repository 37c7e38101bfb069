"""Incremental state: fingerprints, changed/deleted ids, links kept between untouched ends."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import polars as pl

from crosstier.transforms.link.incremental import changed_memory_ids, citing_ids, kept_links, memory_fingerprints, moved_vector_ids
from crosstier.transforms.schema import MEMORY_SCHEMA, RELATIONSHIP_SCHEMA


def memories(rows: list[dict]) -> pl.DataFrame:
    base = {"tier": "episodic", "namespace": "default", "entities": [], "refs": [], "timestamp": datetime(2026, 11, 2, tzinfo=timezone.utc)}
    return pl.DataFrame([{**base, **r} for r in rows], schema=MEMORY_SCHEMA)


def texts(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select("id", pl.col("content_hash").alias("text_hash"))


def test_fingerprint_changes_with_what_links_depend_on_only():
    before = memories([{"id": "a", "content_hash": "h1"}, {"id": "b", "content_hash": "h2"}, {"id": "c", "content_hash": "h3"}])
    after = memories(
        [
            {"id": "a", "content_hash": "h1", "readers": ["alice"], "metadata": '{"x": 1}'},  # no effect on links
            {"id": "b", "content_hash": "h2", "refs": ["a"]},  # edited refs
            {"id": "d", "content_hash": "h4"},  # new
        ]
    )
    changed, deleted = changed_memory_ids(memory_fingerprints(after, texts(after)), memory_fingerprints(before, texts(before)))
    assert changed == {"b", "d"}
    assert deleted == {"c"}


def test_fingerprints_are_deterministic():
    frame = memories([{"id": "a", "content_hash": "h1"}])
    assert memory_fingerprints(frame, texts(frame)).equals(memory_fingerprints(frame, texts(frame)))


def test_kept_links_drop_any_touched_end():
    links = pl.DataFrame(
        [{"source_id": s, "target_id": t} for s, t in [("a", "b"), ("b", "c"), ("c", "d")]], schema=RELATIONSHIP_SCHEMA
    )
    assert kept_links(links, {"b"}).select("source_id", "target_id").rows() == [("c", "d")]


def test_moved_vectors_are_the_ones_not_bit_for_bit_as_published():
    published = pl.DataFrame({"id": ["a", "b", "c", "d"], "embedding": [[1.0, 0.0], [0.0, 1.0], [0.6, 0.8], [1.0]]},
                             schema={"id": pl.String, "embedding": pl.List(pl.Float32)})
    now = np.array([[1.0, 0.0], [0.0, 1.0 - 1e-7], [0.8, 0.6], [1.0, 0.0], [0.5, 0.5]], dtype=np.float32)
    ids = pl.Series(["a", "b", "c", "d", "new"])
    # a: the same; b: moved in its last bit; c: re-embedded; d: published with another length; new: not published
    assert moved_vector_ids(ids, now, published) == {"b", "c", "d"}
    assert moved_vector_ids(ids.head(0), now[:0], published) == set()


def test_citing_ids_are_the_memories_whose_text_names_an_id_that_came_or_went():
    frame = memories([
        {"id": "a", "content_hash": "1", "content": "see m099."},  # a token, punctuation stripped
        {"id": "b", "content_hash": "2", "content": "see m0990 and xm099"},  # not the id: other tokens
        {"id": "m099", "content_hash": "3", "content": "I am m099"},  # itself
        {"id": "c", "content_hash": "4", "content": "Run the Rotate-API-Keys skill weekly"},
        {"id": "d", "content_hash": "5", "content": "nothing named here"},
    ])
    assert citing_ids(frame, {"m099", "ws:skill/rotate-api-keys"}) == {"a", "c"}
    assert citing_ids(frame, {"m100"}) == set() and citing_ids(frame, set()) == set()
