"""Link discovery: candidates, pair scores, classification, the cap, tier summaries and audits.

Pure functions over frames and arrays. Scoring, classification and the cap are the
SQL in sql/ (pair_scores, classified_links, capped_links), run on an in-memory DuckDB.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import re
import threading
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Set
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from crosstier import sql
from crosstier.core.config import ScoringConfig
from crosstier.transforms import forked, partitions
from crosstier.transforms.embed.text import unit_rows
from crosstier.transforms.link import copies, namespace_terms
from crosstier.transforms.link.calibration import Calibration, load_calibration
from crosstier.transforms.link.candidates import (
    all_pairs, bf16_torch, bounded_pairs, candidate_pairs_with_cosines, cosine_floors, partner_pairs, products_pay, ranked_terms,
    reference_pairs, score_floors, unsettled_pairs, with_cosines_and_shared_weights, within_bars, without_copy_pairs,
)
from crosstier.transforms.link.cap_reach import CapReach, LowerBars, by_row, cap_bars, cap_reach, value_runs
from crosstier.transforms.link.features import NEGATION_IGNORED, link_features
from crosstier.transforms.link.neighbours import exact_pair_cosines
from crosstier.transforms.link.term_sets import TermSets
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA

AUDITS = ("audit_self_links", "audit_duplicate_pairs", "audit_over_cap", "audit_cross_namespace")
_PARAM = re.compile(r"\$([A-Za-z_]\w*)")
_BLOCK_ROWS = 4096  # memories per block when pruning to the cap's reach: a block's pairs stay a few million
# A namespace of more than one block starts with a block this small: its route search is what
# tells whether products pay (candidates.products_pay reads that many rows), and the routes of
# a whole first block cost ~5x a product block at 100k dense (12.9 s for 4,096 rows, 2.8 s for 256).
_FIRST_BLOCK_ROWS = 256
_CLASSIFY_ROWS = 500_000  # pairs classified at a time after pruning
_PRUNE_GROWTH = 1.5  # links held are pruned again once they are this many times what the last prune left
# what the classifier's evidence of a memory reads of it (link_memories)
MEMORY_INPUT_COLUMNS = ("id", "tier", "namespace", "timestamp", "session_id", "content", "entities", "terms", "refs")


# What decides a link's row besides the settings and the memories: the scoring, classifying and
# capping SQL and the code of the evidence. Their text is part of the settings fingerprint
# (flows/run_record.py), so a release that changes a rule makes the next run full: an
# incremental run would keep the old rule's rows for every pair it does not score again.
RULE_SQL = ("pair_scores", "qualifying_pairs", "classified_links", "capped_links")
RULE_MODULES = ("crosstier.transforms.link.features", "crosstier.transforms.link.terms", "crosstier.transforms.link.copies",
                "crosstier.transforms.link.namespace_terms", __name__)


@functools.cache
def rules_fingerprint() -> str:
    """A hash of the text of RULE_SQL and RULE_MODULES."""
    digest = hashlib.sha256()
    for name in RULE_SQL:
        digest.update(sql.load(name).encode("utf-8"))
    for module in RULE_MODULES:
        digest.update(Path(importlib.import_module(module).__file__).read_bytes())
    return digest.hexdigest()[:16]


_DATABASES = threading.local()  # per thread: (pid, in-memory database) for _connection


# classified_pairs reads its result through execute(): the copy of the rows this warns of costs
# less than the second binding of the query that con.sql(...) makes
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)


def _connection() -> duckdb.DuckDBPyConnection:
    """A fresh connection (cursor) to this thread's in-memory DuckDB database: what it
    registers is its own, and it costs microseconds where a new database cost ~12 ms,
    several times per watcher micro-batch. One database per thread, not per process: the
    scoring view is created in its catalog, and tasks scoring at once in one database
    conflicted on it. Made again after a fork."""
    held = getattr(_DATABASES, "held", None)
    if held is None or held[0] != os.getpid():
        held = _DATABASES.held = (os.getpid(), duckdb.connect())
    return held[1].cursor()


def _params(name: str, values: Mapping[str, object]) -> dict[str, object]:
    """The bound parameters sql/<name>.sql uses, taken from values."""
    return {key: values[key] for key in sorted(set(_PARAM.findall(sql.load(name))))}


def calibration_of(scoring: ScoringConfig) -> Calibration:
    """The calibration the scoring settings name (the bundled one when they name none)."""
    return load_calibration(scoring.calibration)


def scoring_params(scoring: ScoringConfig) -> dict[str, object]:
    """The SQL parameters of scoring and classification."""
    w = scoring.weights
    calibration = calibration_of(scoring)
    return {
        "co_full": calibration.co_full,
        "co_shared_full": calibration.co_shared_full,
        "w_semantic": w["semantic"],
        "w_co_occurrence": w["co_occurrence"],
        "w_temporal": w["temporal"],
        "w_cross_reference": w["cross_reference"],
        "tau_days": scoring.tau_days,
        "max_references": scoring.max_references,
        "min_score": scoring.min_correlation_score,
        "contradiction_min_semantic": scoring.contradiction_min_semantic,
        "contradiction_min_overlap": scoring.contradiction_min_overlap,
        "negation_ignored": NEGATION_IGNORED,
        "negation_paraphrase_min_cosine": scoring.negation_paraphrase_min_cosine,
        "sequence_max_hours": scoring.sequence_max_hours,
        "max_links": scoring.max_links_per_memory,
        "min_model_script_share": scoring.min_model_script_share,
        "unvouched_min_co_occurrence": scoring.unvouched_min_co_occurrence,
    }


def pair_cosines(embeddings: np.ndarray, pairs: pl.DataFrame) -> np.ndarray:
    """Exact cosine of each (a_idx, b_idx) pair, in float64, the same whichever route found it:
    the `cosine` column candidate search computed where the pairs carry it, else computed
    here the same way (neighbours.exact_pair_cosines: sum(float64(a) * float64(b)) per row)."""
    if "cosine" in pairs.columns:
        return pairs.get_column("cosine").cast(pl.Float64).to_numpy()
    return exact_pair_cosines(embeddings, pairs["a_idx"].to_numpy(), pairs["b_idx"].to_numpy())


def link_memories(memories: pl.DataFrame, ids: Set[str] | None = None, skill_ids: Iterable[str] | None = None) -> pl.DataFrame:
    """Memories sorted by id with a row index (`idx`) and the classifier's evidence columns
    (references resolved against `ids`, default these memories' ids; features.link_features)."""
    frame = memories.select(MEMORY_INPUT_COLUMNS).with_row_index("idx_in").sort("id")
    return link_features(frame.with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64)), ids, skill_ids)


