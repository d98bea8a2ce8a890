"""Plan predictions with bootstrap bands, and the schedule-family optimisation of the weighted objective."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from mixlaw.decide.cpt.fits import CptFits, LawFit
from mixlaw.decide.cpt.plan import CptPlan, _features, _guards, _law_needs, plan_areas
from mixlaw.errors import ExtrapolationWarning, InputError

_W_GRID = tuple(float(w) for w in np.linspace(0.0, 1.0, 11))


def predict_plan(
    fits: CptFits,
    plan: CptPlan,
    *,
    weights: tuple[float, float] | None = None,
    level: float = 0.9,
    steps: np.ndarray | None = None,
) -> pd.DataFrame:
    """Predicted trajectories of every fitted eval set for a plan.

    Returns one row per predicted step with ``step`` (from the start of PT), ``cpt_step``, ``lr``, the areas,
    ``pred_<set>`` for each fitted set and each OOD combination, ``lo_<set>``/``hi_<set>`` (bootstrap
    percentile band at ``level``, when the fits carry bootstrap parameters) and with ``weights = (w_pt,
    w_cpt)`` the composite ``pred_composite = w_pt·L_pt + w_cpt·L_cpt``. ``df.attrs["warnings"]`` lists the
    guard messages and the resamples left out of a band; ``df.attrs["n_boot"]`` the resamples behind each band.

    A loss is positive, but the laws are not positivity-preserving: ``− C·S2`` is unbounded below and a
    bootstrap resample that drew too few CPT runs leaves ``C2`` or ``(B, E, β)`` undetermined, so extrapolated
    to the plan's areas it can predict a loss far below zero (one such draw put the 5 % quantile at −6842).
    Resamples whose trajectory is not finite and positive everywhere are left out of the band, counted and
    named in a warning; every band is therefore inside ``(0, ∞)``. The D_pt and D_cpt fits are resampled
    separately and may keep different numbers of resamples; the composite and the OOD sets pair them by
    position over the smaller count (:func:`paired`).
    """
    areas = plan_areas(plan)
    T = areas.step.size - 1
    if steps is None:
        e, Tp = plan.eval_every, plan.pt_steps
        # every e steps of PT, then every e CPT steps counted from the branch (so CPT curves align across plans)
        idx = np.unique(np.concatenate([np.arange(e, Tp, e), Tp + np.arange(0, T - Tp + 1, e), [T]])).astype(np.int64)
        idx = idx[idx >= 1]
    else:
        idx = np.asarray(steps, dtype=np.int64)
    msgs = _guards(fits, plan, areas)
    n_guard = len(msgs)
    x = _features(plan, areas, idx)
    out = pd.DataFrame({k: x[k] for k in ("step", "cpt_step", "lr", "s1_pt", "s1_cpt", "s2_pt", "s2_cpt")})
    preds: dict[str, np.ndarray] = {}
    for name, f in fits.fits.items():
        _law_needs(f, plan)
        preds[name] = physical_sets(name, f.evaluate(x), msgs, "along this plan")
    if fits.cpt_set is not None and (fits.ood or weights is not None):
        l_pt, l_cpt = paired(preds[fits.pt_set], preds[fits.cpt_set])
    for name, f in fits.ood.items():
        if fits.cpt_set is None:  # CptFits refuses OOD sets without a CPT set; kept as a clear error
            raise InputError("an OOD combination needs fits for both the D_pt and the D_cpt set")
        preds[name] = physical_sets(name, _ood_eval(f, l_pt, l_cpt), msgs, "along this plan")
    if weights is not None:
        if fits.cpt_set is None:
            raise InputError("a composite needs fits for both the D_pt and the D_cpt set")
        w_pt, w_cpt = _check_weights(weights)
        preds["composite"] = w_pt * l_pt + w_cpt * l_cpt
    q = (1 - level) / 2
    n_boot: dict[str, int] = {}
    for name, p in preds.items():
        out[f"pred_{name}"] = p[0]
        n_boot[name] = p.shape[0] - 1
        if p.shape[0] > 2:
            out[f"lo_{name}"] = np.quantile(p[1:], q, axis=0)
            out[f"hi_{name}"] = np.quantile(p[1:], 1 - q, axis=0)
    for m in msgs[n_guard:]:
        warnings.warn(m, ExtrapolationWarning, stacklevel=2)
    out.attrs["n_boot"] = n_boot
    out.attrs["warnings"] = msgs
    return out


def _ood_eval(f: LawFit, l_pt: np.ndarray, l_cpt: np.ndarray) -> np.ndarray:
    """OOD predictions row-matched with the (S, n) D_pt / D_cpt predictions (bootstrap sets paired by
    index), through the OOD law's own ``predict`` on its inputs ``loss_pt`` and ``loss_cpt``."""
    sets = f.param_sets()
    S = max(l_pt.shape[0], 1)
    ps = sets[np.arange(S) % sets.shape[0]]
    return f.evaluate({"loss_pt": l_pt, "loss_cpt": l_cpt}, ps)


