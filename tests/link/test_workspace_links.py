"""What real agent workspaces need from linking: copies chained along time and counted once,
conflicts that are not contradictions, boilerplate that is no value, skills named anywhere,
CJK terms, and cosines the model cannot vouch for."""

from __future__ import annotations

import json

import polars as pl
import pytest

from crosstier.core.config import ScoringConfig
from crosstier.transforms.link.copies import carried_forward_links, collapsed_copy_links, copy_groups, normalised_text
from crosstier.transforms.link.features import named_skills, skill_patterns, value_terms, without_boilerplate
from crosstier.transforms.link.links import capped_links, scored_links
from crosstier.transforms.link.terms import cjk_terms, latin_share, memory_terms
from links_helpers import at, memories, same

DEFAULT = ScoringConfig()


def links_of(frame: pl.DataFrame, scoring: ScoringConfig = DEFAULT) -> pl.DataFrame:
    scored = scored_links(frame, same(frame.height), scoring)
    return capped_links(scored, scoring.max_links_per_memory, frame, tau_days=scoring.tau_days)


def pair(links: pl.DataFrame, a: str, b: str) -> dict | None:
    rows = links.filter(((pl.col("source_id") == a) & (pl.col("target_id") == b)) | ((pl.col("source_id") == b) & (pl.col("target_id") == a)))
    return rows.row(0, named=True) if rows.height else None


# ---------------------------------------------------------------- copies


@pytest.mark.parametrize(
    ("a", "b", "copies"),
    [
        ("Still open: Renew the TLS cert.", "still open — renew the **TLS** cert", True),
        ("Nightly run — 13:00 UTC (Sunday, June 14) ok", "Nightly run — 13:00 UTC (Thursday, June 18) ok", True),
        ("Kanban board holds 1 idea", "Kanban board holds 16 ideas", False),
        ("The gym class is on Tuesday", "The gym class is on Thursday", False),
        ("The API uses Python 3.11", "The API uses Python 3.12", False),
    ],
)
def test_normalised_text(a, b, copies):
    assert (normalised_text(a) == normalised_text(b)) is copies


def test_copies_chain_along_time_and_link_once_outward():
    frame = memories(
        *({"id": f"c{d}", "tier": "episodic", "content": "Still open: renew the TLS certificate for status.example.org",
           "timestamp": at(days=d), "session_id": f"s{d}"} for d in range(4)),
        {"id": "fact", "tier": "semantic", "content": "Renew the TLS certificate for status.example.org by hand"},
    )
    links = links_of(frame)
    inside = links.filter(pl.col("source_id").str.starts_with("c") & pl.col("target_id").str.starts_with("c"))
    assert sorted(zip(inside["source_id"], inside["target_id"])) == [("c0", "c1"), ("c1", "c2"), ("c2", "c3")]
    # each row names only its two ends, so a new copy adds a row and changes none (the watcher's delta)
    assert set(inside["reason"]) == {"Carried forward (same text, 1 day later)"}
    assert set(inside["relationship_type"]) == {"temporal_sequence"}
    assert {json.dumps(json.loads(m)) for m in inside["metadata"]} == {json.dumps({"copy_group": copy_groups(frame).filter(pl.col("id") == "c0")["copy_key"][0]})}
    outward = links.filter((pl.col("source_id") == "fact") | (pl.col("target_id") == "fact"))
    assert outward.height == 1  # the group counts once for the fact


def test_a_copy_group_counts_once_against_the_cap():
    copies_ = [{"id": f"c{d}", "tier": "episodic", "content": "Still open: renew the TLS certificate for status.example.org",
                "timestamp": at(days=d), "session_id": f"s{d}"} for d in range(5)]
    other = {"id": "x", "tier": "episodic", "content": "Renewed the TLS certificate for status.example.org today", "timestamp": at(days=2), "session_id": "sx"}
    frame = memories(*copies_, other)
    scoring = ScoringConfig(max_links_per_memory=1)
    links = links_of(frame, scoring)
    x_links = links.filter((pl.col("source_id") == "x") | (pl.col("target_id") == "x"))
    assert x_links.height == 1  # without folding, five copies would compete for x's one slot
    assert links.filter(pl.col("reason").str.starts_with("Carried forward")).height == 4  # outside the cap


