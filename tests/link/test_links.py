"""Link discovery: every relationship type and reason, direction, pruning, the cap, determinism, summaries, audits."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import numpy as np
import polars as pl
import pytest

from crosstier.core.config import ScoringConfig
from links_helpers import at, memories, same, vectors
from crosstier.transforms.link.links import (
    audit_failures,
    brute_force_links,
    capped_links,
    scored_links,
    tier_distribution,
    tier_links,
)
from crosstier.transforms.link import links as links_module
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA

DEFAULT = ScoringConfig()


def only_link(frame: pl.DataFrame, embeddings: np.ndarray, scoring: ScoringConfig = DEFAULT) -> dict:
    links = scored_links(frame, embeddings, scoring)
    assert links.height == 1, links
    return links.row(0, named=True)


# Each case: two memories (a, b) with cosine 1 between them; expected type, source and reason.
TYPE_CASES = [
    pytest.param(
        {"tier": "semantic", "content": "User prefers tabs"},
        {"tier": "semantic", "content": "User no longer prefers tabs"},
        "contradicts", "a", "Contradiction: negation (no longer)", id="contradicts-negation",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Deploys run on Fridays"},
        {"tier": "semantic", "content": "Deploys never run on Fridays"},
        "contradicts", "a", "Contradiction: negation (never)", id="contradicts-never",
    ),
    pytest.param(
        {"tier": "semantic", "content": "The API uses Python 3.11"},
        {"tier": "semantic", "content": "The API uses Python 3.12"},
        "contradicts", "a", "Contradiction: 3.11 vs 3.12", id="contradicts-value",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Notifications enabled for the billing dashboard"},
        {"tier": "semantic", "content": "Notifications disabled for the billing dashboard"},
        "contradicts", "a", "Contradiction: opposite enable", id="contradicts-antonym",
    ),
    pytest.param(
        {"tier": "episodic", "content": "The staging migration failed on pgvector", "timestamp": at(0), "session_id": "s1"},
        {"tier": "episodic", "content": "We rolled back staging because the migration failed", "timestamp": at(1), "session_id": "s2"},
        "causal", "a", "Causal cue: because", id="causal-because",
    ),
    pytest.param(
        {"tier": "episodic", "content": "The pgbouncer pool change led to errors", "timestamp": at(5), "session_id": "s1"},
        {"tier": "episodic", "content": "The pgbouncer pool change shipped", "timestamp": at(0), "session_id": "s2"},
        "causal", "b", "Causal cue: led to", id="causal-led-to-later-first-row",
    ),
    pytest.param(
        {"tier": "episodic", "content": "Set up pgvector on staging", "timestamp": at(0), "session_id": "s1"},
        {"tier": "episodic", "content": "pgvector on staging is ready", "timestamp": at(0.1), "session_id": "s1"},
        "temporal_sequence", "a", "Sequential session", id="sequence-session",
    ),
    pytest.param(
        {"tier": "episodic", "content": "pgvector staging index built", "timestamp": at(3), "session_id": "s2"},
        {"tier": "episodic", "content": "pgvector staging index planned", "timestamp": at(0), "session_id": "s1"},
        "temporal_sequence", "b", "Close in time, same day", id="sequence-close-in-time",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Search uses Postgres on staging", "timestamp": at(5)},
        {"tier": "episodic", "content": "Installed Postgres on staging for search", "timestamp": at(0)},
        "derives_from", "a", "Entity match: Postgres", id="derives-from-earlier-episode",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Search uses Postgres on staging", "refs": ["b"]},
        {"tier": "episodic", "content": "Installed Postgres on staging for search"},
        "derives_from", "a", "Explicit reference", id="derives-from-reference",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Search uses Postgres on staging"},
        {"tier": "episodic", "content": "Checked Postgres on staging, as fact a says", "refs": ["a"]},
        "supports", "b", "Explicit reference", id="supports-episode-cites-fact",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Search uses Postgres on staging", "timestamp": at(0)},
        {"tier": "episodic", "content": "Queried Postgres on staging for search", "timestamp": at(5)},
        "supports", "b", "Entity match: Postgres", id="supports-later-episode",
    ),
    pytest.param(
        {"tier": "procedural", "content": "How to install Postgres on staging for search"},
        {"tier": "semantic", "content": "Search uses Postgres on staging"},
        "generalizes", "a", "Entity match: Postgres", id="generalizes",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Search uses Postgres on staging"},
        {"tier": "semantic", "content": "Postgres on staging serves search"},
        "references", "a", "Entity match: Postgres", id="references-default",
    ),
    # the name as the source writes it, with the rest of its word; found by position in ASCII
    # texts and by a pattern elsewhere (sql/classified_links.sql): both give the same reason
    pytest.param(
        {"tier": "semantic", "content": "Search uses Postgres-EU on staging"},
        {"tier": "semantic", "content": "Installed postgres-eu on staging for search"},
        "references", "a", "Entity match: Postgres-EU", id="entity-as-the-source-writes-it",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Café serves Kafka_topics on staging"},
        {"tier": "semantic", "content": "Installed kafka_topics on staging for café"},
        "references", "a", "Entity match: Kafka_topics", id="entity-in-a-text-beyond-ascii",
    ),
    # one name from each side, as long as each other: the first alphabetically
    pytest.param(
        {"tier": "semantic", "content": "We moved Redis next to kafka today"},
        {"tier": "semantic", "content": "We moved redis next to Kafkas today"},
        "references", "a", "Entity match: kafka", id="entity-of-either-side-alphabetical",
    ),
    pytest.param(
        {"tier": "semantic", "content": "Billing rounds half up", "refs": []},
        {"tier": "semantic", "content": "As a says, invoices are final"},
        "references", "b", "Explicit reference", id="references-explicit-mention",
    ),
    pytest.param(
        {"tier": "semantic", "content": "alpha beta gamma delta"},
        {"tier": "semantic", "content": "alpha beta gamma epsilon"},
        "references", "a", "Shared terms: alpha, gamma, beta", id="references-content-similarity",
    ),
]


@pytest.mark.parametrize(("a", "b", "rtype", "source", "reason"), TYPE_CASES)
def test_relationship_type_direction_and_reason(a, b, rtype, source, reason):
    frame = memories({"id": "a", **a}, {"id": "b", **b})
    link = only_link(frame, same(2))
    assert (link["relationship_type"], link["source_id"], link["reason"]) == (rtype, source, reason)
    assert link["target_id"] == ("b" if source == "a" else "a")
    assert link["origin"] == "discovered"


def test_contradiction_needs_high_semantic_similarity():
    frame = memories(
        {"id": "a", "tier": "semantic", "content": "User prefers tabs"},
        {"id": "b", "tier": "semantic", "content": "User no longer prefers tabs"},
    )
    scoring = replace(DEFAULT, min_correlation_score=0.0)
    assert only_link(frame, vectors(0.3), scoring)["relationship_type"] != "contradicts"


def test_a_fact_and_its_source_that_both_negate_do_not_contradict():
    frame = memories(
        {"id": "a", "tier": "semantic", "content": "Never deploy billing on Fridays"},
        {"id": "b", "tier": "semantic", "content": "We never deploy billing on Fridays"},
    )
    assert only_link(frame, same(2))["relationship_type"] == "references"


def test_links_below_threshold_are_dropped_but_explicit_references_kept():
    frame = memories(
        {"id": "a", "tier": "semantic", "content": "alpha"},
        {"id": "b", "tier": "semantic", "content": "beta"},
        {"id": "c", "tier": "semantic", "content": "gamma", "refs": ["a"]},
    )
    links = scored_links(frame, vectors(0.2, 0.0), DEFAULT)
    assert links.select("source_id", "target_id", "relationship_type", "reason").rows() == [
        ("c", "a", "references", "Explicit reference")
    ]
    assert links["score"][0] < DEFAULT.min_correlation_score


def test_links_and_references_never_cross_namespaces():
    frame = memories(
        {"id": "a", "tier": "semantic", "content": "pgvector staging search", "namespace": "default"},
        {"id": "b", "tier": "semantic", "content": "pgvector staging search", "namespace": "ops", "refs": ["a"]},
    )
    assert scored_links(frame, same(2), DEFAULT).height == 0


def test_unknown_refs_and_self_refs_are_ignored():
    frame = memories(
        {"id": "a", "tier": "semantic", "content": "alpha, see a", "refs": ["a", "zzz"]},
        {"id": "b", "tier": "semantic", "content": "beta"},
    )
    assert scored_links(frame, vectors(0.0), DEFAULT).height == 0


def test_output_has_the_relationship_schema_and_stored_components():
    frame = memories(
        {"id": "a", "tier": "semantic", "content": "pgvector staging", "timestamp": at(0)},
        {"id": "b", "tier": "semantic", "content": "staging pgvector", "timestamp": at(days=7)},
    )
    links = scored_links(frame, same(2), DEFAULT)
    assert links.schema == RELATIONSHIP_SCHEMA
    row = links.row(0, named=True)
    assert (row["semantic"], row["co_occurrence"]) == (pytest.approx(1.0), pytest.approx(1.0))
    assert row["temporal"] == pytest.approx(np.exp(-1))
    assert row["cosine"] == pytest.approx(1.0) and row["cross_reference"] is None  # neither cites: silent
    assert row["score"] == pytest.approx((0.40 + 0.25 + 0.15 * np.exp(-1)) / 0.80)


def test_same_input_in_any_row_order_gives_the_same_rows():
    rows = [
        {"id": f"m{i}", "tier": "episodic", "content": f"pgvector staging step {i % 3}", "timestamp": at(i), "session_id": "s"}
        for i in range(8)
    ]
    frame = memories(*rows)
    emb = np.random.default_rng(0).normal(size=(8, 6)).astype(np.float32) + 3
    first = scored_links(frame, emb, DEFAULT)
    order = np.random.default_rng(1).permutation(8)
    shuffled = scored_links(frame[order.tolist()], emb[order], DEFAULT)
    assert first.height > 0
    assert first.equals(shuffled)
    assert first.equals(scored_links(frame, emb, DEFAULT))


def test_focus_keeps_only_pairs_touching_the_focus():
    frame = memories(*[{"id": f"m{i}", "tier": "semantic", "content": f"pgvector staging search {'once twice thrice four'.split()[i]}"} for i in range(4)])
    full = scored_links(frame, same(4), DEFAULT)
    focused = scored_links(frame, same(4), DEFAULT, focus_ids=["m2"])
    expected = full.filter((pl.col("source_id") == "m2") | (pl.col("target_id") == "m2"))
    assert focused.height == 3
    assert focused.equals(expected)


def test_brute_force_agrees_on_a_small_frame():
    frame = memories(*TYPE_CASES[0].values[:2])  # unused ids would clash; build explicitly below
    frame = memories(
        {"id": "a", "tier": "semantic", "content": "pgvector staging"},
        {"id": "b", "tier": "episodic", "content": "pgvector staging", "timestamp": at()},
        {"id": "c", "tier": "procedural", "content": "How to staging pgvector"},
    )
    assert scored_links(frame, same(3), DEFAULT).equals(brute_force_links(frame, same(3), DEFAULT))


@pytest.mark.parametrize(
    ("error", "frame", "embeddings"),
    [
        ("terms", memories({"id": "a", "tier": "semantic", "content": "x"}).drop("terms"), same(1)),
        ("rows", memories({"id": "a", "tier": "semantic", "content": "x"}), same(2)),
        ("unique", memories({"id": "a", "tier": "semantic", "content": "x"}, {"id": "a", "tier": "semantic", "content": "y"}), same(2)),
    ],
)
def test_bad_input_is_refused(error, frame, embeddings):
    with pytest.raises(ValueError, match=error):
        scored_links(frame, embeddings, DEFAULT)


def link(source: str, target: str, score: float, *, xref: float = 0.0, origin: str = "discovered", rtype: str = "references") -> dict:
    return {
        "source_id": source, "source_tier": "semantic", "target_id": target, "target_tier": "semantic",
        "relationship_type": rtype, "score": score, "semantic": score, "co_occurrence": 0.0, "temporal": None,
        "cross_reference": xref, "reason": "r", "origin": origin, "namespace": "default", "run_id": None, "metadata": None,
    }


def links_frame(*rows: dict) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=RELATIONSHIP_SCHEMA)


@pytest.mark.parametrize(
    ("rows", "k", "kept"),
    [
        # hub h with four links: it keeps its two strongest
        ([link("h", "a", 0.9), link("h", "b", 0.8), link("c", "h", 0.7), link("h", "d", 0.6)], 2, {("h", "a"), ("h", "b")}),
        # ties broken by the other end's id
        ([link("h", "b", 0.8), link("h", "a", 0.8), link("h", "c", 0.8)], 2, {("h", "a"), ("h", "b")}),
        # a link must be within the cap at both ends: b's best is b-c
        ([link("a", "b", 0.7), link("b", "c", 0.9)], 1, {("b", "c")}),
        # explicit references and manual links are kept and not counted
        ([link("h", "a", 0.9), link("h", "b", 0.1, xref=1.0), link("h", "c", 0.2, origin="manual")], 1,
         {("h", "a"), ("h", "b"), ("h", "c")}),
        ([], 3, set()),
    ],
)
def test_cap_keeps_the_strongest_at_both_ends(rows, k, kept):
    out = capped_links(links_frame(*rows), k)
    assert set(zip(out["source_id"], out["target_id"])) == kept
    assert out.schema == RELATIONSHIP_SCHEMA


def test_cap_is_deterministic_under_row_order():
    rows = [link(f"m{i % 5}", f"m{5 + i % 7}", round(0.5 + (i % 4) / 10, 2)) for i in range(30)]
    unique = {(r["source_id"], r["target_id"]): r for r in rows}.values()
    frame = links_frame(*unique)
    assert capped_links(frame, 2).equals(capped_links(frame.reverse(), 2))


def test_cap_on_integer_codes_keeps_what_the_cap_on_the_strings_keeps():
    """The cap ranks ids and types as integer codes; ties must still break in the byte order
    DuckDB gives the strings themselves (upper case before lower, a prefix first, accents last)."""
    ids = ["a", "B", "a1", "a10", "a2", "é", "Z", "", "ab", "b"]
    rng = np.random.default_rng(3)
    rows = [link(ids[i], ids[j], float(rng.choice([0.6, 0.7, 0.8])), rtype=str(rng.choice(["supports", "causal", "references"])))
            for i in range(len(ids)) for j in range(len(ids)) if i < j and rng.random() < 0.8]
    frame = links_frame(*rows)
    on_strings = links_module._run("capped_links", {"links": frame}, {"max_links": 2})
    out = capped_links(frame, 2)
    key = ["source_id", "target_id", "relationship_type"]
    assert 0 < out.height < frame.height
    assert out.select(key).sort(key).equals(on_strings.select(key).sort(key))


def test_score_bits_sort_as_the_scores_descending():
    """The cap sorts scores as integer bits (links._descending_bits): the order of the floats,
    highest first, ties (0.0 and -0.0 among them) kept in row order by a stable sort."""
    rng = np.random.default_rng(3)
    scores = np.concatenate([rng.normal(size=500), rng.choice([0.6, 0.7, 1.0, 0.0, -0.0, 5e-324, -5e-324, np.inf, -np.inf], size=500)])
    rng.shuffle(scores)
    by_bits = np.argsort(links_module._descending_bits(scores), kind="stable")
    by_float = np.argsort(-(scores + 0.0), kind="stable")
    assert by_bits.tolist() == by_float.tolist()
    assert (scores[by_bits][:-1] >= scores[by_bits][1:]).all()


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_the_cap_ranked_by_one_sort_of_both_ends_keeps_what_the_sql_keeps(seed):
    """The cap ranks each memory's ends by one sort (links._capped_rows) instead of the SQL's
    window: with many ties in score, ids that sort oddly, several types, explicit references
    and manual links, the same links as sql/capped_links on the strings, at every cap; and
    where a key repeats, the SQL's own grouping of its ends decides."""
    rng = np.random.default_rng(seed)
    ids = ["a", "B", "a1", "a10", "a2", "é", "Z", "", "ab", "b"] + [f"m{i}" for i in range(20)]
    rows = []
    for i in range(len(ids)):
        for j in range(len(ids)):
            if i < j and rng.random() < 0.5:
                pick = rng.random()
                rows.append(link(ids[i], ids[j], float(rng.choice([0.6, 0.7, 0.8])), rtype=str(rng.choice(["supports", "causal", "references"])),
                                 xref=1.0 if pick < 0.05 else 0.0, origin="manual" if 0.05 <= pick < 0.08 else "discovered"))
    frame = links_frame(*rows)
    key = ["source_id", "target_id", "relationship_type"]
    for k in (1, 2, 5, 50):
        on_strings = links_module._run("capped_links", {"links": frame}, {"max_links": k})
        out = capped_links(frame, k)
        assert out.select(key).sort(key).equals(on_strings.select(key).sort(key)), k
        if k < 5:
            assert out.height < frame.height
    repeated = pl.concat([frame, frame.head(5).with_columns(score=pl.col("score") - 0.05)])  # five keys twice
    on_strings = links_module._run("capped_links", {"links": repeated}, {"max_links": 2})
    assert capped_links(repeated, 2).select(key).sort(key).equals(on_strings.select(key).sort(key))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_cap_with_copies_and_undated_origins_equals_folding_and_turning_round_first(seed):
    """The cap masks the copy fold's drops and turns undated origins round in its integer ranks
    only (memory at 100k); the same links as folding a copy, turning every origin round, then
    capping the strings (sql/capped_links), the steps the cap is defined by."""
    from crosstier.transforms.link import copies

    rng = np.random.default_rng(seed)
    ids = [f"e{i}" for i in range(8)] + [f"f{i}" for i in range(4)]
    rows = [{"id": i, "tier": "episodic" if i[0] == "e" else "semantic", "content": f"note {i}",
             "timestamp": None if i in ("f1", "f2", "e3") else at(hours=int(i[1:]))} for i in ids]
    rows[1]["content"] = rows[2]["content"] = rows[5]["content"] = "the same text"  # a copy group of three
    mems = memories(*rows)
    links = []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            if rng.random() < 0.7:
                undated = rng.random() < 0.5
                kind = "derives_from" if b[0] == "f" and rng.random() < 0.6 else str(rng.choice(["supports", "causal"]))
                row = link(b if kind == "derives_from" else a, a if kind == "derives_from" else b, float(rng.choice([0.6, 0.7, 0.8, 0.9])), rtype=kind)
                links.append({**row, "temporal": None if undated else 0.5, "source_tier": "semantic" if row["source_id"][0] == "f" else "episodic",
                              "target_tier": "semantic" if row["target_id"][0] == "f" else "episodic"})
    frame = links_frame(*links)
    groups = copies.copy_groups(mems)
    assert groups.height == 3
    fold = copies.copy_folded_rows(frame, groups)
    assert not fold.all()  # links the fold drops
    assert not links_module.undated_origin_demotions(frame, fold).is_empty()  # and origins to turn round
    for k in (1, 2, 50):  # at 50 the turned-round origins are kept too
        folded = copies.collapsed_copy_links(frame, groups)
        demotions = links_module.undated_origin_demotions(folded)
        folded = links_module.turned_round(folded, pl.int_range(pl.len(), dtype=pl.UInt32).is_in(demotions.implode()))
        reference = links_module._run("capped_links", {"links": folded}, {"max_links": k})
        chain = copies.carried_forward_links(mems, groups, 7.0)
        out = capped_links(frame, k, mems, groups=groups)
        key = ["source_id", "target_id", "relationship_type"]
        discovered = out.join(chain.select(key), on=key, how="anti")
        assert discovered.select(key).sort(key).equals(reference.select(key).sort(key)), k
        assert out.height > discovered.height  # the chain is there too
    demoted = frame[links_module.undated_origin_demotions(frame, fold)].select(
        pl.col("target_id").alias("source_id"), pl.col("source_id").alias("target_id"), pl.lit("supports").alias("relationship_type"))
    assert out.join(demoted, on=key).height > 0  # some kept as turned round