def shared_term_weights(frame: pl.DataFrame, pairs: pl.DataFrame) -> pl.Series:
    """Per (a_idx, b_idx) pair, the summed rarity weight of the terms both memories have: the
    pairs' own `shared_weight` column where candidate search computed it, else from the terms
    (TermSets: a searchsorted over integer codes, ~2x a polars join of the exploded terms,
    which was the slowest part of scoring)."""
    if "shared_weight" in pairs.columns:
        return pairs.get_column("shared_weight").cast(pl.Float64)
    a, b = pairs["a_idx"].to_numpy(), pairs["b_idx"].to_numpy()
    weights = TermSets.of_pairs(frame, a, b).shared_weights(a, b)
    return pl.Series("shared_weight", weights, dtype=pl.Float64)


# what sql/pair_scores and sql/qualifying_pairs read of link_memories (classified_links reads every column)
_SCORING_COLUMNS = ("idx", "id", "namespace", "timestamp", "terms", "term_weights", "ref_ids", "cites", "latin_share")


def _registered_pairs(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame, embeddings: np.ndarray, pairs: pl.DataFrame, scoring: ScoringConfig) -> None:
    """Register the pairs with their cosine, calibrated semantic score and shared term weight,
    and the memories' evidence (`link_memories`: `frame`, as the caller selected it)."""
    cosines = pair_cosines(embeddings, pairs)
    pairs = pairs.with_columns(
        pl.Series("cosine", cosines, dtype=pl.Float64),
        pl.Series("semantic", calibration_of(scoring).semantic(cosines), dtype=pl.Float64),
        shared_term_weights(frame, pairs),
    )
    con.register("pairs", pairs.to_arrow())
    con.register("link_memories", frame.to_arrow())


def _scored_pair_view(con: duckdb.DuckDBPyConnection, frame: pl.DataFrame, embeddings: np.ndarray, pairs: pl.DataFrame, scoring: ScoringConfig) -> None:
    """_registered_pairs, and `pair_scores` a view over them."""
    _registered_pairs(con, frame, embeddings, pairs, scoring)
    # a view over the bound query, not a table: DuckDB streams the scores into the threshold filter
    con.sql(sql.load("pair_scores"), params=_params("pair_scores", scoring_params(scoring))).create_view("pair_scores")


def qualifying_pairs(frame: pl.DataFrame, embeddings: np.ndarray, pairs: pl.DataFrame, scoring: ScoringConfig) -> pl.DataFrame:
    """Score the pairs (sql/pair_scores) and keep those that become links (sql/qualifying_pairs)."""
    con = _connection()
    try:
        _scored_pair_view(con, frame.select(_SCORING_COLUMNS), embeddings, pairs, scoring)
        return pl.from_arrow(con.sql(sql.load("qualifying_pairs"), params=_params("qualifying_pairs", scoring_params(scoring))).to_arrow_table())
    finally:
        con.close()


def classified(frame: pl.DataFrame, qualifying: pl.DataFrame, scoring: ScoringConfig) -> pl.DataFrame:
    """The qualifying pairs typed, directed and explained (sql/classified_links), as relationship rows."""
    con = _connection()
    try:
        con.register("qualifying_pairs", qualifying.to_arrow())
        con.register("link_memories", frame.drop("idx_in").to_arrow())
        return _classified_rows(con, scoring)
    finally:
        con.close()


def _classified_rows(con: duckdb.DuckDBPyConnection, scoring: ScoringConfig) -> pl.DataFrame:
    return _relationship_rows(con.sql(sql.load("classified_links"), params=_params("classified_links", scoring_params(scoring))).to_arrow_table())


def _relationship_rows(table) -> pl.DataFrame:  # table: pyarrow.Table of sql/classified_links rows
    """classified_links' rows as relationship rows, in the relationships' columns, by their ends."""
    return pl.from_arrow(table).cast(RELATIONSHIP_SCHEMA).select(RELATIONSHIP_SCHEMA.names()).sort("source_id", "target_id")


@functools.cache
def _scored_and_classified_sql() -> str:
    """sql/pair_scores, qualifying_pairs and classified_links as one query, the first two as
    named subqueries (each file reads the one before by its name)."""
    nested = ",\n".join(f"{name} as (\n{sql.load(name)}\n)" for name in ("pair_scores", "qualifying_pairs"))
    return f"with\n{nested}\nselect * from (\n{sql.load('classified_links')}\n)"


