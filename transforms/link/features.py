"""Per-memory evidence the classifier reads: references, negation, polarity, values, causal cues.

Also `cites` (the memory cites anything: `refs`, or an id named in its text, so
cross_reference can speak for its pairs) and `term_weights` (each term's rarity weight,
aligned with `terms`, for the weighted co_occurrence).

Every column depends only on its own memory (and, for `ref_ids`, on which ids exist),
so a pair's type and reason stay pair-local like its score.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Set

import polars as pl
import pyarrow as pa

from crosstier.transforms import forked
from crosstier.transforms.link.calibration import common_term_weights
from crosstier.transforms.link.terms import (
    STOP_WORDS, entity_terms, key_terms, latin_share, remember_entity_terms, taken_entity_terms,
)
from crosstier.transforms.link.terms import stem as _stem

stem = functools.lru_cache(maxsize=1 << 16)(_stem)  # pure, and called for every word of every memory

# Negation cues: particles, contractions, "lack"/"lacked" (lexical negation), a failure to act
# ("failing to perform a wheelie" denies "performing a wheelie") and the contrastive
# "rather than" / "instead of" ("grouped by area rather than by repository" negates "by repository").
_NEGATION = re.compile(
    r"\b(no longer|rather than|instead of|no one|nobody|nothing|not|never|no|cannot|none|neither|nor|without|lack(?:s|ed|ing)?"
    r"|fail(?:s|ed|ing)? to|unable to)\b"
    r"|\b\w+(n['\u2019]t)\b",
    re.IGNORECASE,
)
# Adverbs that sit between a negation and what it negates ("not necessarily", "no longer ... anymore").
_NEGATION_FILLER = frozenset(("anymore", "necessarily", "currently", "actually", "usually", "entirely", "fully",
                              "exactly", "totally", "completely", "longer"))
_NEGATED_PHRASE_WORDS = 2  # a negation negates the next two content words of its clause (predicate + object)
# Words of a negation's scope that are not part of the claim it denies: the cue itself ("lacks",
# "neither") and the fillers. The other side need not state them (sql/classified_links.sql).
NEGATION_IGNORED = sorted({stem(w) for w in _NEGATION_FILLER} | {"lack", "neither", stem("fail"), stem("unable")})

# Word groups with opposite polarity: the first word is the positive one.
_ANTONYMS = (
    ("enable", "disable"), ("allow", "deny"), ("allow", "block"), ("allow", "forbid"), ("like", "dislike"),
    ("love", "hate"), ("like", "hate"), ("prefer", "avoid"), ("accept", "reject"), ("approve", "reject"),
    ("add", "remove"), ("include", "exclude"), ("start", "stop"), ("increase", "decrease"), ("agree", "disagree"),
    ("succeed", "fail"), ("pass", "fail"), ("true", "false"), ("open", "close"), ("always", "never"),
    ("keep", "drop"), ("install", "uninstall"), ("lock", "unlock"), ("public", "private"),
    # states of the same subject that exclude each other (issue 12: "sitting/standing, indoors/outdoors, empty/full")
    ("sit", "stand"), ("indoor", "outdoor"), ("inside", "outside"), ("full", "empty"),
    ("early", "late"), ("asleep", "awake"), ("wet", "dry"), ("hot", "cold"), ("win", "lose"), ("present", "absent"),
    ("alive", "dead"), ("happy", "sad"), ("cheap", "expensive"), ("fast", "slow"), ("loud", "quiet"),
    ("online", "offline"), ("healthy", "sick"), ("visible", "hidden"), ("pass", "fail"), ("valid", "invalid"),
    # opposite actions and places of one subject (SICK's contradictions without a negation: filling /
    # emptying a container, running towards / away from the line, listening / ignoring). Not words
    # with a technical sense that has no opposite there: float (a type: "never float round()" and
    # "float round() is banned" agree), dark (mode), clean/dirty (a work tree), exit (code), load, cover.
    ("fill", "empty"), ("toward", "away"), ("top", "bottom"), ("listen", "ignore"), ("remember", "forget"),
    ("remember", "forgot"), ("laugh", "cry"), ("connect", "disconnect"), ("attach", "detach"), ("dress", "undress"),
    # the two words of one place said in the other pair's words ("running outside" / "running indoors"),
    # an aim met or not ("hitting" / "missing" the potato), a request answered ("granting" / "denying")
    ("indoor", "outside"), ("inside", "outdoor"), ("hit", "miss"), ("strike", "miss"), ("grant", "deny"), ("crowded", "empty"),
    ("friend", "enemy"), ("rise", "fall"),
    # a thing put on or taken off ("applying" / "removing" make-up). Not sizes ("a small dog" / "a big
    # dog"): like "a man" / "a woman", two descriptions that may be of two things (SICK TEST: 2 more
    # contradictions, 8 neutral pairs).
    ("apply", "remove"),
)
# The negative words that state an absence or a refusal ("empty", "disabled", "rejected"): "not X"
# says the same as one of them, unlike the other opposites (outside, standing, late), which are
# states of their own.
_PRIVATIVE = ("disable", "deny", "block", "forbid", "dislike", "hate", "avoid", "reject", "remove", "exclude",
              "stop", "disagree", "fail", "false", "close", "never", "drop", "uninstall", "unlock", "empty",
              "absent", "dead", "hidden", "invalid", "offline", "lose", "ignore", "forget", "forgot", "disconnect",
              "detach", "undress", "miss")
# "hate" stems as "hat" does: read as "hat", "A man is wearing a hat" / "There is no man wearing
# a hat" was an opposite "like", and "a white hat" stated a refusal (negative_states). Its forms
# are one word of their own wherever the evidence reads polar words (_polar_stem).
_HATE_FORMS = frozenset(("hate", "hates", "hated", "hating"))


def _polar_stem(word: str) -> str:
    """stem(word), except that the forms of "hate" are "hate" (not "hat")."""
    return "hate" if word in _HATE_FORMS else stem(word)


POLARITY: dict[str, list[tuple[str, str]]] = {}  # stem -> [(group, sign)]
for _pos, _neg in _ANTONYMS:
    POLARITY.setdefault(_polar_stem(_pos), []).append((_pos, "+"))
    POLARITY.setdefault(_polar_stem(_neg), []).append((_pos, "-"))
_PRIVATIVE_STEMS = frozenset(_polar_stem(w) for w in _PRIVATIVE)
_POLAR_WORD = re.compile(r"[a-z]+", re.IGNORECASE)

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# A stated value: a number or version (not part of a date, time, range, id or #ref) or a weekday.
_VALUE = re.compile(
    r"(?<![\w.#:/-])v?\d+(?:\.\d+)*(?![\w.]*\w)(?![-:/]\d)|\b(?:" + "|".join(_WEEKDAYS) + r")s?\b", re.IGNORECASE
)
_SUBJECT_WORD = re.compile(r"[A-Za-z][\w-]*")
_SUBJECT_SKIP = frozenset(("on", "at", "to", "is", "be", "vs", "versus"))
_CLAUSE_END = re.compile(r"[.,;:!?()]")
# For a value's subject: a point inside a version or number ("3.11 and 3.12") does not end the clause.
_SUBJECT_CLAUSE_END = re.compile(r"[,;:!?()]|\.(?!\w)")
_WORD = re.compile(r"[a-z]+")

# Cues whose cause follows them ("X because Y") and cues whose cause precedes them ("Y led to X").
_CAUSE_AFTER = ("because of", "because", "due to", "caused by", "owing to", "thanks to", "as a result of", "since")
_CAUSE_BEFORE = ("led to", "leads to", "lead to", "resulted in", "results in", "caused", "causes", "therefore", "hence",
                 "consequently", "as a result", "so")
_CUE = re.compile(
    r"\b(" + "|".join(re.escape(c) for c in sorted(_CAUSE_AFTER + _CAUSE_BEFORE, key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec")
# "since" naming a point in time, not a reason: "since 2024", "since v2.1", "since PR #509", "since March",
# "since last week", "since then", "ever since". An event ("since the migration failed") stays a cause.
_SINCE_TIME = re.compile(
    r"\s+(?:(?:the|last|early|late|mid|this|that|about|around|roughly|approximately)\s+)*"
    r"(?:[v#]?\d|(?:pr|mr|commit|release|version|build|sprint|q[1-4]|then|yesterday|today|tonight|morning|noon|"
    r"midnight|evening|night|week|weekend|month|year|day|hour|minute|quarter|start|beginning|earlier|forever|"
    + "|".join(_MONTHS + _WEEKDAYS) + r")s?\b)",
    re.IGNORECASE,
)
_TOKEN_STRIP = ".,;:!?()[]{}<>\"'`*"

FEATURE_SCHEMA = {
    "ref_ids": pl.List(pl.String),
    "negation": pl.String,
    "negated_terms": pl.List(pl.String),
    "stated_terms": pl.List(pl.String),
    "negative_stated": pl.List(pl.String),
    "negation_scope": pl.List(pl.String),
    "polarity": pl.List(pl.String),
    "polarity_flip": pl.List(pl.String),
    "vals": pl.List(pl.String),
    "subject_terms": pl.List(pl.String),
    "exclusive": pl.List(pl.String),
    "named_terms": pl.List(pl.String),
    "causal_cue": pl.String,
    "cause_terms": pl.List(pl.String),
    # false-contradiction filters (below): the text a copy shares, and what each stated value is about
    "copy_text": pl.String,
    "value_labels": pl.List(pl.String),
}


# Verbs whose particle says the opposite state ("turned on" / "turned off" the alerts, "logged in" /
# "logged out", "put on" / "took off" the jacket, "picked up" / "put down" the bike): group, the
# positive and the negative phrase. A particle alone ("on Friday", "off the shelf") is no opposite.
_PARTICLE_OPPOSITES = tuple(
    (group, re.compile(positive, re.IGNORECASE), re.compile(negative, re.IGNORECASE))
    for group, positive, negative in (
        ("turn on", r"\b(?:turn|switch|power)(?:s|ed|ing)?\s+on\b", r"\b(?:turn|switch|power)(?:s|ed|ing)?\s+off\b"),
        ("log in", r"\b(?:log|sign|opt|check)(?:s|ged|ed|ging|ing)?\s+in\b", r"\b(?:log|sign|opt|check)(?:s|ged|ed|ging|ing)?\s+out\b"),
        ("put on", r"\b(?:put|puts|putting)\s+on\b", r"\b(?:take|takes|took|taken|taking)\s+off\b"),
        ("pick up", r"\b(?:pick|picks|picked|picking|hold|holds|held|holding)\s+up\b", r"\b(?:put|puts|putting)\s+down\b"),
        # where a subject looks ("looking at" / "looking away from" the screen, "facing" / "turning
        # their backs to" the camera). Not where it goes (into / out of the water, onto / off a wall,
        # up / down a hill, near / far from): one may do both in turn; as rules they found 10 more of
        # SICK TEST's contradictions and 22 pairs it labels neutral.
        ("look at", r"\b(?:look(?:s|ed|ing)?|star(?:e|es|ed|ing)|gaz(?:e|es|ed|ing)|glanc(?:e|es|ed|ing))\s+at\b"
                    r"|\bfac(?:e|es|ed|ing)\s+(?:the|a|an|his|her|their|its|my|our|your|this|that)\b",
         r"\blook(?:s|ed|ing)?\s+away\b|\bturn(?:s|ed|ing)?\s+(?:their|his|her|its)\s+backs?\b"),
    )
)


def polarity_marks(content: str, clauses: list[tuple[re.Match, int]] | None = None) -> list[str]:
    """'group+' / 'group-' for each polar word or particle verb in the text (enable+, enable- for
    disable, "turn on-" for "switched off"); one inside a negation's clause counts with the other
    sign ("not open" is open-, "does not like" like-). `clauses`: _negation_clauses(content),
    where the caller found them."""
    spans = [(match.end(), end) for match, end in (_negation_clauses(content) if clauses is None else clauses)]
    marks = set()

    def mark(group: str, sign: str, at: int) -> None:
        if any(start <= at < end for start, end in spans):
            sign = "-" if sign == "+" else "+"
        marks.add(group + sign)

    for word in _POLAR_WORD.finditer(content):
        for group, sign in _polar_groups(word.group(0)):
            mark(group, sign, word.start())
    if not _ANY_PARTICLE_OPPOSITE.search(content):
        return _one_sided(marks)  # one scan for the particle patterns below, which most texts never match
    for group, positive, negative in _PARTICLE_OPPOSITES:
        for pattern, sign in ((positive, "+"), (negative, "-")):
            for found in pattern.finditer(content):
                mark(group, sign, found.start())
    return _one_sided(marks)


def _one_sided(marks: set[str]) -> list[str]:
    """The marks without any group the text marks both ways ("a large dog and a small dog", "one
    is sitting, the other standing"): such a text claims neither side, so it opposes neither."""
    return sorted(m for m in marks if (m[:-1] + ("-" if m[-1] == "+" else "+")) not in marks)


_ANY_PARTICLE_OPPOSITE = re.compile("|".join(
    f"(?:{pattern.pattern})" for _, positive, negative in _PARTICLE_OPPOSITES for pattern in (positive, negative)
), re.IGNORECASE)


# Words whose stem is a polar word's but which are other words ("presentation" stems as "present").
_NOT_POLAR = frozenset(("presentation", "presentations", "validation", "validations"))


@functools.lru_cache(maxsize=1 << 16)
def _polar_groups(word: str) -> tuple[tuple[str, str], ...]:
    """POLARITY's (group, sign) pairs of a word as the text writes it (one lookup per word seen)."""
    word = word.lower()
    return () if word in _NOT_POLAR else tuple(POLARITY.get(_polar_stem(word), ()))


def _negation_clauses(content: str) -> list[tuple[re.Match, int]]:
    """Each negation cue and where its clause ends: the cue's scope."""
    out = []
    for match in _NEGATION.finditer(content):
        clause = _CLAUSE_END.split(content[match.end():], maxsplit=1)[0]
        out.append((match, match.end() + len(clause)))
    return out


def negative_states(stated: list[str]) -> list[str]:
    """The stated words that state an absence or a refusal (_PRIVATIVE: "empty", "unlocked", "dislikes").

    A negation answered by one of them is a double negative, not a conflict: "nobody is in the
    meeting room" and "the meeting room is empty" agree (sql/classified_links.sql).
    """
    return [w for w in stated if w in _PRIVATIVE_STEMS]


def _subject_before(text: str) -> str | None:
    """The last content word of the clause before a value ("Python" in "runs on Python 3.11")."""
    clause = _SUBJECT_CLAUSE_END.split(text)[-1]
    for word in reversed(_SUBJECT_WORD.findall(clause)):
        lowered = word.lower()
        if lowered not in STOP_WORDS and lowered not in _SUBJECT_SKIP:
            return stem(lowered) if lowered.isalpha() else lowered
    return None


def value_terms(content: str) -> list[str]:
    """Values stated in the text as 'subject=value' ("python=3.11", "run=friday"), sorted.

    A subject may have several values in one text ("Python 3.11 and 3.12"); the classifier compares
    value sets per subject, so versions keep their precision (a leading "v" dropped) and "16" vs
    "16.4" can be read as one version given less precisely.
    """
    out = set()
    for match in _VALUE.finditer(content):
        value = match.group(0).lower()
        if value.endswith("s") and value[:-1] in _WEEKDAYS:
            value = value[:-1]
        if value.startswith("v"):
            value = value[1:]
        subject = _subject_before(content[: match.start()])
        if subject is not None:
            out.add(f"{subject}={value}")
    return sorted(out)


# Words that name a person, read as one word when a negation is matched: "there is no person
# boiling noodles" denies "a woman is boiling noodles", "nobody" answers "a player" (which person it
# is belongs to the agent rule, exclusive_marks, not to negation).
_PERSON_WORDS = frozenset(("man", "men", "woman", "women", "boy", "boys", "girl", "girls", "child", "children",
                           "kid", "kids", "person", "persons", "people", "player", "players", "guy", "guys",
                           "lady", "ladies", "someone", "somebody"))


# One action or property in other words, read as one word where a negation is matched and a
# contradiction's subject is compared: "there is no one cutting a tomato" denies "the lady is
# slicing a tomato", "no boy checking a calendar" denies "a boy is looking at a calendar" (SICK's
# contradictions). Words of one act or one kind of thing only; the first word of each group stands
# for the others.
_SAME_WORDS = (
    ("cut", "slice", "chop", "dice"), ("look", "check"), ("guard", "defend", "protect"), ("talk", "speak"), ("jump", "leap"),
    ("throw", "toss", "hurl"), ("fix", "repair"), ("buy", "purchase"), ("big", "large"), ("dog", "puppy"), ("cat", "kitten"),
)
SAME_STEM = {stem(word): stem(group[0]) for group in _SAME_WORDS for word in group}


_ANY_PERSON_WORDS = ("person", "persons", "people", "someone", "somebody", "nobody", "anyone", "anybody", "everyone", "everybody")
_ANY_PERSON_TERMS = frozenset(_ANY_PERSON_WORDS) | {stem(w) for w in _ANY_PERSON_WORDS}
_PERSON_TERMS = frozenset(_PERSON_WORDS) | {stem(w) for w in _PERSON_WORDS} | _ANY_PERSON_TERMS


# A measure of a thing is not what a negation denies: "nobody is slicing a piece of bread" denies
# "a man is slicing some bread".
_MEASURE_WORDS = frozenset(("piece", "pieces", "bit", "bits"))


def _content_words(text: str, *, stated: bool = False) -> list[str]:
    """Stemmed content words (three letters or more, not stop words) in text order; a word naming a
    person is "person" (what a negation denies: "there is no man riding" denies "a woman is riding"'s
    claim that someone rides, which person it is belongs to the agent rule), and where the text
    states it (`stated`) also which person ("men" and "guys" are "sex=male"): the subject a
    negating side names must be the other's ("the children aren't playing" does not deny "a group
    of boys are playing", sql/classified_links.sql)."""
    out = []
    for w in _WORD.findall(text.lower()):
        if w in _ANY_PERSON_WORDS:
            out.append("person")
        elif w in _PERSON_WORDS:
            if stated:  # "men" and "guys" name the same people: "sex=male"
                out.append(EXCLUSIVE.get(w, stem(w)))
            out.append("person")
        elif len(w) >= 3 and w not in STOP_WORDS and w not in _MEASURE_WORDS:
            term = _polar_stem(w)
            out.append(SAME_STEM.get(term, term))
    return out


_LET = re.compile(r"\s*let\b", re.IGNORECASE)
# A clause that supposes, wishes or advises states nothing: "anyone else would quit", "you should
# stop", "if it rains". A negation inside it makes no negated phrase ("if you don't stop ..."), and
# in a text with no other negation its words are a scope, not stated, so a negation elsewhere does
# not deny them ("I won't quit" / "... where anyone else would quit"): a false contradiction
# costs more than a missed one.
_HYPOTHETICAL = re.compile(r"\b(?:would|could|might|should|if|unless|whether)\b", re.IGNORECASE)


def _hypothetical_clauses(content: str) -> list[tuple[int, int]]:
    """(start, end) of each clause (between _CLAUSE_END marks) with a _HYPOTHETICAL word."""
    out, start = [], 0
    for clause in _CLAUSE_END.split(content):
        if _HYPOTHETICAL.search(clause):
            out.append((start, start + len(clause)))
        start += len(clause) + 1
    return out


def negated_terms(content: str, clauses: list[tuple[re.Match, int]] | None = None) -> tuple[str | None, list[str], list[str], list[str]]:
    """Negation evidence: (first cue, negated phrases, stated terms, negation scope terms).

    A cue negates the next two content words of its clause, kept together as one phrase
    ("prefer tab" in "no longer prefers tabs"): the other memory contradicts it only if it states
    the whole phrase. Its scope is the rest of the clause; `stated` are the content words outside
    every scope, what the memory says without negation, and `scope` the content words inside one.
    So a negation of something the other does not state is no conflict, and neither are two
    texts that both negate a thing (their scopes share a word: "deploys are not allowed during
    the freeze" and "no deploys during the freeze").
    """
    cue = None
    phrases = set()
    supposed = _hypothetical_clauses(content)
    scoped = []  # (start, end) of each cue and its scope
    for match, end in _negation_clauses(content) if clauses is None else clauses:
        clause = content[match.end():end]
        scoped.append((match.start(), end))
        words = [w for w in _content_words(clause) if w not in _NEGATION_FILLER][:_NEGATED_PHRASE_WORDS]
        # "don't let the bumps in the road bring you down" urges, it denies nothing a memory states:
        # the clause stays a scope (two texts that both say it agree) but makes no negated phrase
        hypothetical = any(start <= match.start() < stop for start, stop in supposed)
        if words and not _LET.match(clause) and not hypothetical:
            cue = cue or (match.group(1) or match.group(2)).lower().replace("\u2019", "'")
            kind = _negated_person_kind(clause)
            phrases.add(" ".join(words + ([kind] if kind else [])))
    if not phrases:
        # a text that denies nothing: what it supposes is a scope. One that denies something
        # keeps every word it states (the subject its negation must share with the other side),
        # so the rule only ever takes contradictions away
        scoped.extend(supposed)
    plain, last = [], 0
    for start, end in sorted(scoped):
        if start > last:
            plain.append(content[last:start])
        last = max(last, end)
    plain.append(content[last:])
    stated = set(_content_words(" ".join(plain), stated=True))
    scope = set(_content_words(" ".join(content[start:end] for start, end in scoped)))
    return cue, sorted(phrases), sorted(stated), sorted(scope)


def _negated_person_kind(clause: str) -> str | None:
    """Which person ("sex=male") a negation's phrase names where it names one of a kind: "there
    is no man playing a keyboard" denies a man playing, not "a person" or "a woman" playing it
    (SICK labels 12 of 14 such pairs neutral), so the other side must state that kind too, as
    "A man is ..." does (_content_words, stated). None for any person ("nobody", "no person")
    and for a person word of no kind (a child, a player)."""
    seen = 0
    for word in _WORD.findall(clause.lower()):
        if word in _ANY_PERSON_WORDS:
            return None
        if word in _PERSON_WORDS:
            return EXCLUSIVE.get(word)
        if len(word) >= 3 and word not in STOP_WORDS and word not in _NEGATION_FILLER:
            seen += 1
            if seen == _NEGATED_PHRASE_WORDS:
                return None
    return None


# Words that negate without a negation particle. They only widen a memory's negation scope (never
# make a negated phrase of their own), so two texts that both reject a thing, one with "no more
# black" and one with "black is gone", read as agreeing: precision only, no new conflicts.
_LEXICAL_BEFORE = re.compile(
    r"\b(?:replac(?:e|es|ed|ing)|reject(?:s|ed|ing)?|ban(?:s|ned)?|drop(?:s|ped)?|remov(?:e|es|ed|ing)|ditch(?:es|ed)?|"
    r"abandon(?:s|ed)?|avoid(?:s|ed)?|forbid(?:s|den)?|deprecat(?:e|es|ed)|stop(?:s|ped)?\s+using)\b",
    re.IGNORECASE,
)
_LEXICAL_AFTER = re.compile(
    r"\b(?:is|are|was|were|been|be|now)\s+(?:now\s+)?(?:gone|banned|removed|dropped|deprecated|retired|forbidden|"
    r"disabled|obsolete|dead)\b",
    re.IGNORECASE,
)


def lexical_negation_scope(content: str) -> list[str]:
    """Content words a lexical negation covers: the next two after "replaces", "rejects", "bans"...,
    the last two before "is gone", "was removed", "is banned"... (within the clause)."""
    scope = set()
    for match in _LEXICAL_BEFORE.finditer(content):
        clause = _CLAUSE_END.split(content[match.end():], maxsplit=1)[0]
        scope.update(_content_words(clause)[:_NEGATED_PHRASE_WORDS])
    for match in _LEXICAL_AFTER.finditer(content):
        clause = re.split(r"[,;:!?]|\.(?!\w)", content[: match.start()])[-1]  # "round() is banned": brackets stay
        scope.update(_content_words(clause)[-_NEGATED_PHRASE_WORDS:])
    return sorted(scope)


def causal_cue(content: str) -> tuple[str | None, list[str]]:
    """The first causal cue in the text and the terms on its cause side (after "because", before "led to")."""
    for match in _CUE.finditer(content):
        cue = match.group(1).lower()
        if cue == "so" and not re.search(r"(^|[,;.!?]\s*)$", content[: match.start()]):
            continue  # "so" is a cue only as a connective (", so we ..."), not as in "so slow"
        if cue == "since" and (_SINCE_TIME.match(content, match.end())
                               or re.search(r"\b(ever|long)\s+$", content[: match.start()], re.IGNORECASE)):
            continue  # "since" naming a point in time ("since PR #509", "ever since") is not a reason
        if cue in _CAUSE_AFTER:
            span = re.split(r"[.!?;]", content[match.end():], maxsplit=1)[0]
        else:
            span = re.split(r"[.!?;]\s", content[: match.start()])[-1]
        entities, rest = entity_terms(span)
        return cue, sorted(entities | key_terms(rest))
    return None, []


def subject_terms(terms: list[str]) -> list[str]:
    """The terms a statement is about: values (terms with digits, weekdays) dropped, polar words folded onto their
    group, a word naming a person ("a woman", "nobody", "the player") folded onto "person", the members of
    another exclusive group (a dog / a cat) folded onto the group."""
    out = set()
    for term in terms:
        out.update(_subject_of(term))
    return sorted(out)


@functools.lru_cache(maxsize=1 << 16)
def _subject_of(term: str) -> tuple[str, ...]:
    """What one term adds to subject_terms: it depends on the term alone, and a namespace's
    memories repeat a few thousand terms (100k memories: ~5M lookups, ~2 s as a loop each)."""
    if any(ch.isdigit() for ch in term) or term.rstrip("s") in _WEEKDAYS:
        return ()  # a value, not what the statement is about ("the gym class is on Tuesday")
    if term in _PERSON_TERMS:
        # which person it is belongs to the agent rule (exclusive_marks) and the negation's own
        # match (negated_terms): "there is no person boiling noodles" and "a woman is boiling
        # noodles" are about the same subject
        return ("person",)
    groups = POLARITY.get(term)
    exclusive = EXCLUSIVE.get(term)
    if groups:
        return tuple(group for group, _ in groups)
    if exclusive:
        return (exclusive.split("=")[0],)
    return (SAME_STEM.get(term, term),)


# Agents and objects that cannot be one another in the same event ("a man" / "a woman" playing the
# guitar, "a dog" / "a cat" chasing a ball): group -> member -> the words that name it.
_EXCLUSIVE_GROUPS = {
    "sex": {
        "male": ("man", "men", "boy", "boys", "gentleman", "gentlemen", "guy", "guys"),
        "female": ("woman", "women", "girl", "girls", "lady", "ladies"),
    },
    "animal": {
        name: (name, name + "s") + extra
        for name, extra in (("dog", ("puppy", "puppies")), ("cat", ("kitten", "kittens")), ("horse", ()), ("bird", ()),
                            ("cow", ()), ("sheep", ()), ("goat", ()), ("monkey", ()), ("elephant", ()), ("lion", ()),
                            ("tiger", ()), ("bear", ()), ("rabbit", ()), ("mouse", ("mice",)), ("snake", ()),
                            ("duck", ()), ("chicken", ()), ("pig", ()), ("deer", ()), ("fox", ("foxes",)))
    },
}
# word (and its stem) -> "group=member"
EXCLUSIVE: dict[str, str] = {}
for _group, _members in _EXCLUSIVE_GROUPS.items():
    for _member, _words in _members.items():
        for _word in _words:
            EXCLUSIVE[_word] = EXCLUSIVE[stem(_word)] = f"{_group}={_member}"


# Only an agent or object described as one ("a man", "the young woman", "two dogs"): "Alice's son" and
# "her daughter" are people who may both exist, not two descriptions of one event.
_DETERMINERS = frozenset(("a", "an", "the", "one", "two", "three", "four", "some", "several", "no"))


def exclusive_marks(content: str) -> list[str]:
    """'group=member' for each agent or object of an exclusive group the text names ("sex=male", "animal=dog").

    Two statements about the same event whose members of a group do not meet (one names only
    men, the other only women) cannot both be true; one that names both ("a man and a woman")
    meets either, so it conflicts with neither.
    """
    words = _POLAR_WORD.findall(content.lower())
    return sorted({
        EXCLUSIVE[w] for i, w in enumerate(words)
        if w in EXCLUSIVE and any(d in _DETERMINERS for d in words[max(0, i - 2):i])  # "a man", "the young man"
    })


_CAPITALISED = re.compile(r"(?<![.!?:;\n]\s)(?<!^)\b[A-Z][a-z]+\b")


def named_terms(content: str, entities: list[str] | None, terms: list[str]) -> list[str]:
    """The memory's terms that name something: identifiers, names, capitalised words mid-sentence, given entities."""
    named = set(entity_terms(content, last_use=True)[0])  # the memory's last use: with_terms found them first
    for match in _CAPITALISED.finditer(content):
        before = content[: match.start()].rstrip()  # a sentence's first word is no name
        if before and before[-1] not in ".!?:;":
            named.add(stem(match.group(0).lower()))
    for entity in entities or ():
        entity = " ".join(entity.split()).lower()
        named.add(stem(entity) if entity.isalpha() else entity)
    return sorted(named & set(terms))


def mentioned_ids(content: str, ids: set[str]) -> list[str]:
    """Ids of memories named in the text as a whole token."""
    found = set()
    for token in content.split():
        token = token.strip(_TOKEN_STRIP)
        if token in ids:
            found.add(token)
    return sorted(found)


# ---------------------------------------------------------------- false-contradiction filters
# Dates, weekdays, clock times, counters and ids in boilerplate ("Nightly run — 13:00 UTC
# (Sunday, June 14)", "heartbeat #113", "Day 14") are not values a statement can conflict on.
_MONTH_NAMES = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_BOILERPLATE = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[tT ]\d{2}:\d{2}(?::\d{2})?Z?)?"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[AaPp]\.?[Mm]\.?)?"
    r"|\b(?:" + "|".join(_WEEKDAYS) + r")s?\s*,?\s*" + _MONTH_NAMES + r"\.?\s+\d{1,2}(?:st|nd|rd|th)?\b"
    r"|\b" + _MONTH_NAMES + r"\.?\s+\d{1,2}(?:st|nd|rd|th)?(?:,?\s+\d{4})?\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)?\s+" + _MONTH_NAMES + r"\b(?:\s+\d{4})?"
    r"|(?<=\()\s*(?:" + "|".join(_WEEKDAYS) + r")\b"
    r"|\b(?:day|run|build|attempt|iteration|round|step|cycle|heartbeat|session|episode|issue|pr|ticket|job|batch|"
    r"no|number|id|item|entry|task|beat|tick|check)\s*[#.]?\s*\d+\b",
    re.IGNORECASE,
)


