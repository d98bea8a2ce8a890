"""The new-run term of extrapolation-calibrated intervals: how far a run the fit has not seen deviates from the law.

Why
---
When the rows are curves — many evaluations of each of a few runs (training schedules, mixtures) — a prediction
for a *new* run carries that run's own deviation from the law (a schedule the law describes less well than the
fitted ones), shared by all of its points. Neither the bootstrap (resampling the fitted runs describes the
parameter spread) nor a ratio on it (:mod:`mixlaw.fit.evaluate.calibrate`, whose ratio assumes the extra error scales
with
the fit's own standard error) carries it: on the MultiPowerLaw curves three 24k-step schedules give a bootstrap
interval 0.25 % wide, and held-out schedules miss by up to 0.8 %.

What
----
The leave-runs-out folds of the calibration (the grouped K-fold over runs) predict whole runs they did not fit.
A held-out error ``e`` is the fold's parameter error, plus the run's deviation ``δ``, plus residual noise of the
fold's variance ``s²`` (``Σ r² / (n_fit − p)`` of the fold fit). So, over the held-out rows *inside* the fold's
fitted range of the axis (beyond it the growth terms below take over),

.. math:: \\hat\\tau^2 = \\frac{1}{k} \\sum_{r=1}^{k} \\overline{(e^2 - s^2)}_r \\quad (\\text{clipped at } 0),

the mean over the ``k`` held-out runs of each run's mean excess (a run counts once: its points share one
deviation). ``τ̂`` keeps the fold's own parameter error: it is the error of predicting a run from the *other*
runs, a little larger than the full fit's (one run more). Not the delta-method variance of the fold: on three
multi-power schedules, fits on two of them are so weakly identified that their linearised variance exceeds the
errors they actually make (the fold fits start from the full fit's estimate). A random-effects reading (each
run's deviation ``δ_r ~ N(0, τ²)``, one-way ANOVA; Searle, Casella & McCulloch 1992, ch. 3) gives ``τ̂²`` about
``k`` degrees of freedom, so the new-run term of a ``level`` interval is ``t_k((1 + level)/2) · τ̂``: with 3 runs
the 95 % multiplier is 3.18, not 1.96 — the small-sample rule. The calibrated interval adds it in quadrature to
each side of the (widened) base interval about the point prediction, in fit space,
``h = sqrt(max(h_base, 0)² + (t_k τ̂)²)``, and never inside the base interval.

Jackknife
---------
``τ̂`` is the error of predicting a run from ``K − 1`` of the ``K`` fold groups, not from all of them: a fold fit's
parameter error exceeds the full fit's. In the one-way random-effects reading (a law whose level is the mean of the
runs' deviations), a left-out run's error has variance ``τ²(1 + 1/(K − 1))``, a new run's under the full fit
``τ²(1 + 1/K)``. The *grouped jackknife* (delete-a-group; Shao & Tu 1995, §2.3) measures the full fit's share from
the same folds: at every row, ``V_J = (K − 1)/K · Σ_j (p_j − p̄)²`` over the ``K`` fold fits' predictions
(:func:`fold_spread`: its mean ``v̄_J`` over the rows behind ``τ̂``, each run once) estimates the variance of the full
fit's prediction, and a fold's is ``K/(K − 1)`` times it. So the new-run error of the *full* fit is

.. math:: \\hat\\tau_{new}^2 = \\max(0, \\hat\\tau^2 - \\bar v_J / (K - 1))

(:func:`new_run_sd`; unbiased for ``τ²(1 + 1/K)`` in that reading: ``tests/test_calib_runs.py``), the ``run_sd`` a
calibration stores (``run_excess`` keeps ``τ̂``, ``fold_var`` ``v̄_J``). Where the base interval is itself a bootstrap
over the same runs, it already carries the full fit's parameter error over runs, ``≈ v̄_J``, and the interval uses
``max(0, τ̂_new² − v̄_J)`` (:meth:`mixlaw.fit.evaluate.calibrate.Calibration.run_half`, ``carried``): the same
variance is not
added twice. With three MultiPowerLaw schedules this takes the new-run term from ``τ̂`` 0.0015 to 0.0009 (100M) and
0.0008 to 0.0005 (400M).

It applies only where the folds leave out runs that are curves (the median held-out run has at least
:data:`MIN_ROWS` rows) and every held-out error has its fold's noise.

Along the curves
----------------
A new run may also reach further along the axis (more steps, a larger LR area) than the fitted ones, and a law
can bend away from a run's later part (the annealing of a long cosine). Pooled forward cuts along the axis
(:mod:`mixlaw.fit.evaluate.calibrate`) mostly leave out the tail of the longest run, which need not show it. So where
the
runs are curves, the calibration also cuts *within every run*: fit the first
:data:`~mixlaw.fit.evaluate.calib_folds.WITHIN_FRACTIONS` of each run's rows (ordered along the axis), predict the
rest of
each run (:func:`~mixlaw.fit.evaluate.calib_folds.within_run_masks`; a cut that repeats a pooled one, as on a grid
shared
by all runs, is dropped). A held-out row's distance is the e-folds of the axis
beyond its own run's fitted part, ``d_r`` (:func:`run_distance`); the excess of fold ``j`` grows as

.. math:: \\overline{(e^2 - s^2)}_j = \\kappa^2\\, \\overline{d_r^2}_j,

``κ²`` the least-squares slope through the origin over the folds (each fold counts once), taken as its expected
value under a flat prior on ``κ² ≥ 0`` given its standard error, as the size growth
(:func:`mixlaw.fit.evaluate.calib_growth.error_model`; it was clipped at 0 before). A new run
has no fitted part of its own, so a query's distance is measured beyond a *typical* fitted run's end, the median
over the runs of each run's largest axis value (:func:`run_top`), not beyond the longest run: its new-run term is
``t_k · sqrt(τ̂² + κ̂² d(x)²)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mixlaw.fit.evaluate.calib_folds import FoldErrors

__all__ = [
    "MIN_ROWS",
    "fold_spread",
    "new_run_sd",
    "run_distance",
    "run_excess",
    "run_top",
    "step_growth",
]

#: Rows a held-out run needs (median over the held-out runs) for the folds to measure a run-level deviation.
MIN_ROWS = 3


def run_distance(v: np.ndarray, groups: np.ndarray, fit: np.ndarray, held: np.ndarray) -> np.ndarray:
    """E-folds of ``v`` at the ``held`` rows beyond the largest fitted value of the same run (0 inside, 0 for a run
    with no fitted row or non-positive values)."""
    g = np.asarray(groups)
    out = np.zeros(held.size)
    for r in np.unique(g[held]):
        kept = fit & (g == r)
        if not kept.any():
            continue
        top = float(v[kept].max())
        sel = g[held] == r
        with np.errstate(all="ignore"):
            d = np.log(v[held][sel] / top)
        out[sel] = np.where(np.isfinite(d), np.maximum(d, 0.0), 0.0)
    return out


def step_growth(fe: FoldErrors) -> tuple[float, int]:
    """``(κ̂, folds)``: growth of the excess error per e-fold beyond a run's fitted part (module docstring), from the
    within-run cuts; ``(0, 0)`` without them."""
    if fe.within is None or fe.d_run is None or not fe.within.any():
        return 0.0, 0
    excess = fe.e**2 - _noise(fe)
    X, D = [], []
    for j in np.unique(fe.split[fe.within]):
        sel = fe.within & (fe.split == j)
        if not np.isfinite(excess[sel]).all():
            return 0.0, 0
        X.append(float(np.mean(excess[sel])))
        D.append(float(np.mean(fe.d_run[sel] ** 2)))
    x, dd = np.array(X), np.array(D)
    if np.sum(dd * dd) <= 0:
        return 0.0, 0
    from mixlaw.fit.evaluate.calib_growth import _nonnegative_mean

    return float(np.sqrt(_nonnegative_mean(x, dd))), int(x.size)  # as the size growth: its expected value


def _noise(fe: FoldErrors) -> np.ndarray:
    """Each error's fold residual variance (the delta-method ``sd²`` for errors saved without it)."""
    return fe.s2 if fe.s2 is not None else fe.sd**2


