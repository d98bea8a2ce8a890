"""How ``mix optimize`` grows with the number of domains D (5, 10, 20): the whole decision, fits included.

Data (simulated, seeded): for each D, ``4·D`` mixtures (Dirichlet(1) draws, plus the uniform mixture) trained at
three sizes (2e7, 6e7, 2e8), losses from the law's own example parameters (:attr:`mixlaw.laws.Law.example_params`
over D domains) times ``exp(N(0, 0.005))``; one target loss. Each D runs :func:`mixlaw.decide.mixture.optimum.optimize`
(the law's point fit, the optimum at 1e9 parameters, uniform evaluated, ``--bootstrap B``: the paired bootstrap)
and prints the process CPU seconds (``time.process_time``, one BLAS/torch thread) of the whole call; last, per law,
``<law>_domains_exponent=<slope of log CPU on log D>`` (the issue's goal: at most 2).

``benchmarks/mixture_optimize_domains.py`` times only the mixture optimiser on a fixed objective; here the fits,
which grow with the law's parameter count (CAMEL: ``k(D + 2) + 1``), are what dominates.

Measured 2026-12-04 on the shared 2-core machine (load 7-10, so seconds are inflated; the exponent is a ratio):

- before SLSQP's ``ftol`` went from 1e-15 to 1e-12 (``--laws camel --bootstrap 0``): 3.62 / 5.44 / 142.43 s,
  ``camel_domains_exponent=2.65``; at D = 20 the mixture optimiser took 131 s (172,185 objective evaluations, most
  starts at the 500-iteration cap), the fit 7 s;
- after (``--bootstrap 20``, the default of ``mix optimize``): dml 1.33 / 1.75 / 2.66 s,
  **``dml_domains_exponent=0.50``**; camel 8.45 / 10.07 / 20.95 s, **``camel_domains_exponent=0.66``**.

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/mixture_domains.py [--laws dml,camel] [--domains 5,10,20]
[--bootstrap 20]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd


def simulate(law_name: str, n_dom: int, seed: int) -> tuple[pd.DataFrame, list[str]]:
    from mixlaw.laws import get_law

    doms = [f"d{i}" for i in range(n_dom)]
    law = get_law(law_name, domains=tuple(doms))
    rng = np.random.default_rng(seed)
    w = np.vstack([np.full(n_dom, 1.0 / n_dom), rng.dirichlet(np.ones(n_dom), size=4 * n_dom)])
    sizes = np.array([2e7, 6e7, 2e8])
    rows = pd.DataFrame(np.repeat(w, len(sizes), axis=0), columns=[f"w_{d}" for d in doms])
    rows["n_params"] = np.tile(sizes, len(w))
    x = {c: rows[c].to_numpy() for c in law.inputs}
    y = law.evaluate(x, law.example_params) * np.exp(rng.normal(0.0, 0.005, len(rows)))
    rows["loss"] = y
    rows["run_id"] = [f"r{i}" for i in range(len(rows))]
    return rows, doms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--laws", default="dml,camel")
    ap.add_argument("--domains", default="5,10,20")
    ap.add_argument("--bootstrap", type=int, default=20)
    args = ap.parse_args()
    import torch

    from mixlaw.decide.mixture.optimum import optimize

    torch.set_num_threads(1)
    ds = [int(x) for x in args.domains.split(",")]
    for law in args.laws.split(","):
        cpu = []
        for n in ds:
            rows, doms = simulate(law, n, seed=n)
            t0 = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = optimize(rows, law=law, domains=doms, target="loss", target_size=1e9, bootstrap=args.bootstrap,
                               candidates={"uniform": {d: 1.0 / n for d in doms}})  # fmt: skip
            s = time.process_time() - t0
            cpu.append(s)
            kkt = (out.get("kkt") or {}).get("ok")
            print(f"{law} D={n:3d} rows={len(rows)} cpu={s:.2f}s kkt_ok={kkt}", flush=True)
        slope = float(np.polyfit(np.log(ds), np.log(cpu), 1)[0])
        print(f"{law}_domains_exponent={slope:.2f}", flush=True)


if __name__ == "__main__":
    main()
