"""Result objects of the CMR decision: :class:`SizeCMR` per model size and :class:`CMRDecision`.

Which number a CMR headline is, and why: the reading and its reason code (laws.md §6.3, §6.5).

The CMR is the paper's ``max F`` with ``F = A ∩ {R : T0(R) ≤ T_max}``: with the CMR law increasing in ``T`` and
the ratio law increasing in ``R`` it is ``min(CMR law at the budget, tolerance boundary)``. The headline must agree
with the per-ratio table it is printed under: it never exceeds the smallest trained ratio the table marks
infeasible, nor lies below the largest feasible one below it (the **observed bracket**). A value outside the
bracket, or no CMR law at all, leaves the bracket itself as the answer ("CMR between a and b").

CMR vs model size: the least-squares line ``CMR = a + b·log10 N`` through the sizes whose CMR is comparable.

A size feeds the line only when its CMR is the decision's full reading (:func:`trend_exclusion`); the sizes used
and those left out (with the reason) are part of the result, and :func:`trend_summary` says it in one line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.cmr.common import (
    STATUS_ALL_FEASIBLE,
    STATUS_NO_ROOT,
    STATUS_OK,
    STATUS_TOL_OVERRULED,
    Unmet,
    domain_reason,
    evaluate,
    is_number,
    law_of,
    size_json,
    tolerance_reason,
    unmet_criteria,
)
from mixlaw.decide.cmr.feasibility import RatioLawFit
from mixlaw.errors import FitError, InputError
from mixlaw.laws.cmr_law import CMRLaw

__all__ = [
    "SizeCMR",
    "CMRDecision",
    "Reading",
    "BracketReason",
    "Bracket",
    "observed_bracket",
    "cmr_size_trend",
    "trend_exclusion",
    "trend_summary",
]


class Reading(StrEnum):
    """What the headline CMR of a size is."""

    CMR_LAW = "cmr_law"
    """The CMR law at the budget (the turning-point constraint binds), inside the observed bracket."""
    TOLERANCE = "tolerance_binding"
    """The tolerance boundary (ε binds before the turning point does), inside the observed bracket."""
    BRACKET = "bracket"
    """No point value: the CMR lies between the largest feasible and the smallest infeasible trained ratio."""
    LOWER_BOUND = "lower_bound"
    """Every trained ratio is feasible: the CMR is at least the largest one tried."""
    UPPER_BOUND = "upper_bound"
    """No trained ratio is feasible: the CMR is below the smallest one tried."""
    TOLERANCE_ONLY = "tolerance_only"
    """Without the turning-point requirement (increments relative to a control): the tolerance boundary."""


class BracketReason(StrEnum):
    """Why a headline is the observed bracket rather than a point value."""

    NO_CMR_LAW = "no_cmr_law"
    """Too few ratios with a turning point to fit the three-parameter CMR law."""
    ABOVE = "law_above_bracket"
    """The law's value reaches a ratio the table marks infeasible."""
    BELOW = "law_below_bracket"
    """The law's value lies below a ratio the table marks feasible."""


@dataclass(frozen=True)
class Bracket:
    """The observed bracket of the CMR: ``lo`` = largest trained ratio marked feasible below ``hi``, ``hi`` =
    smallest trained ratio marked infeasible (``None``: no such ratio); ``detached`` lists feasible ratios above
    ``hi`` (a non-contiguous feasible set: noisy fits)."""

    lo: float | None
    hi: float | None
    detached: tuple[float, ...] = ()

    def contains(self, value: float) -> bool:
        """Whether ``value`` agrees with the table: ``lo ≤ value < hi`` (a value at ``hi`` would call an infeasible
        ratio the CMR)."""
        return (self.lo is None or value >= self.lo - 1e-12) and (self.hi is None or value < self.hi - 1e-12)

    def clip(self, value: float) -> float:
        """``value`` moved into ``[lo, hi]`` (for resamples: every resample's CMR agrees with its own table)."""
        v = value if self.lo is None else max(value, self.lo)
        return v if self.hi is None else min(v, self.hi)

    def text(self) -> str:
        """``"between 0.25 and 0.5"``, ``"≥ 0.75"`` or ``"< 0.125"``."""
        if self.lo is not None and self.hi is not None:
            return f"between {self.lo:g} and {self.hi:g}"
        if self.lo is not None:
            return f"≥ {self.lo:g}"
        if self.hi is not None:
            return f"< {self.hi:g}"
        return "undetermined"


