"""Stores and comparisons for the live-path tests: memories with provided vectors (no model
time), a config with a small cap, and the relationships a reader sees."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

DIM = 384
COMPARED = ("source_id", "target_id", "relationship_type", "score", "semantic", "co_occurrence", "temporal", "cross_reference", "reason", "origin")
TOPICS = (
    "deploy the staging nginx proxy config",
    "postgres replica lag during nightly backup",
    "python typing rules for the billing service",
)

READERS = (None, ["alice"], None, ["bob"], ["alice", "bob"])
NAMES = ("alice", "bruno", "chen", "dara", "emeka", "farah", "goran", "hana", "ivo", "jun", "kofi", "lena", "mateo", "nika", "oskar", "priya")


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def memory(i: int, *, topic: int | None = None, session: str | None = None, text: str | None = None, seed: int = 0, noise: float = 0.03, hour: int | None = None) -> dict:
    """Memory i: on topic i % 3 unless given, with a vector near its topic's direction
    (the less noise, the closer to every other memory of the topic)."""
    topic = i % len(TOPICS) if topic is None else topic
    rng = np.random.default_rng(1000 * seed + i)
    base = np.zeros(DIM, np.float32)
    base[topic] = 1.0
    vector = unit(base + rng.normal(size=DIM).astype(np.float32) * noise)
    return {
        "id": f"m{i:03d}",
        "tier": "episodic" if i % 2 else "semantic",
        "content": text or f"{TOPICS[topic]}, said {NAMES[i % len(NAMES)]}",
        "timestamp": f"2024-05-01T{(i if hour is None else hour) % 24:02d}:00:00Z",
        "session_id": session,
        # who may read it: some memories are alice's or bob's only, the rest everyone's
        "readers": READERS[i % len(READERS)],
        "embedding": [round(float(x), 6) for x in vector],
    }


def write_lines(path: Path, records: list[dict], mode: str = "a") -> None:
    with open(path, mode, encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def config_file(folder: Path, store: Path, *, max_links: int = 2, min_score: float = 0.5) -> Path:
    config = folder / "correlator.toml"
    config.write_text(
        f'[output]\ndir = "warehouse"\n\n[[stores]]\nname = "notes"\nkind = "jsonl"\npath = "{store.as_posix()}"\n\n'
        f"[scoring]\nmin_correlation_score = {min_score}\nmax_links_per_memory = {max_links}\n",
        encoding="utf-8",
    )
    return config


def view_rows(out: Path) -> list[tuple]:
    """The relationships a reader of the warehouse sees (snapshot plus deltas), sorted, scores rounded."""
    from crosstier.retrieval.snapshot import close_all, open_snapshot

    close_all()
    snapshot = open_snapshot(out)
    rows = snapshot.query(f"select {', '.join(COMPARED)} from relationships")
    close_all()
    return sorted(tuple(round(v, 9) if isinstance(v, float) else v for v in (row[c] for c in COMPARED)) for row in rows)


def view_memory_ids(out: Path) -> list[str]:
    from crosstier.retrieval.snapshot import close_all, open_snapshot

    close_all()
    ids = sorted(row["id"] for row in open_snapshot(out).query("select id from memories"))
    close_all()
    return ids


def view_rejects(out: Path) -> list[tuple]:
    """The rejects a reader of the warehouse sees (store, location, raw, reason), sorted."""
    from crosstier.retrieval.snapshot import close_all, open_snapshot

    close_all()
    rows = open_snapshot(out).query("select store, location, raw, reason from rejects")
    close_all()
    return sorted(tuple(row.values()) for row in rows)


def _rounded(rows: list[tuple]) -> list[tuple]:
    return sorted(tuple(round(v, 9) if isinstance(v, float) else v for v in row) for row in rows)


VIEW_TABLES = {  # what view_read_paths compares of each table
    "tier_distribution": "select * from tier_distribution",
    "tier_links": "select * from tier_links",
    "memories": "select id, readers from memories",
    "relationships": "select source_id, target_id, relationship_type, score from relationships",
}


def view_read_paths(out: Path) -> dict[str, object]:
    """What the other read paths answer on the warehouse (snapshot plus deltas): the summary
    views, `ctc sql --as` each principal, and retrieval's vector search by each topic's
    direction, as the trusted caller and as each principal."""
    from crosstier.retrieval.adhoc import run_sql
    from crosstier.retrieval.retrieve import retrieve_with_expansion
    from crosstier.retrieval.snapshot import close_all

    close_all()
    seen: dict[str, object] = {}
    for principal in (None, "alice", "bob"):
        # one statement per principal, a JSON list per table: `--as` copies the principal's rows once per statement
        _, rows = run_sql(" union all ".join(f"select '{table}', to_json(list(x)) from ({query}) as x" for table, query in VIEW_TABLES.items()), out=out, principal=principal)
        for table, listed in rows:
            seen[f"{principal}:{table}"] = _rounded([tuple(r.values()) for r in json.loads(listed) or []])
        for topic in range(len(TOPICS)):
            direction = np.zeros(DIM, np.float32)
            direction[topic] = 1.0
            found = retrieve_with_expansion("topic", query_embedding=direction, top_k=4, expand=2, principal=principal, out=out)
            seen[f"{principal}:retrieve:{topic}"] = (
                [(hit["id"], round(hit["similarity"], 5)) for hit in found["primary"]],
                [(e["from_id"], e["target_id"], e["relationship_type"], round(e["score"], 9)) for e in found["expanded"]],
            )
    close_all()
    return seen


def view_vectors(out: Path) -> dict[str, np.ndarray]:
    """id -> the vector retrieval's search reads for it (snapshot plus deltas)."""
    from crosstier.retrieval.snapshot import close_all, open_snapshot
    from crosstier.retrieval.vectors import snapshot_vectors

    close_all()
    vectors = snapshot_vectors(open_snapshot(out))
    close_all()
    return {str(i): vectors.matrix[n] for n, i in enumerate(vectors.ids)}


def assert_same_vectors(live: dict[str, np.ndarray], batch: dict[str, np.ndarray]) -> None:
    assert sorted(live) == sorted(batch)
    worst = max((float(np.abs(live[i] - batch[i]).max()) for i in batch), default=0.0)
    assert worst < 1e-6, f"a live vector differs from the batch run's by {worst}"
