"""find_correlations and build_correlation_graph on the tiny snapshot (retrieval/testing.py)."""

from __future__ import annotations

import pytest

from crosstier.retrieval import build_correlation_graph, find_correlations
from crosstier.retrieval.errors import InvalidArgumentError, NoSnapshotError, UnknownMemoryError
from crosstier.retrieval.snapshot import open_snapshot
from crosstier.retrieval.testing import publish_tiny


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return publish_tiny(tmp_path_factory.mktemp("warehouse"))


def targets(result):
    return [(c["target_id"], c["relationship_type"], c["direction"]) for c in result["correlations"]]


def test_correlations_strongest_first_from_the_memory_point_of_view(out):
    result = find_correlations("ep1", out=out)
    assert result["memory_id"] == "ep1" and result["memory_tier"] == "episodic"
    assert targets(result) == [
        ("sem-secret", "supports", "out"),
        ("sem1", "references", "out"),
        ("proc1", "specializes", "in"),  # proc1 generalizes ep1: from ep1 it is specializes
        ("ep2", "temporal_sequence", "out"),
    ]
    assert result["total_found"] == 4
    assert result["correlations"][1] == {
        "target_id": "sem1", "target_snippet": "Embeddings live in Postgres with pgvector", "target_tier": "semantic",
        "relationship_type": "references", "direction": "out", "score": 0.92, "reason": "Entity match: pgvector", "origin": "discovered",
    }


def test_inverse_names_and_both_ways(out):
    assert ("ep1", "generalizes", "out") in targets(find_correlations("proc1", out=out))
    assert ("sem2", "contradicts", "both") in targets(find_correlations("sem1", out=out))
    assert ("sem1", "contradicts", "both") in targets(find_correlations("sem2", out=out))


@pytest.mark.parametrize(
    "kwargs, expected, total",
    [
        ({"max_results": 2}, ["sem-secret", "sem1"], 4),
        ({"min_score": 0.8}, ["sem-secret", "sem1", "proc1"], 3),
        ({"min_score": 0.8, "max_results": 1}, ["sem-secret"], 3),
        ({"relationship_types": ["specializes"]}, ["proc1"], 1),
        ({"relationship_types": ["generalizes"]}, [], 0),  # the type is named from ep1's end
        ({"relationship_types": ["references", "temporal_sequence"]}, ["sem1", "ep2"], 2),
        ({"max_results": 0}, [], 4),
    ],
)
def test_filters(out, kwargs, expected, total):
    result = find_correlations("ep1", out=out, **kwargs)
    assert [c["target_id"] for c in result["correlations"]] == expected
    assert result["total_found"] == total


def test_min_score_holds_for_every_result(out):
    for memory in ("ep1", "ep2", "sem1", "proc1"):
        assert all(c["score"] >= 0.7 for c in find_correlations(memory, min_score=0.7, out=out)["correlations"])


def test_links_never_cross_namespaces(out):
    # The snapshot holds a corrupt ep1 -> ops1 row; it is never returned.
    assert "ops1" not in [c["target_id"] for c in find_correlations("ep1", out=out, max_results=100)["correlations"]]
    assert targets(find_correlations("ops1", out=out)) == [("ops2", "references", "out")]
    graph = build_correlation_graph(["ep1"], max_depth=3, out=out)
    assert {n["namespace"] for n in graph["nodes"]} == {"default"}
    assert all("ops1" not in (e["source_id"], e["target_id"]) for e in graph["edges"])


def test_namespace_argument(out):
    assert find_correlations("ops1", namespace="ops", out=out)["total_found"] == 1
    with pytest.raises(UnknownMemoryError, match="ops1"):
        find_correlations("ops1", namespace="default", out=out)


def test_orphan_has_no_correlations(out):
    assert find_correlations("orphan1", out=out) == {
        "memory_id": "orphan1", "memory_snippet": "How to water the office plants", "memory_tier": "procedural",
        "correlations": [], "total_found": 0,
    }


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"memory_id": "nope"}, UnknownMemoryError, "unknown memory 'nope'"),
        ({"memory_id": "ep1", "min_score": 1.5}, InvalidArgumentError, "min_score"),
        ({"memory_id": "ep1", "min_score": -0.1}, InvalidArgumentError, "min_score"),
        ({"memory_id": "ep1", "max_results": -1}, InvalidArgumentError, "max_results"),
        ({"memory_id": "ep1", "relationship_types": ["friends_with"]}, InvalidArgumentError, "friends_with"),
    ],
)
def test_errors(out, kwargs, error, match):
    memory_id = kwargs.pop("memory_id")
    with pytest.raises(error, match=match):
        find_correlations(memory_id, out=out, **kwargs)


def test_no_snapshot(tmp_path):
    with pytest.raises(NoSnapshotError, match="no snapshot"):
        find_correlations("ep1", out=tmp_path)


def test_sql_matches_the_links_both_ways_view(out):
    """sql/memory_links (index-friendly point lookups) names every link as the view does."""
    snapshot = open_snapshot(out)
    ids = [r["id"] for r in snapshot.query("select id from memories")]
    mine = snapshot.rows("memory_links", {"ids": ids, "min_score": None, "types": None})
    view = snapshot.query("select * from links_both_ways where memory_id <> other_id")
    key = lambda r: (r["memory_id"], r["other_id"], r["other_tier"], r["relationship_type"], r["direction"], r["score"], r["reason"], r["origin"], r["namespace"])  # noqa: E731
    assert sorted(map(key, mine)) == sorted(map(key, view))


