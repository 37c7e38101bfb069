"""Isolation: `ctc sql` cannot write; no link crosses a namespace; a principal never sees a
memory it may not read through any read function (randomised over generated ACLs).

(The stores' bytes and rows being unchanged by extraction is checked in test_bad_input.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reliability.flowkit import PRINCIPALS, generated_records, hidden_from, query, sha256, snapshot_state, write_config
from reliability.stats import count
from crosstier.retrieval import (
    UnknownMemoryError,
    build_correlation_graph,
    discover_links,
    find_correlations,
    report,
    retrieve_with_expansion,
)

SEEDS = (11, 12)  # two generated ACL layouts, one warehouse each
WORDS = ["pgvector", "deploy", "billing", "tabs", "vault", "backup", "Python", "migration", "staging", "index"]


@pytest.fixture(scope="module")
def warehouses(tmp_path_factory, shared_embedding_cache):
    """Per seed: generated multi-namespace records with random ACLs and refs, and one flow run."""
    from crosstier.flows.correlate import correlate

    built = {}
    os.environ["EMBED_CACHE_DIR"] = str(shared_embedding_cache)
    try:
        for seed in SEEDS:
            folder = tmp_path_factory.mktemp(f"isolation-{seed}")
            records = generated_records(seed)
            config = write_config(folder / "stores", {"memories": records})
            summary = correlate(config_path=str(config), out=str(folder / "wh"), full=True)
            assert summary["status"] == "published" and summary["memories"] == len(records)
            built[seed] = (folder / "wh", records)
    finally:
        os.environ.pop("EMBED_CACHE_DIR", None)
    return built


# ---------------------------------------------------------------- ctc sql is read-only

WRITES = {
    "INSERT": "INSERT INTO memories SELECT * FROM memories LIMIT 1",
    "DELETE": "DELETE FROM relationships",
    "UPDATE": "UPDATE relationships SET score = 0",
    "CREATE": "CREATE TABLE pwned AS SELECT 1 AS x",
    "DROP": "DROP TABLE relationships",
    "ATTACH new file": "ATTACH '{scratch}/new.duckdb' AS x",
}
# Writes that land outside the snapshot file, still writes `ctc sql` must refuse.
ESCAPES = {
    "COPY TO": "COPY memories TO '{scratch}/leak.csv'",
    "ATTACH other file read-write": "ATTACH '{scratch}/other.duckdb' AS o (READ_WRITE); INSERT INTO o.t VALUES (1)",
}
def ctc_sql(out: Path, text: str, *extra: str) -> subprocess.CompletedProcess:
    ctc = Path(sys.executable).with_name("ctc")
    return subprocess.run([str(ctc), "sql", "--out", str(out), *extra, text], capture_output=True, text=True, timeout=120)


def _sql_case(warehouses, tmp_path, statement: str, principal: str | None):
    import duckdb

    out = warehouses[SEEDS[0]][0]
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    other = duckdb.connect(str(scratch / "other.duckdb"))
    other.execute("create table t (x int)")
    other.close()
    before = snapshot_state(out), sorted(p.name for p in out.rglob("*")), sha256(scratch / "other.duckdb")
    done = ctc_sql(out, statement.format(scratch=scratch), *(["--as", principal] if principal else []))
    count(inputs_tried=1)
    after = snapshot_state(out), sorted(p.name for p in out.rglob("*")), sha256(scratch / "other.duckdb")
    assert done.returncode != 0, f"ctc sql accepted a write: {statement!r}: {done.stdout[-500:]}"
    assert after == before, "the warehouse or another database changed"
    assert sorted(p.name for p in scratch.iterdir()) == ["other.duckdb"], "ctc sql wrote a file"


@pytest.mark.parametrize("principal", [None, "alice"])
@pytest.mark.parametrize("what", list(WRITES))
def test_ctc_sql_cannot_write(warehouses, tmp_path, what, principal):
    _sql_case(warehouses, tmp_path, WRITES[what], principal)


@pytest.mark.parametrize("principal", [None, "alice"])
@pytest.mark.parametrize("what", list(ESCAPES))
def test_ctc_sql_cannot_write_other_files(warehouses, tmp_path, what, principal):
    _sql_case(warehouses, tmp_path, ESCAPES[what], principal)


@pytest.mark.parametrize("principal", [None, "alice"])
def test_ctc_sql_cannot_read_other_files(warehouses, principal):
    out = warehouses[SEEDS[0]][0]
    done = ctc_sql(out, "select * from read_csv('/etc/passwd')", *(["--as", principal] if principal else []))
    assert done.returncode != 0 and "disabled by config" in done.stderr


def test_ctc_sql_reads(warehouses):
    out, records = warehouses[SEEDS[0]]
    done = ctc_sql(out, "select count(*) as n from memories", "--json")
    assert done.returncode == 0, done.stderr
    assert str(len(records)) in done.stdout


# ---------------------------------------------------------------- no link crosses a namespace

CROSSING = """
select r.source_id, r.target_id, r.namespace, s.namespace, t.namespace
from relationships r join memories s on s.id = r.source_id join memories t on t.id = r.target_id
where s.namespace <> t.namespace or r.namespace <> s.namespace
"""


def test_no_link_crosses_a_namespace_in_the_sample(sample_snapshot):
    assert query(sample_snapshot, "select count(*) from relationships") != [(0,)]
    assert query(sample_snapshot, CROSSING) == []
    assert query(sample_snapshot, "select count(*) from relationships r anti join memories m on m.id = r.source_id") == [(0,)]
    assert query(sample_snapshot, "select count(*) from relationships r anti join memories m on m.id = r.target_id") == [(0,)]


@pytest.mark.parametrize("seed", SEEDS)
def test_no_link_crosses_a_namespace_in_generated_stores(warehouses, seed):
    out, records = warehouses[seed]
    namespace = {r["id"]: r["namespace"] for r in records}
    crossing_refs = [(r["id"], ref) for r in records for ref in r.get("refs", []) if namespace[ref] != r["namespace"]]
    assert crossing_refs, "the generator made no cross-namespace ref to tempt the pipeline"
    count(inputs_tried=len(records))
    assert query(out, CROSSING) == []
    links = query(out, "select source_id, target_id, namespace from relationships")
    assert {ns for _, _, ns in links} == set(namespace.values()), "every namespace should have links (identical content in each)"
    assert all(namespace[a] == namespace[b] == ns for a, b, ns in links)
    # same-namespace explicit refs always yield a link
    pairs = {frozenset((a, b)) for a, b, _ in links}
    same_refs = {frozenset((r["id"], ref)) for r in records for ref in r.get("refs", []) if namespace[ref] == r["namespace"]}
    assert same_refs <= pairs


# ---------------------------------------------------------------- a principal never sees a hidden memory


def _ids_in(value) -> set[str]:
    """Every string anywhere in a nested result."""
    found: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            found |= _ids_in(k) | _ids_in(v)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            found |= _ids_in(v)
    elif isinstance(value, str):
        found.add(value)
    return found


def _assert_hidden_absent(result, hidden: set[str], contents: dict[str, str], where: str) -> None:
    text = repr(result)
    leaked = sorted(i for i in hidden if i in text)
    assert not leaked, f"{where}: hidden ids {leaked} in {text[:1500]}"
    leaked_text = sorted(i for i in contents if contents[i] in _ids_in(result) or (isinstance(result, str) and contents[i] in result))
    assert not leaked_text, f"{where}: content of hidden {leaked_text}"


def _visible_link_count(out: Path, memory_id: str, hidden: set[str]) -> int:
    rows = query(out, f"select source_id, target_id from relationships where source_id = '{memory_id}' or target_id = '{memory_id}'")
    return sum(1 for a, b in rows if (b if a == memory_id else a) not in hidden)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.sampled_from(SEEDS), principal=st.sampled_from(PRINCIPALS), pick=st.integers(0, 10**6),
       words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3), depth=st.integers(1, 3))
def test_a_principal_never_sees_a_hidden_memory(warehouses, seed, principal, pick, words, depth):
    out, records = warehouses[seed]
    hidden = hidden_from(records, principal)
    visible = [r for r in records if r["id"] not in hidden]
    seen_texts = {r["content"] for r in visible}  # the same wording recurs across namespaces
    contents = {r["id"]: r["content"] for r in records if r["id"] in hidden and r["content"] not in seen_texts}
    assert hidden and visible, "the generated ACLs should hide something from every principal"
    queries = 0

    # a hidden memory cannot be asked about at all
    secret = sorted(hidden)[pick % len(hidden)]
    for call in (lambda: find_correlations(secret, principal=principal, out=out),
                 lambda: build_correlation_graph([secret], principal=principal, out=out),
                 lambda: report(secret, principal=principal, out=out)):
        with pytest.raises(UnknownMemoryError) as refused:
            call()
        queries += 1
        assert contents.get(secret, secret + "-") not in str(refused.value)

    memory = visible[pick % len(visible)]
    mid, namespace = memory["id"], memory["namespace"]
    found = find_correlations(mid, principal=principal, out=out, max_results=1000)
    _assert_hidden_absent(found, hidden, contents, f"find_correlations({mid})")
    assert found["total_found"] == _visible_link_count(out, mid, hidden), "total_found counts links to hidden memories"
    graph = build_correlation_graph([mid], principal=principal, max_depth=depth, out=out)
    _assert_hidden_absent(graph, hidden, contents, f"build_correlation_graph({mid})")
    assert all(n["namespace"] == namespace for n in graph["nodes"])
    text = report(mid, principal=principal, max_depth=depth, out=out)
    _assert_hidden_absent(text, hidden, contents, f"report({mid})")
    phrase = " ".join(words)
    hits = retrieve_with_expansion(phrase, principal=principal, namespace=namespace, top_k=8, expand=5, out=out)
    _assert_hidden_absent(hits, hidden, contents, f"retrieve_with_expansion({phrase!r})")
    new = discover_links(f"{memory['content']} and {phrase} (see {secret})", tier="episodic", refs=[mid], principal=principal, namespace=namespace, out=out)
    _assert_hidden_absent(new, hidden, contents, "discover_links")
    queries += 5
    count(principal_checks=1, principal_queries=queries)
