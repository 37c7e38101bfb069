"""One settings object: correlator.toml, then environment overrides, validated at start."""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from crosstier.core.vocabulary import TIERS

STORE_KINDS = ("jsonl", "parquet", "markdown", "sqlite", "postgres")
WEIGHT_NAMES = ("semantic", "co_occurrence", "temporal", "cross_reference")
DEFAULT_CONFIG = "correlator.toml"


class ConfigError(ValueError):
    """An invalid configuration; the message names the key and the problem."""


@dataclass(frozen=True)
class StoreConfig:
    name: str
    kind: str
    path: str | None = None  # file, glob or folder (resolved against the config's folder)
    tier: str | None = None  # default tier when records carry none
    tier_column: str | None = None  # the record field holding the tier (default "tier")
    namespace: str | None = None  # default namespace when records carry none
    table: str | None = None  # sqlite / postgres
    query: str | None = None  # sqlite / postgres
    dsn_env: str | None = None  # postgres: the environment variable holding the DSN
    chunk_rows: int = 5000  # postgres: rows fetched per round trip
    embedding_column: str | None = None  # a column of provided vectors, if any
    timezone: str | None = None  # markdown: the zone of times that name none (IANA name or UTC offset); UTC when unset
    notify_channel: str | None = None  # postgres: `ctc watch` LISTENs on it and re-reads the store when notified
    cursor_column: str | None = None  # postgres: `ctc watch` polls max(column), count(*) and re-reads when they move


@dataclass(frozen=True)
class ScoringConfig:
    min_correlation_score: float = 0.6
    max_links_per_memory: int = 50
    tau_days: float = 7.0
    max_references: int = 1
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "semantic": 0.40,
            "co_occurrence": 0.25,
            "temporal": 0.15,
            "cross_reference": 0.20,
        }
    )
    # A term found in more than this share of a namespace's memories is too common to join
    # candidate pairs on (pairs sharing it are found by an exact cosine search at the score
    # bound instead); it still counts in co_occurrence.
    max_term_share: float = 0.05
    # Classification thresholds.
    contradiction_min_semantic: float = 0.6
    # Share of subject terms (values dropped, opposite words folded) two contradicting statements must share.
    contradiction_min_overlap: float = 0.5
    # A negation whose claim the other side states with one word swapped ("no chef preparing a meal" /
    # "a chef is preparing some food") contradicts it only at this cosine or above (a paraphrase, not
    # another thing). Fitted on SICK's training pairs (docs/links.md).
    negation_paraphrase_min_cosine: float = 0.75
    sequence_max_hours: float = 24.0
    # The calibration file (`ctc calibrate` writes one) mapping raw cosine and term overlap onto
    # the evidence scale; None: the bundled calibration for all-MiniLM-L6-v2.
    calibration: str | None = None
    # A cosine the model cannot vouch for makes no link on its own: when either text has less
    # than this share of its letters in Latin script (the bundled model is English), the pair
    # needs an explicit reference or co_occurrence >= unvouched_min_co_occurrence as well.
    # Set 0 with a multilingual EMBEDDING_MODEL.
    min_model_script_share: float = 0.5
    unvouched_min_co_occurrence: float = 0.2
    # From this many memories in a namespace, the cosine range search for pairs that qualify
    # on similarity alone (lowered thresholds) uses an approximate inverted-file index that
    # scans `ann_probes` of its ~2*sqrt(n) lists instead of all n^2 pairs; below it the search
    # is exact. 50,000 exact takes ~10 s on 2 cores, 100,000 ~40 s (docs/links.md, Scale).
    ann_min_memories: int = 50_000
    ann_probes: int = 16


@dataclass(frozen=True)
class EmbeddingConfig:
    model: str = "all-MiniLM-L6-v2"
    device: str = "auto"  # auto | cpu | cuda
    backend: str = "auto"  # auto | torch | onnx
    precision: str = "auto"  # auto | fp32 | bf16 (auto: bf16 for torch on a CPU with AMX)
    batch_size: int | None = None  # None: a default per device
    cache_dir: str | None = None  # None: <output.dir>/cache


@dataclass(frozen=True)
class Settings:
    output_dir: Path
    stores: tuple[StoreConfig, ...]
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    enabled: bool = True
    auto_discover: bool = True
    max_content_bytes: int = 64 * 1024
    config_path: Path | None = None

    def with_output(self, output_dir: str | Path) -> "Settings":
        return replace(self, output_dir=Path(output_dir).resolve())


