"""The decision of one size from its fitted curves: per-ratio verdicts, the CMR law, the headline.

Phases, so that bootstrap resamples can be batched: :func:`ratio_rows` (per-ratio T0 and verdict, checked
against the observations), :func:`fit_cmr_laws` (the CMR law through ``(T0(R_j), R_j)`` of many decisions in one
solve), :func:`headline` (CMR, source and status).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixlaw.decide.cmr.common import (
    MIN_RATIOS_CMR_LAW,
    STATUS_ALL_FEASIBLE,
    STATUS_LAW_ABOVE_1,
    STATUS_LAW_BELOW_0,
    STATUS_NO_FEASIBLE,
    STATUS_NO_ROOT,
    STATUS_OK,
    STATUS_TOL_OVERRULED,
    Unmet,
    domain_reason,
    evaluate,
    law_of,
    num,
    size_json,
    status_too_few,
    tolerance_reason,
    unmet_criteria,
)
from mixlaw.decide.cmr.curves import SizeFits, curve_laws
from mixlaw.decide.cmr.feasibility import (
    T0_FALLING,
    T0_ROOT,
    RatioLawFit,
    T0Result,
    critical_tokens,
    critical_tokens_batch,
    model_free_crossing,
    observed_shape,
    tolerance_boundary,
)
from mixlaw.decide.cmr.result import Bracket, BracketReason, Reading, observed_bracket
from mixlaw.fit.solver.profiled import fit_profiled
from mixlaw.laws import Law
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

T0_OBSERVED = "observed peak"
#: A fitted turning point up to this factor past the last evaluation still feeds the CMR law (beyond it the peak
#: of a curve that is still rising is an extrapolation, biased early).
T0_REACH = 2.5
#: A turning point fitted more than this factor past the last evaluation feeds the CMR law, when resampled, only if
#: the resamples pin it down (:data:`SIGMA_PAST`): an extrapolated peak is biased early and selected early (one
#: fitted past :data:`T0_REACH` is dropped, one fitted before it kept). Measured on simulated grids at noise 1e-4
#: (docs/cmr.md): the peak of R = 0.75 fitted at 1.9× the last evaluation came out 12 % early on average, with a
#: resampled spread of 0.145 in log T0, and the law through it sat 0.01–0.03 above the truth.
T0_NEAR = 1.2
#: Largest resampled spread (sd of log T0) of a turning point past :data:`T0_NEAR` × the last evaluation that still
#: feeds the CMR law (at noise 1e-5 such peaks are pinned to ~1 %, and the law through them extrapolates well).
SIGMA_PAST = 0.05
#: Share of the resamples in which a turning point past :data:`T0_NEAR` × the last evaluation must feed the law
#: for it to count as pinned down (:func:`t0_weights`).
PRESENT_MIN = 0.9

__all__ = ["Decision", "ratio_rows", "cmr_points", "fit_cmr_laws", "t0_weights", "headline", "cmr_law"]


@dataclass(frozen=True)
class Decision:
    ratios: list[dict[str, Any]]
    cmr: float | None
    cmr_source: str
    status: str
    cmr_discrete: float | None
    cmr_law_params: dict[str, float] | None
    cmr_law_at_budget: float | None
    cmr_law_at_budget_raw: float | None
    tolerance_boundary: float | None
    tolerance_status: str
    ratio_law_general: RatioLawFit | None
    ratio_law_domain: RatioLawFit | None
    notes: list[str]
    reading: Reading = Reading.BRACKET
    bracket: Bracket = Bracket(None, None)
    bracket_reason: BracketReason | None = None
    cmr_unbracketed: float | None = None


def cmr_law(token_unit: float, name: str = "cmr_law") -> Law:
    """The CMR law from the registry, validated: input ``tokens``, an inverse ``t0_tokens``."""
    law = law_of(name, token_unit=token_unit)
    if tuple(law.inputs) != ("tokens",) or not callable(getattr(law, "t0_tokens", None)):
        from mixlaw.errors import InputError

        raise InputError(f"law '{name}' cannot be a CMR law: it needs input 'tokens' and a t0_tokens inverse")
    return law


def ratio_rows(
    sf: SizeFits,
    *,
    epsilon: float,
    lagrange_mult: float,
    t0_search_factor: float,
    t0_cache: dict[tuple[float, float], T0Result] | None = None,
    t0_given: dict[float, T0Result] | None = None,
    require_turn: bool = True,
) -> list[dict[str, Any]]:
    """Per trained ratio: fitted increments at the budget, T0, the observed shape and the verdict.

    ``require_turn=False`` (increments relative to the control) judges tolerance and domain gain only: relative to
    the control a turning point means the gap to it closing, which the CMR paper's criterion does not ask for."""
    dom_law, gen_law = curve_laws(sf.token_unit, sf.pin_zero, sf.laws)
    budget = sf.budget_tokens
    rows: list[dict[str, Any]] = []
    for c in sf.curves:
        row: dict[str, Any] = {
            "n_params": size_json(sf.size), "ratio": c.ratio, "run_ids": list(c.run_ids), "t0_tokens": None,
            "t0_status": None, "dloss_general_at_budget": None, "dloss_domain_at_budget": None,
            "observed_dloss_general_at_budget": c.obs_gen_at_budget,
            "observed_dloss_domain_at_budget": c.obs_dom_at_budget, "within_tolerance": None, "feasible": False,
            "reason": "", "r2_general": num(c.r2_gen), "r2_domain": num(c.r2_dom), "fit_general": c.gen_status,
            "fit_domain": c.dom_status, "observed_peak_tokens": None, "observed_still_rising": None,
            "rms_general": num(math.sqrt(c.mse_gen)) if c.mse_gen >= 0 else None,
            "noise_at_budget": None if sf.noise is None else num(sf.noise.sigma.get(c.ratio)),
            "eval_jitter": None if sf.noise is None else num(sf.noise.jitter.get(c.ratio)),
        }  # fmt: skip
        if c.gen_params is None or c.dom_params is None:
            row["reason"] = c.error or "fit failed"
            rows.append(row)
            continue
        g_b = float(evaluate(gen_law, {"tokens": np.array([budget])}, c.gen_params)[0])
        d_b = float(evaluate(dom_law, {"tokens": np.array([budget])}, c.dom_params)[0])
        row["dloss_general_at_budget"], row["dloss_domain_at_budget"] = g_b, d_b
        key = (float(lagrange_mult), c.ratio)
        if t0_given is not None and c.ratio in t0_given:
            t0 = t0_given[c.ratio]
        elif t0_cache is not None and key in t0_cache:
            t0 = t0_cache[key]
        else:
            t0 = critical_tokens(dom_law, c.dom_params, gen_law, c.gen_params, lagrange_mult=lagrange_mult,
                                 t_lo=c.t_lo, t_hi=max(budget, c.t_last) * t0_search_factor)  # fmt: skip
            if t0_cache is not None:
                t0_cache[key] = t0
        upto = c.tokens <= budget * 1.005
        shape = observed_shape(c.tokens[upto], c.obs_gen[upto], math.sqrt(c.mse_gen) if c.mse_gen >= 0 else 0.0)
        row["observed_peak_tokens"], row["observed_still_rising"] = shape.peak_tokens, shape.still_rising
        t0_tok, t0_status = t0.t0_tokens, t0.status
        # Tolerance and domain gain are judged on the observed increments where an evaluation sits at the budget
        # (the same values the ratio law interpolates), so a verdict cannot contradict the data it summarises.
        g_obs, d_obs = c.obs_gen_at_budget, c.obs_dom_at_budget
        g_tol = g_b if g_obs is None else float(g_obs)
        d_tol = d_b if d_obs is None else float(d_obs)
        unmet = unmet_criteria(g_tol, d_tol, epsilon, None)  # the turning point is judged below, with the data
        reasons: list[tuple[Unmet, str]] = []
        if Unmet.TOLERANCE in unmet:
            fit_says = f" (observed; the curve fit gives {g_b:+.4f})" if g_obs is not None and g_b <= epsilon else ""
            reasons.append((Unmet.TOLERANCE, tolerance_reason(g_tol, epsilon, fit_says)))
        if Unmet.DOMAIN_GAIN in unmet:
            reasons.append((Unmet.DOMAIN_GAIN, domain_reason(d_tol)))
        turn = ""
        if t0_status == T0_ROOT and t0_tok is not None and t0_tok <= budget:
            if shape.still_rising and shape.rising_at_end:
                reasons.append((Unmet.TURN, f"observed general loss still rising at the budget (+{shape.rise:.4f} "
                                f"near the end): the fitted turning point at {t0_tok:.4g} tokens is not in the "
                                "data"))  # fmt: skip
                t0_status = "root contradicted by the observations"
        elif t0_status == T0_FALLING:
            if shape.never_rises:
                turn = " (general loss never rises above its start)"
            elif shape.turned and shape.peak_tokens <= budget:
                t0_tok, t0_status = shape.peak_tokens, T0_OBSERVED
                turn = " (turning point from the observed peak; the fitted curve falls from its first point)"
            else:
                t0_tok, t0_status = None, "contradicted by the observations"
                reasons.append((Unmet.TURN, f"observed general loss still rising at the budget (+{shape.rise:.4f}); "
                                "the fitted curve falls from its first point"))  # fmt: skip
        elif shape.turned and shape.peak_tokens < budget:
            # the data turned inside the budget although the fitted curve does not: the model-free peak decides
            t0_tok, t0_status = shape.peak_tokens, T0_OBSERVED
            turn = " (turning point from the observed peak; the fitted curve misses it)"
        elif t0_tok is None:
            reasons.append((Unmet.TURN, f"{STATUS_NO_ROOT} (still rising up to {t0_search_factor:g}× the budget)"))
        else:
            reasons.append((Unmet.TURN, f"{STATUS_NO_ROOT}: T0 = {t0_tok:.4g} tokens > budget {budget:.4g}"))
        row["t0_tokens"], row["t0_status"] = t0_tok, t0_status
        # A turning point feeds the CMR law only where the evaluations pin it down: not at the first evaluation
        # (the peak may lie anywhere before it: censored) and not far past the last one (an extrapolated peak of a
        # curve still rising is biased towards the data; laws.md §6.7.9)
        t_first = float(np.min(c.tokens[c.tokens > 0])) if (c.tokens > 0).any() else 0.0
        row["t0_in_data"] = (t0_tok is not None and t0_tok <= T0_REACH * c.t_last
                             and not (t0_status == T0_OBSERVED and t0_tok <= t_first))  # fmt: skip
        row["t0_past_data"] = t0_tok is not None and t0_tok > T0_NEAR * c.t_last
        row["within_tolerance"] = bool(g_tol <= epsilon)
        if not require_turn:  # relative to the control: tolerance and domain gain only (the docstring)
            reasons = [(k, x) for k, x in reasons if k is not Unmet.TURN]
        texts = [x for _, x in reasons]
        if c.ratio == 0.0:  # R = 0 (general data only) is the control run, not a candidate share
            texts = ["control run (R = 0: no domain data)", *texts]
        row["feasible"] = not texts
        row["reason"] = "; ".join(texts) if texts else "feasible" + turn
        rows.append(row)
    return rows


