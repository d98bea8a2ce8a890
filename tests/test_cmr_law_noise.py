"""The CMR law extrapolated to 2.5× the budget under evaluation noise, against a known truth (laws.md §6.6: the
published 460M law, R_CMR(250) = 0.5158): simulated runs (:func:`simulate_cmr_runs`) at noise 1e-5, 1e-4 and
1e-3 on the loss increments, two seeds each (the ``benchmarks/cmr_law_noise.py`` grid up to R = 1). The law's 95 %
band at T = 250 must hold the truth, and at low noise be tight around it."""

from __future__ import annotations

import numpy as np
import pytest

from mixlaw.decide.cmr import CMRSettings, critical_mixture_ratio
from mixlaw.design.simulate_cmr import simulate_cmr_runs

UNIT = 2e8
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}
TRUTH_250 = 0.5158
RATIOS = (0.125, 0.25, 1 / 3, 0.5, 0.75, 1.0)


def _law_at_250(noise: float, seed: int) -> tuple[float, float, float]:
    runs = simulate_cmr_runs(RATIOS, P460, token_unit=UNIT, noise=noise, random_state=seed)
    s = critical_mixture_ratio(runs, general_eval="general", domain_eval="code", bootstrap=30,
                               random_state=seed, sensitivity_lambdas=(), sensitivity_epsilons=(),
                               settings=CMRSettings(token_unit=UNIT)).sizes[0]  # fmt: skip
    band = s.cmr_at_band(np.array([250 * UNIT]))
    assert s.cmr_law is not None and band is not None
    return float(s.cmr_at(250 * UNIT)), float(band[0][0]), float(band[1][0])


@pytest.fixture(scope="module")
def results() -> dict[tuple[float, int], tuple[float, float, float]]:
    return {(n, k): _law_at_250(n, k) for n in (1e-5, 1e-4, 1e-3) for k in (0, 1)}


def test_the_band_at_two_and_a_half_budgets_holds_the_truth_at_every_noise(results: dict) -> None:
    inside = [lo <= TRUTH_250 <= hi for _, lo, hi in results.values()]
    assert sum(inside) >= 5, results  # measured 6 of 6 (19 of 20 in the benchmark's two grids)


def test_at_low_noise_the_extrapolated_law_is_tight_around_the_truth(results: dict) -> None:
    for k in (0, 1):
        v, lo, hi = results[(1e-5, k)]
        assert abs(v - TRUTH_250) < 0.02 and hi - lo < 0.1, (v, lo, hi)
