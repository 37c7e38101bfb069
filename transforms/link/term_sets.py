"""Each memory's terms as sorted integer codes, for the shared term weight of millions of pairs.

A pair's co_occurrence needs the summed rarity weight of the terms both memories have. With
the terms as codes (one flat array, a memory's codes sorted, offsets per memory), a chunk of
pairs becomes two key arrays, key = left end's position * vocabulary + code: the left ends'
keys sorted, one `searchsorted` of the right ends' keys in them (or, where the left ends' (end,
code) cells are few, one lookup in a table of them) finds every shared term, and `bincount`
sums their weights per pair. No hash join, no per-pair Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

_CHUNK = 65_536  # pairs per searchsorted: the key arrays of a chunk stay a few MB


@dataclass(frozen=True)
class TermSets:
    """Terms of the memories by row (`idx`, the row number of links.link_memories' frames)."""

    offsets: np.ndarray  # int64, one per row and one more: the codes of idx i are codes[offsets[i]:offsets[i + 1]]
    codes: np.ndarray  # int64, ascending within each memory
    weights: np.ndarray  # float64, each code's term weight in that memory
    vocabulary: int

    @classmethod
    def of(cls, frame: pl.DataFrame, rows: np.ndarray | None = None) -> TermSets:
        """From a frame with `idx` (its row number), `terms` and `term_weights` (aligned
        lists); with `rows`, only those rows' terms (the others have none): a few pairs
        among many memories need only their ends'."""
        size = frame.height
        frame = frame.select("idx", "terms", "term_weights")  # before any gather: a live frame holds every evidence column
        if rows is not None:
            frame = frame[np.asarray(rows, dtype=np.int64)]
        exploded = (
            frame.explode("terms", "term_weights").drop_nulls("terms")
            # codes in the terms' own order, whatever rows are coded: a pair's weights are then
            # summed in one order (by term) in every call, so its score has the same bits
            .with_columns(pl.col("terms").rank("dense").cast(pl.Int64).alias("code"))
            .sort("idx", "code")
            .unique(["idx", "code"], keep="first", maintain_order=True)  # a term listed twice counts once
        )
        counts = np.bincount(exploded["idx"].to_numpy(), minlength=size) if exploded.height else np.zeros(size, dtype=np.int64)
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return cls(
            offsets=offsets,
            codes=exploded["code"].to_numpy().astype(np.int64, copy=False),
            weights=exploded["term_weights"].fill_null(0.0).to_numpy().astype(np.float64, copy=False),
            vocabulary=int(exploded["code"].max()) + 1 if exploded.height else 1,
        )

    @classmethod
    def of_pairs(cls, frame: pl.DataFrame, a: np.ndarray, b: np.ndarray) -> TermSets:
        """The terms of the pairs' ends alone."""
        return cls.of(frame, np.unique(np.concatenate([np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)])))

    def shared_weights(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per pair (a[i], b[i]), the summed weight of the terms both have (float64)."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        out = np.zeros(len(a), dtype=np.float64)
        for start in range(0, len(a), _CHUNK):
            stop = min(start + _CHUNK, len(a))
            out[start:stop] = self._shared_chunk(a[start:stop], b[start:stop])
        return out

    def _flat(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in codes of every term of rows, in row order; the pair position of each)."""
        lengths = self.offsets[rows + 1] - self.offsets[rows]
        before = np.cumsum(lengths) - lengths
        positions = np.repeat(self.offsets[rows] - before, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
        return positions, np.repeat(np.arange(len(rows), dtype=np.int64), lengths)

    def _shared_chunk(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        left, of_pair = _distinct_ends(a)
        at, row_a = self._flat(left)
        bt, pair_b = self._flat(b)
        if len(at) == 0 or len(bt) == 0:
            return np.zeros(len(a), dtype=np.float64)
        keys_a = row_a * self.vocabulary + self.codes[at]  # ascending: left end first, then code
        keys_b = of_pair[pair_b] * self.vocabulary + self.codes[bt]
        cells = len(left) * self.vocabulary
        if cells <= max(_TABLE_MIN_CELLS, _TABLE_CELLS_PER_KEY * len(keys_b)):
            # a table of every (left end, code) cell: one lookup per key, where a searchsorted
            # took ~17 steps each (a chunk has a few hundred left ends at most, or a block's
            # 4,096 of a small vocabulary; a large vocabulary keeps the search)
            table = np.zeros(cells, dtype=bool)
            table[keys_a] = True
            shared = table[keys_b]
        else:
            found = np.minimum(np.searchsorted(keys_a, keys_b), len(keys_a) - 1)
            shared = keys_a[found] == keys_b
        return np.bincount(pair_b[shared], weights=self.weights[bt[shared]], minlength=len(a))


_TABLE_MIN_CELLS = 1 << 20  # a lookup table this small always pays
_TABLE_CELLS_PER_KEY = 8  # else one pays while it has at most this many cells per key looked up


def _distinct_ends(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values of `a` ascending, each pair's position among them): np.unique's,
    without its sort where it can. Candidate pairs come sorted by a (a run per left end,
    hundreds of pairs each in a dense namespace), or, from a dense block's product, ordered by
    the other end with a within the block's few thousand rows: a presence table over a's span
    then costs one pass, where sorting a 16k-pair chunk was ~1/4 of the shared weights' time."""
    if len(a) > 1 and _ascending(a):
        starts = np.flatnonzero(np.concatenate([[True], a[1:] != a[:-1]]))
        return a[starts], np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(a))))
    if len(a) == 0:
        return a, np.zeros(0, dtype=np.int64)
    low = int(a.min())
    span = int(a.max()) - low + 1
    if span > max(_TABLE_MIN_CELLS, 4 * len(a)):
        return np.unique(a, return_inverse=True)
    present = np.zeros(span, dtype=bool)
    present[a - low] = True
    position = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, position[a - low]


def _ascending(values: np.ndarray) -> bool:
    return len(values) < 2 or bool(np.all(values[1:] >= values[:-1]))
