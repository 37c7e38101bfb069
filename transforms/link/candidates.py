"""Candidate pairs: every pair that can reach the threshold, never all N^2 pairs at default settings.

The bound. For a pair (a, b) without an explicit reference (cross_reference = 0),
with s = semantic <= 1, c = co_occurrence, t = temporal <= t_max:

    score = (w_s*s + w_c*c + w_t*t) / W      W = 1 when temporal applies,
                                             W = w_s + w_c + w_x when it does not

so score >= thr needs   c >= c_min   = (thr*W - w_s - w_t*t_max) / w_c     (taking s = 1)
                  and   s >= s_min   = (thr*W - w_t*t_max) / w_s           (taking c = 0)
                  and   s >= s_floor = (thr*W - w_t*t_max - w_c) / w_s     (taking c = 1)

Defaults (0.40/0.25/0.15/0.20, thr 0.6): s_min > 1 in every case, so a pair sharing
no term can never qualify. Routes, each with its own t_max:
- near, d = 0 .. 8: both ends timestamped, in time buckets of width h = 2*tau/8
  that are d apart, so more than (d-1)*h apart and t_max = exp(-(d-1)/4) (1 for d <= 1):
  c_min from 0.20 (d <= 1) to 0.70 (d = 8), s_floor from 0.50 to 0.81;
- far: both timestamped, more than 2*tau apart (t_max = e^-2): c_min = 0.72, s_floor
  = (0.6 - 0.15*e^-2 - 0.25) / 0.4 = 0.824;
- untimed: an end without a timestamp (W = 0.85, t = 0): c_min = 0.44, s_floor =
  (0.51 - 0.25) / 0.4 = 0.65.
The prefix filter of set-similarity joins turns each c_min into an exact candidate
join: order terms rarest first (namespace document frequency, then the term); c >= c_min
needs a shared term weight of at least min(j*w(M), x) for each end M (in_prefix: j from
the Jaccard evidence, x from the containment evidence), and the rarest shared term lies
where M's remaining weight still reaches that. So joining on those prefixes (and, on the
near routes, on buckets d apart) loses no qualifying pair.

A fixed vocabulary makes some of those join groups (one term, maybe one bucket) grow
with N, and their rows quadratically. So a group of a common term (document share above
`max_term_share`) or a large one (_SEARCH_MIN_PAIRS left x right rows) is not joined:
it is searched by cosine (transforms/link/neighbours.py, `grouped_pairs_at_floor`) keeping the
pairs with cosine >= the route's s_floor, which every qualifying pair of the route has.
The group keys are the same, only the per-pair check moves before materialising, so
the result is the same as joining everything. Then each candidate's upper bound is
checked in numpy: its real cosine and temporal, c first bounded by the two term weights,
then, where that bound passes, c itself from the shared term weight (TermSets), so what
reaches SQL scoring is the pairs that score within float32 cosine slack of the threshold.

When a lowered threshold makes s_min <= 1, the pairs sharing no term are found by a
range search on cosine (s >= max(s_min(a), s_min(b))), exact below `ann_min_memories`
memories in a namespace and approximate from there (transforms/link/neighbours.py), and
the term routes use every term. Explicit references are always candidates.
"""

from __future__ import annotations

import contextlib
import math
import sys

import numpy as np
import polars as pl

from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.calibration import Calibration, load_calibration
from crosstier.transforms.link.term_sets import TermSets
from crosstier.transforms.link.neighbours import exact_pair_cosines, gathered_cosines, grouped_pairs_at_floor, similar_pairs

try:  # present with scikit-learn; without it the searches run with BLAS's own thread count
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None

PAIR_SCHEMA = {"a_idx": pl.Int64, "b_idx": pl.Int64}
_EPS = 1e-9
_COS_SLACK = 1e-5  # float32 products may differ from the exact pair cosine by this much
_CHUNK = 16_384  # pairs per gather: small enough to stay in cache
_FOCUS_ROWS = 256  # focus rows per product in partner_pairs: 100 MB of cosines against 100k rows
# How far a bfloat16 product of two unit vectors may be from their float32 cosine: each input
# rounded to bf16 (relative 2^-8) moves a_i*b_i by at most (2*2^-8 + 2^-16)|a_i*b_i|, which sums
# to 0.0079 over unit vectors (Cauchy-Schwarz); sums accumulate in float32 (~2e-5 over 384
# terms); the product is rounded to bf16 once more (2^-8 of at most 1: 0.0039). 0.0118 in all.
_BF16_PRODUCT_ERROR = 0.0125
# Fewer focus rows than this multiply in float32: copying 100k rows to bfloat16 costs ~60 ms,
# more than a float32 product of a few rows (~25 ms for 8 at 100k)
_BF16_MIN_FOCUS_ROWS = 128
_SEARCH_MIN_PAIRS = 1024  # a term group with this many left x right rows is searched by matmul, not joined
_NEAR_STEPS = 8  # the near span (2*tau) is cut into this many time buckets
# Where a cosine search is needed anyway, it takes the pairs whose semantic alone gets within
# w_c*_SPLIT_CO of the threshold; the term joins then need co_occurrence >= _SPLIT_CO.
_SPLIT_CO = 0.5


def _calibration(scoring: ScoringConfig) -> Calibration:
    return load_calibration(scoring.calibration)


def _route_needs(scoring: ScoringConfig) -> dict[str, float]:
    """Per route, what w_s*s + w_c*c must reach: thr*W - w_t*t_max.

    W leaves cross_reference out: a pair without a reference scores highest when neither end
    cites anything (the component is silent, not 0), so that is the bound.
    """
    w = scoring.weights
    thr = scoring.min_correlation_score
    w_s, w_c, w_t = w["semantic"], w["co_occurrence"], w["temporal"]
    far_t = math.exp(-2.0)  # ends more than 2*tau apart
    return {
        name: thr * total - w_t * t_max
        for name, total, t_max in (("near", w_s + w_c + w_t, 1.0), ("far", w_s + w_c + w_t, far_t), ("untimed", w_s + w_c, 0.0))
    }


