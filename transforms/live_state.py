"""The watcher's loaded state and one micro-batch step over it: changed stores -> memories
-> texts -> vectors -> links -> a delta. No Prefect: flows/watch.py wires it.

The state is what an incremental run would read from the last snapshot, kept in memory:
each store's extract, the memories with their terms, texts and vectors, fingerprints,
links before and after the cap, the manual links and a hash of every published memory row.
Only rows a micro-batch read (`_batch`) or whose embedded text changed (a session
neighbour arrived) are hashed, fingerprinted and embedded again.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import polars as pl

from crosstier.core import manual_log
from crosstier.core.config import Settings
from crosstier.transforms.embed import vectors as embed
from crosstier.transforms.embed.text import TouchedRows, aligned_to, context_vectors, context_vectors_around, copy_rows, embedding_texts, embedding_texts_around, touched_rows
from crosstier.transforms.link import incremental, links, live, live_cap, namespace_terms
from crosstier.transforms.link.link_ends import rows_apart
from crosstier.transforms.link.manual import manual_relationships
from crosstier.transforms.publish.delta import Delta, delta_frames
from crosstier.transforms.publish.snapshot import embedding_rows
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA
from crosstier.transforms.sorted_rows import kept_per_frame, with_rows_inserted
from crosstier.transforms.stores.extract import combined_extracts
from crosstier.transforms.stores.follow import FollowedStore, read_whole, refreshed


class VectorSource(Protocol):
    """Vectors for texts: (text_hash, text) rows -> (text_hash, embedding) rows in order."""

    def __call__(self, texts: pl.DataFrame) -> pl.DataFrame: ...


@dataclass(frozen=True)
class WatchState:
    """Everything the watcher keeps loaded between micro-batches."""

    stores: dict[str, FollowedStore]
    index: live.LinkIndex
    manual: pl.DataFrame
    row_hashes: pl.DataFrame
    batch: int
    base_run: str
    content_vectors: np.ndarray | None = None  # each memory's own vector, before session context
    rejects: pl.DataFrame | None = None  # the rejects readers see now (store, location, raw, reason)
    memories_since: frozenset[str] = frozenset()  # ids added, edited or deleted since the snapshot
    linked_since: frozenset[str] = frozenset()  # ids whose relationship rows changed since it
    vectors_since: frozenset[str] = frozenset()  # ids whose vector was computed again since it


def buffer_rows(matrix: np.ndarray | None, rows: int, dim: int) -> np.ndarray:
    """A C-contiguous float32 (rows, dim) array over `matrix`'s own buffer where it has room
    (the micro-batch moves its rows in place: text.copy_rows), else a new one with room to
    grow. A fresh 150 MB array per micro-batch at 100k memories was page-faulted in again
    now and then (0.3 s), and copying every row into it cost ~36 ms a matrix."""
    base = buffer_of(matrix)
    if base is not None and base.ndim == 2 and base.shape[0] >= rows and base.shape[1] == dim and base.dtype == np.float32 and base.flags.c_contiguous and base.flags.writeable:
        return base[:rows]
    return np.empty((rows + rows // 16 + 64, dim), dtype=np.float32)[:rows]


def buffer_of(matrix: np.ndarray | None) -> np.ndarray | None:
    """The whole array a buffer_rows matrix is a view of (the matrix itself otherwise; None stays None)."""
    if matrix is None:
        return None
    base = matrix.base
    if isinstance(base, np.ndarray) and base.ndim == 2 and base.strides == matrix.strides and base.ctypes.data == matrix.ctypes.data:
        return base
    return matrix


@dataclass(frozen=True)
class Step:
    """One micro-batch: the new state, the delta to publish (empty when nothing changed) and its counts."""

    state: WatchState
    delta: Delta
    stats: dict[str, Any]


def published_memories(memories: pl.DataFrame) -> pl.DataFrame:
    """The memory rows as the snapshot's `memories` table holds them."""
    return memories.drop([c for c in ("embedding", "_batch", "_raw") if c in memories.columns])


# a store a micro-batch did not read again keeps its frame: its 100k rows are sorted once
@kept_per_frame(8)
def sorted_memories(memories: pl.DataFrame) -> pl.DataFrame:
    """A store's memories without the provided `embedding`, sorted by id."""
    return memories.drop("embedding", strict=False).sort("id")


