"""The critical-mixture-ratio pipeline per model size: fits, bootstrap, sensitivity, honest statuses."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.cmr.common import (
    BOOT_LOST_MAX,
    DEFAULT_EPSILONS,
    DEFAULT_LAMBDAS,
    R2_MIN,
    STATUS_ALL_FEASIBLE,
    STATUS_OK,
    STATUS_WEAK,
    input_ok,
    is_number,
    law_of,
    size_json,
)
from mixlaw.decide.cmr.curves import SizeFits, bootstrap_size, fit_size
from mixlaw.decide.cmr.decision import (
    STATUS_TOL_OVERRULED,
    Decision,
    budget_values,
    cmr_law,
    cmr_points,
    fit_cmr_laws,
    headline,
    ratio_rows,
    t0_for_resamples,
)
from mixlaw.decide.cmr.ratio import RatioLawFit, fit_ratio_law_batch, model_free_crossing, resolve_ratio_law
from mixlaw.decide.cmr.result import SizeCMR
from mixlaw.errors import InputError

__all__ = ["decide_size", "cmr_size_trend", "choose_ratio_law", "RatioFits"]

RatioFits = tuple[RatioLawFit | None, RatioLawFit | None, str | None]
#: Ratio laws tried by ``ratio_law="auto"`` (the one that fits the end-of-budget increments best, in noise units).
AUTO_RATIO_LAWS = ("ratio_power", "ratio_exp")
#: A binding tolerance boundary is weak when its ratio law misses an end-of-budget point by more than this many
#: noise units (the ratio's ΔL_gen curve residual RMS).
MISFIT_MAX = 3.0


def _ratio_inputs(
    sf: SizeFits, rows_list: Sequence[list[dict[str, Any]]], sfs: Sequence[SizeFits], law: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str | None]:
    """Ratios and per-decision budget losses (general, domain) with a weight mask, for a batched ratio fit."""
    ratios = ratios_all = np.array([c.ratio for c in sf.curves])
    G = np.zeros((len(rows_list), ratios.size))
    D = np.zeros_like(G)
    W = np.zeros_like(G)
    for b, (s, rows) in enumerate(zip(sfs, rows_list, strict=True)):
        r, g, d = budget_values(s, rows)
        for rr, gg, dd in zip(r, g, d, strict=True):
            j = int(np.flatnonzero(ratios == rr)[0])
            G[b, j], D[b, j], W[b, j] = gg, dd, 1.0
    note = None
    keep = input_ok(law_of(law), {"ratio": ratios})
    if not keep.all():
        ratios, G, D, W = ratios[keep], G[:, keep], D[:, keep], W[:, keep]
        note = f"R = {', '.join(f'{r:g}' for r in ratios_all[~keep])} left out of {law} (outside its domain)"
    return ratios, G, D, W, note


def ratio_fits_batch(
    sf: SizeFits, rows_list: Sequence[list[dict[str, Any]]], sfs: Sequence[SizeFits], law: str, c_method: str,
    fit_loss: str,
) -> tuple[list[RatioFits], str | None]:  # fmt: skip
    """The general and domain ratio laws of many decisions of one size (one solve per law)."""
    ratios, G, D, W, note = _ratio_inputs(sf, rows_list, sfs, law)
    if ratios.size < 3:
        msg = f"ratio law not fitted: too few ratios to fit (need ≥ 3), got {ratios.size}"
        return [(None, None, msg)] * len(rows_list), note
    fg = fit_ratio_law_batch(ratios, G, law=law, weights=W, c_method=c_method, fit_loss=fit_loss)
    fd = fit_ratio_law_batch(ratios, D, law=law, weights=W, c_method=c_method, fit_loss=fit_loss)
    out: list[RatioFits] = []
    for b in range(len(rows_list)):
        if int(W[b].sum()) < 3:
            out.append((None, None, "ratio law not fitted: fewer than 3 ratios at the budget"))
        elif fg[b] is None or fd[b] is None:
            out.append((None, None, "ratio law not fitted: the fit failed"))
        else:
            out.append((fg[b], fd[b], None))
    return out, note


def _noise(sf: SizeFits) -> dict[float, float]:
    return {c.ratio: math.sqrt(c.mse_gen) for c in sf.curves if math.isfinite(c.mse_gen)}


def ratio_law_misfit(sf: SizeFits, rows: list[dict[str, Any]], fit: RatioLawFit | None) -> float:
    """Largest |observed − ratio law| of the general loss at the budget, in units of each ratio's curve noise."""
    if fit is None:
        return math.inf
    r, g, _ = budget_values(sf, rows)
    noise = _noise(sf)
    z = [abs(float(fit.predict(rr)) - gg) / max(noise.get(float(rr), 0.0), 5e-4)
         for rr, gg, ok in zip(r, g, input_ok(law_of(fit.law), {"ratio": r}), strict=True) if ok]  # fmt: skip
    return max(z) if z else math.inf


