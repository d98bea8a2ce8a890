"""The critical mixture ratio (arXiv 2407.17467) on the Decision contract.

``CMR = max F``: the largest domain share ``R`` of the continual pre-training mix whose general-loss rise stays
within ``ε`` at the token budget and whose turning point ``T0`` lies within it (``F ⊂ A``), per model size
(:func:`mixlaw.decide.cmr.main.critical_mixture_ratio`, which also gives the bias-corrected bootstrap interval).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mixlaw.decide.contract import (
    Answer,
    DataBasis,
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

__all__ = ["CriticalMixtureRatio", "CMROptions"]

CMR_SIZE_STATUS = reason("cmr_size_status", "{size}: {status}")
CMR_SIZE_WEAK = reason("cmr_size_weak", "{size}: {detail}")
CMR_SIZE_BRACKET = reason("cmr_size_bracket", "{size}: CMR between {lo} and {hi} (the trained ratios the table marks "
                          "feasible and infeasible; {why})")  # fmt: skip
NO_SIZES = reason("cmr_no_sizes", "no model size has CPT runs to decide on")


@dataclass(frozen=True)
class CMROptions:
    """Options of the critical mixture ratio.

    Parameters
    ----------
    general_eval, domain_eval
        Loss columns of the general and the domain validation set (``loss_`` prefix optional).
    epsilon
        Tolerated rise of the general loss at the budget (nats/token; the paper's 0.05).
    ratio_column, size_column
        Domain-share and model-size columns (defaults: ``w_<domain>``, ``n_params``).
    budget_tokens
        CPT budget in tokens (default: the median final token count of each size's runs).
    ratio_law
        ``auto``, or a registered ratio law.
    relative_to_control
        Increments relative to the R = 0 control run of each size.
    """

    general_eval: str = "general"
    domain_eval: str = ""
    epsilon: float = 0.05
    ratio_column: str | None = None
    size_column: str | None = None
    budget_tokens: float | None = None
    ratio_law: str = "auto"
    relative_to_control: bool = False

    def __post_init__(self) -> None:
        if not self.domain_eval:
            raise InputError("expected domain_eval, the loss column of the domain validation set", column="domain_eval")
        if not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            raise InputError(f"expected epsilon >= 0, got {self.epsilon}", column="epsilon")
        if self.budget_tokens is not None and not (math.isfinite(self.budget_tokens) and self.budget_tokens > 0):
            raise InputError(f"expected budget_tokens > 0, got {self.budget_tokens}", column="budget_tokens")


def _size_label(size: Any) -> str:
    try:
        return f"{float(size):.4g}"
    except (TypeError, ValueError):
        return str(size)


def fit_health(dec: Any) -> tuple[FitHealth, ...]:
    """The health of every fit a CMR decision rests on, per size: the ΔL_general and ΔL_domain curve of each
    trained ratio (``dL_general@SIZE,R=r``), then the CMR law through the turning points (``cmr_law@SIZE``).

    The CMR engine keeps their parameters, rows and solver status (:class:`~mixlaw.decide.cmr.result.SizeCMR`), not
    engine fit results, so each verdict is assessed here at the fitted parameters (:meth:`FitHealth.assess`). Each
    fit is profiled where the decision reads it: a curve from its first evaluation to the budget, the CMR law from
    the first turning point to the budget. What the data do not pin down weakens the decision only where it moves
    those readings beyond the noise (``moves_answer``): a curve read inside its own evaluations never does."""
    import numpy as np

    from mixlaw.decide.cmr.curves import curve_laws
    from mixlaw.decide.cmr.decision import cmr_law, cmr_points

    def span(lo: float, hi: float) -> dict[str, Any]:
        return {"tokens": np.geomspace(max(lo, 1e-300), max(hi, lo, 1e-300), 64)}

    out: list[FitHealth] = []
    for s in dec.sizes:
        label = _size_label(s.n_params)
        for ratio, c in sorted(s.curves.items()):
            if "tokens" not in c:
                continue
            dom_law, gen_law = curve_laws(s.token_unit, bool(c["pin_zero"]), tuple(c["laws"]))
            at = span(float(np.min(c["tokens"])), max(float(s.budget_tokens), float(np.max(c["tokens"]))))
            for which, law in (("general", gen_law), ("domain", dom_law)):
                if c.get(which) is not None:
                    name, y, st = f"dL_{which}@{label},R={ratio:g}", c[f"obs_{which}"], str(c[f"status_{which}"])
                    out.append(FitHealth.assess(name, law, {"tokens": c["tokens"]}, y, c[which], st, at))
        pts = cmr_points(s.ratios)
        if s.cmr_law is not None and pts:
            t0 = [p[0] for p in pts]
            at = span(min(t0), float(s.budget_tokens))
            out.append(FitHealth.assess(f"cmr_law@{label}", cmr_law(s.token_unit), {"tokens": t0},
                                        [p[1] for p in pts], s.cmr_law, at=at))  # fmt: skip
    return tuple(out)


@register_decision
class CriticalMixtureRatio(Decision):
    """The CMR per model size, with its bias-corrected bootstrap interval and the tolerance boundary."""

    name = "cmr"
    summary = "Largest domain share of the CPT mix that keeps the general loss within ε at the budget (per size)."
    Options = CMROptions

    def _run(self, table: pd.DataFrame, options: CMROptions, ctx: DecisionContext, resamples: int) -> Any:
        from mixlaw.decide.cmr.common import CMRSettings
        from mixlaw.decide.cmr.main import critical_mixture_ratio

        settings = CMRSettings(epsilon=options.epsilon, budget_tokens=options.budget_tokens,
                               ratio_law=options.ratio_law, level=ctx.intervals.level, solver=ctx.solver)  # fmt: skip
        return critical_mixture_ratio(
            table, general_eval=options.general_eval, domain_eval=options.domain_eval, settings=settings,
            ratio_column=options.ratio_column, size_column=options.size_column,
            relative_to_control=options.relative_to_control, bootstrap=resamples, random_state=ctx.intervals.seed,
            control_reading=False,
        )  # fmt: skip

    def estimate(self, table: pd.DataFrame, options: CMROptions, ctx: DecisionContext) -> Estimate:
        dec = self._run(table, options, ctx, 0)
        fits = fit_health(dec)
        why = unpinned(fits)
        return Estimate({f"cmr@{_size_label(s.n_params)}": s.cmr for s in dec.sizes},
                        Status.WEAK if why else Status.OK, why, dec.to_dict(), fits)  # fmt: skip

    def decide(self, table: pd.DataFrame, options: CMROptions, ctx: DecisionContext) -> DecisionResult:
        dec = self._run(table, options, ctx, ctx.intervals.resamples)
        level = ctx.intervals.level
        answers: list[Answer] = []
        reasons: list[Reason] = []
        status = Status.OK if dec.sizes else Status.NO_ANSWER
        if not dec.sizes:
            reasons.append(Reason(NO_SIZES))
        for s in dec.sizes:
            label = _size_label(s.n_params)
            iv = None
            if s.ci is not None:
                iv = Interval(float(s.ci[0]), float(s.ci[1]), level, "bias_corrected", s.n_bootstrap,
                              s.n_bootstrap_failed, bool(getattr(s.ci, "extended", False)))  # fmt: skip
            answers.append(Answer(f"cmr@{label}", s.cmr, "share", iv))
            tb = s.tolerance_boundary_ci
            answers.append(Answer(f"tolerance_boundary@{label}", s.tolerance_boundary, "share",
                                  None if tb is None else Interval(float(tb[0]), float(tb[1]), level, "percentile",
                                                                   s.n_bootstrap, s.n_bootstrap_failed)))  # fmt: skip
            lo, hi = s.bracket
            if s.cmr is None and s.reading.value == "bracket" and lo is not None and hi is not None:
                # an answer with a caveat: the range the per-ratio table gives, not a point
                answers.append(Answer(f"cmr_lower@{label}", float(lo), "share"))
                answers.append(Answer(f"cmr_upper@{label}", float(hi), "share"))
                status = status.worst(Status.WEAK)
                why = s.bracket_reason.value if s.bracket_reason is not None else s.status
                reasons.append(Reason(CMR_SIZE_BRACKET, {"size": label, "lo": f"{lo:g}", "hi": f"{hi:g}", "why": why}))
            elif s.cmr is None:
                status = status.worst(Status.NO_ANSWER if len(dec.sizes) == 1 else Status.WEAK)
                reasons.append(Reason(CMR_SIZE_STATUS, {"size": label, "status": s.status}))
            elif s.outcome != "ok":
                status = status.worst(Status.WEAK)
                for w in s.weak_reasons or [s.status]:
                    reasons.append(Reason(CMR_SIZE_WEAK, {"size": label, "detail": w}))
        fits = fit_health(dec)
        why = unpinned(fits)  # a decision resting on a fit the data do not pin down is weak, and says which
        if why:
            reasons.extend(why)
            status = status.worst(Status.WEAK)
        return DecisionResult(
            decision=self.name, status=status, answers=tuple(answers), reasons=tuple(reasons),
            data=DataBasis.of(table), fits=fits, options=options, details=dec.to_dict(),
        )  # fmt: skip
