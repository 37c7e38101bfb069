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
    an explicit reference or a manual link (`origin`, when present) is never beyond reach."""
    source, target = ends
    explicit = pl.col("cross_reference").fill_null(0.0) > 0
    if "origin" in links.columns:
        explicit = explicit | (pl.col("origin") == "manual")
    rows = links.select(pl.col(source).alias("_a"), pl.col(target).alias("_b"), "score", explicit.alias("_explicit")).with_row_index("_row")
    end_rows = pl.concat([
        rows.select("_row", pl.col("_a").alias("memory"), pl.col("_b").alias("other"), "score", "_explicit"),
        rows.select("_row", pl.col("_b").alias("memory"), pl.col("_a").alias("other"), "score", "_explicit"),
    ])
    unit_of = reach.units.select(pl.col("id").alias("other"), pl.col("unit").alias("other_unit"))
    end_rows = end_rows.join(unit_of, on="other", how="left").with_columns(pl.coalesce("other_unit", "other").alias("other_unit"))
    # every explicit reference, whether the caller resolved it (ref_ids) or it is among these links
    in_links = end_rows.filter("_explicit").select("memory", "other")
    explicit_units = (
        pl.concat([reach.references, in_links]).join(unit_of, on="other", how="left")
        .select("memory", pl.coalesce("other_unit", "other").alias("other_unit")).unique()
    )
    counted = end_rows.filter(~pl.col("_explicit")).join(explicit_units, on=["memory", "other_unit"], how="anti")
    best = counted.group_by("memory", "other_unit").agg(pl.col("score").max().alias("best"))
    k = reach.max_links
    # the K-th and (K+1)-th best unit per memory (null where it has fewer units: nothing is beyond reach there)
    kth = best.group_by("memory").agg(pl.col("best").top_k(k + 1).sort(descending=True).alias("top")).select(
        "memory",
        pl.col("top").list.get(k - 1, null_on_oob=True).alias("kth"),
        pl.col("top").list.get(k, null_on_oob=True).alias("kth_next"),
    )
    copied = reach.units.filter("copied").select(pl.col("id").alias("memory"))
    # the link's own unit counts among the higher ones when its best beats this link: then K others need the (K+1)-th
    outranked = (
        counted.join(copied, on="memory", how="anti")
        .join(best, on=["memory", "other_unit"])
        .join(kth, on="memory")
        .select(
            "_row",
            pl.when(pl.col("best") > pl.col("score")).then(pl.col("kth_next") > pl.col("score"))
            .otherwise(pl.col("kth") > pl.col("score")).fill_null(False).alias("_out"),
        )
    )
    beyond = outranked.group_by("_row").agg((pl.col("_out").all() & (pl.len() == 2)).alias("_beyond"))
    flags = rows.select("_row").join(beyond, on="_row", how="left").sort("_row")["_beyond"].fill_null(False)
    return flags.alias("beyond_reach")


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