def _bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{key}: expected true or false, got {raw!r}")


def _number(key: str, raw: object, *, integer: bool = False, low: float | None = None, high: float | None = None) -> float:
    if isinstance(raw, bool):
        raise ConfigError(f"{key}: expected a number, got {raw!r}")
    try:
        value = int(raw) if integer else float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected {'an integer' if integer else 'a number'}, got {raw!r}") from None
    if not integer and not math.isfinite(value):
        raise ConfigError(f"{key}: expected a finite number, got {raw!r}")
    if low is not None and value < low:
        raise ConfigError(f"{key}: must be >= {low}, got {value}")
    if high is not None and value > high:
        raise ConfigError(f"{key}: must be <= {high}, got {value}")
    return value


PG_NAME_BYTES = 63  # PostgreSQL truncates longer identifiers: a longer channel would never match the trigger's


def _store(index: int, raw: dict, base: Path, names: set[str]) -> StoreConfig:
    where = f"stores[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table, got {raw!r}")
    known = set(StoreConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted(known))})")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}.name: required, a non-empty string")
    where = f"stores[{index}] ({name})"
    if name in names:
        raise ConfigError(f"{where}.name: duplicate store name {name!r}")
    kind = raw.get("kind")
    if kind not in STORE_KINDS:
        raise ConfigError(f"{where}.kind: unknown store kind {kind!r} (known: {', '.join(STORE_KINDS)})")
    tier = raw.get("tier")
    if tier is not None and tier not in TIERS:
        raise ConfigError(f"{where}.tier: unknown tier {tier!r} (known: {', '.join(TIERS)})")
    path = raw.get("path")
    if kind == "postgres":
        if not raw.get("dsn_env"):
            raise ConfigError(f"{where}.dsn_env: required for a postgres store (the environment variable holding the DSN)")
        if not (raw.get("table") or raw.get("query")):
            raise ConfigError(f"{where}.table: a postgres store needs a table or a query")
    else:
        if not isinstance(path, str) or not path.strip():
            raise ConfigError(f"{where}.path: required for a {kind} store")
        if not os.path.isabs(path):
            path = str(base / path)
        if kind == "sqlite" and not (raw.get("table") or raw.get("query")):
            raise ConfigError(f"{where}.table: a sqlite store needs a table or a query")
    for key in ("notify_channel", "cursor_column"):
        value = raw.get(key)
        if value is None:
            continue
        if kind != "postgres":
            raise ConfigError(f"{where}.{key}: only a postgres store has one (file stores are followed by their files)")
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}.{key}: expected a non-empty name, got {value!r}")
        if len(value.encode("utf-8")) > PG_NAME_BYTES or "\x00" in value:
            raise ConfigError(f"{where}.{key}: not a PostgreSQL name (at most {PG_NAME_BYTES} bytes, no NUL): {value!r}")
    chunk_rows = int(_number(f"{where}.chunk_rows", raw.get("chunk_rows", 5000), integer=True, low=1))
    zone = raw.get("timezone")
    if zone is not None:
        from crosstier.core.zones import zone_named

        if not isinstance(zone, str) or zone_named(zone) is None:
            raise ConfigError(f"{where}.timezone: unknown time zone {zone!r} (an IANA name such as Asia/Taipei, or an offset such as UTC+8)")
    names.add(name)
    return StoreConfig(**{**raw, "path": path, "chunk_rows": chunk_rows})


