"""The markdown store: an agent workspace on disk (the OpenClaw layout).

- every `.md` under memory/: episodic, one memory per top-level bullet or paragraph. A
  `YYYY-MM-DD` prefix of the file name gives the day whatever follows it
  (`2026-05-13-topic.md`); an undated file's entries have no time (a date in a heading
  gives them its day). Times come from headings and entries in every common form (leading,
  trailing, in parentheses, ranges: the start), the zone from the heading (IANA name, UTC
  offset, common abbreviation) or else the store's `timezone` (default UTC).
- MEMORY.md: semantic, one memory per bullet or paragraph. `Source: memory/D.md#L3-L7`
  lines, OpenClaw's `evidence: memory/D.md:5-5` lines, `source=` tags and promotion markers
  (`<!-- openclaw-memory-promotion:memory:memory/D.md:443:445 -->`) become refs to the
  daily-log entries on those lines.
- skills/<name>/SKILL.md (any depth): procedural, one memory per skill: its name,
  description and section titles (not the whole body: a long body's terms drown any short
  note that names it). Naming a skill in a memory (its folder, its front-matter name, its
  path) is an explicit reference to it.

Scaffolding is not a memory: rules, HTML comments, "Last updated" lines, italic taglines,
table separators, label-only lines (a label joins the bullets under it). Each memory keeps
its heading path, in metadata and in its content (so "**Emoji**: X" under two headings
differ). OpenClaw's dreaming blocks (`<!-- openclaw:dreaming:light:start -->`) hold
machine-written candidates: each is kept with the entry it cites (that entry's metadata) or,
when it cites nothing of this store, becomes a reject naming it; never a new memory.
A file or block that is not read yields a reject naming it, never a silent skip.

Ids hash the entry text, not its line number, so inserting lines elsewhere in a file keeps
every other entry's id (and its cached embedding).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timezone, tzinfo
from pathlib import Path
from typing import Any

from crosstier.core.zones import zone_named

DATED_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?![\d])")
SOURCE_LINE = re.compile(r"^\s*(?:[-*+]\s+)?Source:\s*(.+?)\s*$", re.IGNORECASE)
SOURCE_REF = re.compile(r"([^\s,#\[\]()]+)#L(\d+)(?:-L?(\d+))?")
# OpenClaw's provenance: "evidence: memory/D.md:5-5, memory/E.md:7" lines, "evidence=..." and "source=..." tags
EVIDENCE_LINE = re.compile(r"^\s*(?:[-*+]\s+)?evidence:\s*(.+?)\s*$", re.IGNORECASE)
EVIDENCE_REF = re.compile(r"([^\s,=\[\]()]+\.(?:md|txt)):(\d+)(?:-(\d+))?")
EVIDENCE_TAG = re.compile(r"\b(?:evidence|source)=([^\s,\]]+\.(?:md|txt):\d+(?:-\d+)?)", re.IGNORECASE)
# dreaming bookkeeping lines under a candidate ("- confidence: 0.58", "- recalls: 0", "- status: staged")
DREAM_FIELD = re.compile(r"^\s*(?:[-*+]\s+)?(confidence|recalls|status|note|score|avg|query|queries):\s*(.*?)\s*$", re.IGNORECASE)
SCORE_TAIL = re.compile(r"\s*\[(?:score|confidence)=[^\]]*\]\s*$")
CANDIDATE = re.compile(r"^(?:[-*+]\s+)*(?:Candidate|Theme|Reflection)\s*:\s*", re.IGNORECASE)
DREAM_MARKER = re.compile(r"<!--\s*openclaw:dreaming:([\w-]+):(start|end)\s*-->", re.IGNORECASE)
PROMOTION_MARKER = re.compile(r"<!--\s*openclaw-memory-promotion:[\w-]+:(.+?):(\d+):(\d+)\s*-->", re.IGNORECASE)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
BULLET = re.compile(r"^[-*+]\s+")
NUMBERED = re.compile(r"^\d{1,3}[.)]\s+")
HEADING = re.compile(r"^(#{1,6})(?:\s+|$)")  # at column 0 with a space: "  #501" or "#tag" is text
FENCE = re.compile(r"^\s*(```|~~~)")
RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
LAST_UPDATED = re.compile(
    r"^[*_\s>]*(?:last[\s_-]*(?:updated|modified|edited|reviewed)|updated(?:\s+on|\s+at)?|最后更新|最後更新|更新时间|更新時間)\b",
    re.IGNORECASE,
)
ITALIC_LINE = re.compile(r"^\s*(?:\*(?!\*)[^*]+\*|_(?!_)[^_]+_)\s*$")
# A label: a short run of words, bold or ending in a colon, with nothing after it ("**Reason**:", "Still open:")
LABEL = re.compile(r"^\s*(?:\*\*|__)?([^*_:：\n]{1,60}?)(?:\*\*|__)?\s*([:：])?\s*(?:\*\*|__)?\s*$")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

# A time "14:16", "9:30 PM", "08h15", optionally a range "08:06 - 08:15" (its start is the time).
_CLOCK = r"(?<![\d:.])([01]?\d|2[0-3])[:：]([0-5]\d)(?::[0-5]\d)?(?:\s*([AaPp])\.?[Mm]\.?)?(?![\d])"
TIME_RANGE = re.compile(_CLOCK + r"(?:\s*(?:-|–|—|~|to)\s*(?:[01]?\d|2[0-3])[:：][0-5]\d(?:\s*[AaPp]\.?[Mm]\.?)?)?")
LEADING_TIME = re.compile(r"^(?:\*\*|\[|\()?\s*" + TIME_RANGE.pattern + r"\s*(?:\*\*|\]|\))?(?:\s*[-—–:|]\s*|\s+|$)")
# a time in parentheses closing an entry's first line, maybe with its zone: "... (20:00)", "... (14:16 UTC+8)"
TRAILING_TIME = re.compile(r"\s*[(\[]\s*" + TIME_RANGE.pattern + r"(?:\s+([A-Za-z_]+/[A-Za-z_]+|(?:UTC|GMT)?[+-]\d{1,2}(?::?\d{2})?|[A-Z]{2,5}))?\s*[)\]]\s*$")
# a zone named right after a time: "(Asia/Taipei)", "UTC", "UTC+8", "GMT-03:00", "+08:00", "CET"
ZONE_TOKEN = re.compile(
    r"^\s*[(\[]?\s*("
    r"[A-Z][A-Za-z_]+/[A-Za-z_]+(?:/[A-Za-z_]+)?"
    r"|(?:UTC|GMT|Z)(?:\s*[+-]\s*\d{1,2}(?::?\d{2})?)?"
    r"|[+-]\d{2}:?\d{2}"
    r"|[A-Z]{2,5}"
    r")\s*[)\]]?(?![\w/])"
)
IANA_ANYWHERE = re.compile(r"\b([A-Z][A-Za-z_]+/[A-Za-z_]+(?:/[A-Za-z_]+)?)\b")
DATE_IN_TEXT = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")
# What each yielded record is: (location, raw text, fields or None, error or None).
Record = tuple[str, str, dict[str, Any] | None, str | None]


def store_zone(name: str | None) -> tzinfo:
    """The store's configured zone (an IANA name, a UTC offset or an abbreviation); UTC when unset."""
    if not name:
        return timezone.utc
    zone = zone_named(name)
    if zone is None:
        raise ValueError(f"unknown time zone {name!r} (an IANA name such as Asia/Taipei, or an offset such as UTC+8)")
    return zone