def test_a_new_publish_is_seen_by_the_next_call(tmp_path):
    from crosstier.retrieval.testing import LINKS

    out = publish_tiny(tmp_path, run_id="r1")
    assert find_correlations("orphan1", out=out)["total_found"] == 0
    publish_tiny(tmp_path, run_id="r2", links=LINKS + [("orphan1", "proc1", "references", 0.7, "Entity match: How", "discovered", "default")])
    assert targets(find_correlations("orphan1", out=out)) == [("proc1", "references", "out")]


# ------------------------------------------------------------------ graph


def node_map(graph):
    return {n["id"]: n for n in graph["nodes"]}


def test_graph_breadth_first_with_depths(out):
    graph = build_correlation_graph(["ep1"], max_depth=2, out=out)
    nodes = node_map(graph)
    assert {i: n["depth"] for i, n in nodes.items()} == {
        "ep1": 0, "sem-secret": 1, "sem1": 1, "proc1": 1, "ep2": 1, "sem3": 2, "sem2": 2, "ep-alice": 2,
    }
    assert nodes["ep1"]["parent"] is None
    assert (nodes["sem3"]["parent"], nodes["sem3"]["relationship_type"]) == ("sem-secret", "references")
    assert (nodes["proc1"]["relationship_type"], nodes["proc1"]["direction"]) == ("specializes", "in")
    assert nodes["sem2"]["tier"] == "semantic"
    edges = {(e["source_id"], e["target_id"], e["relationship_type"]) for e in graph["edges"]}
    # stored direction and name; the ep2 -> sem1 link between two depth-1 nodes is included once
    assert ("proc1", "ep1", "generalizes") in edges and ("ep2", "sem1", "supports") in edges
    assert ("sem1", "sem2", "contradicts") in edges
    assert len(edges) == len(graph["edges"]) == 8
    assert graph["truncated"] is False


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"max_depth": 0}, {"ep1"}),
        ({"max_depth": 1}, {"ep1", "sem-secret", "sem1", "proc1", "ep2"}),
        ({"max_depth": 2, "include_tiers": ["semantic"]}, {"ep1", "sem-secret", "sem1", "sem2", "sem3"}),
        ({"max_depth": 2, "min_score": 0.85}, {"ep1", "sem-secret", "sem1", "sem3"}),
        ({"max_depth": 2, "relationship_types": ["references"]}, {"ep1", "sem1"}),
        ({"max_depth": 5, "max_nodes": 3}, {"ep1", "sem-secret", "sem1"}),
    ],
)
def test_graph_filters(out, kwargs, expected):
    assert set(node_map(build_correlation_graph(["ep1"], out=out, **kwargs))) == expected


def test_graph_cycles_end_and_several_seeds(out):
    # ep1 - ep2 - sem1 - ep1 is a cycle; a deep walk terminates and visits each node once.
    graph = build_correlation_graph(["ep2", "sem1", "ep2"], max_depth=10, out=out)
    ids = [n["id"] for n in graph["nodes"]]
    assert len(ids) == len(set(ids)) == 8
    assert node_map(graph)["sem1"]["depth"] == 0 and node_map(graph)["ep1"]["depth"] == 1


def test_graph_truncation_is_flagged(out):
    assert build_correlation_graph(["ep1"], max_nodes=2, out=out)["truncated"] is True


@pytest.mark.parametrize(
    "args, kwargs, error",
    [
        (["nope"], {}, UnknownMemoryError),
        (["ep1", "nope"], {}, UnknownMemoryError),
        ([], {}, InvalidArgumentError),
        (["ep1"], {"max_depth": -1}, InvalidArgumentError),
        (["ep1"], {"include_tiers": ["working"]}, InvalidArgumentError),
        (["ep1"], {"min_score": 2}, InvalidArgumentError),
    ],
)
def test_graph_errors(out, args, kwargs, error):
    with pytest.raises(error):
        build_correlation_graph(args, out=out, **kwargs)


def test_equal_scores_come_closer_text_first(tmp_path):
    """Scores saturate at 1 (a fact and several turns of its session can all reach it): among
    equal scores the link with the higher raw cosine comes first, in find_correlations and in
    the graph, not the one whose id sorts first."""
    import polars as pl

    from crosstier.core.catalog import Catalog
    from crosstier.retrieval.testing import tiny_tables
    from crosstier.transforms.publish.snapshot import publish_snapshot

    tables, parquet_only = tiny_tables()
    cosines = {("ep1", "sem1"): 0.41, ("ep1", "ep2"): 0.93, ("proc1", "ep1"): None}
    tables["relationships"] = tables["relationships"].with_columns(
        score=pl.when(pl.col("source_id").is_in(["ep1", "proc1"]) & pl.col("target_id").is_in(["sem1", "ep2", "ep1"])).then(1.0).otherwise(pl.col("score")),
        cosine=pl.struct("source_id", "target_id").map_elements(lambda r: cosines.get((r["source_id"], r["target_id"])), return_dtype=pl.Float64),
    )
    publish_snapshot(tables, Catalog(tmp_path), "r1", parquet_only=parquet_only, record={"run_id": "r1", "status": "published"})
    # ep2 (cosine 0.93) before sem1 (0.41) before proc1 (no cosine: a link the model did not score), all at 1.0
    assert [(c["target_id"], c["score"]) for c in find_correlations("ep1", out=tmp_path)["correlations"]][:3] == [("ep2", 1.0), ("sem1", 1.0), ("proc1", 1.0)]
    graph = build_correlation_graph("ep1", max_depth=1, out=tmp_path)
    assert [n["id"] for n in graph["nodes"] if n["depth"] == 1][:3] == ["ep2", "sem1", "proc1"]