def test_copy_groups_and_collapse_are_order_independent():
    frame = memories(
        {"id": "b", "tier": "episodic", "content": "Same text here", "timestamp": at(days=1)},
        {"id": "a", "tier": "episodic", "content": "same text, here", "timestamp": at(days=0)},
        {"id": "z", "tier": "semantic", "content": "Other text"},
    )
    groups = copy_groups(frame)
    assert dict(zip(groups["id"], groups["copy_rank"])) == {"a": 1, "b": 2}
    assert copy_groups(frame.reverse()).sort("id").equals(groups.sort("id"))
    chain = carried_forward_links(frame, groups, 7.0)
    assert list(zip(chain["source_id"], chain["target_id"], chain["reason"])) == [("a", "b", "Carried forward (same text, 1 day later)")]
    links = pl.DataFrame({
        "source_id": ["a", "b", "a"], "target_id": ["z", "z", "b"], "score": [0.7, 0.9, 1.0], "cross_reference": [0.0, 0.0, 0.0],
        "origin": ["discovered"] * 3, "namespace": ["default"] * 3,
    })
    kept = collapsed_copy_links(links, groups)
    assert list(zip(kept["source_id"], kept["target_id"])) == [("b", "z")]  # the strongest to z; none inside


# ---------------------------------------------------------------- conflicts that are not contradictions


@pytest.mark.parametrize(
    ("a", "b", "rtype", "reason"),
    [
        pytest.param(
            {"tier": "episodic", "content": "Kanban board holds 1 idea in the backlog.", "timestamp": at(days=0), "session_id": "d1"},
            {"tier": "episodic", "content": "Kanban board holds 16 ideas in the backlog.", "timestamp": at(days=1), "session_id": "d2"},
            "temporal_sequence", "Changed: Kanban idea 1 -> 16", id="counter-changes-over-time",
        ),
        pytest.param(
            {"tier": "episodic", "content": "Dark mode is enabled in the dashboard", "timestamp": at(days=0), "session_id": "d1"},
            {"tier": "episodic", "content": "Dark mode is disabled in the dashboard", "timestamp": at(days=2), "session_id": "d3"},
            "temporal_sequence", "Changed: enable turned the other way", id="switch-flips-over-time",
        ),
        pytest.param(
            {"tier": "semantic", "content": "billing-api ran on Python 3.11 until PR #509"},
            {"tier": "semantic", "content": "billing-api runs on Python 3.12 since PR #509"},
            "references", "Changed: billing-api Python 3.11 -> 3.12", id="a-state-said-to-have-ended",
        ),
        pytest.param(
            {"tier": "semantic", "content": "The API uses Python 3.11"},
            {"tier": "semantic", "content": "The API uses Python 3.12"},
            "contradicts", "Contradiction: 3.11 vs 3.12", id="undated-facts-still-contradict",
        ),
        pytest.param(
            {"tier": "episodic", "content": "Nightly run — 13:00 UTC (Sunday, June 14) finished in 4 min.", "timestamp": at(days=0), "session_id": "d1"},
            {"tier": "semantic", "content": "Nightly run — 13:00 UTC (Thursday, June 18) finished in 4 min."},
            None, None, id="dated-boilerplate-is-a-copy",
        ),
    ],
)
def test_conflicts_between_states_and_copies(a, b, rtype, reason):
    links = links_of(memories({"id": "a", **a}, {"id": "b", **b}))
    link = pair(links, "a", "b")
    if rtype is None:
        assert link is None or link["relationship_type"] != "contradicts"
        return
    assert (link["relationship_type"], link["reason"]) == (rtype, reason)
    if rtype != "contradicts":
        assert link["source_id"] == "a"  # earlier -> later


def test_identical_texts_never_contradict():
    text = "PR #77 is closed, issue #78 stays open until the printer driver ships."
    frame = memories({"id": "a", "tier": "semantic", "content": text}, {"id": "b", "tier": "semantic", "content": text + " "})
    assert scored_links(frame, same(2), DEFAULT).filter(pl.col("relationship_type") == "contradicts").height == 0


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("Nightly run — 13:00 UTC (Sunday, June 14) finished", []),
        ("heartbeat #113 ok, day 14", []),
        ("Report for 2026-06-14 at 09:30", []),
        ("Standup is on Monday", ["standup=monday"]),
        ("The API uses Python 3.11", ["python=3.11"]),
    ],
)
def test_boilerplate_is_no_value(text, values):
    assert value_terms(without_boilerplate(text)) == values


