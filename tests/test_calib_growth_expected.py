"""The size growth of the calibration is the slope's expected value given its standard error (non-negative).

``mixlaw.fit.evaluate.calib_growth._nonnegative_mean``: the mean of the least-squares slope's normal truncated to
``γ² ≥ 0`` (``docs/design/growth-uncertainty.md``), checked against a Monte Carlo of that distribution and on
simulated folds.
"""

from __future__ import annotations

import math

import numpy as np

from mixlaw.fit.evaluate.calib_growth import _nonnegative_mean


def _slope_and_se(y: np.ndarray, D: np.ndarray) -> tuple[float, float]:
    g = float(np.sum(y * D) / np.sum(D * D))
    s = math.sqrt(float(np.sum((y - g * D) ** 2)) / (y.size - 1) / float(np.sum(D * D)))
    return g, s


def test_expected_growth_is_the_truncated_normal_mean() -> None:
    rng = np.random.default_rng(11)
    D = np.array([0.01, 0.05, 0.2, 0.5, 0.6])
    for y in (np.array([-0.1, -0.9, 0.1, -0.4, 0.7]), np.array([0.3, 0.2, 1.0, 2.5, 2.9]), rng.normal(0, 1, 5)):
        g, s = _slope_and_se(y, D)
        draws = rng.normal(g, s, 400_000)
        mc = float(draws[draws >= 0].mean())
        assert abs(_nonnegative_mean(y, D) - mc) < 0.01 * max(1.0, mc)


def test_clear_growth_is_unchanged_and_no_evidence_is_not_read_as_none() -> None:
    D = np.array([0.04, 0.2, 0.5, 0.7, 1.1])
    clear = 3.0 * D + np.array([0.02, -0.03, 0.01, 0.03, -0.02])  # a slope far above its standard error
    g, _ = _slope_and_se(clear, D)
    assert abs(_nonnegative_mean(clear, D) - g) < 1e-9 * g
    flat = np.array([0.5, -0.6, 0.4, -0.5, 0.2])  # no growth, and cuts that cannot tell
    g0, s0 = _slope_and_se(flat, D)
    assert g0 < s0  # the clipped slope would be (nearly) 0 ...
    assert _nonnegative_mean(flat, D) > 0.4 * s0  # ... the expected growth is of the order of its standard error


def test_expected_growth_is_conservative_on_simulated_cuts() -> None:
    """Cuts whose excess scores grow by a true γ² (0 or 0.5) with noise sd 0.6, 2,000 replicates of 5 cuts: the
    expected growth is never below the clipped slope and on average not below the truth (it errs wide: means 0.67 at
    γ² = 0 and 0.90 at 0.5, the clipped slope's 0.32 and 0.62; ``docs/design/growth-uncertainty.md``)."""
    rng = np.random.default_rng(5)
    D = np.array([0.01, 0.05, 0.2, 0.5, 0.6])
    for truth in (0.0, 0.5):
        exp, clip = [], []
        for _ in range(2000):
            y = truth * D + rng.normal(0.0, 0.6, D.size)
            exp.append(_nonnegative_mean(y, D))
            clip.append(max(0.0, _slope_and_se(y, D)[0]))
        assert np.all(np.array(exp) >= np.array(clip) - 1e-12)
        assert np.mean(exp) >= truth
