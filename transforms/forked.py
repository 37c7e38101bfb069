"""Plain-Python work over many rows, split between this process and forked worker processes.

A namespace's terms and classifier evidence are regular expressions per text: Python that
threads cannot run at once. Where there are many rows and CPUs, consecutive parts of the rows
run at once, this process taking the first. Forked, not spawned: "spawn" and "forkserver"
import the caller's `__main__` again, which ran a script without a main guard a second time;
a worker runs only the function it is given on the data it is sent, never the libraries
whose threads the process runs (polars, DuckDB, torch). Not from a daemonic process (a Dask
worker's), which may not start any: there the namespaces themselves run in parallel."""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

MAX_PARTS = 4
_log = logging.getLogger(__name__)


def parts_for(rows: int, min_rows: int) -> int:
    """How many parts `rows` rows are split into: 1 below `min_rows` (starting a worker costs
    more than it saves), in a daemonic process, or with one CPU; else up to the CPUs this
    process may use (at most MAX_PARTS), each part at least half of `min_rows`."""
    if rows < min_rows or multiprocessing.current_process().daemon:
        return 1
    return max(1, min(usable_cpus(), MAX_PARTS, rows // max(1, min_rows // 2)))


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, where the system says)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def row_bounds(rows: int, parts: int) -> list[tuple[int, int]]:
    """(start, stop) of each of `parts` consecutive parts of `rows` rows, as even as can be."""
    cuts = [rows * i // parts for i in range(parts + 1)]
    return list(zip(cuts[:-1], cuts[1:]))


def run_forked(calls: Sequence[tuple[Callable[..., Any], tuple]]) -> list[Any]:
    """[function(*args) for function, args in calls], the first here, the others in forked
    worker processes at the same time; results in the calls' order. Where a worker cannot be
    started or dies (killed for memory), its calls are made here instead: slower, not lost."""
    if len(calls) <= 1:
        return [function(*args) for function, args in calls]
    done: list[Any] = []
    try:
        with ProcessPoolExecutor(len(calls) - 1, mp_context=multiprocessing.get_context("fork")) as pool:
            later = [pool.submit(function, *args) for function, args in calls[1:]]
            done.append(calls[0][0](*calls[0][1]))
            done.extend(future.result() for future in later)
    except (BrokenProcessPool, OSError) as exc:
        _log.warning("worker processes failed (%s): the rest of the work is done in this process", exc)
        done.extend(function(*args) for function, args in calls[len(done):])
    return done
