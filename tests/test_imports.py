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


def _imports(path: Path, name: str, modules: set[str], *, module_level_only: bool = False) -> set[str]:
    """Modules of ``modules`` that ``name`` imports: every import statement, inside functions and under
    ``TYPE_CHECKING`` too (``module_level_only``: only what runs when the module is imported)."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def record(node: ast.AST) -> None:
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

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            record(node)
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
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

    tree = ast.parse(path.read_text(), str(path))
    if module_level_only:
        visit(tree.body)
    else:
        for node in ast.walk(tree):
            record(node)
    # Importing a.b.c runs a/__init__, a/b/__init__ and a/b/c: each is an edge, except the importer's own
    # ancestor packages, which are already initialising when it runs.
    parts = name.split(".")
    ancestors = {".".join(parts[:i]) for i in range(1, len(parts))}
    found = set()
    for mod in out:
        mparts = mod.split(".")
        found.update(p for p in (".".join(mparts[:i]) for i in range(1, len(mparts) + 1)) if p in modules)
    return found - ancestors - {name}


def import_graph(module_level_only: bool = False) -> dict[str, set[str]]:
    """Module → the modules of src/ it imports (every import statement unless ``module_level_only``)."""
    files = {_module_name(p): p for p in SRC.rglob("*.py")}
    modules = set(files)
    return {name: _imports(path, name, modules, module_level_only=module_level_only) for name, path in files.items()}


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

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)  # other tests rely on the default depth (bounded-nesting readers)
    return sorted(out)


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert find_cycles(graph) == [["a", "b", "c"]]


def test_the_parser_sees_every_import() -> None:
    graph = import_graph()
    assert "mixlaw.schedules.features" in graph and "mixlaw.laws.multi_power" in graph  # the parser sees packages
    assert {"mixlaw.schedules", "mixlaw.schedules.multi_power"} <= graph["mixlaw.laws.multi_power"]  # and edges
    assert "mixlaw.laws._examples" in graph["mixlaw.laws.multi_power"]  # imports inside functions count
    assert "mixlaw.laws._examples" not in import_graph(module_level_only=True)["mixlaw.laws.multi_power"]
    assert "mixlaw.probe.config" in graph["mixlaw.probe.checkpoints"]  # and those under TYPE_CHECKING


#: The one cycle left (12 modules of fit/), listed so that it cannot grow unnoticed.
def test_no_import_cycle_among_the_modules_of_src() -> None:
    """No cycle, counting imports inside functions and under TYPE_CHECKING: a cycle that only a deferred import
    hides is still two modules that cannot be understood (or moved) one without the other."""
    cycles = find_cycles(import_graph())
    assert cycles == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


#: Package arrows that point the wrong way: the house is cli → api → decide → fit → laws, runs, with report beside
#: cli as the last consumer (architecture §5).
WRONG_WAY = {
    ("decide", "cli"), ("decide", "report"), ("fit", "report"), ("fit", "decide"), ("runs", "api"),
    ("surrogates", "decide"), ("laws", "fit"), ("fit", "cli"), ("laws", "decide"), ("runs", "decide"),
    ("runs", "fit"), ("design", "cli"), ("probe", "cli"), ("runs", "cli"), ("report", "cli"), ("api", "cli"),
}  # fmt: skip


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_package_arrow_points_the_wrong_way() -> None:
    graph = import_graph()
    wrong = sorted(
        f"{a} -> {b}" for a, deps in graph.items() for b in deps if (_package(a), _package(b)) in WRONG_WAY
    )
    assert wrong == [], "wrong-way imports:\n" + "\n".join(wrong)


def test_the_engine_never_imports_the_command_line_or_the_reports() -> None:
    """Only cli/ (and api, for the report writers) reach the command line and the renderers."""
    graph = import_graph()
    for mod, deps in graph.items():
        if _package(mod) not in ("cli", "report", "api", "", "__main__"):
            assert not {d for d in deps if _package(d) in ("cli", "report")}, mod


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
    from mixlaw.schedules.multi_power import mpl_columns, multi_power_exact, multi_power_features

    assert mpl_columns is mpl2 and callable(multi_power_exact) and callable(multi_power_features)
    assert all(callable(f) for f in (add_schedule_features, areas, as_schedule, cpt_areas))
    assert Schedule and Areas and CptAreas and SCHEDULE_FEATURES
    assert callable(features_for_law)


#: What the command line may import besides itself: the facade, the renderers (report/, the last consumer) and the
#: bottom-level helpers every layer shares.
CLI_MAY_IMPORT = ("mixlaw.cli", "mixlaw.api", "mixlaw.report", "mixlaw.errors", "mixlaw.fmt", "mixlaw.limits",
                  "mixlaw.safeio", "mixlaw.options", "mixlaw._provenance")  # fmt: skip


def test_the_command_line_imports_only_the_facade() -> None:
    """cli/ is thin over one facade: no verb reaches past ``mixlaw.api`` into runs/, decide/, design/ or fit/."""
    graph = import_graph()
    past = sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if m == "mixlaw.cli" or m.startswith("mixlaw.cli.")
        for d in deps
        if d.startswith("mixlaw.") and not any(d == p or d.startswith(p + ".") for p in CLI_MAY_IMPORT)
    )
    assert past == [], "cli/ imports past the facade:\n" + "\n".join(past)


def test_the_cmr_decision_reads_in_at_most_eight_modules() -> None:
    """``decide/cmr/`` reads top to bottom in at most eight files (what is shared lives where it is shared)."""
    files = sorted(p.name for p in (SRC / "mixlaw" / "decide" / "cmr").glob("*.py"))
    assert "main.py" in files and len(files) <= 8, files


def test_no_context_variables_and_no_long_engine_signatures() -> None:
    """Options travel as frozen dataclasses passed explicitly: no ``ContextVar`` anywhere in ``src/``, and no
    function of the decisions, the facade or the probe design takes 20 or more parameters (option groups such as
    ``CMRSettings``, ``AllocationOptions``, ``SolverOptions`` and ``IntervalOptions`` instead). Typer commands in
    ``cli/`` declare one parameter per flag."""
    import ast

    code = "\n".join(p.read_text() for p in (SRC / "mixlaw").rglob("*.py"))
    assert "ContextVar" not in code
    long = []
    for pkg in ("decide", "api", "design"):
        for p in (SRC / "mixlaw" / pkg).rglob("*.py"):
            for n in ast.walk(ast.parse(p.read_text())):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = n.args
                    if len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) >= 20:
                        long.append(f"{p.relative_to(SRC)}:{n.name}")
    assert (SRC / "mixlaw" / "decide" / "cmr" / "main.py").exists() and long == [], long


def _engine_signatures(root: Path) -> tuple[list[str], list[str]]:
    """``(long, forwarding)`` under ``root``: every function or method with 20 or more parameters (typer verbs of
    ``cli/``, decorated with ``@verb``, declare one parameter per flag and are exempt), and every public function of
    ``mixlaw.fit`` / ``mixlaw.api`` that passes its own ``**`` parameter on to another call."""
    import ast

    long, forwarding = [], []
    for p in sorted((root / "mixlaw").rglob("*.py")):
        rel = str(p.relative_to(root))
        public_pkg = rel.startswith(("mixlaw/fit/", "mixlaw/api/")) and not any(
            part.startswith("_") and part != "__init__.py" for part in p.relative_to(root).parts
        )
        for n in ast.walk(ast.parse(p.read_text())):
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = n.args
            verb = rel.startswith("mixlaw/cli/") and any(ast.unparse(d) == "verb" for d in n.decorator_list)
            if len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) >= 20 and not verb:
                long.append(f"{rel}:{n.name}")
            if public_pkg and a.kwarg is not None and not n.name.startswith("_"):
                name = a.kwarg.arg
                passed = any(
                    isinstance(c, ast.Call)
                    and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == name for k in c.keywords)
                    for c in ast.walk(n)
                )
                if passed:
                    forwarding.append(f"{rel}:{n.name}")
    return long, forwarding


def test_no_long_signatures_and_no_keyword_pass_through_in_the_engine() -> None:
    """Options travel as frozen groups (``FitOptions``, ``SolveSettings``, ...): no function anywhere in ``src/``
    takes 20 or more parameters (the 24-parameter ``Fitter`` and the 22-parameter ``solve`` did), and the public
    functions of the engine and the facade take their options by name or as a group, never as ``**settings``
    passed on (``fit_law``, ``fit_targets``, ``validate_law``, ``rescue``, ``calibrate``, ``api.fit``,
    ``api.validate``, ``api.fit_report``, ``api.ingest``, ``api.run_sweep`` did)."""
    long, forwarding = _engine_signatures(SRC)
    assert long == [], long
    assert forwarding == [], forwarding


def test_the_signature_check_finds_what_it_forbids(tmp_path: Path) -> None:
    """The check above fails on the shapes it forbids (a long signature, a ``**settings`` pass-through), so it
    cannot pass by finding nothing."""
    pkg = tmp_path / "mixlaw" / "fit"
    pkg.mkdir(parents=True)
    many = ", ".join(f"a{i}" for i in range(20))
    (pkg / "bad.py").write_text(f"def wide({many}):\n    pass\n\n\ndef fit_law(law, **settings):\n"
                                "    return Fitter(law, **settings)\n")  # fmt: skip
    long, forwarding = _engine_signatures(tmp_path)
    assert long == ["mixlaw/fit/bad.py:wide"] and forwarding == ["mixlaw/fit/bad.py:fit_law"]
