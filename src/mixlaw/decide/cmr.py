"""Critical mixture ratio (CMR): how much domain data a continual pre-training (CPT) mix can hold.

The question: for a model size and a CPT token budget ``T_max``, what is the largest domain share ``R`` of the
CPT mix such that the domain loss improves while the general loss does not rise by more than a tolerance
``ε``? This module answers it from runs following the CMR scaling law (Gu et al., arXiv:2407.17467; laws.md
§6), with the Data Mixing Laws view of the same question as an option (Ye et al., arXiv:2403.16952; laws.md
§7.4).

Pipeline, per model size (:func:`critical_mixture_ratio`):

1. **Increments.** ``ΔL(T) = L(T) − L(0)`` for the general and the domain evaluation, where ``L(0)`` is the
   run's own ``T = 0`` evaluation, else the last evaluation of its ``parent_run``, else the single ``phase =
   pt`` run of that size. ``T`` counts CPT tokens from the reference.
2. **Per-ratio fits** (laws ``dloss_domain``, ``dloss_general``; Eq. 6), least squares in raw increment
   space on ``T > 0`` through :func:`mixlaw.fit.fit_law`.
3. **Tolerance** ``ΔL_gen(R_j, T_max) ≤ ε`` (default ε = 0.05 nats/token) from the fitted curve.
4. **Critical token volume** ``T0``: the first root, on log T, where the stationarity condition
   ``g(T) = dΔL_dom/dT + λ dΔL_gen/dT`` changes sign from + to − (bracketing scan then
   :func:`scipy.optimize.brentq`). ``λ = ∞`` (the default) makes ``T0`` the peak of ``ΔL_gen`` and removes the
   undocumented knob (laws.md §6.7.1-2). Derivatives come from torch autograd through the law.
5. **Feasibility**: within tolerance, ``ΔL_dom(T_max) < 0`` and ``T0 ≤ T_max``. The discrete CMR is the
   largest feasible trained ratio.
6. **CMR law** ``R = α4 T^s4 + β3`` (Eq. 8) fitted through ``(T0(R_j), R_j)`` (needs ≥ 3 ratios with a root),
   evaluated at the budget and extrapolated to other budgets; its inverse gives ``T0`` of unseen ratios.
7. **Ratio law** at the budget (``ratio_power`` or ``ratio_exp``) fitted on the general and the domain loss
   across ratios; the **tolerance boundary** is the largest ``R`` whose predicted general increment stays
   ``≤ ε``.
8. The reported CMR is ``min(CMR law at T_max, tolerance boundary)`` when the CMR law can be fitted.

Uncertainty: a **residual bootstrap within runs** — see :func:`critical_mixture_ratio` (``bootstrap``). Every
outcome that is not a number is an explicit status string (:data:`STATUS_NO_FEASIBLE` and friends), never NaN.

Units: tokens are stored and reported in tokens. The token-axis laws use ``T = tokens / token_unit``; the
default ``token_unit`` is ``budget / 100`` so that, as in the paper, ``T_max = 100`` (the paper's own unit is
0.2B tokens; pass ``token_unit=2e8`` to get parameters comparable with laws.md §6.6).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch
from scipy.optimize import brentq, least_squares

from mixlaw.errors import BoundaryWarning, ConvergenceWarning, FitError, InputError
from mixlaw.laws import Law, get_law
from mixlaw.laws.cmr_law import CMRLaw
from mixlaw.laws.dloss_general import canonical_params

__all__ = [
    "STATUS_OK",
    "STATUS_NO_FEASIBLE",
    "STATUS_ALL_FEASIBLE",
    "STATUS_NO_ROOT",
    "status_too_few",
    "CMRDecision",
    "RatioLawFit",
    "T0Result",
    "critical_mixture_ratio",
    "critical_mixture_ratio_by_domain",
    "critical_tokens",
    "simulate_cmr_runs",
    "fit_ratio_law",
    "prepare_increments",
    "tolerance_boundary",
    "corr_grid_c",
]

STATUS_OK = "ok"
STATUS_NO_FEASIBLE = "no feasible ratio"
STATUS_ALL_FEASIBLE = "all ratios feasible — CMR ≥ largest tried"
STATUS_NO_ROOT = "no root in budget"
MIN_RATIOS_CMR_LAW = 3  # the CMR law has three parameters
# The two-power ΔL_gen law has long flat valleys (β2 and the two power terms are nearly collinear over one
# decade of T); the engine's default 300 iterations often stop short of them.
CURVE_MAX_ITER = 300
CURVE_STARTS = 4  # data-informed starts per curve fit (see _linear_starts)
BOOT_MAX_ITER = 300  # bootstrap refits: the point estimate plus one data-informed start, same iteration cap


def status_too_few(k: int = MIN_RATIOS_CMR_LAW) -> str:
    """Status when the CMR law cannot be fitted."""
    return f"too few ratios to fit (need ≥ {k})"


DEFAULT_LAMBDAS: tuple[float, ...] = (100.0, 300.0, 1000.0, 3000.0, 7000.0, math.inf)
DEFAULT_EPSILONS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1)


# ------------------------------------------------------------------------------------------------- T0 solver
@dataclass(frozen=True)
class T0Result:
    """Critical token volume of one ratio.

    ``status``: ``"root"`` (a + → − sign change of ``g`` was found; ``t0_tokens`` is it), ``"falling at first
    evaluation"`` (``g ≤ 0`` from the first fitted point on, ``t0_tokens`` is that point, an upper bound) or
    ``"no root in search range"`` (``g > 0`` up to ``t_hi``; ``t0_tokens`` is None).
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
    peak of ``ΔL_gen``. The scan runs on a log-spaced grid over ``[t_lo, t_hi]`` (tokens) and the first + → −
    sign change is refined by :func:`scipy.optimize.brentq` on ``log T``.
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
        return T0Result(None, "no root in search range", 0)
    pos = hv > 0
    crossings = np.flatnonzero(pos[:-1] & ~pos[1:])
    if crossings.size == 0:
        if not pos[0]:
            return T0Result(float(t_lo), "falling at first evaluation", 0)
        return T0Result(None, "no root in search range", 0)
    i = int(crossings[0])
    if hv[i + 1] == 0.0:
        root = float(u[i + 1])
    else:
        root = float(brentq(lambda v: float(h(np.array([v]))[0]), u[i], u[i + 1], xtol=1e-10))
    return T0Result(float(math.exp(root)), "root", int(crossings.size))


# ------------------------------------------------------------------------------------------------- ratio law
@dataclass(frozen=True)
class RatioLawFit:
    """A ratio law fitted on losses at the budget (``law`` is ``ratio_power`` or ``ratio_exp``)."""

    law: str
    params: dict[str, float]
    method: str
    r2: float
    mse: float
    n_points: int

    def predict(self, ratio: np.ndarray | float) -> np.ndarray:
        return _evaluate(get_law(self.law), {"ratio": np.asarray(ratio, dtype=np.float64)}, self.params)

    def to_dict(self) -> dict[str, Any]:
        return {
            "law": self.law,
            "params": dict(self.params),
            "method": self.method,
            "r2": self.r2,
            "mse": self.mse,
            "n_points": self.n_points,
        }


def _evaluate(law: Law, x: Mapping[str, Any], params: Mapping[str, float]) -> np.ndarray:
    """``law.evaluate`` on writable float64 copies (pandas may hand out read-only views)."""
    return law.evaluate({k: np.array(v, dtype=np.float64, copy=True) for k, v in x.items()}, params)


