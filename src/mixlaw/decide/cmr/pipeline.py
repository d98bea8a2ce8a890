"""The critical-mixture-ratio pipeline per model size: fits, bootstrap, sensitivity, honest statuses."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.cmr.common import (
    BOOT_LOST_MAX,
    DEFAULT_EPSILONS,
    DEFAULT_LAMBDAS,
    R2_MIN,
    STATUS_OK,
    STATUS_TOL_OVERRULED,
    STATUS_WEAK,
    CMRSettings,
    input_ok,
    law_of,
    size_json,
)
from mixlaw.decide.cmr.curves import NOISE_FLOOR, SizeFits, bootstrap_size, fit_size
from mixlaw.decide.cmr.decision import (
    Decision,
    budget_values,
    cmr_law,
    cmr_points,
    fit_cmr_laws,
    headline,
    ratio_rows,
    t0_for_resamples,
    t0_weights,
)
from mixlaw.decide.cmr.feasibility import RatioLawFit, fit_ratio_law_batch, model_free_crossing, resolve_ratio_law
from mixlaw.decide.cmr.result import Reading, SizeCMR, cmr_size_trend, trend_exclusion, trend_summary
from mixlaw.fit.uncertainty.from_draws import BCInterval, bc_interval
from mixlaw.fit.uncertainty.from_draws import t_widened_interval as cmr_interval
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = ["decide_size", "cmr_size_trend", "choose_ratio_law", "RatioFits", "trend_exclusion", "trend_summary"]

RatioFits = tuple[RatioLawFit | None, RatioLawFit | None, str | None]
#: Ratio laws tried by ``ratio_law="auto"`` (the one that fits the end-of-budget increments best, in noise units).
AUTO_RATIO_LAWS = ("ratio_power", "ratio_exp", "ratio_power_linear")
#: A binding tolerance boundary is weak when its ratio law misses an end-of-budget point by more than this many
#: noise units (the measured noise of the ratio's end-of-budget increment, :mod:`.curves`).
MISFIT_MAX = 3.0
#: A ΔL_gen curve whose observed range is below this many evaluation-jitter units is at the noise level: it is
#: judged by its residual RMS (weak above :data:`RMS_MAX` × the jitter) instead of R² (meaningless there).
SIGNAL_SIGMAS = 5.0
RMS_MAX = 2.0


def _ratio_inputs(
    sf: SizeFits, rows_list: Sequence[list[dict[str, Any]]], sfs: Sequence[SizeFits], law: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str | None]:
    """Ratios and per-decision budget losses (general, domain) with weights, for a batched ratio fit.

    A weight is 0 where a decision has no value at a ratio, else ``1/σ²`` of the ratio's measured end-of-budget
    noise (:mod:`.curves`; normalised to mean 1): weighted least squares on the observations with their noise."""
    ratios = ratios_all = np.array([c.ratio for c in sf.curves])
    G = np.zeros((len(rows_list), ratios.size))
    D = np.zeros_like(G)
    W = np.zeros_like(G)
    sig = _noise(sf)
    inv = np.array([1.0 / sig[float(r)] ** 2 if float(r) in sig else 0.0 for r in ratios])
    inv = inv / inv[inv > 0].mean() if (inv > 0).any() else np.ones_like(inv)
    inv = np.where(inv > 0, inv, 1.0)
    for b, (s, rows) in enumerate(zip(sfs, rows_list, strict=True)):
        r, g, d = budget_values(s, rows)
        for rr, gg, dd in zip(r, g, d, strict=True):
            j = int(np.flatnonzero(ratios == rr)[0])
            G[b, j], D[b, j], W[b, j] = gg, dd, inv[j]
    note = None
    keep = input_ok(law_of(law), {"ratio": ratios})
    if not keep.all():
        ratios, G, D, W = ratios[keep], G[:, keep], D[:, keep], W[:, keep]
        note = f"R = {', '.join(f'{r:g}' for r in ratios_all[~keep])} left out of {law} (outside its domain)"
    return ratios, G, D, W, note


def ratio_fits_batch(
    sf: SizeFits, rows_list: Sequence[list[dict[str, Any]]], sfs: Sequence[SizeFits], law: str, c_method: str,
    fit_loss: str, dom_law: str | None = None, solver: SolverOptions = DEFAULT_SOLVER,
) -> tuple[list[RatioFits], str | None]:  # fmt: skip
    """The general and domain ratio laws of many decisions of one size (one solve per law, under ``solver``'s
    caps); the domain loss is fitted with ``dom_law`` (default ``law``), unweighted."""
    ratios, G, _, W, note = _ratio_inputs(sf, rows_list, sfs, law)
    dlaw = dom_law or law
    ratios_d, _, D, Wd, _ = _ratio_inputs(sf, rows_list, sfs, dlaw) if dlaw != law else (ratios, G, _, W, note)
    Wd = (Wd > 0).astype(np.float64)
    need, need_d = _min_ratios(law), _min_ratios(dlaw)
    if ratios.size < need or ratios_d.size < need_d:
        msg = f"ratio law not fitted: too few ratios to fit (need ≥ {max(need, need_d)}), got {ratios.size}"
        return [(None, None, msg)] * len(rows_list), note
    fg = fit_ratio_law_batch(ratios, G, law=law, weights=W, c_method=c_method, fit_loss=fit_loss, solver=solver)
    fd = fit_ratio_law_batch(ratios_d, D, law=dlaw, weights=Wd, c_method=c_method, fit_loss=fit_loss, solver=solver)
    out: list[RatioFits] = []
    for b in range(len(rows_list)):
        if int((W[b] > 0).sum()) < need or int((Wd[b] > 0).sum()) < need_d:
            out.append((None, None, f"ratio law not fitted: fewer than {max(need, need_d)} ratios at the budget"))
        elif fg[b] is None or fd[b] is None:
            out.append((None, None, "ratio law not fitted: the fit failed"))
        else:
            out.append((fg[b], fd[b], None))
    return out, note


def choose_domain_law(sf: SizeFits, rows: list[dict[str, Any]], ratio_law: str, general_law: str, c_method: str,
                      fit_loss: str, solver: SolverOptions = DEFAULT_SOLVER) -> str:  # fmt: skip
    """The domain loss's ratio law: ``auto`` picks, as for the general loss, the candidate with the smallest
    residual RMS per degree of freedom, in units of each ratio's ΔL_dom curve residual RMS (domain losses fall
    steeply from R = 0 and flatten: a shape the general loss's law need not have)."""
    if ratio_law != "auto":
        return general_law
    noise = {c.ratio: max(math.sqrt(c.mse_dom), NOISE_FLOOR) for c in sf.curves if math.isfinite(c.mse_dom)}
    best, best_z = general_law, math.inf
    for name in AUTO_RATIO_LAWS:
        (fits,), _ = ratio_fits_batch(sf, [rows], [sf], name, c_method, fit_loss, solver=solver)
        fd = fits[1]
        if fd is None:
            continue
        r, _, d = budget_values(sf, rows)
        ok = input_ok(law_of(name), {"ratio": r})
        z = [(dd - float(fd.predict(rr))) / noise.get(float(rr), NOISE_FLOOR)
             for rr, dd, k in zip(r, d, ok, strict=True) if k]  # fmt: skip
        dof = max(len(z) - len(law_of(name).param_names), 1)
        score = math.sqrt(sum(v * v for v in z) / dof) if z else math.inf
        if score < best_z - 1e-9:
            best, best_z = name, score
    return best


