"""Terms: identifiers, names and stemmed key terms of one memory, deterministic and memory-local."""

from __future__ import annotations

import polars as pl
import pytest

from crosstier.transforms.schema import MEMORY_SCHEMA
from crosstier.transforms.link.terms import memory_terms, stem, with_terms


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("deploy", "deploy"),
        ("deploys", "deploy"),
        ("deployed", "deploy"),
        ("deployment", "deploy"),
        ("deploying", "deploy"),
        ("preferred", "prefer"),
        ("preference", "prefer"),
        ("running", "run"),
        ("release", "releas"),
        ("released", "releas"),
        ("configuration", "configur"),
        ("configured", "configur"),
        ("class", "class"),
    ],
)
def test_stem_makes_word_forms_meet(word, expected):
    assert stem(word) == expected


@pytest.mark.parametrize(
    ("content", "present"),
    [
        ("We use TypeScript and PostgreSQL", {"typescript", "postgresql"}),
        ("Load all-MiniLM-L6-v2 into pgvector", {"all-minilm-l6-v2", "pgvector"}),
        ("The API uses Python 3.11", {"api", "python", "3.11"}),
        ("Bump to v2.9.0 today", {"v2.9.0"}),
        ("Edit src/billing/rounding.py and config.toml", {"src/billing/rounding.py", "config.toml"}),
        ("Docs at https://example.com/docs/setup.", {"https://example.com/docs/setup"}),
        ("ping @alice about #infra", {"@alice", "#infra"}),
        ("Alice Novak met Visual Studio Code people", {"alice novak", "visual studio code"}),
        ("node.js and follow-up items", {"node.js", "follow-up"}),
        ("Postgres listens on port 5432", {"5432", "port"}),
        ("Deployed the deployment", {"deploy"}),
    ],
)
def test_memory_terms_finds_identifiers_names_and_key_terms(content, present):
    assert present <= set(memory_terms(content))


@pytest.mark.parametrize(
    ("content", "absent"),
    [
        ("Ok, sounds good, thanks!", {"ok", "sounds", "good", "thanks"}),
        ("The user and the assistant", {"user", "assistant", "the", "and"}),
        ("Load all-MiniLM-L6-v2 now", {"all", "minilm", "v2"}),  # an identifier is one term, not its parts
        ("See https://example.com/a", {"com", "https", "example"}),
    ],
)
def test_memory_terms_leaves_out_stop_words_and_fragments(content, absent):
    assert not absent & set(memory_terms(content))


def test_memory_terms_are_sorted_unique_and_include_given_entities():
    terms = memory_terms("Deploys deploy deployed", ["Project Orion", "Tabs", "  spaced   name "])
    assert terms == sorted(set(terms))
    assert {"deploy", "project orion", "tab", "spaced name"} <= set(terms)


def test_memory_terms_of_empty_content_are_empty():
    assert memory_terms("   ") == []


def _frame(contents: list[str]) -> pl.DataFrame:
    rows = [{**{k: None for k in MEMORY_SCHEMA}, "id": f"m{i}", "tier": "semantic", "content": c}
            for i, c in enumerate(contents)]
    return pl.DataFrame(rows, schema=MEMORY_SCHEMA)


def test_with_terms_adds_a_list_column_and_leaves_the_input_alone():
    memories = _frame(["Deploy pgvector on Friday", "Nothing here"])
    out = with_terms(memories)
    assert "terms" not in memories.columns
    assert out.schema["terms"] == pl.List(pl.String)
    assert out["terms"].to_list()[0] == ["deploy", "friday", "pgvector"]


def test_terms_of_a_memory_do_not_depend_on_the_rest_of_the_corpus():
    alone = with_terms(_frame(["Deploy pgvector on Friday"]))["terms"].to_list()[0]
    crowd = with_terms(_frame(["Deploy pgvector on Friday"] + ["deploy things"] * 50))["terms"].to_list()[0]
    assert alone == crowd


