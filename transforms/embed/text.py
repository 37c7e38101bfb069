"""What each memory is embedded as: its own content, and an episode's context from its neighbours' vectors.

Short chat turns ("yes, the staging one") carry their meaning in the turns around them. A
session turn's vector is the normalised weighted mean of its own content vector and its
previous and next turns' content vectors (`context_vectors`): built from vectors already
computed, so a cold run encodes each content once instead of every turn three times over
(the old way, re-encoding `content \\n prev | next`, cost ~3x the tokens; the figures of both
ways are in docs/links.md, bench/quality.py). Deterministic: neighbours are taken in
(timestamp, id) order within (namespace, session_id).

`embedding_texts` still gives the turn with its neighbours' text: not to encode, but as the
fingerprint of what a turn's vector depends on (an edit to a neighbour changes it).
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

CONTEXT_BEFORE = 1
CONTEXT_AFTER = 1
# Weight of each neighbour's vector against 1 for the turn's own (bench/quality.py, tune split:
# 0.2 and 0.3 best for ranking, 0.5 and above dilute the turn).
CONTEXT_WEIGHT = 0.2

# Turns of a session in order: a chat log dated once per session gives every turn one time,
# and its numbered ids ("D1:2", "D1:10") are then the order.
SESSION_ORDER = "timestamp, then id with its numbers compared as numbers"
_DIGITS = re.compile(r"\d+")


def natural_key(memory_id: str) -> str:
    """The id with each run of digits zero-padded, so "D1:2" sorts before "D1:10"."""
    return _DIGITS.sub(lambda run: run.group(0).zfill(20), memory_id)


def _session_order(memories: pl.DataFrame) -> pl.DataFrame:
    """Session turns in (timestamp, id) order, ids compared naturally: turns that share a
    timestamp (a chat log dated per session) keep the order their numbered ids give."""
    frame = memories.select("id", "tier", "content", "timestamp", "session_id", "namespace").with_row_index("row")
    in_session = (pl.col("tier") == "episodic") & pl.col("session_id").is_not_null()
    turns = frame.filter(in_session)
    turns = turns.with_columns(pl.Series("_natural", [natural_key(i) for i in turns.get_column("id")], dtype=pl.String))
    return frame, turns.sort("namespace", "session_id", "timestamp", "_natural", "id", nulls_last=True).drop("_natural")


def embedding_texts(memories: pl.DataFrame, *, before: int = CONTEXT_BEFORE, after: int = CONTEXT_AFTER) -> pl.DataFrame:
    """One row per memory: id and its text with context (an episode's turn plus `before`/`after` session neighbours)."""
    frame, ordered = _session_order(memories)
    group = ["namespace", "session_id"]
    context = []
    for offset in [-k for k in range(before, 0, -1)] + list(range(1, after + 1)):
        context.append(pl.col("content").shift(-offset).over(group))
    if context:
        neighbours = pl.concat_list(context).list.drop_nulls()
        text = (
            pl.when(neighbours.list.len() > 0)
            .then(pl.concat_str([pl.col("content"), neighbours.list.join(" | ")], separator="\n"))
            .otherwise(pl.col("content"))
        )
    else:
        text = pl.col("content")
    with_context = ordered.with_columns(text.alias("text"))
    texts = frame.join(with_context.select("row", "text"), on="row", how="left")
    return texts.sort("row").select("id", pl.coalesce("text", "content").alias("text"))


def session_neighbours(memories: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the row of the previous and of the next turn of its session (-1: none)."""
    frame, ordered = _session_order(memories)
    group = ["namespace", "session_id"]
    rows = ordered.select(
        "row",
        pl.col("row").shift(1).over(group).alias("prev"),
        pl.col("row").shift(-1).over(group).alias("next"),
    )
    prev = np.full(frame.height, -1, dtype=np.int64)
    nxt = np.full(frame.height, -1, dtype=np.int64)
    at = rows["row"].to_numpy().astype(np.int64)
    prev[at] = rows["prev"].fill_null(-1).to_numpy()
    nxt[at] = rows["next"].fill_null(-1).to_numpy()
    return prev, nxt


def unit_rows(vectors: np.ndarray, *, in_place: bool = False) -> np.ndarray:
    """Rows scaled to unit length, float32; a row that cannot be (zeros, NaNs) becomes zeros.
    `in_place`: `vectors` (float32, C order) is the caller's to spend and is scaled where it
    lies (at a million rows each copy is 1.5 GB); the values are the same either way."""
    units = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(units, axis=1, keepdims=True)
    if in_place and units is vectors and units.flags.writeable and units.flags.c_contiguous:
        np.divide(units, norms, out=units, where=norms > 0)
        units[~(norms > 0)[:, 0]] = 0.0  # what a fresh zeros array keeps there
        return units
    return np.divide(units, norms, out=np.zeros_like(units), where=norms > 0)


def context_vectors(memories: pl.DataFrame, vectors: np.ndarray, *, weight: float = CONTEXT_WEIGHT, overwrite: bool = False) -> np.ndarray:
    """Row-aligned unit vectors: a session turn's own vector plus `weight` times each neighbour's, normalised.

    Memories outside a session (and turns without neighbours) keep their own direction.
    `overwrite`: `vectors` is the caller's to spend (unit_rows' `in_place`).
    """
    units = unit_rows(vectors, in_place=overwrite)
    if len(units) == 0 or weight == 0:
        return units
    prev, nxt = session_neighbours(memories)
    mixed = units.copy()
    for side in (prev, nxt):
        has = side >= 0
        mixed[has] += weight * units[side[has]]
    del units
    return unit_rows(mixed, in_place=True)


@dataclass(frozen=True)
class TouchedRows:
    """After a micro-batch: the rows to compute (`fresh`), the rows to reuse (`reused`) and
    those rows' places in the previous set (`before`); positions into the current memories.
    `previous_of`: every current row's place in the previous set (-1: a new id)."""

    fresh: np.ndarray
    reused: np.ndarray
    before: np.ndarray
    previous_of: np.ndarray


def copy_rows(out: np.ndarray, at: np.ndarray, source: np.ndarray, rows: np.ndarray) -> None:
    """out[at] = source[rows], copied run by run where both sides run on contiguously.

    A micro-batch shifts the watcher's row order by a few inserted or deleted rows, so its
    100k-row matrices move in a few long runs: slices copy them ~3x faster than a gather.
    `out` may be `source`'s own buffer (rows moved in place, `at` and `rows` increasing): a
    run that stays where it is is not copied at all, so ids that sort after every stored one
    (time-ordered ids, the usual case) cost nothing to keep, where copying the 150 MB of a
    100k-row matrix cost ~36 ms a micro-batch."""
    if len(at) == 0:
        return
    breaks = np.flatnonzero((np.diff(at) != 1) | (np.diff(rows) != 1)) + 1
    if len(breaks) > len(at) // 64:  # scattered rows: one gather (into a temporary, so in place too)
        out[at] = source[rows]
        return
    runs = [(int(at[start]), int(rows[start]), int(end - start)) for start, end in zip(np.r_[0, breaks], np.r_[breaks, len(at)])]
    if not np.may_share_memory(out, source):
        for to, frm, length in runs:
            out[to:to + length] = source[frm:frm + length]
        return
    _moved_in_place(out, source, runs)


def _moved_in_place(out: np.ndarray, source: np.ndarray, runs: list[tuple[int, int, int]]) -> None:
    """Each run (to, from, length) of rows moved within one buffer, order kept. Runs moving
    down go first, lowest first, then runs moving up, highest first: as both sides of the
    runs increase, no run then overwrites rows another has yet to read."""
    if not (out.flags.c_contiguous and source.flags.c_contiguous and out.strides == source.strides):
        raise ValueError("rows move in place only within one C-contiguous buffer")
    row = out.strides[0]
    down = [run for run in runs if run[0] < run[1]]
    up = [run for run in reversed(runs) if run[0] > run[1]]
    for to, frm, length in down + up:
        # memmove: a run overlapping itself (moved by fewer rows than it has) is copied once
        ctypes.memmove(out.ctypes.data + to * row, source.ctypes.data + frm * row, length * row)


def touched_rows(memories: pl.DataFrame, previous_memories: pl.DataFrame, redo: pl.Series) -> TouchedRows:
    """Which rows a micro-batch changed, for context vectors and context texts alike.

    `redo`: the ids whose row may differ from the previous set's (read again, new or gone).
    A turn's context reads its own session alone, so the rows to compute are the redo ids
    and every turn of a session a redo id is in, now or before; the sessions come whole."""
    wanted = redo.implode()
    key = pl.concat_str([pl.col("namespace"), pl.col("session_id")], separator="\x1f")
    episodic = (pl.col("tier") == "episodic") & pl.col("session_id").is_not_null()
    touched_now = memories.filter(pl.col("id").is_in(wanted) & episodic).select(key.alias("key"))
    touched_before = previous_memories.filter(pl.col("id").is_in(wanted) & episodic).select(key.alias("key"))
    touched = pl.concat([touched_now, touched_before]).unique().get_column("key").implode()
    indexed = memories.select("id", "tier", "namespace", "session_id").with_row_index("_at").join(
        previous_memories.select("id").with_row_index("_before"), on="id", how="left", maintain_order="left"
    )
    fresh = pl.col("id").is_in(wanted) | pl.col("_before").is_null() | (episodic & key.is_in(touched))
    reused = indexed.filter(~fresh)
    return TouchedRows(indexed.filter(fresh).get_column("_at").to_numpy(), reused.get_column("_at").to_numpy(),
                       reused.get_column("_before").to_numpy(), indexed.get_column("_before").fill_null(-1).cast(pl.Int64).to_numpy())


def context_vectors_around(
    memories: pl.DataFrame, vectors: np.ndarray, previous: np.ndarray, rows: TouchedRows, *, weight: float = CONTEXT_WEIGHT,
    finish: Callable[[np.ndarray], np.ndarray] | None = None, out: np.ndarray | None = None,
) -> np.ndarray:
    """`context_vectors(memories, vectors)`, computed only for `rows.fresh` (the sessions a
    micro-batch touched); every other row keeps its vector in `previous` (the context vectors
    of the previous set, row-aligned). At 100k memories the full pass cost ~0.5 s of every
    micro-batch. `finish`, a row-wise map (the watcher's links.unit_rows), is applied to the
    fresh rows; `previous` then holds finished rows too, and no row is finished twice.
    `out`: a float32 array of the result's shape to fill (the watcher reuses its buffers)."""
    if out is None:
        out = np.empty((memories.height, np.shape(vectors)[1] if np.ndim(vectors) == 2 else 0), dtype=np.float32)
    copy_rows(out, rows.reused, previous, rows.before)
    if len(rows.fresh):
        fresh = context_vectors(memories[rows.fresh], np.asarray(vectors)[rows.fresh], weight=weight)
        out[rows.fresh] = fresh if finish is None else finish(fresh)
    return out


def aligned_to(previous_memories: pl.DataFrame, previous: pl.DataFrame) -> pl.DataFrame:
    """`previous` (id, ...) row-aligned with `previous_memories`: as it is when it already is
    (the watcher keeps its texts so), else joined by id (an id it lacks gets nulls)."""
    if previous.get_column("id").equals(previous_memories.get_column("id")):
        return previous
    return previous_memories.select("id").join(previous, on="id", how="left", maintain_order="left")


def embedding_texts_around(memories: pl.DataFrame, previous_memories: pl.DataFrame, previous_texts: pl.DataFrame, rows: TouchedRows) -> pl.DataFrame:
    """`embedding_texts(memories)`, built only for `rows.fresh` (the sessions a micro-batch
    touched); every other row keeps its text in `previous_texts` (id, text), taken by its row
    in the previous set: a join of every id cost ~20 ms a micro-batch at 100k memories."""
    previous = aligned_to(previous_memories, previous_texts.select("id", "text"))
    # a new row is fresh: its placeholder (row 0) is overwritten
    text = previous.get_column("text").gather(np.maximum(rows.previous_of, 0))
    if len(rows.fresh):
        text = text.scatter(rows.fresh, embedding_texts(memories[rows.fresh]).get_column("text"))
    return memories.select("id").with_columns(text.alias("text"))
