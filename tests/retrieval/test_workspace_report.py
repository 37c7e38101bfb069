"""One real run over the OpenClaw-shaped workspace (tests/fixtures/openclaw_workspace), read back:
copies link along time only, no contradiction between copies or between states of one thing
over time, every skill named in a log linked to it, and the read commands show text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from crosstier.retrieval.correlations import build_correlation_graph, find_correlations
from crosstier.retrieval import report
from crosstier.transforms.link.copies import normalised_text

WORKSPACE = Path(__file__).parents[1] / "fixtures" / "openclaw_workspace"


@pytest.fixture(scope="module")
def out(tmp_path_factory, shared_embedding_cache):
    from crosstier.flows.correlate import correlate

    folder = tmp_path_factory.mktemp("workspace-warehouse")
    config = folder / "correlator.toml"
    config.write_text(f'[output]\ndir = "{folder / "wh"}"\n\n[[stores]]\nname = "ws"\nkind = "markdown"\npath = "{WORKSPACE}"\n')
    os.environ["EMBED_CACHE_DIR"] = str(shared_embedding_cache)
    try:
        summary = correlate(config_path=str(config), out=str(folder / "wh"), full=True)
    finally:
        os.environ.pop("EMBED_CACHE_DIR", None)
    assert summary["status"] == "published"
    return folder / "wh"


@pytest.fixture(scope="module")
def tables(out):
    con = duckdb.connect(str(out / "correlations.duckdb"), read_only=True)
    try:
        memories = {r[0]: {"content": r[1], "refs": r[2] or [], "tier": r[3]}
                    for r in con.execute("select id, content, refs, tier from memories").fetchall()}
        links = con.execute("select source_id, target_id, relationship_type, reason from relationships").fetchall()
    finally:
        con.close()
    return memories, links


def _id(memories, text: str) -> list[str]:
    return sorted(i for i, m in memories.items() if text in m["content"])


def test_each_copy_links_to_at_most_two_of_its_copies(tables):
    memories, links = tables
    groups: dict[str, set[str]] = {}
    for i, m in memories.items():
        groups.setdefault(normalised_text(m["content"]), set()).add(i)
    copied = {key: ids for key, ids in groups.items() if len(ids) > 1}
    assert len(copied) >= 4  # three "Still open" items over three days, the nightly boilerplate over two
    for ids in copied.values():
        inside = [(s, t, kind, reason) for s, t, kind, reason in links if s in ids and t in ids]
        assert len(inside) == len(ids) - 1, inside  # a chain along time
        for i in ids:
            assert sum(i in (s, t) for s, t, _, _ in inside) <= 2
        assert all(kind == "temporal_sequence" and reason.startswith("Carried forward (same text") for _, _, kind, reason in inside)


def test_a_copy_group_links_once_to_anything_else(tables):
    memories, links = tables
    tls = set(_id(memories, "Renew the TLS certificate"))
    assert len(tls) == 3
    others = [(s, t) for s, t, _, _ in links if (s in tls) != (t in tls)]
    ends = [t if s in tls else s for s, t in others]
    assert len(ends) == len(set(ends))


def test_no_contradiction_between_copies_or_states_over_time(tables):
    memories, links = tables
    for s, t, kind, _ in links:
        if kind == "contradicts":
            assert normalised_text(memories[s]["content"]) != normalised_text(memories[t]["content"])
            assert not (memories[s]["tier"] == memories[t]["tier"] == "episodic")
    [kanban] = [(s, t, kind, reason) for s, t, kind, reason in links
                if {s, t} == {*_id(memories, "Kanban board holds 1 idea"), *_id(memories, "Kanban board holds 16 ideas")}]
    assert kanban[2:] == ("temporal_sequence", "Changed: Kanban idea 1 -> 16")
    assert kanban[0] == _id(memories, "Kanban board holds 1 idea")[0]  # earlier -> later


def test_each_skill_named_in_a_log_is_linked_to_it(tables):
    memories, links = tables
    pairs = {(s, t) for s, t, _, _ in links} | {(t, s) for s, t, _, _ in links}
    named = [(i, r) for i, m in memories.items() for r in m["refs"] if memories.get(r, {}).get("tier") == "procedural"]
    assert {r for _, r in named} == {"ws:skill/morning-brief", "ws:skill/derm-consult", "ws:skill/weather-cn"}
    for memory_id, skill in named:
        copies = {i for i, m in memories.items() if normalised_text(m["content"]) == normalised_text(memories[memory_id]["content"])}
        assert any((c, skill) in pairs for c in copies), (memories[memory_id]["content"], skill)


def test_correlations_and_graph_show_text(out, tables):
    memories, _ = tables
    kanban = _id(memories, "Kanban board holds 16 ideas")[0]
    result = find_correlations(kanban, out=out)
    assert result["memory_snippet"] == "Heartbeat Summary: Kanban board holds 16 ideas in the backlog."
    assert all(c["target_snippet"] for c in result["correlations"])
    graph = build_correlation_graph([kanban], out=out)
    assert all(node["snippet"] for node in graph["nodes"])


def test_cli_json_and_text_show_text(out, tables):
    memories, _ = tables
    first = _id(memories, "Renew the TLS certificate")[0]
    run = lambda *args: subprocess.run([sys.executable, "-m", "crosstier.cli", *args, "--out", str(out)],  # noqa: E731
                                       capture_output=True, text=True, cwd=out, timeout=60)
    done = run("correlations", first, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["memory_snippet"].startswith("Still open: Renew the TLS certificate")
    assert [c["target_snippet"] for c in result["correlations"] if c.get("copies")][0].startswith("Still open: Renew the TLS")
    # the group's span is read from its chain, as no chain row names it
    assert [c["copies"] for c in result["correlations"] if c.get("copies")][0] == {"copies": 3, "days": 3, "first": "2026-06-12", "last": "2026-06-14"}
    text = run("correlations", first).stdout
    assert "Still open: Renew the TLS certificate" in text
    assert "Carried forward (same text, 1 day later); appears on 3 days, first 2026-06-12, last 2026-06-14" in text


def test_report_speaks_of_the_memory_and_its_neighbourhood(out, tables):
    memories, _ = tables
    tls = _id(memories, "Renew the TLS certificate")
    text = report(tls[0], out=out)
    assert "Still open: Renew the TLS certificate" in text.split("## Direct Correlations")[0]
    assert "**Carried forward** — this memory appears on 3 days, first 2026-06-12, last 2026-06-14" in text
    tree = text.split("```text\n")[1].split("```")[0]
    assert "— Still open: Renew the TLS certificate" in tree
    kanban = _id(memories, "Kanban board holds 16 ideas")[0]
    assert "**State changed** — Changed: Kanban idea 1 -> 16" in report(kanban, out=out)
    # an orphan among the entries of the seed's day is named; one from elsewhere is not
    emoji = report(_id(memories, "Clawd: **Emoji**")[0], out=out)
    assert "**Orphan memory** — " in emoji and "Kanban" not in emoji.split("## Recommendations")[1]


def test_the_report_function_is_not_shadowed_by_its_module():
    import importlib

    import crosstier.retrieval as retrieval

    importlib.import_module("crosstier.retrieval.workspace_report")  # what `ctc report` imports first
    assert callable(retrieval.report) and retrieval.report.__module__ == "crosstier.retrieval.workspace_report"