def _min_ratios(law: str) -> int:
    """Ratios a ratio law needs: its parameter count, and one more (a residual degree of freedom) beyond three
    parameters (a four-parameter law through four points would judge itself perfect)."""
    p = len(law_of(law).param_names)
    return p if p <= 3 else p + 1


def _noise(sf: SizeFits) -> dict[float, float]:
    """Per ratio, the noise of its observed end-of-budget ΔL_gen: measured (:mod:`.curves`) when known, else the
    ratio's ΔL_gen curve residual RMS."""
    if sf.noise is not None:
        return dict(sf.noise.sigma)
    return {c.ratio: max(math.sqrt(c.mse_gen), NOISE_FLOOR) for c in sf.curves if math.isfinite(c.mse_gen)}


def ratio_law_z(sf: SizeFits, rows: list[dict[str, Any]], fit: RatioLawFit | None) -> dict[float, float]:
    """Per ratio, (observed − ratio law) of the general loss at the budget in units of the ratio's noise."""
    if fit is None:
        return {}
    r, g, _ = budget_values(sf, rows)
    noise = _noise(sf)
    return {float(rr): (gg - float(fit.predict(rr))) / max(noise.get(float(rr), 0.0), NOISE_FLOOR)
            for rr, gg, ok in zip(r, g, input_ok(law_of(fit.law), {"ratio": r}), strict=True) if ok}  # fmt: skip


