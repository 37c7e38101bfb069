"""retrieve_with_expansion: semantic search over the snapshot's vectors, then each top hit
expanded with its strongest correlations (the seed's AgeMem integration)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any

import numpy as np

from crosstier.core.config import Settings
from crosstier.retrieval.correlations import check_count, check_tiers, snippet, visible_links
from crosstier.retrieval.errors import InvalidArgumentError
from crosstier.retrieval.snapshot import default_settings, embedding_model, memories_by_id, open_snapshot
from crosstier.retrieval.vectors import embed_texts, export_dir, snapshot_vectors


def recency(timestamps_us: np.ndarray, now: datetime, tau_days: float) -> np.ndarray:
    """exp(-age / tau) per memory; 0 for a memory without a time, 1 for one in the future."""
    now_us = now.timestamp() * 1e6
    age_days = np.maximum(now_us - timestamps_us, 0.0) / 86_400e6
    decay = np.exp(-age_days / tau_days)
    return np.where(np.isnan(timestamps_us), 0.0, decay)


def retrieve_with_expansion(
    query: str,
    *,
    top_k: int = 5,
    expand: int = 3,
    recency_weight: float = 0.0,
    tiers: list[str] | None = None,
    principal: str | None = None,
    namespace: str | None = None,
    now: datetime | None = None,
    query_embedding: np.ndarray | None = None,
    out: str | os.PathLike | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """{primary, expanded, total_results}. primary: the top_k memories by
    (1 - recency_weight) * cosine + recency_weight * exp(-age / tau_days); expanded: for each
    hit in rank order, its `expand` strongest correlations not already returned.

    The query is embedded with the snapshot's model unless `query_embedding` is given."""
    if not isinstance(query, str) or (not query.strip() and query_embedding is None):
        raise InvalidArgumentError("query must be a non-empty string")
    check_count("top_k", top_k, low=1)
    check_count("expand", expand)
    if isinstance(recency_weight, bool) or not isinstance(recency_weight, (int, float)) or not 0.0 <= recency_weight <= 1.0:
        raise InvalidArgumentError(f"recency_weight must be a number in [0, 1], got {recency_weight!r}")
    wanted_tiers = check_tiers(tiers)
    settings = settings or default_settings()
    snapshot = open_snapshot(out, settings)
    vectors = snapshot_vectors(snapshot)
    if query_embedding is None:
        q = embed_texts(embedding_model(snapshot, settings), settings, [query], export_dir(snapshot))[0]
    else:
        q = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
        q = q / (np.linalg.norm(q) or 1.0)
    if vectors.matrix.shape[0] and q.shape[0] != vectors.matrix.shape[1]:
        raise InvalidArgumentError(f"query vector has {q.shape[0]} dimensions, the snapshot's have {vectors.matrix.shape[1]}")

    mask = vectors.mask(principal, namespace)
    if wanted_tiers is not None:
        mask = mask & np.isin(vectors.tiers, list(wanted_tiers))
    similarity = vectors.matrix @ q if vectors.matrix.shape[0] else np.zeros(0, dtype=np.float32)
    score = similarity.astype(np.float64)
    fresh = None
    if recency_weight:
        fresh = recency(vectors.timestamps_us, now or datetime.now(timezone.utc), settings.scoring.tau_days)
        score = (1.0 - recency_weight) * score + recency_weight * fresh
    score = np.where(mask, score, -np.inf)
    k = min(top_k, int(mask.sum()))
    top = np.argpartition(-score, k - 1)[:k] if k else np.zeros(0, dtype=int)
    top = sorted(top.tolist(), key=lambda r: (-score[r], vectors.ids[r]))

    hit_ids = [str(vectors.ids[r]) for r in top]
    rows = memories_by_id(snapshot, hit_ids)
    primary = []
    for r, i in zip(top, hit_ids):
        m = rows[i]
        primary.append({
            "id": i,
            "tier": m["tier"],
            "namespace": m["namespace"],
            "score": float(score[r]),
            "similarity": float(similarity[r]),
            "recency": None if fresh is None else float(fresh[r]),
            "timestamp": m["timestamp"].isoformat() if m["timestamp"] is not None else None,
            "content": m["content"],
        })

    expanded: list[dict[str, Any]] = []
    if expand and hit_ids:
        links, others = visible_links(snapshot, rows, principal=principal, known=rows)
        seen = set(hit_ids)
        for i in hit_ids:
            taken = 0
            for link in (l for l in links if l["memory_id"] == i):
                if taken == expand:
                    break
                if link["other_id"] in seen:
                    continue
                seen.add(link["other_id"])
                taken += 1
                expanded.append({
                    "from_id": i,
                    "target_id": link["other_id"],
                    "target_snippet": snippet(others[link["other_id"]]["content"]) if link["other_id"] in others else "",
                    "target_tier": link["other_tier"],
                    "relationship_type": link["relationship_type"],
                    "direction": link["direction"],
                    "score": link["score"],
                    "reason": link["reason"],
                })
    return {"primary": primary, "expanded": expanded, "total_results": len(primary) + len(expanded)}

