"""The embedding stage: texts -> unit vectors, through a content-hash cache; provided vectors reused.

Pure functions over polars frames and numpy arrays; no Prefect. Model loading lives in
embed_model / embed_encoders, the on-disk cache in embed_cache.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import polars as pl

from crosstier.transforms.embed.cache import cache_info, clear_cache, compact, read_cached, remove_stale_temp, write_shard
from crosstier.transforms.embed.encoders import Encoder, Progress, load_encoder
from crosstier.transforms.embed.model import EmbeddingError, model_info, resolve_model

__all__ = [
    "EmbedStats",
    "EmbeddingError",
    "Encoder",
    "cache_info",
    "clear_cache",
    "embed_with_cache",
    "load_encoder",
    "memory_embeddings",
    "model_dim",
    "provided_embeddings",
    "provided_matrix",
    "resolve_model",
    "shared_encoder",
    "text_hash",
]

logger = logging.getLogger(__name__)
# A long run writes a shard every this many new vectors, so a killed run keeps its work.
CHECKPOINT_TEXTS = 20_000
PROGRESS_EVERY_S = 10.0


@dataclass(frozen=True)
class EmbedStats:
    """What one embedding call did; counts are of distinct texts (text_hash), not rows."""

    hits: int
    misses: int
    seconds: float
    texts_per_s: float  # encode rate of the misses; 0 when nothing was encoded
    damaged_cache_files: int = 0

    def as_dict(self) -> dict:
        """Plain values for run stats."""
        return asdict(self)


def text_hash(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes, hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=4)
def shared_encoder(model: str = "all-MiniLM-L6-v2", *, device: str = "auto", backend: str = "auto", cache_dir: Path | None = None, batch_size: int | None = None, precision: str = "auto") -> Encoder:
    """One encoder per configuration for the whole process, so mapped tasks load the weights once."""
    return load_encoder(model, device=device, backend=backend, cache_dir=cache_dir, batch_size=batch_size, precision=precision)


def model_dim(model: str = "all-MiniLM-L6-v2") -> int:
    """The vector length of `model`, from its configs (loads it only when they cannot tell)."""
    dim = model_info(model).dim
    return dim if dim is not None else shared_encoder(model, device="cpu", backend="torch").dim


def _progress_logger(log: logging.Logger | logging.LoggerAdapter, offset: int, chunk: int, batch_size: int, total: int) -> Progress:
    """A progress callback for one checkpoint chunk (`chunk` texts after the first `offset` of
    `total`) that logs at most every PROGRESS_EVERY_S seconds, plus the first and last batch."""
    last = [0.0]

    def report(done: int, batches: int, rate: float) -> None:
        now = time.monotonic()
        if done == batches or done == 1 or now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            texts = offset + min(done * batch_size, chunk)
            log.info("embedding: batch %d/%d of chunk, %d/%d texts, %.0f texts/s", done, batches, texts, total, rate)

    return report


def _check_texts(texts: pl.DataFrame) -> None:
    """Reject input the cache cannot key: missing columns or null values."""
    missing = {"text_hash", "text"} - set(texts.columns)
    if missing:
        raise EmbeddingError(f"embed_with_cache needs columns text_hash and text; missing {sorted(missing)}")
    nulls = texts.select(pl.col("text_hash").null_count() + pl.col("text").null_count()).item()
    if nulls:
        raise EmbeddingError(f"embed_with_cache: {nulls} null text or text_hash values")


def _encode_missing(missing: pl.DataFrame, encoder: Encoder, cache_dir: Path, batch_size: int | None, log: logging.Logger) -> pl.DataFrame:
    """Encode the missing texts in checkpoints, each saved as a shard; returns (text_hash, embedding)."""
    # Longest first across the whole set so every checkpoint's batches are length-homogeneous.
    missing = missing.sort(pl.col("text").str.len_chars(), descending=True, maintain_order=True)
    parts = []
    for offset in range(0, missing.height, CHECKPOINT_TEXTS):
        chunk = missing.slice(offset, CHECKPOINT_TEXTS)
        size = batch_size or encoder.batch_size
        progress = _progress_logger(log, offset, chunk.height, size, missing.height)
        vectors = encoder.encode(chunk["text"].to_list(), batch_size=size, progress=progress)
        part = pl.DataFrame({"text_hash": chunk["text_hash"]}).with_columns(pl.Series("embedding", vectors))
        write_shard(cache_dir, encoder.model_id, part)
        parts.append(part)
    return pl.concat(parts)


def embed_with_cache(texts: pl.DataFrame, encoder: Encoder, cache_dir: Path, *, batch_size: int | None = None, log: logging.Logger | None = None) -> tuple[pl.DataFrame, EmbedStats]:
    """(text_hash, embedding) for every input row, in order; only texts missing from the cache are encoded."""
    log = log or logger
    start = time.perf_counter()
    _check_texts(texts)
    cache_dir = Path(cache_dir)
    remove_stale_temp(cache_dir)
    unique = texts.select("text_hash", "text").unique("text_hash", keep="first", maintain_order=True)
    cached, damaged = read_cached(cache_dir, encoder.model_id, encoder.dim, unique["text_hash"], log)
    missing = unique.join(cached, on="text_hash", how="anti")
    log.info("embedding: %d distinct texts, %d cached, %d to embed (model %s)", unique.height, unique.height - missing.height, missing.height, encoder.model_id)
    if missing.height:
        encoder.load()  # so the encode rate below measures encoding, not loading
        log.info("embedding: %s on %s, %s, batches of %d", encoder.backend, encoder.device, encoder.precision, batch_size or encoder.batch_size)
    encode_start = time.perf_counter()
    fresh = _encode_missing(missing, encoder, cache_dir, batch_size, log) if missing.height else cached.clear()
    encode_seconds = time.perf_counter() - encode_start
    if missing.height:
        compact(cache_dir, encoder.model_id, encoder.dim, log)
    vectors = pl.concat([cached, fresh])
    out = texts.select("text_hash").join(vectors, on="text_hash", how="left", maintain_order="left")
    out = out.with_columns(pl.col("embedding").cast(pl.List(pl.Float32)))
    rate = missing.height / encode_seconds if missing.height else 0.0
    stats = EmbedStats(unique.height - missing.height, missing.height, time.perf_counter() - start, rate, damaged)
    log.info("embedding: done in %.2fs (%d hits, %d misses, %.0f texts/s)", stats.seconds, stats.hits, stats.misses, rate)
    return out, stats


def _stores_where(rows: pl.DataFrame, bad: pl.Expr) -> str:
    """'store (detail)' for each store with a bad row, for an error message."""
    found = rows.filter(bad).group_by("store").agg(pl.col("dim").unique().sort()).sort("store")
    return ", ".join(f"{r['store']!r} ({'/'.join(str(d) for d in r['dim'])}-dim)" for r in found.iter_rows(named=True))


def provided_matrix(memories: pl.DataFrame, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows (positions in `memories`) whose store provided a vector, and those vectors as one
    float32 matrix normalised to unit length, row-aligned with the positions.

    A null or empty `embedding` counts as not provided. A vector of another length than the
    model's, or one with a non-finite or all-zero value, raises EmbeddingError naming the store.
    One matrix and no frame of lists: at a million rows each copy of the vectors is 1.5 GB.
    """
    none = (np.zeros(0, dtype=np.int64), np.zeros((0, dim), dtype=np.float32))
    if "embedding" not in memories.columns:
        return none
    vectors = memories.get_column("embedding")
    given = (vectors.is_not_null() & (vectors.list.len() > 0)).fill_null(False)
    positions = np.flatnonzero(given.to_numpy())
    if len(positions) == 0:
        return none
    store = pl.col("store") if "store" in memories.columns else pl.lit("(unnamed store)")

    def stores_where(bad: np.ndarray) -> str:  # read only when something is wrong
        rows = memories[positions].select(store.fill_null("(unnamed store)").alias("store"), pl.col("embedding").list.len().alias("dim"))
        return _stores_where(rows.with_columns(pl.Series("bad", bad)), pl.col("bad"))

    chosen = vectors if len(positions) == vectors.len() else vectors.gather(positions)
    lengths = chosen.list.len().to_numpy()
    if (lengths != dim).any():
        raise EmbeddingError(
            f"provided embeddings do not match the model: store(s) {stores_where(lengths != dim)} "
            f"but the embedding model makes {dim}-dim vectors; set EMBEDDING_MODEL to the model that made them, or drop the store's embedding_column"
        )
    # nulls inside -> NaN; a float32 column comes out without a copy, so copy it unless one was made
    matrix = chosen.cast(pl.List(pl.Float32)).list.to_array(dim).to_numpy()
    if not matrix.flags.writeable or not matrix.flags.c_contiguous:
        matrix = np.array(matrix, dtype=np.float32, order="C")
    norms = np.linalg.norm(matrix, axis=1)
    bad = ~np.isfinite(norms) | (norms == 0)
    if bad.any():
        raise EmbeddingError(f"provided embeddings with missing, non-finite or all-zero values in store(s) {stores_where(bad)}")
    matrix /= norms[:, None]
    return positions, matrix


