"""Peak memory of ``mixlaw fit`` against the number of rows (the goal: 250,000 rows within 2 GB, linear in rows).

    PYTHONPATH=src python benchmarks/fit_memory.py [--rows 25000 100000 250000] [--law chinchilla]

For every size a seeded synthetic Chinchilla table (``L = E + A/N^α + B/D^β`` with 1 % log-normal noise, sizes
and token counts log-uniform over three decades) is written to a temporary CSV and fitted by the real CLI
(``mixlaw fit TABLE --law chinchilla --out fit.json``) in a fresh process; its peak resident set size comes from
``os.wait4`` (the child's own ``ru_maxrss``, not this script's), its CPU seconds from the same rusage. A bare
``python -c "import mixlaw.cli"`` gives the baseline (interpreter + torch + pandas), so the lines also show the
memory the fit itself adds per row. The last line is ``max_rss_mb=<peak at the largest size>``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

CLI = "import sys; from mixlaw.cli import main; sys.argv[0] = 'mixlaw'; main()"


def table(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` rows of a noisy Chinchilla law (A 406.4, B 410.7, E 1.69, α 0.34, β 0.28)."""
    rng = np.random.default_rng(seed)
    N = 10 ** rng.uniform(7, 10, n)
    D = 10 ** rng.uniform(9, 12, n)
    loss = (1.69 + 406.4 / N**0.34 + 410.7 / D**0.28) * np.exp(rng.normal(0.0, 0.01, n))
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(n)], "n_params": N, "tokens": D, "loss": loss})


def measure(argv: list[str]) -> tuple[float, float, int]:
    """Peak RSS (MB) and CPU seconds of one child process, and its exit code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode:
        print(err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}", file=sys.stderr)
    return usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[25_000, 100_000, 250_000])
    ap.add_argument("--law", default="chinchilla")
    args = ap.parse_args()
    base, _, _ = measure(["-c", "import mixlaw.cli"])
    print(f"baseline (import mixlaw.cli): {base:,.0f} MB")
    peak = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.rows:
            path = Path(tmp) / f"rows_{n}.csv"
            table(n).to_csv(path, index=False)
            rss, cpu, rc = measure(["-c", CLI, "fit", str(path), "--law", args.law, "--out", str(Path(tmp) / "f.json")])
            peak = rss
            extra = (rss - base) * 1024.0 * 1024.0 / n
            print(f"rows={n:>8,}  max_rss={rss:8,.0f} MB  ({extra:6,.0f} bytes/row above baseline)  "
                  f"cpu={cpu:7.1f} s  exit={rc}")  # fmt: skip
    print(f"max_rss_mb={peak:.0f}")


if __name__ == "__main__":
    main()
