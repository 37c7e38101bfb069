"""The cap of the live path, recomputed only where a micro-batch can change it.

`links.capped_links` over every scored link costs seconds at 100k memories, and a micro-batch
changes the links of a handful. Which published (capped) rows can differ:

- touched: memories added, edited or deleted; copy-group closure: with them, every memory
  whose copy group (old or new) holds a touched one or whose group changed (A);
- a folded copy link (collapsed_copy_links keeps one link per pair of groups) can change
  only for a group pair with a member in A, so its ends are in A or next to A;
- an undated origin (with_undated_origins: one per fact) can change only for a fact with a
  changed link, so in A or next to it, and the links it demotes end next to that fact;
- so every transformed link that differs has both ends in Y = A + two hops (N(N(A))), and a
  memory outside Y keeps its ranked list; a capped row with no end in Y is kept as it was.

Rows with an end in Y are recomputed by `links.capped_links` itself over the scored links
around them: exact as long as every memory whose transformed links they depend on is
complete in that subset (Y's ends, and their ends for copy folding and undated origins).
The neighbourhoods come from the union of the old and new scored links, so a link that
went still counts as an edge. tests/link/test_live_cap.py checks it equals the full cap.
"""

from __future__ import annotations

import polars as pl

from crosstier.transforms.link import copies, links
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA

KEY_SCHEMA = {"id": pl.String, "copy_key": pl.String}


def copy_keys(memories: pl.DataFrame, previous: pl.DataFrame | None = None, redo: set[str] | None = None) -> pl.DataFrame:
    """(id, copy_key) of every memory, sorted by id: kept from `previous` except for ids in
    `redo` and ids previous lacks (the key hashes the normalised text: worth keeping)."""
    if previous is None or redo is None:
        fresh = memories
        kept = pl.DataFrame(schema=KEY_SCHEMA)
    else:
        wanted = pl.Series(sorted(redo), dtype=pl.String).implode()
        kept = previous.join(memories.select("id"), on="id", how="semi").filter(~pl.col("id").is_in(wanted))
        fresh = memories.join(kept.select("id"), on="id", how="anti")
    keys = [copies.copy_key(ns, c) for ns, c in zip(fresh.get_column("namespace").to_list(), fresh.get_column("content").to_list())]
    made = pl.DataFrame({"id": fresh.get_column("id"), "copy_key": pl.Series(keys, dtype=pl.String)}, schema=KEY_SCHEMA)
    return pl.concat([kept, made]).sort("id")


def grouped(keys: pl.DataFrame) -> pl.DataFrame:
    """The (id, copy_key) rows of memories that have a copy (copies.copy_groups' members)."""
    return keys.filter(pl.len().over("copy_key") > 1)


def _series(ids: set[str]) -> pl.Series:
    return pl.Series(sorted(ids), dtype=pl.String)


def group_closure(ids: set[str], *groups: pl.DataFrame) -> set[str]:
    """ids and every member of a copy group (in any of `groups`) that holds one of them."""
    out = set(ids)
    wanted = _series(ids).implode()
    for members in groups:
        keys = members.filter(pl.col("id").is_in(wanted)).select("copy_key")
        out.update(members.join(keys, on="copy_key", how="semi").get_column("id").to_list())
    return out


def _touching(edges: pl.DataFrame, ids: set[str]) -> pl.DataFrame:
    wanted = _series(ids).implode()
    return edges.filter(pl.col("source_id").is_in(wanted) | pl.col("target_id").is_in(wanted))


def neighbourhood(edges: pl.DataFrame, ids: set[str], hops: int) -> set[str]:
    """ids and every memory within `hops` links of one of them."""
    out = set(ids)
    frontier = set(ids)
    for _ in range(hops):
        if not frontier:
            break
        near = _touching(edges, frontier)
        reached = set(near.get_column("source_id").to_list()) | set(near.get_column("target_id").to_list())
        frontier = reached - out
        out |= reached
    return out


def moved_groups(previous_keys: pl.DataFrame, keys: pl.DataFrame) -> set[str]:
    """Ids whose copy group (its key among memories that have a copy, or none) differs."""
    before = grouped(previous_keys).rename({"copy_key": "_before"})
    after = grouped(keys).rename({"copy_key": "_after"})
    joined = before.join(after, on="id", how="full", coalesce=True)
    moved = joined.filter(pl.col("_before").is_null() | pl.col("_after").is_null() | (pl.col("_before") != pl.col("_after")))
    changed_keys = set(moved.get_column("_before").drop_nulls().to_list()) | set(moved.get_column("_after").drop_nulls().to_list())
    # a group that gained or lost a member re-chains and re-folds as a whole
    members = pl.concat([before.rename({"_before": "k"}), after.rename({"_after": "k"})]).filter(pl.col("k").is_in(_series(changed_keys).implode()))
    return set(moved.get_column("id").to_list()) | set(members.get_column("id").to_list())


def recapped(
    previous_capped: pl.DataFrame,
    previous_scored: pl.DataFrame,
    scored: pl.DataFrame,
    memories: pl.DataFrame,
    previous_keys: pl.DataFrame,
    keys: pl.DataFrame,
    touched: set[str],
    max_links: int,
    tau_days: float,
) -> pl.DataFrame:
    """links.capped_links(scored, max_links, memories) given the cap of the previous scored
    links: rows near what changed (see the module docstring) recomputed, the rest kept.

    `touched`: memories added, edited or deleted since previous_*; `keys`/`previous_keys`:
    copy_keys of the current and previous memories. Sorted as live.capped sorts."""
    groups_before, groups_after = grouped(previous_keys), grouped(keys)
    changed = group_closure(touched | moved_groups(previous_keys, keys), groups_before, groups_after)
    # every edge of either version: a link that went still ties its ends
    edges = pl.concat([scored.select("source_id", "target_id"), _touching(previous_scored.select("source_id", "target_id"), changed)])
    # Y: memories whose transformed links may differ (folded copies one hop, undated origins two)
    redo = neighbourhood(edges, changed, 2)
    # Each row at Y is decided by the ranked lists of its two ends (Y and one hop); each of
    # those lists needs its memory's and its neighbours' links complete (folding, origins).
    complete = group_closure(neighbourhood(edges, redo, 2), groups_after)
    subset = _touching(scored, complete)
    around = group_closure(complete | set(subset.get_column("source_id").to_list()) | set(subset.get_column("target_id").to_list()), groups_after)
    fresh = links.capped_links(subset, max_links, memories.filter(pl.col("id").is_in(_series(around).implode())), tau_days=tau_days)
    kept = previous_capped.cast(RELATIONSHIP_SCHEMA)
    wanted = _series(redo).implode()
    kept = kept.filter(~pl.col("source_id").is_in(wanted) & ~pl.col("target_id").is_in(wanted))
    fresh = _touching(fresh.cast(RELATIONSHIP_SCHEMA), redo)
    return pl.concat([kept, fresh]).sort("source_id", "target_id", "relationship_type")