def choose_ratio_law(sf: SizeFits, rows: list[dict[str, Any]], ratio_law: str, c_method: str, fit_loss: str) -> str:
    """``auto``: the registered ratio law (of :data:`AUTO_RATIO_LAWS`) that fits the end-of-budget general loss
    best in noise units; any other value is looked up in the registry."""
    if ratio_law != "auto":
        return resolve_ratio_law(ratio_law).name
    best, best_z = AUTO_RATIO_LAWS[0], math.inf
    for name in AUTO_RATIO_LAWS:
        (fits,), _ = ratio_fits_batch(sf, [rows], [sf], name, c_method, fit_loss)
        z = ratio_law_misfit(sf, rows, fits[0])
        if z < best_z - 1e-9:
            best, best_z = name, z
    return best


def _same_source(point: Decision, boot: Decision) -> float | None:
    """The resample's CMR computed the way the point estimate was (so the interval describes that number)."""
    if point.cmr is None:
        return None
    if point.cmr_source == "tolerance boundary":  # the tolerance-only reading (relative to the control)
        return boot.tolerance_boundary
    if point.cmr_source.startswith("CMR law") or point.cmr_source.startswith("tolerance"):
        vals = [v for v in (boot.cmr_law_at_budget, boot.tolerance_boundary) if v is not None]
        return float(min(max(min(vals), 0.0), 1.0)) if vals else None
    return boot.cmr_discrete


def _weak(sf: SizeFits, dec: Decision, n_boot: int, n_failed: int, misfit: float) -> list[str]:
    """Why a decision is weak (empty: it is not).

    Only the fits the reported number rests on count: the curves whose T0 feed the CMR law (source "CMR law"),
    or the feasible trained ratios (source "largest ... ratio"); for a binding tolerance boundary, the ratio law
    at the budget against its points. A bootstrap that lost more than :data:`BOOT_LOST_MAX` always counts.
    """
    out = []
    src = dec.cmr_source
    if src.startswith("CMR law"):
        used = {r for _, r in cmr_points(dec.ratios)}
    elif src.startswith("largest"):
        used = {r["ratio"] for r in dec.ratios if r["feasible"]}
    else:
        used = set()
    cand = [c for c in sf.curves if c.ratio in used]
    for label, attr in (("ΔL_gen", "gen_status"), ("ΔL_dom", "dom_status")):
        bad = [c for c in cand if getattr(c, attr) != "converged"]
        if bad:
            kinds = sorted({getattr(c, attr) for c in bad})
            out.append(f"{label} fit {'/'.join(kinds)} at R = {', '.join(f'{c.ratio:g}' for c in bad)}")
    low = [c for c in cand if math.isfinite(c.r2_gen) and c.r2_gen < R2_MIN]
    if low:
        out.append(f"ΔL_gen R² < {R2_MIN:g} at R = {', '.join(f'{c.ratio:g}' for c in low)} "
                   f"(lowest {min(c.r2_gen for c in low):.2f})")  # fmt: skip
    if n_boot and n_failed > BOOT_LOST_MAX * n_boot:
        out.append(f"{n_failed} of {n_boot} bootstrap resamples gave no CMR (> {BOOT_LOST_MAX:.0%})")
    if src.startswith("tolerance") and dec.tolerance_status == STATUS_TOL_OVERRULED:
        out.append("the ratio law's tolerance boundary disagrees with the observations (model-free crossing used)")
    elif src.startswith("tolerance") and misfit > MISFIT_MAX:
        out.append(f"the ratio law misses the end-of-budget general loss by up to {misfit:.1f}× its noise "
                   f"(> {MISFIT_MAX:g})")  # fmt: skip
    return out