def provided_embeddings(memories: pl.DataFrame, dim: int) -> pl.DataFrame:
    """(id, embedding) of the memories whose store provided a vector, normalised to unit length
    (provided_matrix as a frame of lists, for the watcher and the per-memory embedding)."""
    positions, matrix = provided_matrix(memories, dim)
    if len(positions) == 0:
        return pl.DataFrame(schema={"id": pl.String, "embedding": pl.List(pl.Float32)})
    return pl.DataFrame({"id": memories.get_column("id").gather(positions)}).with_columns(pl.Series("embedding", matrix).cast(pl.List(pl.Float32)))


def memory_embeddings(memories: pl.DataFrame, encoder: Encoder, cache_dir: Path, *, batch_size: int | None = None, log: logging.Logger | None = None) -> tuple[pl.DataFrame, EmbedStats]:
    """(id, text_hash, embedding) for every memory, in order: its provided vector, else its content's."""
    keyed = memories.select("id", pl.col("content").alias("text")).with_row_index("_row")
    keyed = keyed.with_columns(pl.col("text").map_elements(text_hash, return_dtype=pl.String).alias("text_hash"))
    provided = provided_embeddings(memories, encoder.dim)
    rest = keyed.join(provided.select("id"), on="id", how="anti", maintain_order="left")
    embedded, stats = embed_with_cache(rest.select("text_hash", "text"), encoder, cache_dir, batch_size=batch_size, log=log)
    computed = rest.select("_row", "id", "text_hash").with_columns(embedded["embedding"])
    given = keyed.select("_row", "id", "text_hash").join(provided, on="id")
    return pl.concat([given, computed]).sort("_row").drop("_row"), stats