def ratio_law_misfit(sf: SizeFits, rows: list[dict[str, Any]], fit: RatioLawFit | None) -> float:
    """Largest |observed − ratio law| of the general loss at the budget, in units of each ratio's noise."""
    z = ratio_law_z(sf, rows, fit)
    return max(abs(v) for v in z.values()) if z else math.inf


def ratio_law_rms(sf: SizeFits, rows: list[dict[str, Any]], fit: RatioLawFit | None) -> float:
    """Residual RMS of the ratio law at the budget in noise units, per residual degree of freedom
    (``sqrt(Σ z² / (n − p))``; ``n − p`` floored at 1): about 1 when the law fits within the noise."""
    z = ratio_law_z(sf, rows, fit)
    if fit is None or not z:
        return math.inf
    dof = max(len(z) - len(law_of(fit.law).param_names), 1)
    return math.sqrt(sum(v * v for v in z.values()) / dof)


def choose_ratio_law(
    sf: SizeFits, rows: list[dict[str, Any]], ratio_law: str, c_method: str, fit_loss: str,
    scores: dict[str, float] | None = None, solver: SolverOptions = DEFAULT_SOLVER,
) -> str:  # fmt: skip
    """``auto``: the registered ratio law (of :data:`AUTO_RATIO_LAWS`) whose fit of the end-of-budget general
    loss has the smallest residual RMS in noise units per degree of freedom (:func:`ratio_law_rms`); a law with
    more than three parameters only with a residual degree of freedom to spare. Any other value is looked up in
    the registry. ``scores`` (when given) receives each candidate's RMS; ``solver``: the fits' caps."""
    if ratio_law != "auto":
        return resolve_ratio_law(ratio_law).name
    best, best_z = AUTO_RATIO_LAWS[0], math.inf
    for name in AUTO_RATIO_LAWS:
        (fits,), _ = ratio_fits_batch(sf, [rows], [sf], name, c_method, fit_loss, solver=solver)
        z = ratio_law_rms(sf, rows, fits[0])
        if scores is not None:
            scores[name] = z
        if z < best_z - 1e-9:
            best, best_z = name, z
    return best


def _same_source(point: Decision, boot: Decision) -> float | None:
    """The resample's CMR computed the way the point estimate was (so the interval describes that number), moved
    into the point estimate's observed bracket: no resample's CMR, and so no end of the interval, contradicts the
    per-ratio table printed beside it (its verdicts are the observations; the resamples spread the law values
    between them)."""
    if point.cmr is None:
        return None
    if point.reading is Reading.TOLERANCE_ONLY:
        return boot.tolerance_boundary
    if point.reading in (Reading.CMR_LAW, Reading.TOLERANCE):
        vals = [v for v in (boot.cmr_law_at_budget, boot.tolerance_boundary) if v is not None]
        if not vals:
            return None
        return float(point.bracket.clip(min(max(min(vals), 0.0), 1.0)))
    return boot.cmr_discrete


