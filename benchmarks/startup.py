"""Start-up time of the CLI: median of 5 runs of ``mixlaw --help`` beside ``python -c "import typer"``.

Run from the repository root: ``python benchmarks/startup.py``. The last line is ``ratio=<mixlaw/typer>``
(goal: ≤ 3, issue 8).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5


def median_seconds(args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    typer_s = median_seconds([sys.executable, "-c", "import typer"])
    mixlaw_s = median_seconds([sys.executable, "-m", "mixlaw.cli", "--help"])
    print(f"python -c 'import typer'  median of {RUNS}: {typer_s:.3f} s")
    print(f"mixlaw --help             median of {RUNS}: {mixlaw_s:.3f} s")
    print(f"ratio={mixlaw_s / typer_s:.2f}")


if __name__ == "__main__":
    main()