def classified_pairs(frame: pl.DataFrame, embeddings: np.ndarray, pairs: pl.DataFrame, scoring: ScoringConfig) -> pl.DataFrame:
    """Score the pairs, keep and classify the links (sql/pair_scores, qualifying_pairs,
    classified_links) in one DuckDB query: each query costs ~20-30 ms of binding and planning
    however few its pairs, and views over bound queries are bound again where they are read
    (10 pairs, a watcher micro-batch's few, cost 77 ms as two views and a query, ~50 ms as one)."""
    con = _connection()
    try:
        _registered_pairs(con, frame.drop("idx_in"), embeddings, pairs, scoring)
        values = scoring_params(scoring)
        params = {key: value for name in ("pair_scores", "qualifying_pairs", "classified_links") for key, value in _params(name, values).items()}
        # execute, not sql(): a relation binds its query when made and again when run (~22 ms)
        return _relationship_rows(con.execute(_scored_and_classified_sql(), params).to_arrow_table())
    finally:
        con.close()


def evidence_frame(memories: pl.DataFrame, evidence: pl.DataFrame) -> pl.DataFrame:
    """link_memories(memories) from their evidence made before (live.link_features_of's frame
    of the same memories: sorted by id, no row numbers), with the row numbers added."""
    positions = memories.select("id").with_row_index("idx_in").sort("id")
    if not evidence.get_column("id").equals(positions.get_column("id")):
        raise ValueError("the evidence given is not of these memories (by id)")
    return (evidence.with_columns(positions.get_column("idx_in")).select("idx_in", *evidence.columns)
            .with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64)))


def _prepared(memories: pl.DataFrame, embeddings: np.ndarray, evidence: pl.DataFrame | None = None) -> tuple[pl.DataFrame, np.ndarray]:
    if "terms" not in memories.columns:
        raise ValueError("memories need a `terms` column (crosstier.transforms.link.terms.with_terms)")
    if len(embeddings) != memories.height:
        raise ValueError(f"embeddings has {len(embeddings)} rows for {memories.height} memories")
    if memories["id"].n_unique() != memories.height:
        raise ValueError("memory ids must be unique")
    frame = link_memories(memories) if evidence is None else evidence_frame(memories, evidence)
    frame = namespace_terms.weighted(frame)  # over these memories: a namespace is scored with all of its own
    vectors = unit_rows(embeddings)[frame["idx_in"].to_numpy()] if memories.height else np.zeros((0, 1), np.float32)
    return frame, vectors


def scored_links(
    memories: pl.DataFrame,
    embeddings: np.ndarray,
    scoring: ScoringConfig,
    *,
    focus_ids: Collection[str] | None = None,
) -> pl.DataFrame:
    """Classified links at or above the threshold plus all explicit references, before the cap.

    `embeddings` is row-aligned with `memories`. With `focus_ids`, only pairs with an end
    in focus_ids. Every row depends only on its two memories and the config.
    """
    return scored_links_with_count(memories, embeddings, scoring, focus_ids=focus_ids)[0]


def scored_links_with_count(
    memories: pl.DataFrame,
    embeddings: np.ndarray,
    scoring: ScoringConfig,
    *,
    focus_ids: Collection[str] | None = None,
    within_cap: int | None = None,
    progress: Callable[[int, int, int, int], None] | None = None,
) -> tuple[pl.DataFrame, int]:
    """`scored_links` and how many candidate pairs were scored to find them (for run stats).

    With `within_cap` (max_links_per_memory), the pairs are scored _BLOCK_ROWS
    memories at a time and the links the cap can never keep are dropped as they come
    (transforms/link/cap_reach.py), so memory stays bounded where thousands of pairs per
    memory qualify; the result then holds every link a cap over it or over all links keeps.
    `progress(block, blocks, pairs scored so far, links kept so far)` is called after each block."""
    parts, scored = scored_link_parts(memories, embeddings, scoring, focus_ids=focus_ids, within_cap=within_cap, progress=progress)
    frames = list(parts)
    return (pl.concat(frames).sort("source_id", "target_id") if frames else empty_scored_links()), scored