@dataclass(frozen=True)
class Stamp:
    """A time read from a heading or an entry, with the zone named beside it (None: the store's)."""

    clock: time
    zone: tzinfo | None = None


def _clock(match: re.Match) -> time | None:
    hour, minute, meridiem = int(match.group(1)), int(match.group(2)), match.group(3)
    if meridiem:
        if hour > 12 or hour == 0:
            return None
        hour = hour % 12 + (12 if meridiem.lower() == "p" else 0)
    return time(hour, minute)


def _zone_after(text: str) -> tuple[tzinfo | None, int]:
    """A zone named at the start of text, and how many characters it takes."""
    match = ZONE_TOKEN.match(text)
    if match:
        zone = zone_named(match.group(1))
        if zone is not None:
            return zone, match.end()
    return None, 0


def heading_stamp(title: str) -> tuple[Stamp | None, str]:
    """The time (and zone) a heading names, and the heading with them cut out.

    "## 09:05 Account settings", "## Heartbeat Summary (20:00)", "## 成果回報 (08:06 - 08:15)",
    "### 14:16 (Asia/Taipei)", "## Nightly run — 13:00 UTC (Sunday, June 14)".
    """
    match = TIME_RANGE.search(title)
    clock = _clock(match) if match else None
    if clock is None:
        return None, title
    zone, used = _zone_after(title[match.end():])
    rest = title[: match.start()] + title[match.end() + used:]
    if zone is None:
        iana = IANA_ANYWHERE.search(rest)
        if iana and zone_named(iana.group(1)) is not None:
            zone = zone_named(iana.group(1))
            rest = rest[: iana.start()] + rest[iana.end():]
    rest = re.sub(r"[(\[]\s*[)\]]", "", rest)  # parentheses left empty
    rest = re.sub(r"\s{2,}", " ", rest).strip(" -—–:|·,")
    return Stamp(clock, zone), rest


