"""The `watch` flow: the live path between batch runs (`ctc watch`).

Catch up as an incremental run does (the `correlate` flow, as a sub-flow), load its snapshot
and the model, then follow the stores: on each batch of file-system events and each idle
tick every store is asked whether it changed (transforms/stores/changes.py: file signatures,
SQLite's data_version, PostgreSQL's NOTIFY or cursor column); each micro-batch of changes is
linked against the loaded index (transforms/live_state.py) and published as a delta beside
the snapshot (transforms/publish/delta.py). Orchestration only.

Each micro-batch holds the warehouse's writer lock, as a batch run does for its whole run:
the two never publish at once. When a batch run switched `current` in between, the watcher
reloads from the new snapshot (which folded its deltas in) and reads the stores again whole,
so nothing written in between is missed.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import polars as pl
from prefect import flow, get_run_logger

from crosstier.core.catalog import Catalog, SnapshotFiles
from crosstier.core.config import Settings
from crosstier.core.writer_lock import writer_lock
from crosstier.flows.correlate import correlate, run_settings
from crosstier.transforms.embed import vectors as embed
from crosstier.transforms.live_state import Step, WatchState, advanced, checkpoint_delta, seeded
from crosstier.transforms.publish import delta as deltas
from crosstier.transforms.publish import snapshot as publish
from crosstier.transforms.stores.changes import StoreChanges

STOP = threading.Event()  # set by SIGTERM/SIGINT (the CLI) or a test: the watcher ends after its batch
IDLE_TICK_MS = 1000  # how often an idle watcher asks each store whether it changed (files, data_version, NOTIFY, cursor)
CHECKPOINT_EVERY = 16  # deltas: a reader reads at most this many besides the latest checkpoint
SNAPSHOT_TABLES = ("memories", "relationships", "embeddings", "fingerprints", "scored_links", "rejects")


def watched_paths(settings: Settings, catalog: Catalog) -> list[Path]:
    """Folders to follow: each file store's folder (a file replaced by a rename is seen),
    each markdown workspace, and the manual log's folder."""
    catalog.manual_dir.mkdir(parents=True, exist_ok=True)  # `ctc link` may add the log later
    paths = {catalog.manual_dir}
    for store in settings.stores:
        if store.kind in ("jsonl", "parquet", "sqlite") and store.path:
            pattern = Path(store.path)
            base = pattern.parent
            while any(ch in str(base) for ch in "*?["):
                base = base.parent
            paths.add(base)
        elif store.kind == "markdown" and store.path:
            paths.add(Path(store.path))
    return sorted(p.resolve() for p in paths if p.exists())


def snapshot_frames(files: SnapshotFiles) -> dict[str, pl.DataFrame]:
    frames = {name: publish.snapshot_table(files, name) for name in SNAPSHOT_TABLES}
    missing = [name for name, frame in frames.items() if frame is None]
    if missing:
        raise RuntimeError(f"snapshot {files.run_id} has no {', '.join(missing)}: run `ctc run --full` once")
    return frames


def vector_source(settings: Settings, cache_dir: Path):
    """Texts -> vectors through the embedding cache and the one loaded model."""
    config = settings.embedding
    encoder = embed.shared_encoder(config.model, device=config.device, backend=config.backend, precision=config.precision, cache_dir=cache_dir)
    encoder.load()  # now, not in the first micro-batch: the model stays loaded from here on

    def vectors_for(texts: pl.DataFrame) -> pl.DataFrame:
        return embed.embed_with_cache(texts, encoder, cache_dir, batch_size=config.batch_size)[0]

    return vectors_for


def published(files: SnapshotFiles, step: Step) -> Path | None:
    """Publish the step's delta into the snapshot's folder (nothing when nothing changed);
    every CHECKPOINT_EVERY-th one is a checkpoint of everything since the snapshot."""
    if step.delta.empty:
        return None
    seq = deltas.next_seq(files.dir)
    if seq % CHECKPOINT_EVERY:
        return deltas.publish_delta(files.dir, step.delta, seq)
    folder = deltas.publish_delta(files.dir, checkpoint_delta(step.state), seq, checkpoint=True)
    deltas.pruned_deltas(files.dir)
    return folder