_DIGIT = re.compile(r"\d")


def without_boilerplate(content: str) -> str:
    """The text with dates, weekdays beside a date, clock times, counters and ids cut out."""
    if "(" not in content and not _DIGIT.search(content):
        return content  # every kind of boilerplate has a digit but a weekday after "(": most texts have neither (~20 us saved)
    return _BOILERPLATE.sub(" ", content)


_NOT_A_UNIT = frozenset(("until", "till", "since", "before", "after", "from", "to", "and", "or", "in", "on", "at", "by", "for", "with"))


def value_labels(content: str, plain: str | None = None) -> list[str]:
    """'subject=label' for each stated value: the clause's first content word and the word after
    the value ("Kanban board holds 16 ideas" -> "hold=Kanban ideas"), to say what changed.
    `plain`: without_boilerplate(content), where the caller has it."""
    out = set()
    text = without_boilerplate(content) if plain is None else plain
    for match in _VALUE.finditer(text):
        subject = _subject_before(text[: match.start()])
        if subject is None:
            continue
        clause = _SUBJECT_CLAUSE_END.split(text[: match.start()])[-1]
        words = [w for w in _SUBJECT_WORD.findall(clause) if w.lower() not in STOP_WORDS]
        after = _SUBJECT_WORD.match(text[match.end():].lstrip())
        if after and (after.group(0).lower() in STOP_WORDS or after.group(0).lower() in _NOT_A_UNIT):
            after = None  # "3.11 until ...": no unit after the value, the subject names it
        second = after.group(0) if after else (words[-1] if len(words) > 1 else "")
        label = " ".join(w for w in (words[0] if words else subject, second) if w)
        out.add(f"{subject}={label}")
    return sorted(out)


