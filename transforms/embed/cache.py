"""The on-disk embedding cache: Parquet shards keyed by (model id, text hash).

Layout under the cache folder:

    embeddings/<model slug>/shard-<time>-<uuid>.parquet   columns model_id, text_hash, embedding
    onnx/<model slug>-opset17.onnx                          the ONNX export of a model

Each run that embeds something adds one shard (or one per checkpoint on long runs);
shards are written to a hidden temp file and renamed into place, so a killed run leaves
either a whole shard or none. When a model has many shards its smaller ones are compacted
into one (size-tiered: see shards_to_merge), again write-then-rename; duplicates between
old and new shards are harmless (reads keep one row per hash). A shard that cannot be read
or fails validation is logged, removed, and its texts embedded again.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import os
import re
import time
import uuid
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from crosstier.core.atomic import write_atomically

EMBEDDINGS_DIR = "embeddings"
ONNX_DIR = "onnx"
TMP_PREFIX = ".tmp-"
MAX_SHARDS = 16  # compact beyond this: each read opens every shard
STALE_TMP_SECONDS = 3600  # a temp file this old belongs to a run that died
LOCK_NAME = ".compacting"


def model_slug(model_id: str) -> str:
    """A folder-safe, collision-free name for a model id."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)[:60]
    return f"{readable}-{hashlib.sha256(model_id.encode()).hexdigest()[:8]}"


def model_dir(cache_dir: Path, model_id: str) -> Path:
    """The shard folder of one model."""
    return cache_dir / EMBEDDINGS_DIR / model_slug(model_id)


