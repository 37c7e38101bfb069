"""The live path's linking step: a loaded index (memories, vectors, pre-cap links) and one
micro-batch of changed memories -> the new index and which memories' links changed.

Every score comes from the batch run's own functions (incremental fingerprints, kept
links, `links.scored_links_with_count` with focus ids, `links.capped_links`, the manual
merge), so the live view equals what a batch run over the same stores publishes. What is
new here is only the bookkeeping of which memories a micro-batch touches:

- changed: new, edited (fingerprint differs) or deleted memories; their pairs are scored again;
- affected: changed memories and every memory one of whose published (capped) links
  appeared, went or changed; a reader gets all of their rows again.
The cap (with copy folding and one undated origin per fact) is the batch run's, run over all
scored links once (at start) and then only around what changed (transforms/link/live_cap.py):
copy groups and origins reach past a memory's neighbours, and live_cap says how far.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

import numpy as np
import polars as pl

from crosstier.core.config import ScoringConfig
from crosstier.transforms.link import cap_reach, incremental, links, live_cap, namespace_terms
from crosstier.transforms.link.candidates import partner_pairs
from crosstier.transforms.link.link_ends import IdCodes, LinkEnds, rows_apart, rows_touching
from crosstier.transforms.link.manual import merged_relationships
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA
from crosstier.transforms.sorted_rows import with_rows_inserted


@dataclass(frozen=True)
class IndexEnds:
    """The ends of the index's scored and capped links as codes (link_ends.py), one set of codes."""

    scored: LinkEnds
    capped: LinkEnds

    @classmethod
    def of(cls, scored: pl.DataFrame, capped: pl.DataFrame) -> IndexEnds:
        codes = IdCodes()
        return cls(LinkEnds.of(scored, codes), LinkEnds.of(capped, codes))


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
    features: pl.DataFrame | None = None  # links.link_memories' columns, idx dropped, sorted by id, weights as `common_terms` has them
    copy_keys: pl.DataFrame | None = None  # live_cap.copy_keys of `memories`; None: the next cap runs over everything
    ids: frozenset[str] | None = None  # every id of `memories`, set beside `features` (a text may name any): kept, not rebuilt per batch
    ends: IndexEnds | None = None  # the ends of `scored` and `capped`; None: made when a micro-batch needs them
    # namespace_terms.common_terms of `memories`, as `features`' weights have them, and the counts
    # they come from; None: counted when the next micro-batch needs them
    common_terms: pl.DataFrame | None = None
    term_counts: namespace_terms.TermCounts | None = None


def index_ends(index: LinkIndex) -> IndexEnds:
    """The index's link ends: kept with it, else made from its frames."""
    return IndexEnds.of(index.scored, index.capped) if index.ends is None else index.ends


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


def touching(frame: pl.DataFrame, ids: set[str], ends: LinkEnds | None = None) -> pl.DataFrame:
    """Rows of a links frame with an end in ids (`ends`: the frame's, where the caller keeps them)."""
    if ends is not None:
        return rows_touching(frame, ends, ids)
    wanted = pl.Series(sorted(ids), dtype=pl.String).implode()
    return frame.filter(pl.col("source_id").is_in(wanted) | pl.col("target_id").is_in(wanted))


def _names_any(column: str, ids: list[str]) -> pl.Expr:
    """Does the list column hold any of ids?"""
    return pl.col(column).list.eval(pl.element().is_in(pl.Series(ids, dtype=pl.String).implode())).list.any().fill_null(False)


def link_features_of(memories: pl.DataFrame, ids: Set[str] | None = None, skill_ids: Iterable[str] | None = None) -> pl.DataFrame:
    """The classifier's per-memory evidence as links.link_memories makes it, without the
    row numbers (they change as memories come and go)."""
    return links.link_memories(memories, ids, skill_ids).drop("idx", "idx_in")


def current_ids(previous: frozenset[str] | None, memories: pl.DataFrame, changed: set[str], deleted: set[str]) -> frozenset[str]:
    """Every id of `memories`: the previous ids less the deleted, plus the changed (new among
    them), where a set of 100k ids built again cost ~35 ms a micro-batch."""
    if previous is None:
        return frozenset(memories.get_column("id").to_list())
    # `previous - deleted` copies every id even when nothing was deleted (~12 ms at 100k)
    return ((previous - deleted) if deleted else previous) | changed


