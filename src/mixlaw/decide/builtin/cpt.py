"""The CPT decisions on the Decision contract: the critical point and turning length, and the best replay ratio,
peak LR or loss potential (arXiv 2505.07796 on the LR-annealing law, arXiv 2408.11029).

They decide from fitted CPT laws (a fit bundle written by ``mixlaw fit``/``mixlaw cpt``) and a CPT plan (PT and CPT
schedules, the branch step), not from a run table; the plan is always given explicitly: the answer depends on it
(:mod:`mixlaw.decide.cpt.critical`, :mod:`mixlaw.decide.cpt.predict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mixlaw.decide.contract import (
    Answer,
    Decision,
    DecisionContext,
    DecisionResult,
    Estimate,
    FitHealth,
    Reason,
    Status,
    reason,
    unpinned,
)
from mixlaw.decide.registry import register_decision
from mixlaw.errors import InputError
from mixlaw.fit.uncertainty.from_draws import Interval

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CptCritical", "CptCriticalOptions", "CptOptimize", "CptOptimizeOptions"]

NO_CRITICAL = reason("cpt_no_critical_point", "no critical point: {detail}")
NO_TURN = reason("cpt_no_return", "the CPT curve does not return to its start within {horizon} steps")
AT_EDGE = reason("cpt_optimum_at_edge", "the best {over} is at the edge of the grid: widen it")
CENSORED = reason("cpt_censored_draws", "{n} of {n_draws} draws of the {answer} have no answer in range")


def _weights(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        a, b = (float(v) for v in text.replace(";", ",").split(","))
    except ValueError:
        raise InputError(f"expected weights as two numbers W_PT,W_CPT, got {text!r}", column="weights") from None
    return a, b


def fit_health(fits: Any) -> tuple[FitHealth, ...]:
    """The health of every fit of a CPT bundle (:class:`~mixlaw.decide.cpt.fits.CptFits`), D_pt and D_cpt laws and
    OOD combinations: the engine's own verdict (:meth:`FitHealth.of`) where the bundle keeps the fit's record, and
    ``status = "unknown"`` with no verdict for a plain parameter dict (nothing is invented)."""
    from mixlaw.fit import FitResult

    out = []
    for prefix, group in (("", fits.fits), ("ood:", fits.ood)):
        for name, lf in group.items():
            rec = lf.record
            if rec is not None and "schema" in rec:
                out.append(FitHealth.of(f"{prefix}{name}", FitResult.from_dict(dict(rec))))
            else:
                out.append(FitHealth(f"{prefix}{name}", str(lf.law.name), "unknown"))
    return tuple(out)


def _with_fits(est: Estimate, fits: tuple[FitHealth, ...]) -> Estimate:
    """``est`` resting on ``fits``: weak, with the reason, where the data do not pin a fit down."""
    why = unpinned(fits)
    status = est.status.worst(Status.WEAK) if why else est.status
    return Estimate(est.values, status, (*est.reasons, *why), est.details, fits, est.units)


def _draw_iv(iv: Any) -> Interval | None:
    if iv is None:
        return None
    return Interval(float(iv.lo), float(iv.hi), float(iv.level), "percentile", int(iv.n_draws), 0)


@dataclass(frozen=True)
class CptCriticalOptions:
    """Options of the critical point.

    Parameters
    ----------
    fit
        The CPT fit bundle (JSON: the D_pt fit, and optionally the D_cpt fit).
    plan
        The CPT plan (TOML: PT and CPT schedules).
    weights
        ``W_PT,W_CPT``: analyse the composite loss instead of the D_pt loss.
    horizon
        Turning-length horizon in CPT steps (default: the plan's).
    """

    fit: str = ""
    plan: str = ""
    weights: str | None = None
    horizon: int | None = None

    def __post_init__(self) -> None:
        if not self.fit or not self.plan:
            raise InputError("expected fit (a CPT fit bundle) and plan (a CPT plan TOML): the answer depends on the "
                             "plan, so it is never assumed", column="plan")  # fmt: skip
        if self.horizon is not None and not 1 <= self.horizon <= 10**9:
            raise InputError(f"expected horizon in [1, 1e9] CPT steps, got {self.horizon}", column="horizon")
        _weights(self.weights)


@register_decision
class CptCritical(Decision):
    """The PT step past which continual pre-training no longer brings the loss back below its start (critical
    point), and the CPT steps until the curve returns to its start (turning length)."""

    name = "cpt_critical"
    summary = "Critical PT branch step and turning length of a CPT plan, from fitted CPT laws."
    Options = CptCriticalOptions
    needs_table = False

    def estimate(self, table: pd.DataFrame | None, options: CptCriticalOptions, ctx: DecisionContext) -> Estimate:
        from mixlaw.decide.cpt import critical_point, load_fits, load_plan, turning_length

        fits, plan = load_fits(options.fit), load_plan(options.plan)
        w = _weights(options.weights)
        cp = critical_point(fits, plan, weights=w)
        tl = turning_length(fits, plan, weights=w, horizon=options.horizon)
        values = {"critical_pt_step": None if cp.step is None else float(cp.step),
                  "turning_length_steps": None if math.isinf(tl.steps) else float(tl.steps)}  # fmt: skip
        reasons: list[Reason] = []
        if cp.step is None:
            reasons.append(Reason(NO_CRITICAL, {"detail": cp.reason}))
        if math.isinf(tl.steps):
            reasons.append(Reason(NO_TURN, {"horizon": tl.horizon}))
        status = Status.OK if not reasons else Status.WEAK
        details = {"critical_point": {"pt_step": values["critical_pt_step"], "s1_pt": cp.s1_pt, "reason": cp.reason},
                   "turning_length": tl.to_dict(), "weights": None if w is None else list(w)}  # fmt: skip
        est = Estimate(values, status, tuple(reasons), details, units={"critical_pt_step": "steps",
                                                                      "turning_length_steps": "steps"})  # fmt: skip
        return _with_fits(est, fit_health(fits))

    def decide(self, table: pd.DataFrame | None, options: CptCriticalOptions, ctx: DecisionContext) -> DecisionResult:
        from mixlaw.decide.cpt import load_fits, load_plan
        from mixlaw.decide.cpt.critical_draws import critical_point_interval, turning_length_interval

        est = self.estimate(table, options, ctx)
        fits, plan = load_fits(options.fit), load_plan(options.plan)
        w = _weights(options.weights)
        level = ctx.intervals.level
        ivs = {"critical_pt_step": critical_point_interval(fits, plan, weights=w, level=level),
               "turning_length_steps": turning_length_interval(fits, plan, weights=w, horizon=options.horizon,
                                                               level=level)}  # fmt: skip
        reasons = list(est.reasons)
        for name, iv in ivs.items():
            if iv is not None and iv.n_censored:
                reasons.append(Reason(CENSORED, {"n": iv.n_censored, "n_draws": iv.n_draws,
                                                 "answer": name.replace("_", " ")}))  # fmt: skip
        answers = tuple(Answer(k, v, est.units[k], _draw_iv(ivs[k])) for k, v in est.values.items())
        return DecisionResult(self.name, est.status, answers, tuple(reasons), None, est.fits, options, est.details)


@dataclass(frozen=True)
class CptOptimizeOptions:
    """Options of the CPT optimisation: which hyper-parameter (``replay``, ``peak_lr`` or ``loss_potential``), the
    weights ``W_PT,W_CPT`` of the objective ``w_pt·L_pt + w_cpt·L_cpt`` at the final CPT step, the fit bundle and
    the plan."""

    fit: str = ""
    plan: str = ""
    over: str = "replay"
    weights: str = "0.5,0.5"

    def __post_init__(self) -> None:
        if not self.fit or not self.plan:
            raise InputError("expected fit (a CPT fit bundle with D_pt and D_cpt fits) and plan (a CPT plan TOML)",
                             column="plan")  # fmt: skip
        if self.over not in ("replay", "peak_lr", "loss_potential"):
            raise InputError(f"expected over replay, peak_lr or loss_potential, got {self.over!r}", column="over")
        _weights(self.weights)


@register_decision
class CptOptimize(Decision):
    """The replay ratio, peak LR or loss potential that minimises the weighted final losses of a CPT plan."""

    name = "cpt_optimize"
    summary = "Best replay ratio, peak LR or loss potential of a CPT plan for weighted D_pt/D_cpt losses."
    Options = CptOptimizeOptions
    needs_table = False

    def estimate(self, table: pd.DataFrame | None, options: CptOptimizeOptions, ctx: DecisionContext) -> Estimate:
        from mixlaw.decide.cpt import load_fits, load_plan
        from mixlaw.decide.cpt.predict import optimize

        w = _weights(options.weights) or (0.5, 0.5)  # validated in the options: never None here
        fits = load_fits(options.fit)
        res = optimize(fits, load_plan(options.plan), options.over,  # type: ignore[arg-type]
                       w, level=ctx.intervals.level)  # fmt: skip
        reasons = (Reason(AT_EDGE, {"over": options.over}),) if res.at_edge else ()
        est = Estimate({f"best_{options.over}": res.best, "objective": res.best_objective},
                       Status.WEAK if res.at_edge else Status.OK, reasons, res.to_dict())  # fmt: skip
        return _with_fits(est, fit_health(fits))

    def decide(self, table: pd.DataFrame | None, options: CptOptimizeOptions, ctx: DecisionContext) -> DecisionResult:
        est = self.estimate(table, options, ctx)
        d = est.details
        n = int(d.get("n_boot", 0))

        def iv(pair: Any) -> Interval | None:
            return None if not pair else Interval(float(pair[0]), float(pair[1]), float(d["level"]), "percentile", n)

        answers = (Answer(f"best_{options.over}", est.values[f"best_{options.over}"], "", iv(d.get("interval"))),
                   Answer("objective", est.values["objective"], "nats", iv(d.get("objective_interval"))))  # fmt: skip
        return DecisionResult(self.name, est.status, answers, est.reasons, None, est.fits, options, est.details)