@pytest.mark.parametrize("seed", [1, 2])
def test_the_cap_of_a_partition_keeps_what_the_cap_of_its_frame_keeps(tmp_path, seed):
    """A full run's score task caps its namespace's stored links from their partition (the
    cap's columns read, then the kept rows' others, a row group at a time): the same rows as
    the cap of the frame, with copies folded and undated origins turned round."""
    from crosstier.transforms.link import copies

    rng = np.random.default_rng(seed)
    ids = [f"e{i:02d}" for i in range(30)] + [f"f{i:02d}" for i in range(12)]
    rows = [{"id": i, "tier": "episodic" if i[0] == "e" else "semantic", "content": f"note {i}",
             "timestamp": None if rng.random() < 0.3 else at(hours=int(i[1:]))} for i in ids]
    rows[1]["content"] = rows[2]["content"] = rows[31]["content"] = "the same text"
    mems = memories(*rows)
    found = []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            if rng.random() < 0.6:
                kind = "derives_from" if b[0] == "f" and rng.random() < 0.6 else str(rng.choice(["supports", "causal"]))
                row = link(b if kind == "derives_from" else a, a if kind == "derives_from" else b, float(rng.choice([0.6, 0.7, 0.8, 0.9])), rtype=kind)
                found.append({**row, "temporal": None if rng.random() < 0.5 else 0.5, "reason": f"why {a} {b}",
                              "source_tier": "semantic" if row["source_id"][0] == "f" else "episodic",
                              "target_tier": "semantic" if row["target_id"][0] == "f" else "episodic"})
    frame = links_frame(*found).sort("source_id", "target_id", "relationship_type")
    path = tmp_path / "links.parquet"
    frame.write_parquet(path, row_group_size=64)
    groups = copies.copy_groups(mems)
    assert not links_module.undated_origin_demotions(frame, copies.copy_folded_rows(frame, groups)).is_empty()
    for k in (1, 3, 50):
        expected = capped_links(frame, k, mems, groups=groups)
        assert 0 < expected.height
        assert links_module.capped_links_of_partition(path, k, mems).equals(expected), k