def _r2_mse(y: np.ndarray, yhat: np.ndarray) -> tuple[float, float]:
    resid = y - yhat
    mse = float(np.mean(resid**2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else float("nan")
    return r2, mse


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


def fit_ratio_law(
    ratio: np.ndarray,
    loss: np.ndarray,
    *,
    law: str = "power",
    c_method: str = "fit",
    fit_loss: str = "l2",
    notes: list[str] | None = None,
    warm: Mapping[str, float] | None = None,
) -> RatioLawFit:
    """Fit a ratio law ``L(R)`` on losses at one budget.

    Parameters
    ----------
    ratio, loss
        Domain shares and the loss (nats/token) at the budget, one entry per trained ratio.
    law
        ``"power"``: ``α R^s + β`` (CMR paper); ``"exp"``: ``c + exp(k R + b)`` (Data Mixing Laws).
    c_method
        Only for ``law="exp"``. ``"fit"``: all three parameters by the fitter. ``"corr_grid"``: the published
        two-domain recipe — ``c`` by :func:`corr_grid_c`, then ``(k, b)`` by least squares of
        ``L − c = exp(kR + b)`` in raw space (started from the log-linear regression).
    fit_loss
        Objective for the fitter (``"l2"`` by default: the CMR paper reports MSE).
    notes
        When given, the engine's convergence/boundary warnings are appended here instead of being emitted.
    warm
        A previous fit's parameters: used as the only start (bootstrap refits), instead of the grid.
    """
    r = np.asarray(ratio, dtype=np.float64)
    y = np.asarray(loss, dtype=np.float64)
    if r.shape != y.shape or r.ndim != 1:
        raise InputError("fit_ratio_law needs two 1-D arrays of the same length")
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(y))):
        raise InputError("fit_ratio_law got non-finite ratios or losses")
    if np.unique(r).size < 3:
        raise FitError(f"{status_too_few(3)}: a ratio law has three parameters, got {np.unique(r).size} ratios")
    if law == "power":
        if np.any(r <= 0):
            raise InputError("the power ratio law needs ratios > 0 (R^s diverges at 0 for s < 0)")
        name = "ratio_power"
        span = float(np.ptp(y)) or 1e-3
        starts = _grid_starts(
            get_law(name),
            beta=np.array([y.min() - span, float(np.mean(y)), y.max() + span, y.min() - 10 * span]),
        )
        if warm is not None:
            starts = [dict(warm)]
        params = _fit(
            name, pd.DataFrame({"ratio": r, "y": y}), "y", starts=starts, use_grid=False, loss=fit_loss, sink=notes
        )
        method = "fit"
    elif law == "exp":
        name = "ratio_exp"
        if c_method == "corr_grid":
            c = corr_grid_c(r, y)
            k0, b0 = np.polyfit(r, np.log(y - c), 1)
            sol = least_squares(
                lambda p: c + np.exp(p[0] * r + p[1]) - y, x0=[k0, b0], xtol=1e-14, ftol=1e-14, gtol=1e-14
            )
            params = {"c": c, "k": float(sol.x[0]), "b": float(sol.x[1])}
            method = "corr_grid"
        elif c_method == "fit":
            lo = float(np.min(y))
            starts = _grid_starts(get_law(name), c=np.array([0.0, 0.5 * lo, 0.9 * lo, 0.98 * lo, 0.995 * lo]))
            if warm is not None:
                starts = [dict(warm)]
            params = _fit(
                name, pd.DataFrame({"ratio": r, "y": y}), "y", starts=starts, use_grid=False, loss=fit_loss, sink=notes
            )
            method = "fit"
        else:
            raise InputError(f"c_method must be 'fit' or 'corr_grid', got {c_method!r}")
    else:
        raise InputError(f"ratio law must be 'power' or 'exp', got {law!r}")
    yhat = _evaluate(get_law(name), {"ratio": r}, params)
    r2, mse = _r2_mse(y, yhat)
    return RatioLawFit(name, params, method, r2, mse, int(r.size))


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
    root = brentq(lambda v: float(f(np.array([v]))[0]), grid[i], grid[i + 1], xtol=1e-12)
    return float(root), STATUS_OK


# ---------------------------------------------------------------------------------------------- fitting glue
def _grid_starts(law: Law, **override: np.ndarray) -> list[dict[str, float]]:
    """The law's start grid with some parameters replaced by data-informed values."""
    import itertools

    grid = law.start_grid()
    grid.update({k: np.asarray(v, dtype=np.float64) for k, v in override.items()})
    names = list(law.param_names)
    return [dict(zip(names, map(float, combo), strict=True)) for combo in itertools.product(*(grid[n] for n in names))]


def _fit(
    law: str | Law,
    table: pd.DataFrame,
    target: str,
    *,
    starts: Sequence[Mapping[str, float]] | None = None,
    use_grid: bool = True,
    loss: str = "l2",
    sink: list[str] | None = None,
    max_iter: int = 300,
) -> dict[str, float]:
    """One fit through the engine; returns the parameters or raises :class:`FitError`.

    The engine's :class:`~mixlaw.errors.ConvergenceWarning` / :class:`~mixlaw.errors.BoundaryWarning` are
    collected into ``sink`` (the decision's notes) instead of being printed once per curve and per bootstrap
    resample; with ``sink=None`` they propagate unchanged.
    """
    from mixlaw.fit import FitStatus, fit_law

    kw: dict[str, Any] = {"loss": loss, "use_grid": use_grid or starts is None, "max_iter": max_iter}
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


# --------------------------------------------------------------------------------------------------- data
@dataclass(frozen=True)
class _Columns:
    general: str
    domain: str
    ratio: str
    size: str | None


def _resolve_loss_column(table: pd.DataFrame, name: str, what: str) -> str:
    for cand in (name, f"loss_{name}"):
        if cand in table.columns:
            return cand
    known = [c for c in table.columns if str(c).startswith("loss_")]
    raise InputError(f"{what} eval column '{name}' not found; loss columns: {', '.join(known) or 'none'}")


def resolve_columns(
    table: pd.DataFrame,
    general_eval: str,
    domain_eval: str,
    ratio_column: str | None = None,
    size_column: str | None = None,
) -> _Columns:
    """Resolve the user's column names (``loss_`` prefix optional; ratio defaults to ``w_<domain>``)."""
    gen = _resolve_loss_column(table, general_eval, "general")
    dom = _resolve_loss_column(table, domain_eval, "domain")
    if gen == dom:
        raise InputError(f"general and domain eval are the same column '{gen}'")
    if ratio_column is None:
        dname = dom[len("loss_") :] if dom.startswith("loss_") else dom
        for cand in (f"w_{dname}", "ratio"):
            if cand in table.columns:
                ratio_column = cand
                break
        else:
            ws = [c for c in table.columns if str(c).startswith("w_")]
            raise InputError(
                f"no ratio column w_{dname} for domain eval '{dom}'; pass --ratio-column (mixture columns: "
                f"{', '.join(ws) or 'none'})"
            )
    elif ratio_column not in table.columns:
        raise InputError(f"ratio column '{ratio_column}' not found", column=ratio_column)
    if size_column is None:
        size_column = "n_params" if "n_params" in table.columns else None
    elif size_column not in table.columns:
        raise InputError(f"size column '{size_column}' not found", column=size_column)
    return _Columns(gen, dom, ratio_column, size_column)


