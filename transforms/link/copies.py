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
import json
import math
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
_WEEKDAY_WORD = re.compile(rf"\b{_WEEKDAY}\b")
_MARKUP = re.compile(r"[*_`~>#|\[\]()]+")
_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")

COPY_COLUMNS = {"id": pl.String, "copy_key": pl.String, "copy_rank": pl.Int64, "copies": pl.Int64}


def normalised_text(content: str) -> str:
    """The text a copy shares with its original: case, markup, punctuation, spacing and dates set aside."""
    text = unicodedata.normalize("NFKC", content).lower()
    if _DATE_NOISE.search(text):
        text = _WEEKDAY_WORD.sub(" ", _DATE_NOISE.sub(" ", text))
    text = _PUNCT.sub(" ", _MARKUP.sub(" ", text))
    return _SPACE.sub(" ", text).strip()


def copy_key(namespace: str | None, content: str) -> str:
    """The group key of a memory: its namespace and normalised text, hashed."""
    return hashlib.sha1(f"{namespace}\x00{normalised_text(content)}".encode("utf-8")).hexdigest()[:16]


def copy_groups(memories: pl.DataFrame) -> pl.DataFrame:
    """One row per memory that has a copy: id, copy_key, copy_rank (1 = first in time) and copies (group size).

    Copies are ordered by time (undated last), then id, so the chain does not depend on row order.
    """
    if memories.height == 0:
        return pl.DataFrame(schema=COPY_COLUMNS)
    frame = memories.select("id", "namespace", "content", "timestamp").with_columns(
        pl.Series("copy_key", [copy_key(ns, c) for ns, c in zip(memories["namespace"].to_list(), memories["content"].to_list())],
                  dtype=pl.String)
    )
    grouped = (
        frame.with_columns(pl.len().over("copy_key").alias("copies"))
        .filter(pl.col("copies") > 1)
        .sort("copy_key", "timestamp", "id", nulls_last=True)
        .with_columns(pl.col("id").cum_count().over("copy_key").cast(pl.Int64).alias("copy_rank"))
    )
    return grouped.select("id", "copy_key", "copy_rank", pl.col("copies").cast(pl.Int64))


def _group_spans(memories: pl.DataFrame, groups: pl.DataFrame) -> dict[str, dict]:
    """Per group: how many copies, on how many days, the first and last day."""
    joined = groups.join(memories.select("id", "timestamp"), on="id", how="left")
    spans = {}
    for key, rows in joined.group_by("copy_key"):
        stamps = [t for t in rows["timestamp"].to_list() if t is not None]
        days = sorted({t.date().isoformat() for t in stamps})
        spans[key[0]] = {"copies": rows.height, "days": len(days), "first": days[0] if days else None, "last": days[-1] if days else None}
    return spans


def appearance(span: dict) -> str:
    """"appears on 3 days, first 2026-05-12, last 2026-05-14" (or "appears 3 times" when undated)."""
    if span.get("days"):
        return f"appears on {span['days']} day{'s' if span['days'] != 1 else ''}, first {span['first']}, last {span['last']}"
    return f"appears {span['copies']} times"


def carried_forward_links(memories: pl.DataFrame, groups: pl.DataFrame, tau_days: float) -> pl.DataFrame:
    """Each copy linked to the next in time: temporal_sequence, reason "Carried forward (appears on ...)"."""
    if groups.height == 0:
        return pl.DataFrame(schema=RELATIONSHIP_SCHEMA)
    spans = _group_spans(memories, groups)
    info = memories.select("id", "tier", "namespace", "timestamp")
    ordered = groups.join(info, on="id", how="left").sort("copy_key", "copy_rank")
    rows = []
    previous = None
    for row in ordered.iter_rows(named=True):
        if previous is not None and previous["copy_key"] == row["copy_key"]:
            span = spans[row["copy_key"]]
            a, b = previous["timestamp"], row["timestamp"]
            temporal = math.exp(-abs((b - a).total_seconds()) / (86400.0 * tau_days)) if a is not None and b is not None else None
            rows.append({
                "source_id": previous["id"], "source_tier": previous["tier"],
                "target_id": row["id"], "target_tier": row["tier"],
                "relationship_type": "temporal_sequence", "score": 1.0, "semantic": 1.0, "co_occurrence": 1.0,
                "temporal": temporal, "cross_reference": 0.0,
                "reason": f"Carried forward ({appearance(span)})",
                "origin": "discovered", "namespace": row["namespace"], "run_id": None,
                "metadata": json.dumps({"copy_group": row["copy_key"], **span}, sort_keys=True),
            })
        previous = row
    return pl.DataFrame(rows, schema=RELATIONSHIP_SCHEMA)


def collapsed_copy_links(links: pl.DataFrame, groups: pl.DataFrame) -> pl.DataFrame:
    """Links with copies folded: none inside a group, and between a group and any other memory
    (or group) only one, an explicit reference first, then the strongest. Manual links stay."""
    if groups.height == 0 or links.height == 0:
        return links
    key = groups.select("id", "copy_key")
    ends = (
        links.with_row_index("_row")
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
    columns = ["_row", *links.columns]
    kept = pl.concat([best.select(columns), outside.filter(pl.col("_pinned")).select(columns)])
    return kept.sort("_row").select(links.columns)
