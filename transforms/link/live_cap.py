"""The cap of the live path, recomputed only where a micro-batch can change it.

`links.capped_links` over every scored link costs seconds at 100k memories, and a micro-batch
changes the links of a handful. It folds copies (one link per pair of copy groups, or of a
group and a memory: its "key"), keeps one undated origin per fact, ranks each memory's links
(score, other end, type) and keeps a link in the top max_links at both ends; and it chains
each copy group in time. What a micro-batch can change:

- seeds: memories added, edited or deleted, and memories whose copy group changed;
- a folded link only for a key that has a row at a seed, so both of its ends are ends of
  such a key's rows (A);
- an undated origin only for a fact with a changed folded link, so a fact in A: the rows it
  re-types all have an end in A. Re-typing keeps a row's score and ends, so no other end's
  ranked list moves (a pair has one row);
- a memory outside A keeps its folded links and its ranked list, so a capped row with no
  end in A stays as it was; a group's chain changes only with its members or their times.

Rows with an end in A are recomputed by the batch run's own functions over every row of each
key present at A and at A's neighbours (whose ranked lists decide them), which is all those
lists and origins read. tests/link/test_live_cap.py checks it equals the full cap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from crosstier.transforms.link import copies, links
from crosstier.transforms.link.link_ends import IdCodes, LinkEnds, rows_touching
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA
from crosstier.transforms.sorted_rows import kept_per_frame, with_rows_inserted

KEY_SCHEMA = {"id": pl.String, "copy_key": pl.String}


def copy_keys(memories: pl.DataFrame, previous: pl.DataFrame | None = None, redo: set[str] | None = None) -> pl.DataFrame:
    """(id, copy_key) of every memory, sorted by id: kept from `previous` except for ids in
    `redo` and ids previous lacks (the key hashes the normalised text: worth keeping)."""
    if previous is None or redo is None:
        fresh = memories
        kept = pl.DataFrame(schema=KEY_SCHEMA)
    else:
        wanted = pl.Series(sorted(redo), dtype=pl.String).implode()
        # the watcher's case: every id that came or went is in redo, so a filter of each side
        # gives the rows, where two joins over 100k ids cost ~17 ms a micro-batch; checked below
        keys = _keys_made(previous.filter(~pl.col("id").is_in(wanted)), memories.filter(pl.col("id").is_in(wanted)))
        if keys.get_column("id").equals(memories.get_column("id")):
            return keys
        kept = previous.join(memories.select("id"), on="id", how="semi", maintain_order="left").filter(~pl.col("id").is_in(wanted))
        fresh = memories.join(kept.select("id"), on="id", how="anti")
    return _keys_made(kept, fresh)


def _keys_made(kept: pl.DataFrame, fresh: pl.DataFrame) -> pl.DataFrame:
    """`kept` (id, copy_key) with the keys of `fresh` memories put in place (both sorted by id)."""
    made = pl.DataFrame({"id": fresh.get_column("id"), "copy_key": copies.copy_key_column(fresh)}, schema=KEY_SCHEMA)
    return with_rows_inserted(kept, made)


# a micro-batch asks for the groups of the same two key frames (now and before) five times,
# ~7 ms each at 100k memories
@kept_per_frame(3)
def grouped(keys: pl.DataFrame) -> pl.DataFrame:
    """The (id, copy_key) rows of memories that have a copy (copies.copy_groups' members)."""
    return keys.filter(pl.col("copy_key").is_duplicated())


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


def moved(previous_keys: pl.DataFrame, keys: pl.DataFrame) -> set[str]:
    """Ids whose fold key changed: their copy group (among memories that have a copy) or none."""
    before = grouped(previous_keys).rename({"copy_key": "_before"})
    after = grouped(keys).rename({"copy_key": "_after"})
    joined = before.join(after, on="id", how="full", coalesce=True)
    return set(joined.filter(pl.col("_before").is_null() | pl.col("_after").is_null() | (pl.col("_before") != pl.col("_after"))).get_column("id").to_list())


def _keyed(rows: pl.DataFrame, members: pl.DataFrame) -> pl.DataFrame:
    """Rows with their fold key (namespace, _lo, _hi): each end's copy group, or itself."""
    return (
        rows.join(members.rename({"id": "source_id", "copy_key": "_sk"}), on="source_id", how="left")
        .join(members.rename({"id": "target_id", "copy_key": "_tk"}), on="target_id", how="left")
        .with_columns(pl.coalesce("_sk", "source_id").alias("_a"), pl.coalesce("_tk", "target_id").alias("_b"))
        .with_columns(pl.min_horizontal("_a", "_b").alias("_lo"), pl.max_horizontal("_a", "_b").alias("_hi"))
        .drop("_sk", "_tk", "_a", "_b")
    )


# what a fold key and the ends of a row read: the scans pass these alone, as gathering every
# column (reasons, metadata) of the rows near a large copy group cost ~10 ms a scan at 100k
ENDS = ("source_id", "target_id", "namespace")


def rows_of_keys(links_frame: pl.DataFrame, members: pl.DataFrame, ids: set[str], ends: LinkEnds | None = None) -> pl.DataFrame:
    """Every row whose fold key is that of a row at one of ids (copies.collapsed_copy_links
    decides a key from all of its rows). `members`: grouped copy keys; `ends`: links_frame's,
    where the caller keeps them. In links_frame's order."""
    return links_frame[positions_of_keys(links_frame, members, ids, ends)]


def positions_of_keys(links_frame: pl.DataFrame, members: pl.DataFrame, ids: set[str], ends: LinkEnds | None = None) -> pl.Series:
    """The row numbers of rows_of_keys(links_frame, members, ids, ends), ascending."""
    closure = group_closure(ids, members)
    if ends is None:
        touching = _touching(links_frame.select(ENDS).with_row_index("_order"), closure)
    else:
        at = np.flatnonzero(ends.touching(closure))
        touching = links_frame.select(ENDS)[at].with_columns(pl.Series("_order", at, dtype=pl.UInt32))
    # A row with no end in a copy group is its own key, and it touches the closure only at ids
    # (the closure's other members are in groups): every such row is wanted as it is. Only
    # the rows with a grouped end are keyed (keying all ~0.5M rows a 1000-memory burst
    # reaches at 100k cost ~0.2 s).
    grouped_ids = members.get_column("id").implode()
    # one mask, two filters: each is_in hashes every grouped id (~4 ms at 100k)
    in_group = touching.select(pl.col("source_id").is_in(grouped_ids) | pl.col("target_id").is_in(grouped_ids)).to_series()
    plain = touching.filter(~in_group).get_column("_order")
    near = _keyed(touching.filter(in_group), members)
    # the rows at ids are among those near them (ids are in their closure): one pass over links_frame
    wanted = _touching(near, ids).select("namespace", "_lo", "_hi").unique()
    keyed = near.join(wanted, on=["namespace", "_lo", "_hi"], how="semi").get_column("_order")
    return pl.concat([plain, keyed]).sort()


def _ends(frame: pl.DataFrame) -> set[str]:
    return set(frame.get_column("source_id").to_list()) | set(frame.get_column("target_id").to_list())


def recapped_rows(scored: pl.DataFrame, positions: pl.Series, groups: pl.DataFrame, changed: set[str], max_links: int) -> pl.DataFrame:
    """links.capped_links over scored's rows at `positions` (copies folded with `groups`), the
    kept rows that have an end in `changed`. The fold and the cap run on the columns they read
    alone, and only the rows kept gather the rest: at 100k memories a 1000-memory burst
    recaps ~0.5M rows, and moving their reasons and metadata through the fold and DuckDB
    cost ~0.5 s."""
    narrow = scored.select(links.CAP_COLUMNS)[positions].with_columns(_scored_row=positions)
    folded = copies.collapsed_copy_links(narrow, groups.select("id", "copy_key"))
    kept = _touching(links.capped_links(folded, max_links, None, ordered=False), changed)
    full = scored[kept.get_column("_scored_row")]
    return full.with_columns(kept.select(links.ORIGIN_REWRITTEN_COLUMNS)).cast(RELATIONSHIP_SCHEMA)


@dataclass(frozen=True)
class Recapped:
    """The cap redone around what changed: every capped row, the memories outside which no
    row changed, and the rows with an end among them before and after (what a caller
    compares: two more scans of every capped row cost ~35 ms a micro-batch at 100k), with
    the capped rows' ends."""

    capped: pl.DataFrame
    around: set[str]
    before: pl.DataFrame
    after: pl.DataFrame
    capped_ends: LinkEnds


@dataclass(frozen=True)
class CapEnds:
    """The ends of the frames recapped_around reads (link_ends.py), with one set of codes."""

    previous_capped: LinkEnds
    previous_scored: LinkEnds
    scored: LinkEnds

    @classmethod
    def of(cls, previous_capped: pl.DataFrame, previous_scored: pl.DataFrame, scored: pl.DataFrame) -> CapEnds:
        codes = IdCodes()
        return cls(LinkEnds.of(previous_capped, codes), LinkEnds.of(previous_scored, codes), LinkEnds.of(scored, codes))


def recapped_around(
    previous_capped: pl.DataFrame,
    previous_scored: pl.DataFrame,
    scored: pl.DataFrame,
    memories: pl.DataFrame,
    previous_keys: pl.DataFrame,
    keys: pl.DataFrame,
    touched: set[str],
    max_links: int,
    tau_days: float,
    ends: CapEnds | None = None,
) -> Recapped:
    """links.capped_links(scored, max_links, memories) and the memories around which it was
    redone, given the cap of the previous scored links: rows near what changed (see the
    module docstring) recomputed, the rest kept, so no row without an end in the set differs.

    `touched`: memories added, edited or deleted since previous_*; `keys`/`previous_keys`:
    copy_keys of the current and previous memories; `ends`: the frames' ends, where the caller
    keeps them. In no particular order."""
    ends = CapEnds.of(previous_capped, previous_scored, scored) if ends is None else ends
    groups_before, groups_after = grouped(previous_keys), grouped(keys)
    if scored.filter(pl.col("origin") == "manual").height or previous_scored.filter(pl.col("origin") == "manual").height:
        # manual links sit inside copy groups beside the chain; the live path merges them after the cap
        full = links.capped_links(scored, max_links, memories, tau_days=tau_days).cast(RELATIONSHIP_SCHEMA).sort("source_id", "target_id", "relationship_type")
        return Recapped(full, set(memories.get_column("id").to_list()) | _ends(previous_capped), previous_capped, full, LinkEnds.of(full, ends.scored.codes))
    seeds = touched | moved(previous_keys, keys)
    # A: both ends of every row of a fold key with a row at a seed, before and after
    ends_before, ends_after = previous_scored.select(ENDS), scored.select(ENDS)
    changed = seeds | _ends(rows_of_keys(ends_before, groups_before, seeds, ends.previous_scored)) | _ends(rows_of_keys(ends_after, groups_after, seeds, ends.scored))
    # the ranked lists of A and of A's neighbours decide A's rows: every row of their keys
    deciding = changed | _ends(rows_touching(ends_after, ends.scored, changed))
    fresh = recapped_rows(scored, positions_of_keys(scored, groups_after, deciding, ends.scored), groups_after, changed, max_links)
    # copy groups with a seed, before or after, chain again in full
    chained_keys = set(groups_before.filter(pl.col("id").is_in(_series(seeds).implode())).get_column("copy_key").to_list())
    chained_keys |= set(groups_after.filter(pl.col("id").is_in(_series(seeds).implode())).get_column("copy_key").to_list())
    keys_wanted = _series(chained_keys).implode()
    chained_before = set(groups_before.filter(pl.col("copy_key").is_in(keys_wanted)).get_column("id").to_list())
    chained_after = groups_after.filter(pl.col("copy_key").is_in(keys_wanted))
    chain_members = memories.filter(pl.col("id").is_in(chained_after.get_column("id").implode()))
    chain = copies.carried_forward_links(chain_members, copies.copy_groups(chain_members), tau_days).cast(RELATIONSHIP_SCHEMA)
    # previous rows: a chain row (both ends in one copy group) goes with its group, any other
    # with A; a row with no end in A or in a re-chained group stays either way, so only the
    # others are keyed (keying every capped row cost ~0.1 s a micro-batch at 100k)
    previous_capped = previous_capped.cast(RELATIONSHIP_SCHEMA)
    redone = changed | chained_before
    near = pl.Series(ends.previous_capped.touching(redone))
    near_rows = previous_capped.filter(near)
    previous = _keyed(near_rows, groups_before)
    inside = (pl.col("_lo") == pl.col("_hi")) & pl.col("source_id").is_in(groups_before.get_column("id").implode())
    at_changed = pl.col("source_id").is_in(_series(changed).implode()) | pl.col("target_id").is_in(_series(changed).implode())
    in_chained = pl.col("source_id").is_in(_series(chained_before).implode())
    kept = previous.filter(pl.when(inside).then(~in_chained).otherwise(~at_changed)).drop("_lo", "_hi")
    # a member of a re-chained group after that was none before changed its fold key: a seed,
    # so `redone` is every memory redone around, and the rows kept (with an end in it), fresh
    # (at `changed`) and chained are all that have an end in it after
    around = redone | set(chained_after.get_column("id").to_list())
    recomputed = pl.concat([kept, fresh, chain])
    # not sorted: readers order their own queries, and sorting every capped row cost ~0.19 s a micro-batch at 100k
    far = ~near.to_numpy()
    capped = pl.concat([previous_capped.filter(pl.Series(far)), recomputed])
    return Recapped(capped, around, near_rows, recomputed, ends.previous_capped.where(far).then(recomputed))
