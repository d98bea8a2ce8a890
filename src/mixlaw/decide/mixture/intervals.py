"""Prediction intervals of the mixture comparison that contain their point prediction, or say why there is none.

The interval of a held-out row is built from the fit's bootstrap draws :math:`\\hat\\theta_b` (resamples of the
training runs, :mod:`mixlaw.fit.uncertainty.bootstrap`) in the law's fit space (``log`` for the mixture laws): the
predictive
sample :math:`m_b(x) + \\hat\\sigma z_{bj}`, :math:`z_{bj} \\sim t_{n-p}`, as in
:func:`mixlaw.fit.uncertainty.intervals.band`
(Davison & Hinkley 1997, §6.3). Its ends are the **bias-corrected percentile** (BC) interval of that sample around
the point prediction :math:`\\hat m(x) = g(f(x; \\hat\\theta))` (Efron 1987, "Better bootstrap confidence
intervals", JASA 82:171; Efron & Tibshirani 1993, §14.3), the same rule the CMR decisions use
(:func:`mixlaw.decide.cmr.common.bc_interval`):

.. math:: z_0 = \\Phi^{-1}(\\hat p_0), \\qquad [\\,\\hat G^{-1}(\\Phi(2 z_0 + z_{\\alpha/2})),\\;
          \\hat G^{-1}(\\Phi(2 z_0 + z_{1-\\alpha/2}))\\,]

with :math:`\\hat p_0` the share of the predictive sample below the point and :math:`\\hat G` its empirical
distribution; an end that still lies on the wrong side of the point is moved to the point (``extended``).

Why not the plain percentile interval: the resampled fits of a many-parameter law (``mixture_joint``: 17
parameters from 20 runs; a resample of runs keeps about 63 % of them, fewer distinct runs than parameters) and the
resamples of a point fit that stopped at the decisions' iteration cap (each resample starts at the point estimate and
keeps descending) are shifted against the point prediction, by up to 3.6 residual standard deviations on the
simulated runs of ``tests/test_mix_cov_intervals.py``; their percentile interval then excluded the point (e.g.
``2.645 [2.654, 4.929]``). The BC interval corrects the levels for that shift; it is the percentile interval when
there is none.

Draws whose prediction is not finite are dropped **per row** (one diverging resample no longer removes the interval
of every row of its fold), and a row without an interval carries the one-line reason (:func:`prediction_interval`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = ["MIN_DRAWS", "bc_ends", "extrapolates", "no_draws_reason", "prediction_interval", "size_calibrated"]

#: Fewest finite bootstrap draws at a row for an interval there.
MIN_DRAWS = 2
#: Predictive-sample size per row (draws times noise replicates), as :data:`mixlaw.fit.uncertainty.intervals.N_NOISE`.
N_SAMPLE = 4000


def bc_ends(sample: np.ndarray, point: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row-wise BC percentile ends ``(lo, hi, extended)`` of ``sample`` ``(S, m)`` around ``point`` ``(m,)``.

    NaN entries of ``sample`` are ignored; a column with fewer than :data:`MIN_DRAWS` finite entries gets NaN ends.
    """
    from scipy import stats

    s = np.asarray(sample, dtype=np.float64)
    pt = np.asarray(point, dtype=np.float64)
    m = s.shape[1]
    lo, hi, ext = np.full(m, np.nan), np.full(m, np.nan), np.zeros(m, dtype=bool)
    a = (1.0 - level) / 2.0
    za = float(stats.norm.ppf(1.0 - a))
    for j in range(m):
        b = s[:, j][np.isfinite(s[:, j])]
        if b.size < MIN_DRAWS or not math.isfinite(pt[j]):
            continue
        n = b.size
        p0 = (np.sum(b < pt[j]) + 0.5 * np.sum(b == pt[j])) / n
        z0 = float(stats.norm.ppf(min(max(p0, 0.5 / n), 1.0 - 0.5 / n)))
        q_lo, q_hi = np.quantile(b, [stats.norm.cdf(2 * z0 - za), stats.norm.cdf(2 * z0 + za)])
        ext[j] = bool(q_lo > pt[j] or q_hi < pt[j])
        lo[j], hi[j] = min(float(q_lo), float(pt[j])), max(float(q_hi), float(pt[j]))
    return lo, hi, ext


