"""CPU seconds of the CLI's quick answers: ``--version``, ``--help`` and one-line usage errors.

A usage error (a missing ``--law``, a typo in a law name, a table path that does not exist) should answer before
torch, pandas or the fitting engine load: well under a second of CPU, a small multiple of ``import typer``.
Each invocation runs ``RUNS`` times in a fresh process; the figure is the median CPU time (user + system) of the
child, so a busy machine inflates it less than wall time. The last column is the ratio to ``import typer`` in the
same run (the baseline).

Run from the repository root: ``python benchmarks/cli_startup.py``.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 3

CASES: list[tuple[str, list[str]]] = [
    ("--version", ["--version"]),
    ("--help", ["--help"]),
    ("fit --help", ["fit", "--help"]),
    ("cmr --help", ["cmr", "--help"]),
    ("fit TABLE (no --law)", ["fit", "TABLE"]),
    ("fit --law chinchila TABLE", ["fit", "--law", "chinchila", "TABLE"]),
    ("fit --law nope TABLE", ["fit", "--law", "nope", "TABLE"]),
    ("fit missing.csv --law chinchilla", ["fit", "missing.csv", "--law", "chinchilla"]),
    ("validate missing.csv --law chinchilla", ["validate", "missing.csv", "--law", "chinchilla"]),
    ("cmr missing.csv ...", ["cmr", "missing.csv", "--general-eval", "general", "--domain-eval", "legal"]),
    ("mix optimize missing.csv ...", ["mix", "optimize", "missing.csv", "--domains", "a,b"]),
    ("predict missing.json --at ...", ["predict", "missing.json", "--at", "tokens=1e9"]),
    ("cpt predict missing.json --plan ...", ["cpt", "predict", "missing.json", "--plan", "plan.toml"]),
    ("runs --store missing.db", ["runs", "--store", "missing.db"]),
]


def cpu_seconds(args: list[str], cwd: Path) -> float:
    """Median CPU seconds (user + system) of ``args`` in a fresh process, over ``RUNS`` runs."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    times = []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(args, capture_output=True, env=env, cwd=cwd, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return statistics.median(times)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "TABLE").write_text("n_params,tokens,loss\n1e8,1e9,3.0\n")
        base = cpu_seconds([sys.executable, "-c", "import typer"], cwd)
        print(f"{'invocation':<46} {'CPU s':>7} {'× typer':>8}")
        print(f"{'python -c import typer (baseline)':<46} {base:7.3f} {1.0:8.2f}")
        for label, args in CASES:
            s = cpu_seconds([sys.executable, "-m", "mixlaw", *args], cwd)
            print(f"{'mixlaw ' + label:<46} {s:7.3f} {s / base:8.2f}")


if __name__ == "__main__":
    main()
