"""Layout contracts: no import cycle among the modules of src/, a light top-level package, old import paths."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _module_level_imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """Modules of ``modules`` imported at module level (not inside functions; not under ``TYPE_CHECKING``)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join([*base, node.module] if node.module else base)
                else:
                    mod = node.module or ""
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import submodule`
            elif isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if "TYPE_CHECKING" not in test:
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.With):
                visit(node.body)

    visit(ast.parse(path.read_text(), str(path)).body)
    # Importing a.b.c runs a/__init__, a/b/__init__ and a/b/c: each is an edge, except the importer's own
    # ancestor packages, which are already initialising when it runs.
    parts = name.split(".")
    ancestors = {".".join(parts[:i]) for i in range(1, len(parts))}
    found = set()
    for mod in out:
        mparts = mod.split(".")
        found.update(p for p in (".".join(mparts[:i]) for i in range(1, len(mparts) + 1)) if p in modules)
    return found - ancestors - {name}


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in SRC.rglob("*.py")}
    modules = set(files)
    return {name: _module_level_imports(path, name, modules) for name, path in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(out)


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert find_cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_among_the_modules_of_src() -> None:
    graph = import_graph()
    assert "mixlaw.schedules.features" in graph and "mixlaw.laws.multi_power" in graph  # the parser sees packages
    assert {"mixlaw.schedules", "mixlaw.schedules.multi_power"} <= graph["mixlaw.laws.multi_power"]  # and edges
    assert "mixlaw.laws._examples" not in graph["mixlaw.laws.multi_power"]  # imports inside functions do not count
    cycles = find_cycles(graph)
    assert cycles == [], "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_schedules_never_import_laws() -> None:
    graph = import_graph()
    for mod, deps in graph.items():
        if mod.startswith("mixlaw.schedules"):
            assert not any(d.startswith("mixlaw.laws") for d in deps), mod
    text = "\n".join(p.read_text() for p in (SRC / "mixlaw" / "schedules").glob("*.py"))
    assert "mixlaw.laws" not in "\n".join(ln for ln in text.splitlines() if "import" in ln)  # not even lazily


def test_no_source_file_over_500_lines() -> None:
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    mine = {k: v for k, v in long.items() if k.startswith(("mixlaw/cli", "mixlaw/schedules", "mixlaw/api"))}
    assert mine == {}


def test_top_level_package_is_light_and_public_api_resolves() -> None:
    code = (
        "import sys, mixlaw; heavy = [m for m in ('torch', 'pandas', 'scipy', 'matplotlib') if m in sys.modules]; "
        "print(mixlaw.__version__); print(heavy)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    version, heavy = res.stdout.split("\n")[:2]
    assert version and heavy == "[]"
    import mixlaw

    assert mixlaw.__version__ == version
    for name in mixlaw.__all__:
        assert getattr(mixlaw, name) is not None, name
    with pytest.raises(AttributeError):
        _ = mixlaw.not_a_name  # type: ignore[attr-defined]


def test_old_import_paths_still_work() -> None:
    from mixlaw.laws.multi_power import mpl_columns, multi_power_exact, multi_power_features
    from mixlaw.probe.cli import app as probe_app
    from mixlaw.probe.cli import corpora_app
    from mixlaw.runs.cli import ingest, runs
    from mixlaw.schedules import (
        SCHEDULE_FEATURES,
        Areas,
        CptAreas,
        Schedule,
        add_schedule_features,
        areas,
        as_schedule,
        cpt_areas,
        features_for_law,
    )
    from mixlaw.schedules import mpl_columns as mpl2

    assert mpl_columns is mpl2 and callable(multi_power_exact) and callable(multi_power_features)
    assert all(callable(f) for f in (ingest, runs, add_schedule_features, areas, as_schedule, cpt_areas))
    assert probe_app is not corpora_app and Schedule and Areas and CptAreas and SCHEDULE_FEATURES
    assert callable(features_for_law)
