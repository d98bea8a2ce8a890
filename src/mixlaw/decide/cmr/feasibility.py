"""What makes a trained ratio feasible (laws.md §6.3, §6.5): its turning point ``T0`` within the budget, and its
general loss at the budget within the tolerance (the ratio laws, the tolerance boundary, the model-free crossing).

**Turning.** A turning point is a peak: the stationarity condition ``g(T) = dΔL_dom/dT + λ dΔL_gen/dT`` must change
sign from + to − *after* it has been positive. A fitted curve that dips just after ``T = 0`` and then rises has no
turning point (it is still rising); one that falls from the first evaluation on never rises at all. The verdict of
the fitted curve is then checked against the observed increments (:func:`observed_shape`): observations that keep
rising through the budget are never "feasible by turning", whatever the fit says.

**Tolerance.** Ratio laws are looked up by name in the law registry (``ratio_power``, ``ratio_exp`` or any
registered law whose only input is ``ratio``); ``power`` and ``exp`` are accepted as short names. A separable law
(one that declares ``profile_points``/``linear_design``) is fitted by exact profiled least squares
(:mod:`mixlaw.fit.solver.profiled`), every other law through the engine (:func:`mixlaw.fit.fit_law`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.optimize import least_squares

from mixlaw.decide.cmr.common import STATUS_OK, evaluate, input_ok, law_of, r2_mse, status_too_few
from mixlaw.decide.cmr.curves import engine_fit
from mixlaw.errors import FitError, InputError
from mixlaw.fit.solver.profiled import fit_profiled, is_separable
from mixlaw.laws import Law, get_law, law_names
from mixlaw.laws.ratio_exp import corr_grid_c
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = [
    "T0Result", "ObservedShape", "critical_tokens", "observed_shape", "RatioLawFit", "fit_ratio_law",
    "fit_ratio_law_batch", "tolerance_boundary", "model_free_crossing", "resolve_ratio_law",
]  # fmt: skip

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


_SHORT = {"power": "ratio_power", "exp": "ratio_exp"}


def resolve_ratio_law(name: str | Law) -> Law:
    """The ratio law ``name`` from the registry, validated by its spec (one input, ``ratio``)."""
    if isinstance(name, Law):
        law = name
    else:
        key = _SHORT.get(str(name), str(name))
        if key not in law_names():
            raise InputError(f"--ratio-law must be one of {', '.join(_ratio_laws())} (or power, exp), got {name!r}")
        law = law_of(key)
    if tuple(law.inputs) != ("ratio",):
        raise InputError(
            f"law '{law.name}' is not a ratio law (its inputs are {', '.join(law.inputs)}; a ratio law takes "
            f"'ratio' only): use one of {', '.join(_ratio_laws())}"
        )
    return law


def _ratio_laws() -> list[str]:
    out = []
    for n in law_names():
        try:
            if tuple(get_law(n).inputs) == ("ratio",):
                out.append(n)
        except Exception:  # a law that needs options cannot be a default ratio law
            continue
    return out


@dataclass(frozen=True)
class RatioLawFit:
    """A ratio law fitted on losses at the budget (``law`` is a registry name, e.g. ``ratio_power``)."""

    law: str
    params: dict[str, float]
    method: str
    r2: float
    mse: float
    n_points: int
    status: str = "converged"

    def predict(self, ratio: np.ndarray | float) -> np.ndarray:
        return evaluate(law_of(self.law), {"ratio": np.asarray(ratio, dtype=np.float64)}, self.params)

    def to_dict(self) -> dict[str, Any]:
        return {"law": self.law, "params": dict(self.params), "method": self.method, "r2": self.r2,
                "mse": self.mse, "n_points": self.n_points, "status": self.status}  # fmt: skip


def grid_starts(law: Law, **override: np.ndarray) -> list[dict[str, float]]:
    """The law's start grid with some parameters replaced by data-informed values."""
    grid = law.start_grid()
    grid.update({k: np.asarray(v, dtype=np.float64) for k, v in override.items()})
    names = list(law.param_names)
    return [dict(zip(names, map(float, combo), strict=True)) for combo in itertools.product(*(grid[n] for n in names))]