def shard_paths(folder: Path) -> list[Path]:
    """The complete shards of a model folder, oldest first (temp files excluded)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("shard-*.parquet") if p.is_file())


class CorruptShard(ValueError):
    """A shard whose content does not match what the cache writes."""


# Rows per row group of a shard, its rows sorted by hash: a lookup of a few hashes reads only the
# groups whose hash range holds one (~1.5 MB each), not the whole shard (150 MB at 100k texts: ~0.5 s,
# paid by every watcher micro-batch whose new memory repeats a cached text, an "ok" of a chat log).
# Groups of 4096 rows cost 13 ms per lookup at 100k, 1024 rows 5 ms; a full read is no slower.
ROW_GROUP_ROWS = 1024


def _row_groups_holding(path: Path, wanted: list[str]) -> tuple[pq.ParquetFile, list[int]] | None:
    """The shard's row groups whose text_hash range holds one of `wanted` (sorted), or None when
    a group has no range to go by (a shard written before shards were sorted: read it whole)."""
    shard = pq.ParquetFile(path)
    column = shard.schema_arrow.get_field_index("text_hash")
    if column < 0:
        return None
    groups = []
    for group in range(shard.metadata.num_row_groups):
        stats = shard.metadata.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        at = bisect.bisect_left(wanted, stats.min)
        if at < len(wanted) and wanted[at] <= stats.max:
            groups.append(group)
    return shard, groups


def _read_shard(path: Path, model_id: str, dim: int, wanted: pl.Series | None) -> pl.DataFrame:
    """Rows of one shard for the wanted hashes (all when None), validated; raises on any damage."""
    pruned = _row_groups_holding(path, sorted(wanted.to_list())) if wanted is not None and wanted.len() <= _SMALL_LOOKUP else None
    if pruned is not None:
        shard, groups = pruned
        frame = pl.from_arrow(shard.read_row_groups(groups)) if groups else pl.from_arrow(shard.schema_arrow.empty_table())
        frame = frame.filter(pl.col("text_hash").is_in(wanted.implode()))
    else:
        scan = pl.scan_parquet(path)
        frame = (scan if wanted is None else scan.filter(pl.col("text_hash").is_in(wanted.implode()))).collect()
    expected = {"model_id": pl.String, "text_hash": pl.String, "embedding": pl.Array(pl.Float32, dim)}
    if dict(frame.schema) != expected:
        raise CorruptShard(f"schema {dict(frame.schema)} is not {expected}")
    if frame.height == 0:
        return frame.select("text_hash", "embedding")
    if frame.null_count().sum_horizontal().item() or (frame["model_id"] != model_id).any():
        raise CorruptShard("null values or another model's rows")
    norms = np.linalg.norm(frame["embedding"].to_numpy(), axis=1)
    if not np.all(np.abs(norms - 1.0) < 1e-3):  # also false for NaN
        raise CorruptShard("vectors that are not unit length")
    return frame.select("text_hash", "embedding")


# A lookup of at most this many hashes (a watcher's micro-batch, a query) skips the shards known
# not to hold any: opening every shard cost ~30 ms per micro-batch. Shards are written once
# (unique names, then renamed into place), so a path whose size and time are unchanged holds
# the same hashes.
_SMALL_LOOKUP = 4096
_SHARD_HASHES: dict[Path, tuple[tuple[int, int], frozenset[str]]] = {}


def _held(path: Path, wanted: set[str]) -> set[str]:
    """Which of `wanted` the shard holds (its hashes read once per process)."""
    stat = path.stat()
    signature = (stat.st_size, stat.st_mtime_ns)
    known = _SHARD_HASHES.get(path)
    if known is None or known[0] != signature:
        hashes = frozenset(pl.read_parquet(path, columns=["text_hash"]).get_column("text_hash").to_list())
        _SHARD_HASHES[path] = known = (signature, hashes)
    return known[1] & wanted


def read_cached(cache_dir: Path, model_id: str, dim: int, hashes: pl.Series | None, log: logging.Logger, *, paths: list[Path] | None = None) -> tuple[pl.DataFrame, int]:
    """Cached vectors (text_hash, embedding) for `hashes` (all when None), and how many damaged
    shards were dropped; from `paths` alone where given (a compaction's), else every shard."""
    parts: list[pl.DataFrame] = []
    corrupt = 0
    folder = model_dir(cache_dir, model_id)
    every = shard_paths(folder)
    paths = every if paths is None else paths
    for gone in [known for known in list(_SHARD_HASHES) if known.parent == folder and known not in every]:
        _SHARD_HASHES.pop(gone, None)  # compacted away (list(): embed tasks may run in threads)
    wanted = set(hashes.to_list()) if hashes is not None and hashes.len() <= _SMALL_LOOKUP else None
    for path in paths:
        try:
            if wanted is None:
                parts.append(_read_shard(path, model_id, dim, hashes))
                continue
            # only the hashes it holds pick its row groups: every other hash also falls in some
            # group's range, and a watcher's 10 new texts then read ~10 groups (60 MB) for none
            held = _held(path, wanted)
            if held:
                parts.append(_read_shard(path, model_id, dim, pl.Series(sorted(held), dtype=pl.String)))
        except FileNotFoundError:
            continue  # compacted away by a concurrent run; its rows are in the new shard
        except OSError as exc:
            if exc.errno is None:  # raised by a reader about the bytes, not by the OS: corrupt
                corrupt += 1
                log.warning("embedding cache: %s is damaged (%s: %s); removed, its texts will be embedded again", path, type(exc).__name__, str(exc)[:200])
                path.unlink(missing_ok=True)
                continue
            # an I/O error from the OS (EIO, EMFILE, ENOMEM...) says nothing about the file: keep it
            log.warning("embedding cache: %s could not be read (%s); kept, its texts are embedded again this run", path, exc)
        except Exception as exc:  # the file was read and cannot be trusted: corrupt
            corrupt += 1
            log.warning("embedding cache: %s is damaged (%s: %s); removed, its texts will be embedded again", path, type(exc).__name__, str(exc)[:200])
            path.unlink(missing_ok=True)
    empty = pl.DataFrame(schema={"text_hash": pl.String, "embedding": pl.Array(pl.Float32, dim)})
    found = pl.concat([empty, *parts]).unique("text_hash", keep="first", maintain_order=True)
    return found, corrupt


def _write_atomic(frame: pl.DataFrame, target: Path) -> Path:
    """Write `frame` to `target` through a synced temp file and a rename: all or nothing."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex}.parquet")
    return write_atomically(target, tmp, lambda handle: frame.write_parquet(handle, compression="zstd", row_group_size=ROW_GROUP_ROWS, statistics=True))


def write_shard(cache_dir: Path, model_id: str, vectors: pl.DataFrame) -> Path:
    """Add a shard of (text_hash, embedding) rows for `model_id`; returns its path."""
    name = f"shard-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
    # sorted by hash: each row group covers a narrow range of hashes (see ROW_GROUP_ROWS)
    frame = vectors.select(pl.lit(model_id, dtype=pl.String).alias("model_id"), "text_hash", "embedding").sort("text_hash")
    path = _write_atomic(frame, model_dir(cache_dir, model_id) / name)
    # its hashes are known: the next small lookup (the watcher's next micro-batch) need not read them back
    stat = path.stat()
    _SHARD_HASHES[path] = ((stat.st_size, stat.st_mtime_ns), frozenset(frame.get_column("text_hash").to_list()))
    return path


def shards_to_merge(sizes: list[int]) -> list[int]:
    """Which shards a compaction merges (indices into sizes, in bytes): all but the large ones.

    Size-tiered: a shard larger than every smaller shard together is kept, so the one big shard
    a batch run leaves (150 MB at 100k texts) is not read and rewritten every MAX_SHARDS
    micro-batches of a watcher (~1.3 s each time on 2 cores); what is merged costs about what
    was added since. A byte is rewritten O(log n) times, and the kept shards form a ladder of
    doubling sizes, so the shard count stays small. When the ladder alone is too long
    (sizes spanning more than 2^MAX_SHARDS), the smallest shards are merged instead."""
    order = sorted(range(len(sizes)), key=lambda i: sizes[i], reverse=True)
    below = sum(sizes)
    kept = 0
    for i in order:
        below -= sizes[i]
        if sizes[i] <= below:
            break
        kept += 1
    merged = order[kept:]
    if len(merged) < 2:
        merged = order[-max(2, len(sizes) - MAX_SHARDS // 2):]
    return sorted(merged)


def compact(cache_dir: Path, model_id: str, dim: int, log: logging.Logger) -> int:
    """Merge a model's smaller shards into one when there are more than MAX_SHARDS (see
    shards_to_merge); returns shards merged.

    One compaction at a time per model (a lock file); concurrent runs skip it. Shards written
    meanwhile are not in `paths`, so they are neither merged nor deleted: nothing is lost.
    """
    folder = model_dir(cache_dir, model_id)
    paths = shard_paths(folder)
    if len(paths) <= MAX_SHARDS or not _take_lock(folder / LOCK_NAME):
        return 0
    try:
        sizes = []
        for path in paths:
            try:
                sizes.append(path.stat().st_size)
            except FileNotFoundError:
                sizes.append(0)  # compacted away by a run that held the lock before us: nothing to read
        chosen = [paths[i] for i in shards_to_merge(sizes)]
        merged, _ = read_cached(cache_dir, model_id, dim, None, log, paths=chosen)
        write_shard(cache_dir, model_id, merged)
        for path in chosen:
            path.unlink(missing_ok=True)
    finally:
        (folder / LOCK_NAME).unlink(missing_ok=True)
    log.info("embedding cache: compacted %d of %d shards into one (%d vectors)", len(chosen), len(paths), merged.height)
    return len(chosen)


def _take_lock(path: Path) -> bool:
    """Create `path` exclusively; a lock older than STALE_TMP_SECONDS belongs to a dead run and is taken over."""
    try:
        if time.time() - path.stat().st_mtime > STALE_TMP_SECONDS:
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def remove_stale_temp(cache_dir: Path) -> int:
    """Delete temp files left by runs that died; returns how many."""
    removed = 0
    now = time.time()
    candidates = [*(cache_dir / EMBEDDINGS_DIR).glob(f"*/{TMP_PREFIX}*"), *(cache_dir / ONNX_DIR).glob(f"{TMP_PREFIX}*")]
    for path in candidates:
        try:
            if now - path.stat().st_mtime > STALE_TMP_SECONDS:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue  # its writer finished or another run removed it

    return removed


def clear_cache(cache_dir: Path, *, keep_models: bool = False) -> int:
    """Remove cached embeddings (and ONNX exports unless `keep_models`); returns files removed."""
    subdirs = [EMBEDDINGS_DIR] if keep_models else [EMBEDDINGS_DIR, ONNX_DIR]
    removed = 0
    for sub in subdirs:
        root = Path(cache_dir) / sub
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*"), reverse=True):  # files before their folders
            if path.is_dir():
                path.rmdir()
            else:
                path.unlink()
                removed += 1
        root.rmdir()
    return removed


def _shard_summary(path: Path) -> dict:
    """Rows and model id of a shard from its metadata, or why it cannot be read."""
    try:
        head = pl.scan_parquet(path).select(pl.len().alias("rows"), pl.first("model_id")).collect()
        return {"rows": int(head["rows"][0]), "model_id": head["model_id"][0], "ok": True}
    except Exception as exc:  # reported, not raised: info must work on a damaged cache
        return {"rows": 0, "model_id": None, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:200]}


def cache_info(cache_dir: Path) -> dict:
    """What the cache holds: per model shards, rows and bytes; ONNX exports; temp files."""
    cache_dir = Path(cache_dir)
    models = []
    for folder in sorted(p for p in (cache_dir / EMBEDDINGS_DIR).glob("*") if p.is_dir()):
        shards = [(p, _shard_summary(p)) for p in shard_paths(folder)]
        ids = {s["model_id"] for _, s in shards if s["model_id"]}
        models.append(
            {
                "model_id": ", ".join(sorted(ids)) or folder.name,
                "folder": folder.name,
                "shards": len(shards),
                "rows": sum(s["rows"] for _, s in shards),
                "bytes": sum(p.stat().st_size for p, _ in shards),
                "damaged": [p.name for p, s in shards if not s["ok"]],
            }
        )
    onnx = [{"file": p.name, "bytes": p.stat().st_size} for p in sorted((cache_dir / ONNX_DIR).glob("*.onnx"))]
    temp = list((cache_dir / EMBEDDINGS_DIR).glob(f"*/{TMP_PREFIX}*")) + list((cache_dir / ONNX_DIR).glob(f"{TMP_PREFIX}*"))
    total = sum(m["bytes"] for m in models) + sum(o["bytes"] for o in onnx) + sum(p.stat().st_size for p in temp)
    return {"path": str(cache_dir), "exists": cache_dir.is_dir(), "models": models, "onnx": onnx, "temp_files": len(temp), "total_bytes": total}