def current_memories(stores: dict[str, FollowedStore]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(memories with terms and `_batch`, sorted by id; rejects) over every store, duplicate
    ids rejected as the batch run rejects them. Without the stores' provided vectors:
    `provided_vectors` looks up the few a micro-batch needs, where combining and sorting
    100k of them (150 MB of lists) cost ~0.15 s a micro-batch."""
    extracted = combined_extracts([replace(f.extract, memories=sorted_memories(f.extract.memories)) for f in stores.values()], sorted_by_id=True)
    return extracted.memories, extracted.rejects


def provided_vectors(stores: dict[str, FollowedStore], ids: pl.Series, dim: int) -> pl.DataFrame:
    """(id, embedding) of the memories among `ids` whose store provided a vector, unit length
    (embed.provided_embeddings). An id in two stores is rejected, so it is never asked for."""
    wanted = ids.implode()
    rows = [
        f.extract.memories.select("id", "store", "embedding").filter(pl.col("id").is_in(wanted))
        for f in stores.values()
        if f.extract.memories.height and "embedding" in f.extract.memories.columns
    ]
    return embed.provided_embeddings(pl.concat(rows) if rows else pl.DataFrame(schema={"id": pl.String}), dim)


def hashed_texts(memories: pl.DataFrame) -> pl.DataFrame:
    """(id, text, text_hash) of every memory, every text hashed (texts_around reuses them)."""
    texts = embedding_texts(memories)
    return texts.with_columns(pl.Series("text_hash", [embed.text_hash(t) for t in texts.get_column("text").to_list()], dtype=pl.String))


def texts_around(memories: pl.DataFrame, previous_memories: pl.DataFrame, previous: pl.DataFrame, rows: TouchedRows, batch: int) -> tuple[pl.DataFrame, np.ndarray]:
    """(id, text, text_hash) of every memory, as `hashed_texts(memories)` gives them, and the positions whose fingerprint is to be computed again: rows read in this
    batch, new, or with another text.

    Texts are built only for the touched rows (`embedding_texts_around`); an untouched row's
    text and hash are taken by its row in `previous` (which the watcher keeps row-aligned
    with `previous_memories`), where three joins over every id cost ~40 ms a micro-batch at
    100k."""
    previous = aligned_to(previous_memories, previous.select("id", "text", "text_hash"))
    fresh = rows.fresh.astype(np.int64)
    text = embedding_texts_around(memories, previous_memories, previous, rows).get_column("text")
    built = text.gather(fresh)
    before = rows.previous_of[fresh]
    old_text = previous.get_column("text").gather(np.maximum(before, 0))
    old_hash = previous.get_column("text_hash").gather(np.maximum(before, 0))
    same = (before >= 0) & (old_text == built).fill_null(False).to_numpy()
    hashes = [old if kept else embed.text_hash(new) for kept, old, new in zip(same, old_hash.to_list(), built.to_list())]
    # a new row is fresh: its placeholder (row 0) is overwritten
    text_hash = previous.get_column("text_hash").gather(np.maximum(rows.previous_of, 0)).scatter(fresh, pl.Series(hashes, dtype=pl.String))
    read_now = memories.get_column("_batch").gather(fresh).eq(batch).fill_null(False).to_numpy()
    texts = pl.DataFrame({"id": memories.get_column("id"), "text": text, "text_hash": text_hash})
    return texts, fresh[read_now | ~same]


def refreshed_fingerprints(memories: pl.DataFrame, texts: pl.DataFrame, previous: pl.DataFrame, redo: pl.Series) -> pl.DataFrame:
    """Fingerprints of every memory: computed for the ids in `redo`, the rest as before."""
    wanted = redo.implode()
    # the few texts alone: joining a few memories to every text built a table of 100k (~8 ms)
    fresh = incremental.memory_fingerprints(memories.filter(pl.col("id").is_in(wanted)), texts.filter(pl.col("id").is_in(wanted)))
    kept = previous.join(memories.select("id"), on="id", how="semi", maintain_order="left").filter(~pl.col("id").is_in(wanted))
    return with_rows_inserted(kept, fresh)


def redone_ids(previous: pl.DataFrame, memories: pl.DataFrame, batch: int) -> pl.Series:
    """Ids whose row may differ from the previous set's: those read in this batch (new or
    edited, `_batch`) and those gone. Every other row is as the last micro-batch had it."""
    read_now = memories.filter(pl.col("_batch") == batch).get_column("id")
    gone = previous.select("id").join(memories.select("id"), on="id", how="anti").get_column("id")
    return pl.concat([read_now, gone])


@dataclass(frozen=True)
class BatchRows:
    """What a micro-batch changed in the rows, before any vector: the touched sessions' rows,
    every text and fingerprint, and the ids whose row may differ from the state's (read
    again, new, fingerprinted again or gone: live.relinked and row_hashes_after compare only those)."""

    touched: TouchedRows
    texts: pl.DataFrame
    fingerprints: pl.DataFrame
    redone: pl.Series


def batch_rows(index: live.LinkIndex, memories: pl.DataFrame, batch: int) -> BatchRows:
    """BatchRows of the current memories against the index (one look at which sessions the
    batch touched serves the context texts and the context vectors)."""
    read_or_gone = redone_ids(index.memories, memories, batch)
    touched = touched_rows(memories, index.memories, read_or_gone)
    texts, redo = texts_around(memories, index.memories, index.texts, touched, batch)
    again = memories.get_column("id").gather(redo)
    fingerprints = refreshed_fingerprints(memories, texts, index.fingerprints, again)
    return BatchRows(touched, texts, fingerprints, pl.concat([read_or_gone, again]).unique())


@dataclass(frozen=True)
class ContentSources:
    """Where some memories' content vectors come from: (id, embedding) their stores provided,
    unit length, and (id, text, text_hash) of the others, which the cache or the model embeds."""

    provided: pl.DataFrame
    unprovided: pl.DataFrame

    def covers(self, ids: pl.Series) -> bool:
        """Does it name a source for every one of `ids`?"""
        named = pl.concat([self.provided.get_column("id"), self.unprovided.get_column("id")]).implode()
        return bool(ids.is_in(named).all())


def content_sources(memories: pl.DataFrame, stores: dict[str, FollowedStore], dim: int) -> ContentSources:
    """The ContentSources of these memories' contents (each text hashed once)."""
    texts = memories.select("id", pl.col("content").alias("text"))
    provided = provided_vectors(stores, texts.get_column("id"), dim)
    rest = texts.join(provided.select("id"), on="id", how="anti", maintain_order="left")
    hashes = pl.Series("text_hash", [embed.text_hash(t) for t in rest.get_column("text").to_list()], dtype=pl.String)
    return ContentSources(provided, rest.with_columns(hashes))


