"""discover_links: the links a new, not yet stored memory would get in the current snapshot,
scored by the batch pipeline's own code (crosstier.transforms.link.links.scored_links). Nothing is written."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

from crosstier.core.config import TIERS, Settings
from crosstier.retrieval.correlations import check_tiers, snippet
from crosstier.retrieval.errors import DiscoveryDisabledError, InvalidArgumentError
from crosstier.retrieval.snapshot import _LOCK, default_settings, embedding_model, open_snapshot, visible
from crosstier.retrieval.vectors import embed_texts, export_dir, snapshot_vectors

NEW_MEMORY_ID = "new-memory"
_INVERSE = {"generalizes": "specializes", "specializes": "generalizes"}


def discover_links(
    content: str,
    *,
    tier: str,
    memory_id: str | None = None,
    search_space: list[str] | None = None,
    timestamp: datetime | None = None,
    session_id: str | None = None,
    entities: list[str] | None = None,
    refs: list[str] | None = None,
    principal: str | None = None,
    namespace: str | None = None,
    out: str | os.PathLike | None = None,
    settings: Settings | None = None,
) -> list[dict[str, Any]]:
    """Links of the new memory, strongest first, from its point of view: [{target_id,
    target_snippet, target_tier, relationship_type, direction, score, semantic, co_occurrence, temporal,
    cross_reference, cosine, reason}]. Only memories of its namespace (default "default") that the
    principal may read take part; targets are limited to the search_space tiers; at most
    max_links_per_memory discovered links, as a run would keep. A memory_id already in the
    snapshot is scored as an edit of that memory."""
    import numpy as np
    import polars as pl

    from crosstier.transforms.embed.text import context_vectors
    from crosstier.transforms.link.links import scored_links
    from crosstier.transforms.schema import MEMORY_SCHEMA
    from crosstier.transforms.link.terms import with_terms

    settings = settings or default_settings()
    if not settings.auto_discover:
        raise DiscoveryDisabledError("link discovery is disabled (AUTO_DISCOVER_ENABLED=false)")
    if not isinstance(content, str) or not content.strip():
        raise InvalidArgumentError("content must be a non-empty string")
    if tier not in TIERS:
        raise InvalidArgumentError(f"unknown tier {tier!r} (known: {', '.join(TIERS)})")
    space = check_tiers(search_space, "search_space")
    new_id = memory_id or NEW_MEMORY_ID
    namespace = namespace or "default"

    snapshot = open_snapshot(out, settings)
    vectors = snapshot_vectors(snapshot)
    with _LOCK:
        relation = snapshot.con.sql("select * from memories where namespace = $namespace", params={"namespace": namespace})
        corpus = pl.from_arrow(relation.to_arrow_table())
    keep = [
        i != new_id and i in vectors.row and visible(r, principal)
        for i, r in zip(corpus.get_column("id").to_list(), corpus.get_column("readers").to_list())
    ]
    corpus = corpus.filter(pl.Series(keep, dtype=pl.Boolean)) if corpus.height else corpus

    new = pl.DataFrame(
        [{
            "id": new_id, "tier": tier, "content": content.strip(), "timestamp": timestamp, "session_id": session_id,
            "namespace": namespace, "readers": None, "entities": list(entities or []), "refs": list(refs or []),
            "metadata": None, "store": "discover", "location": "discover_links", "content_hash": None,
        }],
        schema={k: v for k, v in MEMORY_SCHEMA.items() if k != "embedding"},
    )
    new = with_terms(new)  # terms depend only on the memory itself
    frame = pl.concat([corpus.select(new.columns).cast(new.schema), new], how="vertical")

    model = embedding_model(snapshot, settings)
    query = embed_texts(model, settings, [content.strip()], export_dir(snapshot))
    rows = [vectors.row[i] for i in corpus.get_column("id").to_list()]
    matrix = np.vstack([vectors.matrix[rows], query]) if rows else query
    if matrix.shape[1] != query.shape[1]:
        raise InvalidArgumentError(f"model {model!r} gives {query.shape[1]}-dim vectors, the snapshot has {matrix.shape[1]}")
    # a session turn's vector takes in its neighbours' as the batch run does (crosstier.transforms.embed.text);
    # the neighbours' snapshot vectors already hold their own context, so this is the batch vector approximately
    matrix[-1] = context_vectors(frame, matrix)[-1]

    links = scored_links(frame, matrix, settings.scoring, focus_ids={new_id})
    texts = dict(zip(frame.get_column("id").to_list(), frame.get_column("content").to_list()))
    found = []
    for link in links.iter_rows(named=True):
        outgoing = link["source_id"] == new_id
        other, other_tier = (link["target_id"], link["target_tier"]) if outgoing else (link["source_id"], link["source_tier"])
        if other == new_id or (space is not None and other_tier not in space):
            continue
        kind = link["relationship_type"]
        found.append({
            "memory_id": new_id,
            "target_id": other,
            "target_snippet": snippet(texts.get(other)),
            "target_tier": other_tier,
            "relationship_type": kind if outgoing else _INVERSE.get(kind, kind),
            "direction": "both" if kind == "contradicts" else ("out" if outgoing else "in"),
            "score": link["score"],
            "semantic": link["semantic"],
            "co_occurrence": link["co_occurrence"],
            "temporal": link["temporal"],
            "cross_reference": link["cross_reference"],
            "cosine": link["cosine"],
            "reason": link["reason"],
            "metadata": json.loads(link["metadata"]) if link.get("metadata") else None,
        })
    found.sort(key=lambda l: (-l["score"], l["target_id"], l["relationship_type"]))
    return found[: settings.scoring.max_links_per_memory]