def t0_for_resamples(
    sfs: list[SizeFits], *, lagrange_mult: float, t0_search_factor: float
) -> list[dict[float, T0Result]]:
    """T0 of every ratio of many resamples of one size: one vectorised solve per ratio (see ratio_rows)."""
    if not sfs:
        return []
    sf = sfs[0]
    dom_law, gen_law = curve_laws(sf.token_unit, sf.pin_zero, sf.laws)
    out: list[dict[float, T0Result]] = [{} for _ in sfs]
    for i, c in enumerate(sf.curves):
        ok = [b for b, s in enumerate(sfs) if s.curves[i].gen_params is not None and s.curves[i].dom_params is not None]
        doms: list[Any] = [sfs[b].curves[i].dom_params for b in ok]
        gens: list[Any] = [sfs[b].curves[i].gen_params for b in ok]
        res = critical_tokens_batch(dom_law, doms, gen_law, gens, lagrange_mult=lagrange_mult, t_lo=c.t_lo,
                                    t_hi=max(sf.budget_tokens, c.t_last) * t0_search_factor)  # fmt: skip
        for b, r in zip(ok, res, strict=True):
            out[b][c.ratio] = r
    return out


def cmr_points(rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """``(T0(R_j), R_j)`` of the candidate ratios with a turning point the data support."""
    return [(r["t0_tokens"], r["ratio"]) for r in rows
            if r["t0_status"] in (T0_ROOT, T0_OBSERVED) and r["ratio"] > 0 and r.get("t0_in_data", True)]  # fmt: skip


def fit_cmr_laws(
    law: Law, points: list[list[tuple[float, float]]], weights: Mapping[float, float] | None = None,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> list[dict[str, float] | None]:  # fmt: skip
    """The CMR law ``R = α4 T^s4 + β3`` through each list of points, all in one profiled solve.

    ``weights`` (per ratio; default 1) weight the least squares: :func:`t0_weights` gives ``1/σ²`` of each
    ratio's turning point, so that a T0 the data barely pin down cannot drag the law. A fit whose law falls with
    ``T`` (``α4·s4 < 0``: more tokens allowing a smaller share) is dropped: the CMR law must be increasing; its
    exponent is searched up to :data:`S4_MAX` = 1 only, so that it is also concave (every published CMR law is:
    laws.md §6.6, s4 = 0.27, 0.14, −0.15, −0.42): a convex fit through noisy turning points would extrapolate a
    share that grows faster and faster with the budget. ``solver``: the cap of the profiled search."""
    out: list[dict[str, float] | None] = [None] * len(points)
    if weights is not None:  # a ratio of weight 0 is out of the law (t0_weights: an extrapolated, loose peak)
        points = [[q for q in p if float(weights.get(q[1], 1.0)) > 0] for p in points]
    use = [i for i, p in enumerate(points) if len({q[1] for q in p}) >= MIN_RATIOS_CMR_LAW]
    if not use:
        return out
    n = max(len(points[i]) for i in use)
    T = np.ones((len(use), n))
    R = np.zeros((len(use), n))
    W = np.zeros((len(use), n))
    for k, i in enumerate(use):
        for j, (t, r) in enumerate(points[i]):
            T[k, j], R[k, j] = t, r
            W[k, j] = 1.0 if weights is None else float(weights.get(r, 1.0))
    sep = _IncreasingConcave(law)
    pf = fit_profiled(sep, {"tokens": T}, R, weights=W, solver=solver)  # type: ignore[arg-type]
    unit = float(getattr(law, "token_unit", 1.0))
    for _ in range(EIV_ROUNDS):
        # errors in T0, not in R (R is the trained share, exact): a T0 error of σ in log T moves the point by
        # slope·σ in R, slope = dR/dlog T = α4·s4·T^s4 at the point (delta method), so R-space weights are
        # w_logT / slope²; refitted until the slopes settle (a few rounds: they change little)
        Wk = W.copy()
        for k in range(len(use)):
            p = pf.params[k]
            if p is None:
                continue
            slope = np.abs(float(p["alpha4"]) * float(p["s4"]) * np.power(T[k] / unit, float(p["s4"])))
            slope = np.maximum(slope, SLOPE_FLOOR * max(float(slope[W[k] > 0].max(initial=0.0)), 1e-12))
            Wk[k] = W[k] / slope**2
            Wk[k] /= Wk[k][W[k] > 0].mean() if (W[k] > 0).any() else 1.0
        pf = fit_profiled(sep, {"tokens": T}, R, weights=Wk, solver=solver)  # type: ignore[arg-type]
    for k, i in enumerate(use):
        p = pf.params[k]
        if p is not None and float(p["alpha4"]) * float(p["s4"]) < 0:
            p = None
        out[i] = p
    return out


#: Reweighting rounds of the CMR-law fit from log-T0 errors to R-space residuals (:func:`fit_cmr_laws`).
EIV_ROUNDS = 2
#: Smallest slope dR/dlog T in the reweighting, as a fraction of the largest among the points (bounds the weights).
SLOPE_FLOOR = 0.05

#: Largest exponent of the CMR law the decision searches (s4 ≤ 1 with α4·s4 > 0: increasing and concave in T).
S4_MAX = 1.0


class _IncreasingConcave:
    """The CMR law with its exponent design cut at :data:`S4_MAX` (everything else delegated)."""

    def __init__(self, law: Law) -> None:
        self._law = law

    def profile_points(self) -> dict[str, np.ndarray]:
        pts = self._law.profile_points()  # type: ignore[attr-defined]
        return {"s4": np.asarray(pts["s4"])[np.asarray(pts["s4"]) <= S4_MAX]}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._law, name)


#: Floor of a turning point's relative uncertainty in the CMR law's weights (1 % of T0).
T0_SIGMA_FLOOR = 0.01


def t0_weights(rows_list: Sequence[list[dict[str, Any]]]) -> dict[float, float]:
    """Per ratio, ``1/(σ² + floor²)`` with ``σ`` the spread of ``log T0`` over resamples (``rows_list``, one per
    resample) where the ratio's turning point feeds the CMR law; a ratio whose turning point is there in fewer
    than a tenth of the resamples gets ``σ = 1`` (a factor e: next to no weight), and one whose peak lies past
    :data:`T0_NEAR` × its last evaluation in most resamples gets 0 (out of the law) unless ``σ ≤`` :data:`SIGMA_PAST`
    and it is there in at least :data:`PRESENT_MIN` of the resamples (an extrapolated peak is biased early, more so
    the looser it is)."""
    vals: dict[float, list[float]] = {}
    past: dict[float, int] = {}
    for rows in rows_list:
        far = {r["ratio"] for r in rows if r.get("t0_past_data")}
        for t, r in cmr_points(rows):
            vals.setdefault(r, []).append(math.log(t))
            past[r] = past.get(r, 0) + (r in far)
    out = {}
    need = max(3, len(rows_list) // 10)
    for r, v in vals.items():
        sd = float(np.std(v, ddof=1)) if len(v) >= need else 1.0
        # a peak mostly fitted past the data feeds the law only where the resamples pin it down (T0_NEAR): a
        # small spread, measured on (nearly) every resample: one that leaves the law's range (past T0_REACH, or no
        # root) in more than a tenth of them is censored, and the spread of the rest understates its own
        loose = sd > SIGMA_PAST or len(v) < PRESENT_MIN * len(rows_list)
        out[r] = 0.0 if 2 * past[r] > len(v) and loose else 1.0 / (sd**2 + T0_SIGMA_FLOOR**2)
    return out


def headline(
    sf: SizeFits,
    rows: list[dict[str, Any]],
    cmr_params: dict[str, float] | None,
    ratio_fits: tuple[RatioLawFit | None, RatioLawFit | None, str | None],
    epsilon: float,
    require_turn: bool = True,
) -> Decision:
    """The CMR of one size from its rows, CMR law and ratio laws (pure); without ``require_turn`` the CMR is
    the tolerance boundary."""
    budget = sf.budget_tokens
    notes: list[str] = []
    fitted = [r for r in rows if r["t0_status"] is not None]
    feas = [r["ratio"] for r in rows if r["feasible"]]
    cmr_discrete = max(feas) if feas else None
    n_pts = len({p[1] for p in cmr_points(rows)})
    if not require_turn:  # the tolerance-only reading has no use for the CMR law (its T0 are not turning points)
        cmr_params = None
    elif cmr_params is None:
        notes.append(f"CMR law not fitted: {n_pts} ratio(s) with a turning point, {status_too_few()}")
    raw = None
    if cmr_params is not None:
        raw = float(evaluate(cmr_law(sf.token_unit), {"tokens": np.array([budget])}, cmr_params)[0])
    at_budget = None if raw is None else min(max(raw, 0.0), 1.0)
    clip = STATUS_LAW_ABOVE_1 if raw is not None and raw > 1 else (STATUS_LAW_BELOW_0 if raw is not None and raw < 0
                                                                    else None)  # fmt: skip
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
        tol, tol_status = _within_observed_bracket(rows, tol, tol_status, epsilon, notes)
    cand = [r for r in fitted if r["ratio"] > 0]
    br = observed_bracket([(r["ratio"], bool(r["feasible"])) for r in cand])
    # max F = min(CMR law at the budget, tolerance boundary) (F = A ∩ {T0 ≤ T_max}; both laws monotone)
    vals = [v for v in (at_budget, tol) if v is not None]
    unbracketed = min(vals) if vals and at_budget is not None else None
    why: BracketReason | None = None
    if not require_turn:
        status, cmr, source = (STATUS_OK, tol, "tolerance boundary") if tol is not None else (
            STATUS_NO_FEASIBLE, None, "none")  # fmt: skip
        reading = Reading.TOLERANCE_ONLY
        unbracketed = tol
    elif not fitted or not feas:
        status = STATUS_NO_FEASIBLE
        if (
            cand
            and all(r["within_tolerance"] for r in cand)
            and not any(r["t0_tokens"] is not None and r["t0_tokens"] <= budget for r in cand)
        ):
            status = STATUS_NO_ROOT
        cmr, source, reading = None, "none", Reading.UPPER_BOUND
    elif br.hi is None:
        status, cmr, source = STATUS_ALL_FEASIBLE, cmr_discrete, "largest tried (lower bound)"
        reading = Reading.LOWER_BOUND
    elif unbracketed is not None and br.contains(unbracketed):
        if tol is not None and at_budget is not None and tol < at_budget:
            status, cmr, source, reading = STATUS_OK, tol, "tolerance boundary (binding)", Reading.TOLERANCE
        else:
            status, cmr, source, reading = STATUS_OK, at_budget, "CMR law at the budget", Reading.CMR_LAW
    else:
        # the table's verdicts bracket the CMR, and no law value agrees with them: the bracket is the answer
        status, cmr, source, reading = STATUS_BRACKET, None, "observed bracket", Reading.BRACKET
        if unbracketed is None:
            why, status = BracketReason.NO_CMR_LAW, status_too_few(MIN_RATIOS_CMR_LAW)
            notes.append(f"{status_too_few()} with a turning point ({n_pts}): no CMR law, so the CMR is only "
                         f"bracketed by the table: {br.text()}")  # fmt: skip
        else:
            what = "tolerance boundary" if tol is not None and tol < (at_budget or math.inf) else "CMR law"
            if br.hi is not None and unbracketed >= br.hi - 1e-12:
                why = BracketReason.ABOVE
                notes.append(f"the {what} gives {unbracketed:.3f} at the budget, but the table marks R = {br.hi:g} "
                             f"infeasible: the CMR is only bracketed, {br.text()}")  # fmt: skip
            else:
                why = BracketReason.BELOW
                notes.append(f"the {what} gives {unbracketed:.3f} at the budget, below R = {br.lo:g}, which the "
                             f"table marks feasible: the CMR is only bracketed, {br.text()}")  # fmt: skip
    if clip is not None and raw is not None:
        notes.append(_clip_note(clip, raw, br, require_turn))
    if br.detached:
        notes.append(f"R = {', '.join(f'{r:g}' for r in br.detached)} marked feasible above the infeasible "
                     f"R = {br.hi:g}: the bracket ends at the first infeasible ratio")  # fmt: skip
    sorted_feas = sorted(feas)
    all_sorted = sorted(r["ratio"] for r in rows if r["ratio"] > 0)
    if sorted_feas and sorted_feas != all_sorted[: len(sorted_feas)] and not br.detached:
        notes.append("feasible set is not contiguous from the smallest ratio (noisy fits?)")
    return Decision(
        ratios=rows, cmr=cmr, cmr_source=source, status=status, cmr_discrete=cmr_discrete, cmr_law_params=cmr_params,
        cmr_law_at_budget=at_budget, cmr_law_at_budget_raw=raw, tolerance_boundary=tol, tolerance_status=tol_status,
        ratio_law_general=rl_gen, ratio_law_domain=rl_dom, notes=notes, reading=reading, bracket=br,
        bracket_reason=why, cmr_unbracketed=unbracketed,
    )  # fmt: skip


#: Status of a headline that is the observed bracket (no law value agrees with the table, or no CMR law).
STATUS_BRACKET = "CMR bracketed by the trained ratios"


def _clip_note(clip: str, raw: float, br: Bracket, require_turn: bool) -> str:
    """The note of a CMR law clipped to a share, agreeing with the table: "every ratio tried is feasible" only when
    the table marks every trained ratio feasible."""
    out = f"{clip} (law value {raw:.3f}, clipped to {1 if raw > 1 else 0})"
    if not require_turn:
        return out
    if raw > 1 and br.hi is None and br.lo is not None:
        return out + ": every ratio tried is feasible"
    if raw < 0 and br.lo is None and br.hi is not None:
        return out + ": no ratio tried is feasible"
    marks = (f"R = {br.hi:g} infeasible" if raw > 1 else f"R = {br.lo:g} feasible")
    return out + f"; the table marks {marks}, so the law does not set the CMR here"




def _within_observed_bracket(
    rows: list[dict[str, Any]], tol: float | None, tol_status: str, epsilon: float, notes: list[str]
) -> tuple[float | None, str]:
    """The ratio law's tolerance boundary, unless the observations at the budget bracket the crossing of ε and
    the boundary lies outside that bracket: then the model-free crossing (a boundary must agree with the
    observations it interpolates; laws.md §6.1 fits the ratio law to exactly these points)."""
    obs = sorted((r["ratio"], r["observed_dloss_general_at_budget"]) for r in rows
                 if r["observed_dloss_general_at_budget"] is not None)  # fmt: skip
    above = [i for i, (_, y) in enumerate(obs) if y > epsilon]
    if tol is None or not above or above[0] == 0:
        return tol, tol_status
    j = above[0]
    lo, hi = obs[j - 1][0], obs[j][0]
    if lo <= tol <= hi:
        return tol, tol_status
    mf, _ = model_free_crossing(np.array([r for r, _ in obs]), np.array([y for _, y in obs]), epsilon)
    notes.append(f"ratio law's tolerance boundary {tol:.3f} lies outside the observed bracket [{lo:g}, {hi:g}] "
                 f"(R = {hi:g} observed {obs[j][1]:+.4f} > ε); the model-free crossing {mf:.3f} decides")  # fmt: skip
    return mf, STATUS_TOL_OVERRULED


def budget_values(sf: SizeFits, rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