def decide_size(
    inc: pd.DataFrame,
    size: Any,
    *,
    epsilon: float,
    lagrange_mult: float,
    budget_tokens: float | None,
    token_unit: float | None,
    ratio_law: str,
    c_method: str,
    pin_zero: bool,
    fit_loss: str,
    bootstrap: int,
    level: float,
    t0_search_factor: float,
    rng: np.random.Generator,
    sensitivity_lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    sensitivity_epsilons: Sequence[float] = DEFAULT_EPSILONS,
    progress: Callable[[int], None] | None = None,
    batched: bool = True,
) -> tuple[SizeCMR, list[dict[str, Any]], np.ndarray | None, list[RatioFits]]:
    """The decision of one size: point estimate, ``bootstrap`` resamples (batched), the λ × ε table."""
    fit_notes: list[str] = []
    sf = fit_size(inc, size, budget_tokens, token_unit, pin_zero, fit_loss, sink=fit_notes)
    law = cmr_law(sf.token_unit)
    t0c: dict[tuple[float, float], Any] = {}
    turn = "dloss_general_abs" not in inc.columns  # relative to the control: tolerance only (see ratio_rows)
    kw: dict[str, Any] = dict(t0_search_factor=t0_search_factor, require_turn=turn)
    rows = ratio_rows(sf, epsilon=epsilon, lagrange_mult=lagrange_mult, t0_cache=t0c, **kw)
    rl_name = choose_ratio_law(sf, rows, ratio_law, c_method, fit_loss)
    (rfit,), rl_note = ratio_fits_batch(sf, [rows], [sf], rl_name, c_method, fit_loss)
    (cparams,) = fit_cmr_laws(law, [cmr_points(rows)])
    dec = headline(sf, rows, cparams, rfit, epsilon, require_turn=turn)
    notes = fit_notes + ([rl_note] if rl_note else []) + dec.notes
    if budget_tokens is not None and budget_tokens > max(c.t_last for c in sf.curves):
        notes.append("budget beyond the last evaluation: curves extrapolated")
    ci = tol_ci = None
    boot_cmr = None
    boot_laws: list[dict[str, float]] = []
    boot_rfits: list[RatioFits] = []
    n_failed = 0
    if bootstrap > 0:
        bsfs = bootstrap_size(sf, bootstrap, rng, fit_loss, batched)
        if batched:  # every resample's T0, CMR-law and ratio-law fits: one vectorised solve each
            bt0 = t0_for_resamples(bsfs, lagrange_mult=lagrange_mult, t0_search_factor=t0_search_factor)
            brows = [ratio_rows(b, epsilon=epsilon, lagrange_mult=lagrange_mult, t0_given=g, **kw)
                     for b, g in zip(bsfs, bt0, strict=True)]  # fmt: skip
            bparams = fit_cmr_laws(law, [cmr_points(r) for r in brows])
            boot_rfits, _ = ratio_fits_batch(sf, brows, bsfs, rl_name, c_method, fit_loss)
        else:  # one resample at a time (reference for the batched path)
            brows = [ratio_rows(b, epsilon=epsilon, lagrange_mult=lagrange_mult, **kw) for b in bsfs]
            bparams = [fit_cmr_laws(law, [cmr_points(r)])[0] for r in brows]
            boot_rfits = [ratio_fits_batch(sf, [r], [b], rl_name, c_method, fit_loss)[0][0]
                          for b, r in zip(bsfs, brows, strict=True)]  # fmt: skip
        vals, tols = [], []
        for b, r, p, f in zip(bsfs, brows, bparams, boot_rfits, strict=True):
            bd = headline(b, r, p, f, epsilon, require_turn=turn)
            v = _same_source(dec, bd)
            if v is None:
                n_failed += 1
                continue
            vals.append(v)
            if bd.tolerance_boundary is not None:
                tols.append(bd.tolerance_boundary)
            if p is not None:
                boot_laws.append(p)
        unconv = sum(c.gen_status != "converged" for b in bsfs for c in b.curves if c.ratio > 0)
        if unconv:
            notes.append(f"{unconv} of {bootstrap * sum(c.ratio > 0 for c in sf.curves)} bootstrap ΔL_gen refits "
                         "did not converge or sit at an exponent bound")  # fmt: skip
        a = (1 - level) / 2
        if vals:
            boot_cmr = np.array(vals)
            ci = (float(np.quantile(boot_cmr, a)), float(np.quantile(boot_cmr, 1 - a)))
        if tols:
            tol_ci = (float(np.quantile(tols, a)), float(np.quantile(tols, 1 - a)))
    if progress is not None:
        progress(max(bootstrap, 1))
    sens: list[dict[str, Any]] = []
    for lam in sensitivity_lambdas:
        prm = None
        for eps in sensitivity_epsilons:
            srows = ratio_rows(sf, epsilon=eps, lagrange_mult=lam, t0_cache=t0c, **kw)
            if prm is None:
                (prm,) = fit_cmr_laws(law, [cmr_points(srows)])
            sd = headline(sf, srows, prm, rfit, eps, require_turn=turn)
            sens.append({"n_params": size_json(size), "lagrange_mult": "inf" if math.isinf(lam) else lam,
                         "epsilon": eps, "cmr": sd.cmr, "status": sd.status,
                         "n_feasible": sum(r["feasible"] for r in sd.ratios),
                         "tolerance_boundary": sd.tolerance_boundary})  # fmt: skip
    r_obs, g_obs, _ = budget_values(sf, rows)
    mf, mf_status = model_free_crossing(r_obs, g_obs - sf.ref_general, epsilon)
    misfit = ratio_law_misfit(sf, rows, rfit[0])
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
                          "pin_zero": sf.pin_zero} for c in sf.curves},
        notes=list(dict.fromkeys(notes)), n_bootstrap=bootstrap, n_bootstrap_failed=n_failed, bootstrap_cmr=boot_cmr,
        bootstrap_cmr_law=boot_laws, outcome=dec.status, weak_reasons=weak,
        cmr_law_at_budget_raw=dec.cmr_law_at_budget_raw, model_free_crossing=mf, model_free_status=mf_status,
    )  # fmt: skip
    return out, sens, boot_cmr, boot_rfits


