"""Incremental runs: which memories changed since the last snapshot, and which of its
scored links still hold. Pair scores depend only on the two memories (and the config),
so links between two unchanged memories are kept as they were and only pairs touching a
new, edited or deleted memory are scored again; the result equals a full run's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection

import numpy as np
import polars as pl

from crosstier.transforms.link.features import mentioned_ids, named_skills, skill_patterns

# Everything a pair's score and type can depend on. An edit to any of these rescoring the
# memory; `readers` and `metadata` do not affect links and only republish the row.
FINGERPRINT_COLUMNS = ("tier", "content_hash", "timestamp", "session_id", "namespace", "entities", "refs", "text_hash")


def memory_fingerprints(memories: pl.DataFrame, texts: pl.DataFrame) -> pl.DataFrame:
    """One fingerprint per memory over what its links depend on (texts: id, text_hash).
    sha256 rather than polars' hash, which may change between polars versions."""
    joined = memories.join(texts.select("id", "text_hash"), on="id", how="left").select("id", *FINGERPRINT_COLUMNS)
    fingerprints = [
        hashlib.sha256(json.dumps(row[1:], default=str, ensure_ascii=False).encode("utf-8")).hexdigest()
        for row in joined.iter_rows()
    ]
    return pl.DataFrame({"id": joined.get_column("id"), "fingerprint": fingerprints}, schema={"id": pl.String, "fingerprint": pl.String}).sort("id")


def published_alike(ids: pl.Series, vectors: np.ndarray, published: pl.DataFrame, tolerance: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(positions in `ids` of the ids `published` (id, embedding) holds, whether each one's
    vector, row-aligned with `ids`, is the published one: every component within `tolerance`;
    a published vector of another length never is)."""
    found = ids.to_frame("id").with_row_index("_at").join(published.select("id", "embedding"), on="id", how="inner")
    at = found.get_column("_at").to_numpy().astype(np.int64)
    dim = vectors.shape[1]
    comparable = (found.get_column("embedding").list.len() == dim).fill_null(False)
    same = np.zeros(found.height, dtype=bool)
    if comparable.any():
        before = found.get_column("embedding").filter(comparable).list.to_array(dim).to_numpy().astype(np.float32, copy=False)
        rows = at[comparable.to_numpy()]
        same[comparable.to_numpy()] = np.all(np.abs(vectors[rows] - before) <= tolerance, axis=1)
    return at, same


def moved_vector_ids(ids: pl.Series, vectors: np.ndarray, previous: pl.DataFrame) -> set[str]:
    """Ids whose vector (row-aligned with `ids`) is not, bit for bit, the one the last snapshot
    published for them (`previous`: id, embedding). The fingerprint covers the text a vector
    is made from, not a vector a store provides, nor the neighbours' vectors a session turn
    mixes in: a store that re-embeds a memory without changing its text moves it all the same.
    Ids the snapshot lacks are new, and the fingerprints name them already."""
    at, same = published_alike(ids, vectors, previous)
    return set(ids.gather(at[~same]).to_list())


def citing_ids(memories: pl.DataFrame, named: Collection[str]) -> set[str]:
    """Ids of the memories whose text names one of the `named` ids (ids that came or went
    since the last snapshot): as a token, as features.mentioned_ids finds them, or as a
    skill, as features.named_skills does. Such a memory starts or stops citing, and whether
    a memory cites anything decides whether cross_reference applies to every pair of it
    (DESIGN.md, Scoring): its fingerprint, over its own fields, cannot see that."""
    named = sorted(set(named))
    if not named or memories.height == 0:
        return set()
    skills = skill_patterns(named)
    folders = [skill_id.rsplit("/", 1)[-1] for skill_id, _ in skills]
    # a substring pass (Aho-Corasick, every core) first; the rules themselves on its few hits
    hits = memories.filter(pl.col("content").str.contains_any(named + folders, ascii_case_insensitive=True))
    wanted = set(named)
    return {
        memory_id for memory_id, content in zip(hits.get_column("id").to_list(), hits.get_column("content").to_list())
        if set(mentioned_ids(content, wanted)) - {memory_id} or named_skills(content, skills) - {memory_id}
    }


def changed_memory_ids(current: pl.DataFrame, previous: pl.DataFrame) -> tuple[set[str], set[str]]:
    """(new or edited ids, deleted ids) between two fingerprint frames."""
    joined = current.join(previous, on="id", how="left", suffix="_previous")
    changed = joined.filter(pl.col("fingerprint_previous").is_null() | (pl.col("fingerprint") != pl.col("fingerprint_previous")))
    deleted = previous.join(current, on="id", how="anti")
    return set(changed.get_column("id").to_list()), set(deleted.get_column("id").to_list())


def kept_links(previous_links: pl.DataFrame, touched: set[str]) -> pl.DataFrame:
    """The previous run's scored links whose two ends are both untouched."""
    return previous_links.filter(untouched(touched))


def untouched(touched: set[str]) -> pl.Expr:
    """True for a link with neither end among `touched` (kept_links; the batch run streams the
    last snapshot's stored links through it, partitions.filtered_partition)."""
    touched_ids = pl.Series(sorted(touched), dtype=pl.String).implode()
    return ~pl.col("source_id").is_in(touched_ids) & ~pl.col("target_id").is_in(touched_ids)
