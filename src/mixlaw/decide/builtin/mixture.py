"""The mixture decisions on the Decision contract: the optimal mixture, the held-out comparison of mixture laws and
the nested step → size → mixture prediction of Data Mixing Laws (arXiv 2403.16952).

The engines are :func:`mixlaw.decide.mixture.optimum.optimize`, :func:`~mixlaw.decide.mixture.compare.compare`
and :func:`~mixlaw.decide.mixture.nested.nested`; this module gives their answers names, intervals and statuses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
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
)
from mixlaw.decide.registry import register_decision
from mixlaw.errors import InputError
from mixlaw.fit.uncertainty.from_draws import Interval, interval_health

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MixCompare", "MixNested", "MixOptimum", "CompareOptions", "NestedOptions", "OptimumOptions"]

FIT_NOT_CONVERGED = reason("mix_fit_status", "the {law} fit of {target} is {status}")
BOOT_WEAK = reason("mix_bootstrap_weak", "{n_failed} of {n} resamples were unusable")
CANDIDATE_REGRET = reason("mix_candidate_regret",
                          "{candidate}: regret {regret:+.4f} [{lo:+.4f}, {hi:+.4f}] (P(better than chosen) = {p:.2f})")
EXTRAPOLATES = reason("mix_extrapolates", "the optimum of {target} lies beyond the fitted runs: {detail}")
CAMEL_K = reason("mix_camel_k", "{target}: camel k = {k} (k = {k_requested} requested; fit {status})")
VERDICT = reason("mix_verdict", "{text}")
NOT_PREDICTED = reason("mix_not_predicted", "{model} predicted none of the {n} held-out rows of {target}")


def _domains(ds: tuple[str, ...]) -> tuple[str, ...]:
    out = tuple(d.strip() for d in ds if d.strip())
    if len(out) < 2 or len(set(out)) != len(out):
        raise InputError(f"expected at least two distinct domains, got {', '.join(out) or 'none'}", column="domains")
    return out


@dataclass(frozen=True)
class OptimumOptions:
    """Options of the optimal mixture (:func:`mixlaw.decide.mixture.optimum.optimize`).

    Parameters
    ----------
    domains
        Mixture domains (their ``w_<domain>`` columns).
    targets
        Loss columns, one law fitted per column.
    law
        The mixture law, or ``"auto"`` (default, as ``mix optimize``): the law with the smallest error on a nested
        size holdout, healthy fits first (:mod:`mixlaw.decide.mixture.law_choice`).
    weights
        ``{loss column: weight}`` of the objective (default equal).
    target_size
        Model size of the decision (size-aware laws).
    candidates
        Mixtures to evaluate beside the optimum: ``uniform`` (always) and named ones.
    """

    domains: tuple[str, ...] = ()
    targets: tuple[str, ...] = ("loss",)
    law: str = "auto"
    weights: dict[str, float] = field(default_factory=dict)
    target_size: float | None = None
    evaluate_uniform: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "domains", _domains(tuple(self.domains)))
        if not self.targets:
            raise InputError("expected at least one target loss column", column="targets")
        if self.target_size is not None and not (math.isfinite(self.target_size) and self.target_size > 0):
            raise InputError(f"expected target_size > 0, got {self.target_size}", column="target_size")


def _iv(pair: Any, level: float, n: int, n_failed: int) -> Interval | None:
    if not pair or pair[0] is None or pair[1] is None:
        return None
    return Interval(float(pair[0]), float(pair[1]), level, "bias_corrected", n, n_failed)


def _fit_health(fits: Mapping[str, Any]) -> tuple[FitHealth, ...]:
    return tuple(FitHealth.from_dict({"name": t, **f}) for t, f in fits.items())


@register_decision
class MixOptimum(Decision):
    """The mixture that minimises the weighted validation loss at the target size, under the fitted laws."""

    name = "mix_optimize"
    summary = "The mixture minimising the weighted loss at a target size, with paired regret against uniform."
    Options = OptimumOptions

    def _run(self, table: pd.DataFrame, o: OptimumOptions, ctx: DecisionContext, resamples: int) -> dict[str, Any]:
        from mixlaw.decide.mixture.optimum import optimize

        cands = {"uniform": dict.fromkeys(o.domains, 1.0 / len(o.domains))} if o.evaluate_uniform else None
        return optimize(
            table, law=o.law, domains=list(o.domains), target=list(o.targets), weights=dict(o.weights) or None,
            target_size=o.target_size, bootstrap=resamples, level=ctx.intervals.level,
            random_state=ctx.intervals.seed or 0, candidates=cands, solver=ctx.solver,
        )  # fmt: skip

    def estimate(self, table: pd.DataFrame, options: OptimumOptions, ctx: DecisionContext) -> Estimate:
        out = self._run(table, options, ctx, 0)
        return Estimate({f"w_{d}": float(out["weights"][d]) for d in options.domains}, details=out)

    def decide(self, table: pd.DataFrame, options: OptimumOptions, ctx: DecisionContext) -> DecisionResult:
        out = self._run(table, options, ctx, ctx.intervals.resamples)
        level = ctx.intervals.level
        boot = out.get("bootstrap") or {}
        n, n_failed = int(boot.get("n", 0)) + int(boot.get("n_failed", 0)), int(boot.get("n_failed", 0))
        w_iv = boot.get("weights") or {}
        answers = [Answer(f"w_{d}", float(out["weights"][d]), "share", _iv(w_iv.get(d), level, n, n_failed))
                   for d in options.domains]  # fmt: skip
        obj_iv = _iv(boot.get("objective"), level, n, n_failed)
        answers.append(Answer("objective", float(out["objective"]), "nats", obj_iv))
        reasons: list[Reason] = []
        status = Status.OK
        fits = _fit_health(out.get("fits", {}))
        for f in fits:
            if f.status != "converged":
                reasons.append(Reason(FIT_NOT_CONVERGED, {"law": f.law, "target": f.name, "status": f.status}))
                status = status.worst(Status.WEAK)
            elif not f.pinned:  # the data do not pin the fit down: said with the parameters, never a plain "ok"
                why = f.reason()
                if why is not None:
                    reasons.append(why)
                    status = status.worst(Status.WEAK)
        for target, detail in (out.get("extrapolation") or {}).items():
            if detail:
                reasons.append(Reason(EXTRAPOLATES, {"target": target, "detail": detail}))
                status = status.worst(Status.WEAK)
        if n and interval_health(n_failed, n) == "weak":
            reasons.append(Reason(BOOT_WEAK, {"n_failed": n_failed, "n": n}))
            status = status.worst(Status.WEAK)
        for target, ck in (out.get("camel_k") or {}).items():  # a degenerate CAMEL is refitted with fewer components
            if ck["status"] != "healthy":
                reasons.append(Reason(CAMEL_K, {"target": target, "k": ck["k"], "k_requested": ck["k_requested"],
                                                "status": ck["status"]}))  # fmt: skip
                if ck["status"] == "degenerate":
                    status = status.worst(Status.WEAK)
        for v in out.get("verdicts") or []:
            reasons.append(Reason(VERDICT, {"text": v["text"], "status": v["status"], "against": v["against"]}))
        for c in out.get("candidates", []):
            r = c.get("regret_interval")
            answers.append(Answer(f"regret_{c['name']}", float(c["regret"]), "nats", _iv(r, level, n, n_failed)))
            if r:
                p = float(c.get("p_better_than_chosen", math.nan))
                params = {"candidate": c["name"], "regret": float(c["regret"]), "lo": float(r[0]), "hi": float(r[1]),
                          "p": p}  # fmt: skip
                reasons.append(Reason(CANDIDATE_REGRET, params))
        return DecisionResult(self.name, status, tuple(answers), tuple(reasons), DataBasis.of(table), fits,
                              options, out)  # fmt: skip


@dataclass(frozen=True)
class CompareOptions:
    """Options of the held-out comparison of mixture laws (:func:`mixlaw.decide.mixture.compare.compare`).

    Parameters
    ----------
    domains, targets
        Mixture domains and loss columns.
    holdout
        The held-out rows (a filter, e.g. ``"n_params > 5e4"``, or a named scheme).
    models
        Comma-separated mixture laws and surrogates to compare.
    """

    domains: tuple[str, ...] = ()
    targets: tuple[str, ...] = ("loss",)
    holdout: str = ""
    models: tuple[str, ...] = ("camel", "dml", "blind")

    def __post_init__(self) -> None:
        object.__setattr__(self, "domains", _domains(tuple(self.domains)))
        if not self.holdout:
            raise InputError("expected holdout, the rows to predict", column="holdout")


@register_decision
class MixCompare(Decision):
    """Which mixture law predicts held-out runs best: MAE, MRE, Spearman and interval coverage per law."""

    name = "mix_compare"
    summary = "Compare mixture laws on held-out runs: errors, rank correlation and interval coverage."
    Options = CompareOptions

    def estimate(self, table: pd.DataFrame, options: CompareOptions, ctx: DecisionContext) -> Estimate:
        from mixlaw.decide.mixture.compare import compare

        out = compare(
            table, domains=list(options.domains), targets=list(options.targets), holdout=options.holdout,
            models=",".join(options.models), bootstrap=ctx.intervals.resamples, level=ctx.intervals.level,
            random_state=ctx.intervals.seed or 0, solver=ctx.solver,
        )  # fmt: skip
        values: dict[str, float | None] = {}
        reasons: list[Reason] = []
        for t in out.get("targets", []):
            for m in t.get("models", []):
                mre = m.get("mre")
                values[f"mre_{t['target']}_{m['model']}"] = None if mre is None or not math.isfinite(mre) else mre
                if not m.get("n_predicted"):
                    reasons.append(Reason(NOT_PREDICTED, {"model": m["model"], "n": m.get("n_test", 0),
                                                          "target": t["target"]}))  # fmt: skip
        status = Status.OK if any(v is not None for v in values.values()) else Status.NO_ANSWER
        if reasons and status is Status.OK:
            status = Status.WEAK
        return Estimate(values, status, tuple(reasons), details=out)

    def decide(self, table: pd.DataFrame, options: CompareOptions, ctx: DecisionContext) -> DecisionResult:
        est = self.estimate(table, options, ctx)  # the comparison's intervals are its per-row prediction intervals
        answers = tuple(Answer(k, v, "relative error") for k, v in est.values.items())
        return DecisionResult(self.name, est.status, answers, est.reasons, DataBasis.of(table), (), options,
                              est.details)  # fmt: skip


@dataclass(frozen=True)
class NestedOptions:
    """Options of the nested step → size → mixture prediction (:func:`mixlaw.decide.mixture.nested.nested`)."""

    domains: tuple[str, ...] = ()
    target: str = "loss"
    target_size: float = 0.0
    target_step: float = 0.0
    mixture_law: str = "dml"

    def __post_init__(self) -> None:
        object.__setattr__(self, "domains", _domains(tuple(self.domains)))
        for name in ("target_size", "target_step"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"expected {name} > 0, got {v}", column=name)


@register_decision
class MixNested(Decision):
    """The mixture law of a larger, longer run predicted from smaller, shorter ones (Data Mixing Laws' pipeline)."""

    name = "mix_nested"
    summary = "Predict the loss of each mixture at a target (size, step) through the step → size → mixture laws."
    Options = NestedOptions

    def estimate(self, table: pd.DataFrame, options: NestedOptions, ctx: DecisionContext) -> Estimate:
        from mixlaw.decide.mixture.nested import nested

        out = nested(
            table, domains=list(options.domains), target_size=options.target_size, target_step=options.target_step,
            target=options.target, mixture_law=options.mixture_law, random_state=ctx.intervals.seed or 0,
            solver=ctx.solver,
        )  # fmt: skip
        values: dict[str, float | None] = {}
        for i, m in enumerate(out.get("mixtures", [])):
            label = ",".join(f"{k}={float(v):.3g}" for k, v in m["weights"].items())
            values[f"loss[{label}]" if label else f"loss[{i}]"] = m.get("predicted")
        val = out.get("validation") or {}
        if val.get("mre") is not None:
            values["validation_mre"] = val["mre"]
        return Estimate(values, Status.OK if values else Status.NO_ANSWER, details=out)