def entry_stamp(text: str) -> tuple[Stamp | None, str]:
    """A time leading the entry ("10:20 Jonas asked", "**08:06 - 08:15** ...") or closing its first line ("... (20:00)")."""
    match = LEADING_TIME.match(text)
    if match and _clock(match) is not None:
        rest = text[match.end():]
        zone, used = _zone_after(rest)
        return Stamp(_clock(match), zone), rest[used:].lstrip(" -—–:|)").strip()
    first, sep, others = text.partition("\n")
    match = TRAILING_TIME.search(first)
    if match and match.start() > 0 and _clock(match) is not None:
        zone = zone_named(match.group(4)) if match.group(4) else None
        return Stamp(_clock(match), zone), (first[: match.start()].rstrip() + sep + others).strip()
    return None, text


@dataclass
class Block:
    """A run of lines forming one entry (a bullet with its continuation, or a paragraph)."""

    start: int
    lines: list[str] = field(default_factory=list)
    bad_utf8: bool = False
    heading: str | None = None
    heading_path: tuple[str, ...] = ()
    stamp: Stamp | None = None
    day: date | None = None
    label: str | None = None
    dreaming: str | None = None  # the dreaming phase whose managed block holds it
    promoted_from: list[str] = field(default_factory=list)  # promotion markers just above it
    bullet: bool = False

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1

    def text(self) -> str:
        first, *rest = self.lines
        first = BULLET.sub("", first, count=1)
        return "\n".join([first, *(line.strip() for line in rest)]).strip()


def _decoded_lines(path: Path) -> list[tuple[str, bool]]:
    """Lines of a file with a flag for invalid UTF-8, so one bad byte rejects one entry only."""
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            out.append((raw.decode("utf-8"), False))
        except UnicodeDecodeError:
            out.append((raw.decode("utf-8", errors="replace"), True))
    return out


def _plain(text: str) -> str:
    """Text without markdown emphasis, for recognising labels and scaffolding."""
    return re.sub(r"[*_`~]+", "", text).strip()