def scored_link_parts(
    memories: pl.DataFrame,
    embeddings: np.ndarray,
    scoring: ScoringConfig,
    *,
    focus_ids: Collection[str] | None = None,
    within_cap: int | None = None,
    progress: Callable[[int, int, int, int], None] | None = None,
    evidence: pl.DataFrame | None = None,
) -> tuple[Iterator[pl.DataFrame], int]:
    """scored_links_with_count's links in parts (each sorted by its ends; together the same
    rows), and the pairs scored. The pairs are scored and pruned first; the links are then
    classified a part at a time as the parts are taken, so a caller that writes each one out
    (the score task) never holds them all: held until one concat, a dense namespace's parts
    cost ~3.7x their size in memory. `evidence`: the memories' classifier evidence where the
    caller has it (evidence_frame), else made here (link_memories)."""
    frame, vectors = _prepared(memories, embeddings, evidence)
    focus = None if focus_ids is None else frame["id"].is_in(list(focus_ids))
    keys = copies.copy_key_column(frame)  # pairs of two copies of one text are folded away: not scored
    if within_cap is None:
        pairs = candidate_pairs_with_cosines(frame, vectors, scoring, focus, copy_keys=keys)
        return iter([classified_pairs(frame, vectors, pairs, scoring)]), pairs.height
    reach = by_row(cap_reach(frame, within_cap, groups=copies.copy_groups(frame, keys)), frame)
    keys = keys.rank("dense").fill_null(0)  # the pairs' ends compare as integers from here (candidates.partner_pairs)
    rows = np.flatnonzero(focus.to_numpy()) if focus is not None else np.arange(frame.height)
    # each pair is scored in the block of its first focus end (a non-focus end never leads a block)
    block_of = np.full(frame.height, np.iinfo(np.int64).max, dtype=np.int64)
    block_of[rows] = _block_numbers(len(rows))
    ranked = ranked_terms(frame)
    term_sets = TermSets.of(frame)
    held = _HeldLinks(reach, frame.height, _BLOCK_ROWS * within_cap)
    scored = 0
    blocks = int(block_of[rows].max()) + 1 if len(rows) else 0
    for block in range(blocks):
        pairs = candidate_pairs_with_cosines(frame, vectors, scoring, pl.Series(block_of == block), ranked=ranked, copy_keys=keys,
                                             settled=block_of < block, term_sets=term_sets)
        # once the first block says products pay (candidates.products_pay), the rest are searched by product
        dense = block == 0 and blocks > 1 and products_pay(vectors, scoring, pairs, np.flatnonzero(block_of == block), block_of < block)
        scored += pairs.height
        held.add(qualifying_pairs(frame, vectors, pairs, scoring).select(_HELD_COLUMNS), last=block == blocks - 1)
        del pairs
        if progress is not None:
            progress(block + 1, blocks + dense, scored, held.rows)
        if dense:
            scored += _dense_blocks_scored(frame, vectors, scoring, keys, term_sets, block_of, blocks, reach, held, progress, scored)
            break
    if not held.parts:
        return iter([]), scored
    survivors = held.pruned_links().select("a_idx", "b_idx", "cosine", "shared_weight").sort("a_idx", "b_idx")
    # classified a slice at a time: the classifier joins each pair to both ends' texts and evidence
    parts = (classified_pairs(frame, vectors, survivors.slice(start, _CLASSIFY_ROWS), scoring)
             for start in range(0, survivors.height, _CLASSIFY_ROWS))
    return parts, scored


# with each pair's shared term weight: classifying the survivors then reads it, not the terms of their ends
# again (TermSets.of_pairs: ~0.45 s of each 500k-pair slice's ~1.7 s)
_HELD_COLUMNS = ("a_idx", "b_idx", "cosine", "shared_weight", "score", "cross_reference")
_EXACT_ROWS = 1 << 20  # a dense namespace's candidate pairs are scored this many at a time


class _HeldLinks:
    """The scored links held while a namespace is scored: only what pruning needs (the
    survivors are scored again at the end), pruned to the cap's reach (cap_bars) once they
    have grown by half since the last prune, and at the end. A prune is safe on any subset
    and the last one sees every memory's top k, so the links are the same, and the work stays
    linear (a prune after every block re-read all the links kept so far). By half, not
    double: at 100k dense the largest prune's arrays set the run's peak (in process 3.7 ->
    3.0 GB), and fresher bars leave more pairs unscored. `bars`: each memory's bar at the
    last prune (None before one)."""

    def __init__(self, reach: CapReach, memories: int, least: int) -> None:
        self.reach, self.memories, self.least = reach, memories, least
        self.parts: list[pl.DataFrame] = []
        self.rows = self.pruned = 0
        self.bars: np.ndarray | None = None

    def add(self, qualifying: pl.DataFrame, *, last: bool = False) -> None:
        self.parts.append(qualifying)
        self.rows += qualifying.height
        if last or self.rows > _PRUNE_GROWTH * max(self.pruned, self.least):
            self.prune()

    def prune(self) -> None:
        survivors, self.bars = cap_bars(pl.concat(self.parts), self.reach, ("a_idx", "b_idx"), self.memories, distinct_pairs=True)
        self.parts = [survivors]
        self.rows = self.pruned = survivors.height

    def pruned_links(self) -> pl.DataFrame:
        return pl.concat(self.parts)