def _scoring(raw: dict, base: Path = Path.cwd()) -> ScoringConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"scoring: expected a table, got {raw!r}")
    defaults = ScoringConfig()
    known = set(ScoringConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"scoring.{unknown[0]}: unknown key (known: {', '.join(sorted(known))})")
    weights_raw = raw.get("weights", defaults.weights)
    if not isinstance(weights_raw, dict):
        raise ConfigError(f"scoring.weights: expected a table of numbers, got {weights_raw!r}")
    unknown_w = sorted(set(weights_raw) - set(WEIGHT_NAMES))
    if unknown_w:
        raise ConfigError(f"scoring.weights.{unknown_w[0]}: unknown weight (known: {', '.join(WEIGHT_NAMES)})")
    weights = {}
    for name in WEIGHT_NAMES:
        if name not in weights_raw:
            raise ConfigError(f"scoring.weights.{name}: missing")
        weights[name] = _number(f"scoring.weights.{name}", weights_raw[name], low=0.0, high=1.0)
    total = sum(weights.values())
    if abs(total - 1.0) > 1e-6:
        raise ConfigError(f"scoring.weights: must sum to 1, they sum to {total:g}")
    return ScoringConfig(
        min_correlation_score=_number("scoring.min_correlation_score", raw.get("min_correlation_score", defaults.min_correlation_score), low=0.0, high=1.0),
        max_links_per_memory=int(_number("scoring.max_links_per_memory", raw.get("max_links_per_memory", defaults.max_links_per_memory), integer=True, low=1)),
        tau_days=_number("scoring.tau_days", raw.get("tau_days", defaults.tau_days), low=1e-9),
        max_references=int(_number("scoring.max_references", raw.get("max_references", defaults.max_references), integer=True, low=1)),
        weights=weights,
        max_term_share=_number("scoring.max_term_share", raw.get("max_term_share", defaults.max_term_share), low=0.0, high=1.0),
        contradiction_min_semantic=_number("scoring.contradiction_min_semantic", raw.get("contradiction_min_semantic", defaults.contradiction_min_semantic), low=0.0, high=1.0),
        contradiction_min_overlap=_number("scoring.contradiction_min_overlap", raw.get("contradiction_min_overlap", defaults.contradiction_min_overlap), low=0.0, high=1.0),
        negation_paraphrase_min_cosine=_number("scoring.negation_paraphrase_min_cosine", raw.get("negation_paraphrase_min_cosine", defaults.negation_paraphrase_min_cosine), low=0.0, high=1.1),
        sequence_max_hours=_number("scoring.sequence_max_hours", raw.get("sequence_max_hours", defaults.sequence_max_hours), low=0.0),
        calibration=_calibration_path(raw.get("calibration"), base),
        min_model_script_share=_number("scoring.min_model_script_share", raw.get("min_model_script_share", defaults.min_model_script_share), low=0.0, high=1.0),
        unvouched_min_co_occurrence=_number("scoring.unvouched_min_co_occurrence", raw.get("unvouched_min_co_occurrence", defaults.unvouched_min_co_occurrence), low=0.0, high=1.0),
        ann_min_memories=int(_number("scoring.ann_min_memories", raw.get("ann_min_memories", defaults.ann_min_memories), integer=True, low=0)),
        ann_probes=int(_number("scoring.ann_probes", raw.get("ann_probes", defaults.ann_probes), integer=True, low=1)),
    )


def _calibration_path(raw: object, base: Path) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise ConfigError(f"scoring.calibration: expected a file path, got {raw!r}")
    return _resolved(raw, base)


def _embedding(raw: dict) -> EmbeddingConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"embedding: expected a table, got {raw!r}")
    known = set(EmbeddingConfig.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"embedding.{unknown[0]}: unknown key (known: {', '.join(sorted(known))})")
    device = raw.get("device", "auto")
    if device not in ("auto", "cpu", "cuda"):
        raise ConfigError(f"embedding.device: expected auto, cpu or cuda, got {device!r}")
    backend = raw.get("backend", "auto")
    if backend not in ("auto", "torch", "onnx"):
        raise ConfigError(f"embedding.backend: expected auto, torch or onnx, got {backend!r}")
    precision = raw.get("precision", "auto")
    if precision not in ("auto", "fp32", "bf16"):
        raise ConfigError(f"embedding.precision: expected auto, fp32 or bf16, got {precision!r}")
    if precision == "bf16" and backend == "onnx":
        raise ConfigError("embedding.precision: bf16 needs backend torch (onnxruntime's CPU kernels are float32 only)")
    batch = raw.get("batch_size")
    if batch is not None:
        batch = int(_number("embedding.batch_size", batch, integer=True, low=1))
    model = raw.get("model", "all-MiniLM-L6-v2")
    if not isinstance(model, str) or not model.strip():
        raise ConfigError("embedding.model: expected a model name or a local path")
    return EmbeddingConfig(model=model, device=device, backend=backend, precision=precision, batch_size=batch, cache_dir=raw.get("cache_dir"))


