"""Critical mixture ratio under a CPT LR schedule from a fitted replay law of the general loss."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from mixlaw.decide.cpt.fits import LawFit
from mixlaw.decide.cpt.plan import CptPlan, _features, plan_areas
from mixlaw.errors import InputError
from mixlaw.schedules import DEFAULT_DECAY, Schedule


@dataclass(frozen=True)
class ScheduleCMR:
    """CMR under a CPT schedule: the largest domain share whose predicted general-loss rise at the budget
    is ≤ ε."""

    cmr: float | None
    status: str
    interval: tuple[float, float] | None
    n_boot: int
    n_boot_none: int
    epsilon: float
    budget_steps: int
    schedule: str
    grid: np.ndarray
    rise: np.ndarray  # (n_grid,) predicted general-loss rise at the budget (point estimate)
    constant_lr_cmr: float | None = None
    #: Bootstrap percentile band ``(2, n_grid)`` of ``rise`` (``None`` without bootstrap sets).
    rise_band: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: The same under a constant LR at the schedule's peak (``None`` without ``constant_reference``).
    constant_rise: np.ndarray | None = field(default=None, repr=False, compare=False)
    constant_rise_band: np.ndarray | None = field(default=None, repr=False, compare=False)
    constant_lr_interval: tuple[float, float] | None = None
    constant_lr_n_boot_none: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "cmr": self.cmr,
            "status": self.status,
            "interval": None if self.interval is None else list(self.interval),
            "n_boot": self.n_boot,
            "n_boot_without_cmr": self.n_boot_none,
            "epsilon": self.epsilon,
            "budget_steps": self.budget_steps,
            "schedule": self.schedule,
            "constant_lr_cmr": self.constant_lr_cmr,
            "constant_lr_interval": None if self.constant_lr_interval is None else list(self.constant_lr_interval),
            "constant_lr_n_boot_without_cmr": self.constant_lr_n_boot_none,
        }


def _cmr_from_rise(grid: np.ndarray, rise: np.ndarray, eps: float) -> float | None:
    """Largest domain share on the grid with rise ≤ ε, refined linearly to the crossing."""
    ok = rise <= eps
    if not ok.any():
        return None
    j = int(np.flatnonzero(ok)[-1])
    if j == grid.size - 1:
        return float(grid[-1])
    r0, r1 = rise[j], rise[j + 1]
    frac = (eps - r0) / (r1 - r0) if r1 != r0 else 0.0
    return float(grid[j] + frac * (grid[j + 1] - grid[j]))


def schedule_aware_cmr(
    fit_result: Any,
    schedule: Schedule | str,
    epsilon: float,
    *,
    budget_steps: int | None = None,
    budget_tokens: float | None = None,
    tokens_per_step: float | None = None,
    pt_schedule: Schedule | str | None = None,
    branch_step: int | None = None,
    decay: float = DEFAULT_DECAY,
    warmup: Literal["peak", "logged", "raw"] = "peak",
    split: Literal["time", "origin"] = "time",
    n_params: float | None = None,
    level: float = 0.95,
    n_grid: int = 201,
    constant_reference: bool = True,
) -> ScheduleCMR:
    """Critical mixture ratio under a CPT LR schedule, from a fitted replay law of the **general** (D_pt)
    loss.

    The domain share of the CPT mix is ``r_cpt = 1 − replay_ratio``. For each share on a grid the general-loss
    rise at the budget, ``L_pt(T_budget; r) − L_pt(0)``, is predicted with the law under the given schedule
    (truncated or extended at its final LR to the budget); the CMR is the largest share with rise ≤
    ``epsilon`` (interpolated to the crossing). The interval is the bootstrap percentile interval over the
    fit's bootstrap parameter sets (resamples without a feasible share are counted, not dropped silently).
    With ``constant_reference`` the same computation under a constant LR at the schedule's peak is returned
    beside it (``constant_lr_cmr``, its interval and rise curve), the setting of the CMR paper. ``epsilon``
    may be 0 (no rise at all tolerated; the rise can be negative).
    """
    fit = LawFit.from_any(fit_result)
    if "replay_ratio" not in fit.law.inputs:
        raise InputError(f"schedule-aware CMR needs a replay law (cpt_replay), got '{fit.law.name}'")
    if not epsilon >= 0:
        raise InputError(f"epsilon must be >= 0, got {epsilon}")
    sched = schedule if isinstance(schedule, Schedule) else Schedule.parse(schedule)
    if budget_steps is None:
        if budget_tokens is None or tokens_per_step is None:
            raise InputError("give budget_steps, or budget_tokens with tokens_per_step")
        budget_steps = int(round(budget_tokens / tokens_per_step))
    if budget_steps < 1:
        raise InputError(f"budget must be at least one step, got {budget_steps}")
    pt = (
        None
        if pt_schedule is None
        else (pt_schedule if isinstance(pt_schedule, Schedule) else Schedule.parse(pt_schedule))
    )
    if pt is None and "s1_pt" in fit.law.inputs:
        raise InputError("schedule-aware CMR needs the PT schedule (pt_schedule) for the s1_pt/s2_pt areas")

    def cpt_to_budget(s: Schedule) -> Schedule:
        lr = s.lrs()
        if budget_steps <= lr.size:
            return Schedule.from_lr(lr[:budget_steps])
        return Schedule.from_lr(np.concatenate([lr, np.full(budget_steps - lr.size, lr[-1])]))

    grid = np.linspace(0.0, 1.0, n_grid)

    def rises(s: Schedule) -> np.ndarray:
        plan = CptPlan(
            pt=pt,
            cpt=cpt_to_budget(s),
            branch_step=branch_step,
            decay=decay,
            warmup=warmup,
            split=split,
            n_params=n_params,
        )
        areas = plan_areas(plan)
        t0, t1 = plan.pt_steps, areas.step.size - 1
        out = []
        for r_cpt in grid:
            x = _features(replace(plan, replay_ratio=float(1.0 - r_cpt)), areas, np.array([t0, t1]))
            y = fit.evaluate(x)  # (S, 2)
            out.append(y[:, 1] - y[:, 0])
        return np.stack(out, axis=1)  # (S, n_grid)

    q = (1 - level) / 2

    def summarise(R: np.ndarray) -> tuple[float | None, tuple[float, float] | None, int, np.ndarray | None]:
        cmr = _cmr_from_rise(grid, R[0], epsilon)
        interval, n_none, band = None, 0, None
        if R.shape[0] > 2:
            vals = [_cmr_from_rise(grid, r, epsilon) for r in R[1:]]
            n_none = sum(v is None for v in vals)
            num = np.array([v for v in vals if v is not None])
            if num.size >= 2:  # bias-corrected percentile interval: it contains the point estimate
                from mixlaw.fit.uncertainty.from_draws import bc_interval

                interval = bc_interval(num, cmr, level)
            band = np.quantile(R[1:], [q, 1 - q], axis=0)
        return cmr, interval, n_none, band

    R = rises(sched)
    cmr, interval, n_none, band = summarise(R)
    status = (
        "ok" if cmr is not None else "no feasible share: the general loss rises by more than epsilon at every share"
    )
    if cmr is not None and cmr >= 1.0:
        status = "all shares feasible: CMR = 1 (pure domain data stays within epsilon)"
    const, c_interval, c_none, c_rise, c_band = None, None, 0, None, None
    if constant_reference:
        c = Schedule(kind="constant", peak_lr=sched.peak_lr, total_steps=budget_steps)
        Rc = rises(c)
        const, c_interval, c_none, c_band = summarise(Rc)
        c_rise = Rc[0]
    return ScheduleCMR(
        cmr=cmr,
        status=status,
        interval=interval,
        n_boot=max(R.shape[0] - 1, 0),
        n_boot_none=n_none,
        epsilon=float(epsilon),
        budget_steps=int(budget_steps),
        schedule=sched.spec(),
        grid=grid,
        rise=R[0],
        constant_lr_cmr=const,
        rise_band=band,
        constant_rise=c_rise,
        constant_rise_band=c_band,
        constant_lr_interval=c_interval,
        constant_lr_n_boot_none=c_none,
    )
