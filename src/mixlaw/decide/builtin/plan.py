"""Which probe runs to buy, on the Decision contract (:func:`mixlaw.design.plan.plan`).

The planner allocates a compute budget over probe sizes and mixtures with a sampling strategy (hourglass, rectangle,
…); with ``simulate > 0`` it scores the strategy by the extrapolation error of a known law fitted to simulated
runs of the allocation, whose mean over replicates is given with a normal interval (± z · s.e.).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from mixlaw.decide.contract import Answer, Decision, DecisionContext, DecisionResult, Estimate, Status
from mixlaw.decide.registry import register_decision
from mixlaw.errors import InputError
from mixlaw.fit.uncertainty.from_draws import Interval

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PlanOptions", "ProbePlan"]


@dataclass(frozen=True)
class PlanOptions:
    """Options of the probe planner (:func:`mixlaw.design.plan.plan`): fitting sizes, target size, budget,
    domains, strategy and simulation replicates."""

    sizes: tuple[str, ...] = ()
    target_size: str = ""
    budget: str = ""
    domains: tuple[str, ...] = ()
    strategy: str = "hourglass"
    simulate: int = 0
    tokens_per_param: float = 20.0

    def __post_init__(self) -> None:
        if not self.sizes or not self.target_size or not self.budget:
            raise InputError("expected sizes, target_size and budget", column="sizes")
        if not 0 <= self.simulate <= 10_000:
            raise InputError(f"expected simulate in [0, 10000], got {self.simulate}", column="simulate")
        if not (math.isfinite(self.tokens_per_param) and self.tokens_per_param > 0):
            raise InputError(f"expected tokens_per_param > 0, got {self.tokens_per_param}", column="tokens_per_param")


@register_decision
class ProbePlan(Decision):
    """The probe runs to buy: run counts per size and mixture under a compute budget."""

    name = "plan"
    summary = "Which probe runs to buy for a compute budget (sizes, mixtures), scored by simulation."
    Options = PlanOptions
    needs_table = False

    def estimate(self, table: pd.DataFrame | None, options: PlanOptions, ctx: DecisionContext) -> Estimate:
        from dataclasses import replace

        from mixlaw.design.plan import DEFAULT_ALLOCATION, plan, plan_to_dict

        res = plan(
            sizes=list(options.sizes), target_size=options.target_size, budget=options.budget,
            domains=list(options.domains), strategy=options.strategy, simulate=options.simulate,
            tokens_per_param=options.tokens_per_param, solver=ctx.solver,
            allocation=replace(DEFAULT_ALLOCATION, seed=ctx.intervals.seed or 0),
        )  # fmt: skip
        a = res["allocation"]
        values: dict[str, float | None] = {"runs": float(a.n_runs), "distinct_mixtures": float(a.distinct_mixtures),
                                           "budget_share": a.spent / a.budget}  # fmt: skip
        return Estimate(values, Status.OK, details=plan_to_dict(res))

    def decide(self, table: pd.DataFrame | None, options: PlanOptions, ctx: DecisionContext) -> DecisionResult:
        est = self.estimate(table, options, ctx)
        answers = [Answer(k, v) for k, v in est.values.items()]
        sim = est.details.get("simulation")
        if sim:
            z = NormalDist().inv_cdf(0.5 + ctx.intervals.level / 2)
            row: dict[str, Any] = sim["strategies"][0]
            for m in ("rmse", "regret"):
                mean, se = row.get(m), row.get(f"{m}_se")
                iv = None
                if se is not None and math.isfinite(se):
                    iv = Interval(mean - z * se, mean + z * se, ctx.intervals.level, "normal",
                                  int(sim["replicates"]), int(row.get("n_failed", 0)))  # fmt: skip
                answers.append(Answer(f"simulated_{m}", mean, "nats", iv))
        return DecisionResult(self.name, est.status, tuple(answers), est.reasons, None, (), options, est.details)