def observed_bracket(ratios: list[tuple[float, bool]]) -> Bracket:
    """The bracket of ``(ratio, feasible)`` verdicts of the candidate ratios (``R > 0`` with fitted curves)."""
    cand = sorted(ratios)
    bad = [r for r, f in cand if not f]
    hi = bad[0] if bad else None
    below = [r for r, f in cand if f and (hi is None or r < hi)]
    detached = tuple(r for r, f in cand if f and hi is not None and r > hi)
    return Bracket(max(below) if below else None, hi, detached)


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
    outcome: str = STATUS_OK
    weak_reasons: list[str] = field(default_factory=list)
    cmr_law_at_budget_raw: float | None = None
    model_free_crossing: float | None = None
    model_free_status: str = "not computed"
    control_reading: dict[str, Any] | None = None
    reading: Reading = Reading.BRACKET
    bracket: tuple[float | None, float | None] = (None, None)
    bracket_reason: BracketReason | None = None
    epsilon: float | None = None

    def answer(self) -> str:
        """The headline in words, agreeing with the per-ratio table: ``CMR 0.52``, ``CMR between 0.25 and 0.5``,
        ``CMR ≥ 0.75`` (every ratio tried is feasible) or ``CMR < 0.125`` (none is)."""
        br = Bracket(*self.bracket)
        if self.reading is Reading.LOWER_BOUND and self.cmr is not None:
            return f"CMR ≥ {self.cmr:g} (every ratio tried is feasible)"
        if self.cmr is not None:
            return f"CMR {self.cmr:.2f}"
        if self.reading is Reading.UPPER_BOUND and br.hi is not None:
            return f"CMR < {br.hi:g} (no ratio tried is feasible)"
        if self.reading is Reading.BRACKET and (br.lo is not None or br.hi is not None):
            return f"CMR {br.text()}"
        return "no CMR"

    def sentence(self, domain: str) -> str:
        """The decision in one sentence, e.g. ``legal: CMR 0.61 [0.60, 0.64] at 200k parameters, 300k CPT tokens,
        ε = 0.05; status ok; tolerance boundary (largest share within ε at the budget) 0.64``."""
        from mixlaw.fmt import fmt_size, fmt_tokens

        val = self.answer()
        ci = f" [{self.ci[0]:.2f}, {self.ci[1]:.2f}]" if self.ci else ""
        if self.n_bootstrap and self.cmr is not None:  # the resamples behind the interval (none silently dropped)
            ci += f" ({self.n_bootstrap_failed}/{self.n_bootstrap} resamples unusable)"
        why = f" ({'; '.join(self.weak_reasons)})" if self.weak_reasons else ""
        eps = "" if self.epsilon is None else f", ε = {self.epsilon:g}"
        tb = ""
        if self.reading is not Reading.TOLERANCE_ONLY and self.tolerance_boundary is not None:
            tb = f"; tolerance boundary (largest share within ε at the budget) {self.tolerance_boundary:.2f}"
        return (f"{domain}: {val}{ci} at {fmt_size(self.n_params)} parameters, {fmt_tokens(self.budget_tokens)} "
                f"CPT tokens{eps}; status {self.status}{why}{tb}")  # fmt: skip

    def cmr_at(self, tokens: np.ndarray | float) -> np.ndarray:
        """CMR-law prediction at other budgets (tokens); NaN-free: raises if the law was not fitted."""
        if self.cmr_law is None:
            raise FitError(f"no CMR law for size {self.n_params}: {self.status}")
        law = law_of("cmr_law", token_unit=self.token_unit)
        # shares are shares: the law is clipped to [0, 1] (the status says when the budget's value was clipped)
        return np.clip(evaluate(law, {"tokens": np.asarray(tokens, dtype=np.float64)}, self.cmr_law), 0.0, 1.0)

    def cmr_at_band(self, tokens: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray] | None:
        """Band of the CMR law over bootstrap resamples (None without bootstrap): the percentile band, widened
        where needed to ``law ± t(B−1)·sd`` of the resampled laws, as the CMR's own interval
        (:func:`~mixlaw.fit.uncertainty.from_draws.t_widened_interval`: a percentile band from a few resamples is
        too narrow); shares clipped to [0, 1]."""
        if not self.bootstrap_cmr_law:
            return None
        law = law_of("cmr_law", token_unit=self.token_unit)
        curves = np.array([evaluate(law, {"tokens": tokens}, p) for p in self.bootstrap_cmr_law])
        a = (1 - level) / 2
        curves = np.clip(curves, 0.0, 1.0)
        lo, hi = np.quantile(curves, a, axis=0), np.quantile(curves, 1 - a, axis=0)
        if self.cmr_law is not None and curves.shape[0] >= 3:
            from scipy.stats import t as student_t

            point = np.clip(evaluate(law, {"tokens": tokens}, self.cmr_law), 0.0, 1.0)
            half = float(student_t.ppf(1 - a, curves.shape[0] - 1)) * np.std(curves, axis=0, ddof=1)
            lo, hi = np.clip(np.minimum(lo, point - half), 0.0, 1.0), np.clip(np.maximum(hi, point + half), 0.0, 1.0)
        return lo, hi

    def t0_for_ratio(self, ratio: float) -> float | None:
        """Critical token volume of an unseen ratio by the inverse CMR law (tokens; None if undefined)."""
        if self.cmr_law is None:
            return None
        v = float(CMRLaw(token_unit=self.token_unit).t0_tokens(ratio, self.cmr_law))
        return v if math.isfinite(v) else None

    def assess_ratio(self, ratio: float, epsilon: float) -> dict[str, Any]:
        """An unseen domain share at this size and budget: ratio-law losses, tolerance, T0 and feasibility.

        The general and domain loss at the budget come from the ratio laws; ``T0`` from the inverse CMR law.
        Outside the trained ratios both are extrapolations (``extrapolated``). Feasible by the one rule of the
        per-ratio table (:func:`~mixlaw.decide.cmr.common.unmet_criteria`).
        """
        if not 0.0 <= ratio <= 1.0:
            raise InputError(f"a domain share must lie in [0, 1], got {ratio}")
        out: dict[str, Any] = {"n_params": size_json(self.n_params), "ratio": float(ratio)}
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
            for k in unmet_criteria(dg, dd, epsilon, t0 <= self.budget_tokens):
                if k is Unmet.TOLERANCE:
                    reasons.append(tolerance_reason(dg, epsilon))
                elif k is Unmet.DOMAIN_GAIN and dd is not None:
                    reasons.append(domain_reason(dd))
                else:
                    reasons.append(f"{STATUS_NO_ROOT}: T0 = {t0:.4g} tokens > budget {self.budget_tokens:.4g}")
        out["feasible"] = not reasons
        out["reason"] = "; ".join(reasons) if reasons else "feasible"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_params": size_json(self.n_params),
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
            "outcome": self.outcome,
            "weak_reasons": list(self.weak_reasons),
            "cmr_law_at_budget_raw": self.cmr_law_at_budget_raw,
            "model_free_crossing": self.model_free_crossing,
            "model_free_status": self.model_free_status,
            "control_reading": self.control_reading,
            "epsilon": self.epsilon,
            "reading": self.reading.value,
            "bracket": list(self.bracket),
            "bracket_reason": None if self.bracket_reason is None else self.bracket_reason.value,
        }


