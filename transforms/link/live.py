"""The live path's linking step: a loaded index (memories, vectors, pre-cap links) and one
micro-batch of changed memories -> the new index and which memories' links changed.

Every score comes from the batch run's own functions (incremental fingerprints, kept
links, `links.scored_links_with_count` with focus ids, `links.capped_links`, the manual
merge), so the live view equals what a batch run over the same stores publishes. What is
new here is only the bookkeeping of which memories a micro-batch touches:

- changed: new, edited (fingerprint differs) or deleted memories; their pairs are scored again;
- affected: changed memories and every memory that had or now has a scored link with one;
  only their top-k lists can change, so only links with an end in `affected` are re-capped.
A link's fate under the cap depends on the full lists of its two ends, so the cap runs over
every scored link at an affected memory or at a neighbour of one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from crosstier.core.config import ScoringConfig
from crosstier.transforms.link import incremental, links
from crosstier.transforms.link.manual import merged_relationships
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA


@dataclass(frozen=True)
class LinkIndex:
    """What the watcher keeps loaded: memories (with terms, sorted by id), row-aligned
    vectors, texts (id, text_hash), fingerprints, links before the cap and after it."""

    memories: pl.DataFrame
    vectors: np.ndarray
    texts: pl.DataFrame
    fingerprints: pl.DataFrame
    scored: pl.DataFrame
    capped: pl.DataFrame


@dataclass(frozen=True)
class Relinked:
    """One micro-batch's result: the new index and the ids it touched."""

    index: LinkIndex
    changed: set[str]
    deleted: set[str]
    affected: set[str]
    pairs_scored: int


def _ids(frame: pl.DataFrame, columns: tuple[str, ...] = ("source_id", "target_id")) -> set[str]:
    return set().union(*(frame.get_column(c).to_list() for c in columns)) if frame.height else set()


def touching(frame: pl.DataFrame, ids: set[str]) -> pl.DataFrame:
    """Rows of a links frame with an end in ids."""
    wanted = pl.Series(sorted(ids), dtype=pl.String).implode()
    return frame.filter(pl.col("source_id").is_in(wanted) | pl.col("target_id").is_in(wanted))


def focused_links(memories: pl.DataFrame, vectors: np.ndarray, scoring: ScoringConfig, focus: set[str]) -> tuple[pl.DataFrame, int]:
    """Scored links with an end in focus, namespace by namespace (links never cross one),
    by the batch run's scoring with focus ids."""
    frames, pairs = [], 0
    indexed = memories.with_row_index("_row")
    for (_namespace,), group in indexed.group_by("namespace", maintain_order=True):
        focus_ids = sorted(focus.intersection(group.get_column("id").to_list()))
        if not focus_ids:
            continue
        rows = group.get_column("_row").to_numpy()
        scored, count = links.scored_links_with_count(group.drop("_row"), vectors[rows], scoring, focus_ids=focus_ids)
        frames.append(scored)
        pairs += count
    return (pl.concat(frames) if frames else links.empty_scored_links()), pairs


def recapped(previous_capped: pl.DataFrame, scored: pl.DataFrame, affected: set[str], max_links: int) -> pl.DataFrame:
    """The capped links after a change: rows between two unaffected memories as they were,
    rows at an affected memory capped again over every link of both their ends."""
    if not affected:
        return previous_capped
    near = touching(scored, affected)
    neighbourhood = affected | _ids(near)
    fresh = touching(links.capped_links(touching(scored, neighbourhood), max_links), affected)
    wanted = pl.Series(sorted(affected), dtype=pl.String).implode()
    kept = previous_capped.filter(~pl.col("source_id").is_in(wanted) & ~pl.col("target_id").is_in(wanted))
    return pl.concat([kept, fresh.cast(RELATIONSHIP_SCHEMA)]).sort("source_id", "target_id", "relationship_type")


def relinked(
    index: LinkIndex,
    memories: pl.DataFrame,
    vectors: np.ndarray,
    texts: pl.DataFrame,
    scoring: ScoringConfig,
    fingerprints: pl.DataFrame | None = None,
) -> Relinked:
    """Link one micro-batch: `memories` (with terms, sorted by id), row-aligned `vectors` and
    `texts` (id, text_hash) are the whole current set; only what changed is scored again.
    `fingerprints` of the current set may be passed in when the caller kept them up to date."""
    if fingerprints is None:
        fingerprints = incremental.memory_fingerprints(memories, texts)
    changed, deleted = incremental.changed_memory_ids(fingerprints, index.fingerprints)
    touched = changed | deleted
    if not touched:
        return Relinked(LinkIndex(memories, vectors, texts, fingerprints, index.scored, index.capped), set(), set(), set(), 0)
    before = touching(index.scored, touched)
    kept = incremental.kept_links(index.scored, touched)
    fresh, pairs = focused_links(memories, vectors, scoring, changed)
    # kept has no end in touched and fresh has one in every row: the two never overlap.
    scored = pl.concat([kept, fresh.cast(RELATIONSHIP_SCHEMA)]).sort("source_id", "target_id", "relationship_type")
    affected = touched | _ids(before) | _ids(fresh)
    capped = recapped(index.capped, scored, affected, scoring.max_links_per_memory)
    return Relinked(LinkIndex(memories, vectors, texts, fingerprints, scored, capped), changed, deleted, affected, pairs)


def published_rows(capped: pl.DataFrame, manual: pl.DataFrame, ids: set[str], run_id: str) -> pl.DataFrame:
    """The published relationships (discovered after the cap, merged with manual links)
    that have an end in ids: every row a reader sees for those memories."""
    merged = merged_relationships(touching(capped, ids), touching(manual, ids))
    return merged.with_columns(run_id=pl.lit(run_id))


def changed_manual_ids(previous: pl.DataFrame, current: pl.DataFrame) -> set[str]:
    """Ends of manual links that appeared, went or changed between two manual frames."""
    columns = [c for c in RELATIONSHIP_SCHEMA.names() if c != "run_id"]
    gone = previous.select(columns).join(current.select(columns), on=columns, how="anti", nulls_equal=True)
    came = current.select(columns).join(previous.select(columns), on=columns, how="anti", nulls_equal=True)
    return _ids(gone) | _ids(came)


def memory_row_hashes(memories: pl.DataFrame) -> pl.DataFrame:
    """id and a hash of every published column of the row: a reader-visible change
    (readers, metadata) republishes a memory even when its links stay."""
    published = memories.drop([c for c in ("embedding", "_raw") if c in memories.columns])
    return pl.DataFrame({"id": published.get_column("id"), "row_hash": published.hash_rows(seed=7)})


def upserted_ids(previous: pl.DataFrame, current: pl.DataFrame) -> set[str]:
    """Ids whose published memory row is new or differs (frames from memory_row_hashes)."""
    joined = current.join(previous, on="id", how="left", suffix="_previous")
    return set(joined.filter(pl.col("row_hash_previous").is_null() | (pl.col("row_hash") != pl.col("row_hash_previous"))).get_column("id").to_list())
