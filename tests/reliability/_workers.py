"""Worker processes for the concurrency tests, run as `python -m reliability._workers KIND ...`
with tests/ on sys.path: a reader that queries until told to stop, and a manual-link writer."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def reader(root: str, stop_file: str, out_file: str, expect: str) -> None:
    """Query the snapshot until stop_file exists; every answer must come from one complete
    snapshot: the expected row counts, and every link of a single run."""
    import duckdb

    from crosstier.core.catalog import Catalog
    from crosstier.retrieval.correlations import find_correlations

    expected = json.loads(expect)
    queries, errors, snapshots = 0, [], []
    while not Path(stop_file).exists() or queries == 0:
        try:
            # the fixed path, as a user opens it
            con = duckdb.connect(str(Path(root) / "correlations.duckdb"), read_only=True)
            try:
                memories = con.execute("select count(*) from memories").fetchone()[0]
                links, runs = con.execute("select count(*), count(distinct run_id) from relationships").fetchone()
                run_ids = {r[0] for r in con.execute("select run_id from runs").fetchall()}
                link_runs = {r[0] for r in con.execute("select distinct run_id from relationships").fetchall()}
            finally:
                con.close()
            if (memories, links, runs) != (expected["memories"], expected["relationships"], 1) or not link_runs <= run_ids:
                errors.append(f"incomplete snapshot: memories={memories} links={links} runs={runs} link_runs={link_runs} runs_table={run_ids}")
            if link_runs and (not snapshots or snapshots[-1] != min(link_runs)):
                snapshots.append(min(link_runs))
            queries += 1
            # through `current`, resolved once: the DuckDB file and the Parquet files of one run
            files = Catalog(Path(root)).current_snapshot()
            con = duckdb.connect(str(files.database), read_only=True)
            try:
                in_db = con.execute("select count(*), min(run_id) from relationships").fetchone()
                in_parquet = con.execute("select count(*), min(run_id) from read_parquet($p)", {"p": files.parquet_glob("relationships")}).fetchone()
                vectors = con.execute("select count(*) from read_parquet($p)", {"p": str(files.embeddings)}).fetchone()[0]
                memories = con.execute("select count(*) from memories").fetchone()[0]
            finally:
                con.close()
            if in_db != in_parquet or vectors != memories or in_db[1] not in (None, files.run_id):
                errors.append(f"mixed snapshot {files.run_id}: duckdb {in_db}, parquet {in_parquet}, vectors {vectors}, memories {memories}")
            queries += 1
            found = find_correlations("ep1", out=root)
            if not found:
                errors.append("find_correlations('ep1') returned nothing")
            queries += 1
        except Exception as exc:  # a reader error is what the test counts
            errors.append(f"{type(exc).__name__}: {exc}")
            queries += 1
        time.sleep(0.02)  # continuous, but leaves the runs under test some CPU
    Path(out_file).write_text(json.dumps({"queries": queries, "errors": errors[:20], "error_count": len(errors), "snapshots": snapshots}))


def writer(root: str, name: str, count: str, pairs_file: str | None = None) -> None:
    """Append `count` manual links through add_relationship, over the (source, target) pairs
    of pairs_file (a JSON list) in turn, or a few pairs of the tiny snapshot."""
    from crosstier.retrieval.manual import add_relationship

    pairs = json.loads(Path(pairs_file).read_text()) if pairs_file else [("ep1", "sem2"), ("sem3", "proc1"), ("orphan1", "ep2"), ("proc1", "sem3")]
    for n in range(int(count)):
        source, target = pairs[n % len(pairs)]
        add_relationship(source, target, "references", score=0.5, metadata={"writer": name, "n": n}, out=root)


if __name__ == "__main__":
    {"reader": reader, "writer": writer}[sys.argv[1]](*sys.argv[2:])
