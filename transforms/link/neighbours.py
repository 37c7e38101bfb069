"""Neighbours by cosine: the pairs of a namespace whose cosine reaches a per-memory floor.

The similarity source of candidate search (transforms/link/candidates.py, `similarity_pairs`)
asks for every pair (a, b) of a namespace with cos(a, b) >= max(floor[a], floor[b]), one end
among the queries. Two ways to answer, chosen by the namespace's size:

- exact (the default below `ann_min_memories`): blocked float32 matrix products through BLAS,
  tiles of at most _TILE_CELLS cosines so memory stays bounded whatever n is; when every member
  is a query, only the tiles on and above the diagonal (cos(a, b) = cos(b, a)), so each pair is
  computed once. Cost ~ n^2 * d multiply-adds: 100k vectors of 384 dims take ~40 s on 2 cores.
- approximate (from `ann_min_memories` members): an inverted-file index (faiss IndexIVFFlat,
  inner product on unit vectors). k-means puts the members in ~2*sqrt(n) lists; a query scans
  only its `ann_probes` nearest lists, so the cost falls to ~ n^2 * d * probes / lists. A pair
  found has its full cosine (nothing is quantised); a pair missed has its ends in lists far
  apart, which is rare for pairs close enough to pass a floor. Recall against the exact search
  is measured by bench/scale.py --check-recall.

Both return the same shape (a, b) int64 rows with a < b, each pair once.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import numpy as np

_COS_SLACK = 1e-5  # float32 products may differ from the exact pair cosine by this much
_ROWS = 1024  # query rows per tile
_TILE_CELLS = 1 << 24  # cosines per tile (64 MiB of float32)
_QUERY_BLOCK = 16_384  # queries per approximate range search call: bounds its result lists
_TRAIN_PER_LIST = 40  # k-means sample per inverted list (faiss wants at least 39)
_KMEANS_ITERATIONS = 10  # lists only route queries: rough centres cost recall little, and 1M trains in seconds
_SEED = 0
_GATHER = 16_384  # small groups listed per batch
# pairs per gathered cosine chunk: its two float32 blocks and the float64 products (~0.8 MB at
# d = 384) stay in a core's L2 cache; 2048 (12 MB) ran ~1.7x slower (bench/gather.py)
_PAIR_ROWS = 128
_CHECK_ROWS = 16_384  # pairs per call of gathered_cosines' exact_where
_SMALL_GROUP = 256  # a group of at most this many pairs is gathered, not multiplied


def _pairs_at_floor(a: np.ndarray, b: np.ndarray, cos: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """(min, max) rows of the candidate pairs that reach max(floor[a], floor[b]), self pairs dropped."""
    keep = (a != b) & (cos >= np.maximum(floor[a], floor[b]) - _COS_SLACK)
    a, b = a[keep], b[keep]
    return np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)


def exact_pairs(vectors: np.ndarray, members: np.ndarray, queries: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Every pair (query, member) with cosine >= max(floor) of its ends: blocked matmul, exact."""
    if len(members) == 0 or len(queries) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    symmetric = len(queries) == len(members) and np.array_equal(queries, members)
    base = vectors[members]
    low = float(floor[members].min()) - _COS_SLACK  # a cheap first cut; the pair's own floor is checked after
    cols = max(_ROWS, _TILE_CELLS // _ROWS)
    found = []
    for r0 in range(0, len(queries), _ROWS):
        rows = queries[r0:r0 + _ROWS]
        left = base[r0:r0 + _ROWS] if symmetric else vectors[rows]
        for c0 in range(r0 if symmetric else 0, len(members), cols):
            sims = left @ base[c0:c0 + cols].T
            mask = sims >= low
            if symmetric and c0 == r0:
                mask &= np.triu(np.ones(mask.shape, dtype=bool), k=1)  # each pair once, from its lower row
            qi, bi = np.nonzero(mask)
            if len(qi):
                found.append(_pairs_at_floor(rows[qi], members[c0 + bi], sims[qi, bi], floor))
    return _unique_rows(found)


def inverted_lists(n: int) -> int:
    """How many k-means lists an index of n vectors gets: ~2*sqrt(n), at least 1, at most n/39."""
    return max(1, min(int(2 * math.sqrt(n)), n // 39))


def _member_rows(vectors: np.ndarray, members: np.ndarray) -> np.ndarray:
    """The members' vectors as contiguous float32 rows: the array itself when the members are
    all of it (no second copy of 1M rows)."""
    whole = len(members) == len(vectors) and members[0] == 0 and members[-1] == len(vectors) - 1
    return np.ascontiguousarray(vectors if whole else vectors[members], dtype=np.float32)


def _built_index(vectors: np.ndarray, members: np.ndarray, probes: int):
    """An inverted-file index of the members' vectors, trained on a seeded sample."""
    import faiss  # only here: a namespace below ann_min_memories never needs it

    dim = vectors.shape[1]
    base = _member_rows(vectors, members)
    lists = inverted_lists(len(members))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, lists, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = _SEED
    index.cp.niter = _KMEANS_ITERATIONS
    sample = np.sort(np.random.default_rng(_SEED).choice(len(members), min(len(members), _TRAIN_PER_LIST * lists), replace=False))
    index.train(base[sample])
    index.add(base)
    index.nprobe = min(probes, lists)
    return index


_last_index: list[tuple[bytes, object]] = []  # one entry: the index of the last (vectors, members) searched


def _index_of(vectors: np.ndarray, members: np.ndarray, probes: int):
    """The index of these members' vectors, reused while the same ones are searched again (a
    big namespace is scored in blocks of queries against one index: training it once per
    block cost seconds each). The key digests the members and their vectors, so a different
    set never reuses it."""
    digest = hashlib.blake2b(members.tobytes(), digest_size=16)
    digest.update(memoryview(_member_rows(vectors, members)).cast("B"))
    digest.update(str((probes, vectors.shape[1])).encode())
    key = digest.digest()
    if _last_index and _last_index[0][0] == key:
        return _last_index[0][1]
    index = _built_index(vectors, members, probes)
    _last_index[:] = [(key, index)]
    return index


def approximate_pairs(
    vectors: np.ndarray, members: np.ndarray, queries: np.ndarray, floor: np.ndarray, probes: int
) -> np.ndarray:
    """Pairs (query, member) with cosine >= max(floor) of its ends found by an inverted-file range search."""
    if len(members) == 0 or len(queries) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    index = _index_of(vectors, members, probes)
    found = []
    # One range search per distinct query floor (faiss takes one radius per call); few distinct
    # floors exist (timed / untimed), so this is a handful of passes, not one per query.
    for level in np.unique(floor[queries]):
        level_queries = queries[floor[queries] == level]
        for q0 in range(0, len(level_queries), _QUERY_BLOCK):
            rows = level_queries[q0:q0 + _QUERY_BLOCK]
            limits, sims, hits = index.range_search(np.ascontiguousarray(vectors[rows], dtype=np.float32), float(level) - _COS_SLACK)
            a = np.repeat(rows, np.diff(limits).astype(np.int64))
            found.append(_pairs_at_floor(a, members[hits], sims.astype(np.float64), floor))
    return _unique_rows(found)


def similar_pairs(
    vectors: np.ndarray,
    members: np.ndarray,
    queries: np.ndarray,
    floor: np.ndarray,
    *,
    ann_min_memories: int,
    ann_probes: int,
) -> np.ndarray:
    """(a, b) rows, a < b, of the pairs with an end in `queries`, both in `members`, and cosine
    >= max(floor[a], floor[b]): exact below `ann_min_memories` members, approximate from there.

    `vectors` are unit rows; `members` and `queries` index them; `floor` is per row of vectors.
    """
    if len(members) >= ann_min_memories:
        return approximate_pairs(vectors, members, queries, floor, ann_probes)
    return exact_pairs(vectors, members, queries, floor)


def pair_cosines(vectors: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cos(a[i], b[i]) of unit rows, float32 (see gathered_cosines)."""
    return gathered_cosines(vectors, a, b)[0]


def exact_pair_cosines(vectors: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cos(a[i], b[i]) as scoring uses it: each row sum(float64(a) * float64(b)) (see gathered_cosines)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    exact = np.empty(len(a), dtype=np.float64)
    order = np.argsort(a, kind="stable")
    for rows, left, right, product in _gathered(vectors, a, b, order):
        np.multiply(left, right, out=product, dtype=np.float64)
        exact[rows] = product.sum(axis=1)
    return exact


def _gathered(vectors: np.ndarray, a: np.ndarray, b: np.ndarray, rows: np.ndarray):
    """(rows, left vectors, right vectors, a float64 buffer) for each chunk of _PAIR_ROWS of
    `rows`, gathered into buffers reused from chunk to chunk: no page faults per chunk, and
    both blocks and the float64 product stay in cache."""
    size = min(_PAIR_ROWS, len(rows))
    left = np.empty((size, vectors.shape[1]), dtype=np.float32)
    right = np.empty_like(left)
    product = np.empty(left.shape, dtype=np.float64)
    for start in range(0, len(rows), _PAIR_ROWS):
        chunk = rows[start:start + _PAIR_ROWS]
        k = len(chunk)
        np.take(vectors, a[chunk], axis=0, out=left[:k])
        np.take(vectors, b[chunk], axis=0, out=right[:k])
        yield chunk, left[:k], right[:k], product[:k]


def gathered_cosines(
    vectors: np.ndarray, a: np.ndarray, b: np.ndarray,
    exact_where: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """(float32 cosines, exact cosines) of the pairs (a[i], b[i]) of unit rows.

    The exact cosine is what scoring uses, sum(float64(a) * float64(b)) per row: only for the
    pairs `exact_where(positions, float32 cosines)` selects, _CHECK_ROWS at a time, NaN for the
    others (None without exact_where). A row's sum does not depend on the chunk or order it is
    computed in, so a pair has the same bits whichever caller computed it (exact_pair_cosines).
    The selected pairs are gathered again for it: candidate search's bound keeps ~30% of the
    pairs it checks, and the float64 products of all of them cost more than a second gather
    of those (2M random pairs over 100k rows, 28% kept: 2.0 -> 1.4 s).

    The pairs are visited in order of `a`, so consecutive pairs share their left row and most
    right rows sit near each other: the gathers hit cache instead of memory (~1.7x faster on
    the 5M candidate pairs of a 100k namespace than in the order they come)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    out = np.empty(len(a), dtype=np.float32)
    exact = None if exact_where is None else np.full(len(a), np.nan, dtype=np.float64)
    order = np.argsort(a, kind="stable")
    for batch in range(0, len(a), _CHECK_ROWS):
        batch_rows = order[batch:batch + _CHECK_ROWS]
        for rows, left, right, _ in _gathered(vectors, a, b, batch_rows):
            out[rows] = np.einsum("ij,ij->i", left, right)
        if exact_where is not None:
            # asked once per batch, not per cache-sized chunk: the check is numpy over whole arrays
            wanted = batch_rows[exact_where(batch_rows, out[batch_rows])]
            for rows, left, right, product in _gathered(vectors, a, b, wanted):
                np.multiply(left, right, out=product, dtype=np.float64)
                exact[rows] = product.sum(axis=1)
    return out, exact


def grouped_pairs_at_floor(
    left: np.ndarray, left_offsets: np.ndarray, right: np.ndarray, right_offsets: np.ndarray,
    vectors: np.ndarray, floor: float,
) -> np.ndarray:
    """(a, b) rows, a < b, of the pairs of each group g (left[left_offsets[g]:left_offsets[g+1]] x
    the same slice of right) with cosine >= floor.

    A large group is a blocked matrix product (never more than _TILE_CELLS at once). Small
    groups, most of them (a common term in one time bucket: a median of 3 x 3 rows in a 100k
    namespace), cost more in per-product overhead than in arithmetic, so their pairs are listed
    together and their cosines gathered in one pass."""
    n_left, n_right = np.diff(left_offsets), np.diff(right_offsets)
    cells = n_left * n_right
    small = np.flatnonzero((cells > 0) & (cells <= _SMALL_GROUP))
    found = []
    for start in range(0, len(small), _GATHER):  # up to _GATHER groups, <= _SMALL_GROUP pairs each
        groups = small[start:start + _GATHER]
        counts = cells[groups]
        group = np.repeat(groups, counts)
        local = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        a = left[left_offsets[group] + local // n_right[group]]
        b = right[right_offsets[group] + local % n_right[group]]
        keep = (a != b) & (pair_cosines(vectors, a, b) >= floor - _COS_SLACK)
        found.append(np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1))
    for g in np.flatnonzero(cells > _SMALL_GROUP):
        rows = left[left_offsets[g]:left_offsets[g + 1]]
        cols = right[right_offsets[g]:right_offsets[g + 1]]
        base = vectors[cols]
        step = max(1, _TILE_CELLS // len(cols))
        for r0 in range(0, len(rows), step):
            part = rows[r0:r0 + step]
            qi, bi = np.nonzero(vectors[part] @ base.T >= floor - _COS_SLACK)
            a, b = part[qi], cols[bi]
            keep = a != b
            found.append(np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1))
    return np.concatenate(found).astype(np.int64) if found else np.zeros((0, 2), dtype=np.int64)


def _unique_rows(found: list[np.ndarray]) -> np.ndarray:
    """The (a, b) rows once each, sorted, through one int64 key a*n + b."""
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    rows = np.concatenate(found).astype(np.int64)
    if len(rows) == 0:
        return rows.reshape(0, 2)
    width = int(rows.max()) + 1
    keys = np.sort(rows[:, 0] * width + rows[:, 1])  # a sort and a mask: np.unique here takes ~20x longer
    keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    return np.stack([keys // width, keys % width], axis=1)