def is_scaffolding(text: str) -> bool:
    """Lines that structure a file but say nothing: "Last updated ...", italic taglines, bare emphasis."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return True
    if len(lines) == 1:
        line = lines[0]
        if LAST_UPDATED.match(line) and len(line) < 120:
            return True
        if ITALIC_LINE.match(line):
            return True
    return not re.search(r"\w", _plain(text))


def label_of(text: str) -> str | None:
    """The label a label-only entry names ("**Reason**:" -> "Reason"), or None."""
    if "\n" in text.strip():
        return None
    match = LABEL.match(text)
    if not match:
        return None
    words = match.group(1).strip()
    bold = text.strip().startswith(("**", "__"))
    if not words or len(words.split()) > 6 or not (match.group(2) or bold):
        return None
    return words


def _is_title(title: str, relpath: str) -> bool:
    """A level-1 heading that only names the file (its date, its name, "Memory"): not context.
    A level-1 heading above the first entry is the file's title whatever it says."""
    stem = Path(relpath).stem.lower()
    plain = _plain(title).lower()
    return bool(DATE_IN_TEXT.search(plain)) or plain in (stem, "memory", "memories", "long-term memory", "daily log") or stem in plain


def markdown_blocks(lines: list[tuple[str, bool]], relpath: str = "") -> list[Block]:
    """Entries of a markdown file with their heading path, time and label; scaffolding and labels left out."""
    blocks: list[Block] = []
    current: Block | None = None
    stack: list[tuple[int, str | None, Stamp | None, date | None]] = []  # (level, title, stamp, day)
    dreaming: str | None = None
    promotions: list[str] = []
    in_fence = False
    in_comment = False
    seen_entry = False
    number = 0
    while number < len(lines):
        line, bad = lines[number]
        number += 1
        if in_fence:
            if current is not None:
                current.lines.append(line)
                current.bad_utf8 |= bad
            if FENCE.match(line):
                in_fence = False
            continue
        if in_comment:
            if "-->" in line:
                in_comment = False
            continue
        if number == 1 and line.strip() == "---":
            # front matter of a note: skipped whole (its keys are the file's, not memories)
            close = next((i for i in range(1, len(lines)) if lines[i][0].strip() in ("---", "...")), None)
            if close is not None:
                number = close + 1
                continue
        for marker in DREAM_MARKER.finditer(line):
            dreaming = marker.group(1).lower() if marker.group(2).lower() == "start" else None
        for marker in PROMOTION_MARKER.finditer(line):
            promotions.append(f"{marker.group(1)}:{marker.group(2)}-{marker.group(3)}")
        if "<!--" in line:
            without = COMMENT.sub("", line)
            if "<!--" in without:
                in_comment = True
                without = without.split("<!--", 1)[0]
            if not without.strip():
                continue
            line = without
        stripped = line.strip()
        heading_match = HEADING.match(line)
        if heading_match:
            current = None
            level = len(heading_match.group(1))
            raw_title = line[heading_match.end():].strip().rstrip("#").strip()
            stamp, title = heading_stamp(raw_title)
            day_match = DATE_IN_TEXT.search(raw_title)
            day = _valid_date(*day_match.groups()) if day_match else None
            if level == 1 and (not seen_entry or _is_title(raw_title, relpath)):
                title = None  # the file's own title: not context for its entries
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title or None, stamp, day))
            continue
        if not stripped:
            current = None
            continue
        if RULE.match(line) or TABLE_SEPARATOR.match(line) and "|" in line:
            current = None
            continue
        if FENCE.match(line):
            in_fence = True
        is_bullet = bool(BULLET.match(line) or NUMBERED.match(line))
        continues = current is not None and (line[:1].isspace() or not is_bullet)
        if continues:
            current.lines.append(line)
            current.bad_utf8 |= bad
            continue
        path = tuple(title for _, title, _, _ in stack if title)
        stamp = next((s for _, _, s, _ in reversed(stack) if s is not None), None)
        day = next((d for _, _, _, d in reversed(stack) if d is not None), None)
        current = Block(number, [line], bad, path[-1] if path else None, path, stamp, day, None, dreaming, promotions,
                        is_bullet)
        promotions = []
        blocks.append(current)
        seen_entry = True
    kept: list[Block] = []
    active: tuple[str, tuple[str, ...]] | None = None  # the label of the list under way, and its heading path
    for block in blocks:
        text = COMMENT.sub("", block.text()).strip()
        named = label_of(text) if len(block.lines) == 1 else None
        if named is not None:
            active = (named, block.heading_path)
            continue  # a label is no memory: it joins the bullets under it
        if is_scaffolding(text):
            continue
        if active is not None and (not block.bullet or active[1] != block.heading_path):
            active = None  # a paragraph or a new heading ends the list
        if active is not None:
            block.label = active[0]
        kept.append(block)
    return kept


