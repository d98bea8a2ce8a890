"""The new-run term of extrapolation-calibrated intervals: how far a run the fit has not seen deviates from the law.

Why
---
When the rows are curves — many evaluations of each of a few runs (training schedules, mixtures) — a prediction
for a *new* run carries that run's own deviation from the law (a schedule the law describes less well than the
fitted ones), shared by all of its points. Neither the bootstrap (resampling the fitted runs describes the
parameter spread) nor a ratio on it (:mod:`mixlaw.fit.calibrate`, whose ratio assumes the extra error scales with
the fit's own standard error) carries it: on the MultiPowerLaw curves three 24k-step schedules give a bootstrap
interval 0.25 % wide, and held-out schedules miss by up to 0.8 %.

What
----
The leave-runs-out folds of the calibration (the grouped K-fold over runs) predict whole runs they did not fit.
Each held-out error ``e`` decomposes as the fold's parameter error plus residual noise — together the fold's own
delta-method variance ``sd²`` (:func:`mixlaw.fit.calibrate._delta_sd`) — plus the run's deviation ``δ``. So

.. math:: \\hat\\tau^2 = \\frac{1}{k} \\sum_{r=1}^{k} \\overline{(e^2 - sd^2)}_r \\quad (\\text{clipped at } 0),

the mean over the ``k`` held-out runs of each run's mean excess (a run counts once: its points share one
deviation). A random-effects reading (each run's deviation ``δ_r ~ N(0, τ²)``, one-way ANOVA; Searle, Casella &
McCulloch 1992, ch. 3) gives ``τ̂²`` about ``k`` degrees of freedom, so the new-run term of a ``level`` interval is
``t_k((1 + level)/2) · τ̂``: with 3 runs the 95 % multiplier is 3.18, not 1.96 — the honest small-sample rule.
The calibrated interval adds it in quadrature to each side of the (widened) base interval, in fit space:
``h = sqrt(h_base² + (t_k τ̂)²)``.

It applies only where the folds leave out runs that are curves (the median held-out run has at least
:data:`MIN_ROWS` rows), and where every fold could be standardised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mixlaw.fit.calibrate import FoldErrors

__all__ = ["MIN_ROWS", "run_excess"]

#: Rows a held-out run needs (median over the held-out runs) for the folds to measure a run-level deviation.
MIN_ROWS = 3


def run_excess(fe: FoldErrors) -> tuple[float, int]:
    """``(τ̂, k)``: the new-run error in fit space and the held-out runs behind it (module docstring); ``(0, 0)``
    where the K-fold is not over runs, the runs are single rows, or a held-out error cannot be standardised."""
    if fe.unit != "runs" or fe.groups is None:
        return 0.0, 0
    kfold = ~fe.forward
    if not kfold.any():
        return 0.0, 0
    runs, counts = np.unique(fe.groups[kfold], return_counts=True)
    if runs.size < 2 or float(np.median(counts)) < MIN_ROWS:
        return 0.0, 0
    excess = fe.e[kfold] ** 2 - fe.sd[kfold] ** 2
    g = fe.groups[kfold]
    if not np.isfinite(excess).all():
        return 0.0, 0
    per_run = np.array([float(np.mean(excess[g == r])) for r in runs])
    tau2 = max(0.0, float(np.mean(per_run)))
    return float(np.sqrt(tau2)), int(runs.size)