def prepare_increments(table: pd.DataFrame, cols: _Columns) -> pd.DataFrame:
    """CPT rows with their increments from the ``T = 0`` reference.

    Returns one row per CPT evaluation with columns ``size, run_id, ratio, tokens, loss_general, loss_domain,
    dloss_general, dloss_domain, ref_general, ref_domain`` (``tokens`` counted from the reference).
    """
    for c in ("tokens",):
        if c not in table.columns:
            raise InputError(f"the run table needs a '{c}' column", column=c)
    df = table.copy()
    if "run_id" not in df.columns:
        df["run_id"] = [
            f"{s}|{r}" for s, r in zip(df[cols.size] if cols.size else [""] * len(df), df[cols.ratio], strict=True)
        ]
    df["_size"] = df[cols.size] if cols.size else "all"
    is_pt = df["phase"].astype(str).eq("pt") if "phase" in df.columns else pd.Series(False, index=df.index)
    # A table holding CPT runs for several domains tags each run with its domain (probe runs: ``domain``):
    # keep the runs of this domain only (a run of another domain has w_<this domain> = 0, not a ratio-0 run).
    dname = cols.domain[len("loss_") :] if cols.domain.startswith("loss_") else cols.domain
    if "domain" in df.columns:
        this = df["domain"].astype(str).eq(dname)
        if (this & ~is_pt).any():
            df, is_pt = df[this | is_pt], is_pt[this | is_pt]
    for c in (cols.general, cols.domain, "tokens"):
        bad = ~np.isfinite(pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64))
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise InputError(f"expected a finite number, got {df[c].iloc[pos]!r}", row=df.index[pos], column=c)
    pt = df[is_pt]
    cpt = df[~is_pt]
    if cpt.empty:
        raise InputError("no continual pre-training rows (every row has phase = pt)")
    out = []
    for run_id, run in cpt.groupby("run_id", sort=False):
        run = run.sort_values("tokens")
        ratios = pd.to_numeric(run[cols.ratio], errors="coerce").to_numpy(dtype=np.float64)
        ratios_pos = (
            ratios[run["tokens"].to_numpy(dtype=np.float64, copy=True) > run["tokens"].min()]
            if len(run) > 1
            else ratios
        )
        if not np.all(np.isfinite(ratios_pos)):
            raise InputError(f"run '{run_id}' has a missing ratio", column=cols.ratio)
        if np.ptp(ratios_pos) > 1e-9:
            raise InputError(f"run '{run_id}' changes its ratio during CPT", column=cols.ratio)
        ratio = float(ratios_pos[-1])
        if not 0.0 <= ratio <= 1.0:
            raise InputError(f"run '{run_id}': ratio must be in [0, 1], got {ratio}", column=cols.ratio)
        size = run["_size"].iloc[0]
        first = run.iloc[0]
        step0 = ("step" in run.columns and first["step"] == 0) or first["tokens"] == 0
        if step0 and len(run) > 1:
            ref_gen, ref_dom, t_ref = (
                float(first[cols.general]),
                float(first[cols.domain]),
                float(first["tokens"]),
            )
        else:
            parent = None
            if "parent_run" in run.columns and isinstance(first["parent_run"], str):
                par = df[df["run_id"] == first["parent_run"]]
                if not par.empty:
                    parent = par.sort_values("tokens").iloc[-1]
            if parent is None:
                same = pt[pt["_size"] == size]
                if same["run_id"].nunique() == 1:
                    parent = same.sort_values("tokens").iloc[-1]
            if parent is None:
                raise InputError(
                    f"run '{run_id}' has no T = 0 evaluation: add its step-0 eval, a parent_run, or one "
                    f"phase=pt run for its size"
                )
            ref_gen, ref_dom = float(parent[cols.general]), float(parent[cols.domain])
            t_par = float(parent["tokens"])
            t_ref = t_par if float(first["tokens"]) > t_par > 0 else 0.0
        out.append(
            pd.DataFrame(
                {
                    "size": size,
                    "run_id": run_id,
                    "ratio": ratio,
                    "tokens": run["tokens"].to_numpy(dtype=np.float64) - t_ref,
                    "loss_general": run[cols.general].to_numpy(dtype=np.float64),
                    "loss_domain": run[cols.domain].to_numpy(dtype=np.float64),
                    "ref_general": ref_gen,
                    "ref_domain": ref_dom,
                }
            )
        )
    inc = pd.concat(out, ignore_index=True)
    inc["dloss_general"] = inc["loss_general"] - inc["ref_general"]
    inc["dloss_domain"] = inc["loss_domain"] - inc["ref_domain"]
    return inc


# --------------------------------------------------------------------------------------------- fits per size
@dataclass(frozen=True)
class _RatioCurves:
    ratio: float
    run_ids: tuple[str, ...]
    t_lo: float
    t_last: float
    n_points: int
    gen_params: dict[str, float] | None
    dom_params: dict[str, float] | None
    r2_gen: float
    r2_dom: float
    mse_gen: float
    mse_dom: float
    obs_gen_at_budget: float | None
    obs_dom_at_budget: float | None
    error: str | None = None


@dataclass(frozen=True)
class _SizeFits:
    size: Any
    budget_tokens: float
    token_unit: float
    ref_general: float
    ref_domain: float
    curves: tuple[_RatioCurves, ...]
    pin_zero: bool
    excluded_runs: tuple[str, ...] = ()


def _curve_laws(token_unit: float, pin_zero: bool) -> tuple[Law, Law]:
    return (
        get_law("dloss_domain", token_unit=token_unit, pin_zero=pin_zero),
        get_law("dloss_general", token_unit=token_unit, pin_zero=pin_zero),
    )


_EXPONENTS = np.array([e for e in np.round(np.linspace(-1.5, 2.0, 36), 3) if e != 0.0])


