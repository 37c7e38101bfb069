"""A deterministic agent-memory corpus of any size, with vectors, for benches and the oracle test.

    from bench.corpus import generate_corpus
    memories, embeddings = generate_corpus(10_000, seed=0)

Shaped like an agent's memory: sessions of short chat turns on one topic (a fixed topic
vocabulary), named things that recur across a few sessions and grow with N (projects,
people, file paths, versions), facts derived from turns (some with refs, some without a
timestamp), contradicting facts, procedures; ~10% in a second namespace. Sessions start
every ~6 hours, so memories per day and per session stay fixed as N grows. Vectors are
synthetic (topic + session + noise, unit norm): same-session turns ~0.6 cosine, same topic
~0.35, unrelated ~0, a fact ~0.85 to its source turn.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import polars as pl

from crosstier.transforms.schema import MEMORY_SCHEMA

TECH = (
    "postgres pgvector billing invoice rounding typescript deploy sentry latency backup vault stripe webhook "
    "rotation incident runbook migration schema index query cache worker queue retry timeout release hotfix "
    "dashboard export pdf csv secret kubernetes docker pipeline fixture flaky decimal tenant quota budget "
    "embedding model prompt token session cookie login oauth certificate dns proxy nginx redis kafka topic "
    "partition replica shard vacuum autovacuum bloat checkpoint wal snapshot restore drill alert pager oncall "
    "grafana prometheus metric trace span log retention archive bucket s3 lambda cron scheduler batch stream "
    "consumer producer payload schema contract api endpoint graphql rest grpc client server frontend backend "
    "react nextjs vite vitest jest eslint prettier ruff mypy pytest coverage lint format branch merge rebase "
    "review approval changelog semver tag artifact registry image container helm chart terraform module state "
    "drift plan apply secretmanager keyvault rotation audit compliance gdpr invoice ledger refund chargeback "
    "currency locale timezone calendar reminder notification email sms template render layout sidebar modal"
).split()
COMMON = (
    "check fix update error issue change build test look run add remove move rename broke slow fast failing "
    "working config setting value limit default version plan step note question answer idea problem result"
).split()
FILLERS = ("ok", "sounds good", "yes, do it", "thanks!", "hmm, not sure", "sure", "go ahead", "perfect, thanks")
FIRST = "Alice Maya Jonas Ravi Tom Priya Lena Omar Sofia Ken Ines Yusuf Mara Leo Nina Pablo".split()
LAST = "Novak Chen Weber Rao Hill Shah Berg Haddad Costa Ito Silva Demir Lund Moreau Park Ruiz".split()
SYLLABLES = "ka ro mi tel vex dor sun lin bar qua zep nor fi gal tur mes".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday".split()
N_TOPICS = 80
TOPIC_WORDS = 10


def _topics(rng: np.random.Generator) -> list[list[str]]:
    return [list(rng.choice(TECH, size=TOPIC_WORDS, replace=False)) for _ in range(N_TOPICS)]


def _entity(rng: np.random.Generator, k: int) -> str:
    """A named thing: a project, a service, a file path or a CamelCase tool, unique to k."""
    name = "".join(SYLLABLES[(k // len(SYLLABLES) ** i) % len(SYLLABLES)] for i in range(3)) + str(k % 97)
    kind = k % 4
    if kind == 0:
        return f"Project {name.capitalize()}"
    if kind == 1:
        return f"{name}-svc"
    if kind == 2:
        return f"src/{name}/handler.py"
    return name.capitalize() + "DB"


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def generate_corpus(
    n: int, *, seed: int = 0, turns_per_session: int = 10, dim: int = 384
) -> tuple[pl.DataFrame, np.ndarray]:
    """n memories (MEMORY_SCHEMA) and their unit vectors (n x dim, float32), the same for the same arguments."""
    rng = np.random.default_rng(seed)
    topics = _topics(rng)
    topic_vecs = _unit(rng.normal(size=(N_TOPICS, dim)))
    start = datetime(2024, 1, 1, 8, tzinfo=timezone.utc)
    rows: list[dict] = []
    vecs: list[np.ndarray] = []
    session = 0
    while len(rows) < n:
        namespace = "ops" if rng.random() < 0.1 else "default"
        topic = int(rng.integers(N_TOPICS))
        words = topics[topic]
        pool = max(8, session // 3)  # named things grow with the corpus and recur across ~3 sessions
        names = [_entity(rng, int(k)) for k in rng.integers(0, pool, size=2)]
        person = f"{FIRST[rng.integers(len(FIRST))]} {LAST[rng.integers(len(LAST))]}"
        version = f"{rng.integers(1, 5)}.{rng.integers(0, 20)}"
        session_vec = _unit(rng.normal(size=dim))
        t = start + timedelta(hours=6 * session, minutes=int(rng.integers(0, 120)))
        sid = f"s{session:06d}"
        turn_ids: list[str] = []
        turn_vecs: list[np.ndarray] = []
        for turn in range(turns_per_session):
            w = rng.choice(words, size=3, replace=False)
            c = rng.choice(COMMON, size=2, replace=False)
            kind = rng.random()
            if kind < 0.2:
                text = FILLERS[rng.integers(len(FILLERS))]
                vec = _unit(0.3 * session_vec + rng.normal(size=dim) / np.sqrt(dim) * 1.2)
            else:
                if kind < 0.45:
                    text = f"Can we {c[0]} the {w[0]} {w[1]} for {names[0]}? {person.split()[0]} saw it {c[1]}."
                elif kind < 0.65:
                    text = f"I {c[0]}ed the {w[0]} in {names[1]} and the {w[1]} {w[2]} is {c[1]} now."
                elif kind < 0.8:
                    text = f"The {w[0]} {w[1]} {c[0]} failed because the {w[2]} {c[1]} was wrong."
                else:
                    text = f"{person} wants {names[0]} on {w[0]} {version} by {WEEKDAYS[rng.integers(5)]}."
                vec = _unit(topic_vecs[topic] + 0.8 * session_vec + rng.normal(size=dim) / np.sqrt(dim) * 1.05)
            mem_id = f"{namespace}-{sid}-t{turn:02d}"
            t = t + timedelta(minutes=int(rng.integers(1, 5)))
            rows.append(dict(id=mem_id, tier="episodic", content=text, timestamp=t, session_id=sid,
                             namespace=namespace, refs=[]))
            vecs.append(vec)
            turn_ids.append(mem_id)
            turn_vecs.append(vec)
        for f in range(2):
            source = int(rng.integers(len(turn_ids)))
            w = rng.choice(words, size=2, replace=False)
            if f == 1 and rng.random() < 0.3:
                text = f"{person} no longer prefers {w[0]} for {names[0]}."
            elif rng.random() < 0.5:
                text = f"{person} prefers {w[0]} {w[1]} for {names[0]}."
            else:
                text = f"{names[0]} runs on {w[0].capitalize()} {version} with {w[1]}."
            rows.append(dict(
                id=f"{namespace}-{sid}-f{f}", tier="semantic", content=text,
                timestamp=t + timedelta(hours=1) if rng.random() < 0.7 else None,
                session_id=None, namespace=namespace,
                refs=[turn_ids[source]] if rng.random() < 0.3 else [],
            ))
            vecs.append(_unit(turn_vecs[source] + rng.normal(size=dim) / np.sqrt(dim) * 0.6))
        if rng.random() < 0.5:
            w = rng.choice(words, size=3, replace=False)
            rows.append(dict(
                id=f"{namespace}-{sid}-p", tier="procedural",
                content=f"How to {COMMON[rng.integers(len(COMMON))]} {w[0]} {w[1]}: run {names[1]}, then check the {w[2]}.",
                timestamp=None, session_id=None, namespace=namespace, refs=[],
            ))
            vecs.append(_unit(topic_vecs[topic] + rng.normal(size=dim) / np.sqrt(dim) * 1.0))
        session += 1
    rows = rows[:n]
    frame = pl.DataFrame(
        [{**{k: None for k in MEMORY_SCHEMA}, "store": "bench", **row} for row in rows], schema=MEMORY_SCHEMA
    )
    return frame, np.stack(vecs[:n]).astype(np.float32)
