"""Critical point and turning length of the D_pt loss (or the composite) under continued CPT (laws.md §5.5)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from mixlaw.decide.cpt.fits import CptFits, LawFit
from mixlaw.decide.cpt.plan import CptPlan, _features, plan_areas
from mixlaw.decide.cpt.predict import _check_weights
from mixlaw.errors import InputError
from mixlaw.schedules import Schedule


def critical_s1_constant(params: Mapping[str, float]) -> float:
    """``S1_pt* = (A/B)^(1/α)``: the critical PT forward area at constant PT and CPT LR (laws.md §5.5).

    Only defined for ``B > 0`` (a forgetting set); raises :class:`InputError` otherwise.
    """
    from mixlaw.laws.cpt import CPT

    return CPT.critical_forward_area(CPT(), params)


@dataclass(frozen=True)
class CriticalPoint:
    """PT branch step at which the asymptote of continued CPT equals the starting loss."""

    step: float | None  # PT step (None when there is no crossing in the PT schedule)
    s1_pt: float | None
    reason: str
    branch_steps: np.ndarray  # scanned PT steps
    l_init: np.ndarray  # loss at the branch
    l_asymptote: np.ndarray  # asymptote of continued CPT from that branch


def _composite_eval(
    fits: CptFits, x: Mapping[str, np.ndarray], weights: tuple[float, float] | None, set_name: str | None
) -> np.ndarray:
    if weights is None:
        f = fits.fits[set_name or fits.pt_set]
        return f.evaluate(x, f.param_sets()[:1])[0]
    if fits.cpt_set is None:
        raise InputError("a composite needs fits for both the D_pt and the D_cpt set")
    w_pt, w_cpt = _check_weights(weights)
    a = fits.fits[fits.pt_set]
    b = fits.fits[fits.cpt_set]
    return w_pt * a.evaluate(x, a.param_sets()[:1])[0] + w_cpt * b.evaluate(x, b.param_sets()[:1])[0]


@runtime_checkable
class HasAsymptote(Protocol):
    """A law that knows the loss continued training converges to (``cpt``, ``cpt_replay``, ``cpt_size``,
    ``lr_annealing``, ``multi_power`` and any law added later that implements the method)."""

    name: str

    def continued_asymptote(self, params: Mapping[str, float], limits: Mapping[str, float]) -> float: ...


def continued_limits(plan: CptPlan) -> dict[str, float]:
    """Inputs in the limit of the plan's CPT continued forever at its final LR (> 0): forward areas ``inf``,
    annealing areas with the pending momentum decayed into them, ``S2(∞) = S2(T) + λ·m_T/(1 − λ)``; the
    pending momentum is attributed to CPT (exact under the "time" split; under "origin" exact when the PT
    momentum has decayed)."""
    areas = plan_areas(plan)
    final = float(areas.lr[-1])
    if final <= 0:
        raise InputError("the asymptote of continued CPT needs a final CPT LR > 0 (the curve stops at LR 0)")
    m_T = (areas.s2[-1] - areas.s2[-2]) if areas.s2.size > 1 else 0.0
    pending = float(plan.decay * m_T / (1.0 - plan.decay))
    return {
        "s1": math.inf,
        "s1_pt": float(areas.s1_pt[-1]),
        "s1_cpt": math.inf,
        "s2_pt": float(areas.s2_pt[-1]),
        "s2_cpt": float(areas.s2_cpt[-1]) + pending,
        "s2": float(areas.s2[-1]) + pending,
        "lr": final,
        "peak_lr": float(np.max(areas.lr)),
        "replay_ratio": float(plan.replay_ratio),
        "n_params": math.nan if plan.n_params is None else float(plan.n_params),
    }


def law_asymptote(fit: LawFit, limits: Mapping[str, float]) -> float:
    """``L_∞`` of one fitted set through its law's :meth:`continued_asymptote` (an ``InputError`` naming the
    law when it has none, or when it needs an input the plan does not give)."""
    law = fit.law
    if not isinstance(law, HasAsymptote):
        raise InputError(f"critical point needs a law with a continued-training asymptote, got '{law.name}'")
    need = [c for c in ("n_params",) if c in law.inputs and math.isnan(limits.get(c, math.nan))]
    if need:
        raise InputError(f"law '{law.name}' needs n_params in the plan ([areas] n_params = ...)")
    return float(law.continued_asymptote(fit.params, limits))


def _asymptote(fits: CptFits, plan: CptPlan, weights: tuple[float, float] | None, set_name: str | None) -> float:
    """``L_∞`` of continued CPT at the CPT schedule's final LR (each law's own limit, see
    :meth:`continued_asymptote` on the laws); with ``weights`` the weighted composite of the two sets."""
    limits = continued_limits(plan)

    def one(f: LawFit) -> float:
        return law_asymptote(f, limits)

    if weights is None:
        return one(fits.fits[set_name or fits.pt_set])
    w_pt, w_cpt = _check_weights(weights)
    if fits.cpt_set is None:
        raise InputError("a composite needs fits for both the D_pt and the D_cpt set")
    return w_pt * one(fits.fits[fits.pt_set]) + w_cpt * one(fits.fits[fits.cpt_set])


def scan_plan(plan: CptPlan, n_scan: int) -> tuple[CptPlan, str, np.ndarray]:
    """The plan the critical point scans (CPT continued at a constant LR where the planned schedule ends at LR 0,
    with a note saying so) and its ``n_scan`` branch steps over the PT schedule (which the plan must have)."""
    note = ""
    if plan.cpt.lrs()[-1] <= 0:
        plan = replace(plan, cpt=Schedule(kind="constant", peak_lr=plan.cpt.peak_lr, total_steps=plan.cpt.total_steps))
        note = f" (CPT continued at a constant {plan.cpt.peak_lr:g}: the planned schedule ends at LR 0)"
    T = plan.pt.total_steps if plan.pt is not None else 1
    return plan, note, np.unique(np.linspace(1, T, n_scan).round().astype(np.int64))


def continued_plan(plan: CptPlan, horizon: int | None) -> tuple[CptPlan, int]:
    """The plan with its CPT schedule continued at its final LR up to ``horizon`` CPT steps (default: the schedule
    when it ends at LR 0, else the longer of it and 1,000,000 steps), and that horizon."""
    final = float(plan.cpt.lrs()[-1])
    if horizon is None:
        horizon = plan.cpt.total_steps if final <= 0 else max(plan.cpt.total_steps, 1_000_000)
    horizon = int(horizon)
    if horizon > plan.cpt.total_steps:
        ext = np.concatenate([plan.cpt.lrs(), np.full(horizon - plan.cpt.total_steps, final)])
        return replace(plan, cpt=Schedule.from_lr(ext)), horizon
    return replace(plan, cpt=Schedule.from_lr(plan.cpt.lrs()[:horizon])), horizon


def critical_point(
    fits: CptFits,
    plan: CptPlan,
    *,
    weights: tuple[float, float] | None = None,
    set_name: str | None = None,
    n_scan: int = 200,
) -> CriticalPoint:
    """Critical point over branch steps of the plan's PT schedule (laws.md §5.5).

    For each candidate branch step ``b`` the starting loss ``L_init(b)`` (PT curve at ``b``) is compared
    with the asymptote ``L_∞(b)`` of CPT continued at the CPT schedule's final LR. Branches with ``L_init >
    L_∞`` are pre-critical (CPT eventually brings the loss below its start); the critical point is the
    first crossing. With ``weights`` the composite ``w_pt·L_pt + w_cpt·L_cpt`` is analysed instead of the
    D_pt loss.
    """
    if plan.pt is None:
        raise InputError("the critical point needs a PT schedule (not available in black-box mode)")
    plan, note, b = scan_plan(plan, n_scan)
    T = int(b[-1])
    l_init = np.empty(b.size)
    l_inf = np.empty(b.size)
    for i, bi in enumerate(b):
        p = replace(plan, branch_step=int(bi))
        areas = plan_areas(p)
        x = _features(p, areas, np.array([int(bi)]))
        l_init[i] = _composite_eval(fits, x, weights, set_name)[0]
        l_inf[i] = _asymptote(fits, p, weights, set_name)
    diff = l_init - l_inf  # > 0: pre-critical
    s1_all = plan_areas(replace(plan, branch_step=T)).s1_pt
    if np.all(diff > 0):
        return CriticalPoint(
            None,
            None,
            "every branch step is pre-critical (no crossing within the PT schedule)" + note,
            b,
            l_init,
            l_inf,
        )
    if np.all(diff <= 0):
        return CriticalPoint(
            None,
            None,
            "every branch step is post-critical (the start is already below the asymptote of continued CPT)" + note,
            b,
            l_init,
            l_inf,
        )
    j = (
        int(np.flatnonzero((diff[:-1] > 0) & (diff[1:] <= 0))[0])
        if np.any((diff[:-1] > 0) & (diff[1:] <= 0))
        else int(np.flatnonzero(np.sign(diff[:-1]) != np.sign(diff[1:]))[0])
    )
    lo, hi = int(b[j]), int(b[j + 1])

    # refine on integer steps by bisection
    def d_at(step: int) -> float:
        p = replace(plan, branch_step=step)
        x = _features(p, plan_areas(p), np.array([step]))
        return float(_composite_eval(fits, x, weights, set_name)[0] - _asymptote(fits, p, weights, set_name))

    d_lo = d_at(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        dm = d_at(mid)
        if (dm > 0) == (d_lo > 0):
            lo, d_lo = mid, dm
        else:
            hi = mid
    d_hi = d_at(hi)
    frac = d_lo / (d_lo - d_hi) if d_lo != d_hi else 0.0
    step = lo + frac
    s1 = float(np.interp(step, np.arange(s1_all.size), s1_all))
    return CriticalPoint(step, s1, "ok" + note, b, l_init, l_inf)


@dataclass(frozen=True)
class TurningLength:
    """CPT steps until the curve returns to its start, and the asymptotic class (reported separately)."""

    steps: float  # math.inf when it does not return within the horizon
    reason: str
    peak_step: int
    peak_rise: float
    l_init: float
    asymptote: float | None
    asymptotic_class: str  # "pre-critical" (asymptote below start), "post-critical", or "unknown"
    horizon: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": None if math.isinf(self.steps) else self.steps,
            "infinite": math.isinf(self.steps),
            "reason": self.reason,
            "peak_step": self.peak_step,
            "peak_rise": self.peak_rise,
            "l_init": self.l_init,
            "asymptote": self.asymptote,
            "asymptotic_class": self.asymptotic_class,
            "horizon": self.horizon,
        }


def turning_length(
    fits: CptFits,
    plan: CptPlan,
    *,
    weights: tuple[float, float] | None = None,
    set_name: str | None = None,
    horizon: int | None = None,
) -> TurningLength:
    """Smallest CPT step after the peak at which the D_pt loss (or the composite) is back at its start.

    The CPT schedule is continued at its final LR up to ``horizon`` CPT steps (default: the longer of the
    schedule and 1,000,000 steps when the final LR is > 0; the schedule itself when it ends at LR 0). The
    root is searched on every step. ``inf`` with a reason when the curve does not return within the
    horizon; the asymptotic class compares the asymptote of continued CPT with the start, and is **not**
    inferred from the root search (a post-critical curve can dip below its start transiently, laws.md §5.5).
    """
    final = float(plan.cpt.lrs()[-1])
    long_plan, horizon = continued_plan(plan, horizon)
    areas = plan_areas(long_plan)
    T_pt = long_plan.pt_steps
    idx = np.arange(T_pt, T_pt + horizon + 1)
    x = _features(long_plan, areas, idx)
    y = _composite_eval(fits, x, weights, set_name)
    l_init = float(y[0])
    rise = y - l_init
    k_peak = int(np.argmax(rise))
    asym: float | None
    try:
        asym = _asymptote(fits, long_plan, weights, set_name) if final > 0 else None
    except InputError:
        asym = None
    cls = "unknown" if asym is None else ("pre-critical" if asym < l_init else "post-critical")
    if rise[k_peak] <= 0:
        return TurningLength(0.0, "never above its start", 0, 0.0, l_init, asym, cls, horizon)
    after = np.flatnonzero(rise[k_peak:] <= 0)
    if after.size == 0:
        why = (
            f"post-critical: asymptote {asym:.4f} ≥ start {l_init:.4f}"
            if cls == "post-critical"
            else f"does not return within the horizon of {horizon} CPT steps"
        )
        return TurningLength(math.inf, why, k_peak, float(rise[k_peak]), l_init, asym, cls, horizon)
    k = k_peak + int(after[0])  # the first CPT step at or below the start
    return TurningLength(float(k), "ok", k_peak, float(rise[k_peak]), l_init, asym, cls, horizon)
