"""The seed's Testing Strategy (../shared/seed/cross-tier-correlator.md) and its usage
examples, in Python, against the snapshot of the bundled sample data.

`sample_snapshot` (tests/conftest.py) is the warehouse folder of a flow run over data/sample;
its planted relationships are listed in data/sample/EXPECTED.md."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.config import settings_from_dict
from crosstier.core.manual_log import read_records
from crosstier.retrieval import add_relationship, build_correlation_graph, discover_links, find_correlations, report, retrieve_with_expansion
from crosstier.retrieval.snapshot import open_snapshot

SETUP_EPISODE = "ep-2026-11-05-002"  # 'CREATE EXTENSION vector done' on search_staging (EXPECTED.md)


@pytest.fixture(scope="module")
def out(sample_snapshot) -> Path:
    """The sample run's warehouse (a missing or failing fixture is an error here, never a skip)."""
    return Path(sample_snapshot)


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    """The defaults of DESIGN.md, whatever the environment says."""
    return settings_from_dict({}, base=tmp_path_factory.mktemp("cfg"), env={})


# ------------------------------------------------------------------ describe('cross-tier-correlator')


def test_finds_semantic_similarity_between_related_memories(out):
    result = find_correlations(SETUP_EPISODE, max_results=5, out=out)
    assert len(result["correlations"]) > 0
    assert result["memory_tier"] == "episodic"
    # the planted links of this episode (EXPECTED.md), seen from it
    seen = {(c["target_id"], c["relationship_type"]) for c in find_correlations(SETUP_EPISODE, max_results=50, out=out)["correlations"]}
    assert {("sem-search-pgvector", "derives_from"), ("proc-pgvector-setup", "specializes"), ("ep-2026-11-05-001", "temporal_sequence")} <= seen


def test_respects_minimum_correlation_score(out):
    strong = open_snapshot(out).query("select source_id from relationships where score >= 0.8 order by source_id limit 1")
    memory_id = strong[0]["source_id"] if strong else SETUP_EPISODE
    result = find_correlations(memory_id, min_score=0.8, out=out)
    assert all(c["score"] >= 0.8 for c in result["correlations"])
    assert (len(result["correlations"]) > 0) == bool(strong)
    assert result["total_found"] <= find_correlations(memory_id, out=out)["total_found"]


def test_discovers_cross_tier_links_seed_case(out, settings):
    """The seed's call. Under DESIGN.md's scoring, similar wording alone scores at most 0.55 < 0.6
    (a link needs evidence beyond paraphrase); DESIGN.md says a user who lowers the threshold gets
    similarity-only links, which is what this three-word text can have."""
    from dataclasses import replace

    lowered = replace(settings, scoring=replace(settings.scoring, min_correlation_score=0.3))
    links = discover_links("PostgreSQL pgvector setup", tier="episodic", memory_id="test-ep", search_space=["semantic"], out=out, settings=lowered)
    assert any(link["target_tier"] == "semantic" for link in links)
    assert all(link["target_tier"] == "semantic" for link in links)


def test_discovers_cross_tier_links_with_evidence_at_the_default_threshold(out, settings):
    content = "Finished the PostgreSQL pgvector setup for search-svc as sem-search-pgvector describes: HNSW index, vector(384)."
    links = discover_links(content, tier="episodic", memory_id="test-ep", search_space=["semantic", "procedural"], out=out, settings=settings)
    assert any(link["target_tier"] == "semantic" for link in links)
    assert "sem-search-pgvector" in {link["target_id"] for link in links}
    assert all(link["score"] >= 0.6 or link["cross_reference"] > 0 for link in links)


# ------------------------------------------------------------------ usage examples


def test_add_relationship_example(out, tmp_path):
    copy = tmp_path / "warehouse"
    shutil.copytree(out, copy, symlinks=True)  # the shared snapshot's manual log stays untouched
    record = add_relationship(
        SETUP_EPISODE, "sem-search-pgvector", "references", score=0.85,
        metadata={"discoveredBy": "auto", "context": "User mentioned TypeScript preference"}, out=copy,
    )
    assert record["score"] == 0.85 and record["metadata"]["discoveredBy"] == "auto"
    assert len(read_records(Catalog(copy).manual_log)[0]) == 1


def test_build_correlation_graph_example(out):
    seeds = [SETUP_EPISODE, "sem-search-pgvector", "proc-pgvector-setup"]
    graph = build_correlation_graph(seeds, include_tiers=["episodic", "semantic"], max_depth=2, out=out)
    assert len(graph["nodes"]) >= 3 and len(graph["edges"]) >= 2
    assert all(n["tier"] in ("episodic", "semantic") for n in graph["nodes"] if n["depth"] > 0)


def test_retrieve_with_expansion_example(out, settings):
    result = retrieve_with_expansion("pgvector HNSW index on search-svc", recency_weight=0.0, out=out, settings=settings)
    assert len(result["primary"]) == 5
    assert result["total_results"] == len(result["primary"]) + len(result["expanded"])
    primary = {h["id"] for h in result["primary"]}
    assert all(e["from_id"] in primary and e["target_id"] not in primary for e in result["expanded"])
    assert any("pgvector" in h["content"].lower() for h in result["primary"])


def test_output_example_report(out):
    text = report(SETUP_EPISODE, out=out)
    for heading in ("# Cross-Tier Correlation Report", "**Seed Memory:** " + SETUP_EPISODE, "## Direct Correlations (",
                    "## Correlation Graph", "## Tier Distribution", "## Recommendations"):
        assert heading in text
    row = next(line for line in text.splitlines() if line.startswith("| sem-search-pgvector |"))
    assert row.split(" | ")[2:4] == ["semantic", "derives_from"] and "pgvector" in row.split(" | ")[1]


def test_relationships_respect_memory_access_controls(out, settings):
    """Privacy: 'Relationships respect memory access controls'. alice's private memories stay
    out of everything another principal reads."""
    private = [r["id"] for r in open_snapshot(out).query("select id from memories where readers is not null and not list_contains(readers, 'priya')")]
    assert private
    words = set(private)
    hits = retrieve_with_expansion("Alice salary dentist Wednesday hours", top_k=20, expand=10, principal="priya", out=out, settings=settings)
    returned = {h["id"] for h in hits["primary"]} | {e["target_id"] for e in hits["expanded"]}
    assert not words & returned
    trusted = retrieve_with_expansion("Alice salary dentist Wednesday hours", top_k=20, expand=10, out=out, settings=settings)
    assert words & {h["id"] for h in trusted["primary"]}  # the query does find them for the trusted caller
    for memory in [SETUP_EPISODE, "sem-search-pgvector"]:
        graph = build_correlation_graph([memory], max_depth=3, principal="priya", out=out)
        assert not words & {n["id"] for n in graph["nodes"]}


def test_links_never_cross_namespaces(out):
    """EXPECTED.md, 'Must not link': none of these pairs is linked, from either end."""
    pairs = [
        ("ops-sem-billing-py312", "proc-sem-billing-py312"),
        ("ops-ep-2026-11-10-006", "ep-2026-11-10-003"),
        ("ops-sem-pool-budget", "sem-pool-budget"),
        ("ops-proc-pg-dump", "proc-pg-dump-backup"),
        ("ops-sem-deploy-sh", "sem-deploy-sh"),
    ]
    for a, b in pairs:
        assert b not in {c["target_id"] for c in find_correlations(a, max_results=1000, out=out)["correlations"]}
        assert a not in {c["target_id"] for c in find_correlations(b, max_results=1000, out=out)["correlations"]}