def test_entity_terms_are_remembered_for_short_texts_only_and_callers_cannot_change_them():
    from crosstier.transforms.link import terms as terms_module

    short = "Deployed api-gateway v2.3.1 to staging for Maya"
    long = short + " and then" * 80  # over _REMEMBERED_CHARS
    assert len(long) > terms_module._REMEMBERED_CHARS >= len(short)
    terms_module._REMEMBERED.clear()
    first = memory_terms(short)
    assert list(terms_module._REMEMBERED) == [short]
    assert memory_terms(short) == first  # the remembered set came back whole, not grown by the first call
    assert isinstance(terms_module.entity_terms(short)[0], frozenset)
    assert memory_terms(long)[: 3] and list(terms_module._REMEMBERED) == [short]
    assert terms_module.entity_terms(long) == terms_module._entity_terms(long)
    # the classifier's evidence is the last use: it takes the entry out, with the same answer
    assert terms_module.entity_terms(short, last_use=True) == terms_module._entity_terms(short) and not terms_module._REMEMBERED
    assert terms_module.entity_terms(short, last_use=True) == terms_module._entity_terms(short) and not terms_module._REMEMBERED


def test_a_runs_remembered_entity_terms_are_let_go_once_its_evidence_is_made():
    """with_terms remembers each short text's entity terms for the classifier's evidence, which
    takes them: after link_memories nothing of the run is held. When full, the oldest entry
    (one no run took) makes room for the next."""
    from crosstier.transforms.link import terms as terms_module
    from crosstier.transforms.link.links import link_memories

    terms_module._REMEMBERED.clear()
    texts = [f"Deployed api-gateway v2.{i}.1 to staging for Maya" for i in range(40)] + ["Deployed api-gateway v2.0.1 to staging for Maya"]
    memories = with_terms(_frame(texts))
    assert len(terms_module._REMEMBERED) == 40  # one per distinct text
    linked = link_memories(memories.with_columns(namespace=pl.lit("default")))
    assert not terms_module._REMEMBERED
    assert "maya" in linked["named_terms"].to_list()[0]
    full = terms_module._REMEMBERED_ENTRIES
    try:
        terms_module._REMEMBERED_ENTRIES = 3
        for text in ("one Maya", "two Maya", "three Maya", "four Maya"):
            terms_module.entity_terms(text)
        assert list(terms_module._REMEMBERED) == ["two Maya", "three Maya", "four Maya"]
    finally:
        terms_module._REMEMBERED_ENTRIES = full
        terms_module._REMEMBERED.clear()


def test_known_terms_are_reused_only_for_the_same_content_and_entities():
    """An incremental run passes the last snapshot's (content, entities, terms): a memory equal
    in both takes the known terms, any other is found again, and the rows stay as they were."""
    memories = _frame(["Deploy pgvector on Friday", "Deploy pgvector on Friday", "Maya owns the billing service", "Nothing here"])
    memories = memories.with_columns(entities=pl.Series([["pgvector"], None, [], None], dtype=pl.List(pl.String)))
    fresh = with_terms(memories)
    assert with_terms(memories, fresh.select("content", "entities", "terms")).equals(fresh)  # reused: the same
    known = pl.DataFrame({
        "content": ["Deploy pgvector on Friday", "Deploy pgvector on Friday", "Maya owns the billing service", "Maya owns the billing service"],
        "entities": [["pgvector"], ["pgvector"], None, None],  # twice the same key; [] is not null
        "terms": [["sentinel"], ["sentinel"], ["stale"], ["stale"]],
    }, schema={"content": pl.String, "entities": pl.List(pl.String), "terms": pl.List(pl.String)})
    out = with_terms(memories, known)
    assert out.height == memories.height and out.drop("terms").equals(memories)
    assert out["terms"].to_list() == [["sentinel"], fresh["terms"][1].to_list(), fresh["terms"][2].to_list(), fresh["terms"][3].to_list()]
