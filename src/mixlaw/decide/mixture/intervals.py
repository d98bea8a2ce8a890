"""Prediction intervals of the mixture comparison that contain their point prediction, or say why there is none.

The interval of a held-out row is built from the fit's bootstrap draws :math:`\\hat\\theta_b` (resamples of the
training runs, :mod:`mixlaw.fit.uncertainty.bootstrap`) in the law's fit space (``log`` for the mixture laws): the
predictive
sample :math:`m_b(x) + \\hat\\sigma z_{bj}`, :math:`z_{bj} \\sim t_{n-p}`, as in
:func:`mixlaw.fit.uncertainty.intervals.band`
(Davison & Hinkley 1997, §6.3). Its ends are the **bias-corrected percentile** (BC) interval of that sample around
the point prediction :math:`\\hat m(x) = g(f(x; \\hat\\theta))` (Efron 1987, "Better bootstrap confidence
intervals", JASA 82:171; Efron & Tibshirani 1993, §14.3), the same rule the CMR decisions use
(:func:`mixlaw.fit.uncertainty.from_draws.bc_interval`):

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
    solver: SolverOptions = DEFAULT_SOLVER, level: float = 0.95,
) -> tuple[np.ndarray, np.ndarray, str | None]:  # fmt: skip
    """``(lo, hi, summary)``: the BC interval widened about the point for the extrapolation in size, both terms from
    the same nested refits (:func:`mixlaw.fit.evaluate.calibrate.fold_errors`: a K-fold over the training sizes and
    forward cuts along ``size_column``), at each row's e-folds ``d`` beyond the fitted sizes:

    - the **ratio** of :mod:`mixlaw.fit.evaluate.calibrate`: each end's distance from the point times
      ``max(1, sqrt(c² + γ² d²))`` (each nested fit's errors standardised by its own standard errors);
    - the **additive excess** of :func:`mixlaw.fit.evaluate.calib_growth.size_excess`, added in quadrature in fit
      space: ``sqrt(h² + z² κ² d)`` for each end's distance ``h``, ``z`` the normal quantile of ``level``
      (the nested fits' squared errors beyond their fitted sizes in excess of their residual variance, growing
      linearly in the e-folds; from the nested fits' errors beyond the same end of their sizes as the row).

    Unchanged, with ``summary`` ``None``, where no nested fit can be formed. ``solver``: the caps of the
    calibration's refits."""
    import pandas as pd
    from scipy import stats

    from mixlaw.fit.evaluate.calib_growth import size_excess
    from mixlaw.fit.evaluate.calibrate import Calibration, calibrate, fold_errors
    from mixlaw.fit.problem.data import FitData
    from mixlaw.fit.uncertainty.intervals import inputs_of

    law = res.law
    data = FitData(law, train, target=target, input_map=res.input_map, group_column="run_id")
    clusters = pd.factorize(np.asarray(train[size_column]))[0]
    seeds = np.asarray(law.to_internal(res.params), dtype=np.float64)[None, :]
    kw: dict[str, Any] = {"loss": res.loss, "delta": res.delta, "max_iter": solver.cap(None)}
    rng = np.random.default_rng([seed, 2])
    fe = fold_errors(law, data, seeds, size_input=size_column, clusters=clusters, rng=rng, **kw)
    if fe is None:
        return lo, hi, None
    cal = calibrate(law, data, res.params, seeds, size_input=size_column, clusters=clusters, rng=rng, folds=fe, **kw)
    if cal is None:
        return lo, hi, None
    v = np.asarray(data.x_np[size_column], dtype=np.float64)
    above = v[fe.rows] > np.median(v)  # an error beyond its fold's upper end (a size left out is an end size)
    x = inputs_of(res, test)
    c = Calibration.from_dict(cal.to_dict())
    d = c.distance(x, len(lo))
    f = c.factor(d)
    up_k2, n_up = size_excess(fe, above)
    down_k2, n_down = size_excess(fe, ~above)
    q = np.asarray(x[size_column], dtype=np.float64).reshape(-1) if size_column in x else np.full(len(lo), np.inf)
    kappa2 = np.where(q >= v.max(), up_k2, down_k2)
    add = float(stats.norm.ppf((1.0 + level) / 2.0)) ** 2 * kappa2 * d
    kappa2_line, n_excess = (up_k2, n_up) if bool((q >= v.max()).any()) else (down_k2, n_down)
    with np.errstate(all="ignore"):
        pt = np.asarray(law.evaluate(dict(x), res.params), dtype=np.float64).reshape(-1)
        if law.fit_space == "log":
            down, up = f * np.log(pt / lo), f * np.log(hi / pt)
            lo, hi = pt * np.exp(-np.sqrt(down**2 + add)), pt * np.exp(np.sqrt(up**2 + add))
        else:
            down, up = f * (pt - lo), f * (hi - pt)
            lo, hi = pt - np.sqrt(down**2 + add), pt + np.sqrt(up**2 + add)
    line = c.summary() + (
        f"; plus an additive extrapolation error of {np.sqrt(kappa2_line):.3g} per sqrt(e-fold) "
        f"({'log ' if law.fit_space == 'log' else ''}units, from {n_excess} nested fits beyond their sizes)"
    )
    return lo, hi, line