def content_vectors_of(
    memories: pl.DataFrame, stores: dict[str, FollowedStore], at: np.ndarray, rows: np.ndarray, matrix: np.ndarray, dim: int, vectors_for: VectorSource,
    out: np.ndarray | None = None, sources: ContentSources | None = None,
) -> tuple[np.ndarray, dict[str, int]]:
    """Row-aligned vectors of each memory's own content, as the batch run makes them:
    `matrix[rows]` at the positions `at` (memories whose content the batch did not read
    again), the rest provided by their store or embedded by content (the cache, then the
    model), as `sources` says where it covers them (the watcher's, made for the texts it read,
    while it embeds them early), else content_sources of those rows. `out`: a float32
    (memories, dim) array to fill, else a new one."""
    if out is None:
        out = np.empty((memories.height, dim), dtype=np.float32)  # every row is set below
    copy_rows(out, at, matrix, rows)
    missing = np.ones(memories.height, dtype=bool)
    missing[at] = False
    need_ids = memories.select("id").with_row_index("_at").filter(pl.Series(missing))
    if sources is None or not sources.covers(need_ids.get_column("id")):
        sources = content_sources(memories.filter(pl.Series(missing)), stores, dim)
    placed = need_ids.join(sources.provided, on="id", maintain_order="left")
    rest = need_ids.join(sources.unprovided, on="id", maintain_order="left")
    if placed.height:
        out[placed.get_column("_at").to_numpy()] = placed.get_column("embedding").list.to_array(dim).to_numpy()
    if rest.height:
        embedded = vectors_for(rest.select("text_hash", "text"))
        out[rest.get_column("_at").to_numpy()] = embedded.get_column("embedding").list.to_array(dim).to_numpy()
    return out, {"reused": len(at), "provided": placed.height, "embedded": rest.height}


def texts_read(memories: pl.DataFrame, stores: dict[str, FollowedStore], batch: int, dim: int) -> ContentSources:
    """The ContentSources of the contents read in this batch: content_vectors_of needs no
    other row (every row it cannot reuse was read in this batch), and its `unprovided` texts
    are what the watcher embeds early."""
    return content_sources(memories.filter(pl.col("_batch") == batch), stores, dim)


