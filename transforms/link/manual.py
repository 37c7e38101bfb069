"""Manual relationships: log records -> relationship rows, merged over the discovered ones."""

from __future__ import annotations

import json

import polars as pl

from crosstier.core.vocabulary import NOT_RELATED
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA, RELATIONSHIP_TYPES

MANUAL_REASON = "Manual link"


def manual_relationships(records: list[dict], memories: pl.DataFrame, run_id: str) -> tuple[pl.DataFrame, list[tuple[int, str]]]:
    """Relationship rows for the log records whose two ends exist in one namespace; the latest
    record on a pair wins (a `not_related` label is a row of that type, for merged_relationships
    to drop the pair; it is never published). Also returns (line, why) for records left out of this publish
    (they stay in the log and come back when their memories do)."""
    # only the memories the records name: the watcher calls this per micro-batch over every memory
    named = pl.Series([i for r in records for i in (r.get("source_id"), r.get("target_id")) if isinstance(i, str)], dtype=pl.String)
    ends = memories.filter(pl.col("id").is_in(named.implode())).select("id", "tier", "namespace")
    where = {row[0]: (row[1], row[2]) for row in ends.iter_rows()}
    latest: dict[tuple[str, str], dict] = {}
    skipped: list[tuple[int, str]] = []
    for record in records:
        line = record.get("_line", 0)
        source, target, kind = record.get("source_id"), record.get("target_id"), record.get("relationship_type")
        if kind not in RELATIONSHIP_TYPES and kind != NOT_RELATED:
            skipped.append((line, f"unknown relationship type {kind!r}"))
            continue
        missing = [i for i in (source, target) if i not in where]
        if missing:
            skipped.append((line, f"memory not in this snapshot: {', '.join(map(str, missing))}"))
            continue
        if source == target:
            skipped.append((line, "self link"))
            continue
        if where[source][1] != where[target][1]:
            skipped.append((line, "the two memories are in different namespaces"))
            continue
        latest[tuple(sorted((source, target)))] = record
    rows = []
    for record in latest.values():
        source, target = record["source_id"], record["target_id"]
        if record["relationship_type"] == NOT_RELATED:
            rows.append({"source_id": source, "target_id": target, "relationship_type": NOT_RELATED, "origin": "manual"})
            continue
        score = record.get("score")
        rows.append(
            {
                "source_id": source,
                "source_tier": where[source][0],
                "target_id": target,
                "target_tier": where[target][0],
                "relationship_type": record["relationship_type"],
                "score": 1.0 if score is None else float(score),  # asserted by a person: full strength
                "reason": MANUAL_REASON,
                "origin": "manual",
                "namespace": where[source][1],
                "run_id": run_id,
                "metadata": json.dumps(record.get("metadata"), sort_keys=True) if record.get("metadata") is not None else None,
            }
        )
    frame = pl.DataFrame(rows, schema=RELATIONSHIP_SCHEMA) if rows else pl.DataFrame(schema=RELATIONSHIP_SCHEMA)
    return frame.sort("source_id", "target_id"), skipped


def merged_relationships(discovered: pl.DataFrame, manual: pl.DataFrame) -> pl.DataFrame:
    """Discovered links with every pair that has a manual record replaced by it: a manual link
    takes the pair's place, a `not_related` label leaves the pair without a link."""
    pair = pl.min_horizontal("source_id", "target_id") + pl.lit("\x1f") + pl.max_horizontal("source_id", "target_id")
    manual_pairs = manual.select(pair.alias("pair")).get_column("pair")
    # no manual record (most runs): no filtered copy of every discovered link (11M at 1M memories)
    kept = discovered.filter(~pair.is_in(manual_pairs.implode())) if manual.height else discovered
    manual = manual.filter(pl.col("relationship_type") != NOT_RELATED)
    return pl.concat([kept.select(RELATIONSHIP_SCHEMA.names()), manual.select(RELATIONSHIP_SCHEMA.names())]).sort(
        "source_id", "target_id", "relationship_type"
    )