def _resolved(path: str | None, base: Path) -> str | None:
    """A path from the config, relative to the config file's folder."""
    if path is None or os.path.isabs(path):
        return path
    return str((base / path).resolve())


# Environment variable -> (section, key) it overrides.
ENV_OVERRIDES = {
    "MIN_CORRELATION_SCORE": ("scoring", "min_correlation_score"),
    "MAX_LINKS_PER_MEMORY": ("scoring", "max_links_per_memory"),
    "ANN_MIN_MEMORIES": ("scoring", "ann_min_memories"),
    "EMBEDDING_MODEL": ("embedding", "model"),
    "EMBED_DEVICE": ("embedding", "device"),
    "EMBED_BACKEND": ("embedding", "backend"),
    "EMBED_PRECISION": ("embedding", "precision"),
    "EMBED_BATCH_SIZE": ("embedding", "batch_size"),
    "EMBED_CACHE_DIR": ("embedding", "cache_dir"),
    "CORRELATOR_OUTPUT_DIR": ("output", "dir"),
    "CORRELATOR_ENABLED": ("correlator", "enabled"),
    "AUTO_DISCOVER_ENABLED": ("correlator", "auto_discover"),
    "MAX_CONTENT_BYTES": ("extract", "max_content_bytes"),
    "MIN_MODEL_SCRIPT_SHARE": ("scoring", "min_model_script_share"),
}


def _apply_env(doc: dict, env: dict[str, str]) -> dict:
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    for var, (section, key) in ENV_OVERRIDES.items():
        if var in env and env[var] != "":
            doc.setdefault(section, {})
            if not isinstance(doc[section], dict):
                raise ConfigError(f"{section}: expected a table")
            doc[section][key] = env[var]
    return doc


def settings_from_dict(doc: dict, *, base: Path, env: dict[str, str] | None = None, config_path: Path | None = None) -> Settings:
    """Validated settings from a parsed config document plus environment overrides."""
    env = dict(os.environ) if env is None else env
    doc = _apply_env(doc, env)
    known_sections = {"output", "stores", "scoring", "embedding", "correlator", "extract"}
    unknown = sorted(set(doc) - known_sections)
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown section (known: {', '.join(sorted(known_sections))})")
    output = doc.get("output", {})
    out_dir = output.get("dir", "data/warehouse")
    if not isinstance(out_dir, str) or not out_dir:
        raise ConfigError("output.dir: expected a folder path")
    out_path = Path(out_dir) if os.path.isabs(out_dir) else base / out_dir
    raw_stores = doc.get("stores", [])
    if not isinstance(raw_stores, list):
        raise ConfigError("stores: expected a list of [[stores]] tables")
    names: set[str] = set()
    stores = tuple(_store(i, s, base, names) for i, s in enumerate(raw_stores))
    correlator = doc.get("correlator", {})
    extract = doc.get("extract", {})
    embedding = _embedding(doc.get("embedding", {}))
    return Settings(
        output_dir=out_path.resolve(),
        stores=stores,
        scoring=_scoring(doc.get("scoring", {}), base),
        embedding=replace(embedding, cache_dir=_resolved(embedding.cache_dir, base)),
        enabled=_bool("CORRELATOR_ENABLED", correlator.get("enabled", True)),
        auto_discover=_bool("AUTO_DISCOVER_ENABLED", correlator.get("auto_discover", True)),
        max_content_bytes=int(_number("extract.max_content_bytes", extract.get("max_content_bytes", 64 * 1024), integer=True, low=1)),
        config_path=config_path,
    )


def find_config(path: str | os.PathLike | None = None) -> Path:
    """The config file to use: the given one, $CORRELATOR_CONFIG, or ./correlator.toml."""
    candidate = Path(path or os.environ.get("CORRELATOR_CONFIG") or DEFAULT_CONFIG)
    if not candidate.is_file():
        raise ConfigError(f"config file not found: {candidate} (pass --config FILE or set CORRELATOR_CONFIG)")
    return candidate.resolve()


def load_settings(path: str | os.PathLike | None = None, *, env: dict[str, str] | None = None) -> Settings:
    """Settings from the config file with environment overrides; raises ConfigError naming the bad key."""
    config_path = find_config(path)
    try:
        doc = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{config_path}: not valid TOML: {exc}") from None
    return settings_from_dict(doc, base=config_path.parent, env=env, config_path=config_path)