def loaded_state(settings: Settings, catalog: Catalog, vectors_for) -> tuple[SnapshotFiles, WatchState, dict[str, Any]]:
    """Under the writer lock: the state over the current snapshot, its catch-up delta published."""
    files = catalog.current_snapshot()
    if files is None:
        raise RuntimeError(f"no snapshot in {catalog.root} to follow")
    deltas.drop_partial_deltas(files.dir)
    step = seeded(settings, files.run_id, snapshot_frames(files), catalog.manual_log, vectors_for)
    published(files, step)
    return files, step.state, step.stats


@flow(name="watch", log_prints=False)
def watch(config_path: str | None = None, out: str | None = None, debounce_ms: int = 30, max_batches: int | None = None) -> dict[str, Any]:
    """Follow the stores and publish a delta per micro-batch until STOP is set."""
    logger = get_run_logger()
    settings = run_settings(config_path, out)
    catalog = Catalog(settings.output_dir)
    correlate(config_path=config_path, out=out)  # catch up, and fold any deltas of a dead watcher in
    cache_dir = Path(settings.embedding.cache_dir) if settings.embedding.cache_dir else catalog.cache_dir
    vectors_for = vector_source(settings, cache_dir)
    stores = StoreChanges(settings.stores)
    try:
        with writer_lock(catalog.root):
            stores.mark()  # before the stores are read: a write during the read shows next tick
            files, state, stats = loaded_state(settings, catalog, vectors_for)
        logger.info("loaded snapshot %s: %s", files.run_id, stats)
        for name in stores.unfollowed():
            logger.warning("store %s is not followed live (a postgres store needs notify_channel or cursor_column): batch runs read it", name)
        return _followed(settings, catalog, stores, files, state, vectors_for, debounce_ms, max_batches)
    finally:
        stores.close()  # the LISTEN and poll connections, the SQLite connections


def _followed(settings: Settings, catalog: Catalog, stores: StoreChanges, files: SnapshotFiles, state: WatchState, vectors_for, debounce_ms: int, max_batches: int | None) -> dict[str, Any]:
    """The event loop: one micro-batch per tick on which a store or the manual log changed."""
    logger = get_run_logger()
    import watchfiles  # the file-system events (inotify on Linux), not a polling loop of ours

    paths = watched_paths(settings, catalog)
    manual_dir = str(catalog.manual_dir.resolve())
    batches, announced = 0, False
    # An idle tick yields no changes: the first one means the watches are in place, and each
    # asks every store whether it changed (transforms/stores/changes.py), so what was written
    # before that, whose event was missed, or that no file event tells of (a SQLite WAL
    # commit, a PostgreSQL row) is read within a tick.
    for changes in watchfiles.watch(*paths, stop_event=STOP, debounce=debounce_ms, step=10, rust_timeout=IDLE_TICK_MS, yield_on_timeout=True, raise_interrupt=False):
        changed = {str(Path(path)) for _change, path in changes}
        names = stores.changed(changed)
        manual_changed = any(path.startswith(manual_dir) for path in changed)
        if names or manual_changed:
            start = time.perf_counter()
            with writer_lock(catalog.root):
                current = catalog.current_snapshot()
                if current is None or current.run_id != files.run_id:
                    # a batch run published in between: it folded our deltas; follow its snapshot
                    stores.mark()
                    files, state, stats = loaded_state(settings, catalog, vectors_for)
                    logger.info("batch run %s published: reloaded (%s)", files.run_id, stats)
                    continue
                step = advanced(state, names, settings, catalog.manual_log, vectors_for)
                stepped = time.perf_counter()
                folder = published(files, step)
                state = step.state
            stores.read(names)
            stats = step.stats
            logger.info(
                "micro-batch %d: stores %s, %d upserted, %d deleted, %d memories relinked, %d links -> %s in %.3fs "
                "(read %.3f, embed %.3f, context %.3f, link %.3f, publish %.3f)",
                stats["batch"], ",".join(names) or "-", stats["upserted"], stats["deleted"], stats["linked"], stats["links"],
                folder.name if folder else "no delta", time.perf_counter() - start,
                stats["read_s"], stats["embed_s"], stats["context_s"], stats["link_s"], time.perf_counter() - stepped,
            )
            batches += 1
        if not announced:
            # said once the watches are in place and anything written before them is published
            print(f"watching {len(settings.stores)} store(s) into {catalog.root} (auto-discover {'on' if settings.auto_discover else 'off'})", flush=True)
            announced = True
        if max_batches is not None and batches >= max_batches:
            break
    logger.info("watcher stopped after %d micro-batches", batches)
    return {"status": "stopped", "batches": batches, "snapshot": files.run_id}
