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


def test_a_new_score_beyond_the_cuts_is_covered_with_the_student_t_quantile() -> None:
    """Simulated cuts with a real growth (``γ = 2``, 4 cuts at 0.3-0.7 e-folds, each the mean of 6 squared scores of
    one fold): a new score 2 e-folds beyond is inside ``±z · factor`` in 91 % of 2,000 replicates with the normal
    quantile (the growth is a variance estimated from 4 folds), 98 % with the Student-t one of 3 degrees of
    freedom (:meth:`mixlaw.fit.evaluate.calibrate.Calibration.factor` at a level)."""
    from mixlaw.fit.evaluate.calibrate import Calibration

    rng = np.random.default_rng(5)
    hit: dict[float | None, list[bool]] = {None: [], 0.95: []}
    for _ in range(2000):
        D = rng.uniform(0.1, 0.5, 4)  # mean squared distance of each cut's held-out rows
        M = np.array([np.mean(rng.normal(0.0, math.sqrt(1 + 4.0 * d), 6) ** 2) for d in D])
        g = math.sqrt(_nonnegative_mean(M - 1.0, D))
        cal = Calibration(axis="n_params", lo=1.0, hi=2.0, inflation=1.0, growth=g, n_folds=4, n_forward=4,
                          n_growth=4, n_scores=24)  # fmt: skip
        z = rng.normal(0.0, math.sqrt(1 + 4.0 * 4.0))
        for level in hit:
            hit[level].append(abs(z) <= 1.959964 * float(cal.factor(2.0, level)))
    normal, student = (float(np.mean(hit[k])) for k in (None, 0.95))
    assert normal < 0.94 and 0.95 <= student <= 0.995, (normal, student)
