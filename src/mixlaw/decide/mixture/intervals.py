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
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from mixlaw.decide.mixture.size_folds import SizeFolds
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = [
    "MIN_DRAWS",
    "SizeStatus",
    "SizeWidening",
    "bc_ends",
    "cut_excess",
    "extrapolates",
    "no_draws_reason",
    "prediction_interval",
    "size_calibrated",
    "size_widening",
]

#: Fewest finite bootstrap draws at a row for an interval there.
MIN_DRAWS = 2
#: E-folds a row may lie beyond the farthest row its nested cut predicted and still count as calibrated (about
#: 10 % in size: a query at 2.23x the largest size is calibrated by a cut that predicted 2.22x).
REACH_SLACK = 0.1
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


class SizeStatus(StrEnum):
    """Reason code of a test row's size calibration (:class:`SizeWidening`)."""

    CALIBRATED = "calibrated"
    """Nested size cuts beyond the same end of the fitted sizes reach at least as far as the row."""
    BEYOND_NESTED = "beyond_nested"
    """The row lies farther beyond the fitted sizes than any row a nested cut predicted: its error is extrapolated
    along the growth model, not measured (not calibrated at that extrapolation factor)."""
    NO_NESTED = "no_nested"
    """No usable nested cut predicts beyond that end of the fitted sizes: the interval is the bootstrap one alone."""


