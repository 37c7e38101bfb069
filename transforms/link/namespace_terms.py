"""Terms common within a namespace, weighed as common words in co_occurrence.

An agent's own name, the people it talks with, its main project: rare in English, so the
rarity weights (calibration.common_term_weights) count them as rare, yet in a tenth of the
namespace's memories. Shared, they say little about a pair: in LoCoMo's chats every turn
starts with its speaker's name, and "Gina: ;)" linked to "Gina: Sounds great!" on it. Within
a namespace such a term weighs no more than English's most common words.

The weights depend on the namespace's memories, so a run's links depend on them too: a full
run counts them over every memory; an incremental run (and the watcher) counts them over the
current memories and scores again every memory holding a term whose status changed
(`holders_of_changed`), so its links equal a full run's.
"""

from __future__ import annotations

import polars as pl

from crosstier.transforms.link.features import rarity_weights, reason_terms

COMMON_SHARE = 0.10  # a term in at least this share of a namespace's memories ...
COMMON_LEAST = 20  # ... and in at least this many of them (a small namespace has none) ...
COMMON_WEIGHT = 0.1  # ... weighs at most this there (English's most common words weigh ~0.1)

_COMMON_SCHEMA = {"namespace": pl.String, "term": pl.String}


def _is_common(holders, size):
    """The rule, for numbers and for polars expressions alike: held by COMMON_LEAST memories
    and by COMMON_SHARE of a namespace of `size`."""
    return (holders >= COMMON_LEAST) & (holders >= COMMON_SHARE * size)


def _held(memories: pl.DataFrame) -> pl.DataFrame:
    """(namespace, term, holders): how many memories of each namespace hold each term (once a memory)."""
    return (memories.select("namespace", pl.col("terms").list.unique().alias("term")).explode("term").drop_nulls("term")
            .group_by("namespace", "term").agg(holders=pl.len()))


def _sizes(memories: pl.DataFrame) -> pl.DataFrame:
    """(namespace, size): the memories of each namespace."""
    return memories.group_by("namespace").agg(size=pl.len())


def common_terms(memories: pl.DataFrame) -> pl.DataFrame:
    """(namespace, term), sorted: the terms in at least COMMON_SHARE of their namespace's
    memories and in at least COMMON_LEAST of them. `memories`: namespace and terms."""
    if memories.height < COMMON_LEAST:
        return pl.DataFrame(schema=_COMMON_SCHEMA)
    common = _held(memories).join(_sizes(memories), on="namespace").filter(_is_common(pl.col("holders"), pl.col("size")))
    return common.select("namespace", "term").cast(_COMMON_SCHEMA).sort("namespace", "term")


def with_namespace_weights(memories: pl.DataFrame, common: pl.DataFrame) -> pl.DataFrame:
    """`memories` (namespace, terms, term_weights aligned with terms) with each common term's
    weight lowered to COMMON_WEIGHT where it was above, and common terms left out of the
    terms a reason may name (`name_terms`, `word_terms`, where present: "Entity match: Gina"
    on every pair of Gina's chat said nothing); the rows and their order unchanged."""
    if common.height == 0 or memories.height == 0:
        return memories
    weighed = _each_common(memories, common, "term_weights", "terms", pl.min_horizontal("term_weights", pl.lit(COMMON_WEIGHT)))
    for column in ("name_terms", "word_terms"):
        if column in memories.columns:
            weighed = _each_common(weighed, common, column, column, pl.lit(None, dtype=pl.String))
    return weighed


def _each_common(memories: pl.DataFrame, common: pl.DataFrame, column: str, terms: str, instead: pl.Expr) -> pl.DataFrame:
    """`memories` with each element of the list `column` whose term (at its place in the list
    `terms`, which may be `column` itself) is common in its row's namespace replaced by
    `instead` (null: left out); the rows, their order and every other element as they were."""
    lists = list(dict.fromkeys((terms, column)))
    exploded = (
        memories.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"), "namespace", *lists)
        .explode(*lists)
        .join(common.with_columns(_common=pl.lit(True)), left_on=["namespace", terms], right_on=["namespace", "term"], how="left", maintain_order="left")
    )
    element = pl.when(pl.col("_common")).then(instead).otherwise(pl.col(column))
    grouped = exploded.select("_row", element.alias(column)).group_by("_row", maintain_order=True).agg(pl.col(column).drop_nulls())
    # a row with an empty list explodes to no row: it keeps its list
    rows = pl.DataFrame({"_row": pl.int_range(memories.height, dtype=pl.Int64, eager=True)})
    made = rows.join(grouped, on="_row", how="left", maintain_order="left").get_column(column).cast(memories.schema[column])
    return memories.with_columns(pl.when(made.is_null()).then(pl.col(column)).otherwise(made).alias(column))


