"""README command 1b (``mix optimize`` with CAMEL and its default 20-resample paired bootstrap), timed in CPU seconds,
with and without ``--report``.

Runs the command from README.md (the line after ``# 1b.``, ``mixlaw`` replaced by ``python -m mixlaw``) in a child
process, one torch/BLAS thread, and prints the child's CPU seconds (user + system, ``resource.RUSAGE_CHILDREN``) for
the job and, with ``--report``, for the job writing its HTML report, then ``report_ratio=<with / without>`` (the
issue's goals: the job at most 15 s, the report at most 2x).

Measured 2026-12-04 on the shared 2-core machine at load 7-10 (CPU seconds inflate under that load):

- ``--report``, load 5-6: ``readme_1b_cpu=17.2s readme_1b_report_cpu=76.3s report_ratio=4.43`` (the goal of 2 is
  not met: the report's held-out comparison fits every one of 5 folds per loss, each with a 20-resample bootstrap;
  it now fits the law the decision kept, ``camel:k=1`` where CAMEL was reduced, instead of a fresh k = 2 CAMEL,
  which on main took about 946 s);
- at load 5-6: main (54c2e80) 34.3 s, this branch **17.7 s** (``readme_1b_cpu=17.7s``); at load 7-10: 36.2 s and
  19.4 s, run one after the other; the decision's steps on this branch: CAMEL
  fits 8.8 s (k = 2 for five losses in one batched solve, halted at the exponential limit; k = 1 for four), paired
  bootstrap 5.6 s (refits in two solves, 20 re-optimisations 1.3 s), the optimum 1.2 s, imports and loading 2.5 s.

- with the regret and level calibration of the verdicts (one warm-started nested refit per loss), on a quiet
  machine (load < 1): ``readme_1b_cpu=19.3s``. Under ``cProfile`` the solver's 1,464 iterations over 9 solves take
  13 of 22 s (CAMEL's ``log_predict`` 4.4 s); the goal of 15 s is not met.

- four changes (the same optimum and verdict sentences; the bootstrap bands and the calibration move in the last
  digits: natural's widened regret +0.104 [−0.057, +0.269] → [−0.058, +0.270], the level miss 0.195 → 0.198 nats):
  no ``scipy.stats`` import (the paired intervals' BC rule and the verdict widening on the standard library's
  normal: about 1 s); the ``k = 2`` candidate fits screen out starts more than 10 % behind their loss's best from
  iteration 30 (:mod:`mixlaw.fit.solver.halt`: 341 → 181 iterations, 32.0k → 11.6k row-iterations, 8.0 → 3.0 s);
  the regret calibration's five nested refits ride in the paired bootstrap's two batched solves (five solo solves
  of 300-400 iterations, 1.6-2.8 s → 0.03 s); the resamples' re-optimised mixtures skip the Newton polish (SLSQP's
  end, within ~1e-6). Run one after the other with main (a3d12c2) at load 4.6-6.1:
  main ``readme_1b_cpu=21.5s`` and ``18.3s``, this branch **12.5 s** both times (at load 4-5 earlier: main 23.8 and
  24.8 s, this branch 14.3-19.0 s before the last two changes); on a quiet machine main took 19.3 s, so about 11 s
  is to be expected there. **The goal of 15 s is met.**
- ``--report`` with the held-out panel from the decision's fits (:mod:`mixlaw.report.mix_heldout`: every fold and
  every fold's bootstrap of one law in one batched solve, started from the decision's fit; ``mix compare`` remains
  for size holdouts and surrogates): ``readme_1b_report_cpu=21.8s report_ratio=1.75`` and ``21.5s`` / ``1.72``
  (load 4.7-6.1), ``22.0s`` / ``1.50`` against a 14.6 s job at load 5.5. **The goal of 2 is met.** The panel's
  numbers against ``mix compare``'s: ``docs/design/mix-report-heldout.md``.

Run: ``PYTHONPATH=src nice -n 5 python benchmarks/mixture_readme_1b.py [--report]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def command() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    i = next(j for j, line in enumerate(lines) if line.startswith("# 1b."))
    cmd = next(line for line in lines[i + 1 :] if line.startswith("mixlaw mix optimize"))
    return [sys.executable, "-m", "mixlaw", *shlex.split(cmd)[1:]]


def cpu_of(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = os.environ | {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", action="store_true", help="also time the job with --report")
    args = ap.parse_args()
    argv = command()
    job = cpu_of(argv)
    print(f"readme_1b_cpu={job:.1f}s", flush=True)
    if args.report:
        with tempfile.TemporaryDirectory() as tmp:
            rep = cpu_of([*argv, "--report", str(Path(tmp) / "mix.html")])
        print(f"readme_1b_report_cpu={rep:.1f}s report_ratio={rep / job:.2f}", flush=True)


if __name__ == "__main__":
    main()
