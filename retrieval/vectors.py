"""The snapshot's vectors and the query encoder, loaded once per process and snapshot.

numpy and pyarrow are imported here, torch only inside `encoder` (through crosstier.transforms.embed.vectors)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from crosstier.core.config import Settings
from crosstier.retrieval.errors import EncoderUnavailableError, NoSnapshotError
from crosstier.retrieval.live import DELTAS_DIR, EMBEDDINGS_FILE
from crosstier.retrieval.snapshot import _LOCK as _DB_LOCK
from crosstier.retrieval.snapshot import Snapshot, SnapshotIdentity, visible

_LOCK = threading.Lock()
_VECTORS: dict[Path, "SnapshotVectors"] = {}  # per warehouse: the vectors of the version read last
_ENCODERS: dict[tuple, object] = {}


@dataclass
class SnapshotVectors:
    """Row-aligned arrays over the snapshot's memories that have a vector."""

    ids: np.ndarray  # str (object)
    matrix: np.ndarray  # float32, (n, dim), unit rows
    tiers: np.ndarray
    namespaces: np.ndarray
    readers: list  # list[str] | None per row
    timestamps_us: np.ndarray  # float64 epoch microseconds, nan when none
    row: dict[str, int]
    identity: SnapshotIdentity  # the snapshot version these are of
    _masks: dict[tuple, np.ndarray] = field(default_factory=dict)

    def mask(self, principal: str | None, namespace: str | None) -> np.ndarray:
        """Rows the principal may read, in the namespace when one is given."""
        key = (principal, namespace)
        if key not in self._masks:
            keep = np.ones(len(self.ids), dtype=bool)
            if namespace is not None:
                keep &= self.namespaces == namespace
            if principal is not None:
                keep &= np.fromiter((visible(r, principal) for r in self.readers), dtype=bool, count=len(self.ids))
            self._masks[key] = keep
        return self._masks[key]


