"""CPU seconds of the README's Chinchilla replication (Epoch's 240 points, 4,000 row resamples), pools pinned or not.

    PYTHONPATH=src python benchmarks/bootstrap_threads.py [--bootstrap 4000] [--skip-default]

The fit runs twice in this process on the same data and seed: with ``n_threads=1`` (mixlaw's default — torch and
every BLAS / OpenMP pool pinned to one thread by :func:`mixlaw.fit.solver.pools.threads`) and with ``n_threads=None``
(every pool left at its default size, the baseline). CPU seconds are ``time.process_time`` (all threads of the
process); on a shared machine they are the steadier figure. The goal is ≤ 60 s CPU for the pinned fit. The
last line is ``cpu_pinned=<s> ratio=<baseline CPU / pinned CPU>``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mixlaw.fit import fit_law
from mixlaw.options import BootstrapOptions, FitOptions

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "external" / "analyzing-chinchilla"


def load() -> pd.DataFrame:
    """The README recipe's table: the 5 highest losses dropped, D = C / 6N."""
    raw = pd.read_csv(DATA / "svg_extracted_data.csv").sort_values("loss", kind="stable").iloc[:-5]
    n = raw["Model Size"].to_numpy()
    return pd.DataFrame(
        {"run_id": np.arange(len(raw)).astype(str), "n_params": n, "tokens": raw["Training FLOP"].to_numpy() / (6 * n),
         "loss": raw["loss"].to_numpy()}
    )  # fmt: skip


def run(df: pd.DataFrame, n_boot: int, n_threads: int | None) -> tuple[float, float, object]:
    c0, t0 = time.process_time(), time.perf_counter()
    res = fit_law(
        "chinchilla",
        df,
        FitOptions(bootstrap=BootstrapOptions(resamples=n_boot, scheme="rows"), seed=42),
        n_threads=n_threads,
    )
    return time.process_time() - c0, time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=4000)
    ap.add_argument("--skip-default", action="store_true", help="time the pinned fit only")
    args = ap.parse_args()
    df = load()
    fit_law("chinchilla", df.iloc[:40], FitOptions(bootstrap=BootstrapOptions(resamples=4), seed=0))  # warm the imports
    cpu1, wall1, res = run(df, args.bootstrap, 1)
    print(f"pinned (1 thread):      {cpu1:7.1f} s CPU, {wall1:6.1f} s wall")
    ratio = float("nan")
    if not args.skip_default:
        cpu0, wall0, _ = run(df, args.bootstrap, None)
        ratio = cpu0 / cpu1
        print(f"default thread pools:   {cpu0:7.1f} s CPU, {wall0:6.1f} s wall")
    print(f"cpu_pinned={cpu1:.1f} ratio={ratio:.2f}")


if __name__ == "__main__":
    main()