def refreshed_features(
    previous: pl.DataFrame | None, memories: pl.DataFrame, changed: set[str], ids: Set[str] | None = None, came_and_went: tuple[set[str], set[str]] | None = None,
    common: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Evidence of every memory, sorted by id (`previous` is): recomputed for changed memories and for those whose
    `ref_ids` may name an id that came or went; the rest kept. Every column but `ref_ids`
    depends on the memory alone; `ref_ids` on which ids exist, so it is recomputed against
    all of them (the same rule as features.link_features). `ids`: every id of `memories`,
    when the caller keeps them (current_ids); `came_and_went`: the ids new and gone since
    `previous`, when the caller knows them (else two joins over every id find them);
    `common`: namespace_terms.common_terms, where the evidence made here is to weigh terms as
    the namespace does (the watcher's; kept rows are as `previous` has them)."""
    if previous is None:
        made = link_features_of(memories, ids)
        return made if common is None else namespace_terms.with_namespace_weights(made, common)
    if came_and_went is not None:
        added, removed = sorted(came_and_went[0]), sorted(came_and_went[1])
    else:
        # joins, not Python sets of every id: ~50 ms a micro-batch at 100k memories
        added = memories.select("id").join(previous.select("id"), on="id", how="anti").get_column("id").sort().to_list()
        removed = previous.select("id").join(memories.select("id"), on="id", how="anti").get_column("id").sort().to_list()
    stale = pl.col("id").is_in(pl.Series(sorted(changed) + added, dtype=pl.String).implode())
    if added:
        # a text naming a new id as a token, or a new skill by its folder name (incremental.citing_ids)
        citing = pl.Series(sorted(incremental.citing_ids(memories, added)), dtype=pl.String).implode()
        stale = stale | pl.col("id").is_in(citing) | _names_any("refs", added)
    redo = memories.filter(stale)
    # a filter, not joins: joining moved every list column of every kept row
    kept = previous.filter(~pl.col("id").is_in(pl.concat([pl.Series(removed, dtype=pl.String), redo.get_column("id")]).implode()))
    if removed:
        named_gone = kept.filter(_names_any("ref_ids", removed)).get_column("id")
        redo = pl.concat([redo, memories.filter(pl.col("id").is_in(named_gone.implode()))])
        kept = kept.filter(~pl.col("id").is_in(named_gone.implode()))
    # against every id, not only redo's: `ref_ids` and `cites` depend on which ids exist
    skill_ids = memories.get_column("id").filter(memories.get_column("id").str.contains(":skill/", literal=True)).to_list()
    fresh = link_features_of(redo, set(memories.get_column("id").to_list()) if ids is None else ids, skill_ids)
    if common is not None:
        fresh = namespace_terms.with_namespace_weights(fresh, common)
    return with_rows_inserted(kept, fresh)


def reused_evidence(previous: pl.DataFrame | None, memories: pl.DataFrame) -> pl.DataFrame:
    """link_features_of(memories), taking each memory's evidence from `previous` (an earlier
    link_features_of frame, by the same rules: the settings fingerprint names them) where the
    memory's own inputs are the same (every column link_memories reads of it), and making it
    again for the others, and for those whose `ref_ids` may name an id that came or went
    (refreshed_features). An incremental batch run made the evidence of all 100k memories of a
    namespace (~10 s) to score 50 new ones."""
    if previous is None or previous.height == 0:
        return link_features_of(memories)
    columns = [c for c in links.MEMORY_INPUT_COLUMNS if c != "id"]
    before = previous.select("id", *columns).unique("id", keep="first")
    joined = memories.select("id", *columns).join(before, on="id", how="inner", suffix="_before")
    same = pl.all_horizontal(pl.col(c).eq_missing(pl.col(f"{c}_before")) for c in columns)
    changed = set(joined.filter(~same).get_column("id").to_list())
    # the ids gone stay in `previous`: refreshed_features finds the memories that named them
    return refreshed_features(previous.sort("id"), memories, changed)


def scored_pairs(frame: pl.DataFrame, unit: np.ndarray, pairs: pl.DataFrame, scoring: ScoringConfig) -> pl.DataFrame:
    """links.classified_pairs over only the rows the pairs name, renumbered in order: a pair's
    score and type read its two rows alone, and registering every row of a 100k namespace
    with DuckDB (and exploding its terms) cost more than scoring a micro-batch's pairs."""
    ends = np.unique(np.concatenate([pairs["a_idx"].to_numpy(), pairs["b_idx"].to_numpy()]))
    sub = frame[ends].with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("idx")).with_columns(idx_in=pl.col("idx"))
    renumbered = pl.DataFrame(
        {"a_idx": np.searchsorted(ends, pairs["a_idx"].to_numpy()), "b_idx": np.searchsorted(ends, pairs["b_idx"].to_numpy())},
        schema={"a_idx": pl.Int64, "b_idx": pl.Int64},
    )
    return links.classified_pairs(sub, unit[ends], renumbered, scoring)


def focused_links(features: pl.DataFrame, units: np.ndarray, scoring: ScoringConfig, focus: set[str], keys: pl.DataFrame | None = None) -> tuple[pl.DataFrame, int]:
    """Scored links with an end in focus, by the batch run's scoring over evidence kept from
    the last micro-batch. The pairs come from the partner search (candidates.partner_pairs:
    one product of the focus vectors against every row, pairs kept within a namespace; no
    route over every memory's terms; its extra pairs cannot qualify). Every namespace at
    once: a pair's bound, score and type read its two rows alone, and copying a namespace's
    rows out of the matrix cost ~0.15 s a micro-batch at 100k. `features` and `units`
    (links.unit_rows of the vectors) are row-aligned; `keys`: live_cap.copy_keys of the same
    memories, so pairs of two copies of one text are not scored, as in the batch run. The
    features' term weights are the namespace's (refreshed_features with `common`)."""
    frame = features.with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64))
    frame = frame.with_columns(idx_in=pl.col("idx"))
    focus_mask = frame.get_column("id").is_in(pl.Series(sorted(focus), dtype=pl.String).implode())
    if not focus_mask.any():
        return links.empty_scored_links(), 0
    copy_keys = None
    if keys is not None:
        # both sorted by id over the same memories: aligned, except where a caller passes others
        same_rows = keys.get_column("id").equals(frame.get_column("id"))
        copy_keys = (keys if same_rows else frame.select("id").join(keys, on="id", how="left", maintain_order="left")).get_column("copy_key")
    candidates = partner_pairs(frame, units, scoring, focus_mask, copy_keys)
    return scored_pairs(frame, units, candidates, scoring), candidates.height