def _dense_blocks_scored(
    frame: pl.DataFrame, vectors: np.ndarray, scoring: ScoringConfig, keys: pl.Series, term_sets: TermSets, block_of: np.ndarray,
    blocks: int, reach: CapReach, held: _HeldLinks, progress: Callable[[int, int, int, int], None] | None, scored: int,
) -> int:
    """A dense namespace's blocks after the first, by product, in two passes; the pairs scored.

    Where a topic's members all qualify, a memory has thousands of qualifying partners of
    which the cap's reach keeps its best ~50: at 100k memories (bench/scale.py) one pass of
    blocks, pruning as it went, scored 21.8M pairs to keep 4.07M, since a memory's bar only
    rises as its partners come. So the first pass only bounds: each block's product (bf16
    where the CPU has it) and each pair's exact term overlap and temporal give the score from
    above and, from the product's cosine less its error, from below (candidates.score_floors);
    the lower bounds give every memory a bar (cap_reach.LowerBars) near the one all of its
    partners give. The second pass takes the pairs whose upper bound reaches a bar at one end
    at least, computes their exact cosines, bounds them again and scores them (SQL), pruned
    as they come. The links are the same: every bar is a lower bound of the cap's."""
    threads = _search_threads()
    torch = bf16_torch(load=True)
    unvouched = (frame.get_column("latin_share").fill_null(0.0) < scoring.min_model_script_share).to_numpy()
    lower = LowerBars(reach, frame.height, scoring.min_correlation_score, unvouched)
    found: list[pl.DataFrame] = []
    found_rows = last_filtered = 0
    bars = _fresher(lower.bars(), held.bars)  # held's do not move in this pass: only lower's, as blocks are added
    for block in range(1, blocks):

        def bound(focus: pl.Series, settled: np.ndarray, bars=bars) -> pl.DataFrame:
            return partner_pairs(frame, vectors, scoring, focus, keys, torch=torch, settled=settled, term_sets=term_sets, bars=bars, loose=True)

        pairs = searched_in_parts(bound, block_of == block, block_of < block, threads)
        a, b = pairs["a_idx"].to_numpy(), pairs["b_idx"].to_numpy()
        floors = cosine_floors(pairs["cosine"].to_numpy(), torch)
        lower.add(a, b, score_floors(frame, scoring, a, b, floors, pairs["shared_weight"].to_numpy()))
        bars = _fresher(lower.bars(), held.bars)  # for the filter below and the next block's search
        # kept until every block is bounded (their exact cosines and scores wait for the bars);
        # what the bars so far put beyond reach is dropped as they grow, as held links are pruned
        found.append(pairs.select(pl.col("a_idx", "b_idx").cast(pl.Int32), "shared_weight", (pl.col("bound") + _BOUND_ROUNDING).cast(pl.Float32)))
        found_rows += pairs.height
        if found_rows > _PRUNE_GROWTH * max(last_filtered, _BLOCK_ROWS * reach.max_links):
            found = [within_bars(pl.concat(found), bars)]
            found_rows = last_filtered = found[0].height
        if progress is not None:
            progress(block + 1, blocks + 1, scored, held.rows)
    candidates = within_bars(pl.concat(found), bars).drop("bound").sort("a_idx", "b_idx").cast({"a_idx": pl.Int64, "b_idx": pl.Int64})
    del found
    dense_rows = pl.Series((block_of >= 1) & (block_of < blocks))
    cited = without_copy_pairs(unsettled_pairs(reference_pairs(frame, dense_rows), block_of == 0), keys)
    cited = with_cosines_and_shared_weights(cited, vectors, term_sets)
    candidates = candidates.join(cited, on=["a_idx", "b_idx"], how="anti")  # a reference comes with its own

    def exact(chunk: pl.DataFrame, bars: np.ndarray) -> tuple[int, pl.DataFrame]:
        a, b = chunk["a_idx"].to_numpy(), chunk["b_idx"].to_numpy()
        cosines = exact_pair_cosines(vectors, a, b)
        chunk = chunk.select("a_idx", "b_idx", pl.Series("cosine", cosines, dtype=pl.Float64), "shared_weight")
        pairs = bounded_pairs(frame, vectors, scoring, chunk, cosines=cosines.astype(np.float32),
                              shared_weights=chunk["shared_weight"].to_numpy(), bars=bars)
        return pairs.height, qualifying_pairs(frame, vectors, pairs, scoring).select(_HELD_COLUMNS)

    count = cited.height
    held.add(qualifying_pairs(frame, vectors, cited, scoring).select(_HELD_COLUMNS))
    chunks = [candidates.slice(start, _EXACT_ROWS) for start in range(0, candidates.height, _EXACT_ROWS)]
    with ThreadPoolExecutor(threads, thread_name_prefix="ctc-exact") as pool:
        for start in range(0, len(chunks), threads):
            bars = _fresher(bars, held.bars)
            for pairs, qualifying in pool.map(lambda chunk: exact(chunk, bars), chunks[start:start + threads]):
                count += pairs
                held.add(qualifying)
    held.prune()
    if progress is not None:
        progress(blocks + 1, blocks + 1, scored + count, held.rows)
    return count


_BOUND_ROUNDING = 1e-6  # an upper bound kept as float32 is raised this much, so it stays one


def _fresher(bars: np.ndarray, pruned: np.ndarray | None) -> np.ndarray:
    """The higher of two lower bounds of each memory's bar (NaN where neither knows one)."""
    return bars if pruned is None else np.fmax(bars, pruned)


def _search_threads() -> int:
    """Threads a dense block's search is split over: the CPUs this process may use, up to as
    many as the forked workers (forked.MAX_PARTS)."""
    return max(1, min(forked.usable_cpus(), forked.MAX_PARTS))