def prefetched(early: Future | None, vectors_for: VectorSource) -> VectorSource:
    """A VectorSource that answers from `early` (a future of vectors_for over the texts it
    expected; None: it expected none) and asks vectors_for for the rest."""
    if early is None:
        return vectors_for

    def vectors(texts: pl.DataFrame) -> pl.DataFrame:
        ready = early.result().unique("text_hash", keep="first")
        found = texts.select("text_hash").join(ready, on="text_hash", how="left", maintain_order="left")
        if found.get_column("embedding").null_count():
            return vectors_for(texts)  # a text it did not expect: every row from the source, as before
        return found

    return vectors


def manual_frame(path: Path, memories: pl.DataFrame, run_id: str) -> pl.DataFrame:
    """The manual links the batch run would publish over these memories."""
    records, _bad = manual_log.read_records(path)
    return manual_relationships(records, memories, run_id)[0]


REJECT_COLUMNS = ("store", "location", "raw", "reason")


def same_rejects(a: pl.DataFrame | None, b: pl.DataFrame) -> bool:
    """Do two reject frames hold the same rows (in any order, run_id aside)?"""
    if a is None:
        return False
    key = list(REJECT_COLUMNS)
    return a.select(key).sort(key, nulls_last=True).equals(b.select(key).sort(key, nulls_last=True))


def with_rejects(state: WatchState, delta: Delta, rejects: pl.DataFrame) -> tuple[WatchState, Delta]:
    """The delta carries every current reject when they differ from what readers see."""
    if same_rejects(state.rejects, rejects):
        return state, delta
    current = rejects.select(REJECT_COLUMNS).with_columns(run_id=pl.lit(state.base_run))
    return replace(state, rejects=current), replace(delta, rejects=current)


def row_hashes_after(previous: pl.DataFrame, published: pl.DataFrame, redone: pl.Series | None) -> tuple[pl.DataFrame, set[str], set[str]]:
    """(live.memory_row_hashes of the published memory rows, ids upserted, ids gone) against
    the previous hashes; with `redone`, only those ids' rows are hashed and compared (every
    other row is as it was: hashing 100k rows and joining them cost ~25 ms a micro-batch)."""
    fresh_rows, before = live.among((published, previous), redone)
    fresh = live.memory_row_hashes(fresh_rows)
    upserted = live.upserted_ids(before, fresh)
    gone = set(before.join(fresh, on="id", how="anti").get_column("id").to_list())
    if redone is None:
        return fresh, upserted, gone
    kept = previous.filter(~pl.col("id").is_in(redone.implode()))
    return with_rows_inserted(kept, fresh), upserted, gone


def stepped(
    state: WatchState, memories: pl.DataFrame, texts: pl.DataFrame, fingerprints: pl.DataFrame, vectors: np.ndarray, manual_log_path: Path, settings: Settings,
    redone: pl.Series | None = None, moved: set[str] | None = None,
) -> tuple[WatchState, Delta, dict[str, Any]]:
    """Link the current memories against the state's index and build the delta. `vectors`:
    the memories' context vectors as unit rows (links.unit_rows), row-aligned. `redone`: when
    every other memory's row and fingerprint are as the state has them, the ids read again,
    new, fingerprinted again or gone (live.relinked, row_hashes_after); `moved`: ids whose
    vector is not the state's, whatever their fingerprint (linked again)."""
    published = published_memories(memories)
    index = state.index
    if settings.auto_discover:
        result = live.relinked(index, memories, vectors, texts, settings.scoring, fingerprints, units=vectors, redone=redone, moved=moved or set())
        new_index, affected, pairs = result.index, result.affected, result.pairs_scored
        deleted = result.deleted
    else:
        # AUTO_DISCOVER_ENABLED=false: memories are recorded, not linked; links at a deleted
        # memory go; the next batch run links what came in.
        deleted = set(index.fingerprints.get_column("id").to_list()) - set(fingerprints.get_column("id").to_list())
        ends = live.index_ends(index)
        kept, kept_ends = rows_apart(index.scored, ends.scored, deleted)
        capped, capped_ends = rows_apart(index.capped, ends.capped, deleted)
        new_index = live.LinkIndex(memories, vectors, texts, index.fingerprints.join(fingerprints.select("id"), on="id", how="semi"), kept, capped,
                                   ends=live.IndexEnds(kept_ends, capped_ends))
        affected, pairs = deleted, 0
    manual = manual_frame(manual_log_path, memories, state.base_run)
    linked = affected | live.changed_manual_ids(state.manual, manual)
    row_hashes, upserted, gone = row_hashes_after(state.row_hashes, published, redone)
    rows = live.published_rows(new_index.capped, manual, linked, state.base_run, live.index_ends(new_index).capped) if linked else pl.DataFrame(schema=RELATIONSHIP_SCHEMA)
    delta = delta_frames(published, upserted, gone | deleted, linked, rows)
    new_state = replace(
        state, index=new_index, manual=manual, row_hashes=row_hashes,
        memories_since=state.memories_since | upserted | gone | deleted, linked_since=state.linked_since | linked,
    )
    return new_state, delta, {"memories": memories.height, "upserted": len(upserted), "deleted": len(gone | deleted), "linked": len(linked), "links": rows.height, "pairs_scored": pairs}


