"""The CMR law under evaluation noise, against a known truth (laws.md §6.6, 460M: R_CMR(250) = 0.5158).

Simulated CPT runs (`mixlaw.design.simulate_cmr`) from the published 460M CMR law, at noise 1e-5 …
1e-3 on the loss increments, two ratio grids and two seeds each; per run: the CMR at the budget (T = 100), the
refitted law's value at 2.5× the budget (T = 250), its 95 % bootstrap band there (30 resamples), and whether the
value and the truth lie inside the band.

Usage: python benchmarks/cmr_law_noise.py
"""

from __future__ import annotations

import numpy as np

from mixlaw.decide.cmr import CMRSettings, critical_mixture_ratio
from mixlaw.design.simulate_cmr import simulate_cmr_runs

UNIT = 2e8
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}
TRUTH_250 = 0.5158


def main() -> None:
    print("grid   noise  seed  answer@100  law@250  95% band@250  truth in band")
    for ratios in ((0.125, 0.2, 0.25, 1 / 3, 0.5), (0.125, 0.25, 1 / 3, 0.5, 0.75, 1.0)):
        for noise in (1e-5, 1e-4, 3e-4, 5e-4, 1e-3):
            for seed in (0, 1):
                runs = simulate_cmr_runs(ratios, P460, token_unit=UNIT, noise=noise, random_state=seed)
                dec = critical_mixture_ratio(runs, general_eval="general", domain_eval="code", bootstrap=30,
                                             random_state=seed, sensitivity_lambdas=(),
                                             sensitivity_epsilons=(),
                                             settings=CMRSettings(token_unit=UNIT))  # fmt: skip
                s = dec.sizes[0]
                grid = f"≤{ratios[-1]:g}"
                if s.cmr_law is None:
                    print(f"{grid:6} {noise:6.0e} {seed:4}  {s.answer():>10}  no CMR law")
                    continue
                v = float(s.cmr_at(250 * UNIT))
                band = s.cmr_at_band(np.array([250 * UNIT]))
                b = "—" if band is None else f"[{band[0][0]:.3f}, {band[1][0]:.3f}]"
                inside = band is not None and band[0][0] <= TRUTH_250 <= band[1][0]
                print(f"{grid:6} {noise:6.0e} {seed:4}  {s.answer():>10}  {v:7.3f}  {b:>14}  {inside}")


if __name__ == "__main__":
    main()