def test_tier_distribution_counts_memories_orphans_links():
    mems = memories(
        {"id": "e1", "tier": "episodic", "content": "x"},
        {"id": "e2", "tier": "episodic", "content": "x"},
        {"id": "s1", "tier": "semantic", "content": "x"},
    )
    rels = links_frame(
        {**link("s1", "e1", 0.8), "target_tier": "episodic"},
        {**link("e1", "e2", 0.6), "source_tier": "episodic", "target_tier": "episodic"},
    )
    out = tier_distribution(mems, rels)
    assert out.rows() == [
        ("episodic", 2, 2, 0, 2, pytest.approx(0.7)),
        ("semantic", 1, 1, 0, 1, pytest.approx(0.8)),
        ("procedural", 0, 0, 0, 0, None),
    ]


def test_tier_links_counts_per_tier_pair_and_type():
    rels = links_frame(
        {**link("s1", "e1", 0.8), "target_tier": "episodic", "relationship_type": "derives_from"},
        {**link("s2", "e2", 0.6), "target_tier": "episodic", "relationship_type": "derives_from"},
        link("s1", "s2", 0.9),
    )
    out = tier_links(rels)
    assert out.columns == ["source_tier", "target_tier", "relationship_type", "links", "avg_score"]
    assert out.rows() == [
        ("semantic", "episodic", "derives_from", 2, pytest.approx(0.7)),
        ("semantic", "semantic", "references", 1, pytest.approx(0.9)),
    ]