def among(frames: tuple[pl.DataFrame, ...], ids: pl.Series | None) -> tuple[pl.DataFrame, ...]:
    """Each frame's rows whose `id` is in ids (all rows when ids is None)."""
    if ids is None:
        return frames
    wanted = ids.implode()
    return tuple(frame.filter(pl.col("id").is_in(wanted)) for frame in frames)


def changed_ends(before: pl.DataFrame, after: pl.DataFrame) -> set[str]:
    """Ends of the link rows that differ between two capped frames (any column but run_id)."""
    columns = [c for c in RELATIONSHIP_SCHEMA.names() if c != "run_id"]
    a, b = before.cast(RELATIONSHIP_SCHEMA).select(columns), after.cast(RELATIONSHIP_SCHEMA).select(columns)
    gone = a.join(b, on=columns, how="anti", nulls_equal=True)
    came = b.join(a, on=columns, how="anti", nulls_equal=True)
    return _ids(gone) | _ids(came)


def capped(scored: pl.DataFrame, memories: pl.DataFrame, scoring: ScoringConfig) -> pl.DataFrame:
    """The batch run's cap over every scored link (copies folded, undated origins, top k)."""
    return links.capped_links(scored, scoring.max_links_per_memory, memories, tau_days=scoring.tau_days).sort("source_id", "target_id", "relationship_type")


def recapped(
    index: LinkIndex, scored: pl.DataFrame, memories: pl.DataFrame, keys: pl.DataFrame, touched: set[str], scoring: ScoringConfig, ends: live_cap.CapEnds,
) -> live_cap.Recapped:
    """The batch run's cap over `scored`, recomputed only around `touched` when the index
    knows the copy keys its cap was made with, else over everything (as `capped`, around
    every memory before and after). `ends`: the index's capped and scored links' and `scored`'s."""
    if index.copy_keys is None:
        after = capped(scored, memories, scoring)
        around = set(memories.get_column("id").to_list()) | _ids(index.capped)
        return live_cap.Recapped(after, around, index.capped, after, LinkEnds.of(after, ends.scored.codes))
    return live_cap.recapped_around(
        index.capped, index.scored, scored, memories, index.copy_keys, keys, touched, scoring.max_links_per_memory, scoring.tau_days, ends,
    )