@dataclass(frozen=True)
class CMRDecision:
    """Everything :func:`critical_mixture_ratio` decided, per size, with its settings."""

    sizes: list[SizeCMR]
    settings: dict[str, Any]
    increments: pd.DataFrame
    sensitivity: pd.DataFrame
    trend: dict[str, Any] | None
    validation: dict[str, Any] | None = None

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
                {"n_params": size_json(s.n_params), "token_unit": s.token_unit, "params": s.cmr_law} for s in self.sizes
            ],
            "sensitivity": self.sensitivity.replace({np.nan: None}).to_dict(orient="records"),
            "trend": self.trend,
            "settings": self.settings,
            "validation": self.validation,
        }


def trend_exclusion(s: SizeCMR, reading: str = "headline") -> str | None:
    """Why a size does not feed the CMR-vs-size trend (None: it does).

    The trend compares like with like: only sizes whose CMR is the decision's full reading (CMR law or binding
    tolerance boundary of a ratio law that agrees with the observations) feed it; a lower bound (every ratio
    feasible), a fallback (too few ratios for the CMR law, the model-free crossing overruling the ratio law) or
    no CMR does not. ``reading="tolerance"``: the tolerance-only reading (the tolerance boundary), which every
    size whose observations bracket ε has."""
    if not is_number(s.n_params):
        return "size is not a number"
    if reading == "tolerance":
        if s.model_free_status != STATUS_OK or s.tolerance_boundary is None:
            return "observations at the budget do not bracket ε"
        return None
    if s.cmr is None and s.reading is Reading.BRACKET:
        return f"CMR only bracketed by the trained ratios ({Bracket(*s.bracket).text()})"
    if s.cmr is None:
        return "no CMR"
    if s.outcome == STATUS_ALL_FEASIBLE:
        return "CMR is a lower bound (every ratio feasible)"
    if s.outcome.startswith("too few"):
        return "too few ratios for the CMR law"
    if s.tolerance_status == STATUS_TOL_OVERRULED:
        return "fell back to the model-free crossing"
    return None