def _valid_date(y: str, m: str, d: str) -> date | None:
    try:
        return date(int(y), int(m), int(d))
    except ValueError:
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^\w]+", "-", text.lower()).strip("-")[:60] or "section"


def _entry_id(store: str, relpath: str, text: str, seen: dict[str, int]) -> str:
    base = f"{store}:{relpath}#{hashlib.sha1(text.encode('utf-8')).hexdigest()[:10]}"
    seen[base] = seen.get(base, 0) + 1
    return base if seen[base] == 1 else f"{base}-{seen[base]}"


def _raw(block: Block) -> str:
    return "\n".join(block.lines)


# Headings OpenClaw writes around machine output: no context for the entries under them.
MACHINE_HEADING = re.compile(r"^(?:promoted from short-term memory|light sleep|rem sleep|deep sleep)\b", re.IGNORECASE)


def with_context(text: str, block: Block) -> str:
    """The entry's text led by its heading path and label ("Agents › Clawd: **Emoji**: 🦞")."""
    context = [h for h in block.heading_path if not MACHINE_HEADING.match(h)] + ([block.label] if block.label else [])
    return f"{' › '.join(context)}: {text}" if context else text


@dataclass
class Provenance:
    """What a block cites (Source:, evidence:, source=, promotion markers) and its text without those lines."""

    content: list[str]
    sources: list[str]
    dream_fields: dict[str, str]


def provenance(block: Block) -> Provenance:
    """Split a block into its content lines, the locators it cites and OpenClaw's dreaming fields."""
    content, sources, fields_ = [], list(block.promoted_from), {}
    machine = block.dreaming is not None or bool(block.promoted_from) or bool(CANDIDATE.match(BULLET.sub("", block.lines[0])))
    for line in block.lines:
        source = SOURCE_LINE.match(line)
        evidence = EVIDENCE_LINE.match(line)
        dream = DREAM_FIELD.match(line)
        if source:
            sources.extend(f"{p}:{a}-{b or a}" for p, a, b in SOURCE_REF.findall(source.group(1)))
        elif evidence:
            sources.extend(f"{p}:{a}-{b or a}" for p, a, b in EVIDENCE_REF.findall(evidence.group(1)))
        elif dream and content and machine:
            fields_[dream.group(1).lower()] = dream.group(2)
        else:
            for tag in EVIDENCE_TAG.findall(line):
                path, _, span = tag.rpartition(":")
                first, _, last = span.partition("-")
                sources.append(f"{path}:{first}-{last or first}")
            line = SCORE_TAIL.sub("", EVIDENCE_TAG.sub("", line)).rstrip()
            if line.strip():
                content.append(line)
    return Provenance(content, sources, fields_)


def _location_lines(sources: list[str], line_ids: dict[tuple[str, int], str], last_lines: dict[str, int]) -> tuple[list[str], list[str]]:
    """Ids of the entries on the cited lines (path:first-last), and the locators that name none."""
    refs: list[str] = []
    unresolved: list[str] = []
    for source in sources:
        path, _, span = source.rpartition(":")
        first, _, last = span.partition("-")
        first_line = int(first)
        # Walk only lines that exist: a range like 1-999999999999 must not hang the run.
        end = min(int(last or first), last_lines.get(path, 0))
        hits = [line_ids.get((path, n)) for n in range(first_line, end + 1)]
        found = sorted({h for h in hits if h})
        refs.extend(h for h in found if h not in refs)
        if not found:
            unresolved.append(source)
    return refs, unresolved


