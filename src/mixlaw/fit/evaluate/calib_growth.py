"""How fast the out-of-sample error of the extrapolation calibration grows with distance, from its nested fits.

:func:`error_model` gives the inflation and growth of the standardised fold errors along the primary (size) axis;
:func:`axis_excess` the additive error per unit of distance along each other axis
(:mod:`mixlaw.fit.evaluate.calib_axes`).
Both read the :class:`~mixlaw.fit.evaluate.calib_folds.FoldErrors` of
:func:`mixlaw.fit.evaluate.calibrate.fold_errors`; the model
they feed is :class:`mixlaw.fit.evaluate.calibrate.Calibration`.
"""

from __future__ import annotations

import math

import numpy as np

from mixlaw.fit.evaluate.calib_folds import FoldErrors

__all__ = ["accepts_full_fit", "axis_excess", "error_model", "misfit_share", "size_excess"]


def error_model(fe: FoldErrors, forward_only: bool = False) -> tuple[float, float, int]:
    """``(inflation, growth, n_growth)`` of the standardised fold errors ``z = e / sd`` (module docstring), along the
    primary axis, from the K-fold and the primary axis's own cuts (the other axes' cuts feed :func:`axis_excess`).

    ``forward_only``: the growth from the forward cuts alone (when the K-fold leaves out whole runs, their excess
    is the new-run term of :mod:`mixlaw.fit.evaluate.calib_runs`, not a growth with distance).

    Each fold's mean score ``M_j`` and mean squared distance ``D_j`` are read from its rows *beyond* its fitted
    range only. A K-fold that leaves out an end size predicts a few rows just beyond the range among many inside it;
    averaged with its interpolation errors (which already make ``c²``) that fold's ``D_j`` shrank by the square of
    its share of rows beyond, and so did its weight in the slope through the origin (``∝ D_j²``): the first step
    beyond the fitted range, where such folds are the only evidence, was read from the forward cuts alone
    (``docs/design/growth-uncertainty.md``)."""
    z2 = (fe.e / fe.sd) ** 2
    ok = np.isfinite(z2) & _primary_folds(fe)
    dist = fe.d * fe.span  # e-folds beyond the fold's fitted range
    inside = ok & ~fe.forward & (fe.d == 0)
    c2 = float(np.mean(z2[inside])) if inside.any() else 1.0
    pooled = ~fe.within if fe.within is not None else np.ones(fe.e.size, dtype=bool)
    beyond = ok & pooled & (fe.d > 0) & (fe.forward | (not forward_only))
    js = np.unique(fe.split[beyond])
    g2 = 0.0
    if js.size:  # each fold's rows beyond its fitted range: its rows inside are interpolation errors (``c²``)
        M = np.array([np.mean(z2[beyond & (fe.split == j)]) for j in js])
        D = np.array([np.mean(dist[beyond & (fe.split == j)] ** 2) for j in js])
        if np.sum(D * D) > 0:
            g2 = _nonnegative_mean(M - c2, D)
    return math.sqrt(c2), math.sqrt(g2), int(js.size)


def _nonnegative_mean(y: np.ndarray, D: np.ndarray) -> float:
    """The expected growth ``γ²`` given the folds, under a flat prior on ``γ² ≥ 0``: the mean of the normal of the
    least-squares slope through the origin ``γ̂² = Σ yD / Σ D²`` (standard error ``s = sqrt(Σ r² / (k − 1) / Σ D²)``,
    ``r`` the residuals, ``k`` the folds) truncated to ``[0, ∞)``: ``γ̂² + s · φ(a) / Φ(a)``, ``a = γ̂² / s``.

    Because ``E[z² | d] = c² + γ² d²`` is linear in ``γ²``, this is the expected squared score at every distance. The
    slope clipped at 0 was used before: where the cuts show no growth (a slope near or below 0 with a standard error
    as large) it is 0 and the interval assumes none, however far the query lies beyond the cuts; where the slope is
    many standard errors above 0 both are the same. With one fold (no residual degree of freedom) the clipped slope."""
    from scipy.stats import norm

    sdd = float(np.sum(D * D))
    g = float(np.sum(y * D) / sdd)
    k = int(y.size)
    if k < 2:
        return max(0.0, g)
    s = math.sqrt(float(np.sum((y - g * D) ** 2)) / (k - 1) / sdd)
    if not s > 0:
        return max(0.0, g)
    a = g / s
    if a < -30.0:  # the ratio φ/Φ → −a: the mean tends to 0 from above
        return s / -a
    return max(0.0, g + s * float(np.exp(norm.logpdf(a) - norm.logcdf(a))))


def _primary_folds(fe: FoldErrors) -> np.ndarray:
    """The errors of the K-fold, the primary axis's cuts and the within-run cuts (not the other axes' cuts)."""
    if fe.cut is None or not fe.axes:
        return np.ones(fe.e.size, dtype=bool)
    primary = fe.axes[0].name if fe.axis is not None and fe.axes[0].name == fe.axis else None
    return np.array([c == "" or c == primary for c in fe.cut], dtype=bool)


