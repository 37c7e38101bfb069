"""Sentence encoders: torch (sentence-transformers, CPU or CUDA, float32 or bfloat16) and
onnxruntime (CPU, float32).

torch, sentence_transformers and onnxruntime are imported inside functions: read-only CLI
commands import this package, and a run whose texts are all cached never loads a model.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import math
import os
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Callable, Protocol

import numpy as np

from crosstier.transforms.embed.model import EmbeddingError, ModelInfo, model_info, set_offline

Progress = Callable[[int, int, float], None]  # (batches done, batches in all, texts per second)

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "torch", "onnx")
PRECISIONS = ("auto", "fp32", "bf16")
# Texts per forward pass. Texts are sorted by length first, so a bigger batch adds little
# padding; a GPU wants big ones. CPU 128: with bf16 on AMX, 1000 short texts (~58 characters)
# took 1.62-1.74 s in batches of 64, 1.29-1.56 s in 128s and 1.37-1.48 s in 256s (beside
# nothing else, OMP_WAIT_POLICY=PASSIVE as `ctc watch` sets it); in float32 2.93-3.05 s,
# 2.78-2.90 s and 3.32-3.41 s (2 cores, 2026-12-04). Earlier: 64 beat 32 (0.86 s / 1.06 s).
DEFAULT_BATCH_SIZE = {"cpu": 128, "cuda": 256}
ONNX_OPSET = 17
# Below this many texts a CPU forward pass runs on one thread when OpenMP's idle threads sleep
# (OMP_WAIT_POLICY=PASSIVE, as `ctc watch` sets it): waking the other thread for each of the
# pass's many small parallel regions cost more than it saved. bf16 on 2 cores with AMX
# (2026-12-05): 8 texts 24 ms on one thread against 31 on two, 16 texts 37 against 43, 32 at
# parity, 128 texts 248 against 156. With spinning threads (OpenMP's default) two stay faster
# (8 texts 19 ms against 26), so there the setting is left alone.
ONE_THREAD_BELOW = 32
# Whether "auto" picks onnxruntime on CPU. The issue asks for onnx as the CPU default only when
# it reaches 1.8x the bare torch encode rate; bench/embed.py measures it (see docs/embedding.md).
# On 2 cores float32 torch already runs at about half the CPU's float32 peak, and onnxruntime's
# CPU kernels are float32 only: measured at parity, so onnx is not the default (bf16 torch is
# the faster CPU path; docs/embedding.md).
ONNX_IS_CPU_DEFAULT = False

logger = logging.getLogger(__name__)


class _Backend(Protocol):
    dim: int

    def encode_batch(self, texts: list[str]) -> np.ndarray: ...


def resolve_device(device: str) -> str:
    """cpu or cuda: `auto` picks cuda when torch sees a GPU; `cuda` without one is an error."""
    if device not in DEVICES:
        raise EmbeddingError(f"embedding device {device!r} is unknown (known: {', '.join(DEVICES)})")
    if device == "cpu":
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise EmbeddingError("EMBED_DEVICE=cuda but torch sees no CUDA device (torch.cuda.is_available() is False); use auto or cpu")
    return "cpu"


def resolve_backend(backend: str, device: str, info: ModelInfo) -> str:
    """torch or onnx for `device`: onnx runs on CPU only and only for models it reproduces."""
    if backend not in BACKENDS:
        raise EmbeddingError(f"embedding backend {backend!r} is unknown (known: {', '.join(BACKENDS)})")
    if backend == "onnx":
        if device != "cpu":
            raise EmbeddingError("EMBED_BACKEND=onnx runs on CPU only; use EMBED_DEVICE=cpu or EMBED_BACKEND=torch")
        if not info.onnx_ready:
            raise EmbeddingError(f"model {info.model_id} cannot run on the onnx backend (it needs a tokenizer.json and transformer + mean pooling only); use EMBED_BACKEND=torch")
        return "onnx"
    if backend == "torch" or device != "cpu":
        return "torch"
    return "onnx" if ONNX_IS_CPU_DEFAULT and info.onnx_ready else "torch"


@functools.cache
def cpu_has_fast_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware: AVX-512 BF16 dot products,
    with or without AMX tiles. Both run bf16 autocast well over the float32 rate (AMX 2.0-2.6x;
    a 2-core AMD EPYC with AVX-512 BF16 and no AMX 2.4-2.6x, bench/embed.py); without them
    oneDNN emulates bf16, which is slower than float32."""
    import torch

    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    try:
        return probe is not None and bool(probe())
    except RuntimeError:  # a torch build without the probe's kernels
        return False


