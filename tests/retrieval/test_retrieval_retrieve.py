"""retrieve_with_expansion and report on the tiny snapshot (hand-picked unit vectors)."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from crosstier.retrieval import report, retrieve_with_expansion
from crosstier.retrieval.errors import InvalidArgumentError, UnknownMemoryError
from crosstier.retrieval.testing import publish_tiny

Q = np.array([1.0, 0.0, 0.0, 0.0])  # cosine: ep1 1.0, sem-secret 0.9, sem1 0.8, proc1 0.6


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return publish_tiny(tmp_path_factory.mktemp("warehouse"))


def test_primary_by_cosine_then_expanded_without_duplicates(out):
    result = retrieve_with_expansion("pgvector", query_embedding=Q, top_k=2, expand=2, out=out)
    assert [(h["id"], round(h["similarity"], 3)) for h in result["primary"]] == [("ep1", 1.0), ("sem-secret", 0.9)]
    assert result["primary"][0]["content"].startswith("Discussed PostgreSQL")
    expanded = [(e["from_id"], e["target_id"], e["relationship_type"]) for e in result["expanded"]]
    # ep1's strongest are sem-secret (already primary: skipped), sem1, proc1; sem-secret's: ep1 (primary), sem3
    assert expanded == [("ep1", "sem1", "references"), ("ep1", "proc1", "specializes"), ("sem-secret", "sem3", "references")]
    assert result["total_results"] == 5


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"tiers": ["semantic"]}, ["sem-secret", "sem1", "sem2"]),
        ({"namespace": "ops"}, ["ops1", "ops2"]),
        ({"expand": 0}, ["ep1", "sem-secret", "sem1"]),
    ],
)
def test_filters(out, kwargs, expected):
    result = retrieve_with_expansion("q", query_embedding=Q, top_k=3, out=out, **kwargs)
    assert [h["id"] for h in result["primary"]] == expected
    assert all(e["target_id"] not in expected for e in result["expanded"])


def test_expanded_stay_in_namespace(out):
    result = retrieve_with_expansion("q", query_embedding=Q, top_k=20, expand=20, out=out)
    assert "ops1" not in [e["target_id"] for e in result["expanded"] if e["from_id"] == "ep1"]


def test_recency_weight(out):
    now = datetime(2026, 11, 20, 8, 0, tzinfo=timezone.utc)  # ep-alice's time
    plain = retrieve_with_expansion("q", query_embedding=np.array([0.0, 0.0, 0.0, 1.0]), top_k=2, expand=0, out=out, now=now)
    recent = retrieve_with_expansion("q", query_embedding=np.array([0.0, 0.0, 0.0, 1.0]), top_k=2, expand=0, out=out, now=now, recency_weight=0.9)
    assert plain["primary"][0]["id"] == "orphan1"
    assert recent["primary"][0]["id"] == "ep-alice" and recent["primary"][0]["recency"] == pytest.approx(1.0)
    # score = 0.1 * cosine + 0.9 * exp(-age / 7 days); a memory without a time has no recency
    second = recent["primary"][1]
    assert (second["id"], second["recency"], second["score"]) == ("orphan1", 0.0, pytest.approx(0.1))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"top_k": 0}, "top_k"),
        ({"expand": -1}, "expand"),
        ({"recency_weight": 1.5}, "recency_weight"),
        ({"tiers": ["dreams"]}, "tier"),
        ({"query_embedding": np.ones(3)}, "dimensions"),
    ],
)
def test_errors(out, kwargs, match):
    kwargs.setdefault("query_embedding", Q)
    with pytest.raises(InvalidArgumentError, match=match):
        retrieve_with_expansion("q", out=out, **kwargs)


def test_empty_query_is_refused(out):
    with pytest.raises(InvalidArgumentError):
        retrieve_with_expansion("  ", out=out)


# ------------------------------------------------------------------ report


def test_report_sections(out):
    text = report("ep1", out=out, generated_at=datetime(2026, 4, 4, 1, 30, tzinfo=timezone.utc))
    assert text.startswith("# Cross-Tier Correlation Report\n\n**Generated:** 2026-04-04T01:30:00Z\n**Seed Memory:** ep1 (episodic")
    assert "## Direct Correlations (4)" in text
    assert "> Discussed PostgreSQL pgvector integration for semantic search" in text
    assert "| sem1 | Embeddings live in Postgres with pgvector | semantic | references | 0.92 | Entity match: pgvector |" in text
    tree = text.split("```text\n")[1].split("```")[0].splitlines()
    assert tree[:3] == [
        "ep1 — Discussed PostgreSQL pgvector integration for semantic search",
        "├── sem-secret (supports, 0.95) — Bob's salary review notes about pgvector budget",
        "│   └── sem3 (references, 0.88) — Vault rotation happens quarterly",
    ]
    assert "└── ep2 (temporal_sequence, 0.78) — Benchmarked pgvector index build times on staging" in tree
    assert "    └── ep-alice (references, 0.70) — Alice's private notes about her review" in tree
    assert "| Semantic | 4 | 0.85 |" in text  # sem-secret .95, sem1 .92, sem3 .88, sem2 .66
    assert "**Strong link detected** — ep1 → sem-secret (0.95, supports) “Bob's salary review notes about pgvector budget”" in text
    assert ("**Potential contradiction** — sem1 “Embeddings live in Postgres with pgvector” ↔ sem2 “Embeddings do not live "
            "in Postgres” (review needed") in text
    # recommendations are about ep1 and what is beside it: orphan1 is neither
    assert "orphan1" not in text
    assert "**Orphan memory** — orphan1 has no correlations" in report("orphan1", out=out)
    assert text.rstrip().endswith("*Cross-Tier Correlator — Connecting experiences to knowledge.*")


def test_report_unknown_memory(out):
    with pytest.raises(UnknownMemoryError):
        report("nope", out=out)