# A state said to have ended ("ran on Python 3.11 until PR #509", "used to deploy on Fridays"):
# it and the state that followed it are a change of state, not a contradiction.
_ENDED = re.compile(r"\b(?:until|till|used to|formerly|previously)\b", re.IGNORECASE)


def ended_state(content: str) -> bool:
    """Whether the text says its state ended (until, used to, formerly, previously)."""
    return bool(_ENDED.search(content))


def copy_text(content: str) -> str:
    """The normalised text copies share (transforms/link/copies.py): identical ones never contradict."""
    from crosstier.transforms.link.copies import normalised_text

    return normalised_text(content)


# ---------------------------------------------------------------- skills named in any memory
# A markdown store's skill has the id "<store>:skill/<folder>"; a memory of any store naming that
# folder ("the rotate-api-keys skill", "skills/rotate-api-keys/SKILL.md") references it. A name
# with a hyphen, underscore or digit names it anywhere; a one-word name only beside "skill".
_SKILL_ID = re.compile(r":skill/(?:.*/)?([^/]+)$")


def skill_patterns(ids: Iterable[str]) -> list[tuple[str, re.Pattern]]:
    """(skill id, the pattern of text naming it) for every skill id among ids."""
    out = []
    # the substring test first: sorting and matching every id cost ~40 ms at 100k memories
    for memory_id in sorted(i for i in ids if ":skill/" in i):
        match = _SKILL_ID.search(memory_id)
        if not match:
            continue
        name = re.escape(match.group(1))
        if re.search(r"[-_\d]", match.group(1)):
            pattern = rf"(?<![\w/-]){name}(?![\w-])|skills/{name}\b"
        else:
            pattern = rf"\bskills?\b[\s:`'\"*]*{name}\b|\b{name}[`'\"*]*\s+skill\b|skills/{name}\b"
        out.append((memory_id, re.compile(pattern, re.IGNORECASE)))
    return out