def resolve_precision(precision: str, device: str, backend: str) -> str:
    """fp32 or bf16 for a resolved device and backend.

    `auto` picks bf16 only for torch on a CPU with bf16 in hardware (cpu_has_fast_bf16):
    there it ran 2-2.6x the float32 rate with vectors at cosine >= 0.9999 to float32
    (bench/embed.py). Elsewhere float32 stays: emulated bf16 is slower, and on CUDA bf16 has
    not been measured here.
    """
    if precision not in PRECISIONS:
        raise EmbeddingError(f"embedding precision {precision!r} is unknown (known: {', '.join(PRECISIONS)})")
    if precision == "bf16" and backend == "onnx":
        raise EmbeddingError("EMBED_PRECISION=bf16 needs EMBED_BACKEND=torch: onnxruntime's CPU kernels have no bfloat16 matrix multiply")
    if precision != "auto":
        return precision
    return "bf16" if backend == "torch" and device == "cpu" and cpu_has_fast_bf16() else "fp32"


def _quiet_transformers() -> None:
    """Silence the weight-loading progress bars; progress is ours to log."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


class _TorchBackend:
    """sentence-transformers on torch: the reference implementation, CPU or CUDA.

    bf16 runs the model under autocast: matrix multiplies in bfloat16, while layer norms,
    softmax and the pooled vector stay float32.
    """

    def __init__(self, info: ModelInfo, device: str, precision: str = "fp32") -> None:
        set_offline()
        _quiet_transformers()
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(info.path), device=device, local_files_only=True)
        self.model.max_seq_length = info.max_seq_length
        self.dim = int(self.model.get_embedding_dimension())
        self.device, self.precision = device, precision
        if precision == "bf16":
            bf16_linear_weights(self.model)

    def encode_batch(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of one batch."""
        import torch

        with torch.autocast(device_type=self.device, dtype=torch.bfloat16, enabled=self.precision == "bf16"), _threads_for(self.device, len(texts)):
            vectors = self.model.encode(texts, batch_size=len(texts), convert_to_tensor=True, show_progress_bar=False)
        # normalised here, in float32: sentence-transformers would normalise the bf16 tensor
        return _unit(vectors.float().cpu().numpy())


# one small pass at a time changes torch's thread count: two interleaved would restore each other's
_THREADS_LOCK = threading.Lock()


@contextlib.contextmanager
def _threads_for(device: str, texts: int):
    """torch on one thread for a small CPU pass where idle OpenMP threads sleep (ONE_THREAD_BELOW)."""
    if device != "cpu" or texts >= ONE_THREAD_BELOW or os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        yield
        return
    import torch

    with _THREADS_LOCK:
        before = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(before)


def bf16_linear_weights(model) -> None:  # model: torch.nn.Module
    """Store every Linear layer's weight and bias in bfloat16, once.

    Autocast casts them to bfloat16 on every call and forgets the copies when its region
    ends, so each micro-batch of the watcher paid for the casts again: the same vectors, bit
    for bit (autocast casts a Linear's inputs to bfloat16 either way), and 8 texts encoded in
    31 ms instead of 39 (2 cores with AMX). Only under autocast: float32 inputs cannot meet
    bfloat16 weights outside it. Embeddings and layer norms keep float32, as autocast reads them."""
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            for parameter in module.parameters(recurse=False):
                parameter.data = parameter.data.to(torch.bfloat16)


def onnx_path(info: ModelInfo, cache_dir: Path) -> Path:
    """Where the ONNX export of a model lives in the cache folder."""
    from crosstier.transforms.embed.cache import model_slug

    return cache_dir / "onnx" / f"{model_slug(info.model_id)}-opset{ONNX_OPSET}.onnx"