@dataclass(frozen=True)
class SizeWidening:
    """The terms of :func:`size_calibrated` at each test row (fit space: log units for the log-space laws)."""

    point: np.ndarray
    """The point prediction (natural units)."""
    base_down: np.ndarray
    """Distance of the BC interval's lower end below the point (fit space)."""
    base_up: np.ndarray
    """Distance of its upper end above the point (fit space)."""
    distance: np.ndarray
    """E-folds of the row beyond the fitted range (the largest over the law's size and token inputs)."""
    add: np.ndarray
    """Additive variance ``z² κ² d`` (fit space, squared)."""
    status: tuple[SizeStatus, ...]
    """Per row."""
    kappa: tuple[float, float]
    """``κ`` above and below the fitted sizes (fit space per sqrt(e-fold))."""
    cut: tuple[int, int]
    """The nested cut behind each ``κ`` (index into ``folds.cuts``; -1 without one)."""
    reach: tuple[float, float]
    """The farthest e-folds a nested cut predicted above and below its fitted sizes (0 without one)."""
    folds: SizeFolds | None
    """The nested cuts (:func:`mixlaw.decide.mixture.size_folds.size_folds`); ``None`` with fewer than three sizes."""

    def ends(self, fit_space: str) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` in natural units: each end's distance ``h`` from the point becomes ``sqrt(h² + add)``."""
        with np.errstate(all="ignore"):
            down = np.sqrt(self.base_down**2 + self.add)
            up = np.sqrt(self.base_up**2 + self.add)
            if fit_space == "log":
                return self.point * np.exp(-down), self.point * np.exp(up)
            return self.point - down, self.point + up

    def to_dict(self) -> dict[str, Any]:
        """The JSON summary (``size_calibration`` of ``mix compare``)."""
        far = [float(d) for d, st in zip(self.distance, self.status, strict=True) if st != SizeStatus.CALIBRATED]
        return {
            "status": _worst(self.status).value,
            "n_rows": {st.value: sum(x == st for x in self.status) for st in SizeStatus},
            "kappa_above": self.kappa[0], "kappa_below": self.kappa[1],
            "cut_above": self._cut(0), "cut_below": self._cut(1),
            "reach_factor_above": math.exp(self.reach[0]), "reach_factor_below": math.exp(self.reach[1]),
            "max_factor": math.exp(float(np.max(self.distance, initial=0.0))),
            "uncalibrated_max_factor": math.exp(max(far)) if far else None,
            "cuts": list(self.folds.cuts) if self.folds is not None else [],
            "dropped_cuts": list(self.folds.dropped) if self.folds is not None else [],
        }  # fmt: skip

    def _cut(self, i: int) -> str | None:
        return None if self.folds is None or self.cut[i] < 0 else self.folds.cuts[self.cut[i]]

    def summary(self, log_units: bool) -> str:
        """One line for ``interval_method``, rendered from the statuses and the numbers."""
        unit = "log units" if log_units else "units"
        sides = [
            f"{self.kappa[i]:.3g} {unit} per sqrt(e-fold) {where} (cut {self._cut(i)}, reaching "
            f"x{math.exp(self.reach[i]):.2f})"
            for i, where in enumerate(("above the fitted sizes", "below them"))
            if self.cut[i] >= 0
        ]
        line = (
            "size-calibrated on nested size cuts: an extrapolation error of "
            + (" and ".join(sides) if sides else "0 (no usable cut)")
            + ", in quadrature with the bootstrap interval"
        )
        worst = _worst(self.status)
        if worst != SizeStatus.CALIBRATED:
            far = [float(d) for d, st in zip(self.distance, self.status, strict=True) if st == worst]
            what = ("farther than its nested cut reached" if worst == SizeStatus.BEYOND_NESTED
                    else "no nested cut predicts beyond that end")  # fmt: skip
            line += f"; NOT calibrated on {len(far)} rows up to x{math.exp(max(far)):.2f} the fitted range ({what})"
        return line


def _worst(status: tuple[SizeStatus, ...]) -> SizeStatus:
    for st in (SizeStatus.NO_NESTED, SizeStatus.BEYOND_NESTED):
        if st in status:
            return st
    return SizeStatus.CALIBRATED


def cut_excess(folds: SizeFolds, side: np.ndarray) -> tuple[float, int, float]:
    """``(κ², cut, reach)``: the extrapolation variance per e-fold beyond the fitted sizes, from the nested cut
    most like the full fit among those whose rows ``side`` selects (beyond the same end of their fitted sizes as the
    query); the index of that cut (-1 without one) and the farthest e-folds it predicted.

    **Which cut.** The one with the most fitted sizes: the cut that leaves out only the end size, so that it
    extrapolates one step from one size fewer than the full fit (on a table of three sizes, two). Cuts with fewer
    sizes determine the size term worse than the full fit does and err more: on the shipped probes fitted at
    13k-113k, CAMEL fitted on 13k and 22k erred +0.03 to +0.26 (median, log) at 51k and 113k, where the cut fitted on
    13k-51k erred +0.03 to +0.07 at 113k and the full fit +0.01 to +0.11 at 253k. Pooling every cut (one slope
    through the origin, far cuts weighted most) gave 95 % intervals with a mean half-width of 0.24 there, the
    nearest cut 0.14, both covering all 20 runs.

    **Its variance.** ``κ² = max(0, X / D)``, ``X = m² + s² − σ̂²`` with the median ``m`` and the scaled median
    absolute deviation ``s`` (1.4826 MAD) of its errors and its own residual variance ``σ̂²``: the squared error in
    excess of the noise, robust to a single mixture the cut extrapolates wildly (CAMEL fitted on two probe sizes
    predicted one 51k run at ``e^12.4`` times its loss), ``D`` its mean e-folds: the variance grows linearly with
    the distance, as in :func:`mixlaw.fit.evaluate.calib_growth.size_excess`."""
    ok = side & np.isfinite(folds.e) & np.isfinite(folds.s2) & (folds.d > 0)
    js = np.unique(folds.fold[ok])
    if js.size == 0:
        return 0.0, -1, 0.0
    j = int(max(js, key=lambda k: (folds.n_sizes[k], -k)))
    rows = ok & (folds.fold == j)
    e = folds.e[rows]
    med = float(np.median(e))
    mad = 1.4826 * float(np.median(np.abs(e - med)))
    x = med**2 + mad**2 - float(folds.s2[rows][0])
    return max(0.0, x / float(np.mean(folds.d[rows]))), j, float(folds.d[rows].max())


def size_calibrated(
    res: Any, train: Any, test: Any, target: str, size_column: str, lo: np.ndarray, hi: np.ndarray, seed: int,
    solver: SolverOptions = DEFAULT_SOLVER, level: float = 0.95,
) -> tuple[np.ndarray, np.ndarray, str]:  # fmt: skip
    """``(lo, hi, summary)``: the BC interval ``lo, hi`` widened by :func:`size_widening`, and its one-line
    summary (which names the rows it could not calibrate)."""
    w = size_widening(res, train, test, target, size_column, lo, hi, seed, solver, level)
    lo2, hi2 = w.ends(res.law.fit_space)
    return lo2, hi2, w.summary(res.law.fit_space == "log")


def size_widening(
    res: Any, train: Any, test: Any, target: str, size_column: str, lo: np.ndarray, hi: np.ndarray, seed: int,
    solver: SolverOptions = DEFAULT_SOLVER, level: float = 0.95,
) -> SizeWidening:  # fmt: skip
    """The widening of the BC interval ``lo, hi`` of fit ``res`` at the ``test`` rows for their extrapolation in size.

    One term, from the nested size cuts of :func:`mixlaw.decide.mixture.size_folds.size_folds` (refit on the
    sizes up to (from) a cut, predict the larger (smaller) ones): each end's distance ``h`` from the point becomes
    ``sqrt(h² + z² κ² d)`` in fit space, ``d`` the row's e-folds beyond the fitted range (the largest over the law's
    size and token inputs), ``z`` the normal quantile of ``level`` and ``κ²`` the extrapolation variance per e-fold
    of the cuts beyond the same end as the row (:func:`cut_excess`). Each row's :class:`SizeStatus` says whether a
    cut reached as far (``calibrated``), none did (``beyond_nested``) or none predicts beyond that end
    (``no_nested``; the interval is then the BC one).

    Why one term: the ratio of :mod:`mixlaw.fit.evaluate.calibrate` (the BC distances times ``sqrt(c² + γ² d²)``,
    each nested fit's errors over its own delta-method standard error) and this excess were added in quadrature
    before, two estimates of the same error from the same refits. On SlimPajama the ratio's inflation came from one
    K-fold fit (``mixture_additive`` without its 310M runs, 7.3 % off, nine standard errors) that its remaining
    sizes and token counts leave undetermined, and widened every row 7.4×: 100 % coverage with a mean half-width 15
    times the 2.7B error. ``seed`` is kept for the signature (the cuts are deterministic); ``solver``: the caps of
    the refits (at least :data:`mixlaw.fit.evaluate.calibrate.FOLD_MIN_ITER`)."""
    from scipy import stats

    from mixlaw.decide.mixture.size_folds import size_folds
    from mixlaw.fit.evaluate.calibrate import FOLD_MIN_ITER
    from mixlaw.fit.problem.data import FitData
    from mixlaw.fit.uncertainty.intervals import inputs_of

    law = res.law
    data = FitData(law, train, target=target, input_map=res.input_map, group_column="run_id")
    cap = solver.cap(None)
    cap = None if cap is None else max(int(cap), FOLD_MIN_ITER)
    folds = size_folds(law, data, res.params, size_column, loss=res.loss, delta=res.delta, max_iter=cap)
    x = inputs_of(res, test)
    m = len(lo)
    d, above = np.zeros(m), np.zeros(m, dtype=bool)
    for c in (str(c) for c in law.inputs if not str(c).startswith("w_")):
        if c not in x or c not in data.x_np:
            continue
        tv = np.asarray(data.x_np[c], dtype=np.float64)
        q = np.asarray(x[c], dtype=np.float64).reshape(-1)
        with np.errstate(all="ignore"):
            hi_d, lo_d = np.log(q / tv.max()), np.log(tv.min() / q)
        d = np.maximum(d, np.nan_to_num(np.maximum(hi_d, lo_d), nan=0.0))
        if c == size_column:
            above = q > tv.max()
    d = np.maximum(d, 0.0)
    k2, cut, reach = [0.0, 0.0], [-1, -1], [0.0, 0.0]
    if folds is not None:
        for i, side in enumerate((folds.up, ~folds.up)):
            k2[i], cut[i], reach[i] = cut_excess(folds, side)
    side_i = np.where(above, 0, 1)
    kappa2 = np.array(k2)[side_i]
    add = float(stats.norm.ppf((1.0 + level) / 2.0)) ** 2 * kappa2 * d
    status = tuple(
        SizeStatus.CALIBRATED if dist <= 0 else SizeStatus.NO_NESTED if cut[i] < 0
        else SizeStatus.BEYOND_NESTED if dist > reach[i] + REACH_SLACK else SizeStatus.CALIBRATED
        for dist, i in zip(d, side_i, strict=True)
    )  # fmt: skip
    with np.errstate(all="ignore"):
        pt = np.asarray(law.evaluate(dict(x), res.params), dtype=np.float64).reshape(-1)
        if law.fit_space == "log":
            down, up = np.log(pt / lo), np.log(hi / pt)
        else:
            down, up = pt - lo, hi - pt
    return SizeWidening(
        point=pt, base_down=down, base_up=up, distance=d, add=add, status=status,
        kappa=(math.sqrt(k2[0]), math.sqrt(k2[1])), cut=(cut[0], cut[1]), reach=(reach[0], reach[1]), folds=folds,
    )  # fmt: skip