def searched_in_parts(
    search: Callable[[pl.Series, np.ndarray], pl.DataFrame], in_block: np.ndarray, settled: np.ndarray, parts: int,
) -> pl.DataFrame:
    """search(focus, settled) over a block's rows (`in_block`), split into `parts` searched at
    once on threads; their frames concatenated, in no particular order (the caller sorts what
    it keeps once, at the end).

    Each part but the last also counts the later parts' rows as settled, so a pair with both
    ends in the block is searched in one part only (the later end's): the parts' pairs are
    the block's, each once. Nearly all of a search is numpy and torch, which let go of the
    GIL, and one search ran at ~1.2 cores of 2 (100k dense memories)."""
    rows = np.flatnonzero(in_block)
    chunks = [chunk for chunk in np.array_split(rows, max(1, min(parts, len(rows) // _MIN_PART_ROWS))) if len(chunk)]
    if len(chunks) <= 1:
        return search(pl.Series(in_block), settled)
    jobs = []
    later = np.zeros(len(in_block), dtype=bool)
    for chunk in reversed(chunks):
        focus = np.zeros(len(in_block), dtype=bool)
        focus[chunk] = True
        jobs.append((pl.Series(focus), settled | later))
        later = later | focus
    with ThreadPoolExecutor(len(jobs), thread_name_prefix="ctc-search") as pool:
        return pl.concat(list(pool.map(lambda job: search(*job), jobs)))


_MIN_PART_ROWS = 256  # a block is split only into parts of at least this many rows


def _block_numbers(rows: int) -> np.ndarray:
    """The block of each of `rows` focus rows in order: one block up to _BLOCK_ROWS, else a
    first block of _FIRST_BLOCK_ROWS (at most _BLOCK_ROWS), then blocks of _BLOCK_ROWS."""
    if rows <= _BLOCK_ROWS:
        return np.zeros(rows, dtype=np.int64)
    at = np.arange(rows)
    first = min(_FIRST_BLOCK_ROWS, _BLOCK_ROWS)
    return np.where(at < first, 0, 1 + (at - first) // _BLOCK_ROWS)


def empty_scored_links() -> pl.DataFrame:
    """No links, with the relationship columns."""
    return pl.DataFrame(schema=RELATIONSHIP_SCHEMA)


def brute_force_links(memories: pl.DataFrame, embeddings: np.ndarray, scoring: ScoringConfig, *, copy_pairs: bool = False) -> pl.DataFrame:
    """The oracle: every pair within a namespace scored, no pruning, then the same classify and
    threshold; less pairs of two copies of one text (which the fold drops), unless `copy_pairs`."""
    frame, vectors = _prepared(memories, embeddings)
    pairs = all_pairs(frame)
    if not copy_pairs:
        pairs = without_copy_pairs(pairs, copies.copy_key_column(frame))
    return classified_pairs(frame, vectors, pairs, scoring)


def _run(name: str, tables: Mapping[str, pl.DataFrame], values: Mapping[str, object] | None = None) -> pl.DataFrame:
    """Run sql/<name>.sql on an in-memory DuckDB holding the given frames."""
    con = _connection()
    try:
        for table, frame in tables.items():
            con.register(table, frame.to_arrow())
        return pl.from_arrow(con.sql(sql.load(name), params=_params(name, values or {})).to_arrow_table())
    finally:
        con.close()


# the columns an undated origin's demotion rewrites: it is turned round as a supports link
ORIGIN_REWRITTEN_COLUMNS = ("source_id", "source_tier", "target_id", "target_tier", "relationship_type")


def undated_origin_demotions(links: pl.DataFrame, kept: pl.Series | None = None) -> pl.Series:
    """The positions (UInt32) of the links demoted so that each fact keeps one undated origin:
    its strongest derives_from link decided without two dates.

    Where a fact or an episode has no timestamp, time cannot say which episode the fact was
    drawn from, so the classifier names every such episode a possible origin (temporal is null
    on those links). The strongest (score, then the episode's id) stays derives_from; the others
    become supports (episode -> fact: `turned_round`). Explicit references stay derives_from.
    Run over the whole set of scored links, like the cap, so an incremental run still equals a
    full one. `kept`: a mask of the rows taken into account (the cap's copy fold). The cap
    applies the positions to its integer ranks and to the links it keeps only: rewriting five
    string columns of every link cost ~0.6 GB at 100k dense (360k undated origins, 4.07M links).
    """
    undated = (
        (pl.col("relationship_type") == "derives_from")
        & pl.col("temporal").is_null()
        & ~(pl.col("cross_reference").fill_null(0.0) > 0)
        & (pl.col("origin") == "discovered")
    )
    if kept is not None:
        undated = undated & pl.lit(kept)
    mask = links.select(undated.fill_null(False)).to_series()
    order = (
        links.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"), "source_id", "score", "target_id")
        .filter(mask)
        .sort(["source_id", "score", "target_id"], descending=[False, True, False])
    )
    return order.filter(pl.int_range(pl.len()).over("source_id") > 0).get_column("_row")


def turned_round(links: pl.DataFrame, demote: pl.Expr, supports: pl.Expr | None = None) -> pl.DataFrame:
    """The links where `demote` holds turned round as supports (episode -> fact): ends swapped
    (and their tiers, where the frame has them), the type set to `supports` (default the
    string; the cap's integer ranks give its code)."""
    def swapped(left: str, right: str) -> dict[str, pl.Expr]:
        return {left: pl.when(demote).then(pl.col(right)).otherwise(pl.col(left)),
                right: pl.when(demote).then(pl.col(left)).otherwise(pl.col(right))}

    columns = swapped("source_id", "target_id")
    if "source_tier" in links.columns:
        columns |= swapped("source_tier", "target_tier")
    supports = pl.lit("supports") if supports is None else supports
    return links.with_columns(**columns, relationship_type=pl.when(demote).then(supports).otherwise(pl.col("relationship_type")))


# what the cap reads of a link (sql/capped_links.sql, undated_origin_demotions and copy folding)
CAP_COLUMNS = ("source_id", "source_tier", "target_id", "target_tier", "relationship_type", "score", "temporal", "cross_reference", "origin", "namespace")


def capped_links(
    links: pl.DataFrame, max_links_per_memory: int, memories: pl.DataFrame | None = None, *, tau_days: float = 7.0,
    groups: pl.DataFrame | None = None, ordered: bool = True,
) -> pl.DataFrame:
    """Links after the cap: at most max_links_per_memory discovered links per memory, strongest kept.

    With `memories` (id, tier, namespace, content, timestamp), copies are folded first
    (transforms/link/copies.py): no links inside a copy group, one per group and other end,
    and each copy linked to the next in time ("carried forward"), outside the cap. Then each
    undated fact keeps one origin (undated_origin_demotions), and the cap applies. `groups`:
    copies.copy_groups(memories) where the caller has them (a pass over every text saved).
    `ordered`: sorted by source and target (else in no particular order: the live recap
    keeps a few of ~0.5M rows, and sorting them cost ~0.1 s).
    """
    links = links.cast({name: kind for name, kind in RELATIONSHIP_SCHEMA.items() if name in links.columns})
    # Copy folding, undated origins and the ranking read the cap's columns alone; the others
    # (reasons, metadata) are gathered for the kept rows only. Every step on all columns copied
    # every link's reason: at 50k dense memories (1.9M links) the cap raised the peak by ~0.9 GB.
    return _capped(links.select(CAP_COLUMNS), lambda rows: links[rows], links.clear(), max_links_per_memory, memories,
                   tau_days=tau_days, groups=groups, ordered=ordered)


def capped_links_of_partition(path: Path, max_links_per_memory: int, memories: pl.DataFrame | None = None, *,
                              tau_days: float = 7.0, groups: pl.DataFrame | None = None) -> pl.DataFrame:
    """capped_links of the links in a Parquet partition (a full run's score task: one
    namespace's stored links; an incremental run: all of them), reading the cap's columns and
    then only the kept rows' others, so the stored links are never held whole (4.07M at 100k
    dense memories, ~0.9M kept)."""
    schema = dict(RELATIONSHIP_SCHEMA)
    decided = pl.read_parquet(path, columns=list(CAP_COLUMNS)).cast({name: schema[name] for name in CAP_COLUMNS})
    return _capped(decided, lambda rows: partitions.read_rows(path, rows).cast(schema), pl.DataFrame(schema=RELATIONSHIP_SCHEMA),
                   max_links_per_memory, memories, tau_days=tau_days, groups=groups, ordered=True)


def _capped(
    decided: pl.DataFrame, rows_of: Callable[[pl.Series], pl.DataFrame], empty: pl.DataFrame, max_links_per_memory: int,
    memories: pl.DataFrame | None, *, tau_days: float, groups: pl.DataFrame | None, ordered: bool,
) -> pl.DataFrame:
    """The cap over the links' CAP_COLUMNS (`decided`); `rows_of(positions)` gives the kept
    links whole, `empty` their shape when none is kept."""
    # The copy fold's dropped rows are masked, not filtered out: a filtered copy of these columns
    # for 4.07M links (100k dense) cost ~1 GB to drop a few hundred.
    folded: pl.Series | None = None  # the rows the fold keeps (None: all)
    chain = pl.DataFrame(schema=RELATIONSHIP_SCHEMA)
    if memories is not None and memories.height:
        groups = copies.copy_groups(memories) if groups is None else groups
        folded = copies.copy_folded_rows(decided, groups)
        chain = copies.carried_forward_links(memories, groups, tau_days)
        if chain.height:
            # a chain link joins two copies: only a kept link between two copies can stand in its place
            copied = groups.get_column("id").implode()
            between = decided.select("source_id", "target_id").filter(
                pl.col("source_id").is_in(copied) & pl.col("target_id").is_in(copied) & (pl.lit(True) if folded is None else pl.lit(folded))
            )
            chain = chain.join(between, on=["source_id", "target_id"], how="anti")
            chain = chain.join(between.select(pl.col("target_id").alias("source_id"), pl.col("source_id").alias("target_id")),
                               on=["source_id", "target_id"], how="anti")
    if decided.height == 0 or (folded is not None and not folded.any()):
        out = chain if chain.height else empty
        return out.sort("source_id", "target_id") if ordered else out
    demoted = undated_origin_demotions(decided, folded)
    ranked = _ranked_as_integers(decided, demoted)
    ranked = ranked if folded is None else ranked.filter(folded)
    kept_rows = _capped_rows(ranked, max_links_per_memory)
    del ranked, decided
    kept = rows_of(kept_rows)
    if not demoted.is_empty():  # an undated origin demoted to supports is turned round
        kept = turned_round(kept, pl.lit(kept_rows.is_in(demoted.implode())))
    out = pl.concat([kept, chain]) if chain.height else kept
    return out.sort("source_id", "target_id") if ordered else out


def _ranked_as_integers(links: pl.DataFrame, demoted: pl.Series | None = None) -> pl.DataFrame:
    """What sql/capped_links reads, with the ids and types it partitions and orders by as
    integers in their sort order (dense ranks: byte order, as DuckDB orders strings), so the
    same links are kept, and `_cap_row`, each link's position. Two rows per link are sorted
    there: on strings, the cap of 4M links (100k dense memories) peaked ~1.6 GB above its input.
    `demoted` (undated_origin_demotions): links ranked as turned round, supports from the other end."""
    n = links.height
    ends = _sorted_codes(pl.concat([links.get_column("source_id"), links.get_column("target_id")]))
    source, target = ends.slice(0, n).alias("source_id"), ends.slice(n).alias("target_id")
    # the types' codes leave room for supports, which a demoted origin becomes
    type_names = pl.concat([links.get_column("relationship_type").unique(), pl.Series(["supports"])]).unique().sort()
    types = _codes(links.get_column("relationship_type"), type_names)
    ranked = links.select(source, target, types, "score", "cross_reference", "origin", pl.int_range(n, dtype=pl.UInt32).alias("_cap_row"))
    if demoted is None or demoted.is_empty():
        return ranked
    supports = type_names.to_list().index("supports")  # its code: its place among the sorted names
    return turned_round(ranked, pl.col("_cap_row").is_in(demoted.implode()), pl.lit(supports, dtype=pl.Int64))


_KEY_BITS = 30  # id codes up to 2^30: a link's (source, target, type) codes fit one UInt64 key


def _capped_rows(ranked: pl.DataFrame, max_links: int) -> pl.Series:
    """The `_cap_row` of the links sql/capped_links keeps of `ranked` (_ranked_as_integers),
    ascending. Where the link keys are distinct (a run's stored links hold one row per key),
    the SQL's window is one sort of both ends of every link (by memory, score descending, the
    other end, type): an end's rank is its place in its memory's run, and a link is kept
    when both its ends rank within the cap; free links (explicit references, manual) always.
    The same rows as the SQL (tests/link/test_links.py checks it against the SQL on the strings);
    where keys repeat, the SQL itself decides (it groups their ends). At 100k dense memories
    the SQL's window over the 8.1M ends raised the cap's peak by ~0.85 GB, this sort by ~0.4 GB."""
    n_types = int(ranked.get_column("relationship_type").max() or 0) + 1
    ids = int(max(ranked.get_column("source_id").max() or 0, ranked.get_column("target_id").max() or 0)) + 1
    free = ranked.select((pl.col("origin") == "manual") | (pl.col("cross_reference").fill_null(0.0) > 0)).to_series()
    keys = ranked.select(
        pl.col("source_id").cast(pl.UInt64) * (1 << (_KEY_BITS + 4)) + pl.col("target_id").cast(pl.UInt64) * 16 + pl.col("relationship_type").cast(pl.UInt64)
    ).to_series()
    if n_types > 16 or ids > 1 << _KEY_BITS or keys.n_unique() != ranked.height or ranked.get_column("score").has_nulls():
        return _run("capped_links", {"links": ranked}, {"max_links": max_links}).get_column("_cap_row").sort()
    del keys
    capped = ranked.filter(~free)
    n = capped.height
    source, target = capped.get_column("source_id").cast(pl.UInt32), capped.get_column("target_id").cast(pl.UInt32)
    # sorted on integers alone: the score as bits that order as the score does, descending, and
    # the other end with the type as one key (4.09M links: 2.6 s sorting on the float and four keys, 0.8 s so)
    kinds = capped.get_column("relationship_type").cast(pl.UInt64).to_numpy()
    ends = pl.DataFrame({
        "memory": pl.concat([source, target]),
        "score": np.tile(_descending_bits(capped.get_column("score").to_numpy()), 2),
        "other": np.concatenate([(target.to_numpy().astype(np.uint64) << np.uint64(8)) | kinds,
                                 (source.to_numpy().astype(np.uint64) << np.uint64(8)) | kinds]),
    })
    del source, target, kinds
    order = ends.select(pl.arg_sort_by(["memory", "score", "other"])).to_series().to_numpy()
    starts, lengths = value_runs(ends.get_column("memory").to_numpy()[order])  # each memory's run of sorted ends
    del ends
    rank = np.empty(2 * n, dtype=np.int64)  # each end's rank (from 0) among its memory's links
    rank[order] = np.arange(2 * n) - np.repeat(starts, lengths)
    del order, starts, lengths
    within = np.maximum(rank[:n], rank[n:]) < max_links
    return pl.concat([capped.get_column("_cap_row").filter(pl.Series(within)), ranked.get_column("_cap_row").filter(free)]).sort()


def _descending_bits(scores: np.ndarray) -> np.ndarray:
    """Unsigned integers that sort ascending as the (float64, not NaN) scores sort descending:
    the IEEE bits with the sign bit set for a positive float, all bits flipped for a negative
    one, then inverted. -0.0 counts as 0.0, as a float comparison has it."""
    bits = (np.asarray(scores, dtype=np.float64) + 0.0).view(np.uint64)
    ascending = np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(1 << 63))
    return ~ascending


def _sorted_codes(values: pl.Series) -> pl.Series:
    """Each string's position among the distinct values sorted in byte order: a dense rank
    from 0, through an Enum of the sorted distinct values (hashing the 8M ends of a 100k
    dense run and sorting its 100k ids: 0.6 s, where ranking the 8M strings took 2.0 s)."""
    return _codes(values, values.unique().sort())


def _codes(values: pl.Series, names: pl.Series) -> pl.Series:
    """Each string's position in `names` (distinct, sorted), as Int64."""
    return values.cast(pl.Enum(names)).to_physical().cast(pl.Int64).alias(values.name)


def tier_distribution(memories: pl.DataFrame, relationships: pl.DataFrame) -> pl.DataFrame:
    """Per tier: memories, linked_memories, orphans, links, avg_score."""
    return _run("tier_distribution", {
        "memories": memories.select("id", "tier"),
        "relationships": relationships.cast(RELATIONSHIP_SCHEMA),
    })


def tier_links(relationships: pl.DataFrame) -> pl.DataFrame:
    """Per (source_tier, target_tier, relationship_type): links, avg_score."""
    return _run("tier_links", {"relationships": relationships.cast(RELATIONSHIP_SCHEMA)})


def audit_failures(
    source: duckdb.DuckDBPyConnection | Mapping[str, pl.DataFrame],
    *,
    max_links_per_memory: int = ScoringConfig().max_links_per_memory,
) -> dict[str, int]:
    """Rows returned by each invariant query of sql/audit_*.sql (all zero when the tables are sound).

    `source` is a DuckDB connection with tables `relationships` and `memories`, or a mapping
    holding those two frames.
    """
    values = {"max_links": max_links_per_memory}
    if isinstance(source, Mapping):
        return {name.removeprefix("audit_"): _run(name, source, values).height for name in AUDITS}
    failures = {}
    for name in AUDITS:
        rows = source.execute(sql.load(name), _params(name, values)).fetchall()
        failures[name.removeprefix("audit_")] = len(rows)
    return failures