AUDIT_MEMORIES = memories(
    {"id": "a", "tier": "semantic", "content": "x"},
    {"id": "b", "tier": "semantic", "content": "x"},
    {"id": "c", "tier": "semantic", "content": "x"},
    {"id": "d", "tier": "semantic", "content": "x"},
    {"id": "z", "tier": "semantic", "content": "x", "namespace": "ops"},
)


@pytest.mark.parametrize(
    ("rows", "failing"),
    [
        ([link("a", "b", 0.9)], {}),
        ([link("a", "a", 0.9)], {"self_links": 1}),
        ([link("a", "b", 0.9), link("b", "a", 0.8, rtype="supports")], {"duplicate_pairs": 1}),
        ([link("a", "b", 0.9), link("a", "c", 0.8), link("d", "a", 0.7)], {"over_cap": 1}),
        ([link("a", "b", 0.9), link("a", "c", 0.8), link("d", "a", 0.7, xref=1.0)], {}),
        ([link("a", "z", 0.9)], {"cross_namespace": 1}),
    ],
)
def test_audits_find_each_kind_of_bad_row(rows, failing):
    expected = {"self_links": 0, "duplicate_pairs": 0, "over_cap": 0, "cross_namespace": 0, **failing}
    frames = {"relationships": links_frame(*rows), "memories": AUDIT_MEMORIES}
    assert audit_failures(frames, max_links_per_memory=2) == expected


