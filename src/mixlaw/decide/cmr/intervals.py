"""Bootstrap intervals of a CMR that contain their point estimate: the bias-corrected percentile (BC) interval.

A plain percentile interval describes where the resampled CMRs fall; when their distribution is shifted against
the point estimate it can exclude the point estimate itself (seen on the shipped example: ``0.497 [0.507,
0.545]``). The root of that shift was the resampling: every resampled end-of-budget increment was centred on the
curve fit, which misses the observation the point estimate uses (:func:`mixlaw.decide.cmr.curves.bootstrap_size`
now centres them on the observations). The BC interval (Efron 1987, "Better bootstrap confidence intervals", JASA
82:171; Efron & Tibshirani 1993, §14.3) then corrects the percentile levels for the shift that remains:

.. math:: z_0 = \\Phi^{-1}(\\hat p_0), \\qquad [\\,\\hat G^{-1}(\\Phi(2 z_0 + z_{\\alpha/2})),\\;
          \\hat G^{-1}(\\Phi(2 z_0 + z_{1-\\alpha/2}))\\,]

with ``p̂0`` the share of resamples below the point estimate (ties count half) and ``Ĝ`` their empirical
distribution. It contains the point estimate exactly when ``|z0| < z_{1−α/2}``, i.e. when the point estimate is in
the central ``1 − α`` of its own resamples (as does the plain percentile interval, only less lopsided). Beyond
that, or at the edge of a discrete reading, the end on the point's side is moved to the point estimate and
``extended`` says so: the resampling then says nothing about that side, and the decision notes it.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

__all__ = ["bc_interval", "BCInterval"]

_N = NormalDist()


class BCInterval(tuple[float, float]):
    """``(lo, hi)`` with ``extended``: True when an end had to be moved to the point estimate."""

    extended: bool

    def __new__(cls, lo: float, hi: float, extended: bool = False) -> BCInterval:
        obj = super().__new__(cls, (float(lo), float(hi)))
        obj.extended = bool(extended)
        return obj

    def __getnewargs__(self) -> tuple[float, float, bool]:  # type: ignore[override]  # pickled to the workers
        return (self[0], self[1], self.extended)


def bc_interval(boot: np.ndarray, point: float | None, level: float = 0.95) -> BCInterval | None:
    """The bias-corrected percentile interval of ``point`` from its bootstrap values ``boot`` (``None`` if empty).

    Without a point estimate it is the plain percentile interval. The arithmetic is
    :func:`mixlaw.fit.uncertainty.from_draws.bias_corrected_interval`, the one every decision uses."""
    from mixlaw.fit.uncertainty.from_draws import bias_corrected_interval

    iv = bias_corrected_interval(boot, point, level)
    return None if iv is None else BCInterval(iv.lo, iv.hi, iv.extended)
