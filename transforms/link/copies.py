"""Copies: one memory seen again (a "Still open" list carried forward day after day, a nightly
boilerplate line that differs only by its date).

Copies form a group (same namespace, same normalised text). A group links along time, each
copy to the next ("carried forward"), not all to all; its links to any other memory collapse
to the strongest one, so the group counts once against every cap. The grouping needs every
memory, so it runs with the cap over the full set of scored links (an incremental run
publishes what a full run does).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import polars as pl

from crosstier.transforms.schema import RELATIONSHIP_SCHEMA

_WEEKDAY = r"(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?"
_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
# What a carried-forward copy changes without saying anything new: its date, clock time and, beside
# a date or time, its weekday. A weekday alone is a stated value ("the gym class is on Tuesday" and
# "... on Thursday" are two claims, not one carried forward).
_DATE_NOISE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?z?)?"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\b"
    rf"|\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\b"
    r"|\d{1,2}月\d{1,2}日|星期[一二三四五六日天]|周[一二三四五六日]",
)
_DATE_NOISE_HINT = re.compile(r"[\d月星周]")  # each kind of date noise has one: a cheap scan first
_WEEKDAY_WORD = re.compile(rf"\b{_WEEKDAY}\b")
_MARKUP = re.compile(r"[*_`~>#|\[\]()]+")
_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")

# how pairs inside a copy group are treated (candidates.without_copy_pairs); in the settings
# fingerprint, so stored links from before the change are not reused by an incremental run
PAIRS_INSIDE_A_GROUP = "not scored"

COPY_COLUMNS = {"id": pl.String, "copy_key": pl.String, "copy_rank": pl.Int64, "copies": pl.Int64}


def normalised_text(content: str) -> str:
    """The text a copy shares with its original: case, markup, punctuation, spacing and dates set aside."""
    text = unicodedata.normalize("NFKC", content).lower()
    if _DATE_NOISE_HINT.search(text) and _DATE_NOISE.search(text):
        text = _WEEKDAY_WORD.sub(" ", _DATE_NOISE.sub(" ", text))
    text = _PUNCT.sub(" ", _MARKUP.sub(" ", text))
    return _SPACE.sub(" ", text).strip()


def _hashed(namespace: str | None, normalised: str) -> str:
    return hashlib.sha1(f"{namespace}\x00{normalised}".encode("utf-8")).hexdigest()[:16]


def copy_key(namespace: str | None, content: str) -> str:
    """The group key of a memory: its namespace and normalised text, hashed."""
    return _hashed(namespace, normalised_text(content))


def copy_key_column(memories: pl.DataFrame) -> pl.Series:
    """copy_key of every row (namespace, content), in row order: each distinct pair hashed once.
    Where the frame has the classifier's `copy_text` (features.copy_text: the normalised text),
    it is hashed as it is rather than normalised again (~50 us a text)."""
    text = "copy_text" if "copy_text" in memories.columns else "content"
    key_of = _hashed if text == "copy_text" else copy_key
    distinct = memories.select("namespace", text).unique()
    keyed = distinct.with_columns(pl.Series("copy_key", [key_of(ns, c) for ns, c in zip(distinct["namespace"].to_list(), distinct[text].to_list())], dtype=pl.String))
    return memories.select("namespace", text).join(keyed, on=["namespace", text], how="left", maintain_order="left", nulls_equal=True).get_column("copy_key")


def copy_groups(memories: pl.DataFrame, keys: pl.Series | None = None) -> pl.DataFrame:
    """One row per memory that has a copy: id, copy_key, copy_rank (1 = first in time) and copies (group size).
    `keys`: copy_key_column(memories), where the caller has it.

    Copies are ordered by time (undated last), then id, so the chain does not depend on row order.
    """
    if memories.height == 0:
        return pl.DataFrame(schema=COPY_COLUMNS)
    keys = copy_key_column(memories) if keys is None else keys.alias("copy_key")
    frame = memories.select("id", "namespace", "content", "timestamp").with_columns(keys)
    grouped = (
        frame.with_columns(pl.len().over("copy_key").alias("copies"))
        .filter(pl.col("copies") > 1)
        .sort("copy_key", "timestamp", "id", nulls_last=True)
        .with_columns(pl.col("id").cum_count().over("copy_key").cast(pl.Int64).alias("copy_rank"))
    )
    return grouped.select("id", "copy_key", "copy_rank", pl.col("copies").cast(pl.Int64))


def copy_groups_with_known_texts(memories: pl.DataFrame, known: pl.DataFrame | None) -> pl.DataFrame:
    """copy_groups(memories), each text's normalised form taken from `known` (content,
    copy_text: an earlier run's classifier evidence) where it holds that text, made only for
    the others: an incremental run spent ~1.5 s at 100k normalising texts that had not changed."""
    if known is None:
        return copy_groups(memories)
    known = known.select("content", "copy_text").unique("content")
    frame = memories.select("id", "namespace", "content", "timestamp").join(known, on="content", how="left", maintain_order="left")
    new = frame.filter(pl.col("copy_text").is_null()).get_column("content").unique().to_list()
    made = pl.DataFrame({"content": new, "made": [normalised_text(text) for text in new]}, schema={"content": pl.String, "made": pl.String})
    frame = frame.join(made, on="content", how="left", maintain_order="left")
    return copy_groups(frame.with_columns(pl.coalesce("copy_text", "made").alias("copy_text")).drop("made"))


def carried_forward_links(memories: pl.DataFrame, groups: pl.DataFrame, tau_days: float) -> pl.DataFrame:
    """Each copy linked to the next in time: temporal_sequence, reason "Carried forward (same text, 2 days later)".

    Built column-wise: a frequent filler ("ok", "sure") has thousands of copies, and a row
    at a time cost ~0.15 s a watcher micro-batch. A row says only what its two ends decide:
    the days between them ("same day", "2 days later", none when either is undated) and, as
    metadata, the group ({"copy_group": key}). The group's span (how many copies, on which
    days) is read from its chain by the read side (sql/copy_spans.sql): a row that named it
    changed with every new copy, so a watcher appending one "ok" republished all its chain."""
    if groups.height == 0:
        return pl.DataFrame(schema=RELATIONSHIP_SCHEMA)
    info = memories.select("id", "tier", "namespace", "timestamp")
    ordered = groups.join(info, on="id", how="left").sort("copy_key", "copy_rank")
    previous = {column: pl.col(column).shift(1).over("copy_key") for column in ("id", "tier", "timestamp")}
    seconds = (pl.col("timestamp") - previous["timestamp"]).dt.total_microseconds().abs().cast(pl.Float64) / 1e6
    gap = (pl.col("timestamp").dt.date() - previous["timestamp"].dt.date()).dt.total_days()
    later = (
        pl.when(gap.is_null()).then(pl.lit("same text"))
        .when(gap == 0).then(pl.lit("same text, same day"))
        .when(gap == 1).then(pl.lit("same text, 1 day later"))
        .otherwise(pl.format("same text, {} days later", gap))
    )
    links = (
        ordered.with_columns(_previous_id=previous["id"], _previous_tier=previous["tier"], _seconds=seconds, _later=later)
        .filter(pl.col("_previous_id").is_not_null())
        .select(
            pl.col("_previous_id").alias("source_id"), pl.col("_previous_tier").alias("source_tier"),
            pl.col("id").alias("target_id"), pl.col("tier").alias("target_tier"),
            pl.lit("temporal_sequence").alias("relationship_type"), pl.lit(1.0).alias("score"), pl.lit(1.0).alias("semantic"),
            pl.lit(1.0).alias("co_occurrence"), (-pl.col("_seconds") / (86400.0 * tau_days)).exp().alias("temporal"),
            pl.lit(0.0).alias("cross_reference"), pl.lit(None, dtype=pl.Float64).alias("cosine"),
            pl.format("Carried forward ({})", pl.col("_later")).alias("reason"),
            pl.lit("discovered").alias("origin"), "namespace", pl.lit(None, dtype=pl.String).alias("run_id"),
            pl.format('{{"copy_group": "{}"}}', pl.col("copy_key")).alias("metadata"),
        )
    )
    return links.cast(RELATIONSHIP_SCHEMA).select(RELATIONSHIP_SCHEMA.names())


def collapsed_copy_links(links: pl.DataFrame, groups: pl.DataFrame) -> pl.DataFrame:
    """Links with copies folded: none inside a group, and between a group and any other memory
    (or group) only one, an explicit reference first, then the strongest. Manual links stay."""
    kept = copy_folded_rows(links, groups)
    return links if kept is None else links.filter(kept)


def copy_folded_rows(links: pl.DataFrame, groups: pl.DataFrame) -> pl.Series | None:
    """Which links collapsed_copy_links keeps, as a mask over the rows; None when it keeps them
    all. A caller holding millions of links can leave them where they are: filtering the cap's
    columns of the 4.07M links of a 100k run copied them all (~1 GB) to drop a few hundred."""
    if groups.height == 0 or links.height == 0:
        return None
    # Only a link with an end in a group can be inside one or share its key with another: a
    # pair of memories has one scored link (candidates are unique pairs; a run's kept and fresh
    # links never share one), and the published ones are audited for it. So the others are
    # kept as they are, untouched: joining and sorting every link cost ~0.2 s per 0.5M, and
    # the joined copies ~0.5 KB a link of memory (300 MB for the 664k links of 20k memories).
    grouped = groups.get_column("id").implode()
    touches = links.select(pl.col("source_id").is_in(grouped) | pl.col("target_id").is_in(grouped)).to_series()
    if not touches.any():
        return None
    key = groups.select("id", "copy_key")
    ends = (
        links.select("source_id", "target_id", "score", "cross_reference", "origin", "namespace")
        .with_row_index("_row")
        .filter(touches)
        .join(key.rename({"id": "source_id", "copy_key": "_sk"}), on="source_id", how="left")
        .join(key.rename({"id": "target_id", "copy_key": "_tk"}), on="target_id", how="left")
        .with_columns(
            pl.coalesce("_sk", "source_id").alias("_a"),
            pl.coalesce("_tk", "target_id").alias("_b"),
            (pl.col("origin") == "manual").alias("_pinned"),
        )
        .with_columns(
            pl.min_horizontal("_a", "_b").alias("_lo"),
            pl.max_horizontal("_a", "_b").alias("_hi"),
        )
    )
    # null-safe: a link with one end outside every group is never "inside"
    inside = (pl.col("_sk") == pl.col("_tk")).fill_null(False) & ~pl.col("_pinned")
    outside = ends.filter(~inside)
    # the strongest link per (group or memory) pair; ties by the two ids so the choice is deterministic
    best = (
        outside.filter(~pl.col("_pinned"))
        .with_columns((pl.col("cross_reference").fill_null(0.0) > 0).alias("_explicit"))
        .sort(["_explicit", "score", "source_id", "target_id"], descending=[True, True, False, False])
        .unique(subset=["namespace", "_lo", "_hi"], keep="first", maintain_order=True)
    )
    kept = pl.concat([best.get_column("_row"), outside.filter("_pinned").get_column("_row")])
    return links.select(~touches | pl.int_range(pl.len(), dtype=pl.UInt32).is_in(kept.implode())).to_series()