def _bound(weight: float, need: float) -> float:
    """The least x with weight*x >= need (-inf / inf when weight is 0)."""
    if weight > 0:
        return need / weight
    return -math.inf if need <= 0 else math.inf


def route_bounds(scoring: ScoringConfig) -> dict[str, tuple[float, float]]:
    """(c_min, s_min) per route, in component units: 'near' and 'far' (both timestamped), 'untimed'."""
    w_s, w_c = scoring.weights["semantic"], scoring.weights["co_occurrence"]
    return {name: (_bound(w_c, need - w_s), _bound(w_s, need)) for name, need in _route_needs(scoring).items()}


def route_floors(scoring: ScoringConfig) -> dict[str, float]:
    """Per route, the least semantic component any qualifying pair of it has: s_min taken with c = 1.

    score >= thr needs w_s*s >= thr*W - w_t*t_max - w_c*c >= thr*W - w_t*t_max - w_c.
    """
    w_s, w_c = scoring.weights["semantic"], scoring.weights["co_occurrence"]
    return {name: _bound(w_s, need - w_c) for name, need in _route_needs(scoring).items()}


def search_splits(scoring: ScoringConfig) -> dict[str, float | None]:
    """Per kind of end ('timed', 'untimed'), the semantic level from which the cosine search finds pairs.

    None when no pair sharing no term can qualify (s_min > 1): no search. Otherwise the
    search takes every pair with s >= split, and the term joins only need the pairs below it,
    whose c must reach (need - w_s*split) / w_c: a split under s_min buys a positive c_min, so
    a prefix filter, at the price of more searched pairs (_SPLIT_CO sets the balance).
    """
    routes = route_bounds(scoring)
    floors = route_floors(scoring)
    w_s, w_c = scoring.weights["semantic"], scoring.weights["co_occurrence"]
    needs = _route_needs(scoring)
    out: dict[str, float | None] = {}
    for kind, route in (("timed", "near"), ("untimed", "untimed")):
        s_min = routes[route][1]
        if s_min > 1.0 + _EPS:
            out[kind] = None
            continue
        wanted = _bound(w_s, needs[route] - w_c * _SPLIT_CO)
        out[kind] = min(s_min, max(floors[route], wanted))
    return out


def _route_split(scoring: ScoringConfig, route: str) -> float:
    """The semantic level below which a pair of this route is the term joins' to find (1: all of them)."""
    splits = search_splits(scoring)
    timed = 1.0 if splits["timed"] is None else splits["timed"]
    if route != "untimed":
        return timed
    # a pair with an untimed end is searched at the larger of its two ends' floors
    return max(timed, 1.0 if splits["untimed"] is None else splits["untimed"])


def _co_min(scoring: ScoringConfig, need: float, route: str) -> float:
    """The least co_occurrence a pair of the route below the split needs (inf: none can qualify, 0: any)."""
    w_s, w_c = scoring.weights["semantic"], scoring.weights["co_occurrence"]
    c_min = _bound(w_c, need - w_s * _route_split(scoring, route))
    if c_min > 1.0 + _EPS:
        return math.inf
    return max(0.0, c_min)


def route_co_mins(scoring: ScoringConfig) -> dict[str, float]:
    """Per route ('far', 'untimed'), the least co_occurrence its term join needs."""
    needs = _route_needs(scoring)
    return {name: _co_min(scoring, needs[name], name) for name in ("far", "untimed")}


def route_cosine_floors(scoring: ScoringConfig) -> dict[str, float]:
    """Per route, the least cosine any qualifying pair of it has: its floor read through the inverse map."""
    calibration = _calibration(scoring)
    return {name: calibration.cosine_floor(floor) for name, floor in route_floors(scoring).items()}


def time_bucket_seconds(scoring: ScoringConfig) -> float:
    """Width of the time buckets of the near routes: 2*tau / _NEAR_STEPS."""
    return 2.0 * scoring.tau_days * 86400.0 / _NEAR_STEPS


def near_steps(scoring: ScoringConfig) -> list[tuple[int, float, float]]:
    """(bucket distance d, least co_occurrence, cosine floor) of each near route, d = 0 .. _NEAR_STEPS.

    Two timestamped ends d >= 2 buckets (of width h = 2*tau/_NEAR_STEPS) apart are more
    than (d-1)*h apart, so t <= t_max(d) = exp(-(d-1)*h/tau); d <= 1 gives t_max = 1.
    The smaller t_max, the larger the co_occurrence needed (a shorter prefix) and the higher the
    floor, so pairs some days apart cost far less than same-day ones. Ends more than 2*tau
    apart (d > _NEAR_STEPS) are the 'far' route's.
    """
    w = scoring.weights
    w_s, w_c, w_t = w["semantic"], w["co_occurrence"], w["temporal"]
    calibration = _calibration(scoring)
    h_over_tau = 2.0 / _NEAR_STEPS
    steps = []
    for d in range(_NEAR_STEPS + 1):
        t_max = 1.0 if d <= 1 else math.exp(-(d - 1) * h_over_tau)
        need = scoring.min_correlation_score * (w_s + w_c + w_t) - w_t * t_max
        steps.append((d, _co_min(scoring, need, "near"), calibration.cosine_floor(_bound(w_s, need - w_c))))
    return steps


def in_prefix(co_min: float, calibration: Calibration) -> pl.Expr:
    """Whether a ranked term is within its memory's prefix for a join on co_occurrence >= co_min.

    co_occurrence >= c needs the Jaccard evidence (weighted Jaccard >= j = c*co_full, so a
    shared weight >= j*w(A) and >= j*w(B)) or the containment evidence (a shared weight >= x =
    c*co_shared_full): either way, for each end M the shared weight reaches min(j*w(M), x). The
    first shared term in the global order then has at least that much of M's weight from it on
    (`suffix_w`): so joining on terms with suffix_w >= min(j*total_w, x) loses no pair.
    """
    if co_min <= 0:
        return pl.lit(True)
    if co_min > 1:
        return pl.lit(False)
    j, x = calibration.prefix_weights(co_min)
    return pl.col("suffix_w") >= pl.min_horizontal(j * pl.col("total_w"), pl.lit(x)) - _EPS


