"""Terms of a memory: entities, technical identifiers and key content terms, offline and deterministic.

The terms of one memory depend only on that memory (its content and provided
`entities`), never on the corpus, so a pair's co_occurrence is pair-local and an
incremental run stays exact. Corpus frequency only steers candidate generation
(transforms/link/candidates.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import numpy as np
import polars as pl

from crosstier.transforms import forked

# Function words, conversational fillers and words every agent memory carries
# ("user", "assistant"): they are evidence of nothing.
STOP_WORDS = frozenset(
    """
    a about above after again against all almost already also although always am among an and another any anyone
    anything anyway are aren around as ask asked at away back be became because been before being below between both
    but by can cannot could couldn did didn do does doesn doing don done down during each either else enough etc even
    ever every everything few for from further get gets getting give given go goes going gone good got great had
    hadn has hasn have haven having he her here hers herself him himself his how however i if in instead into is isn
    it its itself just keep know last later least less let lets like likely longer look lot made make makes making
    many may maybe me might mine more most much must my myself need needs never new next no nobody none nor not
    nothing now of off often ok okay on once one only onto or other others otherwise our ours ourselves out over own
    perhaps please pretty quite rather re really right said same say says see seem seems set shall she should
    shouldn since so some something sometimes soon still such sure take than thank thanks that the their theirs them
    themselves then there these they thing things think this those though through thus to today together too
    tomorrow toward try two under until up upon us use used uses using very via want wanted wants was wasn way we
    well were weren what whatever when where whether which while who whom whose why will with within without won
    would wouldn yeah yes yet yesterday you your yours yourself yourselves user users assistant agent also hey hi
    hello sounds sound cool nice fine alright yep nope got gonna wanna tell told
    """.split()
)

# Suffixes stripped once, longest first, so deploy/deploys/deployed/deployment meet.
_SUFFIXES = (
    "ations", "ation", "ments", "ment", "ences", "ence", "ances", "ance", "ings", "ing",
    "ness", "ies", "ied", "ed", "es", "s",
)
_KEEP_DOUBLE = frozenset("lsz")

_URL = re.compile(r"https?://[^\s<>()\"'`]+", re.IGNORECASE)
_TAG = re.compile(r"(?<![\w@#])[#@][A-Za-z][\w.-]*[\w]|(?<![\w@#])[#@][A-Za-z]")
_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+|(?<![\w/])[\w-]+\.(?:py|md|ts|tsx|js|jsx|json|toml|ya?ml|sql|sh|txt|csv|parquet|rs|go|java|rb|cfg|ini|lock|html|css)\b")
_VERSION = re.compile(r"(?<![\w.-])v?\d+(?:\.\d+)+(?![\w.]*\w)|(?<![\w.])v\d+\b")
_IDENT = re.compile(r"(?<![\w.-])[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)+(?![\w-])")
_CAMEL = re.compile(r"\b(?:[A-Z]+[a-z0-9]+[A-Z][A-Za-z0-9]*|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z]*[0-9]*)\b")
_NAME = re.compile(r"\b[A-Z][\w'-]*(?:\s+(?:of|de|von|van|the)?\s*[A-Z][\w'-]*)*")
_NUMBER = re.compile(r"(?<![\w.])\d{2,}(?![\w.]*\w)")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def stem(word: str) -> str:
    """A light stem: one suffix off, a doubled final consonant and a final 'e' dropped."""
    for suffix in _SUFFIXES:
        if suffix == "s" and word.endswith(("ss", "us", "is")):
            continue  # class, status, analysis
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in _KEEP_DOUBLE and word[-1] not in "aeiou":
        word = word[:-1]
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


# Chinese, Japanese and Korean: no spaces between words, so a run of these characters gives its
# character bigrams (a lone character counts alone), the usual dependency-free index for CJK
# text; bigrams holding a function character (的, 了, は, 이 ...) say nothing and are left out.
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")
_CJK_FUNCTION = frozenset(
    "的了是在也就都而及与與着著或我你他她它们們这這那有不个個为為以之于於吗嗎呢吧啊把被从從到对對很还還让讓给給"
    "のはがをにでともへやかなだですますしたいるこそあ"
    "이가은는을를에의도로와과하다고서"
)


def cjk_terms(text: str) -> set[str]:
    """Character bigrams of each run of Chinese, Japanese or Korean characters (a lone character alone)."""
    out = set()
    for run in _CJK_RUN.findall(text):
        if len(run) == 1:
            if run not in _CJK_FUNCTION:
                out.add(run)
            continue
        for i in range(len(run) - 1):
            pair = run[i:i + 2]
            if pair[0] not in _CJK_FUNCTION and pair[1] not in _CJK_FUNCTION:
                out.add(pair)
    return out


def latin_share(text: str) -> float:
    """Share of the text's letters in Latin script: how far an English model can read it (1.0 without letters)."""
    if text.isascii():
        return 1.0  # every letter is Latin (most texts: no loop over their characters)
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 1.0
    return sum(1 for ch in letters if ch.isascii() or "\u00c0" <= ch <= "\u024f") / len(letters)


