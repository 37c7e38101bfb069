"""Calibration: the maps that put the semantic and co-occurrence components on an evidence scale.

In: a pair's raw cosine and its rarity-weighted term overlap. Out: components in [0, 1] where 1
means "as strong as this kind of evidence gets for a true link" (DESIGN.md, Scoring).

- semantic = a monotone piecewise-linear map of max(0, cosine), knots fitted for the model.
  The bundled map (calibration.json) is E[human similarity | cosine] / 2 on STS-B train + dev
  (isotonic regression, capped at 1): 1 where pairs are on average "related, sharing some
  details" (STS 2 of 5). See docs/links.md.
- co_occurrence = min(1, weighted Jaccard / co_full), where each term weighs by its rarity in
  English (common_terms.txt: ln(1 + rank) / ln(1 + count), a term not listed weighs 1), or,
  when one memory is much shorter than the other, its containment: Jaccard can be at most
  w(small) / w(large), so a short fact whose every term is in a long chat turn could never
  show full evidence. The Jaccard divided by that ceiling counts too, but only as far as the
  shared weight reaches `co_shared_full` (two rare terms' worth): one shared word between a
  one-word question and a long turn is not full evidence. The weights depend on the term
  alone, never on the corpus, so a pair's score stays pair-local and an incremental run
  equals a full one.

A calibration file (JSON, written by `ctc calibrate`) holds `semantic_knots` ([[cosine,
semantic], ...], both non-decreasing), `co_full`, optionally `co_shared_full` (default 2.0)
and the `model` it was fitted for.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

BUNDLED = "bundled"
CO_SHARED_FULL = 2.0  # shared term weight at which a short memory's containment in a long one is full evidence
_EPS = 1e-9


class CalibrationError(ValueError):
    """A calibration file that cannot be used."""


@dataclass(frozen=True)
class Calibration:
    """The semantic map's knots, the weighted overlap at which term evidence is full, and where they came from."""

    semantic_knots: tuple[tuple[float, float], ...]
    co_full: float
    model: str
    source: str = BUNDLED
    # Measured on a labelled set: (score bucket, labelled pairs scored in it, true links among them).
    reliability: tuple[tuple[str, int, int], ...] = ()
    co_shared_full: float = CO_SHARED_FULL

    @property
    def fingerprint(self) -> str:
        """What the scores depend on (not where the file lies): a change makes the next run full."""
        body = json.dumps({"semantic_knots": self.semantic_knots, "co_full": self.co_full,
                           "co_shared_full": self.co_shared_full}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:12]

    def semantic(self, cosine: np.ndarray | float) -> np.ndarray:
        """The semantic component of each cosine (negative cosines count as 0)."""
        xs, ys = zip(*self.semantic_knots)
        return np.interp(np.maximum(0.0, np.asarray(cosine, dtype=np.float64)), xs, ys)

    def cosine_floor(self, semantic: float) -> float:
        """The least cosine whose semantic component reaches `semantic` (-inf: every cosine; inf: none).

        The map is non-decreasing, so semantic >= s exactly when cosine >= this floor: the
        candidate step's cosine bounds are the score bounds read through the inverse map.
        """
        if semantic <= self.semantic(0.0) + _EPS:
            return -math.inf
        knots = self.semantic_knots
        if semantic > knots[-1][1] + _EPS:
            return math.inf
        for (x0, y0), (x1, y1) in zip(knots, knots[1:]):
            if y1 >= semantic - _EPS:
                if y1 - y0 <= _EPS:
                    return x0 if y0 >= semantic - _EPS else x1
                return x0 + (x1 - x0) * max(0.0, semantic - y0) / (y1 - y0)
        return knots[-1][0]

    def co_occurrence_bound(self, a_weight: np.ndarray | float, b_weight: np.ndarray | float) -> np.ndarray:
        """The most co_occurrence two memories of these term weights can have, whatever they share:
        Jaccard <= w(small) / w(large), and shared <= w(small) for the containment part."""
        a, b = np.asarray(a_weight, dtype=np.float64), np.asarray(b_weight, dtype=np.float64)
        small, large = np.minimum(a, b), np.maximum(a, b)
        ceiling = np.divide(small, large, out=np.zeros_like(small), where=large > 0)
        return np.maximum(np.minimum(1.0, ceiling / self.co_full), np.minimum(1.0, small / self.co_shared_full))

    def co_occurrence(self, shared: np.ndarray, a_weight: np.ndarray, b_weight: np.ndarray) -> np.ndarray:
        """The co_occurrence component of pairs with this shared term weight, as sql/pair_scores
        computes it (the same arithmetic in numpy: candidate search bounds with it)."""
        shared, a, b = (np.asarray(x, dtype=np.float64) for x in (shared, a_weight, b_weight))
        small, large = np.minimum(a, b), np.maximum(a, b)
        union = a + b - shared
        speaks = (union > 0) & (small > 0)
        jaccard = np.divide(shared, union, out=np.zeros_like(union), where=speaks)
        contained = np.minimum(np.divide(jaccard * large, small, out=np.zeros_like(union), where=speaks) / self.co_full, shared / self.co_shared_full)
        return np.where(speaks, np.maximum(np.minimum(1.0, jaccard / self.co_full), np.minimum(1.0, contained)), 0.0)

    def prefix_weights(self, co_occurrence: float) -> tuple[float, float]:
        """For pairs that need co_occurrence >= c: (j, x) such that their shared weight reaches
        j * w(M) or x, for each of the two memories M (see candidates.in_prefix).

        Jaccard evidence c needs Jaccard >= c * co_full, so shared >= c * co_full * w(M);
        containment evidence c needs shared >= c * co_shared_full."""
        return co_occurrence * self.co_full, co_occurrence * self.co_shared_full

    def to_json(self) -> dict:
        return {"model": self.model, "semantic_knots": [list(k) for k in self.semantic_knots], "co_full": self.co_full,
                "co_shared_full": self.co_shared_full}