def fit_ratio_law(
    ratio: np.ndarray,
    loss: np.ndarray,
    *,
    law: str | Law = "power",
    c_method: str = "fit",
    fit_loss: str = "l2",
    notes: list[str] | None = None,
    warm: Mapping[str, float] | None = None,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> RatioLawFit:
    """Fit a ratio law ``L(R)`` on losses at one budget.

    Parameters
    ----------
    ratio, loss
        Domain shares and the loss (nats/token) at the budget, one entry per trained ratio.
    law
        A registered ratio law: ``"power"`` = ``ratio_power``, ``α R^s + β`` (CMR paper); ``"exp"`` =
        ``ratio_exp``, ``c + exp(k R + b)`` (Data Mixing Laws).
    c_method
        Only for ``ratio_exp``. ``"fit"``: all three parameters by least squares. ``"corr_grid"``: the
        published two-domain recipe — ``c`` by :func:`corr_grid_c`, then ``(k, b)`` by least squares of
        ``L − c = exp(kR + b)`` in raw space (started from the log-linear regression).
    fit_loss
        Objective (``"l2"`` by default: the CMR paper reports MSE). Separable laws under ``l2`` are fitted by
        exact profiled least squares; otherwise the engine fits.
    notes
        When given, the engine's convergence/boundary warnings are appended here instead of being emitted.
    warm
        A previous fit's parameters, used as the only start of an engine fit.
    solver
        Iteration caps of the fit (:class:`~mixlaw.options.SolverOptions`; default: each fit's own limit).
    """
    r = np.asarray(ratio, dtype=np.float64)
    y = np.asarray(loss, dtype=np.float64)
    if r.shape != y.shape or r.ndim != 1:
        raise InputError("fit_ratio_law needs two 1-D arrays of the same length")
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(y))):
        raise InputError("fit_ratio_law got non-finite ratios or losses")
    lw = resolve_ratio_law(law)
    if np.unique(r).size < 3:
        raise FitError(f"{status_too_few(3)}: a ratio law has three parameters, got {np.unique(r).size} ratios")
    if not np.all(input_ok(lw, {"ratio": r})):
        raise InputError(f"the ratio law '{lw.name}' is not defined at some of the ratios (e.g. R^s at R = 0)")
    status = "converged"
    if lw.name == "ratio_exp" and c_method == "corr_grid":
        c = corr_grid_c(r, y)
        k0, b0 = np.polyfit(r, np.log(y - c), 1)
        sol = least_squares(lambda p: c + np.exp(p[0] * r + p[1]) - y, x0=[k0, b0], xtol=1e-14, ftol=1e-14,
                            gtol=1e-14)  # fmt: skip
        params, method = {"c": c, "k": float(sol.x[0]), "b": float(sol.x[1])}, "corr_grid"
    elif c_method not in ("fit", "corr_grid"):
        raise InputError(f"c_method must be 'fit' or 'corr_grid', got {c_method!r}")
    elif is_separable(lw) and fit_loss == "l2":
        pf = fit_profiled(lw, {"ratio": r}, y[None, :], solver=solver)
        if pf.params[0] is None:
            raise FitError(f"fit of '{lw.name}' failed")
        params, method, status = pf.params[0], "fit", str(pf.status[0])
    else:
        if warm is not None:
            starts = [dict(warm)]
        elif lw.name == "ratio_exp":
            lo = float(np.min(y))
            starts = grid_starts(lw, c=np.array([0.0, 0.5 * lo, 0.9 * lo, 0.98 * lo, 0.995 * lo]))
        else:
            span = float(np.ptp(y)) or 1e-3
            beta = np.array([y.min() - span, float(np.mean(y)), y.max() + span, y.min() - 10 * span])
            starts = grid_starts(lw, beta=beta) if "beta" in lw.param_names else None  # type: ignore[assignment]
        params = engine_fit(lw, pd.DataFrame({"ratio": r, "y": y}), "y", starts=starts, loss=fit_loss, sink=notes,
                            solver=solver)  # fmt: skip
        method = "fit"
    yhat = evaluate(lw, {"ratio": r}, params)
    r2, mse = r2_mse(y, yhat)
    return RatioLawFit(lw.name, params, method, r2, mse, int(r.size), status)