def run_excess(fe: FoldErrors) -> tuple[float, int]:
    """``(τ̂, k)``: the new-run error in fit space and the held-out runs behind it (module docstring); ``(0, 0)``
    where the K-fold is not over runs, the runs are single rows, or a held-out error cannot be standardised."""
    if fe.unit != "runs" or fe.groups is None:
        return 0.0, 0
    kfold = ~fe.forward & (fe.d == 0)  # a new run inside the fold's range: beyond it the growth terms take over
    if not kfold.any():
        return 0.0, 0
    runs, counts = np.unique(fe.groups[kfold], return_counts=True)
    if runs.size < 2 or float(np.median(counts)) < MIN_ROWS:
        return 0.0, 0
    excess = (fe.e**2 - _noise(fe))[kfold]
    g = fe.groups[kfold]
    if not np.isfinite(excess).all():
        return 0.0, 0
    per_run = np.array([float(np.mean(excess[g == r])) for r in runs])
    tau2 = max(0.0, float(np.mean(per_run)))
    return float(np.sqrt(tau2)), int(runs.size)


def fold_spread(fe: FoldErrors) -> float:
    """Mean grouped-jackknife variance ``v̄_J`` (fit space) of the leave-runs-out fits' predictions on the rows
    behind :func:`run_excess` (each held-out run counts once; 0 without the jackknife or outside its rule)."""
    if fe.jack is None or fe.unit != "runs" or fe.groups is None:
        return 0.0
    kfold = ~fe.forward & (fe.d == 0)
    if not kfold.any() or not np.isfinite(fe.jack[kfold]).all():
        return 0.0
    g = fe.groups[kfold]
    return float(np.mean([float(np.mean(fe.jack[kfold][g == r])) for r in np.unique(g)]))


def new_run_sd(excess: float, fold_var: float, n_folds: int) -> float:
    """``τ̂_new = sqrt(max(0, τ̂² − v̄_J / (K − 1)))``: the error of a new run under the *full* fit (module docstring,
    "Jackknife"), from the leave-runs-out excess ``τ̂`` (``excess``), the mean jackknife variance ``v̄_J`` and the
    ``K`` folds (``τ̂`` unchanged for ``K < 2``)."""
    if n_folds < 2:
        return float(excess)
    return float(np.sqrt(max(0.0, excess**2 - fold_var / (n_folds - 1))))


def run_top(v: np.ndarray | None, groups: np.ndarray | None) -> float:
    """Median over the runs of each run's largest axis value ``v`` (NaN without an axis or runs)."""
    if v is None or groups is None:
        return float("nan")
    g = np.asarray(groups)
    return float(np.median([float(v[g == r].max()) for r in np.unique(g)]))