def key_terms(text: str) -> set[str]:
    """Stemmed content words of the text, stop words and words under three letters removed;
    CJK text gives character bigrams."""
    out = cjk_terms(text)
    for word in _WORD.findall(text.lower()):
        word = word.split("'")[0]
        if len(word) >= 3 and word not in STOP_WORDS:
            word = stem(word)
            if word not in STOP_WORDS:
                out.add(word)
    return out


def _names(text: str) -> set[str]:
    """Multi-word proper names (capitalised runs), lower-cased; lone words are left to key terms."""
    out = set()
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        while words and words[0].lower() in STOP_WORDS:
            words = words[1:]
        while words and words[-1].lower() in STOP_WORDS:
            words = words[:-1]
        if len(words) >= 2:
            out.add(" ".join(words).lower().strip("'-"))
    return out


def entity_terms(text: str, *, last_use: bool = False) -> tuple[frozenset[str], str]:
    """Identifiers and names in the text, lower-cased, and the text left once they are cut out.

    Remembered for short texts: a run finds each memory's terms (with_terms), then its
    classifier evidence (features.named_terms) from the same texts, and the second pass cost
    ~0.1 ms a memory. The second pass says `last_use` and takes the entry out, so what a run
    remembered is let go once a namespace's evidence is made (held through the score stage as
    an LRU cache, the entries of 100k memories raised the scoring's peak by ~70 MB). When full,
    the oldest entry goes first: one a run never took (a namespace it did not score again).
    Only texts up to _REMEMBERED_CHARS: an entry holds the text and its rest, so a long
    document is scanned twice instead of held."""
    if len(text) > _REMEMBERED_CHARS:
        return _entity_terms(text)
    found = _REMEMBERED.pop(text, None) if last_use else _REMEMBERED.get(text)
    if found is None:
        found = _entity_terms(text)
        if not last_use:
            if len(_REMEMBERED) >= _REMEMBERED_ENTRIES:
                try:
                    del _REMEMBERED[next(iter(_REMEMBERED))]
                except (RuntimeError, StopIteration, KeyError):  # another thread changed it meanwhile
                    pass
            _REMEMBERED[text] = found
    return found


def taken_entity_terms(texts: Iterable[str]) -> dict[str, tuple[frozenset[str], str]]:
    """What entity_terms remembers of these texts, taken out: for a worker process that makes
    their evidence (features.link_features), which hands it to remember_entity_terms there."""
    return {text: found for text in texts if (found := _REMEMBERED.pop(text, None)) is not None}


def remember_entity_terms(found: Mapping[str, tuple[frozenset[str], str]]) -> None:
    _REMEMBERED.update(found)


_REMEMBERED_CHARS = 512  # with 131,072 entries, ~150 MB at most; ~60 MB for 100k chat-sized texts
_REMEMBERED_ENTRIES = 1 << 17
# text -> _entity_terms(text), from with_terms until the classifier's evidence takes it (dict
# operations are atomic under the GIL: score tasks running in threads share it safely)
_REMEMBERED: dict[str, tuple[frozenset[str], str]] = {}