def _weak(sf: SizeFits, dec: Decision, n_boot: int, n_failed: int, misfit: float) -> list[str]:
    """Why a decision is weak (empty: it is not).

    Only the fits the reported number rests on count (by its :class:`Reading`): the curves whose T0 feed the CMR
    law (``CMR_LAW``), or the feasible trained ratios (``LOWER_BOUND``); for a tolerance boundary (``TOLERANCE``,
    ``TOLERANCE_ONLY``), the ratio law at the budget against its points. A bootstrap that lost more than
    :data:`BOOT_LOST_MAX` always counts.
    """
    out = []
    tolerance = dec.cmr is not None and dec.reading in (Reading.TOLERANCE, Reading.TOLERANCE_ONLY)
    if dec.reading is Reading.CMR_LAW:
        used = {r for _, r in cmr_points(dec.ratios)}
    elif dec.reading is Reading.LOWER_BOUND:
        used = {r["ratio"] for r in dec.ratios if r["feasible"]}
    else:
        used = set()
    cand = [c for c in sf.curves if c.ratio in used]
    for label, attr in (("ΔL_gen", "gen_status"), ("ΔL_dom", "dom_status")):
        bad = [c for c in cand if getattr(c, attr) != "converged"]
        if bad:
            kinds = sorted({getattr(c, attr) for c in bad})
            out.append(f"{label} fit {'/'.join(kinds)} at R = {', '.join(f'{c.ratio:g}' for c in bad)}")
    jit = sf.noise.jitter if sf.noise is not None else {}
    fin = [v for v in jit.values() if math.isfinite(v)]
    pooled = float(np.median(fin)) if fin else math.nan  # evaluation noise is much the same across ratios
    low, noisy = [], []
    for c in cand:
        sig = max(jit.get(c.ratio, math.nan), pooled)
        if math.isfinite(sig) and float(np.ptp(c.obs_gen)) < SIGNAL_SIGMAS * sig:
            # the curve's whole range is a few noise units: R² is meaningless, its residual RMS is judged
            if math.isfinite(c.mse_gen) and math.sqrt(c.mse_gen) > RMS_MAX * max(sig, NOISE_FLOOR):
                noisy.append(c)
        elif math.isfinite(c.r2_gen) and c.r2_gen < R2_MIN:
            low.append(c)
    if low:
        out.append(f"ΔL_gen R² < {R2_MIN:g} at R = {', '.join(f'{c.ratio:g}' for c in low)} "
                   f"(lowest {min(c.r2_gen for c in low):.2f})")  # fmt: skip
    if noisy:
        out.append(f"ΔL_gen residual RMS > {RMS_MAX:g}× the evaluation jitter on a curve within "
                   f"{SIGNAL_SIGMAS:g} noise units at R = {', '.join(f'{c.ratio:g}' for c in noisy)}")  # fmt: skip
    if n_boot and n_failed > BOOT_LOST_MAX * n_boot:
        out.append(f"{n_failed} of {n_boot} bootstrap resamples gave no CMR (> {BOOT_LOST_MAX:.0%})")
    if tolerance and dec.tolerance_status == STATUS_TOL_OVERRULED:
        out.append("the ratio law's tolerance boundary disagrees with the observations (model-free crossing used)")
    elif tolerance and misfit > MISFIT_MAX:
        out.append(f"the ratio law misses the end-of-budget general loss by up to {misfit:.1f}× its noise "
                   f"(> {MISFIT_MAX:g})")  # fmt: skip
    return out