def checkpoint_delta(state: WatchState) -> Delta:
    """Everything changed since the snapshot as one delta: what a reader needs besides it."""
    memories = published_memories(state.index.memories)
    present = set(memories.get_column("id").to_list())
    linked = set(state.linked_since)
    rows = live.published_rows(state.index.capped, state.manual, linked, state.base_run, live.index_ends(state.index).capped) if linked else pl.DataFrame(schema=RELATIONSHIP_SCHEMA)
    delta = delta_frames(memories, set(state.memories_since) & present, set(state.memories_since) - present, linked, rows)
    recomputed = np.flatnonzero(memories.get_column("id").is_in(pl.Series(sorted(state.vectors_since), dtype=pl.String).implode()).to_numpy())
    embeddings = embedding_rows(memories.get_column("id").gather(recomputed), state.index.vectors[recomputed])
    return replace(delta, rejects=state.rejects, embeddings=embeddings)


def with_vectors(state: WatchState, delta: Delta, ids: pl.Series, vectors: np.ndarray) -> tuple[WatchState, Delta]:
    """The delta carries the vectors computed again (`ids`, row-aligned `vectors`): retrieval
    reads them over the snapshot's; the state remembers them for the next checkpoint."""
    return replace(state, vectors_since=state.vectors_since | set(ids.to_list())), replace(delta, embeddings=embedding_rows(ids, vectors))


def vectors_unlike(memories: pl.DataFrame, vectors: np.ndarray, published: pl.DataFrame) -> np.ndarray:
    """Positions of the memories whose vector is not the one `published` (the snapshot's
    embeddings) holds for their id: new ones, and those whose text or session changed."""
    if memories.height == 0:
        return np.zeros(0, dtype=np.int64)
    at, same = incremental.published_alike(memories.get_column("id"), vectors, published, tolerance=1e-6)
    alike = np.zeros(memories.height, dtype=bool)
    alike[at[same]] = True
    return np.flatnonzero(~alike)


def advanced(state: WatchState, changed: list[str], settings: Settings, manual_log_path: Path, vectors_for: VectorSource) -> Step:
    """One micro-batch: re-read the changed stores (appended lines only where it can), then
    embed, link and build the delta of what changed. The state is consumed: its vector
    matrices are moved and filled in place (buffer_rows), so it is not stepped twice."""
    start = time.perf_counter()
    batch = state.batch + 1
    dim = embed.model_dim(settings.embedding.model)
    stores = dict(state.stores)
    for name in changed:
        stores[name] = refreshed(stores[name], settings.max_content_bytes, dim, batch)
    memories, rejects = current_memories(stores)
    index = state.index
    # The texts read now are embedded on a second thread while this one works out the
    # batch's rows: on 2 cores a micro-batch's encode (one torch thread, encoders.py) then
    # costs little of its latency.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed") as pool:
        read = texts_read(memories, stores, batch, dim)
        early = pool.submit(vectors_for, read.unprovided.select("text_hash", "text")) if read.unprovided.height else None
        rows = batch_rows(index, memories, batch)
        touched = rows.touched
        # a row this batch did not read has the content it had: its own vector stands
        reusable = (touched.previous_of >= 0) & memories.select((pl.col("_batch") != batch).fill_null(True)).to_series().to_numpy()
        at = np.flatnonzero(reusable)
        read_done = time.perf_counter()
        contents, vector_stats = content_vectors_of(memories, stores, at, touched.previous_of[at], state.content_vectors, dim, prefetched(early, vectors_for),
                                                    out=buffer_rows(state.content_vectors, memories.height, dim), sources=read)
    embed_done = time.perf_counter()
    # a fresh row's vector as the index had it, before the buffer it lives in is filled again
    known = touched.fresh[touched.previous_of[touched.fresh] >= 0]
    known_before = index.vectors[touched.previous_of[known]].copy()
    # the index keeps unit rows, as scoring reads them: only the fresh rows are normalised
    vectors = context_vectors_around(memories, contents, index.vectors, touched, finish=links.unit_rows,
                                     out=buffer_rows(index.vectors, memories.height, dim))
    # a store that re-embeds a memory without changing its text moves it (and its session's context)
    moved = set(memories.get_column("id").gather(known[np.any(vectors[known] != known_before, axis=1)]).to_list())
    state = replace(state, stores=stores, batch=batch, content_vectors=contents)
    context_done = time.perf_counter()
    new_state, delta, stats = stepped(state, memories, rows.texts, rows.fingerprints, vectors, manual_log_path, settings, rows.redone, moved)
    new_state, delta = with_rejects(new_state, delta, rejects)
    new_state, delta = with_vectors(new_state, delta, memories.get_column("id").gather(touched.fresh), vectors[touched.fresh])
    done = time.perf_counter()
    # each stage's seconds: the watcher logs them per micro-batch
    stats.update(vector_stats, vectors=len(touched.fresh), seconds=round(done - start, 4), read_s=round(read_done - start, 4), embed_s=round(embed_done - read_done, 4),
                 context_s=round(context_done - embed_done, 4), link_s=round(done - context_done, 4), batch=batch)
    return Step(new_state, delta, stats)


