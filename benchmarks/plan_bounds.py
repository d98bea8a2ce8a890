"""The estimate ``plan --simulate`` makes before it starts, against what the run then uses.

    PYTHONPATH=src python benchmarks/plan_bounds.py [--replicates 8 32] [--k 2]

For each replicate count the issue command (five sizes to 400k, target 1.6m, 2.0x-target, five domains, hourglass
compared with rectangle) runs through the real CLI in a fresh process (``mixlaw plan ... --simulate R --json``).
Its peak resident set size and CPU seconds come from ``os.wait4`` (the child's own rusage). A bare
``python -c "import mixlaw.cli; import torch"`` gives the baseline (interpreter and libraries), so ``added`` is
what the simulation itself held. The estimate is :func:`mixlaw.limits.simulation_cost` for the same request, the
figure the refusal above ``--max-memory`` quotes. One line per replicate count:
``R=<r> estimate_mb=<e> added_mb=<m> estimate_s=<t> cpu_s=<c>``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import replace

from mixlaw import limits
from mixlaw.design.plan import DEFAULT_ALLOCATION, plan
from mixlaw.laws import get_law

CLI = "import sys; from mixlaw.cli import main; sys.argv[0] = 'mixlaw'; main()"
ARGS = ["plan", "--sizes", "25k,50k,100k,200k,400k", "--target-size", "1.6m", "--budget", "2.0x-target",
        "--domains", "general,legal,docs,bio,code", "--compare", "rectangle", "--json"]  # fmt: skip


def measure(argv: list[str]) -> tuple[float, float]:
    """Peak RSS (MB) and CPU seconds of ``python argv`` in a fresh process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"failed: {' '.join(argv)}: {proc.stderr.read().decode() if proc.stderr else ''}")
    return usage.ru_maxrss / 1024.0, usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--k", type=int, default=2)
    a = ap.parse_args()
    base_mb, base_s = measure(["-c", "import mixlaw.cli; import torch; import pandas"])
    print(f"baseline_mb={base_mb:.0f} baseline_cpu_s={base_s:.1f}")
    res = plan(sizes=ARGS[2].split(","), target_size=ARGS[4], budget=ARGS[6], domains=ARGS[8].split(","),
               compare=ARGS[10], allocation=replace(DEFAULT_ALLOCATION, k=a.k))  # fmt: skip
    runs = [res["allocation"].n_runs, *(c.n_runs for c in res["compare"])]
    law = get_law("camel", domains=tuple(res["domains"]), k=a.k, size="n_params", size_unit=res["target"].n_params)
    for r in a.replicates:
        est_b, est_s = limits.simulation_cost(r, runs, len(law.start_design()), law.n_internal, a.k)
        mb, cpu = measure(["-c", CLI, *ARGS, "--simulate", str(r), "--k", str(a.k), "--max-memory", "64G"])
        print(f"R={r} runs={runs} estimate_mb={est_b / 1024**2:.0f} added_mb={mb - base_mb:.0f} "
              f"estimate_s={est_s:.0f} cpu_s={cpu - base_s:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