def decide_size(
    inc: pd.DataFrame,
    size: Any,
    settings: CMRSettings,
    *,
    bootstrap: int,
    rng: np.random.Generator,
    sensitivity_lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    sensitivity_epsilons: Sequence[float] = DEFAULT_EPSILONS,
    progress: Callable[[int], None] | None = None,
) -> tuple[SizeCMR, list[dict[str, Any]], np.ndarray | None, list[RatioFits]]:
    """The decision of one size under ``settings``: point estimate, ``bootstrap`` resamples (batched), the λ × ε
    table."""
    epsilon, lagrange_mult, budget_tokens = settings.epsilon, settings.lagrange_mult, settings.budget_tokens
    c_method, fit_loss, level, solver = settings.c_method, settings.fit_loss, settings.level, settings.solver
    t0_search_factor, batched, ratio_law = settings.t0_search_factor, settings.batched, settings.ratio_law
    fit_notes: list[str] = []
    sf = fit_size(inc, size, budget_tokens, settings.token_unit, settings.pin_zero, fit_loss, sink=fit_notes,
                  solver=solver)  # fmt: skip
    law = cmr_law(sf.token_unit)
    t0c: dict[tuple[float, float], Any] = {}
    turn = "dloss_general_abs" not in inc.columns  # relative to the control: tolerance only (see ratio_rows)
    rows_at = partial(ratio_rows, t0_search_factor=t0_search_factor, require_turn=turn)  # the verdicts of a size
    rows = rows_at(sf, epsilon=epsilon, lagrange_mult=lagrange_mult, t0_cache=t0c)
    scores: dict[str, float] = {}
    rl_name = choose_ratio_law(sf, rows, ratio_law, c_method, fit_loss, scores=scores, solver=solver)
    rl_dom = choose_domain_law(sf, rows, ratio_law, rl_name, c_method, fit_loss, solver=solver)
    (rfit,), rl_note = ratio_fits_batch(sf, [rows], [sf], rl_name, c_method, fit_loss, rl_dom, solver)
    ci: tuple[float, float] | None = None
    tol_ci: tuple[float, float] | None = None
    boot_cmr = None
    boot_laws: list[dict[str, float]] = []
    boot_rfits: list[RatioFits] = []
    n_failed = 0
    wts: dict[float, float] | None = None
    if bootstrap > 0:
        bsfs = bootstrap_size(sf, bootstrap, rng, fit_loss, batched, solver)
        if batched:  # every resample's T0, CMR-law and ratio-law fits: one vectorised solve each
            bt0 = t0_for_resamples(bsfs, lagrange_mult=lagrange_mult, t0_search_factor=t0_search_factor)
            brows = [rows_at(b, epsilon=epsilon, lagrange_mult=lagrange_mult, t0_given=g)
                     for b, g in zip(bsfs, bt0, strict=True)]  # fmt: skip
            wts = t0_weights(brows)
            bparams = fit_cmr_laws(law, [cmr_points(r) for r in brows], wts, solver)
            boot_rfits, _ = ratio_fits_batch(sf, brows, bsfs, rl_name, c_method, fit_loss, rl_dom, solver)
        else:  # one resample at a time (reference for the batched path)
            brows = [rows_at(b, epsilon=epsilon, lagrange_mult=lagrange_mult) for b in bsfs]
            wts = t0_weights(brows)
            bparams = [fit_cmr_laws(law, [cmr_points(r)], wts, solver)[0] for r in brows]
            boot_rfits = [ratio_fits_batch(sf, [r], [b], rl_name, c_method, fit_loss, rl_dom, solver)[0][0]
                          for b, r in zip(bsfs, brows, strict=True)]  # fmt: skip
    (cparams,) = fit_cmr_laws(law, [cmr_points(rows)], wts, solver)
    dec = headline(sf, rows, cparams, rfit, epsilon, require_turn=turn)
    notes = fit_notes + ([rl_note] if rl_note else []) + dec.notes
    if budget_tokens is not None and budget_tokens > max(c.t_last for c in sf.curves):
        notes.append("budget beyond the last evaluation: curves extrapolated")
    if bootstrap > 0:
        vals, tols = [], []
        for b, r, p, f in zip(bsfs, brows, bparams, boot_rfits, strict=True):
            bd = headline(b, r, p, f, epsilon, require_turn=turn)
            if bd.tolerance_boundary is not None:
                tols.append(bd.tolerance_boundary)
            if p is not None:
                boot_laws.append(p)
            if dec.cmr is None:  # a bracket or no CMR: there is no point value for the resamples to spread
                continue
            v = _same_source(dec, bd)
            if v is None:
                n_failed += 1
                continue
            vals.append(v)
        n_curves = sum(c.ratio > 0 for c in sf.curves)
        unconv = sum(c.gen_status != "converged" for b in bsfs for c in b.curves if c.ratio > 0)
        if unconv:
            # one vocabulary with the interval's count: a resample is "unusable" when it gives no CMR; a flagged
            # curve refit inside a usable resample still counts towards the interval
            notes.append(f"bootstrap: {n_failed} of {bootstrap} resamples unusable (no CMR); {unconv} of "
                         f"{bootstrap * n_curves} ΔL_gen curve refits inside them flagged (not converged or at an "
                         "exponent bound) and still used")  # fmt: skip
        if vals:  # bias-corrected percentile intervals: they contain their point estimate (bc_interval)
            boot_cmr = np.array(vals)
            ci = cmr_interval(boot_cmr, dec.cmr, level)
            if ci is not None and dec.reading in (Reading.CMR_LAW, Reading.TOLERANCE):  # agrees with the table
                lo_b, hi_b = (float(dec.bracket.clip(min(max(v, 0.0), 1.0))) for v in ci)
                ci = BCInterval(lo_b, hi_b, ci.extended)
            if ci is not None and ci.extended:
                notes.append(f"the CMR {dec.cmr:.3f} lies at the edge of its bootstrap distribution: its interval "
                             "was extended to it")  # fmt: skip
        if tols:
            tol_ci = bc_interval(np.array(tols), dec.tolerance_boundary, level)
    if progress is not None:
        progress(max(bootstrap, 1))
    sens: list[dict[str, Any]] = []
    for lam in sensitivity_lambdas:
        prm = None
        for eps in sensitivity_epsilons:
            srows = rows_at(sf, epsilon=eps, lagrange_mult=lam, t0_cache=t0c)
            if prm is None:
                (prm,) = fit_cmr_laws(law, [cmr_points(srows)], wts, solver)
            sd = headline(sf, srows, prm, rfit, eps, require_turn=turn)
            sens.append({"n_params": size_json(size), "lagrange_mult": "inf" if math.isinf(lam) else lam,
                         "epsilon": eps, "cmr": sd.cmr, "status": sd.status,
                         "n_feasible": sum(r["feasible"] for r in sd.ratios),
                         "tolerance_boundary": sd.tolerance_boundary, "reading": sd.reading.value,
                         "bracket_lo": sd.bracket.lo, "bracket_hi": sd.bracket.hi, "why_moves": None})  # fmt: skip
    _explain_lambda_moves(sens)
    r_obs, g_obs, _ = budget_values(sf, rows)
    mf, mf_status = model_free_crossing(r_obs, g_obs - sf.ref_general, epsilon)
    misfit = ratio_law_misfit(sf, rows, rfit[0])
    rms = ratio_law_rms(sf, rows, rfit[0])
    if math.isfinite(rms):
        others = ", ".join(f"{k} {v:.1f}" for k, v in scores.items() if k != rl_name and math.isfinite(v))
        notes.append(f"ratio law {rl_name}: residual RMS {rms:.1f}× the measured noise at the budget"
                     + (f" (auto; {others})" if others else ""))  # fmt: skip
    tb = dec.tolerance_boundary
    if tb is not None and mf_status == STATUS_OK and mf is not None and abs(tb - mf) > 0.05:
        notes.append(f"tolerance boundary {dec.tolerance_boundary:.3f} ({rl_name}) vs model-free crossing of the "
                     f"observations {mf:.3f}")  # fmt: skip
    weak = _weak(sf, dec, bootstrap, n_failed, misfit)
    status = STATUS_WEAK if weak and dec.status == STATUS_OK else dec.status
    out = SizeCMR(
        n_params=size, budget_tokens=sf.budget_tokens, token_unit=sf.token_unit, reference_general=sf.ref_general,
        reference_domain=sf.ref_domain, cmr=dec.cmr, ci=ci, cmr_source=dec.cmr_source, status=status,
        cmr_discrete=dec.cmr_discrete, cmr_law=dec.cmr_law_params, cmr_law_at_budget=dec.cmr_law_at_budget,
        tolerance_boundary=dec.tolerance_boundary, tolerance_boundary_ci=tol_ci, tolerance_status=dec.tolerance_status,
        ratio_law_general=dec.ratio_law_general, ratio_law_domain=dec.ratio_law_domain, ratios=dec.ratios,
        curves={c.ratio: {"general": c.gen_params, "domain": c.dom_params, "t_lo": c.t_lo, "t_last": c.t_last,
                          "pin_zero": sf.pin_zero, "laws": sf.laws, "tokens": c.tokens, "obs_general": c.obs_gen,
                          "obs_domain": c.obs_dom, "status_general": c.gen_status, "status_domain": c.dom_status}
                for c in sf.curves},
        notes=list(dict.fromkeys(notes)), n_bootstrap=bootstrap, n_bootstrap_failed=n_failed, bootstrap_cmr=boot_cmr,
        bootstrap_cmr_law=boot_laws, outcome=dec.status, weak_reasons=weak,
        cmr_law_at_budget_raw=dec.cmr_law_at_budget_raw, model_free_crossing=mf, model_free_status=mf_status,
        reading=dec.reading, bracket=(dec.bracket.lo, dec.bracket.hi), bracket_reason=dec.bracket_reason,
        epsilon=epsilon,
    )  # fmt: skip
    return out, sens, boot_cmr, boot_rfits


