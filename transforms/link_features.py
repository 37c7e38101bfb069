"""Per-memory evidence the classifier reads: references, negation, polarity, values, causal cues.

Every column depends only on its own memory (and, for `ref_ids`, on which ids exist),
so a pair's type and reason stay pair-local like its score.
"""

from __future__ import annotations

import re

import polars as pl

from transforms.terms import entity_terms, key_terms, stem

_NEGATION = re.compile(r"\b(no longer|not|never|no|cannot|none|neither|nor|without)\b|\b\w+(n't)\b", re.IGNORECASE)

# Word groups with opposite polarity: the first word is the positive one.
_ANTONYMS = (
    ("enable", "disable"), ("allow", "deny"), ("allow", "block"), ("allow", "forbid"), ("like", "dislike"),
    ("love", "hate"), ("like", "hate"), ("prefer", "avoid"), ("accept", "reject"), ("approve", "reject"),
    ("add", "remove"), ("include", "exclude"), ("start", "stop"), ("increase", "decrease"), ("agree", "disagree"),
    ("succeed", "fail"), ("pass", "fail"), ("true", "false"), ("open", "close"), ("always", "never"),
    ("keep", "drop"), ("install", "uninstall"), ("lock", "unlock"), ("public", "private"),
)
# stem -> [(group, sign)]
POLARITY: dict[str, list[tuple[str, str]]] = {}
for _pos, _neg in _ANTONYMS:
    POLARITY.setdefault(stem(_pos), []).append((_pos, "+"))
    POLARITY.setdefault(stem(_neg), []).append((_pos, "-"))
_POLAR_WORD = re.compile(r"[a-z]+")

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_VALUE = re.compile(r"(?<![\w.])v?\d+(?:\.\d+)*(?![\w.]*\w)|\b(?:" + "|".join(_WEEKDAYS) + r")s?\b", re.IGNORECASE)

# Cues whose cause follows them ("X because Y") and cues whose cause precedes them ("Y led to X").
_CAUSE_AFTER = ("because of", "because", "due to", "caused by", "owing to", "thanks to", "as a result of", "since")
_CAUSE_BEFORE = ("led to", "leads to", "lead to", "resulted in", "results in", "caused", "causes", "therefore", "hence",
                 "consequently", "as a result", "so")
_CUE = re.compile(
    r"\b(" + "|".join(re.escape(c) for c in sorted(_CAUSE_AFTER + _CAUSE_BEFORE, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)
_TOKEN_STRIP = ".,;:!?()[]{}<>\"'`*"

FEATURE_SCHEMA = {
    "ref_ids": pl.List(pl.String),
    "negation": pl.String,
    "polarity": pl.List(pl.String),
    "polarity_flip": pl.List(pl.String),
    "vals": pl.List(pl.String),
    "subject_terms": pl.List(pl.String),
    "causal_cue": pl.String,
    "cause_terms": pl.List(pl.String),
}


def negation_cue(content: str) -> str | None:
    """The first negation in the text ("not", "no longer", "n't"), lower-cased, or None."""
    match = _NEGATION.search(content)
    if match is None:
        return None
    return (match.group(1) or match.group(2)).lower()


def polarity_marks(content: str) -> list[str]:
    """'group+' / 'group-' for each polar word in the text (enable+, enable- for disable)."""
    marks = set()
    for word in _POLAR_WORD.findall(content.lower()):
        for group, sign in POLARITY.get(stem(word), ()):
            marks.add(group + sign)
    return sorted(marks)


def value_terms(content: str) -> list[str]:
    """Numbers, versions and weekdays stated in the text, normalised."""
    out = set()
    for match in _VALUE.finditer(content):
        value = match.group(0).lower()
        out.add(value[:-1] if value.endswith("s") and value[:-1] in _WEEKDAYS else value)
    return sorted(out)


def causal_cue(content: str) -> tuple[str | None, list[str]]:
    """The first causal cue in the text and the terms on its cause side (after "because", before "led to")."""
    for match in _CUE.finditer(content):
        cue = match.group(1).lower()
        if cue == "so" and not re.search(r"(^|[,;.!?]\s*)$", content[: match.start()]):
            continue  # "so" is a cue only as a connective (", so we ..."), not as in "so slow"
        if cue in _CAUSE_AFTER:
            span = re.split(r"[.!?;]", content[match.end():], maxsplit=1)[0]
        else:
            span = re.split(r"[.!?;]\s", content[: match.start()])[-1]
        entities, rest = entity_terms(span)
        return cue, sorted(entities | key_terms(rest))
    return None, []


def subject_terms(terms: list[str], values: list[str]) -> list[str]:
    """The terms a statement is about: values dropped, polar words folded onto their group."""
    drop = set(values) | {stem(v) for v in values}
    out = set()
    for term in terms:
        if term in drop:
            continue
        groups = POLARITY.get(term)
        out.update(group for group, _ in groups) if groups else out.add(term)
    return sorted(out)


def mentioned_ids(content: str, ids: set[str]) -> list[str]:
    """Ids of memories named in the text as a whole token."""
    found = set()
    for token in content.split():
        token = token.strip(_TOKEN_STRIP)
        if token in ids:
            found.add(token)
    return sorted(found)


def link_features(memories: pl.DataFrame) -> pl.DataFrame:
    """The memories (with `terms`) plus the evidence columns of FEATURE_SCHEMA."""
    ids = set(memories["id"].to_list())
    rows = {name: [] for name in FEATURE_SCHEMA}
    for mem_id, content, terms, refs in zip(
        memories["id"].to_list(), memories["content"].to_list(), memories["terms"].to_list(), memories["refs"].to_list()
    ):
        refs = {r for r in (refs or ()) if r in ids}
        rows["ref_ids"].append(sorted((refs | set(mentioned_ids(content, ids))) - {mem_id}))
        rows["negation"].append(negation_cue(content))
        marks = polarity_marks(content)
        rows["polarity"].append(marks)
        rows["polarity_flip"].append([m[:-1] + ("-" if m.endswith("+") else "+") for m in marks])
        values = value_terms(content)
        rows["vals"].append(values)
        rows["subject_terms"].append(subject_terms(terms or [], values))
        cue, cause = causal_cue(content)
        rows["causal_cue"].append(cue)
        rows["cause_terms"].append(cause)
    return memories.with_columns(pl.Series(name, rows[name], dtype=dtype) for name, dtype in FEATURE_SCHEMA.items())