def calibration_from_dict(doc: dict, source: str) -> Calibration:
    """A validated calibration from a parsed file."""
    try:
        knots = tuple((float(x), float(y)) for x, y in doc["semantic_knots"])
        co_full = float(doc["co_full"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CalibrationError(f"{source}: needs semantic_knots [[cosine, semantic], ...] and co_full ({exc})") from None
    if len(knots) < 2:
        raise CalibrationError(f"{source}: semantic_knots needs at least two knots")
    xs, ys = zip(*knots)
    if any(b <= a for a, b in zip(xs, xs[1:])) or any(b < a for a, b in zip(ys, ys[1:])):
        raise CalibrationError(f"{source}: semantic_knots must rise: cosines strictly, semantic values never fall")
    if xs[0] > 0.0 or xs[-1] < 1.0 or min(ys) < 0.0 or max(ys) > 1.0:
        raise CalibrationError(f"{source}: semantic_knots must span cosine 0..1 with values in [0, 1]")
    if not 0.0 < co_full <= 1.0:
        raise CalibrationError(f"{source}: co_full must be in (0, 1], got {co_full}")
    try:
        co_shared_full = float(doc.get("co_shared_full", CO_SHARED_FULL))
    except (TypeError, ValueError) as exc:
        raise CalibrationError(f"{source}: co_shared_full must be a number ({exc})") from None
    if not co_shared_full > 0.0:
        raise CalibrationError(f"{source}: co_shared_full must be above 0, got {co_shared_full}")
    try:
        reliability = tuple((str(b), int(n), int(t)) for b, n, t in doc.get("reliability", ()))
    except (TypeError, ValueError) as exc:
        raise CalibrationError(f"{source}: reliability must be [[bucket, pairs, true], ...] ({exc})") from None
    return Calibration(knots, co_full, str(doc.get("model", "")), source, reliability, co_shared_full)


def load_calibration(path: str | None = None) -> Calibration:
    """The calibration a config names, or the bundled one (path None); read again when the file changes."""
    try:
        stamp = os.stat(path).st_mtime_ns if path is not None else 0
    except OSError:
        stamp = -1
    return _load_calibration(path, stamp)


@functools.lru_cache(maxsize=8)
def _load_calibration(path: str | None, stamp: int) -> Calibration:
    if path is None:
        text = resources.files(__package__).joinpath("calibration.json").read_text(encoding="utf-8")
        return calibration_from_dict(json.loads(text), BUNDLED)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CalibrationError(f"{path}: calibration file not found (run `ctc calibrate`, or drop scoring.calibration)") from None
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{path}: not JSON ({exc})") from None
    return calibration_from_dict(doc, str(path))


@functools.lru_cache(maxsize=1)
def _term_ranks() -> dict[str, int]:
    text = resources.files(__package__).joinpath("common_terms.txt").read_text(encoding="utf-8")
    terms = [line for line in text.splitlines() if line and not line.startswith("#")]
    return {term: rank for rank, term in enumerate(terms, start=1)}


@functools.lru_cache(maxsize=1)
def common_term_weights() -> dict[str, float]:
    """Weight of every listed common term (a term not listed weighs 1)."""
    ranks = _term_ranks()
    return {term: math.log1p(rank) / math.log1p(len(ranks)) for term, rank in ranks.items()}


def term_weight(term: str) -> float:
    """A term's rarity weight in (0, 1]: ln(1 + rank) / ln(1 + count) among common English terms, 1 if not among them."""
    ranks = _term_ranks()
    rank = ranks.get(term)
    if rank is None:
        return 1.0
    return math.log1p(rank) / math.log1p(len(ranks))


def term_weights(terms: Iterable[str]) -> list[float]:
    return [term_weight(t) for t in terms]


def weighted_overlap(a: Sequence[str], b: Sequence[str]) -> float:
    """Rarity-weighted Jaccard of two term sets: shared weight over union weight (what sql/pair_scores computes)."""
    sa, sb = set(a), set(b)
    union = sum(term_weight(t) for t in sa | sb)
    return sum(term_weight(t) for t in sa & sb) / union if union > 0 else 0.0


def isotonic_at(x: np.ndarray, y: np.ndarray, grid: Sequence[float]) -> np.ndarray:
    """Non-decreasing least-squares fit of y on x (pool adjacent violators), read at grid;
    x sorted ascending, y in the same order."""
    blocks: list[list[float]] = []  # [sum, count, last x]
    for xi, yi in zip(x, y):
        blocks.append([yi, 1.0, xi])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, n, last = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
            blocks[-1][2] = last
    bx = np.array([b[2] for b in blocks])
    by = np.array([b[0] / b[1] for b in blocks])
    return np.array([by[min(np.searchsorted(bx, g), len(by) - 1)] for g in grid])


def fitted_semantic_knots(cosines: np.ndarray, related: np.ndarray, grid: Sequence[float]) -> tuple[tuple[float, float], ...]:
    """Knots of a monotone map from labelled cosines: the isotonic share of related pairs, scaled so its top is 1.

    Pool-adjacent-violators over the pairs sorted by cosine, read at the grid points, then
    divided by the share among the most similar pairs: 1 is as strong as this evidence gets.
    """
    order = np.argsort(cosines, kind="stable")
    x = np.maximum(0.0, np.asarray(cosines, dtype=np.float64)[order])
    y = np.asarray(related, dtype=np.float64)[order]
    values = np.maximum.accumulate(isotonic_at(x, y, grid))
    top = values[-1] if values[-1] > 0 else 1.0
    knots = [(0.0, 0.0)] + [(float(g), float(min(1.0, v / top))) for g, v in zip(grid, values) if g > 0]
    knots[-1] = (max(1.0, knots[-1][0]), knots[-1][1])
    return tuple(knots)


COSINE_GRID = tuple(round(0.05 * i, 2) for i in range(21))
MIN_LABELS = 5  # of each kind: fewer cannot shape a map


def fitted_calibration(cosines: Sequence[float], overlaps: Sequence[float], related: Sequence[bool], *, model: str, source: str) -> Calibration:
    """A calibration fitted from labelled pairs (their cosine, weighted term overlap and label).

    semantic: the isotonic share of related pairs by cosine, scaled so its top is 1
    (fitted_semantic_knots). co_full: the median weighted overlap of the related pairs that
    share any term, so a typical true link's shared terms count as full evidence.
    """
    related = np.asarray(related, dtype=bool)
    if related.sum() < MIN_LABELS or (~related).sum() < MIN_LABELS:
        raise CalibrationError(
            f"need at least {MIN_LABELS} related and {MIN_LABELS} unrelated pairs, got {int(related.sum())} and {int((~related).sum())}"
        )
    knots = fitted_semantic_knots(np.asarray(cosines, dtype=np.float64), related, COSINE_GRID)
    shared = np.asarray(overlaps, dtype=np.float64)[related]
    shared = shared[shared > 0]
    co_full = float(np.clip(np.median(shared), 0.1, 1.0)) if len(shared) else 1.0
    return calibration_from_dict({"model": model, "semantic_knots": knots, "co_full": round(co_full, 4)}, source)