def cmr_size_trend(
    sizes: Sequence[SizeCMR], boot: dict[Any, np.ndarray] | None = None, *, level: float = 0.95
) -> dict[str, Any] | None:
    """CMR vs model size: least-squares line ``CMR = a + b · log10(N)`` with a bootstrap band.

    Sizes whose CMR is only a lower bound (``all ratios feasible``) are left out of the line. The band refits the
    line on paired resamples (resample ``i`` of every size); needs ≥ 2 numeric sizes with a CMR.
    """
    use = [s for s in sizes if s.cmr is not None and is_number(s.n_params) and s.outcome != STATUS_ALL_FEASIBLE]
    pts = [(float(s.n_params), float(s.cmr)) for s in use]  # type: ignore[arg-type]
    if len(pts) < 2:
        return None
    x = np.log10([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    b, a = np.polyfit(x, y, 1)
    out: dict[str, Any] = {"form": "cmr = a + b*log10(n_params)", "a": float(a), "b": float(b),
                           "n_sizes": len(pts), "band": None}  # fmt: skip
    if boot:
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


def check_args(epsilon: float, lagrange_mult: float, budget_tokens: float | None, bootstrap: int) -> None:
    """One-line errors for impossible settings."""
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise InputError(f"epsilon must be a finite number ≥ 0, got {epsilon}")
    if not lagrange_mult > 0:
        raise InputError(f"lagrange_mult must be > 0 or inf, got {lagrange_mult}")
    if budget_tokens is not None and not budget_tokens > 0:
        raise InputError(f"budget_tokens must be > 0, got {budget_tokens}")
    if bootstrap < 0:
        raise InputError(f"bootstrap must be ≥ 0, got {bootstrap}")
