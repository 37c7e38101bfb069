"""add_relationship: validate a manual link against the snapshot and append it to the manual
log. The next flow run merges it (a manual link overrides a discovered one on the same pair)."""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timezone
from typing import Any

from crosstier.core.catalog import Catalog
from crosstier.core.config import Settings
from crosstier.core.manual_log import append_record
from crosstier.core.vocabulary import NOT_RELATED
from crosstier.retrieval.correlations import RELATIONSHIP_TYPES, require_memories
from crosstier.retrieval.errors import InvalidArgumentError
from crosstier.retrieval.snapshot import open_snapshot


def add_relationship(
    source_id: str,
    target_id: str,
    relationship_type: str,
    *,
    score: float | None = None,
    metadata: dict[str, Any] | None = None,
    principal: str | None = None,
    namespace: str | None = None,
    out: str | os.PathLike | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Append one manual relationship to the log and return the stored record.

    Checks: both ids in the snapshot (and readable by the principal, and in `namespace` when
    given), both in one namespace, a known type, no self link, score in [0, 1] or None (a
    person's link then counts as full strength), metadata a JSON-serialisable object. A
    `contradicts` link is stored with its two ends in id order, as the pipeline stores it."""
    if relationship_type not in RELATIONSHIP_TYPES and relationship_type != NOT_RELATED:
        raise InvalidArgumentError(
            f"unknown relationship type {relationship_type!r} (known: {', '.join(RELATIONSHIP_TYPES)}; "
            f"or {NOT_RELATED} to record that the two are not related)"
        )
    if not isinstance(source_id, str) or not isinstance(target_id, str) or not source_id or not target_id:
        raise InvalidArgumentError("source_id and target_id must be non-empty strings")
    if source_id == target_id:
        raise InvalidArgumentError(f"a memory cannot be linked to itself ({source_id!r})")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) or not 0.0 <= score <= 1.0:
            raise InvalidArgumentError(f"score must be a number in [0, 1], got {score!r}")
        score = float(score)
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise InvalidArgumentError(f"metadata must be a JSON object (a dict), got {type(metadata).__name__}")
        try:
            metadata = json.loads(json.dumps(metadata, allow_nan=False, sort_keys=True))
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"metadata is not JSON-serialisable: {exc}") from None

    snapshot = open_snapshot(out, settings)
    ends = require_memories(snapshot, [source_id, target_id], principal=principal, namespace=namespace)
    if ends[source_id]["namespace"] != ends[target_id]["namespace"]:
        raise InvalidArgumentError(
            f"{source_id!r} is in namespace {ends[source_id]['namespace']!r} and {target_id!r} in "
            f"{ends[target_id]['namespace']!r}: links never cross namespaces"
        )
    if relationship_type in ("contradicts", NOT_RELATED):
        source_id, target_id = sorted((source_id, target_id))
    record = {
        "source_id": source_id,
        "target_id": target_id,
        "relationship_type": relationship_type,
        "score": score,
        "metadata": metadata,
        "namespace": ends[source_id]["namespace"],
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "created_by": principal,
    }
    append_record(Catalog(snapshot.catalog.root).manual_log, record)
    return record