def seeded(settings: Settings, base_run: str, snapshot: dict[str, pl.DataFrame], manual_log_path: Path, vectors_for: VectorSource) -> Step:
    """The state over a freshly published snapshot: every store read whole, vectors taken
    from the snapshot where a memory's fingerprint is the snapshot's, links from its state;
    the step's delta holds whatever changed in the stores since that snapshot's run read them.

    `snapshot`: its tables `memories`, `relationships`, `embeddings`, `fingerprints`, `scored_links`."""
    dim = embed.model_dim(settings.embedding.model)
    stores = {store.name: read_whole(store, settings.max_content_bytes, dim, 0) for store in settings.stores}
    memories, rejects = current_memories(stores)
    empty_texts = pl.DataFrame(schema={"id": pl.String, "text": pl.String, "text_hash": pl.String})
    texts = hashed_texts(memories)
    fingerprints = incremental.memory_fingerprints(memories, texts)
    # the snapshot keeps vectors with session context mixed in; own vectors come from the
    # embedding cache the run just filled (or the stores that provide them)
    nothing = np.zeros(0, dtype=np.int64)
    contents, vector_stats = content_vectors_of(memories, stores, nothing, nothing, np.zeros((0, dim), np.float32), dim, vectors_for)
    vectors = links.unit_rows(context_vectors(memories, contents))
    scored = snapshot["scored_links"].cast(RELATIONSHIP_SCHEMA)
    # the snapshot's copy keys now, not in the first micro-batch: without them that batch caps
    # every link again (~7 s at 100k memories, which every append in that time waited for)
    # and the links' ends as codes (~0.2 s), which the first micro-batch would make otherwise
    capped = live.capped(scored, snapshot["memories"], settings.scoring)
    index = live.LinkIndex(memories.head(0), np.zeros((0, dim), np.float32), empty_texts, snapshot["fingerprints"], scored,
                           capped, copy_keys=live_cap.copy_keys(snapshot["memories"]), ends=live.IndexEnds.of(scored, capped),
                           common_terms=namespace_terms.common_terms(snapshot["memories"]))  # what the snapshot's links weighed
    snapshot_memories = snapshot["memories"]
    published = published_memories(memories)
    if set(snapshot_memories.columns) == set(published.columns):
        snapshot_memories = snapshot_memories.select(published.columns).cast(published.schema)
    manual = snapshot["relationships"].filter(pl.col("origin") == "manual").cast(RELATIONSHIP_SCHEMA)
    state = WatchState(stores, index, manual, live.memory_row_hashes(snapshot_memories), 0, base_run, contents, snapshot["rejects"])
    unlike = vectors_unlike(memories, vectors, snapshot["embeddings"])
    # linked again where the snapshot's vector is another (new ids are so by their fingerprints)
    moved = set(memories.get_column("id").gather(unlike).to_list())
    new_state, delta, stats = stepped(state, memories, texts, fingerprints, vectors, manual_log_path, settings, moved=moved)
    new_state, delta = with_rejects(new_state, delta, rejects)
    new_state, delta = with_vectors(new_state, delta, memories.get_column("id").gather(unlike), vectors[unlike])
    stats.update(vector_stats, vectors=len(unlike), batch=0)
    return Step(new_state, delta, stats)
