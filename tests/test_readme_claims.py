"""What the README promises about the command line and the records, checked against the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crosstier.cli.main import build_parser
from crosstier.core.config import StoreConfig
from crosstier.transforms.stores.extract import canonical_memory

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def _options(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return {flag for action in sub._actions for flag in action.option_strings}


def test_the_query_commands_the_readme_names_take_json_and_as():
    listed = re.search(r"The query commands \(([^)]*)\)\s+take `--json`, `--as PRINCIPAL`", README)
    assert listed, "the README no longer says which commands take --json and --as"
    commands = re.findall(r"`(\w+)`", listed.group(1))
    assert set(commands) == {"correlations", "graph", "discover", "link", "retrieve", "report", "sql"}
    for command in commands:
        assert {"--json", "--as", "--config", "--out"} <= _options(command), command


def test_ctc_dashboard_takes_what_the_readme_says_and_not_json_or_as():
    assert "`ctc dashboard` takes\n`--config`, `--out` and `--open`, not `--json` or `--as`" in README
    options = _options("dashboard")
    assert {"--config", "--out", "--open"} <= options and not {"--json", "--as"} & options


STORE = StoreConfig(name="s", kind="jsonl", path="x.jsonl")


@pytest.mark.parametrize(("field", "value", "stored"), [("id", 42, "42"), ("content", 7, "7"), ("session_id", 3, "3"), ("namespace", 0, "0")])
def test_an_integer_in_a_text_field_is_accepted_as_its_decimal_text(field, value, stored):
    assert "an integer in\na text field such as `id`, `content`, `session_id` or `namespace` is accepted as its decimal\ntext" in README
    record = {"id": "m1", "tier": "semantic", "content": "text", field: value}
    assert canonical_memory(record, STORE, "x:1", 1000)[field] == stored


@pytest.mark.parametrize("value", [1.5, True, ["a"], {"k": 1}])
@pytest.mark.parametrize("field", ["id", "content", "session_id", "namespace"])
def test_a_float_boolean_list_or_object_in_a_text_field_is_a_reject(field, value):
    record = {"id": "m1", "tier": "semantic", "content": "text", field: value}
    with pytest.raises(ValueError, match=f"field '{field}' must be a string"):
        canonical_memory(record, STORE, "x:1", 1000)
