"""Config: defaults, environment overrides, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from crosstier.core.config import ConfigError, load_settings, settings_from_dict

STORE = {"name": "episodes", "kind": "jsonl", "path": "episodes.jsonl", "tier": "episodic"}
PG = {"name": "pg", "kind": "postgres", "dsn_env": "AGENT_DSN", "table": "memories"}


def settings(doc: dict, env: dict | None = None):
    return settings_from_dict(doc, base=Path("/base"), env=env or {})


def test_defaults_and_relative_paths():
    s = settings({"stores": [STORE]})
    assert s.scoring.min_correlation_score == 0.6
    assert s.scoring.max_links_per_memory == 50
    assert s.embedding.model == "all-MiniLM-L6-v2"
    assert s.output_dir == Path("/base/data/warehouse")
    assert s.stores[0].path == "/base/episodes.jsonl"
    assert s.enabled and s.auto_discover


def test_a_postgres_store_names_how_the_watcher_follows_it():
    store = settings({"stores": [{**PG, "notify_channel": "memories changed", "cursor_column": "updated_at"}]}).stores[0]
    assert (store.notify_channel, store.cursor_column) == ("memories changed", "updated_at")
    assert settings({"stores": [PG]}).stores[0].notify_channel is None


def test_environment_overrides_the_file():
    env = {
        "MIN_CORRELATION_SCORE": "0.3",
        "MAX_LINKS_PER_MEMORY": "7",
        "EMBEDDING_MODEL": "/models/mini",
        "CORRELATOR_ENABLED": "false",
        "AUTO_DISCOVER_ENABLED": "0",
        "CORRELATOR_OUTPUT_DIR": "/tmp/wh",
        "EMBED_PRECISION": "fp32",
    }
    s = settings({"stores": [STORE], "scoring": {"min_correlation_score": 0.9}}, env)
    assert s.scoring.min_correlation_score == 0.3
    assert s.scoring.max_links_per_memory == 7
    assert s.embedding.model == "/models/mini"
    assert not s.enabled and not s.auto_discover
    assert s.output_dir == Path("/tmp/wh")
    assert s.embedding.precision == "fp32"


@pytest.mark.parametrize(
    ("doc", "env", "message"),
    [
        ({"stores": [{**STORE, "kind": "csv"}]}, {}, "stores[0] (episodes).kind: unknown store kind 'csv'"),
        ({"stores": [{k: v for k, v in STORE.items() if k != "path"}]}, {}, "stores[0] (episodes).path: required for a jsonl store"),
        ({"stores": [STORE, STORE]}, {}, "stores[1] (episodes).name: duplicate store name"),
        ({"stores": [{**STORE, "tier": "dreams"}]}, {}, "stores[0] (episodes).tier: unknown tier 'dreams'"),
        ({"stores": [{**STORE, "kind": "sqlite"}]}, {}, "stores[0] (episodes).table: a sqlite store needs a table or a query"),
        ({"stores": [{"name": "pg", "kind": "postgres", "table": "m"}]}, {}, "stores[0] (pg).dsn_env: required"),
        ({"stores": [{**STORE, "notify_channel": "memories"}]}, {}, "stores[0] (episodes).notify_channel: only a postgres store has one"),
        ({"stores": [{**PG, "notify_channel": 7}]}, {}, "stores[0] (pg).notify_channel: expected a non-empty name, got 7"),
        ({"stores": [{**PG, "cursor_column": " "}]}, {}, "stores[0] (pg).cursor_column: expected a non-empty name, got ' '"),
        ({"stores": [{**PG, "notify_channel": "c" * 64}]}, {}, "stores[0] (pg).notify_channel: not a PostgreSQL name (at most 63 bytes"),
        ({"stores": [{**PG, "notify_chanel": "memories"}]}, {}, "stores[0].notify_chanel: unknown key"),
        ({"scoring": {"weights": {"semantic": "lots", "co_occurrence": 0.25, "temporal": 0.15, "cross_reference": 0.2}}}, {}, "scoring.weights.semantic: expected a number, got 'lots'"),
        ({"scoring": {"weights": {"semantic": 0.5, "co_occurrence": 0.25, "temporal": 0.15, "cross_reference": 0.2}}}, {}, "scoring.weights: must sum to 1, they sum to 1.1"),
        ({"scoring": {"weights": {"semantic": 0.4, "co_occurrence": 0.25, "temporal": 0.15}}}, {}, "scoring.weights.cross_reference: missing"),
        ({}, {"MIN_CORRELATION_SCORE": "high"}, "scoring.min_correlation_score: expected a number, got 'high'"),
        ({}, {"MIN_CORRELATION_SCORE": "1.5"}, "scoring.min_correlation_score: must be <= 1.0"),
        ({}, {"MAX_LINKS_PER_MEMORY": "0"}, "scoring.max_links_per_memory: must be >= 1"),
        ({}, {"CORRELATOR_ENABLED": "maybe"}, "CORRELATOR_ENABLED: expected true or false"),
        ({}, {"EMBED_DEVICE": "tpu"}, "embedding.device: expected auto, cpu or cuda"),
        ({}, {"EMBED_PRECISION": "int8"}, "embedding.precision: expected auto, fp32 or bf16, got 'int8'"),
        ({"embedding": {"backend": "onnx", "precision": "bf16"}}, {}, "embedding.precision: bf16 needs backend torch"),
        ({"scoring": {"min_score": 0.5}}, {}, "scoring.min_score: unknown key"),
        ({"output": {"dir": ""}}, {}, "output.dir: expected a folder path"),
        ({"storez": []}, {}, "storez: unknown section"),
    ],
)
def test_invalid_config_names_key_and_problem(doc, env, message):
    with pytest.raises(ConfigError) as error:
        settings(doc, env)
    assert message in str(error.value)


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_settings(tmp_path / "nope.toml", env={})
    bad = tmp_path / "bad.toml"
    bad.write_text("[scoring\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(bad, env={})
