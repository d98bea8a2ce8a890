"""How ``mix optimize``'s solver grows with the number of domains D (5, 10, 20): CPU seconds and the fitted exponent.

The objective is the Data Mixing Laws form ``Σ_v (c_v + k_v exp(Σ_j t_vj w_j))`` with one validation loss per domain
(random, seeded; the own-domain ``t`` strongly negative, so the optimum is interior), minimised by
``optimize_mixture`` with its default starts (uniform, D pulled vertices, 48 Dirichlet draws) and the Newton polish.
The fits are not timed here (their cost is the law's parameter count; ``benchmarks/mixture_fit.py``).

Prints one line per D (CPU seconds, KKT) and last ``optimize_domains_exponent=<slope of log CPU on log D>``
(the issue's goal: at most 2).

Measured (2-core machine at load 6-8, one repeat): before the solve was pinned to one BLAS thread, D = 5 / 10 / 20
took 0.71 / 0.51 / 16.5 s of CPU (SLSQP's small dense solves on a multi-threaded OpenBLAS spin; exponent 2.27); with
``threads(1)`` around the solves, two repeats: 0.39 / 0.80 / 1.33 s, exponent 0.89.

With SLSQP's ``ftol`` 1e-12 instead of 1e-15 (``mixlaw.decide.mixture.optimize.SLSQP_FTOL``), 2026-12-04, load 7-10,
three repeats, main beside it: 0.21 / 0.30 / 0.57 s, exponent 0.74 (main: 0.22 / 0.51 / 0.88 s, exponent 0.99). On
this objective SLSQP converged either way; on a fitted 20-domain CAMEL objective the old ``ftol`` sent most starts to
the 500-iteration cap (``benchmarks/mixture_domains.py``).

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/mixture_optimize_domains.py [--domains 5,10,20]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from mixlaw.decide.mixture.constraints import MixtureConstraints
from mixlaw.decide.mixture.optimize import optimize_mixture


def objective(n: int, seed: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    c = torch.as_tensor(rng.uniform(1.0, 2.0, n))
    k = torch.as_tensor(rng.uniform(0.3, 1.0, n))
    t = torch.as_tensor(rng.uniform(0.0, 1.0, (n, n)) - np.diag(rng.uniform(2.0, 5.0, n)))
    return lambda w: (c + k * torch.exp(t @ w)).sum()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--domains", default="5,10,20")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    optimize_mixture(objective(3, 0), MixtureConstraints(("a", "b", "c")))  # imports and first calls: not timed
    ds, cpu = [], []
    for n in (int(x) for x in args.domains.split(",")):
        doms = tuple(f"d{i}" for i in range(n))
        t0 = time.process_time()
        oks = []
        for r in range(args.repeats):
            opt = optimize_mixture(objective(n, r), MixtureConstraints(doms), random_state=r)
            oks.append(bool(opt.kkt["ok"]))
        s = (time.process_time() - t0) / args.repeats
        ds.append(n)
        cpu.append(s)
        print(f"D={n:3d} cpu={s:.2f}s kkt_ok={sum(oks)}/{len(oks)}", flush=True)
    slope = float(np.polyfit(np.log(ds), np.log(cpu), 1)[0])
    print(f"optimize_domains_exponent={slope:.2f}")


if __name__ == "__main__":
    main()
