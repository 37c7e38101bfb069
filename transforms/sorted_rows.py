"""Frames the watcher keeps sorted by id from one micro-batch to the next.

A micro-batch keeps almost every row of such a frame and adds a few: sorting the whole
frame again moved every column of 100k rows (~50 ms for the evidence's list columns).
Here the few rows are put in place between slices of the kept ones, which polars joins
without copying; the chunks are merged into one again once there are many of them.
`kept_per_frame` keeps what was worked out of a frame that stays from one micro-batch to
the next.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import polars as pl

MAX_CHUNKS = 64  # beyond this, operations over the frame pay for its chunks: merge them once


def with_rows_inserted(kept: pl.DataFrame, fresh: pl.DataFrame, key: str = "id") -> pl.DataFrame:
    """`pl.concat([kept, fresh]).sort(key)` where `kept` is already sorted by `key` (ties
    keep kept's rows first, as a stable sort does), built from slices of `kept` with the
    rows of `fresh` in between."""
    fresh = fresh.select(kept.columns).sort(key, maintain_order=True)
    if fresh.height == 0:
        return kept
    if kept.height == 0:
        return fresh
    # the place of each fresh row: after every kept row with a key not above its own
    places = kept.get_column(key).search_sorted(fresh.get_column(key), side="right").to_numpy()
    parts: list[pl.DataFrame] = []
    start = 0
    # fresh rows with the same place go in as one slice
    runs = np.flatnonzero(np.diff(places)) + 1
    for lo, hi in zip(np.r_[0, runs], np.r_[runs, len(places)]):
        place = int(places[lo])
        if place > start:
            parts.append(kept.slice(start, place - start))
            start = place
        parts.append(fresh.slice(int(lo), int(hi - lo)))
    if start < kept.height:
        parts.append(kept.slice(start))
    out = pl.concat(parts, rechunk=False)
    return out.rechunk() if out.n_chunks() > MAX_CHUNKS else out


def kept_per_frame(size: int) -> Callable[[Callable[[pl.DataFrame], pl.DataFrame]], Callable[[pl.DataFrame], pl.DataFrame]]:
    """A decorator: the function's result for each of the last `size` frames it was given,
    by identity, is returned again for that frame. A frame the watcher holds unchanged from
    one micro-batch to the next is then worked on once. Holding each frame keeps its id()
    from being reused by another; frames are never mutated."""

    def wrap(function: Callable[[pl.DataFrame], pl.DataFrame]) -> Callable[[pl.DataFrame], pl.DataFrame]:
        held: list[tuple[pl.DataFrame, pl.DataFrame]] = []

        @functools.wraps(function)
        def kept(frame: pl.DataFrame) -> pl.DataFrame:
            for known, result in held:
                if known is frame:
                    return result
            result = function(frame)
            held[:] = [*held[-(size - 1):], (frame, result)]
            return result

        return kept

    return wrap