def _explain_lambda_moves(sens: list[dict[str, Any]]) -> None:
    """Fill ``why_moves`` where a row's CMR is above the row of the next smaller λ at the same ε.

    A larger λ moves every T0 towards the peak of ΔL_gen (laws.md §6.5.5), so the feasible set can only shrink
    and the CMR should not rise; when it does, the row says why: a changed reading (e.g. the CMR law refitted
    through other turning points, or the bracket giving way to a law value), never silently."""

    def upper(r: dict[str, Any]) -> float | None:
        v = r["cmr"] if r["cmr"] is not None else r["bracket_hi"]
        return None if v is None else float(v)

    by_eps: dict[float, list[dict[str, Any]]] = {}
    for r in sens:
        by_eps.setdefault(float(r["epsilon"]), []).append(r)
    for rows in by_eps.values():
        rows = sorted(rows, key=lambda r: math.inf if r["lagrange_mult"] == "inf" else float(r["lagrange_mult"]))
        for prev, cur in itertools.pairwise(rows):
            a, b = upper(prev), upper(cur)
            if a is None or b is None or b <= a + 1e-9:
                continue
            if cur["n_feasible"] != prev["n_feasible"]:
                cur["why_moves"] = (f"rises with λ: {cur['n_feasible']} feasible ratios vs {prev['n_feasible']} at "
                                    f"λ = {prev['lagrange_mult']} (a turning verdict changed with T0)")  # fmt: skip
            else:
                cur["why_moves"] = (f"rises with λ: the CMR law refitted through the moved T0 ({cur['reading']} vs "
                                    f"{prev['reading']} at λ = {prev['lagrange_mult']})")  # fmt: skip