def weighted(memories: pl.DataFrame) -> pl.DataFrame:
    """with_namespace_weights over the terms common among these memories themselves."""
    return with_namespace_weights(memories, common_terms(memories))


def changed_terms(before: pl.DataFrame, after: pl.DataFrame) -> pl.DataFrame:
    """(namespace, term) common in one of two common_terms frames and not in the other."""
    return pl.concat([before.join(after, on=["namespace", "term"], how="anti"), after.join(before, on=["namespace", "term"], how="anti")])


def holders_of_changed(before: pl.DataFrame, after: pl.DataFrame, memories: pl.DataFrame) -> set[str]:
    """Ids of `memories` (id, namespace, terms) holding a term whose status differs between
    the two common_terms frames: every pair whose co_occurrence may change has one of them
    as an end (a pair's weights are its two ends' terms)."""
    changed = changed_terms(before, after)
    if changed.height == 0:
        return set()
    held = memories.select("id", "namespace", pl.col("terms").alias("term")).explode("term").join(changed, on=["namespace", "term"], how="semi")
    return set(held.get_column("id").to_list())


def rarity_weighted(memories: pl.DataFrame, common: pl.DataFrame) -> pl.DataFrame:
    """`memories` with term_weights (and the terms a reason may name) made again from their
    terms: each term's English rarity weight, as features.link_features makes it, lowered
    where `common` says so. For rows whose terms stopped being common, which
    with_namespace_weights cannot bring back."""
    again = {"term_weights": rarity_weights(pl.col("terms"))}
    if "name_terms" in memories.columns:
        again |= reason_terms()
    return with_namespace_weights(memories.with_columns(**again), common)


Change = tuple[dict[tuple[str, str], int], dict[str, int]]  # (holders per (namespace, term), memories per namespace) to add


class TermCounts:
    """How many memories of each namespace hold each term, kept as memories come and go: the
    watcher's common_terms without counting every memory's terms again each micro-batch
    (~35 ms at 100k memories). `common()` equals common_terms of the memories counted."""

    def __init__(self, holders: dict[tuple[str, str], int], sizes: dict[str, int], frequent: set[tuple[str, str]] | None = None):
        self.holders, self.sizes = holders, sizes
        # the only terms that may be common (given where the caller kept them up to date)
        self.frequent = {key for key, n in holders.items() if n >= COMMON_LEAST} if frequent is None else frequent

    @classmethod
    def of(cls, memories: pl.DataFrame) -> TermCounts:
        """The counts of these memories (namespace, terms)."""
        if memories.height == 0:
            return cls({}, {})
        held, sizes = _held(memories), _sizes(memories)
        return cls(dict(zip(zip(held["namespace"].to_list(), held["term"].to_list()), held["holders"].to_list())),
                   dict(zip(sizes["namespace"].to_list(), sizes["size"].to_list())))

    @staticmethod
    def change(gone: pl.DataFrame, came: pl.DataFrame) -> Change:
        """What replacing the rows `gone` (memories as they were counted: deleted, or before an
        edit) with the rows `came` (new, or after it) adds to the counts."""
        holders: dict[tuple[str, str], int] = {}
        sizes: dict[str, int] = {}
        for frame, sign in ((gone, -1), (came, 1)):
            for namespace, terms in zip(frame.get_column("namespace").to_list(), frame.get_column("terms").to_list()):
                sizes[namespace] = sizes.get(namespace, 0) + sign
                for term in set(terms or ()):
                    holders[(namespace, term)] = holders.get((namespace, term), 0) + sign
        return holders, sizes

    def common(self, change: Change | None = None) -> pl.DataFrame:
        """common_terms of the memories counted, with `change` applied where given."""
        added, grown = change or ({}, {})
        keys = self.frequent | {key for key, n in added.items() if self.holders.get(key, 0) + n >= COMMON_LEAST}
        rows = []
        for key in keys:
            if _is_common(self.holders.get(key, 0) + added.get(key, 0), self.sizes.get(key[0], 0) + grown.get(key[0], 0)):
                rows.append(key)
        return pl.DataFrame(sorted(rows), schema=_COMMON_SCHEMA, orient="row")

    def applied(self, change: Change) -> TermCounts:
        """New counts with `change` applied (these stay as they are: a micro-batch that fails
        leaves the index it started from whole)."""
        added, grown = change
        holders, sizes = dict(self.holders), dict(self.sizes)
        for table, deltas in ((holders, added), (sizes, grown)):
            for key, n in deltas.items():
                total = table.get(key, 0) + n
                if total:
                    table[key] = total
                else:
                    table.pop(key, None)
        frequent = (self.frequent - added.keys()) | {key for key in added if holders.get(key, 0) >= COMMON_LEAST}
        return TermCounts(holders, sizes, frequent)
