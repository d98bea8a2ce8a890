"""What the multi-power law's fit from three 24k-step schedules pins down, and why it misses the 72k-step cosine.

The MultiPowerLaw curves (Luo et al. 2025; ``../shared/data/external/MultiPowerLaw``), per model size (25M, 100M,
400M): the law fitted on the paper's three schedules (``cosine_24000``, ``constant_24000``, ``wsdcon_9``, every 4th
logged step: :func:`coverage.mpl`) with :func:`mixlaw.fit.fit_law`, then evaluated on the held-out 72k-step cosine
and constant runs. Printed per size:

- the free fit: its parameters, :mod:`mixlaw.fit.uncertainty.identify`'s verdict (status, condition) and the mean
  absolute error (nats) on ``cosine_72000`` and ``constant_72000``; the published parameters on the same rows;
- **constrained refits** with some parameters held at the paper's values for that size (``beta, gamma``; ``C, beta,
  gamma``: the loss-drop shape, the strongest possible prior toward the documented scales) and the rest refitted —
  the Huber objective on log losses, ``δ = 1e-3``, sum, as the fitter's, started from both the free fit and the
  published point, the lower objective kept;
- **profiles** along ``gamma`` and ``B`` (each held at a grid of values, the rest refitted): the rise of the fitted
  rows' sum of squares (log space) in units of the free fit's residual variance ``σ̂²`` (a 95 % profile set accepts
  a rise up to 3.84) and the 72k cosine MAE at each value.

Read with ``docs/design/multi-power-short-schedules.md``. Run: ``PYTHONPATH=src python
benchmarks/mpl_short_schedules.py [--sizes 25,100,400]`` (about 50 s CPU per size).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from coverage import MPL_FIT, mpl
from mixlaw.options import FitOptions

HELD = ("cosine_72000", "constant_72000")
SHAPE = (("beta", "gamma"), ("C", "beta", "gamma"))
GAMMA_GRID = (0.3, 0.45, 0.65, 0.8, 1.0, 1.2, 1.6)
B_FACTORS = (0.75, 0.8, 0.85, 0.9, 0.95, 1.05, 1.1)


def _x(law, d: pd.DataFrame) -> dict[str, np.ndarray]:
    return {c: d[c].to_numpy(dtype=np.float64) for c in law.inputs}


def _pred(law, x: Mapping[str, np.ndarray], p: Mapping[str, float]) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(law.evaluate(dict(x), dict(p)), dtype=np.float64).reshape(-1)


def _mae(law, held: pd.DataFrame, p: Mapping[str, float]) -> list[float]:
    out = []
    for name in HELD:
        h = held[held["run_id"] == name]
        out.append(float(np.mean(np.abs(_pred(law, _x(law, h), p) - h["loss"].to_numpy()))))
    return out


def constrained(
    law, x: Mapping[str, np.ndarray], y: np.ndarray, fixed: Mapping[str, float], starts: Sequence[Mapping[str, float]]
) -> dict[str, float]:
    """The law refitted with ``fixed`` held (Huber δ = 1e-3 on log losses, sum; positive parameters in log)."""
    free = [n for n in law.param_names if n not in fixed]

    def res(v: np.ndarray) -> np.ndarray:
        r = np.log(_pred(law, x, {**fixed, **dict(zip(free, np.exp(v), strict=True))})) - np.log(y)
        return np.where(np.isfinite(r), r, 1.0)

    best = None
    for s in starts:
        sol = least_squares(res, np.log([s[n] for n in free]), loss="huber", f_scale=1e-3, max_nfev=3000)
        if best is None or sol.cost < best.cost:
            best = sol
    assert best is not None
    return {**fixed, **dict(zip(free, (float(v) for v in np.exp(best.x)), strict=True))}


def one_size(size: str) -> None:
    from mixlaw.fit import fit_law
    from mixlaw.laws import get_law
    from mixlaw.laws.multi_power import PUBLISHED_MPL

    law = get_law("multi_power")
    table = mpl(size, fitted=MPL_FIT)
    fit = table[table["split"] == "fit"].reset_index(drop=True)
    held = table[table["run_id"].isin(HELD)].reset_index(drop=True)
    x, y = _x(law, fit), fit["loss"].to_numpy(dtype=np.float64)
    r = fit_law("multi_power", fit, FitOptions(seed=0))
    pf = {k: float(v) for k, v in r.params.items()}
    pub = {k: float(v) for k, v in PUBLISHED_MPL[f"{size}M"].items()}
    e0 = np.log(_pred(law, x, pf)) - np.log(y)
    sse0, s2 = float(np.sum(e0**2)), float(np.sum(e0**2)) / (y.size - len(pf))

    def rise(p: Mapping[str, float]) -> float:
        return (float(np.sum((np.log(_pred(law, x, p)) - np.log(y)) ** 2)) - sse0) / s2

    ident = r.identifiability or {}
    show = ", ".join(f"{k} {v:.4g}" for k, v in pf.items())
    print(f"\n{size}M: {y.size} fitted rows; identifiability {ident.get('status')} (condition "
          f"{float(ident.get('condition', np.nan)):.3g}, weakest {ident.get('weakest')})")  # fmt: skip
    print(f"  {'free fit':<26} cos72 {_mae(law, held, pf)[0]:.4f}  const72 {_mae(law, held, pf)[1]:.4f}  ({show})")
    m = _mae(law, held, pub)
    print(f"  {'published':<26} cos72 {m[0]:.4f}  const72 {m[1]:.4f}  rise {rise(pub):.0f} σ̂²")
    for names in SHAPE:
        p = constrained(law, x, y, {n: pub[n] for n in names}, (pf, pub))
        m = _mae(law, held, p)
        label = f"{', '.join(names)} at the paper's"
        print(f"  {label:<26} cos72 {m[0]:.4f}  const72 {m[1]:.4f}  rise {rise(p):.0f} σ̂²  (B {p['B']:.0f})")
    for name, grid in (("gamma", GAMMA_GRID), ("B", tuple(f * pf["B"] for f in B_FACTORS))):
        cells = []
        for g in grid:
            p = constrained(law, x, y, {name: float(g)}, (pf,))
            cells.append(f"{g:.3g}: rise {rise(p):.0f}, cos72 {_mae(law, held, p)[0]:.4f}")
        print(f"  profile {name}: " + "; ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="25,100,400")
    args = ap.parse_args()
    t0 = time.process_time()
    for size in args.sizes.split(","):
        one_size(size)
    print(f"cpu_seconds={time.process_time() - t0:.0f}")


if __name__ == "__main__":
    main()
