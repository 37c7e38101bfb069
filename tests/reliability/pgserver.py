"""A PostgreSQL server for the tests: $CTC_TEST_PG_DSN (CI and `make test` set it), else a
throwaway cluster started once per session with scripts/pg-cluster.sh; tests skip, with the
reason, only when neither works. Each test gets a fresh database of its own."""

from __future__ import annotations

import atexit
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SCRIPT = REPO / "scripts" / "pg-cluster.sh"
_server: dict[str, str] = {}


def _stop(cluster_dir: str) -> None:
    subprocess.run(["bash", str(CLUSTER_SCRIPT), "stop"], env={**os.environ, "CTC_PG_DIR": cluster_dir}, capture_output=True, timeout=120)


def server_dsn() -> str:
    """The DSN of a running server (a superuser on it), or skip the calling test with why."""
    if os.environ.get("CTC_TEST_PG_DSN"):
        return os.environ["CTC_TEST_PG_DSN"]
    if "dsn" in _server:
        return _server["dsn"]
    if "error" in _server:
        pytest.skip(_server["error"])
    cluster_dir = tempfile.mkdtemp(prefix="ctc-pg-pytest.")
    try:
        done = subprocess.run(
            ["bash", str(CLUSTER_SCRIPT), "start"],
            env={**os.environ, "CTC_PG_DIR": cluster_dir},
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        done = None
        detail = str(exc)
    if done is None or done.returncode != 0:
        detail = detail if done is None else (done.stderr.strip().splitlines() or ["no output"])[-1]
        _stop(cluster_dir)
        _server["error"] = f"no PostgreSQL server: CTC_TEST_PG_DSN is unset and scripts/pg-cluster.sh could not start one ({detail})"
        pytest.skip(_server["error"])
    atexit.register(_stop, cluster_dir)
    _server["dsn"] = (Path(cluster_dir) / "dsn").read_text().strip()
    return _server["dsn"]


@contextmanager
def fresh_database(dsn: str, *, encoding: str = "UTF8") -> Iterator[str]:
    """A new, empty database on the server for one test; dropped afterwards. Yields its DSN."""
    name = f"ctc_test_{uuid.uuid4().hex[:12]}"
    options = f"encoding '{encoding}' template template0"
    if encoding == "SQL_ASCII":
        options += " lc_collate 'C' lc_ctype 'C'"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"create database {name} {options}")  # name and options are ours, not input
    try:
        yield make_conninfo(dsn, dbname=name)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"drop database if exists {name} with (force)")


def table_fingerprint(dsn: str, table: str) -> tuple[int, str]:
    """(row count, md5 of every row in key order): equal before and after means untouched."""
    with psycopg.connect(dsn) as conn:
        conn.execute("set client_encoding to 'UTF8'")  # only ASCII comes back (a count, a hex digest)
        count, digest = conn.execute(
            psycopg.sql.SQL("select count(*), md5(coalesce(string_agg(t::text, E'\\n' order by t::text), '')) from {} t").format(
                psycopg.sql.Identifier(*table.split("."))
            )
        ).fetchone()
    return count, digest
