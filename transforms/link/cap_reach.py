"""The cap's reach: which scored links can never survive the cap, so a run need not keep them.

In: scored links (before the cap) of one set of memories, and those memories' copy groups and
explicit references. Out: the same links less those that no cap over any superset could keep.

The cap (links.capped_links) keeps a discovered link when it ranks within the top K
(max_links_per_memory) at both its ends, after copies are folded. Where members of a topic
all qualify, a memory may have thousands of scored links of which the cap keeps 50: keeping
all of them made a 100k-memory namespace need tens of GB. A link may be dropped when, at BOTH
its ends, it certainly ranks below K:

- the end is not a copy (copy folding can move a copy's links to another copy: no bound there);
- counting, per other "unit" (a copy group, or a memory on its own), the unit's best link to
  this end, at least K units other than the link's own have a best link scoring strictly
  higher. Units with an explicit reference to the end do not count: their link is outside the
  cap and wins their fold. After folding, the end's links are exactly one per unit, so this
  count is a lower bound of the link's rank at that end on any superset of the links.

Why "both ends" and not "either": a link is kept while it is within the top K at one end, so
every memory's top K stays stored. Then:

- capping the kept links equals capping all of them (the top K of every end is there);
- pruning is safe on any subset (counts only grow with more links), so a namespace can be
  scored block by block, pruning as it goes, and pruned once more at the end;
- an incremental run stays equal to a full one if the memories whose top K may have lost a
  member are scored again (`refocused`): those with a stored link to an edited or deleted
  memory, and a memory that an edited or new one made a copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from crosstier.transforms.link import copies


@dataclass(frozen=True)
class CapReach:
    """What pruning needs of the memories: each memory's unit and whether it is a copy, and the
    explicit references (both directions), with max_links_per_memory."""

    units: pl.DataFrame  # id, unit, copied
    references: pl.DataFrame  # memory, other: one row per direction of each explicit reference
    max_links: int


def cap_reach(memories: pl.DataFrame, max_links: int, *, groups: pl.DataFrame | None = None) -> CapReach:
    """The reach of the cap over these memories (id, namespace, content, timestamp; and `ref_ids`,
    the resolved references of links.link_memories, where the caller has them).

    Explicit references are also read from the links being pruned (cross_reference > 0), so
    without `ref_ids` pruning is exact only on a set that holds every explicit link, as a
    run's whole set of scored links does; a block of pairs needs `ref_ids`. `groups` (id,
    copy_key of every memory that has a copy: copies.copy_groups, as a run computes them once
    for the cap too, or live_cap.grouped of the keys the watcher holds) saves hashing every
    text again."""
    groups = (copies.copy_groups(memories) if groups is None else groups).select("id", "copy_key")
    units = (
        memories.select("id")
        .join(groups, on="id", how="left")
        .select("id", pl.coalesce("copy_key", "id").alias("unit"), pl.col("copy_key").is_not_null().alias("copied"))
    )
    references = pl.DataFrame(schema={"memory": pl.String, "other": pl.String})
    if "ref_ids" in memories.columns:
        refs = memories.select(pl.col("id").alias("memory"), pl.col("ref_ids").alias("other")).explode("other").drop_nulls("other")
        refs = refs.filter(pl.col("memory") != pl.col("other"))
        references = pl.concat([refs, refs.select(pl.col("other").alias("memory"), pl.col("memory").alias("other"))]).unique()
    return CapReach(units, references, max_links)


def by_row(reach: CapReach, rows: pl.DataFrame) -> CapReach:
    """The same reach keyed by row number (`rows`: id, idx) instead of id, with units as
    integers: pruning millions of scored pairs block by block then joins integers, not strings."""
    idx = rows.select("id", pl.col("idx").cast(pl.Int64))
    units = reach.units.join(idx, on="id").select(
        pl.col("idx").alias("id"), pl.col("unit").rank("dense").cast(pl.Int64).alias("unit"), "copied"
    )
    references = (
        reach.references.join(idx.rename({"id": "memory", "idx": "m"}), on="memory")
        .join(idx.rename({"id": "other", "idx": "o"}), on="other")
        .select(pl.col("m").alias("memory"), pl.col("o").alias("other"))
    )
    return CapReach(units, references, reach.max_links)


def beyond_reach(links: pl.DataFrame, reach: CapReach, ends: tuple[str, str] = ("source_id", "target_id")) -> pl.Series:
    """Per link row, True when the cap can never keep it (see the module docstring).

    `links` needs the two `ends` columns (memory ids), `score` and `cross_reference`;
    an explicit reference or a manual link (`origin`, when present) is never beyond reach.

    Ids and units become integer codes (polars joins), the ranking is numpy sorts over them:
    a prune of the ~8M links a 100k dense namespace holds took 8 GB and ~70 s as polars joins,
    group-bys and top-k lists over both ends of every link."""
    return _ranked(links, reach, ends)[0]


def _ranked(
    links: pl.DataFrame, reach: CapReach, ends: tuple[str, str], distinct_pairs: bool = False,
) -> tuple[pl.Series, pl.DataFrame, np.ndarray, np.ndarray]:
    """beyond_reach's flags, and per memory (the `codes`: key, code) the score of its K-th best
    counted unit (NaN with fewer than K) and whether it is a copy. `distinct_pairs`: no two
    links join the same two memories (a run's scored pairs), so a memory's links to one unit
    are several only where the unit has several members, and only those are grouped."""
    source, target = ends
    if links.height == 0:
        return pl.Series("beyond_reach", [], dtype=pl.Boolean), pl.DataFrame({"key": [], "code": []}), np.zeros(0), np.zeros(0, dtype=bool)
    explicit = pl.col("cross_reference").fill_null(0.0) > 0
    if "origin" in links.columns:
        explicit = explicit | (pl.col("origin") == "manual")
    codes = _memory_codes(links, reach, ends)
    n = codes.height
    unit_of, copied = _units_by_code(reach, codes)
    units = int(unit_of.max()) + 1
    score = links.get_column("score").cast(pl.Float64).to_numpy()
    is_explicit = links.select(explicit.fill_null(False)).to_series().to_numpy()
    rows = len(score)
    # one end row per end of each link: the end, and the other end's unit. The arrays of a
    # prune of ~8M links are 16M long, so each is dropped as soon as it is used: a prune of the
    # 100k dense namespace raised the peak by ~3 GB when all of them were alive at once.
    a, b = _coded(links.get_column(source), codes), _coded(links.get_column(target), codes)
    memory = np.concatenate([a, b]).astype(np.int32 if n < 2**31 else np.int64)
    key = memory.astype(np.int64) * units + unit_of[np.concatenate([b, a])]
    del a, b
    end_score = np.concatenate([score, score])
    del score
    # (memory, unit) pairs where the unit has an explicit reference to the memory: outside the cap
    refs = reach.references
    ref_memory, ref_other = _coded(refs.get_column("memory"), codes), _coded(refs.get_column("other"), codes)
    explicit_end = np.concatenate([is_explicit, is_explicit])
    explicit_keys = np.unique(np.concatenate([ref_memory * units + unit_of[ref_other], key[explicit_end]]))
    counted = ~explicit_end & ~_within(key, explicit_keys)
    del explicit_end
    # the best counted link of each (memory, unit), then each memory's k-th and (k+1)-th best
    # unit; the first by a plain argsort of one integer key (a two-key lexsort was ~8x slower)
    counted_at = np.flatnonzero(counted)
    counted_keys = key[counted_at]
    del key
    if distinct_pairs:
        # a link to a unit of one member is its memory's only link to that unit: its own best,
        # never beaten by its unit. Sorting only the others saves a prune most of its time (at
        # 100k dense, copies are ~20 of 100k memories)
        grouped = np.bincount(unit_of, minlength=units)[counted_keys % units] > 1
        alone_at, counted_at, counted_keys = counted_at[~grouped], counted_at[grouped], counted_keys[grouped]
        del grouped
    else:
        alone_at = counted_at[:0]
    order = np.argsort(counted_keys)
    sorted_keys = counted_keys[order]
    del counted_keys
    starts, lengths = value_runs(sorted_keys)
    best_keys = sorted_keys[starts]
    del sorted_keys
    sorted_scores = end_score[counted_at[order]]
    best = np.maximum.reduceat(sorted_scores, starts) if len(order) else np.zeros(0)
    del sorted_scores
    # the link's own unit counts among the higher ones when its best beats this link; only a
    # unit with more than one link to the memory (copies) can have a best above a link of its own
    shared = np.repeat(lengths > 1, lengths)
    beaten = counted_at[order[shared]]
    beaten = beaten[np.repeat(best[lengths > 1], lengths[lengths > 1]) > end_score[beaten]]
    del order, shared, counted_at, starts, lengths
    # each memory's k-th and (k+1)-th best unit: one polars group-by over the memories, which
    # runs on every core (~1.5 s less a prune of ~8M links than two argsorts of every best)
    k = reach.max_links
    kind = np.int32 if n < 2**31 else np.int64
    bests = pl.DataFrame({
        "memory": np.concatenate([memory[alone_at].astype(kind), (best_keys // units).astype(kind)]),
        "best": np.concatenate([end_score[alone_at], best]),
    })
    del best_keys, best, alone_at
    bests = bests.group_by("memory").agg(
        pl.when(pl.len() >= k).then(pl.col("best").top_k(k).min()).alias("kth"),
        pl.when(pl.len() > k).then(pl.col("best").top_k(k + 1).min()).alias("kth_next"),
    )
    at = bests.get_column("memory").to_numpy()
    kth = np.full(n, np.nan)
    kth_next = np.full(n, np.nan)
    kth[at] = bests.get_column("kth").fill_null(np.nan).to_numpy()
    kth_next[at] = bests.get_column("kth_next").fill_null(np.nan).to_numpy()
    del bests, at
    # beaten by its own unit: K others need the (K+1)-th
    bar = kth[memory]
    bar[beaten] = kth_next[memory[beaten]]
    with np.errstate(invalid="ignore"):
        out = counted & ~copied[memory] & (bar > end_score)  # NaN (fewer than K units) never drops
    return pl.Series("beyond_reach", out[:rows] & out[rows:], dtype=pl.Boolean), codes, kth, copied


def cap_bars(
    links: pl.DataFrame, reach: CapReach, ends: tuple[str, str], rows: int, *, distinct_pairs: bool = False,
) -> tuple[pl.DataFrame, np.ndarray]:
    """within_reach, and per memory row (a reach `by_row`, memories 0 .. rows-1) the score a
    link must beat to stay within the cap's reach at that end: its K-th best counted unit's.
    NaN where no score is known to be enough: fewer than K units, or the memory is a copy.

    A pair whose score cannot reach the bar at either end (a non-copy end, no explicit
    reference) is beyond reach on these links and on any superset: counts only grow, and a
    prune never lowers a K-th best (what it drops ranks below it). So a dense namespace's
    later blocks need not score such pairs (candidates.bounded_pairs' `bars`). `distinct_pairs`:
    no two links join the same two memories, as a run's scored pairs (a faster ranking)."""
    if links.height == 0:
        return links, np.full(rows, np.nan)
    beyond, codes, kth, copied = _ranked(links, reach, ends, distinct_pairs)
    bars = np.full(rows, np.nan)
    bars[codes.get_column("key").to_numpy()] = np.where(copied, np.nan, kth)[codes.get_column("code").to_numpy()]
    return links.filter(~beyond), bars


def _memory_codes(links: pl.DataFrame, reach: CapReach, ends: tuple[str, str]) -> pl.DataFrame:
    """(key, code): an integer code 0 .. n-1 for every memory id the links, units and references name."""
    names = [links.get_column(end) for end in ends] + [reach.units.get_column("id"), reach.references.get_column("memory"), reach.references.get_column("other")]
    kind = names[0].dtype
    if kind.is_integer() and all(name.dtype.is_integer() for name in names):
        # row numbers (a reach by_row): each is its own code, so the millions of link ends are
        # not hashed into codes and joined back (~2 s of a 100k dense namespace's prune)
        present = [name for name in names if name.len()]
        low, high = min(int(name.min()) for name in present), max(int(name.max()) for name in present)
        if low >= 0 and high < 2 * sum(name.len() for name in names) + 1024:
            return pl.DataFrame({"key": np.arange(high + 1), "code": np.arange(high + 1)}, schema={"key": kind, "code": pl.Int64})
    keys = pl.concat([name.cast(kind) for name in names]).unique()
    return pl.DataFrame({"key": keys}).with_row_index("code").with_columns(pl.col("code").cast(pl.Int64))


def _coded(ids: pl.Series, codes: pl.DataFrame) -> np.ndarray:
    """The codes of these ids, in their order."""
    key = codes.get_column("key")
    if ids.dtype.is_integer() and key.dtype.is_integer() and (key.cast(pl.Int64) == codes.get_column("code")).all():
        return ids.cast(pl.Int64).to_numpy()  # codes of row numbers are the numbers themselves
    frame = pl.DataFrame({"key": ids.cast(codes.schema["key"])})
    return frame.join(codes, on="key", how="left", maintain_order="left").get_column("code").to_numpy()


def _units_by_code(reach: CapReach, codes: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per memory code: its unit as an integer (a memory the units do not list is a unit of its
    own), and whether it is a copy."""
    n = codes.height
    units = reach.units.join(
        codes.rename({"key": "id"}).with_columns(pl.col("id").cast(reach.units.schema["id"])), on="id"
    ).with_columns(pl.col("unit").rank("dense").cast(pl.Int64).alias("unit_code"))
    unit_of = np.arange(n, dtype=np.int64) + (int(units["unit_code"].max()) + 1 if units.height else 0)
    unit_of[units["code"].to_numpy()] = units["unit_code"].to_numpy()
    copied = np.zeros(n, dtype=bool)
    copied[units["code"].to_numpy()] = units["copied"].to_numpy()
    return unit_of, copied


def value_runs(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each run of equal values in a sorted array (none when it is empty)."""
    if len(sorted_values) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]]))
    return starts, np.diff(np.append(starts, len(sorted_values)))