def cmr_size_trend(
    sizes: Sequence[SizeCMR], boot: dict[Any, np.ndarray] | None = None, *, level: float = 0.95,
    reading: str = "headline",
) -> dict[str, Any] | None:  # fmt: skip
    """CMR vs model size: least-squares line ``CMR = a + b · log10(N)`` with a bootstrap band.

    Only sizes that :func:`trend_exclusion` accepts feed the line (``sizes``; the others are listed in
    ``left_out`` with the reason). The band refits the line on paired resamples (resample ``i`` of every size);
    needs ≥ 2 sizes.
    """
    use = [s for s in sizes if trend_exclusion(s, reading) is None]
    val = (lambda s: s.tolerance_boundary) if reading == "tolerance" else (lambda s: s.cmr)
    pts = [(float(s.n_params), float(val(s))) for s in use]
    if len(pts) < 2:
        return None
    x = np.log10([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    b, a = np.polyfit(x, y, 1)
    left = [{"n_params": size_json(s.n_params), "reason": why} for s in sizes
            if (why := trend_exclusion(s, reading)) is not None]  # fmt: skip
    out: dict[str, Any] = {"form": "cmr = a + b*log10(n_params)", "a": float(a), "b": float(b), "reading": reading,
                           "n_sizes": len(pts), "sizes": [size_json(s.n_params) for s in use], "left_out": left,
                           "band": None}  # fmt: skip
    if boot and reading == "headline":
        keys = [s.n_params for s in use]
        if all(k in boot for k in keys):
            m = min(len(boot[k]) for k in keys)
            if m >= 10:
                grid = np.linspace(x.min(), x.max(), 50)
                preds = []
                for i in range(m):
                    bb, ab = np.polyfit(x, np.array([boot[k][i] for k in keys]), 1)
                    preds.append(ab + bb * grid)
                q = (1 - level) / 2
                arr = np.array(preds)
                out["band"] = {"n_params": (10**grid).tolist(), "lo": np.quantile(arr, q, axis=0).tolist(),
                               "hi": np.quantile(arr, 1 - q, axis=0).tolist()}  # fmt: skip
    return out


def trend_summary(sizes: Sequence[SizeCMR], trend: dict[str, Any] | None) -> str:
    """One line: the size trend and which sizes fed it (or why there is none)."""
    from mixlaw.fmt import fmt_size

    left = [(s, why) for s in sizes if (why := trend_exclusion(s)) is not None]
    gone = "; ".join(f"{fmt_size(s.n_params)} ({why})" for s, why in left)
    if trend is None:
        n_ok = len(sizes) - len(left)
        return (f"no size trend: {n_ok} size(s) with a comparable CMR (need ≥ 2)"
                + (f"; left out: {gone}" if gone else ""))  # fmt: skip
    used = ", ".join(fmt_size(v) for v in trend.get("sizes", []))
    return (f"size trend CMR = {trend['a']:.4f} + {trend['b']:.4f}·log10(N) from {trend['n_sizes']} sizes ({used})"
            + (f"; left out: {gone}" if gone else ""))  # fmt: skip