def _linear_starts(law: Law, t: np.ndarray, y: np.ndarray, k: int) -> list[dict[str, float]]:
    """Data-informed starts for the power-sum increment laws (variable projection on a grid of exponents).

    For fixed exponents ``ΔL = Σ α_i T^{s_i} (+ β)`` is linear in the amplitudes, so every exponent pair of a
    grid gets its least-squares amplitudes in one batched solve; the ``k`` best are handed to the engine as
    starts. The engine does the fit; this only puts its starts in the right valley (the two-power law has long
    flat valleys that a fixed grid reaches slowly).
    """
    tt = t / float(law.options["token_unit"])
    pin = bool(law.options.get("pin_zero", False))
    exps = _EXPONENTS[_EXPONENTS > 0] if pin else _EXPONENTS
    if law.name == "dloss_domain":
        combos = exps[:, None]
    else:
        i, j = np.triu_indices(exps.size, k=1)
        combos = np.stack([exps[i], exps[j]], axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        cols = tt[None, :, None] ** combos[:, None, :]  # (C, n, m)
    if not pin:
        cols = np.concatenate([cols, np.ones(cols.shape[:2] + (1,))], axis=2)
    ok = np.all(np.isfinite(cols), axis=(1, 2))
    cols, combos = cols[ok], combos[ok]
    coef = np.einsum("cmn,n->cm", np.linalg.pinv(cols), y)  # (C, m+1)
    sse = np.sum((np.einsum("cnm,cm->cn", cols, coef) - y) ** 2, axis=1)
    best = np.argsort(sse)[:k]
    names = law.param_names
    starts = []
    for c in best:
        if law.name == "dloss_domain":
            vals = [coef[c, 0], combos[c, 0]] + ([] if pin else [coef[c, 1]])
        else:
            vals = [coef[c, 0], combos[c, 0], coef[c, 1], combos[c, 1]] + ([] if pin else [coef[c, 2]])
        starts.append(dict(zip(names, map(float, vals), strict=True)))
    return starts


def _fit_curves(
    pts: pd.DataFrame,
    token_unit: float,
    pin_zero: bool,
    fit_loss: str,
    warm: tuple[dict[str, float] | None, dict[str, float] | None] | None = None,
    sink: list[str] | None = None,
) -> tuple[dict[str, float] | None, dict[str, float] | None, str | None]:
    dom_law, gen_law = _curve_laws(token_unit, pin_zero)
    out: list[dict[str, float] | None] = []
    err = None
    t = pts["tokens"].to_numpy(dtype=np.float64, copy=True)
    for i, (law, col) in enumerate(((dom_law, "dloss_domain"), (gen_law, "dloss_general"))):
        y = pts[col].to_numpy(dtype=np.float64, copy=True)
        starts = _linear_starts(law, t, y, k=1 if warm is not None else CURVE_STARTS)
        if warm is not None and warm[i] is not None:
            starts = [warm[i], *starts]  # type: ignore[list-item]
        try:
            out.append(
                _fit(
                    law,
                    pts[["tokens", col]],
                    col,
                    starts=starts,
                    use_grid=False,
                    loss=fit_loss,
                    sink=sink,
                    max_iter=CURVE_MAX_ITER if warm is None else BOOT_MAX_ITER,
                )
            )
        except FitError as exc:
            out.append(None)
            err = f"{law.name} fit failed: {exc}"
    gen = canonical_params(out[1]) if out[1] is not None else None  # s2 <= s3: comparable across ratios
    return out[0], gen, err


def _size_fits(
    inc: pd.DataFrame,
    size: Any,
    budget_tokens: float | None,
    token_unit: float | None,
    pin_zero: bool,
    fit_loss: str,
    sink: list[str] | None = None,
) -> _SizeFits:
    d = inc[inc["size"] == size]
    fitted = d[d["tokens"] > 0]
    if fitted.empty:
        raise InputError(f"size {size}: no CPT evaluation after T = 0")
    t_last_runs = fitted.groupby("run_id")["tokens"].max()
    excluded: tuple[str, ...] = ()
    if budget_tokens is not None:
        budget = float(budget_tokens)
    else:
        # The budget the runs were planned for: the median final token count (a sweep in progress, or a crashed
        # run, must not drag it down to its own last evaluation). Runs that stop before it are left out, noted.
        budget = float(t_last_runs.sort_values().iloc[(len(t_last_runs) - 1) // 2 :].min())
        budget = float(t_last_runs[t_last_runs >= budget].min())
        short = t_last_runs[t_last_runs < 0.995 * budget]
        if not short.empty:
            excluded = tuple(sorted(map(str, short.index)))
            fitted = fitted[~fitted["run_id"].isin(excluded)]
            if sink is not None:
                sink.append(
                    f"left out {len(excluded)} run(s) that stop before the budget {budget:.4g} tokens: "
                    + ", ".join(excluded)
                )
    unit = float(token_unit) if token_unit is not None else budget / 100.0
    curves = []
    for ratio, grp in fitted.groupby("ratio", sort=True):
        pts = grp[["tokens", "dloss_general", "dloss_domain"]].reset_index(drop=True)
        n_t = pts["tokens"].nunique()
        near = np.isclose(grp["tokens"], budget, rtol=5e-3)
        obs_g = float(grp.loc[near, "dloss_general"].mean()) if near.any() else None
        obs_d = float(grp.loc[near, "dloss_domain"].mean()) if near.any() else None
        base: dict[str, Any] = dict(
            ratio=float(ratio),
            run_ids=tuple(sorted(map(str, grp["run_id"].unique()))),
            t_lo=float(pts["tokens"].min()),
            t_last=float(pts["tokens"].max()),
            n_points=int(len(pts)),
            obs_gen_at_budget=obs_g,
            obs_dom_at_budget=obs_d,
        )
        need = 4 if pin_zero else 5
        if n_t < need + 1:
            curves.append(
                _RatioCurves(
                    **base,  # type: ignore[arg-type]
                    gen_params=None,
                    dom_params=None,
                    r2_gen=float("nan"),
                    r2_dom=float("nan"),
                    mse_gen=float("nan"),
                    mse_dom=float("nan"),
                    error=f"too few evaluations to fit ΔL_gen (need ≥ {need + 1} token values, got {n_t})",
                )
            )
            continue
        msgs: list[str] = []
        dom_p, gen_p, err = _fit_curves(pts, unit, pin_zero, fit_loss, sink=msgs)
        if sink is not None:
            sink.extend(f"{float(ratio):g}\t{m}" for m in dict.fromkeys(msgs))
        curves.append(
            _with_quality(
                _RatioCurves(
                    **base,
                    gen_params=gen_p,
                    dom_params=dom_p,  # type: ignore[arg-type]
                    r2_gen=float("nan"),
                    r2_dom=float("nan"),
                    mse_gen=float("nan"),
                    mse_dom=float("nan"),
                    error=err,
                ),
                pts,
                unit,
                pin_zero,
            )
        )
    refs = d.groupby("run_id")[["ref_general", "ref_domain"]].first()
    return _SizeFits(
        size=size,
        budget_tokens=budget,
        token_unit=unit,
        ref_general=float(refs["ref_general"].mean()),
        ref_domain=float(refs["ref_domain"].mean()),
        curves=tuple(curves),
        pin_zero=pin_zero,
        excluded_runs=excluded,
    )


def _with_quality(c: _RatioCurves, pts: pd.DataFrame, unit: float, pin_zero: bool) -> _RatioCurves:
    dom_law, gen_law = _curve_laws(unit, pin_zero)
    q: dict[str, Any] = {}
    if c.gen_params is not None:
        q["r2_gen"], q["mse_gen"] = _r2_mse(
            pts["dloss_general"].to_numpy(dtype=np.float64, copy=True),
            _evaluate(gen_law, {"tokens": pts["tokens"].to_numpy(dtype=np.float64, copy=True)}, c.gen_params),
        )
    if c.dom_params is not None:
        q["r2_dom"], q["mse_dom"] = _r2_mse(
            pts["dloss_domain"].to_numpy(dtype=np.float64, copy=True),
            _evaluate(dom_law, {"tokens": pts["tokens"].to_numpy(dtype=np.float64, copy=True)}, c.dom_params),
        )
    return replace(c, **q)


# --------------------------------------------------------------------------------------------------- decision
@dataclass(frozen=True)
class _Decision:
    ratios: list[dict[str, Any]]
    cmr: float | None
    cmr_source: str
    status: str
    cmr_discrete: float | None
    cmr_law_params: dict[str, float] | None
    cmr_law_at_budget: float | None
    tolerance_boundary: float | None
    tolerance_status: str
    ratio_law_general: RatioLawFit | None
    ratio_law_domain: RatioLawFit | None
    notes: list[str]


def _decide(
    sf: _SizeFits,
    *,
    epsilon: float,
    lagrange_mult: float,
    ratio_law: str,
    c_method: str,
    fit_loss: str,
    t0_search_factor: float,
    cmr_law_warm: dict[str, float] | None = None,
    boot_from: _Decision | None = None,
    ratio_fits: tuple[RatioLawFit | None, RatioLawFit | None, str | None] | None = None,
    cmr_cache: dict[float, tuple[dict[str, float] | None, str | None]] | None = None,
) -> _Decision:
    """The decision for one size from its fitted curves (pure given the fits, except CMR/ratio-law fits)."""
    dom_law, gen_law = _curve_laws(sf.token_unit, sf.pin_zero)
    budget = sf.budget_tokens
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    for c in sf.curves:
        row: dict[str, Any] = {
            "n_params": _size_json(sf.size),
            "ratio": c.ratio,
            "run_ids": list(c.run_ids),
            "t0_tokens": None,
            "t0_status": None,
            "dloss_general_at_budget": None,
            "dloss_domain_at_budget": None,
            "observed_dloss_general_at_budget": c.obs_gen_at_budget,
            "observed_dloss_domain_at_budget": c.obs_dom_at_budget,
            "within_tolerance": None,
            "feasible": False,
            "reason": "",
            "r2_general": _num(c.r2_gen),
            "r2_domain": _num(c.r2_dom),
        }
        if c.gen_params is None or c.dom_params is None:
            row["reason"] = c.error or "fit failed"
            rows.append(row)
            continue
        g_b = float(_evaluate(gen_law, {"tokens": np.array([budget])}, c.gen_params)[0])
        d_b = float(_evaluate(dom_law, {"tokens": np.array([budget])}, c.dom_params)[0])
        row["dloss_general_at_budget"], row["dloss_domain_at_budget"] = g_b, d_b
        t0 = critical_tokens(
            dom_law,
            c.dom_params,
            gen_law,
            c.gen_params,
            lagrange_mult=lagrange_mult,
            t_lo=c.t_lo,
            t_hi=max(budget, c.t_last) * t0_search_factor,
        )
        row["t0_tokens"], row["t0_status"] = t0.t0_tokens, t0.status
        within = g_b <= epsilon
        row["within_tolerance"] = bool(within)
        reasons = []
        if not within:
            reasons.append(f"general loss rises {g_b:+.4f} > ε = {epsilon:g} at the budget")
        if d_b >= 0:
            reasons.append(f"domain loss does not improve ({d_b:+.4f})")
        if t0.t0_tokens is None:
            reasons.append(f"{STATUS_NO_ROOT} (no turning point up to {t0_search_factor:g}× the budget)")
        elif t0.t0_tokens > budget:
            reasons.append(f"{STATUS_NO_ROOT}: T0 = {t0.t0_tokens:.4g} tokens > budget {budget:.4g}")
        if c.ratio == 0.0:
            # R = 0 (general data only) is the control run, not a candidate share
            reasons = ["control run (R = 0: no domain data)", *reasons]
        row["feasible"] = not reasons
        row["reason"] = (
            "; ".join(reasons)
            if reasons
            else (
                "feasible" + (" (general loss already falling at the first evaluation)" if t0.status != "root" else "")
            )
        )
        rows.append(row)

    fitted = [r for r in rows if r["t0_status"] is not None]
    feas = [r["ratio"] for r in rows if r["feasible"]]
    cmr_discrete = max(feas) if feas else None

    # CMR law through (T0(R_j), R_j); it depends on λ only, so sensitivity runs share it through cmr_cache
    pts = [(r["t0_tokens"], r["ratio"]) for r in fitted if r["t0_status"] == "root"]
    law = get_law("cmr_law", token_unit=sf.token_unit)
    if cmr_cache is not None and lagrange_mult in cmr_cache:
        cmr_params, cmr_note = cmr_cache[lagrange_mult]
    else:
        cmr_params, cmr_note = _fit_cmr_law(
            law, pts, fit_loss, cmr_law_warm, notes, warm_only=boot_from is not None and cmr_law_warm is not None
        )
        if cmr_cache is not None:
            cmr_cache[lagrange_mult] = (cmr_params, cmr_note)
    if cmr_note:
        notes.append(cmr_note)
    cmr_at_budget = (
        float(_evaluate(law, {"tokens": np.array([budget])}, cmr_params)[0]) if cmr_params is not None else None
    )

    # ratio law and tolerance boundary at the budget (independent of λ and ε: shared through ratio_fits)
    if ratio_fits is None:
        warm_rl = (boot_from.ratio_law_general, boot_from.ratio_law_domain) if boot_from else (None, None)
        ratio_fits = _fit_ratio_laws(sf, rows, ratio_law, c_method, fit_loss, notes, warm_rl)
    rl_gen, rl_dom, rl_note = ratio_fits
    tol, tol_status = None, "not computed"
    if rl_note:
        tol_status = rl_note
        notes.append(rl_note)
    if rl_gen is not None:
        tol, tol_status = tolerance_boundary(rl_gen, sf.ref_general, epsilon)
        r_max = max(c.ratio for c in sf.curves)
        if tol is not None and tol > r_max:
            notes.append(f"tolerance boundary {tol:.4f} lies beyond the largest trained ratio {r_max:g}")

    # headline
    if not fitted or not feas:
        status = STATUS_NO_FEASIBLE
        cand = [r for r in fitted if r["ratio"] > 0]  # R = 0 controls do not decide the outcome
        if (
            cand
            and all(r["within_tolerance"] for r in cand)
            and not any(r["t0_tokens"] is not None and r["t0_tokens"] <= budget for r in cand)
        ):
            status = STATUS_NO_ROOT
        cmr, source = None, "none"
    elif len(feas) == sum(r["ratio"] > 0 for r in rows):
        status, cmr, source = STATUS_ALL_FEASIBLE, cmr_discrete, "largest tried (lower bound)"
    elif cmr_at_budget is None:
        status, cmr, source = (
            status_too_few(MIN_RATIOS_CMR_LAW),
            cmr_discrete,
            "largest feasible trained ratio",
        )
    else:
        status, cmr, source = STATUS_OK, cmr_at_budget, "CMR law at the budget"
        if tol is not None and tol < cmr_at_budget:
            cmr, source = tol, "tolerance boundary (binding)"
        elif tol is None and tol_status == "no ratio within tolerance":
            status, cmr, source = STATUS_NO_FEASIBLE, None, "none"
        if cmr is not None and not 0.0 <= cmr <= 1.0:
            notes.append(f"CMR {cmr:.4f} outside [0, 1]; clipped")
            cmr = min(max(cmr, 0.0), 1.0)
    sorted_feas = sorted(feas)
    all_sorted = sorted(r["ratio"] for r in rows if r["ratio"] > 0)
    if sorted_feas and sorted_feas != all_sorted[: len(sorted_feas)]:
        notes.append("feasible set is not contiguous from the smallest ratio (noisy fits?)")
    return _Decision(
        ratios=rows,
        cmr=cmr,
        cmr_source=source,
        status=status,
        cmr_discrete=cmr_discrete,
        cmr_law_params=cmr_params,
        cmr_law_at_budget=cmr_at_budget,
        tolerance_boundary=tol,
        tolerance_status=tol_status,
        ratio_law_general=rl_gen,
        ratio_law_domain=rl_dom,
        notes=notes,
    )


def _fit_cmr_law(
    law: Law,
    pts: list[tuple[float, float]],
    fit_loss: str,
    warm: dict[str, float] | None,
    sink: list[str],
    warm_only: bool = False,
) -> tuple[dict[str, float] | None, str | None]:
    n = len({p[1] for p in pts})
    if n < MIN_RATIOS_CMR_LAW:
        return (
            None,
            f"CMR law not fitted: {n} ratio(s) with a turning point, {status_too_few(MIN_RATIOS_CMR_LAW)}",
        )
    tab = pd.DataFrame({"tokens": [p[0] for p in pts], "ratio": [p[1] for p in pts]})
    starts = None
    if warm is not None:
        starts = [warm] if warm_only else [warm, *_grid_starts(law)]
    try:
        return _fit(law, tab, "ratio", starts=starts, use_grid=starts is None, loss=fit_loss, sink=sink), None
    except FitError as exc:
        return None, f"CMR law fit failed: {exc}"


def _fit_ratio_laws(
    sf: _SizeFits,
    rows: list[dict[str, Any]],
    ratio_law: str,
    c_method: str,
    fit_loss: str,
    sink: list[str],
    warm: tuple[RatioLawFit | None, RatioLawFit | None] = (None, None),
) -> tuple[RatioLawFit | None, RatioLawFit | None, str | None]:
    r_arr, g_arr, d_arr = _budget_values(sf, rows)
    if ratio_law == "power" and np.any(r_arr <= 0):
        keep = r_arr > 0
        r_arr, g_arr, d_arr = r_arr[keep], g_arr[keep], d_arr[keep]
        sink.append("R = 0 left out of the power ratio law (R^s diverges at 0 for s < 0)")
    wg, wd = (w.params if w is not None else None for w in warm)
    try:
        rl_gen = fit_ratio_law(
            r_arr,
            g_arr,
            law=ratio_law,
            c_method=c_method,
            fit_loss=fit_loss,
            notes=sink,
            warm=wg,  # type: ignore[arg-type]
        )
        rl_dom = fit_ratio_law(r_arr, d_arr, law=ratio_law, fit_loss=fit_loss, notes=sink, warm=wd)  # type: ignore[arg-type]
    except (FitError, InputError) as exc:
        return None, None, f"ratio law not fitted: {exc}"
    return rl_gen, rl_dom, None


def _budget_values(sf: _SizeFits, rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Absolute losses at the budget per ratio: observed if an evaluation sits there, else the curve fit."""
    r, g, d = [], [], []
    for c, row in zip(sf.curves, rows, strict=True):
        vg = c.obs_gen_at_budget if c.obs_gen_at_budget is not None else row["dloss_general_at_budget"]
        vd = c.obs_dom_at_budget if c.obs_dom_at_budget is not None else row["dloss_domain_at_budget"]
        if vg is None or vd is None:
            continue
        r.append(c.ratio)
        g.append(sf.ref_general + vg)
        d.append(sf.ref_domain + vd)
    return np.array(r), np.array(g), np.array(d)


def _size_json(size: Any) -> Any:
    if isinstance(size, (int, np.integer)):
        return int(size)
    if isinstance(size, (float, np.floating)):
        return int(size) if float(size).is_integer() else float(size)
    return size


def _num(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


# ------------------------------------------------------------------------------------------------- bootstrap
def _bootstrap_size(
    inc: pd.DataFrame,
    sf: _SizeFits,
    n_boot: int,
    rng: np.random.Generator,
    fit_loss: str,
    sink: list[str],
) -> list[_SizeFits]:
    """Residual bootstrap within runs: refit every ratio's curves on ``fitted + resampled residuals``.

    Why residuals and not runs: with one run per (size, ratio), resampling runs drops whole ratios and leaves
    the CMR law undetermined; why not evaluation points: a pairs resample of ~10 points leaves too few
    distinct token values for a 5-parameter curve. Residuals are resampled with one index draw shared by the
    general and the domain curve of a run (keeps their correlation at an evaluation). Evaluations along one
    trajectory are autocorrelated, so the intervals are a lower bound on the seed-to-seed spread.
    """
    dom_law, gen_law = _curve_laws(sf.token_unit, sf.pin_zero)
    d = inc[(inc["size"] == sf.size) & (inc["tokens"] > 0) & ~inc["run_id"].isin(sf.excluded_runs)]
    base: dict[float, tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for c in sf.curves:
        if c.gen_params is None or c.dom_params is None:
            continue
        pts = d[d["ratio"] == c.ratio].reset_index(drop=True)
        t = pts["tokens"].to_numpy(dtype=np.float64, copy=True)
        fg = _evaluate(gen_law, {"tokens": t}, c.gen_params)
        fd = _evaluate(dom_law, {"tokens": t}, c.dom_params)
        base[c.ratio] = (
            pts,
            fg,
            fd,
            pts["dloss_general"].to_numpy(dtype=np.float64, copy=True) - fg,
            pts["dloss_domain"].to_numpy(dtype=np.float64, copy=True) - fd,
        )
    # Every resample of one ratio's curve is a row of ONE batched solve (mixlaw.fit.fit_batch): the point
    # estimate and a data-informed start per resample, for the general and the domain curve alike.
    from mixlaw.fit import fit_batch

    refits: dict[float, tuple[np.ndarray, Any, Any]] = {}
    for c in sf.curves:
        if c.ratio not in base:
            continue
        pts, fg, fd, eg, ed = base[c.ratio]
        n = len(pts)
        idx = rng.integers(0, n, size=(n_boot, n))  # one draw shared by the general and the domain curve
        t = pts["tokens"].to_numpy(dtype=np.float64, copy=True)
        fits = []
        for law, fitted, resid, warm in ((dom_law, fd, ed, c.dom_params), (gen_law, fg, eg, c.gen_params)):
            Y = fitted[None, :] + resid[idx]
            starts = [[dict(warm), *_linear_starts(law, t, y, k=1)] for y in Y]
            try:
                fits.append(
                    fit_batch(law, pd.DataFrame({"tokens": t}), Y, starts=starts, loss=fit_loss, max_iter=BOOT_MAX_ITER)  # type: ignore[arg-type]
                )
            except FitError as exc:
                fits.append(None)
                sink.append(f"bootstrap refits of {law.name} at ratio {c.ratio:g} failed: {exc}")
        for f, law in zip(fits, (dom_law, gen_law), strict=True):
            if f is not None:
                bad = int(np.sum(f.status != "converged"))
                if bad:
                    sink.append(f"{law.name} at ratio {c.ratio:g}: {bad} of {n_boot} bootstrap refits did not converge")
        refits[c.ratio] = (idx, fits[0], fits[1])
    out = []
    for b in range(n_boot):
        curves = []
        for c in sf.curves:
            if c.ratio not in refits:
                curves.append(c)
                continue
            pts, fg, fd, eg, ed = base[c.ratio]
            idx, fdom, fgen = refits[c.ratio]
            dom_p = fdom.row(b) if fdom is not None else None
            gen_p = fgen.row(b) if fgen is not None else None
            err = None if dom_p is not None and gen_p is not None else "bootstrap refit failed"
            g_b, d_b = fg + eg[idx[b]], fd + ed[idx[b]]
            near = np.isclose(pts["tokens"].to_numpy(dtype=np.float64), sf.budget_tokens, rtol=5e-3)
            curves.append(
                replace(
                    c,
                    gen_params=gen_p,
                    dom_params=dom_p,
                    error=err,
                    obs_gen_at_budget=float(g_b[near].mean()) if near.any() else None,
                    obs_dom_at_budget=float(d_b[near].mean()) if near.any() else None,
                )
            )
        out.append(replace(sf, curves=tuple(curves)))
    return out


# --------------------------------------------------------------------------------------------------- result
@dataclass(frozen=True)
class SizeCMR:
    """The CMR decision for one model size."""

    n_params: Any
    budget_tokens: float
    token_unit: float
    reference_general: float
    reference_domain: float
    cmr: float | None
    ci: tuple[float, float] | None
    cmr_source: str
    status: str
    cmr_discrete: float | None
    cmr_law: dict[str, float] | None
    cmr_law_at_budget: float | None
    tolerance_boundary: float | None
    tolerance_boundary_ci: tuple[float, float] | None
    tolerance_status: str
    ratio_law_general: RatioLawFit | None
    ratio_law_domain: RatioLawFit | None
    ratios: list[dict[str, Any]]
    curves: dict[float, dict[str, Any]]
    notes: list[str]
    n_bootstrap: int = 0
    n_bootstrap_failed: int = 0
    bootstrap_cmr: np.ndarray | None = None
    bootstrap_cmr_law: list[dict[str, float]] = field(default_factory=list)

    def cmr_at(self, tokens: np.ndarray | float) -> np.ndarray:
        """CMR-law prediction at other budgets (tokens); NaN-free: raises if the law was not fitted."""
        if self.cmr_law is None:
            raise FitError(f"no CMR law for size {self.n_params}: {self.status}")
        law = get_law("cmr_law", token_unit=self.token_unit)
        return _evaluate(law, {"tokens": np.asarray(tokens, dtype=np.float64)}, self.cmr_law)

    def cmr_at_band(self, tokens: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray] | None:
        """Percentile band of the CMR law over bootstrap resamples (None without bootstrap)."""
        if not self.bootstrap_cmr_law:
            return None
        law = get_law("cmr_law", token_unit=self.token_unit)
        curves = np.array([_evaluate(law, {"tokens": tokens}, p) for p in self.bootstrap_cmr_law])
        a = (1 - level) / 2
        return np.quantile(curves, a, axis=0), np.quantile(curves, 1 - a, axis=0)

    def t0_for_ratio(self, ratio: float) -> float | None:
        """Critical token volume of an unseen ratio by the inverse CMR law (tokens; None if undefined)."""
        if self.cmr_law is None:
            return None
        v = float(CMRLaw(token_unit=self.token_unit).t0_tokens(ratio, self.cmr_law))
        return v if math.isfinite(v) else None

    def assess_ratio(self, ratio: float, epsilon: float) -> dict[str, Any]:
        """An unseen domain share at this size and budget: ratio-law losses, tolerance, T0 and feasibility.

        The general and domain loss at the budget come from the ratio laws; ``T0`` from the inverse CMR law.
        Outside the trained ratios both are extrapolations (``extrapolated``).
        """
        if not 0.0 <= ratio <= 1.0:
            raise InputError(f"a domain share must lie in [0, 1], got {ratio}")
        out: dict[str, Any] = {"n_params": _size_json(self.n_params), "ratio": float(ratio)}
        trained = [r["ratio"] for r in self.ratios]
        out["extrapolated"] = not (min(trained) <= ratio <= max(trained)) if trained else True
        g = self.ratio_law_general
        d = self.ratio_law_domain
        dg = float(g.predict(ratio)) - self.reference_general if g is not None else None
        dd = float(d.predict(ratio)) - self.reference_domain if d is not None else None
        t0 = self.t0_for_ratio(ratio)
        out.update(dloss_general_at_budget=dg, dloss_domain_at_budget=dd, t0_tokens=t0)
        reasons = []
        if dg is None or t0 is None:
            reasons.append("ratio law or CMR law not fitted for this size")
        else:
            if dg > epsilon:
                reasons.append(f"general loss rises {dg:+.4f} > ε = {epsilon:g} at the budget")
            if dd is not None and dd >= 0:
                reasons.append(f"domain loss does not improve ({dd:+.4f})")
            if t0 > self.budget_tokens:
                reasons.append(f"{STATUS_NO_ROOT}: T0 = {t0:.4g} tokens > budget {self.budget_tokens:.4g}")
        out["feasible"] = not reasons
        out["reason"] = "; ".join(reasons) if reasons else "feasible"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_params": _size_json(self.n_params),
            "budget_tokens": self.budget_tokens,
            "token_unit": self.token_unit,
            "reference_general": self.reference_general,
            "reference_domain": self.reference_domain,
            "cmr": self.cmr,
            "ci": list(self.ci) if self.ci is not None else None,
            "cmr_source": self.cmr_source,
            "status": self.status,
            "cmr_discrete": self.cmr_discrete,
            "cmr_law": self.cmr_law,
            "cmr_law_at_budget": self.cmr_law_at_budget,
            "tolerance_boundary": self.tolerance_boundary,
            "tolerance_boundary_ci": list(self.tolerance_boundary_ci) if self.tolerance_boundary_ci else None,
            "tolerance_status": self.tolerance_status,
            "ratio_law_general": self.ratio_law_general.to_dict() if self.ratio_law_general else None,
            "ratio_law_domain": self.ratio_law_domain.to_dict() if self.ratio_law_domain else None,
            "n_bootstrap": self.n_bootstrap,
            "n_bootstrap_failed": self.n_bootstrap_failed,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class CMRDecision:
    """Everything :func:`critical_mixture_ratio` decided, per size, with its settings."""

    sizes: list[SizeCMR]
    settings: dict[str, Any]
    increments: pd.DataFrame
    sensitivity: pd.DataFrame
    trend: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        cmr = []
        for s in self.sizes:
            d = s.to_dict()
            cmr.append(
                {k: d[k] for k in ("n_params", "budget_tokens", "cmr", "ci", "tolerance_boundary", "status")}
                | {k: d[k] for k in d if k not in ("cmr_law",)}
            )
        ratios = []
        for s in self.sizes:
            for r in s.ratios:
                ratios.append(
                    {k: r[k] for k in ("n_params", "ratio", "t0_tokens", "feasible", "reason")}
                    | {k: v for k, v in r.items() if k not in ("n_params", "ratio", "t0_tokens", "feasible", "reason")}
                )
        return {
            "cmr": cmr,
            "ratios": ratios,
            "cmr_law": [
                {"n_params": _size_json(s.n_params), "token_unit": s.token_unit, "params": s.cmr_law}
                for s in self.sizes
            ],
            "sensitivity": self.sensitivity.replace({np.nan: None}).to_dict(orient="records"),
            "trend": self.trend,
            "settings": self.settings,
        }


def critical_mixture_ratio(
    table: pd.DataFrame,
    *,
    general_eval: str,
    domain_eval: str,
    ratio_column: str | None = None,
    size_column: str | None = None,
    epsilon: float = 0.05,
    lagrange_mult: float = math.inf,
    budget_tokens: float | None = None,
    token_unit: float | None = None,
    ratio_law: Literal["power", "exp"] = "power",
    c_method: Literal["fit", "corr_grid"] = "fit",
    pin_zero: bool = False,
    fit_loss: Literal["l2", "huber"] = "l2",
    bootstrap: int = 0,
    level: float = 0.95,
    t0_search_factor: float = 10.0,
    sensitivity_lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    sensitivity_epsilons: Sequence[float] = DEFAULT_EPSILONS,
    random_state: int | np.random.Generator | None = None,
) -> CMRDecision:
    """Critical mixture ratio per model size, with bootstrap intervals and a λ × ε sensitivity table.

    Parameters
    ----------
    table
        A RunTable: one row per (run, evaluation) with ``tokens``, the two loss columns, the ratio column and,
        optionally, ``run_id``, ``step``, ``phase``, ``parent_run`` and a size column.
    general_eval, domain_eval
        Loss columns (``loss_`` prefix optional).
    ratio_column
        Domain share of the CPT mix; default ``w_<domain>`` (then ``ratio``).
    size_column
        Default ``n_params`` when present, else one size.
    epsilon
        Tolerated rise of the general loss at the budget (nats/token; default 0.05 as in the paper).
    lagrange_mult
        λ of the stationarity condition; ``inf`` (default) puts ``T0`` at the peak of ``ΔL_gen``.
    budget_tokens
        CPT budget ``T_max`` in tokens; default the median final token count of the size's runs (runs that stop
        before it are left out, with a note).
    token_unit
        Tokens per ``T`` unit of the token-axis laws; default ``budget / 100``.
    ratio_law, c_method
        Ratio law at the budget (see :func:`fit_ratio_law`).
    pin_zero
        Pin ``ΔL(0) = 0`` in the increment laws (default False: the paper's free offsets, fitted on ``T >
        0``).
    fit_loss
        Objective of every fit (default least squares, as the CMR paper reports MSE).
    bootstrap
        Number of residual-bootstrap resamples (0: no intervals).
    random_state
        Seed or generator for the bootstrap.
    """
    if not isinstance(table, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(table).__name__}")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise InputError(f"epsilon must be a finite number ≥ 0, got {epsilon}")
    if not lagrange_mult > 0:
        raise InputError(f"lagrange_mult must be > 0 or inf, got {lagrange_mult}")
    if budget_tokens is not None and not budget_tokens > 0:
        raise InputError(f"budget_tokens must be > 0, got {budget_tokens}")
    if bootstrap < 0:
        raise InputError(f"bootstrap must be ≥ 0, got {bootstrap}")
    cols = resolve_columns(table, general_eval, domain_eval, ratio_column, size_column)
    inc = prepare_increments(table, cols)
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    kw: dict[str, Any] = dict(
        ratio_law=ratio_law, c_method=c_method, fit_loss=fit_loss, t0_search_factor=t0_search_factor
    )
    sizes: list[SizeCMR] = []
    sens_rows: list[dict[str, Any]] = []
    boot_by_size: dict[Any, np.ndarray] = {}
    for size in sorted(inc["size"].unique(), key=lambda v: (str(type(v)), v)):
        fit_notes: list[str] = []
        sf = _size_fits(inc, size, budget_tokens, token_unit, pin_zero, fit_loss, sink=fit_notes)
        dec = _decide(sf, epsilon=epsilon, lagrange_mult=lagrange_mult, **kw)  # type: ignore[arg-type]
        notes = list(dict.fromkeys(_summarise_fit_notes(fit_notes) + dec.notes))
        if budget_tokens is not None and budget_tokens > max(c.t_last for c in sf.curves):
            notes.append("budget beyond the last evaluation: curves extrapolated")
        ci = tol_ci = None
        boot_cmr = None
        boot_laws: list[dict[str, float]] = []
        n_failed = 0
        if bootstrap > 0:
            vals, tols = [], []
            boot_msgs: list[str] = []
            for bsf in _bootstrap_size(inc, sf, bootstrap, rng, fit_loss, boot_msgs):
                try:
                    bd = _decide(
                        bsf,
                        epsilon=epsilon,
                        lagrange_mult=lagrange_mult,
                        cmr_law_warm=dec.cmr_law_params,
                        boot_from=dec,
                        **kw,
                    )  # type: ignore[arg-type]
                except (FitError, InputError):
                    n_failed += 1
                    continue
                v = _same_source(dec, bd)
                if v is None:
                    n_failed += 1
                    continue
                vals.append(v)
                if bd.tolerance_boundary is not None:
                    tols.append(bd.tolerance_boundary)
                if bd.cmr_law_params is not None:
                    boot_laws.append(bd.cmr_law_params)
            if boot_msgs:
                notes.append(f"{len(boot_msgs)} bootstrap curve fits warned (convergence or bounds)")
            a = (1 - level) / 2
            if vals:
                boot_cmr = np.array(vals)
                ci = (float(np.quantile(boot_cmr, a)), float(np.quantile(boot_cmr, 1 - a)))
                boot_by_size[size] = boot_cmr
            if tols:
                tol_ci = (float(np.quantile(tols, a)), float(np.quantile(tols, 1 - a)))
        cache: dict[float, tuple[dict[str, float] | None, str | None]] = {}
        rfits = (
            dec.ratio_law_general,
            dec.ratio_law_domain,
            None if dec.ratio_law_general else dec.tolerance_status,
        )
        for lam in sensitivity_lambdas:
            for eps in sensitivity_epsilons:
                sd = _decide(
                    sf,
                    epsilon=eps,
                    lagrange_mult=lam,
                    cmr_law_warm=dec.cmr_law_params,
                    ratio_fits=rfits,
                    cmr_cache=cache,
                    **kw,  # type: ignore[arg-type]
                )
                sens_rows.append(
                    {
                        "n_params": _size_json(size),
                        "lagrange_mult": "inf" if math.isinf(lam) else lam,
                        "epsilon": eps,
                        "cmr": sd.cmr,
                        "status": sd.status,
                        "n_feasible": sum(r["feasible"] for r in sd.ratios),
                        "tolerance_boundary": sd.tolerance_boundary,
                    }
                )
        sizes.append(
            SizeCMR(
                n_params=size,
                budget_tokens=sf.budget_tokens,
                token_unit=sf.token_unit,
                reference_general=sf.ref_general,
                reference_domain=sf.ref_domain,
                cmr=dec.cmr,
                ci=ci,
                cmr_source=dec.cmr_source,
                status=dec.status,
                cmr_discrete=dec.cmr_discrete,
                cmr_law=dec.cmr_law_params,
                cmr_law_at_budget=dec.cmr_law_at_budget,
                tolerance_boundary=dec.tolerance_boundary,
                tolerance_boundary_ci=tol_ci,
                tolerance_status=dec.tolerance_status,
                ratio_law_general=dec.ratio_law_general,
                ratio_law_domain=dec.ratio_law_domain,
                ratios=dec.ratios,
                curves={
                    c.ratio: {
                        "general": c.gen_params,
                        "domain": c.dom_params,
                        "t_lo": c.t_lo,
                        "t_last": c.t_last,
                        "pin_zero": sf.pin_zero,
                    }
                    for c in sf.curves
                },
                notes=notes,
                n_bootstrap=bootstrap,
                n_bootstrap_failed=n_failed,
                bootstrap_cmr=boot_cmr,
                bootstrap_cmr_law=boot_laws,
            )
        )
    settings = {
        "general_eval": cols.general,
        "domain_eval": cols.domain,
        "ratio_column": cols.ratio,
        "size_column": cols.size,
        "epsilon": epsilon,
        "lagrange_mult": "inf" if math.isinf(lagrange_mult) else lagrange_mult,
        "budget_tokens": budget_tokens,
        "ratio_law": ratio_law,
        "c_method": c_method,
        "pin_zero": pin_zero,
        "fit_loss": fit_loss,
        "bootstrap": bootstrap,
        "bootstrap_unit": "residuals within each run (shared index for general/domain)",
        "level": level,
        "t0_search_factor": t0_search_factor,
    }
    return CMRDecision(
        sizes=sizes,
        settings=settings,
        increments=inc,
        sensitivity=pd.DataFrame(sens_rows),
        trend=cmr_size_trend(sizes, boot_by_size, level=level),
    )


def _summarise_fit_notes(msgs: list[str]) -> list[str]:
    """One line per (law, kind) instead of one engine warning per curve: "ratio\tmessage" → summary."""
    groups: dict[tuple[str, str], list[str]] = {}
    plain = [m for m in msgs if "\t" not in m]
    for m in msgs:
        if "\t" not in m:
            continue
        ratio, _, text = m.partition("\t")
        law = text.split("'")[1] if text.startswith("law '") else "fit"
        kind = "sits at a bound" if "bound" in text else "stopped before converging"
        groups.setdefault((law, kind), []).append(ratio)
    return plain + [
        f"{law} {kind} for ratio(s) {', '.join(dict.fromkeys(rs))} (weakly identified curve: read T0 with its interval)"
        for (law, kind), rs in groups.items()
    ]


def critical_mixture_ratio_by_domain(
    table: pd.DataFrame, *, general_eval: str, domain_evals: Sequence[str], **kwargs: Any
) -> dict[str, CMRDecision]:
    """:func:`critical_mixture_ratio` for several domains side by side (``{domain eval: decision}``).

    Each domain uses its own ratio column (``w_<domain>``) and, when the table tags runs with a ``domain``
    column, only its own CPT runs. The paper's finding to look for: a domain closer to the general data allows a
    higher CMR.
    """
    if not domain_evals:
        raise InputError("give at least one domain eval")
    if kwargs.get("ratio_column") is not None and len(domain_evals) > 1:
        raise InputError("--ratio-column applies to one domain; several domains use w_<domain> each")
    return {d: critical_mixture_ratio(table, general_eval=general_eval, domain_eval=d, **kwargs) for d in domain_evals}


def _same_source(point: _Decision, boot: _Decision) -> float | None:
    """The resample's CMR computed the way the point estimate was (so the interval describes that number)."""
    if point.cmr is None:
        return None
    src = point.cmr_source
    if src.startswith("CMR law") or src.startswith("tolerance"):
        vals = [v for v in (boot.cmr_law_at_budget, boot.tolerance_boundary) if v is not None]
        return float(min(max(min(vals), 0.0), 1.0)) if vals else None
    return boot.cmr_discrete


def cmr_size_trend(
    sizes: Sequence[SizeCMR], boot: Mapping[Any, np.ndarray] | None = None, *, level: float = 0.95
) -> dict[str, Any] | None:
    """CMR vs model size: least-squares line ``CMR = a + b · log10(N)`` with a bootstrap band.

    Sizes whose CMR is only a lower bound (``all ratios feasible``) are left out of the line.

    The band refits the line on paired resamples (resample ``i`` of every size); needs ≥ 2 numeric sizes with
    a CMR. Returns None otherwise.
    """
    use = [s for s in sizes if s.cmr is not None and _is_number(s.n_params) and s.status != STATUS_ALL_FEASIBLE]
    pts = [(float(s.n_params), float(s.cmr)) for s in use]  # lower bounds (all feasible) stay out of the fit
    if len(pts) < 2:
        return None
    x = np.log10([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    b, a = np.polyfit(x, y, 1)
    out: dict[str, Any] = {
        "form": "cmr = a + b*log10(n_params)",
        "a": float(a),
        "b": float(b),
        "n_sizes": len(pts),
        "band": None,
    }
    if boot:
        keys = [s.n_params for s in use]
        if all(k in boot for k in keys):
            m = min(len(boot[k]) for k in keys)
            if m >= 10:
                grid = np.linspace(x.min(), x.max(), 50)
                preds = []
                for i in range(m):
                    yb = np.array([boot[k][i] for k in keys])
                    bb, ab = np.polyfit(x, yb, 1)
                    preds.append(ab + bb * grid)
                q = (1 - level) / 2
                arr = np.array(preds)
                out["band"] = {
                    "n_params": (10**grid).tolist(),
                    "lo": np.quantile(arr, q, axis=0).tolist(),
                    "hi": np.quantile(arr, 1 - q, axis=0).tolist(),
                }
    return out


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)) and float(v) > 0


def simulate_cmr_runs(
    ratios: Sequence[float],
    cmr_params: Mapping[str, float],
    *,
    token_unit: float = 2e8,
    t_units: np.ndarray | None = None,
    amp: float = 0.004,
    noise: float = 0.0,
    n_params: int = 460_000_000,
    domain: str = "code",
    loss_general: float = 2.0,
    loss_domain: float = 2.5,
    random_state: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """CPT runs (a RunTable) whose general-loss increment peaks exactly at ``T0(R)`` of a given CMR law.

    For each ratio ``R``: ``ΔL_gen(T) = a·T^0.5 − a/(2√T*)·T`` with its peak at ``T* = T0(R)`` of the inverse CMR
    law (so with ``λ = ∞`` the decision must recover the law), ``ΔL_dom(T) = −0.05·R^0.3·T^0.4``, plus Gaussian
    ``noise`` on both; one run per ratio with its step-0 evaluation, ``T`` in units of ``token_unit`` tokens
    (default evaluations at T = 5, 10, …, 100). A known truth for tests, benchmarks and probe-design studies.
    """
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    law = CMRLaw(token_unit=token_unit)
    t = np.arange(5.0, 101.0, 5.0) if t_units is None else np.asarray(t_units, dtype=np.float64)
    rows: list[dict[str, Any]] = []
    for r in ratios:
        ts = float(law.t0_tokens(r, cmr_params)) / token_unit
        if not math.isfinite(ts):
            raise InputError(f"ratio {r} has no T0 under the given CMR law")
        dg = amp * np.sqrt(t) - amp / (2 * math.sqrt(ts)) * t + noise * rng.standard_normal(t.size)
        dd = -0.05 * r**0.3 * t**0.4 + noise * rng.standard_normal(t.size)
        run = f"s{n_params}-{domain}-r{r:.4f}"
        base = {"run_id": run, "n_params": n_params, "phase": "cpt", f"w_{domain}": r, "w_general": 1 - r,
                "domain": domain}  # fmt: skip
        rows.append(base | {"step": 0, "tokens": 0.0, "loss_general": loss_general, f"loss_{domain}": loss_domain})
        for i, ti in enumerate(t):
            rows.append(
                base
                | {
                    "step": (i + 1) * 100,
                    "tokens": ti * token_unit,
                    "loss_general": loss_general + dg[i],
                    f"loss_{domain}": loss_domain + dd[i],
                }
            )
    return pd.DataFrame(rows)