def ranked_terms(memories: pl.DataFrame) -> pl.DataFrame:
    """One row per (memory, term): the term's position in the memory's rarest-first order, its weight,
    the weight of it and every later term (`suffix_w`) and the memory's total (`total_w`)."""
    exploded = (
        memories.select("idx", "namespace", "terms", "term_weights")
        .explode("terms", "term_weights")
        .rename({"terms": "term", "term_weights": "w"})
        .drop_nulls("term")
    )
    df = exploded.group_by("namespace", "term").agg(pl.len().alias("df"))
    return (
        exploded.join(df, on=["namespace", "term"])
        .sort("idx", "df", "term")
        .with_columns(
            pl.int_range(pl.len()).over("idx").alias("pos"),
            pl.col("w").cum_sum(reverse=True).over("idx").alias("suffix_w"),
            pl.col("w").sum().over("idx").alias("total_w"),
        )
    )


def _join(left: pl.DataFrame, right: pl.DataFrame, on: list[str]) -> pl.DataFrame:
    """(a_idx, b_idx) of rows sharing the keys, a != b, ordered a < b."""
    pairs = left.select(*on, pl.col("idx").alias("a")).join(right.select(*on, pl.col("idx").alias("b")), on=on)
    return pairs.filter(pl.col("a") != pl.col("b")).select(
        pl.min_horizontal("a", "b").alias("a_idx"), pl.max_horizontal("a", "b").alias("b_idx")
    ).unique()


