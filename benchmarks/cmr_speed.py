"""Speed of the README's CMR main job: 50 resamples, 5 sizes × 2 domains, HTML report.

Times the command exactly as a user runs it (a fresh process, imports included)::

    mixlaw cmr examples/cmr_probe/runs.csv --general-eval general --domain-eval legal --domain-eval code \\
        --bootstrap 50 --report cmr_report.html

and, in-process, the decision alone (``critical_mixture_ratio_by_domain``, batched and one resample at a time).
Today's algorithm before the rewrite (per-curve engine fits from a start grid, one resample at a time, one core)
no longer exists in the code base, so its time is a **recorded figure**: 495 s wall, 298 s user CPU for the same
command on this 2-core machine at a load average of about 4 (2026-12-01 09:44-09:53 UTC, commit 869270f); the
issue measured 593 s under heavier load. The machine is shared, so the load average is printed beside every
time; CPU seconds are the load-independent figure. Last line: ``seconds=<main job wall time>``.

Usage: ``python benchmarks/cmr_speed.py [--bootstrap 50] [--runs PATH] [--skip-decision] [--unbatched]``
(``--runs examples/cmr_probe/runs_v1.csv``: the 5-size v1 grid).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "examples" / "cmr_probe" / "runs.csv"
RECORDED_OLD_WALL_S = 495.0
RECORDED_OLD_CPU_S = 298.0


def _load() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=50)
    ap.add_argument("--runs", type=Path, default=RUNS, help="run table (default the shipped v2 example)")
    ap.add_argument("--skip-decision", action="store_true", help="only time the CLI main job")
    ap.add_argument("--unbatched", action="store_true", help="also time the decision one resample at a time")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not args.skip_decision:
        sys.path.insert(0, str(ROOT / "src"))
        import pandas as pd

        from mixlaw.decide.cmr import CMRSettings, critical_mixture_ratio_by_domain

        runs = pd.read_csv(args.runs)
        for batched, workers in ((True, 2), (True, 1), *(((False, 1),) if args.unbatched else ())):
            print(f"[{_load()}]", flush=True)
            c0, t0 = time.process_time(), time.perf_counter()
            ch0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
            critical_mixture_ratio_by_domain(runs, general_eval="general", domain_evals=["legal", "code"],
                                             bootstrap=args.bootstrap, random_state=0, workers=workers,
                                             settings=CMRSettings(batched=batched))  # fmt: skip
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0 + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - ch0
            print(f"decision ({'batched' if batched else 'one resample at a time'}, {workers} worker(s)): "
                  f"wall {wall:.1f} s, CPU {cpu:.1f} s", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "mixlaw.cli", "cmr", str(args.runs), "--general-eval", "general", "--domain-eval",
               "legal", "--domain-eval", "code", "--bootstrap", str(args.bootstrap), "--report",
               str(Path(tmp) / "cmr_report.html")]  # fmt: skip
        before = _load()
        ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = ch1.ru_utime - ch0.ru_utime + ch1.ru_stime - ch0.ru_stime
    print(f"main job (CLI, fresh process, report): wall {wall:.1f} s, CPU {cpu:.1f} s [{before} → {_load()}]")
    print(f"recorded figure for the algorithm before the rewrite (old path gone): wall {RECORDED_OLD_WALL_S:.0f} s, "
          f"CPU {RECORDED_OLD_CPU_S:.0f} s (load ~4); CPU speed-up ×{RECORDED_OLD_CPU_S / cpu:.1f}")  # fmt: skip
    print(f"seconds={wall:.1f}")


if __name__ == "__main__":
    main()