def named_skills(content: str, patterns: list[tuple[str, re.Pattern]]) -> set[str]:
    """Ids of the skills the text names."""
    return {skill_id for skill_id, pattern in patterns if pattern.search(content)}


def _text_features(content: str, ids: set[str]) -> tuple:
    """The evidence that depends on the text alone (one call per distinct content)."""
    clauses = _negation_clauses(content)
    cue, negated, stated, scope = negated_terms(content, clauses)
    scope = sorted(set(scope) | set(lexical_negation_scope(content)))
    marks = polarity_marks(content, clauses)
    plain = without_boilerplate(content)
    flip = [m[:-1] + ("-" if m.endswith("+") else "+") for m in marks]
    return (set(mentioned_ids(content, ids)), cue, negated, stated, scope, marks, flip,
            value_terms(plain), *causal_cue(content), copy_text(content), value_labels(content, plain))


def rarity_weights(terms: pl.Expr) -> pl.Expr:
    """Each term's rarity weight among common English words (calibration.term_weight), aligned with the terms."""
    return terms.list.eval(pl.element().replace_strict(common_term_weights(), default=1.0, return_dtype=pl.Float64)).fill_null(pl.lit([], dtype=pl.List(pl.Float64)))


def link_features(memories: pl.DataFrame, ids: Set[str] | None = None, skill_ids: Iterable[str] | None = None) -> pl.DataFrame:
    """The memories (with `terms`) plus the evidence columns of FEATURE_SCHEMA. `ids`: every
    id a text may name (default: these memories'); the live path passes all of them when it
    recomputes the evidence of a few, so `ref_ids` and `cites` are what a batch run finds.
    `skill_ids`: any ids that hold every skill id among `ids` (default: `ids`), where going
    through 100k ids for the few skills cost ~20 ms a micro-batch."""
    ids = set(memories["id"].to_list()) if ids is None else ids
    skills = skill_patterns(ids if skill_ids is None else skill_ids)
    columns = [memories[name].to_list() for name in ("id", "content", "terms", "refs", "entities")]
    rows, cites = _evidence_rows_in_processes(columns, ids, skills)
    # pyarrow builds list columns from Python lists ~10x faster than pl.Series
    return memories.with_columns(
        *(pl.from_arrow(pa.array(rows[name], type=pa.large_list(pa.large_string()) if dtype == pl.List(pl.String)
                                 else pa.large_string())).cast(dtype).alias(name)
          for name, dtype in FEATURE_SCHEMA.items()),
        pl.Series("cites", cites, dtype=pl.Boolean),
        term_weights=rarity_weights(pl.col("terms")),
        # how far the (English) model can read the text: a cosine between unreadable texts is no evidence
        latin_share=pl.Series("latin_share", [latin_share(c) for c in memories["content"].to_list()], dtype=pl.Float64),
        ended=pl.Series("ended", [ended_state(c) for c in memories["content"].to_list()], dtype=pl.Boolean),
    ).with_columns(**reason_terms())