def _flat_lists(column: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """A list column as one flat int64 array and the offsets of its rows."""
    offsets = np.zeros(column.len() + 1, dtype=np.int64)
    np.cumsum(column.list.len().to_numpy(), out=offsets[1:])
    return column.explode().to_numpy().astype(np.int64), offsets


def _one_blas_thread() -> contextlib.AbstractContextManager:
    """Many small matrix products: one BLAS thread each is ~10x faster than threads waking per product."""
    return threadpool_limits(limits=1, user_api="blas") if threadpool_limits else contextlib.nullcontext()


def _shared_key_pairs(
    left: pl.DataFrame, right: pl.DataFrame, on: list[str], vectors: np.ndarray, floor: float
) -> pl.DataFrame:
    """Pairs of a left and a right row sharing the keys `on` (a term, and maybe a time bucket), a < b.

    A key group that is small is joined (every pair of it is a candidate). A group of a
    common term (`common` set on its rows) or a large one (at least _SEARCH_MIN_PAIRS
    left x right rows) is searched by blocked matmul instead and keeps only its pairs
    with cosine >= floor, the least cosine any pair of this route needs to qualify: so
    a term whose postings grow with N costs matrix products, not joined rows.
    """
    if left.height == 0 or right.height == 0:
        return pl.DataFrame(schema=PAIR_SCHEMA)
    sizes = left.group_by(on).agg(pl.len().alias("n_left"), pl.col("common").first()).join(
        right.group_by(on).agg(pl.len().alias("n_right")), on=on
    )
    searched = sizes.filter(
        pl.col("common") | (pl.col("n_left").cast(pl.Int64) * pl.col("n_right") >= _SEARCH_MIN_PAIRS)
    ).select(on)
    out = [_join(left.join(searched, on=on, how="anti"), right, on)]
    if searched.height and floor <= 1.0 + _COS_SLACK:
        groups = (
            left.join(searched, on=on, how="semi").group_by(on).agg(pl.col("idx").sort().alias("l"))
            .join(right.join(searched, on=on, how="semi").group_by(on).agg(pl.col("idx").sort().alias("r")), on=on)
            .sort(on)
        )
        l_flat, l_off = _flat_lists(groups["l"])
        r_flat, r_off = _flat_lists(groups["r"])
        with _one_blas_thread():
            pairs = grouped_pairs_at_floor(l_flat, l_off, r_flat, r_off, vectors, floor)
        out.append(pl.DataFrame({"a_idx": pairs[:, 0], "b_idx": pairs[:, 1]}, schema=PAIR_SCHEMA).unique())
    return pl.concat([frame.cast(PAIR_SCHEMA) for frame in out])


def term_pairs(
    memories: pl.DataFrame, vectors: np.ndarray, scoring: ScoringConfig, focus: pl.Series | None,
    ranked: pl.DataFrame | None = None, settled: np.ndarray | None = None,
) -> pl.DataFrame:
    """Pairs found by the prefix-filtered term joins of the routes (see _shared_key_pairs).

    Near routes (both ends timestamped, d time buckets apart, d = 0 .. _NEAR_STEPS): the
    join key is (namespace, term, bucket), the left side probing bucket + d (and - d when
    only the focus rows probe). Far route (both timestamped, any distance; it is needed
    for ends more than 2*tau apart) and untimed route (an end without a timestamp): the
    key is (namespace, term). `ranked`: ranked_terms(memories), when the caller already has it.
    `settled` (bool per row): rows left out of every join (candidate_pairs_with_cosines); the
    others keep their prefixes and common terms, which the whole namespace decides.
    """
    co_mins = route_co_mins(scoring)
    floors = route_cosine_floors(scoring)
    calibration = _calibration(scoring)
    bucket = time_bucket_seconds(scoring)
    info = memories.select(
        "idx",
        pl.col("timestamp").is_not_null().alias("timed"),
        (pl.col("timestamp").dt.epoch("us").cast(pl.Float64) / 1e6 / bucket).floor().cast(pl.Int64).alias("bucket"),
        (focus if focus is not None else pl.lit(True)).alias("focus"),
    )
    ns_size = memories.group_by("namespace").agg(pl.len().alias("ns_size"))
    ranked = (ranked if ranked is not None else ranked_terms(memories)).join(ns_size, on="namespace").with_columns(
        (pl.col("df") > scoring.max_term_share * pl.col("ns_size")).alias("common")
    ).drop("df", "ns_size")
    if settled is not None:
        info = info.filter(pl.Series(~settled))
    ranked = ranked.join(info, on="idx")
    timed_terms = ranked.filter("timed")
    out = []
    for d, co_min, floor in near_steps(scoring):
        if co_min > 1:
            continue
        timed = timed_terms.filter(in_prefix(co_min, calibration))
        offsets = [d] if focus is None or d == 0 else [-d, d]
        probe = timed.filter("focus").with_columns(
            (pl.col("bucket") + pl.lit(offsets, dtype=pl.List(pl.Int64))).alias("bucket")
        ).explode("bucket")
        out.append(_shared_key_pairs(probe, timed, ["namespace", "term", "bucket"], vectors, floor))
    for name in ("far", "untimed"):
        if co_mins[name] > 1:
            continue
        entries = ranked.filter(in_prefix(co_mins[name], calibration))
        on = ["namespace", "term"]
        if name == "far":
            timed = entries.filter("timed")
            out.append(_shared_key_pairs(timed.filter("focus"), timed, on, vectors, floors[name]))
        else:
            untimed = entries.filter(~pl.col("timed"))
            out.append(_shared_key_pairs(untimed.filter("focus"), entries, on, vectors, floors[name]))
            if focus is not None:
                out.append(_shared_key_pairs(entries.filter("focus"), untimed, on, vectors, floors[name]))
    if not out:
        return pl.DataFrame(schema=PAIR_SCHEMA)
    return pl.concat(out).unique()


def reference_pairs(memories: pl.DataFrame, focus: pl.Series | None) -> pl.DataFrame:
    """Pairs joined by an explicit reference (`ref_ids`), within a namespace."""
    refs = memories.select("idx", "namespace", "ref_ids", (focus if focus is not None else pl.lit(True)).alias("focus"))
    refs = refs.explode("ref_ids").drop_nulls("ref_ids")
    ids = memories.select(pl.col("idx").alias("other"), pl.col("id").alias("ref_ids"), "namespace",
                          (focus if focus is not None else pl.lit(True)).alias("other_focus"))
    pairs = refs.join(ids, on=["ref_ids", "namespace"]).filter(
        (pl.col("idx") != pl.col("other")) & (pl.col("focus") | pl.col("other_focus"))
    )
    return pairs.select(
        pl.min_horizontal("idx", "other").alias("a_idx"), pl.max_horizontal("idx", "other").alias("b_idx")
    ).unique().cast(PAIR_SCHEMA)


def semantic_floor(memories: pl.DataFrame, scoring: ScoringConfig) -> np.ndarray:
    """Per memory, the cosine from which the search finds its pairs (inf: none; see search_splits).

    A pair is searched at the larger of its two ends' floors: timed ends at the timed split,
    an untimed end at the untimed one.
    """
    splits = search_splits(scoring)
    calibration = _calibration(scoring)
    floor = {kind: math.inf if split is None else calibration.cosine_floor(split) for kind, split in splits.items()}
    timed = memories["timestamp"].is_not_null().to_numpy()
    return np.where(timed, floor["timed"], floor["untimed"]).astype(np.float64)


def similarity_pairs(
    memories: pl.DataFrame, embeddings: np.ndarray, scoring: ScoringConfig, focus: pl.Series | None,
    settled: np.ndarray | None = None,
) -> pl.DataFrame:
    """Pairs with cosine >= max(floor(a), floor(b)) (lowered thresholds only): a range search per
    namespace, exact while the namespace is smaller than `ann_min_memories` (transforms/link/neighbours.py).
    `settled` rows are left out of the exact search (candidate_pairs_with_cosines); the
    approximate one keeps them, as its index is built once for every block of the namespace."""
    floor = semantic_floor(memories, scoring)
    searchable = floor <= 1.0 + _COS_SLACK
    if not searchable.any():
        return pl.DataFrame(schema=PAIR_SCHEMA)
    focus_mask = focus.to_numpy() if focus is not None else np.ones(len(memories), dtype=bool)
    namespaces = memories["namespace"].to_numpy()
    found = []
    for namespace in np.unique(namespaces[searchable]):
        members = np.flatnonzero(searchable & (namespaces == namespace))
        if settled is not None and len(members) < scoring.ann_min_memories:
            members = members[~settled[members]]
        queries = members[focus_mask[members]]
        found.append(similar_pairs(
            embeddings, members, queries, floor,
            ann_min_memories=scoring.ann_min_memories, ann_probes=scoring.ann_probes,
        ))
    # each namespace's pairs come once each (similar_pairs) and namespaces are disjoint: no unique needed
    pairs = np.concatenate(found) if found else np.zeros((0, 2), dtype=np.int64)
    return pl.DataFrame({"a_idx": pairs[:, 0], "b_idx": pairs[:, 1]}).cast(PAIR_SCHEMA)


def without_copy_pairs(pairs: pl.DataFrame, copy_keys: pl.Series | None) -> pl.DataFrame:
    """The pairs less those of two copies of one text (equal `copy_keys`: copies.copy_key per
    row of the frame the pairs index; None keeps every pair).

    The fold (copies.collapsed_copy_links) drops every discovered link inside a copy group
    and links the copies along time instead, and no other step reads such a link (the
    undated origins and the cap run after the fold, and a copy's end never drops a link in
    cap_reach). So scoring them finds nothing that is published, while their number grows
    with the square of the group: with a model's vectors, every "ok" of a chat log has one
    vector, and 8 such lines with ~2,000 copies each were 85% of the 5.8M links a 100k
    corpus stored before the cap. A pair stops being one only when an end's text changes,
    which makes that end changed: an incremental run scores it again."""
    if copy_keys is None or pairs.height == 0:
        return pairs
    same = copy_keys.gather(pairs.get_column("a_idx")) == copy_keys.gather(pairs.get_column("b_idx"))
    return pairs.filter(~same)


def bounded_pairs(
    memories: pl.DataFrame, embeddings: np.ndarray, scoring: ScoringConfig, pairs: pl.DataFrame,
    cosines: np.ndarray | None = None, term_sets: TermSets | None = None, shared_weights: np.ndarray | None = None,
    bars: np.ndarray | None = None, with_bound: bool = False,
) -> pl.DataFrame:
    """The pairs whose score upper bound reaches the threshold (no explicit reference assumed),
    each with its `shared_weight` (the summed weight of the terms both ends have).

    Once a pair is known, its cosine (so its semantic component) and temporal are cheap
    (numpy). The term overlap is first bounded by the two memories' term weights
    (Calibration.co_occurrence_bound); the pairs that still reach the threshold get their
    exact co_occurrence (TermSets.shared_weights, Calibration.co_occurrence), and the bound
    again: at 50k dense memories the weights alone let 15.8M pairs through to SQL scoring,
    of which 6M qualify. cross_reference is taken as silent (the larger score). `cosines`:
    the pairs' float32 cosines where the caller's own product gave them (within _COS_SLACK,
    as these are). Without them, the kept pairs carry their exact cosine as a `cosine`
    column, computed from the vectors gathered for the bound (neighbours.gathered_cosines):
    scoring reads it instead of gathering every pair's two vectors a second time.
    `term_sets`: TermSets.of(memories), when the caller scores many blocks of one frame;
    `shared_weights`: the pairs' own, where an earlier bound computed them.
    `bars` (per memory row, cap_reach.cap_bars): a pair whose bound stays below the bar at
    both ends is beyond the cap's reach, so it is left out too (a pair with an explicit
    reference comes by the references route, which this does not filter). `with_bound`: each
    kept pair's upper bound as a `bound` column too.
    """
    w = scoring.weights
    calibration = _calibration(scoring)
    a = pairs["a_idx"].to_numpy()
    b = pairs["b_idx"].to_numpy()
    terms = term_sets if term_sets is not None or shared_weights is not None else TermSets.of_pairs(memories, a, b)
    weight, stamps = _weights_and_stamps(memories)
    shared = np.full(len(a), np.nan, dtype=np.float64)
    upper = np.full(len(a), np.nan, dtype=np.float64)
    floor = scoring.min_correlation_score - _EPS * 1e3

    def reaches(rows: np.ndarray, cosines: np.ndarray) -> np.ndarray:
        """Per pair (positions `rows`, float32 `cosines`): does its upper bound reach the threshold?"""
        ia, ib = a[rows], b[rows]
        temporal, timed = _temporal(stamps, ia, ib, scoring.tau_days)
        total = w["semantic"] + w["co_occurrence"] + np.where(timed, w["temporal"], 0.0)
        rest = w["semantic"] * calibration.semantic(np.clip(cosines + _COS_SLACK, 0.0, 1.0)) + w["temporal"] * temporal

        def score(co: np.ndarray, at: np.ndarray | slice = slice(None)) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(total[at] > 0, (rest[at] + w["co_occurrence"] * co) / total[at], 0.0)

        keep = score(calibration.co_occurrence_bound(weight[ia], weight[ib])) >= floor
        near = np.flatnonzero(keep)
        exact = terms.shared_weights(ia[near], ib[near]) if shared_weights is None else shared_weights[rows[near]]
        shared[rows[near]] = exact
        bound = score(calibration.co_occurrence(exact, weight[ia[near]], weight[ib[near]]), near)
        upper[rows[near]] = bound
        keep[near] = bound >= floor
        if bars is not None:
            keep[near] &= ~beyond_bars(bound, bars, ia[near], ib[near])
        return keep

    bound_column = [pl.Series("bound", upper)] if with_bound else []
    if cosines is None:
        exact = gathered_cosines(embeddings, a, b, reaches)[1]
        kept = pl.Series(~np.isnan(exact))
        return pairs.with_columns(pl.Series("cosine", exact, dtype=pl.Float64), pl.Series("shared_weight", shared), *bound_column).filter(kept)
    cosines = np.asarray(cosines, dtype=np.float32)
    keep = np.concatenate([reaches(np.arange(start, min(start + _CHUNK, len(a))), cosines[start:start + _CHUNK])
                           for start in range(0, len(a), _CHUNK)]) if len(a) else np.zeros(0, dtype=bool)
    return pairs.with_columns(pl.Series("shared_weight", shared), *bound_column).filter(pl.Series(keep))


def _weights_and_stamps(memories: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each memory's summed term weight, and its timestamp in epoch seconds (NaN: undated):
    what the bounds of a pair's score read of its ends."""
    return (memories["term_weights"].list.sum().fill_null(0.0).to_numpy().astype(np.float64),
            memories["timestamp"].dt.epoch("us").to_numpy().astype(np.float64) / 1e6)


def _temporal(stamps: np.ndarray, a: np.ndarray, b: np.ndarray, tau_days: float) -> tuple[np.ndarray, np.ndarray]:
    """(temporal, timed) of each pair (a[i], b[i]) as sql/pair_scores computes it (0 and False
    where an end is undated), from _weights_and_stamps' timestamps."""
    gap = np.abs(stamps[a] - stamps[b])
    timed = ~np.isnan(gap)
    return np.where(timed, np.exp(-np.nan_to_num(gap) / (86400.0 * tau_days)), 0.0), timed


def beyond_bars(bound: np.ndarray, bars: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per pair (a[i], b[i]) with an upper bound of its score: does the bound stay under the bar
    (cap_reach.cap_bars; NaN: none known) at both ends, so the pair is beyond the cap's reach?
    _EPS: numpy's exp and division may differ from DuckDB's in the last bits."""
    with np.errstate(invalid="ignore"):
        return (bound + _EPS < bars[a]) & (bound + _EPS < bars[b])


def within_bars(pairs: pl.DataFrame, bars: np.ndarray) -> pl.DataFrame:
    """The pairs whose upper `bound` (bounded_pairs' `with_bound`) reaches the bar at one end
    at least: bounded_pairs' `bars` rule, for pairs bounded before the bars were known."""
    beyond = beyond_bars(pairs["bound"].to_numpy().astype(np.float64), bars, pairs["a_idx"].to_numpy(), pairs["b_idx"].to_numpy())
    return pairs.filter(pl.Series(~beyond))


def score_floors(memories: pl.DataFrame, scoring: ScoringConfig, a: np.ndarray, b: np.ndarray, cosine_floors: np.ndarray,
                 shared_weights: np.ndarray) -> np.ndarray:
    """A lower bound of the score sql/pair_scores gives each pair (a[i], b[i]) that is no
    explicit reference, knowing its cosine is at least cosine_floors[i] and its exact shared
    term weight: bounded_pairs' arithmetic with the cosine's floor for its ceiling, and
    cross_reference counted where either end cites anything (it then joins the weights and
    says 0 for a pair that is not a reference), less a margin for DuckDB's last bits."""
    w = scoring.weights
    calibration = _calibration(scoring)
    weight, stamps = _weights_and_stamps(memories)
    cites = memories["cites"].fill_null(False).to_numpy()
    temporal, timed = _temporal(stamps, a, b, scoring.tau_days)
    total = (w["semantic"] + w["co_occurrence"] + np.where(timed, w["temporal"], 0.0)
             + np.where(cites[a] | cites[b], w["cross_reference"], 0.0))
    semantic = calibration.semantic(np.clip(np.asarray(cosine_floors, dtype=np.float64), 0.0, 1.0))
    co = calibration.co_occurrence(shared_weights, weight[a], weight[b])
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(total > 0, (w["semantic"] * semantic + w["co_occurrence"] * co + w["temporal"] * temporal) / total, 0.0)
    return score - _EPS * 1e3


def candidate_pairs(
    memories: pl.DataFrame, embeddings: np.ndarray, scoring: ScoringConfig, focus: pl.Series | None = None,
    *, ranked: pl.DataFrame | None = None, copy_keys: pl.Series | None = None,
) -> pl.DataFrame:
    """All pairs (a_idx < b_idx) that can reach the threshold or carry an explicit reference,
    less pairs of two copies of one text where `copy_keys` are given (without_copy_pairs).

    `memories` needs idx (row number), id, namespace, timestamp, terms, ref_ids; `focus` (bool
    per row) keeps only pairs with an end in focus; `ranked`: ranked_terms(memories), reused
    when many blocks of one frame are searched.
    """
    return candidate_pairs_with_cosines(memories, embeddings, scoring, focus, ranked=ranked, copy_keys=copy_keys).select(list(PAIR_SCHEMA))


def candidate_pairs_with_cosines(
    memories: pl.DataFrame, embeddings: np.ndarray, scoring: ScoringConfig, focus: pl.Series | None = None,
    *, ranked: pl.DataFrame | None = None, copy_keys: pl.Series | None = None, settled: np.ndarray | None = None,
    term_sets: TermSets | None = None,
) -> pl.DataFrame:
    """candidate_pairs with each pair's exact `cosine` (float64, as links.pair_cosines gives
    it) and `shared_weight` (links.shared_term_weights): the search computes both for its
    bound, and scoring reuses them. `term_sets`: TermSets.of(memories), reused across blocks.

    `settled` (bool per row): rows whose pairs an earlier call already returned (the earlier
    blocks of a namespace scored block by block); no pair with an end among them is returned,
    and none is bounded: in a dense namespace of 5 blocks that was ~40% of the pairs found."""
    found = pl.concat([term_pairs(memories, embeddings, scoring, focus, ranked, settled), similarity_pairs(memories, embeddings, scoring, focus, settled)])
    found = without_copy_pairs(unsettled_pairs(found, settled).unique(), copy_keys)
    references = without_copy_pairs(unsettled_pairs(reference_pairs(memories, focus), settled), copy_keys)
    terms = term_sets if term_sets is not None else TermSets.of(memories)
    parts = [bounded_pairs(memories, embeddings, scoring, found, term_sets=terms), with_cosines_and_shared_weights(references, embeddings, terms)]
    return pl.concat(parts).unique(["a_idx", "b_idx"]).sort("a_idx", "b_idx")


def with_cosines_and_shared_weights(pairs: pl.DataFrame, embeddings: np.ndarray, terms: TermSets) -> pl.DataFrame:
    """(a_idx, b_idx) pairs with their exact `cosine` and `shared_weight`, as bounded_pairs keeps them."""
    a, b = pairs["a_idx"].to_numpy(), pairs["b_idx"].to_numpy()
    return pairs.select(list(PAIR_SCHEMA)).with_columns(
        pl.Series("cosine", exact_pair_cosines(embeddings, a, b), dtype=pl.Float64),
        pl.Series("shared_weight", terms.shared_weights(a, b), dtype=pl.Float64),
    )


def unsettled_pairs(pairs: pl.DataFrame, settled: np.ndarray | None) -> pl.DataFrame:
    """The pairs with no end among the `settled` rows."""
    if settled is None or pairs.height == 0:
        return pairs
    return pairs.filter(pl.Series(~(settled[pairs["a_idx"].to_numpy()] | settled[pairs["b_idx"].to_numpy()])))


def all_pairs(memories: pl.DataFrame) -> pl.DataFrame:
    """Every pair (a_idx < b_idx) within a namespace: the brute-force oracle's candidates."""
    idx = memories.select("idx", "namespace")
    pairs = idx.join(idx.rename({"idx": "b_idx"}), on="namespace").filter(pl.col("idx") < pl.col("b_idx"))
    return pairs.select(pl.col("idx").alias("a_idx"), "b_idx").cast(PAIR_SCHEMA).sort("a_idx", "b_idx")


def partner_cosine_floor(scoring: ScoringConfig) -> float:
    """The least cosine any pair that can reach the threshold has, over every route: the
    lowest of the near routes' floors (d = 0 .. _NEAR_STEPS), the far one and the untimed one.

    Each floor takes co_occurrence = 1 and the route's largest temporal, so a pair below
    every floor fails `bounded_pairs` whatever terms it shares."""
    floors = [floor for _d, _co_min, floor in near_steps(scoring)] + list(route_cosine_floors(scoring).values())
    return min(floors)


def bf16_torch(load: bool = False):
    """torch, where the CPU multiplies bfloat16 in hardware and this process has loaded torch
    already (the watcher's model), or `load` asks for it; else None. The watcher does not
    load it for this alone: the import costs seconds, more than a micro-batch's products
    save. A dense namespace's batch run does (products_pay): its blocks' products, one per
    block against up to the whole namespace, save more."""
    torch = sys.modules.get("torch")
    if torch is None:
        if not (load and _cpu_flags_bf16()):
            return None
        try:
            import torch
        except ImportError:
            return None
    from crosstier.transforms.embed.encoders import cpu_has_fast_bf16

    return torch if cpu_has_fast_bf16() else None


def _cpu_flags_bf16() -> bool:
    """Whether /proc/cpuinfo lists bf16 dot products (avx512_bf16 or amx_bf16): checked before
    importing torch to ask it the same (encoders.cpu_has_fast_bf16)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        return False
    return False


def focus_products(
    embeddings: np.ndarray, rows: np.ndarray, floor: float, torch=None, columns: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(focus row, other row, an upper bound of their cosine) of every pair of a focus row and
    any row (any of `columns`, where given) whose cosine may reach `floor`: every such pair,
    and some below it.

    In float32 with numpy, or, given `torch` (bf16_torch), in bfloat16: ~3x faster on a CPU
    with AVX-512 BF16, every product within _BF16_PRODUCT_ERROR of the float32 one, so the
    floor is lowered and the bound raised by that much (the pairs are scored exactly later)."""
    hits_a, hits_b, hits_cos = [], [], []
    others = embeddings if columns is None else embeddings[columns]
    matrix = embeddings if torch is None else torch.from_numpy(np.ascontiguousarray(embeddings)).to(torch.bfloat16)
    against = others if torch is None else (matrix if columns is None else torch.from_numpy(np.ascontiguousarray(others)).to(torch.bfloat16))
    # a block of focus rows at a time: a 1000-memory burst against 100k rows was a 400 MB product
    for start in range(0, len(rows), _FOCUS_ROWS):
        block = rows[start:start + _FOCUS_ROWS]
        # every row against the block, not the block against every row: the same products,
        # ~35% faster where the block is a few rows (BLAS streams the big matrix once)
        if torch is None:
            cosines = against @ matrix[block].T
            hit_col, hit_row = np.nonzero(cosines >= floor)
            hits_cos.append(cosines[hit_col, hit_row])
        else:
            cosines = against @ matrix[torch.from_numpy(block)].T
            hit_col, hit_row = torch.nonzero(cosines >= floor - _BF16_PRODUCT_ERROR, as_tuple=True)
            hits_cos.append(cosines[hit_col, hit_row].float().numpy() + np.float32(_BF16_PRODUCT_ERROR))
            hit_col, hit_row = hit_col.numpy(), hit_row.numpy()
        hits_a.append(block[hit_row])
        hits_b.append(hit_col if columns is None else columns[hit_col])
    if not hits_a:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    return np.concatenate(hits_a), np.concatenate(hits_b), np.concatenate(hits_cos)


# A block is searched by product (partner_pairs) instead of the term routes where its memories
# have at least _DENSE_PAIRS_PER_ROW candidate pairs each and the product's hits over the
# partner floor are at most _HITS_PER_PAIR times that: then the routes find most of the
# namespace's pairs anyway and gather each one's vectors, while the product costs a matrix
# product and its hits. 20k and 50k dense memories (~94 and ~240 pairs a row, ~3 hits a
# pair): a block 3.4 -> 1.3 s and 7.8 -> 4.3 s, the same qualifying pairs. Text embeddings of
# unrelated memories often sit above the partner floor (0.17 at the defaults): there the hits
# outnumber the pairs by far, and the routes stay.
_DENSE_PAIRS_PER_ROW = 32
_HITS_PER_PAIR = 4
_PROBE_ROWS = 256  # block rows whose product hits are counted: one product tile


def products_pay(embeddings: np.ndarray, scoring: ScoringConfig, pairs: pl.DataFrame, rows: np.ndarray, settled: np.ndarray | None) -> bool:
    """After a block's `pairs` were found by the routes (candidate_pairs_with_cosines, focus
    `rows`, `settled` rows left out): would the next blocks be cheaper by product? Counted on
    the block's first _PROBE_ROWS rows, so the choice depends on the data alone."""
    probe = rows[:_PROBE_ROWS]
    if len(probe) == 0:
        return False
    in_probe = np.zeros(len(embeddings), dtype=bool)
    in_probe[probe] = True
    found = int(in_probe[pairs["a_idx"].to_numpy()].sum() + in_probe[pairs["b_idx"].to_numpy()].sum()) / len(probe)
    if found < _DENSE_PAIRS_PER_ROW:
        return False
    columns = None if settled is None else np.flatnonzero(~settled)
    hits = len(focus_products(embeddings, probe, partner_cosine_floor(scoring) - _COS_SLACK, None, columns)[0]) / len(probe)
    return hits <= _HITS_PER_PAIR * found


_DEFAULT = object()


def cosine_floors(loose_cosines: np.ndarray, torch) -> np.ndarray:
    """The least exact cosine (neighbours.exact_pair_cosines) of pairs whose product gave
    `loose_cosines` (partner_pairs' `loose`, with the same `torch`): a bf16 product's ceiling
    is within twice its error above the float32 product, which is within _COS_SLACK."""
    error = 2 * _BF16_PRODUCT_ERROR if torch is not None else 0.0
    return np.asarray(loose_cosines, dtype=np.float64) - error - 2 * _COS_SLACK


def partner_pairs(
    memories: pl.DataFrame, embeddings: np.ndarray, scoring: ScoringConfig, focus: pl.Series,
    copy_keys: pl.Series | None = None, *, torch=_DEFAULT, settled: np.ndarray | None = None,
    term_sets: TermSets | None = None, with_cosines: bool = False, bars: np.ndarray | None = None, loose: bool = False,
) -> pl.DataFrame:
    """Pairs with an end in focus that can reach the threshold or carry a reference, for a few
    focus rows, without a route that reads every memory's terms: a superset of
    candidate_pairs(memories, embeddings, scoring, focus).

    One product of the focus rows' vectors against every row keeps the pairs with cosine at or
    above partner_cosine_floor (every pair that can qualify has it), then candidate_pairs' own
    `bounded_pairs` check and references route. What it does not do is the term routes'
    prefix filter, which needs every term's document frequency in the namespace: so it may
    return a pair that shares no prefix term and passes the bound (the bound takes the best
    term overlap the two term weights allow). Such a pair cannot qualify (candidates.py's
    bound), so scoring it adds no link: the scored links equal candidate_pairs' (tested).
    The product is exact: from `ann_min_memories` memories in a namespace, where
    candidate_pairs' range search is approximate, it may find a qualifying pair that search
    missed. `embeddings` are unit rows (links.unit_rows); `copy_keys` as candidate_pairs';
    `torch`: see focus_products (by default bf16_torch() from _BF16_MIN_FOCUS_ROWS focus rows).

    A dense namespace's batch run uses it too, block by block (links.scored_links_with_count):
    `settled` as candidate_pairs_with_cosines' (those rows are left out of the product);
    `term_sets` as bounded_pairs'; `with_cosines` returns candidate_pairs_with_cosines'
    columns (the exact `cosine` and `shared_weight` of each pair); `bars` as bounded_pairs'.
    `loose`: the product's pairs only (no references) as the first bound left them: `cosine`
    the product's float32 ceiling of it (cosine_floors gives its floor), `shared_weight` exact,
    `bound` the score's upper bound (links._dense_blocks_scored bounds them from below too)."""
    in_focus = focus.to_numpy()
    rows = np.flatnonzero(in_focus)
    references = without_copy_pairs(unsettled_pairs(reference_pairs(memories, focus), settled), copy_keys)
    near_pairs = pl.DataFrame(schema=PAIR_SCHEMA)
    if loose and not len(rows):
        return pl.DataFrame(schema={**PAIR_SCHEMA, "cosine": pl.Float32, "shared_weight": pl.Float64, "bound": pl.Float64})
    if len(rows):
        floor = partner_cosine_floor(scoring) - _COS_SLACK
        if torch is _DEFAULT:
            torch = bf16_torch() if len(rows) >= _BF16_MIN_FOCUS_ROWS else None
        a, b, cos = focus_products(embeddings, rows, floor, torch, None if settled is None else np.flatnonzero(~settled))
        # compared at the hits only (~70M at 100k dense memories), not turned into objects for every
        # row; a namespace's own search (the batch run's score task) compares no namespaces, and
        # integer copy keys (links.scored_link_parts') cost a third of strings
        keep = a != b
        namespaces = memories.get_column("namespace")
        if namespaces.n_unique() > 1:
            keep &= (namespaces.gather(a) == namespaces.gather(b)).to_numpy()
        if copy_keys is not None and copy_keys.dtype.is_integer():
            codes = copy_keys.to_numpy()
            keep &= codes[a] != codes[b]
        elif copy_keys is not None:
            keep &= (copy_keys.gather(a) != copy_keys.gather(b)).to_numpy()
        a, b, cos = a[keep], b[keep], cos[keep]
        schema = {**PAIR_SCHEMA, "cosine": pl.Float32}
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        # a pair with both ends in focus came twice, once from each end's block: its larger
        # product keeps the bound a superset. Only those few are grouped (grouping every hit,
        # ~1.4M for a 1000-memory burst at 100k, cost ~0.25 s).
        twice = in_focus[b]
        once = pl.DataFrame({"a_idx": lo[~twice], "b_idx": hi[~twice], "cosine": cos[~twice]}, schema=schema)
        both = pl.DataFrame({"a_idx": lo[twice], "b_idx": hi[twice], "cosine": cos[twice]}, schema=schema)
        near = pl.concat([once, both.group_by("a_idx", "b_idx").agg(pl.col("cosine").max())])
        if loose:
            return bounded_pairs(memories, embeddings, scoring, near, cosines=near["cosine"].to_numpy(), term_sets=term_sets, bars=bars,
                                 with_bound=True)
        near_pairs = bounded_pairs(memories, embeddings, scoring, near.select("a_idx", "b_idx"), cosines=near["cosine"].to_numpy(),
                                   term_sets=term_sets, bars=bars)
        if not with_cosines:
            near_pairs = near_pairs.select(list(PAIR_SCHEMA))
    if with_cosines:
        terms = term_sets if term_sets is not None else TermSets.of_pairs(memories, references["a_idx"].to_numpy(), references["b_idx"].to_numpy())
        references = with_cosines_and_shared_weights(references, embeddings, terms)
        near_pairs = near_pairs if "shared_weight" in near_pairs.columns else near_pairs.with_columns(shared_weight=pl.lit(None, dtype=pl.Float64))
        a, b = near_pairs["a_idx"].to_numpy(), near_pairs["b_idx"].to_numpy()
        exact = exact_pair_cosines(embeddings, a, b)
        near_pairs = near_pairs.with_columns(pl.Series("cosine", exact, dtype=pl.Float64)).select(references.columns)
        if torch is not None:
            # bf16 products bounded each pair loosely (_BF16_PRODUCT_ERROR): bounded again on the
            # float32 of the exact cosine, as the term routes' pairs are, so the pairs scored
            # do not depend on the CPU
            near_pairs = bounded_pairs(memories, embeddings, scoring, near_pairs, cosines=exact.astype(np.float32),
                                       shared_weights=near_pairs["shared_weight"].to_numpy(), bars=bars)
    # the product's pairs are distinct: only a reference pair may repeat one of them
    pairs = pl.concat([references, near_pairs]).unique(["a_idx", "b_idx"]) if references.height else near_pairs
    return pairs.sort("a_idx", "b_idx")