def relinked(
    index: LinkIndex,
    memories: pl.DataFrame,
    vectors: np.ndarray,
    texts: pl.DataFrame,
    scoring: ScoringConfig,
    fingerprints: pl.DataFrame | None = None,
    units: np.ndarray | None = None,
    redone: pl.Series | None = None,
    moved: Set[str] = frozenset(),
) -> Relinked:
    """Link one micro-batch: `memories` (with terms, sorted by id), row-aligned `vectors` and
    `texts` (id, text_hash) are the whole current set; only what changed is scored again.
    `fingerprints` of the current set, and `units` (links.unit_rows(vectors)), may be passed
    in when the caller kept them up to date (normalising 100k rows costs ~0.1 s a batch);
    `redone`: when every other id's fingerprint is the index's, the ids whose fingerprint was
    computed again or that are gone (only those are compared: a join of 100k fingerprints
    cost ~20 ms a micro-batch); `moved`: ids whose vector is not the index's while their
    fingerprint may be (incremental.moved_vector_ids): they are linked again too."""
    if fingerprints is None:
        fingerprints = incremental.memory_fingerprints(memories, texts)
    changed, deleted = incremental.changed_memory_ids(*among((fingerprints, index.fingerprints), redone))
    changed |= set(moved)
    came = changed - (index.ids if index.ids is not None else set(index.fingerprints.get_column("id").to_list()))
    # a memory naming an id that came or went starts or stops citing: linked again, as the batch run does
    changed |= incremental.citing_ids(memories, came | deleted)
    touched = changed | deleted
    ids = current_ids(index.ids, memories, changed, deleted)
    came_and_went = None if index.ids is None else (came, deleted)
    counts, common, before = _common_terms(index, memories, touched)
    features = refreshed_features(index.features, memories, changed, ids, came_and_went, common)
    # a term that became common in its namespace, or stopped being one, weighs otherwise in
    # every pair of its holders: their weights are made again and they are scored again, as a
    # full run scores them
    reweighed = namespace_terms.holders_of_changed(before, common, memories)
    if reweighed and index.features is not None:  # rows kept from the last micro-batch (fresh ones are weighed as `common` says)
        again = pl.col("id").is_in(pl.Series(sorted(reweighed), dtype=pl.String).implode())
        features = with_rows_inserted(features.filter(~again), namespace_terms.rarity_weighted(features.filter(again), common))
    ends = index_ends(index)
    if not touched:
        return Relinked(LinkIndex(memories, vectors, texts, fingerprints, index.scored, index.capped, features, index.copy_keys, ids, ends, common, counts),
                        set(), set(), set(), 0)
    keys = live_cap.copy_keys(memories, index.copy_keys, touched)
    # the batch run's stored links stop at the cap's reach: as there, memories whose top links
    # may have lost a member are scored again (transforms/link/cap_reach.py); it reads the
    # stored links at what changed alone
    reach = cap_reach.cap_reach(memories, scoring.max_links_per_memory, groups=live_cap.grouped(keys))
    focus = cap_reach.refocused(changed | reweighed, deleted, rows_touching(index.scored, ends.scored, touched | reweighed), reach)
    rescored = focus | deleted
    kept, kept_ends = rows_apart(index.scored, ends.scored, rescored)
    fresh, pairs = focused_links(features, links.unit_rows(vectors) if units is None else units, scoring, focus, keys)
    fresh = fresh.cast(RELATIONSHIP_SCHEMA)
    # kept has no end in focus or deleted and fresh has one in every row: the two never overlap.
    # Not sorted: nothing reads the scored links in order, and sorting millions of rows per
    # micro-batch cost ~0.13 s at 100k.
    scored = pl.concat([kept, fresh])
    scored_ends = kept_ends.then(fresh)
    # every scored link that may differ has an end in `rescored`: the cap is redone around them
    recap = recapped(index, scored, memories, keys, rescored, scoring, live_cap.CapEnds(ends.capped, ends.scored, scored_ends))
    # rows without an end in `around` are the same rows: compare only the others
    affected = touched | changed_ends(recap.before, recap.after)
    new_ends = IndexEnds(scored_ends, recap.capped_ends)
    return Relinked(LinkIndex(memories, vectors, texts, fingerprints, scored, recap.capped, features, keys, ids, new_ends, common, counts),
                    changed, deleted, affected, pairs)


def _common_terms(index: LinkIndex, memories: pl.DataFrame, touched: set[str]) -> tuple[namespace_terms.TermCounts, pl.DataFrame, pl.DataFrame]:
    """(the counts of `memories`' terms, the terms common now, those the index's links were
    scored with). The counts follow the memories touched (their rows in the index before,
    in `memories` now); an index without counts (the first micro-batch over a snapshot, whose
    memories the index does not hold) counts every memory once."""
    before = namespace_terms.common_terms(index.memories) if index.common_terms is None else index.common_terms
    if index.term_counts is None:
        counts = namespace_terms.TermCounts.of(memories)
        return counts, counts.common(), before
    wanted = pl.Series(sorted(touched), dtype=pl.String).implode()
    change = index.term_counts.change(index.memories.filter(pl.col("id").is_in(wanted)), memories.filter(pl.col("id").is_in(wanted)))
    return index.term_counts.applied(change), index.term_counts.common(change), before


def published_rows(capped: pl.DataFrame, manual: pl.DataFrame, ids: set[str], run_id: str, capped_ends: LinkEnds | None = None) -> pl.DataFrame:
    """The published relationships (discovered after the cap, merged with manual links)
    that have an end in ids: every row a reader sees for those memories (`capped_ends`:
    capped's, where the caller keeps them)."""
    merged = merged_relationships(touching(capped, ids, capped_ends), touching(manual, ids))
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
