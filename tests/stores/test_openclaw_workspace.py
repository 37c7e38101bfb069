"""The markdown store on a workspace shaped like real OpenClaw ones (tests/fixtures/openclaw_workspace):
every file read or named in a reject, heading times in their zones, no scaffolding, OpenClaw's
provenance as refs, dreaming candidates kept with what they cite, skills named in logs as refs."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from crosstier.core.config import ConfigError, StoreConfig, settings_from_dict
from crosstier.transforms.stores.extract import extract_store
from crosstier.transforms.stores.markdown import entry_stamp, heading_stamp, is_scaffolding, label_of

WORKSPACE = Path(__file__).parents[1] / "fixtures" / "openclaw_workspace"
LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def extracted():
    return extract_store(StoreConfig(name="ws", kind="markdown", path=str(WORKSPACE)), LIMIT)


def _row(extracted, pattern: str) -> dict:
    rows = [r for r in extracted.memories.iter_rows(named=True) if re.search(pattern, r["content"])]
    assert len(rows) == 1, (pattern, [r["content"] for r in rows])
    return rows[0]


def test_every_file_under_memory_is_read_or_named_in_a_reject(extracted):
    files = sorted(p.relative_to(WORKSPACE).as_posix() for p in (WORKSPACE / "memory").rglob("*.md"))
    places = extracted.memories["location"].to_list() + extracted.rejects["location"].to_list()
    for name in files:
        assert any(place == name or place.startswith(name + ":") for place in places), name
    # the suffixed log and the undated notes are memories, not rejects
    read = {loc.split(":")[0] for loc in extracted.memories["location"].to_list()}
    assert {"memory/2026-06-14-printer-followup.md", "memory/projects.md"} <= read
    reasons = dict(zip(extracted.rejects["location"].to_list(), extracted.rejects["reason"].to_list()))
    assert "machine output" in reasons["memory/dreaming/light/2026-06-13.md"]


def test_input_count_is_memories_plus_rejects(extracted):
    assert extracted.records_read == extracted.memories.height + extracted.rejects.height


@pytest.mark.parametrize(
    ("pattern", "utc", "zone"),
    [
        (r"Kanban board holds 1 idea", "2026-06-12T20:00", None),  # "## Heartbeat Summary (20:00)"
        (r"^Morning brief: Created skills", "2026-06-13T09:10", None),  # "## 09:10 Morning brief"
        (r"printer queue; the queue now drains", "2026-06-13T06:16", "Asia/Taipei"),  # "### 14:16 (Asia/Taipei)"
        (r"^成果回報: 完成了深圳", "2026-06-13T08:06", None),  # "## 成果回報 (08:06 - 08:15)": the range's start
        (r"^Office visit: Wen confirmed", "2026-06-14T08:30", "UTC+02:00"),  # "## 10:30 CEST Office visit"
        (r"^今日更新: 和风天气 API 的密钥", "2026-06-14T21:40", None),  # "## 今日更新 (21:40)"
    ],
)
def test_heading_times_in_their_zone(extracted, pattern, utc, zone):
    row = _row(extracted, pattern)
    assert row["timestamp"].strftime("%Y-%m-%dT%H:%M") == utc
    meta = json.loads(row["metadata"])
    assert meta.get("zone") == zone


def test_every_entry_under_a_timed_heading_has_that_time(extracted):
    for row in extracted.memories.filter(pl.col("tier") == "episodic").iter_rows(named=True):
        meta = json.loads(row["metadata"])
        if "time" in meta:
            assert row["timestamp"] is not None and row["timestamp"].strftime("%M") == meta["time"][-2:], row["content"]


def test_the_store_zone_applies_where_no_zone_is_named(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "2026-06-12.md").write_text("## Standup (09:30)\n- Moved the sync.\n\n## 10:00 (UTC)\n- Shipped.\n")
    result = extract_store(StoreConfig(name="ws", kind="markdown", path=str(tmp_path), timezone="Asia/Taipei"), LIMIT)
    stamps = sorted(result.memories["timestamp"].to_list())
    assert stamps == [datetime(2026, 6, 12, 1, 30, tzinfo=timezone.utc), datetime(2026, 6, 12, 10, 0, tzinfo=timezone.utc)]


def test_store_timezone_is_validated(tmp_path):
    with pytest.raises(ConfigError, match=r"stores\[0\] \(ws\)\.timezone: unknown time zone 'Mars/Olympus'"):
        settings_from_dict({"stores": [{"name": "ws", "kind": "markdown", "path": "x", "timezone": "Mars/Olympus"}]}, base=tmp_path)


def test_undated_file_entries_have_no_time_unless_a_heading_dates_them(extracted):
    emoji = _row(extracted, r"Clawd: \*\*Emoji\*\*")
    assert emoji["timestamp"] is None and emoji["tier"] == "episodic"
    budget = _row(extracted, r"grocery budget")
    assert budget["timestamp"].date().isoformat() == "2026-06-10"


def test_no_scaffolding_memory(extracted):
    for content in extracted.memories["content"].to_list():
        text = content.split(": ", 1)[-1]
        assert not re.fullmatch(r"[-*_\s]*", text), content
        assert "Last updated" not in content and "<!--" not in content, content
        assert not re.fullmatch(r"\*\*?[^*]+\*\*?:?", text.strip()), content
    assert not any("Daily log — written by Clawd" in c or "Curated by Clawd" in c for c in extracted.memories["content"])


def test_heading_path_is_in_the_content_and_the_metadata(extracted):
    clawd = _row(extracted, r"Clawd: \*\*Emoji\*\*")
    fortune = _row(extracted, r"Fortune: \*\*Emoji\*\*")
    assert clawd["content"] == "Agents › Clawd: **Emoji**: 🦞" and fortune["content"] == "Agents › Fortune: **Emoji**: 🧧"
    assert json.loads(clawd["metadata"])["heading_path"] == ["Agents", "Clawd"]


def test_a_label_joins_the_bullets_under_it(extracted):
    reason = _row(extracted, r"Mira only answers on Fridays")
    assert reason["content"] == "Still open › Reason: Mira only answers on Fridays."
    assert json.loads(reason["metadata"])["label"] == "Reason"


def test_evidence_and_promotion_lines_are_refs(extracted):
    promoted = _row(extracted, r"morning brief skill sends")
    created = _row(extracted, r"^Morning brief: Created skills/morning-brief")
    assert created["id"] in promoted["refs"]
    assert "[score=" not in promoted["content"] and "Candidate" not in promoted["content"] and "evidence" not in promoted["content"]
    chinese = _row(extracted, r"^Preferences: 天气查询")
    assert _row(extracted, r"^成果回報")["id"] in chinese["refs"]


def test_dreaming_candidates_are_kept_with_what_they_cite_not_as_memories(extracted):
    assert not any("Candidate" in c or "SILENCE" in c for c in extracted.memories["content"])
    kanban = _row(extracted, r"Kanban board holds 16 ideas")
    [candidate] = json.loads(kanban["metadata"])["dreaming"]
    assert candidate["phase"] == "light" and candidate["confidence"] == "0.58"
    reasons = extracted.rejects["reason"].to_list()
    assert any("dreaming candidate" in r and "session-corpus/2026-06-13.txt:155-155" in r for r in reasons)


@pytest.mark.parametrize(
    ("pattern", "skill"),
    [
        (r"^Morning brief: Created skills/morning-brief/SKILL.md", "ws:skill/morning-brief"),  # its path
        (r"^Morning brief: New skill: derm-consult", "ws:skill/derm-consult"),  # its folder name
        (r"morning brief skill sends", "ws:skill/morning-brief"),  # its name, in other words
        (r"^成果回報: 完成了深圳天气", "ws:skill/weather-cn"),  # its front-matter name, in Chinese
    ],
)
def test_naming_a_skill_is_a_reference_to_it(extracted, pattern, skill):
    assert skill in _row(extracted, pattern)["refs"]


def test_a_skill_is_its_name_description_and_sections(extracted):
    skill = extracted.memories.filter(pl.col("id") == "ws:skill/morning-brief").row(0, named=True)
    assert skill["content"] == ("morning-brief: Send a short morning summary of the calendar, the weather and the open items.\n"
                                "Sections: When to use; Steps")
    assert "Read today's calendar" not in skill["content"]


@pytest.mark.parametrize(
    ("title", "clock", "rest"),
    [
        ("09:05 Account settings page", "09:05", "Account settings page"),
        ("Heartbeat Summary (20:00)", "20:00", "Heartbeat Summary"),
        ("成果回報 (08:06 - 08:15)", "08:06", "成果回報"),
        ("14:16 (Asia/Taipei)", "14:16", ""),
        ("Nightly run — 13:00 UTC (Sunday, June 14)", "13:00", "Nightly run — (Sunday, June 14)"),
        ("Standup 9:30 PM PST", "21:30", "Standup"),
        ("Ratio 16:9 screens", None, "Ratio 16:9 screens"),
        ("Release notes", None, "Release notes"),
    ],
)
def test_heading_stamp(title, clock, rest):
    stamp, text = heading_stamp(title)
    assert (stamp.clock.strftime("%H:%M") if stamp else None, text) == (clock, rest)


@pytest.mark.parametrize(
    ("text", "clock", "rest"),
    [
        ("10:20 Jonas asked for a review", "10:20", "Jonas asked for a review"),
        ("**08:06 - 08:15** did the sync", "08:06", "did the sync"),
        ("Pushed the fix (20:00)", "20:00", "Pushed the fix"),
        ("Python 3.12 is out", None, "Python 3.12 is out"),
    ],
)
def test_entry_stamp(text, clock, rest):
    stamp, remaining = entry_stamp(text)
    assert (stamp.clock.strftime("%H:%M") if stamp else None, remaining) == (clock, rest)


@pytest.mark.parametrize(
    ("text", "scaffolding"),
    [("Last updated: 2026-05-14", True), ("*Curated by Clawd.*", True), ("**", True), ("Shipped the fix.", False),
     ("*Deploys* run on Fridays", False)],
)
def test_is_scaffolding(text, scaffolding):
    assert is_scaffolding(text) is scaffolding


@pytest.mark.parametrize(
    ("text", "label"),
    [("**Reason**:", "Reason"), ("Still open:", "Still open"), ("**Problem:**", "Problem"), ("下一步：", "下一步"),
     ("Standup moves to Thursday because Priya has a call:", None), ("A plain sentence.", None)],
)
def test_label_of(text, label):
    assert label_of(text) == label
