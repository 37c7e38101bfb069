"""The whole `ctc run --full` at scale, as a user runs it: a generated corpus with provided vectors,
the CLI in a subprocess, and its wall time, peak memory and seconds per stage.

    .venv/bin/python bench/scale.py --n 100000                      # one agent, one namespace
    .venv/bin/python bench/scale.py --n 1000000 --namespaces 1000   # many agents
    .venv/bin/python bench/scale.py --n 100000 --format jsonl       # the same corpus as a JSONL store
    .venv/bin/python bench/scale.py --n 100000 --min-score 0.45 --check-recall  # approximate vs exact search
    .venv/bin/python bench/scale.py --n 1000000 --search-only --check-recall --recall-sample 5000
    .venv/bin/python bench/scale.py --n 100000 --task-runner dask   # a local Dask cluster
    .venv/bin/python bench/scale.py --n 100000 --then-add 50        # + the incremental run after 50 new memories

The corpus (vectorised, so 1M rows take seconds): per namespace, sessions of 10 chat turns
every ~6 hours, then 2 facts drawn from turns (some citing their turn) and a procedure. 80
topics of 10 words each; a memory uses half its topic's words, plus the session's named
thing (recurring across ~3 sessions) and two common words. Vectors (provided in an
`embedding` column, so no model time is spent): unit(topic + 0.6 session + 0.8 noise), so
members of a topic sit at cosine ~0.5 and turns of a session ~0.7; a fact at ~0.9 to its turn.

Peak RSS is each process's high-water mark (/proc VmHWM, polled): the flow process (the
`ctc` command) and each process under it (Dask workers, Prefect's API server); the flow's
high-water mark at the end of each stage (from its report) shows which stage raised it.
--check-recall then runs the cosine range search of candidate search (transforms/link/neighbours.py)
both ways on the corpus's vectors, at the similarity floors of the run's scoring (0.75 when
the scoring searches nothing on similarity alone), and prints the share of the exact search's
pairs (every pair over the floor) that the approximate index finds, with both searches' seconds.
Last line: RESULT name=value ...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import COMMON, TECH  # noqa: E402

N_TOPICS = 80
TOPIC_WORDS = 10
TURNS = 10
PER_SESSION = TURNS + 3  # 10 turns, 2 facts, 1 procedure
DIM = 384
CHUNK_SESSIONS = 8_000  # ~100k rows generated and written at a time: memory stays bounded
TEMPLATES = (
    "Can we {c0} the {w0} {w1} {w2} for {name}? The {w3} {w4} looks {c1}.",
    "I {c0}ed the {w0} in {name} and the {w1} {w2} {w3} {w4} is {c1} now.",
    "The {w0} {w1} {c0} failed because the {w2} {w3} {w4} was {c1}.",
    "{name} needs {w0} {w1} and {w2} {w3} {w4} before the {c0} {c1}.",
)
FACT = "{name} keeps {w0} {w1} {w2} with {w3} {w4} for the {c0}."
PROCEDURE = "How to {c0} {w0} {w1}: run {name}, then {c1} the {w2} {w3} {w4}."


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def _texts(template: str, words: np.ndarray, common: np.ndarray, names: list[str], kinds: np.ndarray | None = None) -> list[str]:
    """One text per row of `words` (5 topic words), `common` (2 common words) and `names`."""
    out = []
    for i in range(len(words)):
        w = words[i]
        text = TEMPLATES[kinds[i]] if kinds is not None else template
        out.append(text.format(w0=w[0], w1=w[1], w2=w[2], w3=w[3], w4=w[4], c0=common[i, 0], c1=common[i, 1], name=names[i]))
    return out


def corpus_chunk(first: int, count: int, namespaces: int, seed: int) -> pa.Table:
    """Sessions first .. first+count-1 as one Arrow table: the rows a Parquet store holds."""
    topic_rng = np.random.default_rng(seed)
    tech = np.array(TECH)
    topics = np.stack([topic_rng.choice(tech, size=TOPIC_WORDS, replace=False) for _ in range(N_TOPICS)])
    topic_vecs = _unit(topic_rng.normal(size=(N_TOPICS, DIM)))
    rng = np.random.default_rng([seed, first])
    sessions = np.arange(first, first + count)
    namespace = sessions % namespaces
    local = sessions // namespaces  # the session's number within its namespace
    topic = rng.integers(N_TOPICS, size=count)
    session_vecs = _unit(rng.normal(size=(count, DIM)))

    rows = count * PER_SESSION
    s = np.repeat(np.arange(count), PER_SESSION)  # session of each row
    slot = np.tile(np.arange(PER_SESSION), count)  # 0..9 turns, 10..11 facts, 12 procedure
    # Half the topic's words per memory, drawn by sorting random keys per row.
    picks = np.argsort(rng.random((rows, TOPIC_WORDS)), axis=1)[:, :5]
    words = topics[topic[s][:, None], picks]
    common = np.array(COMMON)[rng.integers(len(COMMON), size=(rows, 2))]
    name_ids = local // 3  # a named thing recurs across ~3 sessions of its namespace
    names = [f"proj{namespace[i]}x{name_ids[i]}-svc" for i in s]

    turn = slot < TURNS
    fact = (slot >= TURNS) & (slot < TURNS + 2)
    source_turn = rng.integers(TURNS, size=rows)  # for a fact: the turn it was drawn from
    # A fact says what its source turn said (the same words): its vector sits near the turn's.
    words[fact] = words[np.flatnonzero(fact) - slot[fact] + source_turn[fact]]
    contents = np.empty(rows, dtype=object)
    contents[turn] = _texts("", words[turn], common[turn], [names[i] for i in np.flatnonzero(turn)], rng.integers(len(TEMPLATES), size=int(turn.sum())))
    contents[fact] = _texts(FACT, words[fact], common[fact], [names[i] for i in np.flatnonzero(fact)])
    proc = slot == PER_SESSION - 1
    contents[proc] = _texts(PROCEDURE, words[proc], common[proc], [names[i] for i in np.flatnonzero(proc)])

    noise = rng.normal(size=(rows, DIM)).astype(np.float32) / np.sqrt(DIM)
    vectors = _unit(topic_vecs[topic[s]] + 0.6 * session_vecs[s] + 0.8 * noise)
    fact_rows = np.flatnonzero(fact)
    vectors[fact_rows] = _unit(vectors[fact_rows - slot[fact_rows] + source_turn[fact_rows]] + 0.45 * noise[fact_rows])
    vectors[proc] = _unit(topic_vecs[topic[s[proc]]] + 0.8 * noise[proc])

    start = datetime(2024, 1, 1, 8, tzinfo=timezone.utc)
    session_start = np.datetime64(start.replace(tzinfo=None), "us") + (local * 6 * 3600 * 1_000_000).astype("timedelta64[us]")
    minutes = np.cumsum(rng.integers(1, 5, size=(count, PER_SESSION)), axis=1).ravel()
    stamps = session_start[s] + (minutes * 60_000_000).astype("timedelta64[us]")
    timed = turn | (fact & (rng.random(rows) < 0.7))
    prefix = np.array([f"n{k:04d}-s{j:07d}" for k, j in zip(namespace, local)], dtype=object)
    suffix = np.array([f"-t{k:02d}" for k in range(TURNS)] + ["-f0", "-f1", "-p"], dtype=object)
    ids = prefix[s] + suffix[slot]
    tiers = np.where(turn, "episodic", np.where(fact, "semantic", "procedural"))
    cites = fact & (rng.random(rows) < 0.3)
    refs = [[ids[i - slot[i] + source_turn[i]]] if cites[i] else [] for i in range(rows)]
    return pa.table({
        "id": pa.array(ids, pa.string()),
        "tier": pa.array(tiers, pa.string()),
        "content": pa.array(contents, pa.string()),
        "timestamp": pa.array(np.where(timed, stamps, np.datetime64("NaT")), pa.timestamp("us", tz="UTC")),
        "session_id": pa.array(np.where(turn, prefix[s], None), pa.string()),
        "namespace": pa.array([f"agent{k:04d}" for k in namespace[s]], pa.string()),
        "refs": pa.array(refs, pa.list_(pa.string())),
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM).cast(pa.list_(pa.float32())),
    })


def write_corpus(n: int, namespaces: int, seed: int, path: Path, fmt: str) -> int:
    """n memories (the last session cut short) written as one Parquet or JSONL store, chunk by chunk."""
    sessions = -(-n // PER_SESSION)
    written = 0
    writer = None
    with open(path, "wb") if fmt == "jsonl" else open(os.devnull, "wb") as handle:
        for first in range(0, sessions, CHUNK_SESSIONS):
            table = corpus_chunk(first, min(CHUNK_SESSIONS, sessions - first), namespaces, seed)
            table = table.slice(0, min(table.num_rows, n - written))
            written += table.num_rows
            if fmt == "parquet":
                writer = writer or pq.ParquetWriter(path, table.schema)
                writer.write_table(table)
            else:
                frame = pl.from_arrow(table).with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ"))
                frame.write_ndjson(handle)
    if writer:
        writer.close()
    return written


class PeakMemory:
    """High-water RSS (VmHWM) of a process and every process under it, polled from /proc."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.pid, self.every = pid, every
        self.peaks: dict[int, tuple[str, float]] = {}
        self.cpu: dict[int, float] = {}  # user + system seconds, the last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    @staticmethod
    def _children() -> dict[int, list[int]]:
        tree: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                tree.setdefault(ppid, []).append(int(entry))
        return tree

    def _poll(self) -> None:
        while not self._stop.is_set():
            tree = self._children()
            todo = [self.pid]
            while todo:
                pid = todo.pop()
                todo.extend(tree.get(pid, []))
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    self.cpu[pid] = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
                    status = Path(f"/proc/{pid}/status").read_text()
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                hwm = next((int(line.split()[1]) / 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0.0)
                seen_cmd, seen_hwm = self.peaks.get(pid, ("", 0.0))
                self.peaks[pid] = (cmd.strip() or seen_cmd, max(hwm, seen_hwm))  # an exiting process shows no command
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def role(pid: int, root: int, cmd: str) -> str:
    if pid == root:
        return "flow"
    if "distributed" in cmd or "dask" in cmd or "multiprocessing" in cmd:
        return "worker"
    if "uvicorn" in cmd or "prefect" in cmd:
        return "prefect_server"
    return "other"


def run_ctc(work: Path, task_runner: str, env: dict[str, str], log_name: str, full: bool = True) -> dict:
    """`ctc run --full` (or, `full` False, the incremental `ctc run` a schedule makes) in a
    subprocess: wall seconds, peak RSS per process, and the run's summary."""
    command = [str(Path(sys.executable).parent / "ctc"), "run", *(["--full"] if full else []), "--config", str(work / "correlator.toml")]
    if task_runner == "dask":
        command += ["--task-runner", "dask"]
    started = time.perf_counter()
    with open(work / log_name, "w") as log:
        process = subprocess.Popen(command, cwd=work, stdout=log, stderr=subprocess.STDOUT, env=env)
        memory = PeakMemory(process.pid)
        code = process.wait()
    wall = time.perf_counter() - started
    memory.stop()
    if code != 0:
        raise SystemExit(f"ctc run failed ({code}); see {work / log_name}:\n" + (work / log_name).read_text()[-3000:])
    runs = [json.loads(line) for line in (work / "warehouse" / "runs.jsonl").read_text().splitlines() if line.strip()]
    summary = runs[-1]
    # The run log is written before publishing ends; the CLI's summary lines have every stage.
    lines = (work / log_name).read_text().splitlines()
    seconds = _last_printed(lines, "seconds: ")
    if seconds is not None:
        stages, _, total = seconds.rpartition(" (total ")
        summary["stage_seconds"] = _per_stage(stages)
        summary["seconds"] = float(total.rstrip(")"))
    stage_peaks = _last_printed(lines, "peak memory MiB after each stage: ")
    if stage_peaks is not None:
        summary["stage_peak_mib"] = _per_stage(stage_peaks)
    peaks: dict[str, list[float]] = {}
    for pid, (cmd, mib) in sorted(memory.peaks.items()):
        peaks.setdefault(role(pid, process.pid, cmd), []).append(mib)
    return {"wall": wall, "peaks": peaks, "summary": summary, "flow_cpu": memory.cpu.get(process.pid, 0.0)}


def _last_printed(lines: list[str], prefix: str) -> str | None:
    """The rest of the last line that starts with prefix, if any."""
    found = [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]
    return found[-1] if found else None


def _per_stage(body: str) -> dict[str, float]:
    """"extract 1.20, terms 0.30" -> {"extract": 1.2, "terms": 0.3}, as `ctc run` prints per-stage figures."""
    return {k: float(v) for k, v in (part.rsplit(" ", 1) for part in body.split(", "))}


def search_recall(store: Path, fmt: str, min_score: float | None, sample: int, at_floor: float | None) -> dict:
    """The approximate cosine range search against the exact one, on the corpus's vectors, at the
    similarity floors of the run's scoring (a lowered --min-score gives floors <= 1): the share of
    the exact search's pairs it finds, and both searches' seconds. With `sample` < n, the exact
    search runs for that many queries only and recall counts the pairs with an end among them."""
    from dataclasses import replace

    from crosstier.core.config import ScoringConfig
    from crosstier.transforms.link.candidates import semantic_floor
    from crosstier.transforms.link.neighbours import approximate_pairs, exact_pairs

    frame = pl.read_parquet(store) if fmt == "parquet" else pl.read_ndjson(store)
    frame = frame.filter(pl.col("namespace") == frame["namespace"][0])  # one namespace is enough to measure
    if fmt == "jsonl":
        frame = frame.with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC"))
    scoring = ScoringConfig() if min_score is None else replace(ScoringConfig(), min_correlation_score=min_score)
    floor = semantic_floor(frame, scoring) if at_floor is None else np.full(frame.height, at_floor)
    if not (floor <= 1.0).any():
        floor = np.full(frame.height, 0.75)  # the defaults search nothing on similarity alone: measure at 0.75
    vectors = frame["embedding"].list.to_array(DIM).to_numpy().astype(np.float32)
    del frame
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    members = np.arange(len(vectors))
    queries = members if sample >= len(members) else np.sort(np.random.default_rng(0).choice(members, sample, replace=False))
    t = time.perf_counter()
    approximate = approximate_pairs(vectors, members, members, floor, scoring.ann_probes)
    approximate_s = time.perf_counter() - t
    t = time.perf_counter()
    exact = exact_pairs(vectors, members, queries, floor)
    exact_s = time.perf_counter() - t
    if len(queries) < len(members):
        in_sample = np.isin(approximate[:, 0], queries) | np.isin(approximate[:, 1], queries)
        approximate = approximate[in_sample]
    found = pl.DataFrame(approximate, schema=["a", "b"], orient="row").join(
        pl.DataFrame(exact, schema=["a", "b"], orient="row"), on=["a", "b"], how="semi").height
    recall = found / len(exact) if len(exact) else 1.0
    print(f"search recall ({len(members)} memories, {len(queries)} exact queries, floor {float(floor.min()):.3f}): approximate found "
          f"{found} of the exact {len(exact)} pairs ({recall:.4f}); approximate {approximate_s:.1f} s for all queries, "
          f"exact {exact_s:.1f} s for {len(queries)} queries (probes {scoring.ann_probes})")
    return {"ann_recall": round(recall, 4), "exact_pairs": len(exact), "recall_queries": len(queries),
            "exact_search_s": round(exact_s, 1), "ann_search_s": round(approximate_s, 1)}


def add_sessions(path: Path, fmt: str, n: int, count: int, namespaces: int, seed: int) -> int:
    """`count` more memories (new sessions after the corpus's last, on the same topics) added
    to the store, as agents write them between two scheduled runs; returns how many."""
    table = corpus_chunk(-(-n // PER_SESSION), -(-count // PER_SESSION), namespaces, seed).slice(0, count)
    if fmt == "parquet":
        tmp = path.with_name(f".{path.name}.tmp")
        pq.write_table(pa.concat_tables([pq.read_table(path), table]), tmp)
        os.replace(tmp, path)
    else:
        with open(path, "ab") as handle:
            pl.from_arrow(table).with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%dT%H:%M:%S%.6fZ")).write_ndjson(handle)
    return table.num_rows


def whole_run(work: Path, task_runner: str, env: dict[str, str], full: bool = True) -> dict:
    """`ctc run --full` (or the incremental `ctc run`) once: its figures for the RESULT line,
    printed as they come."""
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    run = run_ctc(work, task_runner, env, "run.log" if full else "incremental.log", full)
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    summary = run["summary"]
    stages = summary.get("stage_seconds", {})
    print(f"{'run' if full else 'incremental run'}: {run['wall']:.1f} s wall, {run['flow_cpu']:.1f} s CPU in the flow process, {summary['memories']} memories, {summary['rejects']} rejects, "
          f"{summary['pairs_scored']} pairs scored, {summary['relationships']} links")
    print("  stages: " + ", ".join(f"{k} {v:.2f}s" for k, v in stages.items()))
    if summary.get("stage_peak_mib"):
        print("  flow peak RSS after each stage (MiB): " + ", ".join(f"{k} {v:.0f}" for k, v in summary["stage_peak_mib"].items()))
    print("  peak RSS (MiB): " + ", ".join(f"{k} {', '.join(f'{v:.0f}' for v in vs)}" for k, vs in run["peaks"].items()))
    print(f"  load average before {' '.join(load_before)}, after {' '.join(load_after)} (2 shared cores: timings are noisy)", flush=True)
    result = {
        "wall_s": round(run["wall"], 2),
        "flow_cpu_s": round(run["flow_cpu"], 1),  # the flow process's CPU seconds: less noisy than wall on a shared machine
        "flow_peak_rss_mib": round(max(run["peaks"].get("flow", [0.0])), 0),
    }
    for i, mib in enumerate(run["peaks"].get("worker", [])):
        result[f"worker{i}_peak_rss_mib"] = round(mib, 0)
    result.update({f"{k}_s": round(v, 2) for k, v in stages.items()})
    result.update({f"{k}_peak_mib": round(v) for k, v in summary.get("stage_peak_mib", {}).items()})
    result["flow_total_s"] = round(summary.get("seconds", 0.0), 2)  # the flow's own time; wall adds Prefect's start
    result.update(links=summary["relationships"], pairs_scored=summary["pairs_scored"], rejects=summary["rejects"])
    if not full:
        result["changed"] = summary.get("changed", 0)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--namespaces", type=int, default=1)
    parser.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    parser.add_argument("--task-runner", choices=("default", "dask"), default="default")
    parser.add_argument("--check-recall", action="store_true", help="then measure the approximate cosine search against the exact one on the corpus")
    parser.add_argument("--min-score", type=float, default=None, help="MIN_CORRELATION_SCORE for the run (a lowered one turns on the similarity search)")
    parser.add_argument("--recall-sample", type=int, default=100_000, help="exact search for at most this many queries")
    parser.add_argument("--recall-floor", type=float, default=None, help="measure the search at this cosine floor instead of the scoring's")
    parser.add_argument("--search-only", action="store_true", help="skip the run: only the corpus and --check-recall")
    parser.add_argument("--then-add", type=int, default=0, metavar="K",
                        help="after the full run, add K memories to the store and time the incremental `ctc run` a schedule makes (incremental_* figures)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a new temp folder)")
    args = parser.parse_args()

    work = args.out or Path(tempfile.mkdtemp(prefix="ctc-bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / f"corpus.{args.format}"
    t = time.perf_counter()
    written = write_corpus(args.n, args.namespaces, args.seed, store, args.format)
    print(f"corpus: {written} memories in {args.namespaces} namespace(s), {store} ({store.stat().st_size / 2**20:.0f} MiB), {time.perf_counter() - t:.1f} s", flush=True)
    (work / "correlator.toml").write_text(
        f'[output]\ndir = "warehouse"\n[[stores]]\nname = "corpus"\nkind = "{args.format}"\npath = "{store.name}"\n'
    )
    env = {"PREFECT_LOGGING_LEVEL": "WARNING", **os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}  # INFO shows each block
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")  # a loaded machine starts the API slowly
    # One Prefect home for every bench run, as a user has one: its database is set up once, not per run.
    env.setdefault("PREFECT_HOME", str(Path(tempfile.gettempdir()) / "ctc-bench-prefect-home"))
    if args.min_score is not None:
        env["MIN_CORRELATION_SCORE"] = str(args.min_score)
    result = {
        "n": written, "namespaces": args.namespaces, "format": args.format, "task_runner": args.task_runner,
        "min_score": args.min_score if args.min_score is not None else "default",
    }
    if not args.search_only:
        result.update(whole_run(work, args.task_runner, env))
        if args.then_add:
            added = add_sessions(store, args.format, written, args.then_add, args.namespaces, args.seed)
            print(f"added {added} memories to {store}", flush=True)
            result.update({f"incremental_{k}": v for k, v in whole_run(work, args.task_runner, env, full=False).items()})
    if args.check_recall:
        result.update(search_recall(store, args.format, args.min_score, args.recall_sample, args.recall_floor))
    load_after = Path("/proc/loadavg").read_text().split()[:3]
    result["loadavg"] = load_after[0]
    command = f".venv/bin/python bench/scale.py --n {args.n} --namespaces {args.namespaces} --format {args.format}"
    command += (" --task-runner dask" if args.task_runner == "dask" else "") + (" --check-recall" if args.check_recall else "")
    command += f" --min-score {args.min_score}" if args.min_score is not None else ""
    command += f" --recall-floor {args.recall_floor}" if args.recall_floor is not None else ""
    command += (" --search-only" if args.search_only else "") + (f" --recall-sample {args.recall_sample}" if args.recall_sample != 100_000 else "")
    command += f" --then-add {args.then_add}" if args.then_add else ""
    print(f"reproduce: {command}")
    print("RESULT " + " ".join(f"{k}={v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