def physical_sets(name: str, p: np.ndarray, msgs: list[str], where: str) -> np.ndarray:
    """``(1 + B', n)``: the point row then the bootstrap rows whose predicted loss is finite and > 0 at every
    column; a message naming how many rows were left out (and one when the point estimate itself is not
    positive) is appended to ``msgs``."""
    if not np.all(np.isfinite(p[0]) & (p[0] > 0)):
        msgs.append(
            f"the point estimate of {name} predicts a non-positive loss {where}: the plan lies outside the "
            "areas where the fit holds"
        )
    if p.shape[0] <= 1:
        return p
    good = np.all(np.isfinite(p[1:]) & (p[1:] > 0), axis=1)
    n_bad = int((~good).sum())
    if n_bad:
        msgs.append(
            f"{n_bad} of {good.size} bootstrap resamples of {name} predict a non-positive loss {where} "
            "(parameters the resample did not determine, extrapolated); they are left out of its interval"
        )
    return np.vstack([p[:1], p[1:][good]])


def paired(*sets: np.ndarray) -> list[np.ndarray]:
    """The ``(1 + B_i, n)`` prediction arrays cut to a common ``1 + min(B_i)`` rows.

    Eval sets are fitted (and resampled) separately, and a resample that fails in one set is dropped there
    only, so their counts differ; the fit records do not keep which draw a row came from, so rows are paired
    by position (each pair is one draw of each set's sampling distribution)."""
    S = min(a.shape[0] for a in sets)
    return [a[:S] for a in sets]


def _check_weights(weights: Sequence[float]) -> tuple[float, float]:
    if len(weights) != 2:
        raise InputError(f"weights must be two numbers W_PT,W_CPT, got {list(weights)}")
    w_pt, w_cpt = (float(w) for w in weights)
    if w_pt < 0 or w_cpt < 0 or not math.isclose(w_pt + w_cpt, 1.0, abs_tol=1e-6):
        raise InputError(f"weights must be non-negative and sum to 1, got {w_pt},{w_cpt}")
    return w_pt, w_cpt


@dataclass(frozen=True)
class OptimizeResult:
    """Outcome of :func:`optimize`: the grid, objective per grid value, the best value and its interval."""

    over: str
    weights: tuple[float, float]
    grid: np.ndarray
    objective: np.ndarray  # (n_grid,) point-estimate objective
    best: float
    best_objective: float
    interval: tuple[float, float] | None  # bootstrap percentile interval of the argmin
    at_edge: bool
    final_losses: dict[str, np.ndarray]  # set -> (n_grid,) final predicted loss
    warnings: list[str]
    n_boot: int = 0  # paired D_pt/D_cpt resamples behind the interval
    level: float = 0.95
    #: Bootstrap percentile interval of the objective at the best value (``None`` without resamples).
    objective_interval: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "over": self.over,
            "weights": list(self.weights),
            "best": self.best,
            "best_objective": self.best_objective,
            "interval": None if self.interval is None else list(self.interval),
            "at_edge": self.at_edge,
            "grid": self.grid.tolist(),
            "objective": self.objective.tolist(),
            "final_losses": {k: v.tolist() for k, v in self.final_losses.items()},
            "warnings": self.warnings,
            "n_boot": self.n_boot,
            "level": self.level,
            "objective_interval": None if self.objective_interval is None else list(self.objective_interval),
        }


def _default_grid(over: str, plan: CptPlan, fits: CptFits) -> np.ndarray:
    if over == "replay":
        return np.linspace(0.0, 1.0, 41)
    if over == "loss_potential":
        return np.linspace(0.0, 1.0, 21)
    top = fits.max_lr if fits.max_lr is not None else plan.cpt.peak_lr
    return np.geomspace(top / 16, top, 25)


def _plan_at(plan: CptPlan, over: str, v: float) -> CptPlan:
    if over == "replay":
        return plan.with_replay(v)
    if over == "loss_potential":
        return plan.with_loss_potential(v)
    if over == "peak_lr":
        return plan.with_cpt_peak(v)
    raise InputError(f"--over must be replay, peak_lr or loss_potential, got '{over}'")