def prediction_interval(
    res: Any, x: dict[str, np.ndarray], level: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str | None]:
    """``(lo, hi, extended, reason)`` of the BC prediction interval of fit ``res`` at the input rows ``x``.

    ``lo``/``hi`` are in natural target units, NaN where a row has no interval; ``reason`` is the one-line reason
    when no row has one (no bootstrap, every resample failed, no residual degrees of freedom), else ``None`` (rows
    left without an interval then had fewer than :data:`MIN_DRAWS` finite draws: :func:`no_draws_reason`).
    """
    from mixlaw.fit.uncertainty.intervals import draw_predictions

    n_rows = len(next(iter(x.values()))) if x else 0
    nan = np.full(n_rows, np.nan)
    none = np.zeros(n_rows, dtype=bool)
    draws = res.bootstrap_params
    if draws is None:
        return nan, nan.copy(), none, "no bootstrap (fewer than 3 training runs to resample)"
    if len(draws) == 0:
        return nan, nan.copy(), none, f"all {res.n_bootstrap} bootstrap resamples failed"
    if res.residual_sd is None:
        return nan, nan.copy(), none, "no residual degrees of freedom (training rows <= parameters)"
    law = res.law
    m = draw_predictions(law, draws[list(law.flat_names)].to_numpy(dtype=np.float64), x)
    m = np.where(np.isfinite(m), m, np.nan)
    with np.errstate(all="ignore"):
        point = np.asarray(law.evaluate(dict(x), res.params), dtype=np.float64).reshape(-1)
        pt = np.log(point) if law.fit_space == "log" else point
    rng = np.random.default_rng(seed)
    reps = max(1, -(-N_SAMPLE // len(m)))
    dof = res.n_points - law.n_internal
    z = rng.standard_t(dof, (len(m) * reps, n_rows)) if dof > 0 else rng.standard_normal((len(m) * reps, n_rows))
    sample = np.repeat(m, reps, axis=0) + float(res.residual_sd) * z
    lo, hi, ext = bc_ends(sample, pt, level)
    if law.fit_space == "log":
        lo, hi = np.exp(lo), np.exp(hi)
    return lo, hi, ext, None


def no_draws_reason(n_draws: int) -> str:
    """The reason of a row whose resampled predictions are not finite (fewer than :data:`MIN_DRAWS` of them)."""
    return f"fewer than {MIN_DRAWS} of {n_draws} resamples give a finite prediction at the row"


def extrapolates(train: Any, test: Any, size_column: str) -> bool:
    """Whether the test rows reach outside the training rows' range of ``size_column`` (tables)."""
    if size_column not in train or size_column not in test or not len(test):
        return False
    tr = np.asarray(train[size_column], dtype=np.float64)
    te = np.asarray(test[size_column], dtype=np.float64)
    return bool(te.max() > tr.max() * (1 + 1e-9) or te.min() < tr.min() * (1 - 1e-9))


def size_calibrated(
    res: Any, train: Any, test: Any, target: str, size_column: str, lo: np.ndarray, hi: np.ndarray, seed: int,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> tuple[np.ndarray, np.ndarray, str | None]:  # fmt: skip
    """``(lo, hi, summary)``: the BC interval widened about the point by the extrapolation calibration of the fit
    (:mod:`mixlaw.fit.evaluate.calibrate`: a K-fold over the training sizes and forward cuts along ``size_column``, each
    nested fit's errors standardised by its own standard errors), by ``max(1, sqrt(c² + γ² d²))`` in fit space at
    each row's e-folds ``d`` beyond the fitted sizes. Unchanged, with ``summary`` ``None``, where no nested fit
    can be formed. ``solver``: the caps of the calibration's refits."""
    import pandas as pd

    from mixlaw.fit.evaluate.calibrate import Calibration, calibrate
    from mixlaw.fit.problem.data import FitData
    from mixlaw.fit.uncertainty.intervals import inputs_of

    law = res.law
    data = FitData(law, train, target=target, input_map=res.input_map, group_column="run_id")
    clusters = pd.factorize(np.asarray(train[size_column]))[0]
    seeds = np.asarray(law.to_internal(res.params), dtype=np.float64)[None, :]
    cal = calibrate(
        law, data, res.params, seeds, size_input=size_column, clusters=clusters, rng=np.random.default_rng([seed, 2]),
        loss=res.loss, delta=res.delta, max_iter=solver.cap(None),
    )  # fmt: skip
    if cal is None:
        return lo, hi, None
    x = inputs_of(res, test)
    c = Calibration.from_dict(cal.to_dict())
    f = c.factor(c.distance(x, len(lo)))
    with np.errstate(all="ignore"):
        pt = np.asarray(law.evaluate(dict(x), res.params), dtype=np.float64).reshape(-1)
        if law.fit_space == "log":
            lo, hi = pt * (lo / pt) ** f, pt * (hi / pt) ** f
        else:
            lo, hi = pt - f * (pt - lo), pt + f * (hi - pt)
    return lo, hi, c.summary()
