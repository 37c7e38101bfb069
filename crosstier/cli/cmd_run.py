"""`ctc run`: the correlate flow once, then its summary and where the outputs are."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import threading
from collections.abc import Iterator


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--full", action="store_true", help="rescore everything, ignoring the last snapshot")
    mode.add_argument("--incremental", action="store_true", help="only new, edited and deleted memories (the default when a snapshot exists)")
    parser.add_argument("--task-runner", choices=("default", "dask"), default="default", help="where mapped tasks run")
    parser.add_argument("--dask-address", help="scheduler address (tcp://host:port) of an existing Dask cluster; default: a local one")


# glibc mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_BYTES = 32 << 20


def mallopt(*settings: tuple[int, int]) -> bool:
    """glibc's mallopt(parameter, value) for each setting, in order; False where this is not
    glibc or it refused a value (the rest are then not set)."""
    import ctypes

    try:
        call = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return all(call(parameter, value) for parameter, value in settings)


def return_freed_memory() -> bool:
    """Fix glibc's mmap threshold at its usual ceiling (32 MiB) for this process, and in the
    environment for the processes it starts (a local Dask cluster's workers), unless the user
    set MALLOC_MMAP_THRESHOLD_ there. False where this is not glibc: nothing changes then.

    By default glibc raises the threshold each time a mapped block is freed, and the heap's trim
    threshold to twice it, so the few-MB numpy and polars buffers a run frees by the thousand
    from two threads stayed in the heap. Fixed, freed heap memory goes back: at 100k dense
    memories (`bench/scale.py --n 100000`) the whole run's peak 4,330 -> 3,511 MiB, its time
    unchanged (118.8 -> 114.1 s). A lower threshold maps more blocks and is slower (4 MiB: the
    score stage's search 56.8 -> 69.0 s). The watcher wants the opposite (cmd_watch.keep_freed_memory)."""
    if not sys.platform.startswith("linux"):
        return False
    chosen = os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(_MMAP_THRESHOLD_BYTES))
    try:
        threshold = int(chosen)
    except ValueError:  # the user's own value, which glibc read at start if it could
        return False
    return mallopt((M_MMAP_THRESHOLD, threshold))


def prefect_environment() -> None:
    """Prefect runs here without a server (its temporary local API) and sends no analytics."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO")
    # Prefect gives its temporary server 20 s to answer; a busy machine (a run beside other
    # work, a CI box) was seen to need more, and a failed start loses the whole run.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


def tie_prefect_server_to_this_process() -> None:
    """Prefect's temporary API server is a child process that outlives a run ended by a signal
    (SIGTERM from a scheduler, SIGKILL) and keeps running on its own. On Linux, ask the kernel
    to send it SIGTERM when the thread that started it dies; `ctc run` starts it from the main
    thread, which lives as long as the run."""
    import ctypes
    import signal
    import subprocess
    import sys
    import threading

    if not sys.platform.startswith("linux"):
        return
    from prefect.server.api import server

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1

    def die_with_parent() -> None:
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)

    original = server.SubprocessASGIServer._run_uvicorn_command

    def run_uvicorn_command(self):
        if threading.current_thread() is not threading.main_thread():
            return original(self)  # a thread that may end before the run: leave it as it is
        popen = subprocess.Popen
        subprocess.Popen = functools.partial(popen, preexec_fn=die_with_parent)
        try:
            return original(self)
        finally:
            subprocess.Popen = popen

    server.SubprocessASGIServer._run_uvicorn_command = run_uvicorn_command


def encodes_here(settings, runner: str) -> bool:
    """Whether this process may run the embedding model: the local task runner, and a store
    whose memories may come without vectors (anything but Parquet files that all hold the
    vector column)."""
    from crosstier.transforms.stores.extract import provides_vector_column

    return runner == "default" and not all(provides_vector_column(store) for store in settings.stores)


def warmed_imports(settings, runner: str, *, encoder: bool = True) -> threading.Thread:
    """A thread importing what the run will need while Prefect's temporary server starts
    (~5 s in which this process only waits on it): the flow's modules, and with `encoder` the
    embedding libraries when the model may run here (the local task runner, and a store whose
    memories may come without vectors). A cold run of the sample: 15.3 -> 12.2 s (README). The
    caller joins it before the flow starts, so no task imports a module while this thread holds
    its lock. Without a server to wait on, `encoder` is False: a run whose texts are all cached
    never imports them."""

    def imports() -> None:
        # an import that fails here fails again where it is used, and says why there
        with contextlib.suppress(Exception):
            import crosstier.flows.correlate  # noqa: F401
        with contextlib.suppress(Exception):
            if encoder and encodes_here(settings, runner):  # reads Parquet stores' schemas: done here, not before the server starts
                from crosstier.transforms.embed.encoders import import_backend_libraries

                import_backend_libraries(settings.embedding.backend, settings.embedding.device)

    thread = threading.Thread(target=imports, name="ctc-warm-imports", daemon=True)
    thread.start()
    return thread


def uses_temporary_server() -> bool:
    """Whether Prefect will start its temporary API server: no API URL set, and allowed to."""
    from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_ENABLED

    return not PREFECT_API_URL.value() and bool(PREFECT_SERVER_EPHEMERAL_ENABLED.value())


def started_temporary_server() -> str:
    """Start Prefect's temporary API server now, as the flow would on its first call; its URL."""
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the one instance the flow's client asks for: started once
    server.start()
    return server.api_url


@contextlib.contextmanager
def shared_with_local_workers(api_url: str | None, runner: str, address: str | None) -> Iterator[None]:
    """A local Dask cluster's worker processes report to this run's temporary server: they
    inherit PREFECT_API_URL from the environment when the cluster starts. Without it each
    worker started a temporary server of its own (~220 MiB and ~5 s each; 100k memories in
    100 namespaces on 2 workers: three servers) and the flow's server saw none of their task
    runs. Workers of an existing cluster (--dask-address) run elsewhere: left as they are."""
    if api_url is None or runner != "dask" or address:
        yield
        return
    before = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = api_url
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before


def with_task_runner(flow_fn, runner: str, address: str | None):
    if runner != "dask":
        return flow_fn
    from prefect_dask import DaskTaskRunner

    return flow_fn.with_options(task_runner=DaskTaskRunner(address=address) if address else DaskTaskRunner())


def main(args: argparse.Namespace) -> int:
    return_freed_memory()
    prefect_environment()
    from crosstier.cli.settings_arg import settings_from_args
    from crosstier.transforms.stores.extract import ExtractError
    from crosstier.transforms.publish.run_report import summary_lines

    settings = settings_from_args(args)  # validate before starting Prefect: config errors fail fast
    if not settings.enabled:
        print("correlator is disabled (CORRELATOR_ENABLED=false): nothing to do")
        return 0
    tie_prefect_server_to_this_process()
    temporary = uses_temporary_server()
    warming = warmed_imports(settings, args.task_runner, encoder=temporary)
    api_url = started_temporary_server() if temporary else None
    warming.join()
    from crosstier.flows.correlate import correlate

    flow_fn = with_task_runner(correlate, args.task_runner, args.dask_address)
    try:
        with shared_with_local_workers(api_url, args.task_runner, args.dask_address):
            summary = flow_fn(config_path=args.config, out=str(settings.output_dir), full=args.full)
    except ExtractError as exc:
        print(f"ctc: {exc}", file=sys.stderr)
        return 1
    print()
    for line in summary_lines(summary):
        print(line)
    for name, path in summary.get("outputs", {}).items():
        if path:
            print(f"{name}: {path}")
    return 0