def reason_terms() -> dict[str, pl.Expr]:
    """The terms a reason may name, made from `named_terms` and `terms` (_reason_order)."""
    return {"name_terms": _reason_order(pl.col("named_terms"), 3), "word_terms": _reason_order(pl.col("terms"), 4)}


_PARALLEL_MIN_ROWS = 20_000  # below this, starting a worker costs more than it saves


def _evidence_rows_in_processes(columns: list[list], ids: Set[str], skills: list[tuple[str, re.Pattern]]) -> tuple[dict[str, list], list[bool]]:
    """_evidence_rows over all rows, split between this process and forked workers where there
    are many rows and CPUs (transforms/forked.py): ~19 s of a 100k-memory namespace's score
    task on one core of two."""
    height = len(columns[0])
    chunks = [[column[lo:hi] for column in columns] for lo, hi in forked.row_bounds(height, forked.parts_for(height, _PARALLEL_MIN_ROWS))]
    # each worker takes what entity_terms remembers of its texts (with_terms found them in this process)
    calls = [(_evidence_rows, (*chunks[0], ids, skills))]
    calls += [(_evidence_rows_remembering, (taken_entity_terms(chunk[1]), *chunk, ids, skills)) for chunk in chunks[1:]]
    done = forked.run_forked(calls)
    if len(done) == 1:
        return done[0]
    rows = {name: [value for part, _ in done for value in part[name]] for name in done[0][0]}
    return rows, [cite for _, part in done for cite in part]


