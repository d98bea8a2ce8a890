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
from scipy.optimize import brentq

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
    if hv[i + 1] == 0.0:
        root = float(u[i + 1])
    else:
        root = float(brentq(lambda v: float(h(np.array([v]))[0]), u[i], u[i + 1], xtol=1e-10))
    return T0Result(float(math.exp(root)), T0_ROOT, int(crossings.size))


@dataclass(frozen=True)
class ObservedShape:
    """What the observed ΔL_gen of one ratio does up to the budget (model-free).

    ``rise``: the largest observed increment; ``peak_tokens``: where it is; ``drop``: how far the last
    observation lies below the peak; ``noise``: the scale used to judge (the fit's residual RMS, floored);
    ``still_rising``: the observations rise by more than 2 noise and the last one is within 2 noise of the peak;
    ``turned``: they rose by more than 2 noise and then fell by more than 2 noise.
    """

    rise: float
    peak_tokens: float
    drop: float
    noise: float
    still_rising: bool
    turned: bool
    never_rises: bool


def observed_shape(tokens: np.ndarray, dloss: np.ndarray, noise: float, *, floor: float = 1e-6) -> ObservedShape:
    """The model-free shape of a ratio's observed general-loss increments (see :class:`ObservedShape`)."""
    t = np.asarray(tokens, dtype=np.float64)
    y = np.asarray(dloss, dtype=np.float64)
    o = np.argsort(t, kind="stable")
    t, y = t[o], y[o]
    s = max(float(noise), floor)
    i = int(np.argmax(y))
    rise, drop = float(y[i]), float(y[i] - y[-1])
    rose = rise > 2 * s
    return ObservedShape(
        rise=rise,
        peak_tokens=float(t[i]),
        drop=drop,
        noise=s,
        still_rising=rose and drop <= 2 * s,
        turned=rose and drop > 2 * s,
        never_rises=not rose,
    )
