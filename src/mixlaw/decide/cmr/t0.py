"""Critical token volume ``T0`` and the turning verdict checked against the observations (laws.md §6.3, §6.5).

A turning point is a peak: the stationarity condition ``g(T) = dΔL_dom/dT + λ dΔL_gen/dT`` must change sign from
+ to − *after* it has been positive. A fitted curve that dips just after ``T = 0`` and then rises has no turning
point (it is still rising); one that falls from the first evaluation on never rises at all. The verdict of the
fitted curve is then checked against the observed increments (:func:`observed_shape`): observations that keep
rising through the budget are never "feasible by turning", whatever the fit says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws import Law

__all__ = ["T0Result", "ObservedShape", "critical_tokens", "observed_shape"]

T0_ROOT = "root"
T0_FALLING = "falling at first evaluation"
T0_NONE = "no root in search range"


@dataclass(frozen=True)
class T0Result:
    """Critical token volume of one ratio.

    ``status``: ``"root"`` (``g`` rose, then changed sign + → −; ``t0_tokens`` is that turning point),
    ``"falling at first evaluation"`` (``g ≤ 0`` on the whole range: the general loss never rises; ``t0_tokens``
    is the first fitted point) or ``"no root in search range"`` (no peak up to ``t_hi``: the curve is still
    rising there, also after an initial dip; ``t0_tokens`` is None).
    """

    t0_tokens: float | None
    status: str
    n_roots: int


def _dloss_slope_logt(law: Law, params: Mapping[str, float], tokens: np.ndarray) -> np.ndarray:
    """``dΔL/d log T = T · dΔL/dT`` by autograd through ``law.predict`` (same sign as ``dΔL/dT``)."""
    t = torch.tensor(np.array(tokens, dtype=np.float64, copy=True), requires_grad=True)
    p = {k: torch.tensor(float(params[k]), dtype=torch.float64) for k in law.param_names}
    y = law.predict({"tokens": t}, p)
    (g,) = torch.autograd.grad(y.sum(), t)
    return (g * t).detach().numpy()


def critical_tokens(
    dom_law: Law,
    dom_params: Mapping[str, float],
    gen_law: Law,
    gen_params: Mapping[str, float],
    *,
    lagrange_mult: float = math.inf,
    t_lo: float,
    t_hi: float,
    n_grid: int = 512,
) -> T0Result:
    """Solve the stationarity condition for the critical token volume ``T0`` (laws.md §6.3, §6.5 step 5).

    ``g(T) = dΔL_dom/dT + λ · dΔL_gen/dT``; with ``λ = inf`` only the general term counts and ``T0`` is the
    peak of ``ΔL_gen``. The scan runs on a log-spaced grid over ``[t_lo, t_hi]`` (tokens); the first + → − sign
    change that follows a positive stretch is refined by :func:`scipy.optimize.brentq` on ``log T``. An initial
    negative stretch (a dip at the origin) is not a turning point.
    """
    if not (t_lo > 0 and t_hi > t_lo):
        raise InputError(f"critical_tokens needs 0 < t_lo < t_hi, got t_lo={t_lo}, t_hi={t_hi}")
    lam = float(lagrange_mult)
    if not lam > 0:
        raise InputError(f"lagrange_mult must be positive (or inf), got {lagrange_mult}")

    def h(u: np.ndarray) -> np.ndarray:
        t = np.exp(u)
        gen = _dloss_slope_logt(gen_law, gen_params, t)
        if math.isinf(lam):
            return gen
        return _dloss_slope_logt(dom_law, dom_params, t) / lam + gen  # g / λ: same sign, better scaled

    u = np.linspace(math.log(t_lo), math.log(t_hi), n_grid)
    hv = h(u)
    if not np.all(np.isfinite(hv)):
        return T0Result(None, T0_NONE, 0)
    pos = hv > 0
    if not pos.any():
        return T0Result(float(t_lo), T0_FALLING, 0)
    crossings = np.flatnonzero(pos[:-1] & ~pos[1:])  # + → −, necessarily after a positive stretch
    if crossings.size == 0:
        return T0Result(None, T0_NONE, 0)
    i = int(crossings[0])
    lo_u, hi_u = float(u[i]), float(u[i + 1])
    for _ in range(4):  # bracket refinement: 4 × 32-point sub-grids (one vectorised slope evaluation each)
        sub = np.linspace(lo_u, hi_u, 33)
        hs = h(sub)
        j = np.flatnonzero((hs[:-1] > 0) & ~(hs[1:] > 0))
        if j.size == 0:
            break
        k = int(j[0])
        lo_u, hi_u = float(sub[k]), float(sub[k + 1])
        if hs[k + 1] == 0.0:
            lo_u = hi_u
            break
    h_lo, h_hi = h(np.array([lo_u, hi_u]))
    root = lo_u if hi_u == lo_u or h_lo == h_hi else lo_u + (hi_u - lo_u) * h_lo / (h_lo - h_hi)
    return T0Result(float(math.exp(root)), T0_ROOT, int(crossings.size))


@dataclass(frozen=True)
class ObservedShape:
    """What the observed ΔL_gen of one ratio does up to the budget (model-free).

    ``rise``: the largest observed increment; ``peak_tokens``: where it is; ``drop``: how far the last
    observation lies below the peak; ``noise``: the scale used to judge (the fit's residual RMS, floored);
    ``still_rising``: the observations rise by more than 2 noise and the last one is within 2 noise of the peak;
    ``turned``: they rose by more than 2 noise and then fell by more than 2 noise; ``rising_at_end``: the
    slope at the last evaluation of a quadratic fitted to the last quarter of the evaluations (at least five) is
    positive by more than two of its standard errors: the data *show* the loss still rising at the budget, rather
    than only not yet showing it fall (a peak just before the budget is flat within the noise).
    """

    rise: float
    peak_tokens: float
    drop: float
    noise: float
    still_rising: bool
    turned: bool
    never_rises: bool
    rising_at_end: bool = False


def observed_shape(tokens: np.ndarray, dloss: np.ndarray, noise: float, *, floor: float = 1e-6) -> ObservedShape:
    """The model-free shape of a ratio's observed general-loss increments (see :class:`ObservedShape`)."""
    t = np.asarray(tokens, dtype=np.float64)
    y = np.asarray(dloss, dtype=np.float64)
    o = np.argsort(t, kind="stable")
    t, y = t[o], y[o]
    s = max(float(noise), floor)
    i = int(np.argmax(y))
    end = float(np.mean(y[-2:])) if y.size >= 2 else float(y[-1])  # one low last point is not a turn
    rise = float(y[i])
    drop = 0.0 if i >= y.size - 2 else float(y[i] - end)  # a peak among the last two points has not turned
    rose = rise > 2 * s
    return ObservedShape(
        rise=rise,
        peak_tokens=float(t[i]),
        drop=drop,
        noise=s,
        still_rising=rose and drop <= 2 * s,
        turned=rose and drop > 2 * s,
        never_rises=not rose,
        rising_at_end=rose and _end_slope_z(t, y, s) > 2.0,
    )


def _end_slope_z(t: np.ndarray, y: np.ndarray, noise: float) -> float:
    """Slope at the last evaluation in units of its standard error: a quadratic least-squares fit of the last
    quarter of the evaluations (at least five), differentiated at the end (a peak just before the budget has a
    slope near zero there even when the window's mean slope is positive)."""
    k = max(5, t.size // 4)
    if t.size < 5:
        return 0.0
    tt, yy = t[-k:], y[-k:]
    scale = float(tt[-1] - tt[0]) or 1.0
    x = (tt - tt[-1]) / scale
    X = np.stack([np.ones_like(x), x, x * x], axis=1)
    coef, *_ = np.linalg.lstsq(X, yy, rcond=None)
    cov = np.linalg.pinv(X.T @ X)
    se = noise * math.sqrt(max(float(cov[1, 1]), 0.0))
    return float(coef[1]) / se if se > 0 else 0.0


def _slopes_batch(law: Law, params: list[Mapping[str, float]], tokens: np.ndarray) -> np.ndarray:
    """``T · dΔL/dT`` for B parameter sets at once: tokens ``(B, G)`` → ``(B, G)`` (one autograd pass)."""
    t = torch.tensor(np.array(tokens, dtype=np.float64, copy=True), requires_grad=True)
    p = {k: torch.tensor([[float(q[k])] for q in params], dtype=torch.float64) for k in law.param_names}
    y = law.predict({"tokens": t}, p)
    (g,) = torch.autograd.grad(y.sum(), t)
    return (g * t).detach().numpy()


def critical_tokens_batch(
    dom_law: Law,
    dom_params: list[Mapping[str, float]],
    gen_law: Law,
    gen_params: list[Mapping[str, float]],
    *,
    lagrange_mult: float = math.inf,
    t_lo: float,
    t_hi: float,
    n_grid: int = 512,
) -> list[T0Result]:
    """:func:`critical_tokens` for many parameter sets of the same laws on the same range, vectorised (the
    bootstrap resamples of one ratio). Same rule: the first + → − change after a positive stretch."""
    B = len(gen_params)
    if B == 0:
        return []
    lam = float(lagrange_mult)

    def h(u: np.ndarray) -> np.ndarray:
        t = np.exp(u)
        gen = _slopes_batch(gen_law, gen_params, t)
        return gen if math.isinf(lam) else _slopes_batch(dom_law, dom_params, t) / lam + gen

    u = np.broadcast_to(np.linspace(math.log(t_lo), math.log(t_hi), n_grid), (B, n_grid))
    hv = h(u)
    out: list[T0Result | None] = [None] * B
    lo = np.zeros(B)
    hi = np.zeros(B)
    act = []
    for b in range(B):
        if not np.all(np.isfinite(hv[b])):
            out[b] = T0Result(None, T0_NONE, 0)
            continue
        pos = hv[b] > 0
        if not pos.any():
            out[b] = T0Result(float(t_lo), T0_FALLING, 0)
            continue
        cr = np.flatnonzero(pos[:-1] & ~pos[1:])
        if cr.size == 0:
            out[b] = T0Result(None, T0_NONE, 0)
            continue
        lo[b], hi[b] = u[b, cr[0]], u[b, cr[0] + 1]
        out[b] = T0Result(None, T0_ROOT, int(cr.size))
        act.append(b)
    if act:
        ia = np.array(act)
        sub_p = [gen_params[b] for b in ia], [dom_params[b] for b in ia]
        for _ in range(4):
            sub = np.linspace(lo[ia], hi[ia], 33, axis=1)  # (a, 33)
            gen = _slopes_batch(gen_law, sub_p[0], np.exp(sub))
            hs = gen if math.isinf(lam) else _slopes_batch(dom_law, sub_p[1], np.exp(sub)) / lam + gen
            cross = (hs[:, :-1] > 0) & ~(hs[:, 1:] > 0)
            has = cross.any(axis=1)
            k = np.argmax(cross, axis=1)
            rows = np.arange(ia.size)
            lo[ia] = np.where(has, sub[rows, k], lo[ia])
            hi[ia] = np.where(has, sub[rows, k + 1], hi[ia])
        ends = np.stack([lo[ia], hi[ia]], axis=1)
        gen = _slopes_batch(gen_law, sub_p[0], np.exp(ends))
        he = gen if math.isinf(lam) else _slopes_batch(dom_law, sub_p[1], np.exp(ends)) / lam + gen
        den = he[:, 0] - he[:, 1]
        with np.errstate(all="ignore"):
            root = np.where(den != 0, lo[ia] + (hi[ia] - lo[ia]) * he[:, 0] / den, lo[ia])
        for j, b in enumerate(ia):
            out[b] = T0Result(float(math.exp(root[j])), T0_ROOT, out[b].n_roots)  # type: ignore[union-attr]
    return [o for o in out if o is not None]
