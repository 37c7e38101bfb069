"""Each row's two ends of a links frame as integer codes, row-aligned with the frame.

Which rows of the watcher's links touch a set of memories is asked about ten times a
micro-batch (the scored links to keep, the cap's scans, the rows to publish). Over the
870k scored links of a 100k-memory index, polars' `is_in` over two string columns took
~14 ms a time; a lookup of the codes in a boolean mask takes ~2 ms. The codes travel with
the frames: a filter keeps its rows' codes, new rows get theirs as they are appended.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import polars as pl

# above this many ids, coding goes through one polars replace over the known ids rather than
# a Python lookup per id (one column of 870k ends at start: ~0.36 s against ~0.49 s)
_VECTORISED_FROM = 50_000


class IdCodes:
    """A small integer per memory id, for the life of one watcher's index. Codes only grow:
    an id keeps its code after it is deleted, so codes held anywhere stay valid."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._codes)

    def of(self, ids: pl.Series) -> np.ndarray:
        """The codes of ids (int32, in order), new ids given the next codes."""
        codes = self._codes
        if ids.len() < _VECTORISED_FROM:
            names = ids.to_list()
            try:  # the common case, every id known: one lookup each in C (map), ~3x the generator's speed
                return np.fromiter(map(codes.__getitem__, names), dtype=np.int32, count=len(names))
            except KeyError:
                return np.fromiter((codes.setdefault(i, len(codes)) for i in names), dtype=np.int32, count=len(names))
        for new in ids.unique().to_list():
            codes.setdefault(new, len(codes))
        return ids.replace_strict(list(codes), list(codes.values()), return_dtype=pl.Int32).to_numpy()

    def mask(self, ids: Iterable[str]) -> np.ndarray:
        """A boolean per code: True at the codes of ids (an id without a code is on no row)."""
        size = len(self._codes)
        # an unknown id marks the one spare place past every code, which no row reads
        out = np.zeros(size + 1, dtype=bool)
        out[np.fromiter(map(self._codes.get, ids, repeat(size)), dtype=np.int64)] = True
        return out


@dataclass(frozen=True)
class LinkEnds:
    """The codes of source_id and target_id of every row of one links frame."""

    codes: IdCodes
    source: np.ndarray
    target: np.ndarray

    @classmethod
    def of(cls, frame: pl.DataFrame, codes: IdCodes) -> LinkEnds:
        return cls(codes, codes.of(frame.get_column("source_id")), codes.of(frame.get_column("target_id")))

    def touching(self, ids: Iterable[str]) -> np.ndarray:
        """Per row, True when an end is among ids."""
        mask = self.codes.mask(ids)
        # take, not mask[codes]: indexing converts the int32 codes to int64 first (~50% slower)
        return np.take(mask, self.source) | np.take(mask, self.target)

    def where(self, keep: np.ndarray) -> LinkEnds:
        """The ends of the rows kept by a boolean mask (as frame.filter(keep) keeps them)."""
        return LinkEnds(self.codes, self.source[keep], self.target[keep])

    def then(self, frame: pl.DataFrame) -> LinkEnds:
        """The ends of these rows followed by frame's (as pl.concat([rows, frame]) orders them)."""
        more = LinkEnds.of(frame, self.codes)
        return LinkEnds(self.codes, np.concatenate([self.source, more.source]), np.concatenate([self.target, more.target]))


def rows_touching(frame: pl.DataFrame, ends: LinkEnds, ids: Iterable[str]) -> pl.DataFrame:
    """frame's rows with an end among ids, in frame's order (`ends`: frame's)."""
    return frame.filter(pl.Series(ends.touching(ids)))


def rows_apart(frame: pl.DataFrame, ends: LinkEnds, ids: Iterable[str]) -> tuple[pl.DataFrame, LinkEnds]:
    """frame's rows with neither end among ids (incremental.kept_links), and their ends."""
    keep = ~ends.touching(ids)
    return frame.filter(pl.Series(keep)), ends.where(keep)
