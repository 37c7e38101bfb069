"""`ctc watch` as a process: it catches up, says `watching`, links appended memories within
seconds, loses and duplicates nothing across a SIGKILL, and stops cleanly on SIGTERM. And
the writer lock: a batch run waits while another writer holds the warehouse."""

from __future__ import annotations

import importlib.util
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.writer_lock import writer_lock
from live_helpers import config_file, memory, view_memory_ids, view_rows, write_lines

pytest.importorskip("prefect")

_spec = importlib.util.spec_from_file_location("bench_live", Path(__file__).parents[2] / "bench" / "live.py")
bench_live = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_live)


class Watcher:
    """One `ctc watch` process in its own session, its output read line by line."""

    def __init__(self, config: Path, log: Path, **env_extra: str):
        env = {**os.environ, "CTC_FAULT_STAGE": "", **env_extra}
        env.pop("PREFECT_API_URL", None)
        self.log = open(log, "a", encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "crosstier.cli", "watch", "--config", str(config)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.log.write(line)
            self.log.flush()
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if text in self.lines.get(timeout=0.5):
                    return
            except queue.Empty:
                assert self.process.poll() is None, f"the watcher exited with {self.process.returncode}"
        pytest.fail(f"no line with {text!r} in {timeout}s")

    def kill_group(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


def visible_within(out: Path, memory_id: str, timeout: float) -> float:
    """Seconds until a reader sees memory_id (fails after timeout)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            if memory_id in view_memory_ids(out):
                return time.monotonic() - start
        except Exception:  # noqa: BLE001 - no snapshot yet
            pass
        time.sleep(0.1)
    pytest.fail(f"{memory_id} not visible within {timeout}s")


@pytest.mark.timeout(600)
def test_watcher_links_appends_survives_sigkill_and_stops_on_sigterm(tmp_path):
    from crosstier.flows.correlate import correlate

    store = tmp_path / "notes.jsonl"
    write_lines(store, [memory(i) for i in range(6)], "w")
    config = config_file(tmp_path, store, max_links=2)
    out = tmp_path / "warehouse"
    watcher = Watcher(config, tmp_path / "watch.log")
    try:
        write_lines(store, [memory(6)])  # while it catches up: read then, or on its first tick
        watcher.wait_for("watching", 300)
        assert "m006" in view_memory_ids(out)  # `watching` is said once what came before is published
        write_lines(store, [memory(i) for i in range(7, 9)])
        visible_within(out, "m008", 180)

        os.kill(watcher.process.pid, signal.SIGKILL)  # the watcher alone: its Prefect server follows it
        watcher.process.wait(timeout=30)
        write_lines(store, [memory(i) for i in range(9, 11)])  # written while no watcher runs

        watcher = Watcher(config, tmp_path / "watch.log", PREFECT_LOGGING_LEVEL="INFO")  # its micro-batch lines, below
        watcher.wait_for("watching", 300)
        assert {"m009", "m010"} <= set(view_memory_ids(out))  # the catch-up read them
        write_lines(store, [memory(11, topic=0, noise=0.0)])
        visible_within(out, "m011", 180)

        ids = view_memory_ids(out)
        assert ids == sorted(set(ids)) == [f"m{i:03d}" for i in range(12)]  # nothing lost, nothing twice
        assert correlate(config_path=str(config), out=str(tmp_path / "batch"), full=True)["status"] == "published"
        assert view_rows(out) == view_rows(tmp_path / "batch")

        watcher.process.send_signal(signal.SIGTERM)
        assert watcher.process.wait(timeout=120) == 0
        watcher.wait_for("stopped after", 5)

        # each micro-batch logged its stage seconds, in the form bench/live.py reads them
        batches = bench_live.batch_stages((tmp_path / "watch.log").read_text(encoding="utf-8"))
        assert sum(b["upserted"] for b in batches) >= 1  # m011 came in a micro-batch of the second watcher
        assert all(min(b[stage] for stage in bench_live.STAGES) >= 0 and b["seconds"] >= b["link"] for b in batches)
    finally:
        watcher.kill_group()


@pytest.mark.timeout(300)
class Said(logging.Handler):
    """The messages one logger emitted (Prefect reconfigures the root logger, so not caplog)."""

    def __init__(self, name: str):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.logger = logging.getLogger(name)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> "Said":
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        self.logger.removeHandler(self)

    @property
    def text(self) -> str:
        return "\n".join(self.messages)


def test_a_batch_run_waits_for_the_writer_lock(tmp_path):
    from crosstier.flows.correlate import correlate

    store = tmp_path / "notes.jsonl"
    write_lines(store, [memory(i) for i in range(4)], "w")
    config = config_file(tmp_path, store)
    out = tmp_path / "warehouse"
    result: dict = {}
    with Said("crosstier.core.writer_lock") as said, writer_lock(out):
        run = threading.Thread(target=lambda: result.update(correlate(config_path=str(config))))
        run.start()
        deadline = time.monotonic() + 120
        while "waiting for the writer lock" not in said.text and run.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "another run or `ctc watch` is publishing" in said.text, "the run never said it waits"
        time.sleep(1)
        assert run.is_alive(), "the run finished while another writer held the lock"
        assert Catalog(out).current_snapshot() is None
    run.join(timeout=240)
    assert result.get("status") == "published"
    assert Catalog(out).current_snapshot() is not None


def test_the_watcher_asks_glibc_to_keep_freed_memory_for_its_next_micro_batch():
    """`ctc watch` tunes malloc once at start (large arrays from the heap, freed memory kept),
    so its per-batch vector matrices are not page-faulted in afresh; glibc must accept both
    values (mallopt returns 0 for a value it refuses)."""
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's; elsewhere the watcher leaves malloc as it is")
    # in a process of its own: the setting is process-wide and the test run should keep glibc's defaults
    code = "from crosstier.cli.cmd_watch import keep_freed_memory; raise SystemExit(0 if keep_freed_memory() is True else 1)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("given, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_watcher_lets_idle_model_threads_sleep_unless_the_user_chose(given, expected):
    """`ctc watch` sets OMP_WAIT_POLICY=PASSIVE before torch loads (spinning threads cost a
    burst 3.5x its embedding time beside one busy reader); a value the user set stays."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    code = "import os; from crosstier.cli.cmd_watch import yield_idle_threads; yield_idle_threads(); print(os.environ['OMP_WAIT_POLICY'])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == expected