def _last_lines(line_ids: dict[tuple[str, int], str]) -> dict[str, int]:
    last: dict[str, int] = {}
    for path, line in line_ids:
        last[path] = max(line, last.get(path, 0))
    return last


@dataclass
class Entry:
    """One parsed entry before its refs are resolved (they may cite files read later)."""

    location: str
    raw: str
    fields: dict[str, Any] | None
    error: str | None = None
    sources: list[str] = field(default_factory=list)
    candidate: dict[str, Any] | None = None  # a dreaming candidate: kept with the entry it cites
    text: str = ""  # the entry's own text, without its heading context (skills are named in this)


def _timestamp(day: date | None, stamp: Stamp | None, zone: tzinfo) -> tuple[datetime | None, str]:
    if day is None:
        return None, "none"
    if stamp is None:
        return datetime.combine(day, time(0, 0), tzinfo=zone).astimezone(timezone.utc), "day"
    return datetime.combine(day, stamp.clock, tzinfo=stamp.zone or zone).astimezone(timezone.utc), "entry"


def memory_dir_entries(root: Path, path: Path, store: str, zone: tzinfo, line_ids: dict[tuple[str, int], str]) -> list[Entry]:
    """Episodic entries of one file under memory/ (dated by its name's prefix, or undated)."""
    relpath = path.relative_to(root).as_posix()
    dated = DATED_NAME.match(path.name)
    file_day = _valid_date(*dated.groups()) if dated else None
    seen: dict[str, int] = {}
    blocks = markdown_blocks(_decoded_lines(path), relpath)
    out: list[Entry] = []
    for block in blocks:
        location = f"{relpath}:L{block.start}-L{block.end}"
        if block.bad_utf8:
            out.append(Entry(location, _raw(block), None, "invalid UTF-8 in entry"))
            continue
        if dated and file_day is None:
            out.append(Entry(location, _raw(block), None, f"file name {path.name} is not a valid date"))
            continue
        cited = provenance(block)
        text = Block(block.start, cited.content).text() if cited.content else ""
        if block.dreaming is not None or CANDIDATE.match(text):
            out.append(Entry(location, _raw(block), None, None, cited.sources, {
                "phase": block.dreaming or "promotion", "text": CANDIDATE.sub("", text)[:300], "location": location,
                **cited.dream_fields,
            }))
            continue
        stamp, text = entry_stamp(text)
        stamp = stamp or block.stamp
        if not text:
            continue
        day = file_day or block.day
        timestamp, _ = _timestamp(day, stamp, zone)
        memory_id = _entry_id(store, relpath, text, seen)
        for line in range(block.start, block.end + 1):
            line_ids[(relpath, line)] = memory_id
        where = day.isoformat() if day else relpath
        session = f"{where}/{_slug(block.heading)}" if block.heading else where
        metadata: dict[str, Any] = {"file": relpath, "lines": [block.start, block.end], "heading": block.heading,
                                    "heading_path": list(block.heading_path)}
        if block.label:
            metadata["label"] = block.label
        if stamp is not None:
            metadata["time"] = stamp.clock.strftime("%H:%M")
            if stamp.zone is not None:
                metadata["zone"] = str(stamp.zone)
        if day is None:
            metadata["undated"] = True
        fields = {
            "id": memory_id,
            "tier": "episodic",
            "content": with_context(text, block),
            "timestamp": timestamp,
            "session_id": session,
            "metadata": metadata,
        }
        out.append(Entry(location, _raw(block), fields, None, cited.sources, text=text))
    return out