# ---------------------------------------------------------------- skills named anywhere


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("Kept the steps as the rotate-api-keys skill.", {"ws:skill/rotate-api-keys"}),
        ("created skills/ops/deploy/SKILL.md", set()),
        ("see skills/deploy for the steps", {"ws:skill/ops/deploy"}),
        ("Used the deploy skill for search-svc", {"ws:skill/ops/deploy"}),
        ("We deploy on Tuesdays", set()),
    ],
)
def test_named_skills(text, named):
    patterns = skill_patterns({"ws:skill/rotate-api-keys", "ws:skill/ops/deploy", "ws:memory/x.md#1"})
    assert named_skills(text, patterns) == named


def test_a_memory_of_another_store_naming_a_skill_links_to_it():
    frame = memories(
        {"id": "ws:skill/rotate-api-keys", "tier": "procedural", "content": "rotate-api-keys: Rotate a service's API keys"},
        {"id": "chat-1", "tier": "episodic", "content": "I kept the steps as the rotate-api-keys skill in the workspace.", "timestamp": at()},
    )
    [link] = scored_links(frame, same(2), DEFAULT).iter_rows(named=True)
    assert (link["source_id"], link["relationship_type"], link["cross_reference"]) == ("ws:skill/rotate-api-keys", "generalizes", 1.0)


# ---------------------------------------------------------------- other scripts


def test_cjk_terms_are_character_bigrams():
    assert cjk_terms("深圳天气查询") == {"深圳", "圳天", "天气", "气查", "查询"}
    assert cjk_terms("我的") == set()  # function characters only
    assert {"天气", "weather", "api"} <= set(memory_terms("改用和风天气 API，不再使用内置 weather。"))


def test_latin_share():
    assert latin_share("Deploy search-svc") == 1.0
    assert latin_share("部署 search") < 0.8
    assert latin_share("1234 !!") == 1.0


def test_a_cosine_the_model_cannot_vouch_for_makes_no_link_alone():
    frame = memories(
        {"id": "a", "tier": "semantic", "content": "上海办公室确认收到了发布说明"},
        {"id": "b", "tier": "semantic", "content": "深圳的天气预报明天下雨"},
    )
    low = ScoringConfig(min_correlation_score=0.3)  # cosine 1.0 alone passes this threshold
    assert scored_links(frame, same(2), low).height == 0  # but the English model cannot vouch for it
    trusted = ScoringConfig(min_correlation_score=0.3, min_model_script_share=0.0)  # a multilingual model can
    assert scored_links(frame, same(2), trusted).height == 1
    sharing = memories(
        {"id": "a", "tier": "semantic", "content": "深圳天气查询改用和风天气"},
        {"id": "b", "tier": "semantic", "content": "深圳天气查询恢复正常"},
    )
    assert scored_links(sharing, same(2), low).height == 1  # shared terms vouch for it


def test_a_chain_row_says_the_days_between_its_two_ends_and_none_when_undated():
    frame = memories(
        {"id": "a", "tier": "episodic", "content": "Still open: water the plants", "timestamp": at(days=0)},
        {"id": "b", "tier": "episodic", "content": "Still open: water the plants", "timestamp": at(days=0, hours=5)},
        {"id": "c", "tier": "episodic", "content": "Still open: water the plants", "timestamp": at(days=3)},
        {"id": "d", "tier": "semantic", "content": "Still open: water the plants"},
    )
    chain = carried_forward_links(frame, copy_groups(frame), 7.0)
    assert list(zip(chain["source_id"], chain["target_id"], chain["reason"])) == [
        ("a", "b", "Carried forward (same text, same day)"),
        ("b", "c", "Carried forward (same text, 3 days later)"),
        ("c", "d", "Carried forward (same text)"),  # undated last
    ]
    # a new copy adds one row and leaves the others as they were
    longer = pl.concat([frame, memories({"id": "e", "tier": "episodic", "content": "Still open: water the plants", "timestamp": at(days=4)})], how="vertical")
    grown = carried_forward_links(longer, copy_groups(longer), 7.0)
    kept = grown.join(chain, on=grown.columns, how="semi", nulls_equal=True)
    assert kept.height == chain.height - 1 and grown.height == chain.height + 1  # c -> d becomes c -> e -> d (undated last)
