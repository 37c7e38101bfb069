"""The layout promises: one import root, core below, CLI on top, no import circle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# import root -> folder of the repository it maps to (pyproject.toml's package-dir)
ROOTS = {
    "crosstier": "crosstier",
    "crosstier.flows": "flows",
    "crosstier.transforms": "transforms",
    "crosstier.sql": "sql",
    "crosstier.retrieval": "retrieval",
    "crosstier.dashboards": "dashboards",
}


def project_modules() -> dict[str, Path]:
    """Every module of the installed project, by its dotted name."""
    modules = {}
    for package, folder in ROOTS.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(REPO / folder).with_suffix("").parts if p not in ("__init__", "__main__")]
            modules[".".join([package, *parts])] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """module -> project modules it imports (at top level or inside functions)."""
    modules = project_modules()
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("crosstier"):
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    deps.add(child if child in modules else node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("crosstier"))
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                found.append(stack[stack.index(dep):] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_import_circle():
    assert cycles(import_graph()) == []


def test_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_nothing_outside_the_cli_imports_it():
    graph = import_graph()
    offenders = [(m, d) for m, deps in graph.items() if not m.startswith("crosstier.cli") for d in deps if d.startswith("crosstier.cli")]
    assert offenders == []


def test_core_imports_nothing_above_it():
    graph = import_graph()
    offenders = [(m, d) for m, deps in graph.items() if m.startswith("crosstier.core") for d in deps if not d.startswith("crosstier.core")]
    assert offenders == []
    assert any(m.startswith("crosstier.core.") for m in graph)


def test_transforms_never_import_prefect():
    for name, path in project_modules().items():
        if name.startswith("crosstier.transforms"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            imported += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
            assert not any(m.split(".")[0] == "prefect" for m in imported), name


@pytest.mark.parametrize("name", ["ctc", "flows", "transforms", "sql", "retrieval", "dashboards", "bench"])
def test_only_the_root_is_importable_outside_the_checkout(name, tmp_path):
    probe = f"import importlib.util as u; import crosstier.transforms.link.links; print(u.find_spec({name!r}) is None)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_prefect_yaml_entrypoint_loads_the_flow(tmp_path, monkeypatch):
    import yaml
    from prefect.flows import load_flow_from_entrypoint

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    monkeypatch.chdir(REPO)  # `prefect deploy` runs from the repository root
    deployments = yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))["deployments"]
    loaded = load_flow_from_entrypoint(deployments[0]["entrypoint"])
    assert loaded.name == "correlate"
    assert set(deployments[0]["parameters"]) <= set(loaded.parameters.properties)