def test_audits_run_on_a_duckdb_connection():
    con = duckdb.connect()
    rels = links_frame(link("a", "a", 0.9)).to_arrow()
    mems = AUDIT_MEMORIES.select("id", "namespace").to_arrow()
    con.execute("create table relationships as select * from rels")
    con.execute("create table memories as select * from mems")
    assert audit_failures(con)["self_links"] == 1


def test_an_undated_fact_derives_from_its_strongest_episode_only():
    frame = memories(
        {"id": "f", "tier": "semantic", "content": "Search runs on Postgres in staging"},
        {"id": "e1", "tier": "episodic", "content": "Installed Postgres for search in staging", "timestamp": at(0)},
        {"id": "e2", "tier": "episodic", "content": "Postgres staging search looks fine", "timestamp": at(1)},
    )
    embeddings = np.array([[1.0, 0.0], [0.99, np.sqrt(1 - 0.99**2)], [0.9, np.sqrt(1 - 0.81)]])
    scored = scored_links(frame, embeddings, DEFAULT)
    # every episode of an undated fact is a possible origin before the choice
    assert set(scored.filter(pl.col("source_id") == "f")["relationship_type"]) == {"derives_from"}
    published = capped_links(scored, DEFAULT.max_links_per_memory)
    kinds = {(r["source_id"], r["target_id"]): r["relationship_type"] for r in published.iter_rows(named=True)}
    assert kinds[("f", "e1")] == "derives_from"  # the strongest evidence is the origin
    assert kinds[("e2", "f")] == "supports"  # the other one is evidence for it, pointing at the fact
    assert ("f", "e2") not in kinds


def test_a_dated_fact_derives_from_every_episode_before_it():
    frame = memories(
        {"id": "f", "tier": "semantic", "content": "Search runs on Postgres in staging", "timestamp": at(2)},
        {"id": "e1", "tier": "episodic", "content": "Installed Postgres for search in staging", "timestamp": at(0)},
        {"id": "e2", "tier": "episodic", "content": "Postgres staging search looks fine", "timestamp": at(1)},
    )
    published = capped_links(scored_links(frame, same(3), DEFAULT), DEFAULT.max_links_per_memory)
    fact_links = published.filter((pl.col("source_id") == "f") & (pl.col("target_tier") == "episodic"))
    assert sorted(fact_links["target_id"]) == ["e1", "e2"]
    assert set(fact_links["relationship_type"]) == {"derives_from"}
