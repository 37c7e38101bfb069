"""The markdown store: an agent workspace on disk (the OpenClaw layout).

- memory/YYYY-MM-DD.md (also memory/daily/): episodic, one memory per top-level bullet or
  paragraph; `## [HH:MM] heading` opens a session, a leading `HH:MM` dates an entry.
- MEMORY.md: semantic, one memory per bullet or paragraph; `Source: memory/D.md#L3-L7`
  lines become refs to the daily-log entries on those lines.
- skills/<name>/SKILL.md (any depth): procedural, one memory per skill, with its front matter.

Ids hash the entry text, not its line number, so inserting lines elsewhere in a file keeps
every other entry's id (and its cached embedding).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timezone
from pathlib import Path
from typing import Any

DAILY_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")
TIME_STAMP = re.compile(r"^(?:\*\*|\[)?([01]?\d|2[0-3]):([0-5]\d)(?:\*\*|\])?(?:\s*[-—–:]\s*|\s+|$)")
SOURCE_LINE = re.compile(r"^\s*Source:\s*(.+?)\s*$", re.IGNORECASE)
SOURCE_REF = re.compile(r"([^\s,#]+)#L(\d+)(?:-L?(\d+))?")
BULLET = re.compile(r"^[-*+]\s+")
HEADING = re.compile(r"^(#{1,6})(?:\s+|$)")  # at column 0 with a space: "  #501" or "#tag" is text

# What each yielded record is: (location, raw text, fields or None, error or None).
Record = tuple[str, str, dict[str, Any] | None, str | None]


@dataclass
class Block:
    """A run of lines forming one entry (a bullet with its continuation, or a paragraph)."""

    start: int
    lines: list[str] = field(default_factory=list)
    bad_utf8: bool = False
    heading: str | None = None
    heading_time: time | None = None

    @property
    def end(self) -> int:
        return self.start + len(self.lines) - 1

    def text(self) -> str:
        first, *rest = self.lines
        return "\n".join([BULLET.sub("", first, count=1), *(line.strip() for line in rest)]).strip()


def _decoded_lines(path: Path) -> list[tuple[str, bool]]:
    """Lines of a file with a flag for invalid UTF-8, so one bad byte rejects one entry only."""
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            out.append((raw.decode("utf-8"), False))
        except UnicodeDecodeError:
            out.append((raw.decode("utf-8", errors="replace"), True))
    return out


def markdown_blocks(lines: list[tuple[str, bool]]) -> list[Block]:
    """Entries of a markdown file: top-level bullets and paragraphs, with their heading."""
    blocks: list[Block] = []
    current: Block | None = None
    heading: str | None = None
    heading_time: time | None = None
    for number, (line, bad) in enumerate(lines, start=1):
        stripped = line.strip()
        heading_match = HEADING.match(line)
        if heading_match:
            current = None
            level = len(heading_match.group(1))
            if level >= 2:
                title = line[heading_match.end():].strip()
                heading_time, heading = None, title
                match = TIME_STAMP.match(title)
                if match:
                    heading_time = time(int(match.group(1)), int(match.group(2)))
                    heading = title[match.end():].strip() or title
            continue
        if not stripped:
            current = None
            continue
        continues = current is not None and (line[:1].isspace() or not BULLET.match(line))
        if continues:
            current.lines.append(line)
            current.bad_utf8 |= bad
            continue
        current = Block(number, [line], bad, heading, heading_time)
        blocks.append(current)
    return blocks


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "section"


def _entry_id(store: str, relpath: str, text: str, seen: dict[str, int]) -> str:
    base = f"{store}:{relpath}#{hashlib.sha1(text.encode('utf-8')).hexdigest()[:10]}"
    seen[base] = seen.get(base, 0) + 1
    return base if seen[base] == 1 else f"{base}-{seen[base]}"


def _raw(block: Block) -> str:
    return "\n".join(block.lines)


def daily_log_records(root: Path, path: Path, store: str, line_ids: dict[tuple[str, int], str]) -> Iterator[Record]:
    """Episodic entries of one daily log; fills line_ids for Source: refs to resolve against."""
    relpath = path.relative_to(root).as_posix()
    y, m, d = (int(g) for g in DAILY_NAME.match(path.name).groups())
    try:
        day = date(y, m, d)
    except ValueError:
        day = None
    seen: dict[str, int] = {}
    for block in markdown_blocks(_decoded_lines(path)):
        location = f"{relpath}:L{block.start}-L{block.end}"
        if block.bad_utf8:
            yield location, _raw(block), None, "invalid UTF-8 in entry"
            continue
        if day is None:
            yield location, _raw(block), None, f"file name {path.name} is not a valid date"
            continue
        text = block.text()
        match = TIME_STAMP.match(text)
        stamp = block.heading_time or time(0, 0)
        if match:
            stamp = time(int(match.group(1)), int(match.group(2)))
            text = text[match.end():].strip()
        memory_id = _entry_id(store, relpath, text, seen)
        for line in range(block.start, block.end + 1):
            line_ids[(relpath, line)] = memory_id
        session = f"{day.isoformat()}/{_slug(block.heading)}" if block.heading else day.isoformat()
        fields = {
            "id": memory_id,
            "tier": "episodic",
            "content": text,
            "timestamp": datetime.combine(day, stamp, tzinfo=timezone.utc),
            "session_id": session,
            "metadata": {"file": relpath, "lines": [block.start, block.end], "heading": block.heading},
        }
        yield location, _raw(block), fields, None


def _sources(block: Block) -> tuple[list[str], list[str]]:
    """The block's content lines and its `Source:` locators."""
    content, sources = [], []
    for line in block.lines:
        match = SOURCE_LINE.match(line)
        if match:
            sources.extend(f"{p}#L{a}-L{b or a}" for p, a, b in SOURCE_REF.findall(match.group(1)))
        else:
            content.append(line)
    return content, sources