def _within(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """Per value, whether it is in sorted_set (sorted, unique)."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def within_reach(links: pl.DataFrame, reach: CapReach, ends: tuple[str, str] = ("source_id", "target_id")) -> pl.DataFrame:
    """The links the cap may still keep (all of them when `max_links` cannot bind)."""
    if links.height == 0:
        return links
    return links.filter(~beyond_reach(links, reach, ends))


def refocused(changed: set[str], deleted: set[str], stored: pl.DataFrame, reach: CapReach) -> set[str]:
    """The memories an incremental run scores again: the changed ones, every memory with a
    stored link to a changed or deleted one (its top K may have lost a member that was
    dropped), and the copy that a changed memory may have made a copy (a copy's links are
    never dropped, so the ones its end used to drop must be found again).

    Only a copy group with exactly one unchanged member can hold a memory that was not a
    copy before: two unchanged members had the same text before too, so both were copies
    and all their links are stored. Without that, one new "ok" beside 1,800 others sent all
    of them back to scoring on every micro-batch."""
    touched = pl.Series(sorted(changed | deleted), dtype=pl.String).implode()
    linked = stored.filter(pl.col("source_id").is_in(touched) | pl.col("target_id").is_in(touched))
    neighbours = set(linked["source_id"].to_list()) | set(linked["target_id"].to_list())
    is_changed = pl.col("id").is_in(pl.Series(sorted(changed), dtype=pl.String).implode())
    changed_units = reach.units.filter(is_changed & pl.col("copied")).select("unit").unique()
    unchanged = reach.units.join(changed_units, on="unit", how="semi").filter(~is_changed)
    newly_copied = unchanged.filter(pl.len().over("unit") == 1)["id"].to_list()
    return (changed | neighbours | set(newly_copied)) - deleted


_BAR_BINS = 128  # lower bars are counted in bins this fine over [threshold, 1]


class LowerBars:
    """Per memory row, a lower bound of cap_bars' bar (its K-th best counted unit's score),
    from pairs whose scores are known only from below: a dense namespace's first pass
    (links._dense_blocks_scored), where the bf16 product gives each pair's cosine within an
    error. If K units score at least x at a memory, its K-th best is at least x, so a pair
    whose upper bound stays under such a bar at both ends is beyond reach (bounded_pairs'
    `bars`) before its exact cosine and its scoring.

    Each pair is to be added once and is counted at both its ends, only where it surely
    counts there: its lower bound reaches the threshold (it is a link); no end is a copy (a
    copy's bar is NaN, and a group's members are one unit); it is no explicit reference
    (outside the cap); neither end is `unvouched` (such a pair may not qualify,
    sql/qualifying_pairs). Counted in _BAR_BINS bins over [threshold, 1]; a bar is the lower
    edge of the bin where the count from the top reaches K, so never above the K-th best."""

    def __init__(self, reach: CapReach, rows: int, threshold: float, unvouched: np.ndarray) -> None:
        self.rows, self.k, self.threshold = rows, reach.max_links, threshold
        self.excluded = np.asarray(unvouched, dtype=bool).copy()
        copied = reach.units.filter(pl.col("copied")).get_column("id").to_numpy()
        self.excluded[copied] = True
        self.copied = np.zeros(rows, dtype=bool)
        self.copied[copied] = True
        self.references = np.unique(reach.references.get_column("memory").to_numpy().astype(np.int64) * rows
                                    + reach.references.get_column("other").to_numpy())
        self.counts = np.zeros(rows * _BAR_BINS, dtype=np.int32)

    def add(self, a: np.ndarray, b: np.ndarray, lower: np.ndarray) -> None:
        keep = (lower >= self.threshold) & ~self.excluded[a] & ~self.excluded[b]
        if len(self.references):
            keep &= ~np.isin(a.astype(np.int64) * self.rows + b, self.references)
        a, b, lower = a[keep], b[keep], lower[keep]
        bins = np.minimum(((lower - self.threshold) / (1.0 - self.threshold) * _BAR_BINS).astype(np.int64), _BAR_BINS - 1)
        self.counts += np.bincount(np.concatenate([a * _BAR_BINS + bins, b * _BAR_BINS + bins]), minlength=len(self.counts))

    def bars(self) -> np.ndarray:
        """Per memory row, the bar (NaN: fewer than K units counted, or a copy)."""
        at_least = np.cumsum(self.counts.reshape(self.rows, _BAR_BINS)[:, ::-1], axis=1)  # units in each bin or above, from the top
        reached = at_least >= self.k
        top_bin = _BAR_BINS - 1 - reached.argmax(axis=1)
        bars = self.threshold + top_bin * (1.0 - self.threshold) / _BAR_BINS - 1e-9
        bars[~reached.any(axis=1) | self.copied] = np.nan
        return bars