def axis_excess(fe: FoldErrors, accepts: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """``(κ, n)``: the additive extrapolation error per unit of distance along each *other* axis of ``fe`` (fit space;
    0 for the primary axis, whose growth is the ratio of :func:`error_model`), and the folds behind it.

    From the folds that hold out the far end of another axis (:mod:`mixlaw.fit.evaluate.calib_axes`): each fold's mean
    excess
    of the squared held-out error over its own residual variance, ``X_j = mean(e² − s_j²)``, regressed on its mean
    squared distances beyond its fitted range along those axes, ``X_j ≈ Σ_a κ_a² D_{ja}``, by non-negative least
    squares (Lawson & Hanson 1974; each fold counts once, as its rows share one fitted law). Distances in e-folds,
    not in fitted spans: on the simulated token-multiplier bend of ``tests/test_calib_axes.py`` spans cover 23 % of
    the held-out points, e-folds 67 % (the primary axis's ratio model made the same choice, on Epoch). An additive
    excess, not a ratio on the fold's own standard error: a fold cut along an axis the law needs (epochs ≤ 2 for a
    repetition decay) may not identify the parameter that axis moves, and its linearised standard error is then near
    0 where its error is not. The fold's parameter error is larger than the full fit's (fewer rows): conservative.

    ``accepts``: one flag per fold (indexed by :attr:`FoldErrors.split`), whether the fold's rows accept the full fit
    (:func:`accepts_full_fit`). Such a fold's excess counts up to its own delta-method parameter variance,
    ``X_j ≤ mean(sd_j² − s_j²)``: the rest of its miss is a solution its rows did not choose over the full fit's
    (``docs/design/extrapolation-axes.md``, "Cuts that do not identify")."""
    from scipy.optimize import nnls

    A = len(fe.axes)
    kappa = np.zeros(A)
    if fe.cut is None or fe.dists is None or A < 2 or fe.s2 is None:
        return kappa, 0
    primary = _primary_folds(fe)
    other = ~primary & np.isfinite(fe.e) & np.isfinite(fe.s2)
    js = np.unique(fe.split[other])
    if js.size == 0:
        return kappa, 0
    cols = np.arange(A) if fe.axes[0].name != fe.axis else np.arange(1, A)
    X = np.array([np.mean(fe.e[other & (fe.split == j)] ** 2 - fe.s2[other & (fe.split == j)]) for j in js])
    if accepts is not None:  # a cut that does not tell its fit from the full fit's: up to its linearised error
        V = np.array([np.mean(fe.sd[other & (fe.split == j)] ** 2 - fe.s2[other & (fe.split == j)]) for j in js])
        cap = np.asarray(accepts, dtype=bool)[js] & np.isfinite(V)
        X = np.where(cap, np.minimum(X, np.maximum(V, 0.0)), X)
    D = np.array([np.mean(fe.dists[other & (fe.split == j)][:, cols] ** 2, axis=0) for j in js])
    used = D.max(axis=0) > 0
    if used.any():
        k2 = np.zeros(cols.size)
        k2[used] = nnls(D[:, used], X)[0]
        kappa[cols] = np.sqrt(np.maximum(k2, 0.0))
    return kappa, int(js.size)


def accepts_full_fit(fe: FoldErrors, r: np.ndarray, n_params: int) -> np.ndarray | None:
    """One flag per fold (indexed by :attr:`FoldErrors.split`): whether the fold's own rows accept the full fit's
    parameters as well as its own noise would, ``Δ_j ≤ p``, with

    .. math:: Δ_j = \\frac{\\sum_{i \\in A_j} r_i^2 - (n_{A_j} - p)\\, s_j^2}{s_j^2},

    ``r`` the full fit's residuals (fit space), ``A_j`` the fold's fitted rows, ``s_j²`` its residual variance and
    ``p`` the law's (internal) parameters: the rise of the fold's sum of squares, in its residual variances, from its
    own optimum to the full fit's. Where the law holds, the full fit's parameters lie within the fold's sampling
    error of its own, and ``Δ_j`` is a ``χ²_p`` at most (Bates & Watts 1988, the likelihood-ratio region); ``p`` is
    its mean. A fold that accepts the full fit and still misses its held-out rows by more than its linearised
    parameter error predicts with a solution its rows chose by noise among ones they do not tell apart (a second
    valley of its objective: the repetition decay of a fit on two epochs); a misfit that grows along the axis makes
    the full fit, which fits the far rows too, a worse fit of the fold's rows (``Δ_j`` large). ``None`` without the
    folds' fitted rows or residual variances."""
    if fe.fitted is None or fe.s2 is None:
        return None
    r = np.asarray(r, dtype=np.float64)
    out = np.zeros(fe.fitted.shape[0], dtype=bool)
    for j in np.unique(fe.split):
        s2 = fe.s2[fe.split == j]
        s2j = float(s2[0]) if s2.size else float("nan")
        a = fe.fitted[j]
        if not (np.isfinite(s2j) and s2j > 0) or not np.isfinite(r[a]).all():
            continue
        delta = (float(np.sum(r[a] ** 2)) - (int(a.sum()) - n_params) * s2j) / s2j
        out[j] = delta <= n_params
    return out


def size_excess(fe: FoldErrors, side: np.ndarray | None = None) -> tuple[float, int]:
    """``(κ², n)``: the additive extrapolation variance per e-fold along the primary (size) axis, fit space, and the
    folds behind it.

    Each primary-axis fold (a K-fold that leaves out an end size, a forward cut) with rows beyond its fitted range
    gives ``X_j = mean(e² − s_j²)`` over those rows (the squared held-out error in excess of the fold's own residual
    variance) and ``D_j`` their mean e-folds beyond the range; ``X_j ≈ κ² D_j`` through the origin, taken as its
    expected value under a flat prior on ``κ² ≥ 0`` (:func:`_nonnegative_mean`; each fold counts once). The variance
    grows linearly in the distance (the error of a law whose misfit accumulates along log-size like a random walk),
    so a short extrapolation already carries an excess of the size the nearest cuts show.

    Why an additive term beside the ratio of :func:`error_model`: the ratio scales the fold's *own* linearised
    standard error, which is near 0 or undefined where a fit sits on a ridge or at a bound (mixture laws on a few
    sizes, CAMEL with a component at its exponential limit), so the ratio says little there although the error does
    not vanish; the excess is in the loss's own (log) units and needs no standard error.

    ``side``: one flag per error, the errors to use (those beyond the *same* end of their fold's range as the query:
    a fit extrapolated to smaller sizes can diverge where one extrapolated to larger sizes does not, e.g. a power law
    left without its smallest size, ``e^20`` on the simulated bend of ``tests/test_calib_mixture.py``)."""
    if fe.s2 is None:
        return 0.0, 0
    dist = fe.d * fe.span
    ok = np.isfinite(fe.e) & np.isfinite(fe.s2) & _primary_folds(fe) & (dist > 0)
    if side is not None:
        ok &= side
    if fe.within is not None:
        ok &= ~fe.within
    js = np.unique(fe.split[ok])
    if js.size == 0:
        return 0.0, 0
    X = np.array([np.mean(fe.e[ok & (fe.split == j)] ** 2 - fe.s2[ok & (fe.split == j)]) for j in js])
    D = np.array([np.mean(dist[ok & (fe.split == j)]) for j in js])
    return _nonnegative_mean(X, D), int(js.size)


def misfit_share(r: np.ndarray, v: np.ndarray, kind: str) -> tuple[float, float]:
    """``(w, F)``: how much of the full fit's residuals ``r`` (fit space) follow a trend along one axis beyond what
    their noise gives, ``w = max(0, 1 − 1/F)``, ``F`` the lack-of-fit statistic of a quadratic trend in the axis's
    values ``v`` (log values for a ``log`` axis): ``F = (SS_trend / 2) / (RSS / (n − 3))``.

    ``1 − 1/F`` is the share of the trend's sum of squares in excess of its expectation under no trend
    (``2 σ²``): the positive-part estimate of the misfit's share (James & Stein 1961). It weighs an axis's additive
    growth (:func:`axis_excess`): a nested fit cut along an axis misses by its own parameter error (a fit on fewer
    rows, and along an axis whose parameter the cut leaves weakly determined) plus the law's misfit growing along it;
    where the full fit's residuals show no trend along the axis, the excess is read as the cut's parameter error,
    which the base interval already carries for the full fit (``docs/design/extrapolation-axes.md``, "Misfit
    along an axis"). ``(1, nan)`` where it cannot be formed (fewer than 5 rows, a constant axis, no residual)."""
    r = np.asarray(r, dtype=np.float64)
    with np.errstate(all="ignore"):
        x = np.log(np.asarray(v, dtype=np.float64)) if kind == "log" else np.asarray(v, dtype=np.float64)
    ok = np.isfinite(r) & np.isfinite(x)
    r, x = r[ok], x[ok]
    if r.size < 5 or float(np.ptp(x)) <= 0:
        return 1.0, float("nan")
    z = (x - x.mean()) / x.std()
    X = np.column_stack([np.ones_like(z), z, z * z])
    beta = np.linalg.lstsq(X, r, rcond=None)[0]
    rss = float(np.sum((r - X @ beta) ** 2))
    trend = float(np.sum((r - r.mean()) ** 2)) - rss
    if not rss > 0:
        return 1.0, float("nan")
    F = (trend / 2.0) / (rss / (r.size - 3))
    return (max(0.0, 1.0 - 1.0 / F) if F > 0 else 0.0), float(F)