def memory_file_entries(root: Path, path: Path, store: str) -> list[Entry]:
    """Semantic memories of MEMORY.md; a `Source:`/`evidence:` line standing alone belongs to the memory above it."""
    relpath = path.relative_to(root).as_posix()
    seen: dict[str, int] = {}
    blocks = markdown_blocks(_decoded_lines(path), relpath)
    out: list[Entry] = []
    for block in blocks:
        location = f"{relpath}:L{block.start}-L{block.end}"
        if block.bad_utf8:
            out.append(Entry(location, _raw(block), None, "invalid UTF-8 in entry"))
            continue
        cited = provenance(block)
        if not cited.content and out and out[-1].fields is not None:
            out[-1].sources.extend(cited.sources)
            continue
        text = Block(block.start, cited.content).text() if cited.content else ""
        text = CANDIDATE.sub("", text).strip()  # a promoted candidate is a memory now: its text without the tag
        metadata: dict[str, Any] = {"file": relpath, "lines": [block.start, block.end], "section": block.heading,
                                    "heading_path": list(block.heading_path)}
        if block.label:
            metadata["label"] = block.label
        if block.promoted_from or cited.dream_fields:
            metadata["promoted"] = {"from": block.promoted_from, **cited.dream_fields}
        fields = {
            "id": _entry_id(store, relpath, text, seen),
            "tier": "semantic",
            "content": with_context(text, block) if text else "",
            "metadata": metadata,
        }
        out.append(Entry(location, _raw(block), fields, None, cited.sources, text=text))
    return out


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    import yaml

    if not text.startswith("---"):
        return {}, text
    parts = text.split("\n---", 1)
    if len(parts) < 2:
        raise ValueError("front matter opened with --- but never closed")
    head = parts[0][3:]
    body = parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""
    try:
        meta = yaml.safe_load(head) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"front matter is not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ValueError("front matter is not valid YAML: nested too deeply") from None
    if not isinstance(meta, dict):
        raise ValueError("front matter must be a mapping")
    return meta, body


def skill_records(root: Path, path: Path, store: str) -> Iterator[Record]:
    """One procedural memory for a SKILL.md: its name, description and section titles."""
    relpath = path.relative_to(root).as_posix()
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        yield relpath, data.decode("utf-8", errors="replace"), None, f"invalid UTF-8 ({exc.reason} at byte {exc.start})"
        return
    try:
        meta, body = _front_matter(text)
    except ValueError as exc:
        yield relpath, text, None, str(exc)
        return
    folder = path.parent.name
    name = str(meta.get("name") or folder)
    description = str(meta.get("description") or "").strip()
    sections = [m.group(2).strip() for m in re.finditer(r"^(#{1,4})\s+(.+?)\s*#*\s*$", body, re.MULTILINE)]
    same = lambda text: re.sub(r"[-_\s]+", " ", _plain(text).lower())  # noqa: E731
    sections = [s for s in sections if same(s) not in (same(name), same(folder))]  # the title repeats the name
    lead = _first_paragraph(body) if not description else ""
    head = f"{name}: {description or lead}" if description or lead else name
    content = "\n".join(part for part in (head, f"Sections: {'; '.join(sections)}" if sections else "") if part)
    fields = {
        "id": f"{store}:skill/{path.parent.relative_to(root / 'skills').as_posix()}" if path.is_relative_to(root / "skills") else f"{store}:{relpath}",
        "tier": "procedural",
        "content": content,
        "entities": [str(t) for t in meta.get("tags", []) if isinstance(t, str)] if isinstance(meta.get("tags"), list) else None,
        "metadata": {"file": relpath, "name": name, "folder": folder, "description": description, "sections": sections,
                     "body_chars": len(body)},
    }
    yield relpath, text, fields, None


def _first_paragraph(body: str) -> str:
    for para in re.split(r"\n\s*\n", body):
        para = " ".join(line.strip() for line in para.splitlines() if line.strip() and not line.lstrip().startswith("#"))
        if para:
            return para[:300]
    return ""