def _evidence_rows_remembering(known: dict, *args) -> tuple[dict[str, list], list[bool]]:
    remember_entity_terms(known)
    return _evidence_rows(*args)


def _evidence_rows(
    memory_ids: list[str], contents: list[str], terms_of: list, refs_of: list, entities_of: list,
    ids: Set[str], skills: list[tuple[str, re.Pattern]],
) -> tuple[dict[str, list], list[bool]]:
    """The FEATURE_SCHEMA values and `cites` of each memory, in order."""
    rows: dict[str, list] = {name: [] for name in FEATURE_SCHEMA}
    cites: list[bool] = []
    by_text: dict[str, tuple] = {}
    for mem_id, content, terms, refs, entities in zip(memory_ids, contents, terms_of, refs_of, entities_of):
        text = by_text.get(content)
        if text is None:
            text = by_text[content] = _text_features(content, ids)
        mentioned, cue, negated, stated, scope, marks, flip, values, causal, cause, copied, labels = text
        refs_given = [r for r in (refs or ()) if r and r != mem_id]
        skill_refs = (named_skills(content, skills) if skills else set()) - {mem_id}  # naming a skill is a reference
        refs = {r for r in refs_given if r in ids} | skill_refs
        rows["ref_ids"].append(sorted((refs | mentioned) - {mem_id}))
        cites.append(bool(refs_given) or bool(mentioned - {mem_id}) or bool(skill_refs))
        rows["negation"].append(cue)
        rows["negated_terms"].append(negated)
        rows["stated_terms"].append(stated)
        rows["negative_stated"].append(negative_states(stated))
        rows["negation_scope"].append(scope)
        rows["polarity"].append(marks)
        rows["polarity_flip"].append(flip)
        rows["vals"].append(values)
        rows["subject_terms"].append(subject_terms(terms or []))
        rows["exclusive"].append(exclusive_marks(content))
        rows["named_terms"].append(named_terms(content, entities, terms or []))
        rows["causal_cue"].append(causal)
        rows["cause_terms"].append(cause)
        rows["copy_text"].append(copied)
        rows["value_labels"].append(labels)
    return rows, cites


def _reason_order(terms: pl.Expr, min_chars: int) -> pl.Expr:
    """The terms a reason may name (`min_chars` or more, with an ASCII letter: what RE2's
    [^\\W\\d_] matches) in the order a reason prefers them: longest first, then alphabetical.
    sql/classified_links then takes a pair's best shared name, or its first shared words, as
    the first terms of one side's list the other side has: sorting every pair's intersection
    there cost ~1/3 of classifying."""
    kept = terms.fill_null(pl.lit([], dtype=pl.List(pl.String))).list.eval(
        pl.element().filter((pl.element().str.len_chars() >= min_chars) & pl.element().str.contains("[A-Za-z]"))
    )
    return kept.list.eval(pl.element().sort_by([pl.element().str.len_chars(), pl.element()], descending=[True, False]))