def export_onnx(info: ModelInfo, target: Path) -> Path:
    """Export the model's transformer to ONNX at `target`, atomically; reuse an existing export."""
    if target.is_file():
        return target
    set_offline()
    _quiet_transformers()
    import torch
    from transformers import AutoModel

    # eager attention traces into plain ops that onnxruntime fuses; sdpa traces less cleanly
    model = AutoModel.from_pretrained(str(info.path), attn_implementation="eager", local_files_only=True).eval()
    accepted = inspect.signature(model.forward).parameters
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted]

    class LastHidden(torch.nn.Module):
        """Called with keyword arguments: a BERT forward's positional order is not its input order."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state

    sample = {n: torch.ones(2, 8, dtype=torch.long) for n in names}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".tmp-{uuid.uuid4().hex}-{target.name}")
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # tracer and legacy-exporter notices: expected here
            torch.onnx.export(
                LastHidden(),
                (),
                str(tmp),
                kwargs=sample,
                input_names=names,
                output_names=["last_hidden_state"],
                dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]},
                opset_version=ONNX_OPSET,
                dynamo=False,
            )
        _fuse_bert(tmp, model.config)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _fuse_bert(path: Path, config) -> None:  # config: transformers.PretrainedConfig
    """Rewrite a BERT export in place with onnxruntime's fused attention, GELU and layer norms.

    The fused graph computes the same function (cosine 1.000 to torch) and ran 1.3-2x
    faster than the plain export on a busy 2-core CPU. Other architectures keep the plain graph.
    """
    if getattr(config, "model_type", None) != "bert":
        return
    from onnxruntime.transformers.optimizer import optimize_model

    fused = optimize_model(str(path), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size)
    fused.save_model_to_file(str(path))


class _OnnxBackend:
    """onnxruntime on CPU + `tokenizers` + mean pooling + normalisation: the same vectors, faster."""

    def __init__(self, info: ModelInfo, cache_dir: Path) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(info.path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=info.max_seq_length)
        pad = self.tokenizer.padding or {"pad_id": 0, "pad_token": "[PAD]"}
        # pad to the longest text of the batch, not to the fixed length tokenizer.json may carry
        self.tokenizer.enable_padding(pad_id=pad["pad_id"], pad_token=pad["pad_token"])
        self.session = self._session(info, onnx_path(info, cache_dir))
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.dim = int(info.dim or self.session.get_outputs()[0].shape[-1])

    @staticmethod
    def _session(info: ModelInfo, path: Path):  # -> onnxruntime.InferenceSession
        """A session on the cached export; a damaged export is removed and exported again."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        # Idle worker threads sleep instead of spinning: on a shared machine spinning steals
        # the cores the other thread needs (measured 1.3-1.7x faster on a busy 2-core machine).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        export_onnx(info, path)
        try:
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors for a bad file
            logger.warning("ONNX export %s is unreadable (%s); exporting it again", path, exc)
            path.unlink(missing_ok=True)
            export_onnx(info, path)
            return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def encode_batch(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of one batch: mean of token states under the attention mask."""
        encoded = self.tokenizer.encode_batch(texts)
        feeds = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        hidden = self.session.run(None, {n: feeds[n] for n in self.inputs})[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        return _unit(pooled)


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero), as float32."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0, 1, norms)).astype(np.float32)


class Encoder:
    """A sentence encoder. Weights load on first use, so a run whose texts are all cached
    never imports torch; `load()` loads them now."""

    def __init__(self, info: ModelInfo, *, device: str, backend: str, cache_dir: Path | None, batch_size: int | None = None, precision: str = "auto") -> None:
        if device not in DEVICES:
            raise EmbeddingError(f"embedding device {device!r} is unknown (known: {', '.join(DEVICES)})")
        if backend not in BACKENDS:
            raise EmbeddingError(f"embedding backend {backend!r} is unknown (known: {', '.join(BACKENDS)})")
        if precision not in PRECISIONS:
            raise EmbeddingError(f"embedding precision {precision!r} is unknown (known: {', '.join(PRECISIONS)})")
        self.info = info
        self.model_id = info.model_id
        self.cache_dir = cache_dir
        self._device_request, self._backend_request, self._precision_request = device, backend, precision
        self._batch_size = batch_size
        self._device: str | None = None
        self._backend: str | None = None
        self._precision: str | None = None
        self._impl: _Backend | None = None
        self._lock = threading.Lock()  # mapped tasks may share one encoder across threads

    def __repr__(self) -> str:
        return (
            f"Encoder(model_id={self.model_id!r}, device={self._device or self._device_request!r}, "
            f"backend={self._backend or self._backend_request!r}, precision={self._precision or self._precision_request!r})"
        )

    @property
    def device(self) -> str:
        """cpu or cuda (resolving `auto` imports torch)."""
        if self._device is None:
            self._device = resolve_device(self._device_request)
        return self._device

    @property
    def backend(self) -> str:
        """torch or onnx."""
        if self._backend is None:
            self._backend = resolve_backend(self._backend_request, self.device, self.info)
        return self._backend

    @property
    def precision(self) -> str:
        """fp32 or bf16."""
        if self._precision is None:
            self._precision = resolve_precision(self._precision_request, self.device, self.backend)
        return self._precision

    @property
    def dim(self) -> int:
        """Vector length; from the configs, or from the loaded model when they cannot tell."""
        return self.info.dim if self.info.dim is not None else self.load()._impl.dim  # type: ignore[union-attr]

    @property
    def batch_size(self) -> int:
        """Texts per forward pass: the configured size or the device's default."""
        return self._batch_size or DEFAULT_BATCH_SIZE[self.device]

    def load(self) -> "Encoder":
        """Load the weights (and export to ONNX once, if that backend is used)."""
        precision = self.precision  # resolved before loading: a bf16 request onnx cannot run fails here
        with self._lock:
            if self._impl is None:
                if self.backend == "onnx":
                    cache_dir = self.cache_dir or Path(os.environ.get("TMPDIR", "/tmp")) / f"ctc-onnx-{os.getuid()}"
                    self._impl = _OnnxBackend(self.info, cache_dir)
                else:
                    self._impl = _TorchBackend(self.info, self.device, precision)
        return self

    def encode(self, texts: list[str], *, batch_size: int | None = None, progress: Progress | None = None) -> np.ndarray:
        """n x dim float32 unit vectors, in input order (batched longest first to minimise padding)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        impl = self.load()._impl
        assert impl is not None
        size = batch_size or self.batch_size
        # Longest first: neighbours in a batch have similar lengths so padding is small,
        # and on a GPU an out-of-memory shows on the first batch, not the last.
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), impl.dim), dtype=np.float32)
        batches = math.ceil(len(texts) / size)
        start = time.perf_counter()
        for number in range(batches):
            rows = order[number * size : (number + 1) * size]
            out[rows] = impl.encode_batch([texts[i] for i in rows])
            if progress is not None:
                done = min((number + 1) * size, len(texts))
                progress(number + 1, batches, done / max(time.perf_counter() - start, 1e-9))
        return out


def import_backend_libraries(backend: str = "auto", device: str = "auto") -> None:
    """Import the libraries an encoder of this backend and device loads (not its weights):
    `ctc run` does it while Prefect's temporary server starts, when the process only waits.
    sentence-transformers alone takes ~4.7 s to import on 2 cores, torch ~1.9 s. Errors are
    left for the encoder to raise when it loads, with its own message."""
    onnx = backend == "onnx" or (backend == "auto" and device == "cpu" and ONNX_IS_CPU_DEFAULT)
    with contextlib.suppress(Exception):
        if onnx:
            import onnxruntime  # noqa: F401
            import tokenizers  # noqa: F401
        else:
            import sentence_transformers  # noqa: F401


def load_encoder(model: str = "all-MiniLM-L6-v2", *, device: str = "auto", backend: str = "auto", cache_dir: Path | None = None, batch_size: int | None = None, precision: str = "auto") -> Encoder:
    """An encoder for `model` (bundled name, local folder or cached hub name); fails fast on a bad name."""
    return Encoder(model_info(model), device=device, backend=backend, cache_dir=cache_dir, batch_size=batch_size, precision=precision)