def _final_losses(fits: CptFits, plan: CptPlan) -> dict[str, np.ndarray]:
    areas = plan_areas(plan)
    T = areas.step.size - 1
    x = _features(plan, areas, np.array([T]))
    return {name: f.evaluate(x)[:, 0] for name, f in fits.fits.items()}


def optimize(
    fits: CptFits,
    plan: CptPlan,
    over: Literal["replay", "peak_lr", "loss_potential"],
    weights: tuple[float, float],
    *,
    grid: Sequence[float] | np.ndarray | None = None,
    level: float = 0.95,
) -> OptimizeResult:
    """Best value of one schedule-family hyper-parameter for ``weights = (w_pt, w_cpt)``.

    Objective: ``w_pt·L_pt + w_cpt·L_cpt`` at the final CPT step (the signed form of the paper's Eq. 5,
    laws.md §5.7 item 1). ``over``: ``"replay"`` (replay share ``r_pt`` of the CPT mix; needs a replay law),
    ``"peak_lr"`` (CPT schedule rescaled to each peak) or ``"loss_potential"`` (PT annealed to ``lp·peak``).
    The best grid value is reported with the bootstrap percentile interval (``level``) of the per-resample argmin,
    and the objective there with the percentile interval of the resamples' objectives at that value.
    """
    if not 0 < level < 1:
        raise InputError(f"--level {level}: expected a number in (0, 1)")
    w_pt, w_cpt = _check_weights(weights)
    if fits.cpt_set is None:
        raise InputError("optimisation needs fits for both the D_pt and the D_cpt set")
    if over == "replay" and not all("replay_ratio" in f.law.inputs for f in fits.fits.values()):
        raise InputError("--over replay needs replay-aware fits (law cpt_replay) for every eval set")
    g = np.asarray(_default_grid(over, plan, fits) if grid is None else grid, dtype=np.float64)
    if g.ndim != 1 or g.size < 2:
        raise InputError("the optimisation grid needs at least two values")
    msgs: list[str] = []
    finals: dict[str, list[np.ndarray]] = {n: [] for n in fits.fits}
    for v in g:
        p = _plan_at(plan, over, float(v))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ExtrapolationWarning)
            _guards(fits, p, plan_areas(p))
        for c in caught:
            m = str(c.message)
            if not any(m[:12] == old[:12] for old in msgs):  # one message per guard kind
                msgs.append(m)
        for n, arr in _final_losses(fits, p).items():
            finals[n].append(arr)
    F = {n: physical_sets(n, np.stack(v, axis=1), msgs, f"on the {over} grid") for n, v in finals.items()}
    f_pt, f_cpt = paired(F[fits.pt_set], F[fits.cpt_set])  # (1 + S, n_grid), S = the common resample count
    obj = w_pt * f_pt + w_cpt * f_cpt
    k = int(np.argmin(obj[0]))
    interval = obj_iv = None
    if obj.shape[0] > 2:
        boots = g[np.argmin(obj[1:], axis=1)]
        q = (1 - level) / 2
        interval = (float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q)))
        at_best = obj[1:, k]
        obj_iv = (float(np.quantile(at_best, q)), float(np.quantile(at_best, 1 - q)))
    for m in msgs:
        warnings.warn(m, ExtrapolationWarning, stacklevel=2)
    return OptimizeResult(
        over=over,
        weights=(w_pt, w_cpt),
        grid=g,
        objective=obj[0],
        best=float(g[k]),
        best_objective=float(obj[0, k]),
        interval=interval,
        at_edge=k in (0, g.size - 1),
        final_losses={n: v[0] for n, v in F.items()},
        warnings=msgs,
        n_boot=obj.shape[0] - 1,
        level=level,
        objective_interval=obj_iv,
    )


def optimum_vs_weight(
    fits: CptFits,
    plan: CptPlan,
    over: Literal["replay", "peak_lr", "loss_potential"],
    w_pt_grid: Sequence[float] | np.ndarray = _W_GRID,
    *,
    grid: Sequence[float] | np.ndarray | None = None,
) -> pd.DataFrame:
    """Best value of ``over`` for each D_pt weight ``w_pt`` (``w_cpt = 1 − w_pt``): columns w_pt, best, lo,
    hi."""
    rows = []
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", ExtrapolationWarning)
        for w in w_pt_grid:
            r = optimize(fits, plan, over, (float(w), 1.0 - float(w)), grid=grid)
            lo, hi = r.interval if r.interval is not None else (math.nan, math.nan)
            rows.append({"w_pt": float(w), "best": r.best, "lo": lo, "hi": hi, "at_edge": r.at_edge})
    return pd.DataFrame(rows)
