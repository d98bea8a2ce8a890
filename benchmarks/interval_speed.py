"""What carrying a parameter the data do not pin down costs a prediction interval, against the interval without it.

A data-constrained fit on a simulated repetition grid (3 sizes × 3 unique-token budgets, ≤ 4 epochs, 1 % noise,
seeded) leaves the repetition decay ``R_D*`` unbounded above, so every interval at more epochs carries it
(:func:`mixlaw.fit.uncertainty.profile.carry_loose`: the fit's interval, then the draws moved to the accepted values
where a prediction is extreme, each with the noise and the calibration). The baseline, in the same script on the
same fit and rows: the interval before carrying (:func:`mixlaw.fit.uncertainty.intervals._band`). Both are 95 %
prediction intervals with the calibration, at ``--rows`` rows along tokens (1–60 epochs at 1B parameters).

The statistic is CPU time (``time.process_time``), the lower of ``--repeat`` runs of each, alternated; ``ratio`` is
carried over base (1 would be free). Measured 2026-12-04 on the shared 2-core machine at 20,000 rows: ``ratio=1.87``
(23.2 s against 12.4 s). Before the carried intervals shared the seeded noise draws with the base interval and
left out the rows the parameter does not move (where nothing repeats every accepted value is extreme by rounding,
so eight values were picked, each a pass over 80 million noise draws) it was ``ratio=8.46`` (129.6 s against
15.3 s); moving the whole interval to each accepted value, before that, cost about one envelope (41 predictions
per row) but counted the parameter's spread twice (``docs/design/loose-parameters.md``).

Run: ``PYTHONPATH=src python benchmarks/interval_speed.py [--rows 20000] [--resamples 40] [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from mixlaw.fit import fit_law
from mixlaw.fit.uncertainty.intervals import _band, band
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions


def _fit(resamples: int):  # noqa: ANN202 - a FitResult
    law = get_law("data_constrained")
    rng = np.random.default_rng(3)
    grid = np.array(np.meshgrid([1e8, 3e8, 1e9], [2e9, 6e9, 2e10], [1, 1.5, 2, 3, 4], indexing="ij"))
    n, u, ep = (g.ravel() for g in grid)
    x = {"n_params": n, "tokens": ep * u, "unique_tokens": u}
    y = np.asarray(law.evaluate(x, law.example_params), dtype=np.float64) * np.exp(0.01 * rng.standard_normal(n.size))
    table = pd.DataFrame({**x, "loss": y, "run_id": np.arange(n.size)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # the fit is weak on purpose: R_D* runs off
        return fit_law(law, table, FitOptions(bootstrap=BootstrapOptions(resamples=resamples, calibrate=True), seed=3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--resamples", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    res = _fit(args.resamples)
    m = args.rows
    x = {"n_params": np.full(m, 1e9), "tokens": np.geomspace(2e10, 1.2e12, m), "unique_tokens": np.full(m, 2e10)}
    best = {"base": np.inf, "carried": np.inf}
    for _ in range(args.repeat):
        for name, f in (("base", _band), ("carried", band)):
            t = time.process_time()
            b = f(res, x, kind="prediction")
            best[name] = min(best[name], time.process_time() - t)
            if name == "carried" and (b is None or "R_D_star" not in (b.note or "")):
                raise SystemExit("expected an interval that carries R_D_star")
    print(f"rows={m} resamples={args.resamples} base={best['base']:.2f}s carried={best['carried']:.2f}s (CPU)")
    print(f"ratio={best['carried'] / best['base']:.2f}")


if __name__ == "__main__":
    main()