def skill_names(fields: dict[str, Any]) -> list[re.Pattern]:
    """Patterns by which a memory names a skill: its path, its folder, its front-matter name.

    A bare one-word name ("deploy") names the skill only beside the word "skill"; names with a
    hyphen, an underscore, a digit or several words, and CJK names, name it anywhere.
    """
    meta = fields["metadata"]
    relfolder = Path(meta["file"]).parent.as_posix()
    patterns = [re.compile(r"(?<![\w/-])" + re.escape(relfolder) + r"(?:/SKILL\.md)?(?![\w-])", re.IGNORECASE)]
    for name in {meta["folder"], meta["name"]}:
        name = name.strip()
        if not name:
            continue
        if CJK.search(name):
            patterns.append(re.compile(re.escape(name)))
        elif re.search(r"[-_\d\s]", name):
            words = [re.escape(w) for w in re.split(r"[-_\s]+", name) if w]
            patterns.append(re.compile(r"(?<![\w/-])" + r"[\s_-]+".join(words) + r"(?![\w-])", re.IGNORECASE))
        else:
            word = re.escape(name)
            patterns.append(re.compile(
                rf"\bskills?\b[\s:：`'\"*]*{word}\b|\b{word}[`'\"*]*\s+skill\b", re.IGNORECASE))
    return patterns


def markdown_records(root: Path, store: str, zone_name: str | None = None) -> Iterator[Record]:
    """Every record of a workspace: files under memory/ first (refs resolve against their lines)."""
    zone = store_zone(zone_name)
    line_ids: dict[tuple[str, int], str] = {}
    entries: list[Entry] = []
    memory_dir = root / "memory"
    for path in sorted(memory_dir.rglob("*.md")) if memory_dir.is_dir() else []:
        relpath = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in path.relative_to(memory_dir).parts[:-1]) or "dreaming" in path.relative_to(memory_dir).parts[:-1]:
            entries.append(Entry(relpath, "", None, "dreaming state or phase report written by OpenClaw (memory/.dreams, "
                                 "memory/dreaming): machine output, not read as memories"))
            continue
        if not path.is_file():
            entries.append(Entry(relpath, "", None, "not a regular file"))
            continue
        found = memory_dir_entries(root, path, store, zone, line_ids)
        if not found:
            entries.append(Entry(relpath, "", None, "no entry in this file (only headings, comments or scaffolding)"))
        entries.extend(found)
    memory_file = root / "MEMORY.md"
    if memory_file.is_file():
        entries.extend(memory_file_entries(root, memory_file, store))
    skills: list[Record] = []
    skills_dir = root / "skills"
    for path in sorted(skills_dir.rglob("SKILL.md")) if skills_dir.is_dir() else []:
        skills.extend(skill_records(root, path, store))
    yield from resolved(entries, skills, line_ids)
    yield from skills


def resolved(entries: list[Entry], skills: list[Record], line_ids: dict[tuple[str, int], str]) -> Iterator[Record]:
    """Entries with their citations resolved to ids, skills named in them as refs, and dreaming
    candidates attached to the entries they cite (or rejected, naming what they cite)."""
    last_lines = _last_lines(line_ids)
    by_id = {e.fields["id"]: e for e in entries if e.fields is not None}
    skill_patterns = [(f["id"], skill_names(f)) for _, _, f, _ in skills if f is not None]
    for entry in entries:
        if entry.candidate is None:
            continue
        refs, unresolved = _location_lines(entry.sources, line_ids, last_lines)
        if refs:
            for ref in refs:
                by_id[ref].fields["metadata"].setdefault("dreaming", []).append(entry.candidate)
        else:
            cited = ", ".join(unresolved) or "nothing"
            entry.error = (f"OpenClaw dreaming candidate ({entry.candidate['phase']}): machine-written, not a memory; "
                           f"it cites {cited}, which is no entry of this store")
    for entry in entries:
        if entry.candidate is not None and entry.error is None:
            continue  # kept in the metadata of the entry it promotes
        if entry.fields is None:
            yield entry.location, entry.raw, None, entry.error
            continue
        fields = entry.fields
        refs, unresolved = _location_lines(entry.sources, line_ids, last_lines)
        for skill_id, patterns in skill_patterns:
            if skill_id not in refs and any(p.search(entry.text) for p in patterns):
                refs.append(skill_id)
        fields["refs"] = [r for r in refs if r != fields["id"]]
        if unresolved:
            fields["metadata"]["unresolved_sources"] = unresolved
        yield entry.location, entry.raw, fields, None
