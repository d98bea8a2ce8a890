"""``mixlaw --help`` and ``mixlaw laws --help`` answer without importing the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAVY = ("torch", "scipy", "matplotlib", "pandas", "ray")
PROBE = """
import json, sys
sys.argv = ["mixlaw", *json.loads(sys.argv[1])]
from mixlaw.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = [m for m in HEAVY if m in sys.modules]
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def _run(args: list[str]) -> tuple[str, dict[str, object]]:
    env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin", "COLUMNS": "100"}
    res = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True, env=env, timeout=120
    )
    return res.stdout, json.loads(res.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--help"], ["laws", "--help"], ["fit", "--help"], ["cpt", "--help"]])
def test_help_imports_no_heavy_library(args: list[str]) -> None:
    out, info = _run(args)
    assert info["code"] == 0, out
    assert info["heavy"] == [], f"mixlaw {' '.join(args)} imported {info['heavy']}"
    assert "Usage" in out


def test_root_help_lists_every_verb() -> None:
    out, _ = _run(["--help"])
    for verb in ("laws", "fit", "predict", "validate", "ingest", "runs", "cmr", "cpt", "probe", "corpora"):
        assert f" {verb} " in out, verb


def test_the_importtime_of_help_is_typer_plus_little() -> None:
    """``python -X importtime``: no module of torch or scipy is imported by ``mixlaw --help``."""
    code = (
        "import sys; sys.argv = ['mixlaw', '--help']\nfrom mixlaw.cli import main\ntry: main()\nexcept SystemExit: pass"
    )
    env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=env)
    imported = {ln.split("|")[-1].strip().split(".")[0] for ln in res.stderr.splitlines() if ln.startswith("import")}
    assert "typer" in imported and "mixlaw" in imported
    assert not imported & set(HEAVY), imported & set(HEAVY)


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["fit", "runs.csv"],  # no --law
        ["fit", "--law", "chinchila", "runs.csv"],
        ["validate", "--law", "nope", "runs.csv"],
        ["fit", "missing.csv", "--law", "chinchilla"],
        ["cmr", "missing.csv", "--general-eval", "general", "--domain-eval", "legal"],
        ["mix", "optimize", "missing.csv", "--domains", "a,b"],
        ["predict", "missing.json", "--at", "tokens=1e9"],
        ["cpt", "predict", "missing.json", "--plan", "plan.toml"],
        ["runs", "--store", "missing.db"],
    ],
)
def test_a_usage_error_answers_before_the_heavy_libraries(args: list[str]) -> None:
    """A one-line usage error (and ``--version``) is answered by typer and the standard library: no torch, pandas,
    scipy or matplotlib is imported (they cost seconds of CPU; counted in ``benchmarks/cli_startup.py``)."""
    out, info = _run(args)
    missing = "--law" in args or any(a.startswith("missing.") for a in args)
    assert info["code"] == (0 if args == ["--version"] else 1 if missing else 2)
    assert info["heavy"] == [], f"mixlaw {' '.join(args)} imported {info['heavy']}"
