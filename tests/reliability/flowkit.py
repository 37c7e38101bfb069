"""Helpers for the reliability tests that run the real correlate flow: small generated JSONL
stores (several namespaces, ACLs, explicit refs), what a reader sees of a snapshot, and the
relationships table as a comparable frame."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

import duckdb
import polars as pl

from crosstier.core.catalog import Catalog

COMPARED = ["source_id", "target_id", "relationship_type", "score", "semantic", "co_occurrence", "temporal", "cross_reference", "reason", "origin", "namespace"]
PRINCIPALS = ("alice", "bob", "carol", "dave")
ACLS = (None, None, None, ["alice"], ["bob"], ["alice", "bob"], ["carol"], [])  # None: everyone; []: nobody but the trusted caller
TOPICS = [
    ("pgvector", "Set up pgvector 0.7.4 on search_staging with an HNSW index", "search-svc uses pgvector with HNSW indexes"),
    ("deploy", "Ran deploy.sh search-svc staging 1.4.0 after the review", "Deploys of search-svc go through deploy.sh"),
    ("tabs", "Maya said she prefers tabs for indentation in Python", "Maya prefers tabs for indentation"),
    ("billing", "Moved the billing API to Python 3.12 with Ravi", "The billing API runs on Python 3.12"),
    ("backup", "Took a pg_dump of billing before migration 0042", "Always pg_dump billing before a migration"),
    ("vault", "Rotated the vault tokens for the payments cluster", "Vault tokens for payments rotate quarterly"),
]


def write_config(folder: Path, stores: dict[str, list[dict]], out: str = "warehouse") -> Path:
    """JSONL stores (name -> records) and a correlator.toml over them; returns the config path."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in stores.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = folder / "correlator.toml"
    config.write_text(f'[output]\ndir = "{out}"\n' + "".join(f'[[stores]]\nname = "{n}"\nkind = "jsonl"\npath = "{n}.jsonl"\n' for n in stores))
    return config


def generated_records(seed: int, namespaces=("default", "ops", "team-b"), per_topic: int = 2) -> list[dict]:
    """Memories of the same topics in several namespaces (identical wording across namespaces,
    so only the namespace rule keeps them apart), random ACLs, and explicit refs both inside
    a namespace and across namespaces (which must never become a link). Ids are `m<n>x`, so
    no id is a substring of another."""
    rng = random.Random(seed)
    rows: list[dict] = []
    n = 0
    for ns in namespaces:
        for day, (key, episode, fact) in enumerate(TOPICS, start=2):
            for turn in range(per_topic):
                rows.append({"id": f"m{n:03d}x", "tier": "episodic", "namespace": ns, "content": f"{episode} (turn {turn + 1})",
                             "timestamp": f"2026-11-{day:02d}T09:{10 + turn:02d}:00Z", "session_id": f"{ns}-{key}"})
                n += 1
            rows.append({"id": f"m{n:03d}x", "tier": "semantic", "namespace": ns, "content": fact, "timestamp": f"2026-11-{day:02d}T18:00:00Z"})
            n += 1
            rows.append({"id": f"m{n:03d}x", "tier": "procedural", "namespace": ns, "content": f"How to handle {key}: {fact.lower()}, then check it"})
            n += 1
    for row in rows:
        acl = rng.choice(ACLS)
        if acl is not None:
            row["readers"] = acl
        same = [r["id"] for r in rows if r["namespace"] == row["namespace"] and r["id"] != row["id"]]
        other = [r["id"] for r in rows if r["namespace"] != row["namespace"]]
        refs = rng.sample(same, rng.choice((0, 0, 1, 2)))
        if rng.random() < 0.3:
            refs.append(rng.choice(other))  # a cross-namespace ref: no link may come of it
        if refs:
            row["refs"] = refs
    return rows


def hidden_from(records: list[dict], principal: str | None) -> set[str]:
    """Ids the principal may not read (none for the trusted caller)."""
    if principal is None:
        return set()
    return {r["id"] for r in records if r.get("readers") is not None and principal not in r["readers"]}


def relationships(out: Path) -> pl.DataFrame:
    con = duckdb.connect(str(Catalog(out).database), read_only=True)
    try:
        return pl.from_arrow(con.sql("select * from relationships").to_arrow_table()).select(COMPARED).sort(COMPARED[:3])
    finally:
        con.close()


def query(out: Path, text: str) -> list[tuple]:
    con = duckdb.connect(str(Catalog(out).database), read_only=True)
    try:
        return con.execute(text).fetchall()
    finally:
        con.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot_state(root: Path) -> dict:
    """What a reader sees, resolved through `current` once: the DuckDB file (bytes and
    tables), the Parquet files, the run record and where `current` points."""
    catalog = Catalog(root)
    files = catalog.current_snapshot()
    assert files is not None, f"no snapshot in {root}"
    con = duckdb.connect(str(files.database), read_only=True)
    try:
        tables = {name: con.execute(f"select * from {name} order by all").fetchall() for name in ("memories", "relationships", "runs")}
    finally:
        con.close()
    parquet = {p.name: sha256(p) for p in sorted(files.dir.glob("*.parquet"))}
    record = files.run_record.read_text() if files.run_record.is_file() else None
    return {"database": sha256(files.database), "tables": repr(tables), "parquet": parquet, "record": record, "link": os.readlink(catalog.current)}


def assert_one_whole_run(root: Path) -> str:
    """The snapshot a reader sees is one run's, whole: the DuckDB file, every Parquet table,
    the vectors and the run record all come from the run `current` names, and the fixed
    paths (correlations.duckdb, parquet/) lead to the same files. Returns its run id."""
    catalog = Catalog(root)
    files = catalog.current_snapshot()
    assert files is not None and catalog.current.is_symlink(), f"no current snapshot in {root}"
    run_id = files.run_id
    record = json.loads(files.run_record.read_text())
    assert record["run_id"] == run_id, (record, run_id)
    con = duckdb.connect(str(files.database), read_only=True)
    try:
        keys = {"memories": "id, content_hash", "relationships": "source_id, target_id, relationship_type, score, run_id", "rejects": "store, location, reason",
                "tier_distribution": "*", "tier_links": "*", "runs": "run_id, status"}
        for table, columns in keys.items():
            in_db = con.execute(f"select {columns} from {table} order by all").fetchall()
            in_parquet = con.execute(f"select {columns} from read_parquet($path) order by all", {"path": files.parquet_glob(table)}).fetchall()
            assert in_db == in_parquet, f"{table}: the DuckDB file and the Parquet copy differ"
        run_ids = {r[0] for r in con.execute("select distinct run_id from relationships").fetchall()}
        assert run_ids <= {run_id}, f"relationships of runs {run_ids} in snapshot {run_id}"
        assert (run_id,) in con.execute("select run_id from runs").fetchall(), f"run {run_id} is not in its own runs table"
        memory_ids = sorted(r[0] for r in con.execute("select id from memories").fetchall())
    finally:
        con.close()
    if files.embeddings.is_file():
        assert sorted(pl.read_parquet(files.embeddings).get_column("id").to_list()) == memory_ids, "vectors of another run"
    if catalog.database.is_symlink():
        assert catalog.database.resolve() == files.database.resolve()
        assert catalog.parquet_dir.resolve() == files.dir.resolve()
    return run_id