def _last_lines(line_ids: dict[tuple[str, int], str]) -> dict[str, int]:
    last: dict[str, int] = {}
    for path, line in line_ids:
        last[path] = max(line, last.get(path, 0))
    return last


def _resolved_refs(sources: list[str], line_ids: dict[tuple[str, int], str], last_lines: dict[str, int]) -> tuple[list[str], list[str]]:
    refs: list[str] = []
    unresolved: list[str] = []
    for source in sources:
        path, _, span = source.partition("#L")
        first, _, last = span.partition("-L")
        # Walk only lines that exist: a range like L1-L999999999999 must not hang the run.
        end = min(int(last or first), last_lines.get(path, 0))
        hits = [line_ids.get((path, n)) for n in range(int(first), end + 1)]
        found = sorted({h for h in hits if h})
        refs.extend(h for h in found if h not in refs)
        if not found:
            unresolved.append(source)
    return refs, unresolved


def memory_file_records(root: Path, path: Path, store: str, line_ids: dict[tuple[str, int], str]) -> Iterator[Record]:
    """Semantic memories of MEMORY.md, with Source: lines turned into refs."""
    relpath = path.relative_to(root).as_posix()
    seen: dict[str, int] = {}
    last_lines = _last_lines(line_ids)
    pending: tuple[str, str, dict[str, Any]] | None = None
    for block in markdown_blocks(_decoded_lines(path)):
        location = f"{relpath}:L{block.start}-L{block.end}"
        if block.bad_utf8:
            yield location, _raw(block), None, "invalid UTF-8 in entry"
            continue
        content_lines, sources = _sources(block)
        if not content_lines and pending is not None:
            # A Source: line standing alone belongs to the memory above it.
            pending[2]["_sources"].extend(sources)
            continue
        if pending is not None:
            yield _finish(pending, line_ids, last_lines)
        text = Block(block.start, content_lines).text() if content_lines else ""
        fields = {
            "id": _entry_id(store, relpath, text, seen),
            "tier": "semantic",
            "content": text,
            "metadata": {"file": relpath, "lines": [block.start, block.end], "section": block.heading},
            "_sources": sources,
        }
        pending = (location, _raw(block), fields)
    if pending is not None:
        yield _finish(pending, line_ids, last_lines)


def _finish(pending: tuple[str, str, dict[str, Any]], line_ids: dict[tuple[str, int], str], last_lines: dict[str, int]) -> Record:
    location, raw, fields = pending
    sources = fields.pop("_sources")
    refs, unresolved = _resolved_refs(sources, line_ids, last_lines)
    fields["refs"] = refs
    if unresolved:
        fields["metadata"]["unresolved_sources"] = unresolved
    return location, raw, fields, None


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
    """One procedural memory for a SKILL.md: its name, description and steps."""
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
    name = str(meta.get("name") or path.parent.name)
    description = str(meta.get("description") or "").strip()
    content = "\n\n".join(part for part in (f"{name}: {description}" if description else name, body.strip()) if part)
    fields = {
        "id": f"{store}:skill/{path.parent.relative_to(root / 'skills').as_posix()}" if path.is_relative_to(root / "skills") else f"{store}:{relpath}",
        "tier": "procedural",
        "content": content,
        "entities": [str(t) for t in meta.get("tags", []) if isinstance(t, str)] if isinstance(meta.get("tags"), list) else None,
        "metadata": {"file": relpath, "name": name, "description": description},
    }
    yield relpath, text, fields, None


def markdown_records(root: Path, store: str) -> Iterator[Record]:
    """Every record of a workspace: daily logs first (Source: refs resolve against them)."""
    line_ids: dict[tuple[str, int], str] = {}
    memory_dir = root / "memory"
    daily = sorted(p for p in memory_dir.rglob("*.md") if DAILY_NAME.match(p.name)) if memory_dir.is_dir() else []
    for path in daily:
        yield from daily_log_records(root, path, store, line_ids)
    memory_file = root / "MEMORY.md"
    if memory_file.is_file():
        yield from memory_file_records(root, memory_file, store, line_ids)
    skills = root / "skills"
    for path in sorted(skills.rglob("SKILL.md")) if skills.is_dir() else []:
        yield from skill_records(root, path, store)
