"""Access control: with a principal, a memory it may not read is never returned, counted,
named in a reason, or walked through (tiny snapshot: sem-secret is bob's, ep-alice alice's)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crosstier.retrieval import add_relationship, build_correlation_graph, find_correlations, report, retrieve_with_expansion, run_sql
from crosstier.retrieval.errors import UnknownMemoryError
from crosstier.retrieval.testing import publish_tiny

HIDDEN_FROM_ALICE = ("sem-secret", "Bob's salary")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return publish_tiny(tmp_path_factory.mktemp("warehouse"))


def assert_hidden(value, words=HIDDEN_FROM_ALICE):
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    for word in words:
        assert word not in text


def test_hidden_target_is_not_returned_nor_counted(out):
    trusted = find_correlations("ep1", out=out)
    alice = find_correlations("ep1", out=out, principal="alice")
    assert trusted["total_found"] == 4 and alice["total_found"] == 3
    assert [c["target_id"] for c in alice["correlations"]] == ["sem1", "proc1", "ep2"]
    assert_hidden(alice)
    bob = find_correlations("ep1", out=out, principal="bob")
    assert bob["correlations"][0]["target_id"] == "sem-secret" and bob["total_found"] == 4


def test_a_memory_readable_by_its_readers_only(out):
    assert "ep-alice" in [c["target_id"] for c in find_correlations("ep2", out=out, principal="alice")["correlations"]]
    assert "ep-alice" not in [c["target_id"] for c in find_correlations("ep2", out=out, principal="bob")["correlations"]]


def test_hidden_memory_is_not_named_in_a_reason(out):
    trusted = {c["target_id"]: c["reason"] for c in find_correlations("ep2", out=out)["correlations"]}
    assert "sem-secret" in trusted["sem1"]
    alice = {c["target_id"]: c["reason"] for c in find_correlations("ep2", out=out, principal="alice")["correlations"]}
    assert alice["sem1"] == "Manual link (after [hidden memory])"
    bob = {c["target_id"]: c["reason"] for c in find_correlations("ep2", out=out, principal="bob")["correlations"]}
    assert bob["sem1"] == trusted["sem1"]


def test_querying_a_hidden_memory_looks_like_an_unknown_one(out):
    with pytest.raises(UnknownMemoryError) as hidden:
        find_correlations("sem-secret", out=out, principal="alice")
    with pytest.raises(UnknownMemoryError) as missing:
        find_correlations("sem-nothing", out=out, principal="alice")
    assert str(hidden.value).replace("sem-secret", "X") == str(missing.value).replace("sem-nothing", "X")
    assert find_correlations("sem-secret", out=out, principal="bob")["total_found"] == 2


def test_graph_does_not_walk_through_hidden_memories(out):
    trusted = {n["id"] for n in build_correlation_graph(["ep1"], max_depth=2, out=out)["nodes"]}
    assert {"sem-secret", "sem3"} <= trusted
    graph = build_correlation_graph(["ep1"], max_depth=2, out=out, principal="alice")
    ids = {n["id"] for n in graph["nodes"]}
    assert "sem-secret" not in ids
    assert "sem3" not in ids  # only reachable through sem-secret
    assert_hidden(graph)
    with pytest.raises(UnknownMemoryError):
        build_correlation_graph(["ep1", "sem-secret"], out=out, principal="alice")


def test_retrieve_never_returns_hidden_memories(out):
    query = np.array([1.0, 0.0, 0.0, 0.0])  # closest: ep1, then sem-secret (0.9)
    trusted = retrieve_with_expansion("q", query_embedding=query, top_k=3, out=out)
    assert [h["id"] for h in trusted["primary"]] == ["ep1", "sem-secret", "sem1"]
    alice = retrieve_with_expansion("q", query_embedding=query, top_k=3, out=out, principal="alice")
    assert [h["id"] for h in alice["primary"]] == ["ep1", "sem1", "proc1"]
    assert_hidden(alice)
    assert_hidden(retrieve_with_expansion("q", query_embedding=query, top_k=20, expand=20, out=out, principal="alice"))


def test_report_as_principal(out):
    text = report("ep1", out=out, principal="alice")
    assert_hidden(text)
    assert "Direct Correlations (3)" in text
    graph_section = text.split("## Correlation Graph")[1].split("## Tier Distribution")[0]
    assert "sem3" not in graph_section  # reachable only through sem-secret
    # sem3's only link ends at a memory alice may not read: for her it is an orphan
    assert "**Orphan memory** — sem3 has no correlations" in report("sem3", out=out, principal="alice")
    assert "**Orphan memory** — sem3" not in report("sem3", out=out)
    assert "sem-secret" in report("ep1", out=out, principal="bob")


def test_add_relationship_to_a_hidden_memory_is_refused(out):
    with pytest.raises(UnknownMemoryError):
        add_relationship("ep1", "sem-secret", "supports", out=out, principal="alice")


def test_sql_as_principal_sees_only_its_memories_and_links(out):
    columns, rows = run_sql("select id from memories order by id", out=out, principal="alice")
    assert "sem-secret" not in [r[0] for r in rows] and "ep-alice" in [r[0] for r in rows]
    _, links = run_sql("select source_id, target_id from relationships", out=out, principal="alice")
    assert all("sem-secret" not in pair for pair in links) and len(links) == 8
    _, both = run_sql("select count(*) from links_both_ways where other_id = 'sem-secret'", out=out, principal="alice")
    assert both == [(0,)]
    _, trusted = run_sql("select count(*) from memories", out=out)
    assert trusted == [(11,)]


def test_sql_as_principal_counts_only_its_memories_and_links_in_the_summaries(out):
    _, visible = run_sql("select count(*) from memories", out=out, principal="alice")
    _, links = run_sql("select count(*) from relationships", out=out, principal="alice")
    _, tiers = run_sql("select sum(memories) from tier_distribution", out=out, principal="alice")
    assert tiers[0][0] == visible[0][0] < 11  # sem-secret and the other hidden memories are not counted
    _, per_type = run_sql("select sum(links) from tier_links", out=out, principal="alice")
    assert per_type == links == [(8,)]