def fit_ratio_law_batch(
    ratio: np.ndarray, Y: np.ndarray, *, law: str | Law, weights: np.ndarray | None = None, c_method: str = "fit",
    fit_loss: str = "l2", solver: SolverOptions = DEFAULT_SOLVER,
) -> list[RatioLawFit | None]:  # fmt: skip
    """One ratio-law fit per row of ``Y`` (``(B, n)`` losses at the ``n`` ratios), in one solve for a separable
    law (rows of ``weights`` = 0 leave ratios out); other laws fall back to one engine fit per row. ``solver``:
    the iteration caps of every fit."""
    lw = resolve_ratio_law(law)
    r = np.asarray(ratio, dtype=np.float64)
    Y = np.atleast_2d(np.asarray(Y, dtype=np.float64))
    W = np.ones_like(Y) if weights is None else np.asarray(weights, dtype=np.float64)
    out: list[RatioLawFit | None] = []
    if is_separable(lw) and fit_loss == "l2" and not (lw.name == "ratio_exp" and c_method == "corr_grid"):
        pf = fit_profiled(lw, {"ratio": r}, Y, weights=None if weights is None else W, solver=solver)
        for b, p in enumerate(pf.params):
            if p is None:
                out.append(None)
                continue
            keep = W[b] > 0
            r2, mse = r2_mse(Y[b, keep], evaluate(lw, {"ratio": r[keep]}, p))
            out.append(RatioLawFit(lw.name, p, "fit", r2, mse, int(keep.sum()), str(pf.status[b])))
        return out
    for b in range(Y.shape[0]):
        keep = W[b] > 0
        try:
            out.append(fit_ratio_law(r[keep], Y[b, keep], law=lw, c_method=c_method, fit_loss=fit_loss, notes=[],
                                     solver=solver))  # fmt: skip
        except (FitError, InputError):
            out.append(None)
    return out


def tolerance_boundary(
    fit: RatioLawFit,
    reference_loss: float,
    epsilon: float,
    *,
    r_min: float = 1e-3,
    r_max: float = 1.0,
    n_grid: int = 2001,
) -> tuple[float | None, str]:
    """Largest ``R ∈ [r_min, r_max]`` with ``L̂(R) − reference_loss ≤ ε`` (laws.md §6.3, tolerance set A).

    Returns ``(R, status)`` with status ``"ok"``, ``"whole range within tolerance"`` (R = r_max) or ``"no
    ratio within tolerance"`` (R = None).
    """
    grid = np.linspace(r_min, r_max, n_grid)

    def f(rr: np.ndarray) -> np.ndarray:
        return fit.predict(rr) - reference_loss - epsilon

    fv = f(grid)
    ok = np.isfinite(fv) & (fv <= 0)
    if ok[-1]:
        return float(r_max), "whole range within tolerance"
    if not ok.any():
        return None, "no ratio within tolerance"
    i = int(np.flatnonzero(ok)[-1])
    if fv[i] == 0.0:
        return float(grid[i]), STATUS_OK
    lo, hi = float(grid[i]), float(grid[i + 1])
    for _ in range(4):  # bracket refinement on 32-point sub-grids (vectorised; ~1e-12 in R)
        sub = np.linspace(lo, hi, 33)
        sv = f(sub)
        j = np.flatnonzero(np.isfinite(sv) & (sv <= 0))
        k = int(j[-1]) if j.size else 0
        lo, hi = float(sub[k]), float(sub[min(k + 1, 32)])
    f_lo, f_hi = f(np.array([lo, hi]))
    root = lo if not f_hi > f_lo else lo + (hi - lo) * (0.0 - f_lo) / (f_hi - f_lo)
    return float(min(max(root, lo), hi)), STATUS_OK


def model_free_crossing(ratio: np.ndarray, dloss: np.ndarray, epsilon: float) -> tuple[float | None, str]:
    """Where the observed end-of-budget ΔL_gen first crosses ``ε`` going up in ``R``, by linear interpolation
    between neighbouring trained ratios (no law). ``(R, "ok")``, ``(max R, "all observed within tolerance")`` or
    ``(None, "smallest ratio already outside tolerance")``."""
    o = np.argsort(np.asarray(ratio, dtype=np.float64))
    r, y = np.asarray(ratio, dtype=np.float64)[o], np.asarray(dloss, dtype=np.float64)[o]
    if r.size == 0:
        return None, "no observations at the budget"
    if y[0] > epsilon:
        return None, "smallest ratio already outside tolerance"
    above = np.flatnonzero(y > epsilon)
    if above.size == 0:
        return float(r[-1]), "all observed within tolerance"
    j = int(above[0])
    r0, r1, y0, y1 = r[j - 1], r[j], y[j - 1], y[j]
    return float(r0 + (epsilon - y0) * (r1 - r0) / (y1 - y0)), STATUS_OK
