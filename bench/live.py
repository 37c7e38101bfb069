"""The live path end to end: `ctc watch` over a snapshot of N memories, then appends at a
steady rate and in one burst; how soon a reader sees each appended memory.

The N base memories come from bench/corpus.py with their synthetic vectors as provided
embeddings (a Parquet store: no model time for the base); the appended ones are the
corpus's next memories as real text in a JSONL store, embedded by the model as they come.
A reader thread polls the Python API (one lookup of every pending id per poll, as
`find_correlations` opens the snapshot and its deltas); a few
appends are also polled through `ctc correlations ID` (a new process per poll, as a user's).

    .venv/bin/python bench/live.py --n 100000
    .venv/bin/python bench/live.py --n 10000 --rate 10 --seconds 20 --burst 500
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl  # noqa: E402

from bench.corpus import generate_corpus  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def record(row: dict) -> str:
    out = {k: v for k, v in row.items() if k != "embedding" and v is not None}
    if row.get("timestamp") is not None:
        out["timestamp"] = row["timestamp"].isoformat()
    return json.dumps(out)


def rss_mib(pid: int) -> float:
    """Resident memory of a process and its children (the watcher's Prefect server too)."""
    total = 0
    for status in [Path(f"/proc/{pid}/status")] + [Path(f"/proc/{c}/status") for c in children(pid)]:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


class Reader(threading.Thread):
    """Polls the Python API for every pending id; records when each became visible.

    One lookup per poll for all pending ids (the snapshot plus its deltas, as find_correlations
    opens it): calling find_correlations once per pending id made a 1000-memory burst cost the
    reader seconds per poll, so the reader, not the watcher, set the measured latency. Each id
    seen is then asked once through find_correlations whether it has links."""

    def __init__(self, out: Path, poll_s: float):
        super().__init__(daemon=True)
        self.out = out
        self.poll_s = poll_s
        self.pending: dict[str, float] = {}
        self.seen: dict[str, float] = {}
        self.linked: set[str] = set()
        self.unchecked: list[str] = []  # seen, not yet asked for links
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def add(self, memory_id: str, written: float) -> None:
        with self.lock:
            self.pending[memory_id] = written

    def run(self) -> None:
        from crosstier.retrieval import find_correlations
        from crosstier.retrieval.snapshot import memories_by_id, open_snapshot

        while not self.stop.is_set():
            with self.lock:
                pending = dict(self.pending)
            if pending:
                found = memories_by_id(open_snapshot(self.out), list(pending))
                now = time.monotonic()
                with self.lock:
                    for memory_id in found:
                        self.seen[memory_id] = now - pending[memory_id]
                        self.pending.pop(memory_id, None)
                self.unchecked.extend(found)
            elif self.unchecked:  # only while nothing is pending: the check must not delay a poll
                memory_id = self.unchecked.pop()
                if find_correlations(memory_id, out=self.out)["total_found"]:
                    self.linked.add(memory_id)
                continue
            time.sleep(self.poll_s)

    def drained(self, timeout: float = 30) -> None:
        """Wait until every seen id was asked for links."""
        deadline = time.monotonic() + timeout
        while self.unchecked and time.monotonic() < deadline:
            time.sleep(0.02)

    def wait_all(self, ids: list[str], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if all(i in self.seen for i in ids):
                    return True
            time.sleep(0.02)
        return False


def cli_latency(out: Path, memory_id: str, written: float, timeout: float = 60) -> float:
    """Seconds from the append until `ctc correlations ID` finds the memory."""
    deadline = written + timeout
    while time.monotonic() < deadline:
        done = subprocess.run([sys.executable, "-m", "crosstier.cli", "correlations", memory_id, "--out", str(out), "--json"], capture_output=True, text=True)
        if done.returncode == 0:
            return time.monotonic() - written
    return float("nan")


STAGES = ("read", "embed", "context", "link", "publish")
# the watcher's line per micro-batch (flows/watch.py): its memories upserted and its stage seconds
BATCH_LINE = re.compile(r"micro-batch \d+: .*?, (\d+) upserted, .* in ([\d.]+)s \(read ([\d.]+), embed ([\d.]+), context ([\d.]+), link ([\d.]+), publish ([\d.]+)\)")


def batch_stages(log_text: str) -> list[dict[str, float]]:
    """Each micro-batch the watcher logged: memories upserted, seconds, seconds per stage."""
    out = []
    for match in BATCH_LINE.finditer(log_text):
        upserted, seconds, *stages = match.groups()
        out.append({"upserted": int(upserted), "seconds": float(seconds), **dict(zip(STAGES, map(float, stages)))})
    return out


def stage_summary(batches: list[dict[str, float]], burst: int) -> str:
    """Median seconds per stage of the steady micro-batches, and the stages of the burst's."""
    steady = [b for b in batches if 0 < b["upserted"] < burst // 2]
    largest = max(batches, key=lambda b: b["upserted"], default=None)
    parts = [f"steady_batches={len(steady)}"]
    if steady:
        parts += [f"steady_{name}_s={percentile([b[name] for b in steady], 50):.3f}" for name in ("seconds", *STAGES)]
    if largest is not None and largest["upserted"] >= burst // 2:
        parts += [f"burst_batch_upserted={largest['upserted']}"] + [f"burst_{name}_s={largest[name]:.3f}" for name in ("seconds", *STAGES)]
    return " ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="memories in the snapshot")
    parser.add_argument("--rate", type=float, default=10.0, help="steady appends per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the steady phase lasts")
    parser.add_argument("--burst", type=int, default=1000, help="memories appended at once in the burst phase")
    parser.add_argument("--cli", type=int, default=5, help="appends also polled through `ctc correlations`")
    parser.add_argument("--poll-ms", type=float, default=50.0,
                        help="the reader's pause between polls: each costs ~6 ms of CPU at 100k (~15 ms with 1000 ids pending), "
                             "so a reader polling every 10 ms took a fifth of this 2-core machine from the watcher it measures; "
                             "a latency is seen up to one pause late")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--base-vectors", choices=("provided", "cache"), default="provided",
                        help="provided: the base store carries an embedding column; cache: it does not, and its vectors "
                             "sit in the warehouse's embedding cache, as for a user whose base the model embedded")
    args = parser.parse_args()

    steady = int(args.rate * args.seconds)
    extra = steady + args.burst + args.cli
    memories, vectors = generate_corpus(args.n + extra, seed=0)
    base = memories.head(args.n).with_columns(embedding=pl.Series(vectors[: args.n].tolist(), dtype=pl.List(pl.Float32)))
    appended = memories.slice(args.n).to_dicts()

    work = args.out or Path(tempfile.mkdtemp(prefix="ctc-bench-live-"))
    work.mkdir(parents=True, exist_ok=True)
    from crosstier.transforms.embed.cache import model_dir, write_shard

    # a rerun in --out must embed its appends again: the last run's are not left in the cache
    shutil.rmtree(model_dir(work / "warehouse" / "cache", "all-MiniLM-L6-v2"), ignore_errors=True)
    if args.base_vectors == "cache":
        # the shard a batch run leaves after embedding the base (the model's id, content hashes)
        from crosstier.transforms.embed.vectors import text_hash

        cached = base.select(pl.col("content").map_elements(text_hash, return_dtype=pl.String).alias("text_hash"), "embedding")
        cached = cached.unique("text_hash", keep="first", maintain_order=True).with_columns(pl.col("embedding").list.to_array(vectors.shape[1]))
        write_shard(work / "warehouse" / "cache", "all-MiniLM-L6-v2", cached)
        base = base.drop("embedding")
    base.write_parquet(work / "base.parquet")
    live_store = work / "live.jsonl"
    live_store.write_text("")
    config = work / "correlator.toml"
    config.write_text(
        '[output]\ndir = "warehouse"\n'
        '[[stores]]\nname = "base"\nkind = "parquet"\npath = "base.parquet"\n'
        '[[stores]]\nname = "live"\nkind = "jsonl"\npath = "live.jsonl"\n'
    )
    out = work / "warehouse"
    log = open(work / "watch.log", "w")
    started = time.monotonic()
    watcher = subprocess.Popen([sys.executable, "-m", "crosstier.cli", "watch", "--config", str(config)], stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in watcher.stdout], daemon=True).start()
    while True:
        line = lines.get(timeout=3600)
        if "watching" in line:
            break
    startup = time.monotonic() - started
    print(f"watcher ready after {startup:.1f}s (catch-up run over {args.n} memories, model loaded)", flush=True)

    reader = Reader(out, args.poll_ms / 1000)
    reader.start()
    rss = [rss_mib(watcher.pid)]
    try:
        with open(live_store, "a", encoding="utf-8") as handle:
            # steady: one memory every 1/rate seconds
            ids = []
            begin = time.monotonic()
            for i, row in enumerate(appended[:steady]):
                target = begin + i / args.rate
                time.sleep(max(0.0, target - time.monotonic()))
                handle.write(record(row) + "\n")
                handle.flush()
                reader.add(row["id"], time.monotonic())
                ids.append(row["id"])
                if i % 20 == 0:
                    rss.append(rss_mib(watcher.pid))
            reader.wait_all(ids, 120)
            latencies = [reader.seen[i] for i in ids if i in reader.seen]
            reader.drained()
            print(f"steady: {len(latencies)}/{len(ids)} visible, p50 {percentile(latencies, 50):.3f}s p99 {percentile(latencies, 99):.3f}s, linked {len(reader.linked & set(ids))}", flush=True)

            # through the command line
            cli = []
            for row in appended[steady : steady + args.cli]:
                handle.write(record(row) + "\n")
                handle.flush()
                cli.append(cli_latency(out, row["id"], time.monotonic()))
            print(f"ctc correlations: {', '.join(f'{c:.2f}s' for c in cli)}", flush=True)

            # burst: all at once, one write
            burst = appended[steady + args.cli :]
            written = time.monotonic()
            handle.write("".join(record(row) + "\n" for row in burst))
            handle.flush()
            for row in burst:
                reader.add(row["id"], written)
            burst_ids = [row["id"] for row in burst]
            reader.wait_all(burst_ids, 600)
            last = max(reader.seen.get(i, float("nan")) for i in burst_ids)
            rss.append(rss_mib(watcher.pid))
            print(f"burst: {len(burst_ids)} memories visible after {last:.2f}s", flush=True)
    finally:
        reader.stop.set()
        watcher.terminate()
        try:
            watcher.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(watcher.pid, 9)
        log.close()

    stages = stage_summary(batch_stages((work / "watch.log").read_text(errors="replace")), args.burst)
    print(f"watcher stages (median of the steady micro-batches, and the burst's largest): {stages}")
    load = open("/proc/loadavg").read().split()[:3]
    print(f"reproduce: .venv/bin/python bench/live.py --n {args.n} --rate {args.rate} --seconds {args.seconds} --burst {args.burst} --cli {args.cli} --poll-ms {args.poll_ms:g} --base-vectors {args.base_vectors}")
    print(
        "RESULT "
        f"n={args.n} base_vectors={args.base_vectors} poll_ms={args.poll_ms:g} startup_s={startup:.1f} appends={len(latencies)} "
        f"api_p50_s={percentile(latencies, 50):.3f} api_p99_s={percentile(latencies, 99):.3f} "
        f"cli_p50_s={percentile([c for c in cli if c == c], 50):.3f} "
        f"burst={len(burst_ids)} burst_per_s={len(burst_ids) / last:.1f} "
        f"watcher_rss_mib={max(rss):.0f} {stages} loadavg={'/'.join(load)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