def _entity_terms(text: str) -> tuple[frozenset[str], str]:
    out = set()
    rest = text
    for pattern in (_URL, _TAG, _PATH, _IDENT, _VERSION):
        for match in pattern.finditer(rest):
            out.add(match.group(0).rstrip(".,;:!?)").strip(".-_").lower())
        rest = pattern.sub(" ", rest)
    for pattern in (_CAMEL, _NUMBER):
        out.update(match.group(0).lower() for match in pattern.finditer(rest))
    out |= _names(rest)
    return frozenset(term for term in out if term and term not in STOP_WORDS), rest


def memory_terms(content: str, entities: list[str] | None = None) -> list[str]:
    """Sorted unique terms of one memory: extracted entities, key terms and provided entities."""
    found, rest = entity_terms(content)
    terms = set(found) | key_terms(rest)
    for entity in entities or ():
        entity = " ".join(entity.split()).lower()
        if entity.isalpha():
            entity = stem(entity)  # a one-word entity meets the key term it names ("tabs" -> "tab")
        if entity:
            terms.add(entity)
    return sorted(terms)


def with_terms(memories: pl.DataFrame, known: pl.DataFrame | None = None) -> pl.DataFrame:
    """The memories with a `terms: List(String)` column (sorted, unique).

    `known`: (content, entities, terms) rows found before (an incremental run passes the last
    snapshot's memories). A memory's terms depend on its content and entities alone, so one
    that matches a known row exactly takes its terms, and only the others are found again
    (every memory's, 7 s of a 100k run, when 50 were new)."""
    if known is None or known.height == 0 or memories.height == 0:
        return memories.with_columns(pl.Series("terms", _found_terms(memories), dtype=pl.List(pl.String)))
    known = (
        known.select("content", "entities", "terms")
        .cast({"content": pl.String, "entities": pl.List(pl.String), "terms": pl.List(pl.String)})
        .filter(pl.col("terms").is_not_null())
        .unique(["content", "entities"], keep="first")  # equal inputs have equal terms: one row each
    )
    found = memories.select("content", "entities").join(known, on=["content", "entities"], how="left", nulls_equal=True, maintain_order="left")
    missing = found.get_column("terms").is_null()
    terms = found.get_column("terms").to_list()
    if missing.any():
        for row, fresh in zip(np.flatnonzero(missing.to_numpy()), _found_terms(memories.filter(missing))):
            terms[row] = fresh
    return memories.with_columns(pl.Series("terms", terms, dtype=pl.List(pl.String)))


_PARALLEL_MIN_ROWS = 20_000  # below this, starting a worker costs more than it saves


def _found_terms(memories: pl.DataFrame) -> list[list[str]]:
    """Every memory's terms, split between this process and forked workers where there are
    many (transforms/forked.py; ~7 s at 100k on one core of two). The entity terms a worker
    found come back with its terms and are remembered here, where the classifier's evidence
    reads them again (entity_terms)."""
    contents, entities = memories["content"].to_list(), memories["entities"].to_list()
    bounds = forked.row_bounds(len(contents), forked.parts_for(len(contents), _PARALLEL_MIN_ROWS))
    calls = [(_terms_of, (contents[lo:hi], entities[lo:hi])) for lo, hi in bounds[:1]]
    calls += [(_terms_remembered, (contents[lo:hi], entities[lo:hi])) for lo, hi in bounds[1:]]
    done = forked.run_forked(calls)
    found = list(done[0])
    for terms, remembered in done[1:]:
        found.extend(terms)
        remember_entity_terms(remembered)
    return found


def _terms_of(contents: list[str], entities: list) -> list[list[str]]:
    return [memory_terms(content, given) for content, given in zip(contents, entities)]


def _terms_remembered(contents: list[str], entities: list) -> tuple[list[list[str]], dict]:
    return _terms_of(contents, entities), taken_entity_terms(contents)
