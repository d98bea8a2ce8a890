"""Ratio laws at the budget, the tolerance boundary and the model-free tolerance crossing (laws.md §6.3, §7.4).

Ratio laws are looked up by name in the law registry (``ratio_power``, ``ratio_exp`` or any registered law whose
only input is ``ratio``); ``power`` and ``exp`` are accepted as short names. A separable law (one that declares
``profile_points``/``linear_design``) is fitted by exact profiled least squares (:mod:`.profile`), every other
law through the engine (:func:`mixlaw.fit.fit_law`).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from mixlaw.decide.cmr.common import STATUS_OK, evaluate, input_ok, law_of, r2_mse, status_too_few
from mixlaw.errors import BoundaryWarning, ConvergenceWarning, FitError, InputError
from mixlaw.fit.solver.profiled import fit_profiled, is_separable
from mixlaw.laws import Law, get_law, law_names
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = [
    "RatioLawFit",
    "corr_grid_c",
    "fit_ratio_law",
    "fit_ratio_law_batch",
    "tolerance_boundary",
    "model_free_crossing",
    "resolve_ratio_law",
]

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


def corr_grid_c(ratio: np.ndarray, loss: np.ndarray, n_grid: int = 1000) -> float:
    """Data Mixing Laws' floor ``c``: the ``c`` in ``[0, min L)`` maximising ``|corr(R, log(L − c))|``.

    (laws.md §7.3-7.4; ``continue_training.ipynb`` of yegcjs/mixinglaws: a 1000-point grid.)
    """
    y = np.asarray(loss, dtype=np.float64)
    if np.min(y) <= 0:
        raise InputError("the correlation-grid recipe needs positive losses")
    cs = np.linspace(0.0, float(np.min(y)), n_grid, endpoint=False)
    best, best_c = -1.0, 0.0
    for c in cs:
        z = np.log(y - c)
        if np.std(z) == 0:
            continue
        r = abs(float(np.corrcoef(ratio, z)[0, 1]))
        if r > best:
            best, best_c = r, float(c)
    return best_c


def engine_fit(
    law: str | Law,
    table: pd.DataFrame,
    target: str,
    *,
    starts: Sequence[Mapping[str, float]] | None = None,
    loss: str = "l2",
    sink: list[str] | None = None,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> dict[str, float]:
    """One fit through the engine; returns the parameters or raises :class:`FitError`.

    The engine's convergence/boundary warnings go to ``sink`` (the decision's notes) when it is given. ``solver``:
    its iteration cap (default: the engine's adaptive limit, :class:`~mixlaw.options.SolverOptions`)."""
    from mixlaw.fit import FitStatus, fit_law

    kw: dict[str, Any] = {"loss": loss, "use_grid": starts is None, "max_iter": solver.cap(None)}
    if starts is not None:
        kw["starts"] = list(starts)
    if sink is None:
        res = fit_law(law, table, target=target, **kw)
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            warnings.simplefilter("always", BoundaryWarning)
            res = fit_law(law, table, target=target, **kw)
        for w in caught:
            if issubclass(w.category, (ConvergenceWarning, BoundaryWarning)):
                sink.append(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if res.status is FitStatus.FAILED:
        raise FitError(f"fit of '{getattr(law, 'name', law)}' failed: {res.message}")
    params = {k: float(v) for k, v in res.params.items()}
    if not all(math.isfinite(v) for v in params.values()):
        raise FitError(f"fit of '{getattr(law, 'name', law)}' returned non-finite parameters")
    return params


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