def _matrix(column) -> np.ndarray:
    """A list<float> Arrow column of equal-length vectors as a float32 (n, dim) array."""
    array = column.combine_chunks()
    n = len(array)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    if array.null_count:
        raise NoSnapshotError("embeddings.parquet has memories without a vector")
    flat = array.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    if flat.size % n:
        raise NoSnapshotError("embeddings.parquet holds vectors of different lengths")
    return flat.reshape(n, flat.size // n)


def _base_vectors(snapshot: Snapshot) -> tuple[np.ndarray, np.ndarray]:
    """(ids, matrix) of the snapshot's embeddings.parquet."""
    path = snapshot.files.embeddings
    if not path.is_file():
        raise NoSnapshotError(f"no vectors in the snapshot: {path} is missing")
    table = pq.read_table(path, columns=["id", "embedding"])
    return table.column("id").to_numpy(zero_copy_only=False).astype(object), _matrix(table.column("embedding"))


def _delta_vectors(snapshot: Snapshot, names: list[str]) -> tuple[list[str], list[np.ndarray]]:
    """(ids, vectors) the named deltas computed again, the latest of each id: new and edited
    memories and session turns whose neighbours changed (transforms/publish/delta.py)."""
    latest: dict[str, np.ndarray] = {}
    for name in names:
        path = snapshot.files.dir / DELTAS_DIR / name / EMBEDDINGS_FILE
        if not path.is_file():  # a delta of a watcher that published no vectors
            continue
        table = pq.read_table(path, columns=["id", "embedding"])
        if table.num_rows:
            latest.update(zip(table.column("id").to_pylist(), _matrix(table.column("embedding"))))
    return list(latest), list(latest.values())


def snapshot_vectors(snapshot: Snapshot) -> SnapshotVectors:
    """The vectors of the snapshot (embeddings.parquet) overlaid with those of a watcher's
    deltas, with each memory's tier, namespace, readers and time; cached until the snapshot
    or its deltas change. A memory the deltas deleted is left out; a new one whose delta has
    no vector (a watcher of an older version) too, until the next snapshot.

    When only more deltas came, the vectors held are the start: the deltas not read yet
    replace theirs (a checkpoint repeats every vector since the snapshot, so starting from
    what the deltas before it made is the same as starting from the file), and the 150 MB
    of a 100k-memory snapshot are not read again, nor held twice."""
    root = snapshot.catalog.root
    with _LOCK:
        held = _VECTORS.get(root)
    if held is not None and held.identity == snapshot.identity:
        return held
    if held is not None and held.identity.same_base(snapshot.identity):
        ids, matrix = held.ids, held.matrix
        read = set(held.identity.deltas)
        fresh_ids, fresh = _delta_vectors(snapshot, [name for name in snapshot.identity.deltas if name not in read])
    else:
        ids, matrix = _base_vectors(snapshot)
        fresh_ids, fresh = _delta_vectors(snapshot, list(snapshot.identity.deltas))
    if fresh_ids:
        replaced = set(fresh_ids)
        kept = np.fromiter((i not in replaced for i in ids), dtype=bool, count=len(ids))
        ids = np.concatenate([ids[kept], np.asarray(fresh_ids, dtype=object)])
        matrix = np.concatenate([matrix[kept], np.stack(fresh).astype(np.float32, copy=False)]) if matrix.size else np.stack(fresh)
    with _DB_LOCK:
        meta = snapshot.con.sql(
            "select id, tier, namespace, readers, epoch_us(timestamp)::double as ts from memories"
        ).to_arrow_table()
    meta_row = {i: n for n, i in enumerate(meta.column("id").to_pylist())}
    take = np.asarray([meta_row.get(i, -1) for i in ids], dtype=np.int64)
    keep = take >= 0
    ids, matrix, take = ids[keep], matrix[keep], take[keep]
    column = lambda name: meta.column(name).to_numpy(zero_copy_only=False)[take]  # noqa: E731
    readers = meta.column("readers").to_pylist()
    vectors = SnapshotVectors(
        ids=ids,
        matrix=np.ascontiguousarray(matrix),
        tiers=column("tier").astype(object),
        namespaces=column("namespace").astype(object),
        readers=[readers[t] for t in take],
        timestamps_us=np.asarray(meta.column("ts").to_numpy(zero_copy_only=False), dtype=np.float64)[take],
        row={i: n for n, i in enumerate(ids)},
        identity=snapshot.identity,
    )
    with _LOCK:
        _VECTORS[root] = vectors  # one version per warehouse in memory
    return vectors


def export_dir(snapshot: Snapshot) -> Path | None:
    """The warehouse's cache folder when a run left an ONNX export there (reused, read only)."""
    return snapshot.catalog.cache_dir if (snapshot.catalog.cache_dir / "onnx").is_dir() else None


def read_side_backend(settings: Settings) -> tuple[str, str]:
    """(device, backend) for embedding one query at a time. `auto` on CPU means onnxruntime
    here: its vectors match torch's (cosine >= 0.999, docs/embedding.md) and one short text
    encodes in milliseconds instead of the torch path's tenths of a second, without importing
    torch. A configured backend, or device cuda, is kept as it is."""
    device, backend = settings.embedding.device, settings.embedding.backend
    if backend == "auto" and device in ("auto", "cpu"):
        return "cpu", "onnx"
    return device, backend


def encoder(model: str, settings: Settings, cache_dir: Path | None = None):
    """The sentence encoder for `model` (crosstier.transforms.embed.vectors.load_encoder), loaded once per process.
    cache_dir: where an ONNX export is kept (the warehouse's cache when a run made one there)."""
    device, backend = read_side_backend(settings)
    key = (model, device, backend)
    with _LOCK:
        if key in _ENCODERS:
            return _ENCODERS[key]
    try:
        from crosstier.transforms.embed import vectors as embed
    except ModuleNotFoundError as exc:  # the embed stage not installed here
        raise EncoderUnavailableError(f"cannot embed text: {exc}") from None
    try:
        loaded = embed.load_encoder(model, device=device, backend=backend, cache_dir=cache_dir).load()
    except (OSError, ValueError, RuntimeError, ImportError) as exc:
        raise EncoderUnavailableError(f"cannot load the snapshot's embedding model {model!r}: {exc}") from None
    with _LOCK:
        _ENCODERS[key] = loaded
    return loaded


def embed_texts(model: str, settings: Settings, texts: list[str], cache_dir: Path | None = None) -> np.ndarray:
    """Unit-norm float32 vectors of the texts with the given model."""
    vectors = np.asarray(encoder(model, settings, cache_dir).encode(texts), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
