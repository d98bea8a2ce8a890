"""Held-out checks of a CMR decision (``mixlaw cmr --validate``).

1. **Each interior ratio in turn** (per size; not the smallest or largest candidate ratio, not the R = 0 control):
   the ratio laws are refitted without it and predict its end-of-budget general and domain increments. Reported:
   the absolute errors (MAE over all held-out points), whether the observation lies inside the 95 % band (the
   refit's bootstrap over resampled end-of-budget values plus the held-out run's own residual noise), and how far
   the size's CMR moves when the whole decision is rerun without that ratio.
2. **The largest model size**: the CMR-vs-size trend of the other sizes predicts its CMR, and a per-ratio trend
   ``ΔL_gen(budget) = a + b log10 N`` of the other sizes predicts its end-of-budget increments (band: ±1.96 × the
   trend's residual standard deviation, widened by the held-out run's noise).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.cmr.common import CMRSettings, input_ok, is_number, law_of, size_json
from mixlaw.decide.cmr.curves import curve_laws, fit_size
from mixlaw.decide.cmr.decision import budget_values, ratio_rows
from mixlaw.decide.cmr.ratio import fit_ratio_law_batch
from mixlaw.decide.cmr.result import CMRDecision
from mixlaw.errors import FitError, InputError

__all__ = ["validate_decision"]


def _held_out_ratios(dec: CMRDecision, inc: pd.DataFrame, n_boot: int, rng: np.random.Generator,
                     st: CMRSettings) -> dict[str, Any]:  # fmt: skip
    from mixlaw.decide.cmr.pipeline import decide_size

    rows_out: list[dict[str, Any]] = []
    B = max(n_boot, 200)
    for s in dec.sizes:
        if s.ratio_law_general is None or s.ratio_law_domain is None:
            continue
        sf = fit_size(inc, s.n_params, st.budget_tokens, st.token_unit, st.pin_zero, st.fit_loss, solver=st.solver)
        rows = ratio_rows(sf, epsilon=st.epsilon, lagrange_mult=st.lagrange_mult,
                          t0_search_factor=st.t0_search_factor)  # fmt: skip
        r, g, d = budget_values(sf, rows)
        law, dlaw = s.ratio_law_general.law, s.ratio_law_domain.law
        keep = input_ok(law_of(law), {"ratio": r}) & input_ok(law_of(dlaw), {"ratio": r})
        r, g, d = r[keep], g[keep], d[keep]
        cand = sorted(x for x in r if x > 0)
        interior = cand[1:-1]
        if r.size < 4 or not interior:
            continue
        resid = {}
        for c in sf.curves:
            if c.gen_params is None or c.dom_params is None:
                continue
            dl, gl = curve_laws(sf.token_unit, sf.pin_zero, sf.laws)
            rg = c.obs_gen - gl.evaluate({"tokens": c.tokens}, c.gen_params)
            rd = c.obs_dom - dl.evaluate({"tokens": c.tokens}, c.dom_params)
            resid[c.ratio] = (rg, rd)
        for rj in interior:
            j = int(np.flatnonzero(r == rj)[0])
            W = np.ones((B + 1, r.size))
            W[:, j] = 0.0
            eg = np.stack([rng.choice(resid[x][0], size=B) if x in resid else np.zeros(B) for x in r], axis=1)
            ed = np.stack([rng.choice(resid[x][1], size=B) if x in resid else np.zeros(B) for x in r], axis=1)
            G = np.vstack([g[None], g[None] + eg])
            D = np.vstack([d[None], d[None] + ed])
            fg = fit_ratio_law_batch(r, G, law=law, weights=W, c_method=st.c_method, fit_loss=st.fit_loss,
                                     solver=st.solver)  # fmt: skip
            fd = fit_ratio_law_batch(r, D, law=dlaw, weights=W, c_method=st.c_method, fit_loss=st.fit_loss,
                                     solver=st.solver)  # fmt: skip
            if fg[0] is None or fd[0] is None:
                continue
            pg, pdm = float(fg[0].predict(rj)), float(fd[0].predict(rj))
            bg = np.array([float(f.predict(rj)) for f in fg[1:] if f is not None]) + rng.choice(resid[rj][0], size=B)[
                : sum(f is not None for f in fg[1:])]  # fmt: skip
            bd = np.array([float(f.predict(rj)) for f in fd[1:] if f is not None]) + rng.choice(resid[rj][1], size=B)[
                : sum(f is not None for f in fd[1:])]  # fmt: skip
            lo_g, hi_g = np.quantile(bg, [0.025, 0.975]) if bg.size else (pg, pg)
            lo_d, hi_d = np.quantile(bd, [0.025, 0.975]) if bd.size else (pdm, pdm)
            runs = set().union(*[set(c.run_ids) for c in sf.curves if c.ratio == rj])
            try:
                without, _, _, _ = decide_size(inc[~inc["run_id"].isin(runs)], s.n_params, st, bootstrap=0, rng=rng,
                                               sensitivity_lambdas=(), sensitivity_epsilons=())  # fmt: skip
                cmr_wo = without.cmr
            except (FitError, InputError):
                cmr_wo = None
            rows_out.append({
                "n_params": size_json(s.n_params), "ratio": float(rj),
                "observed_dloss_general": float(g[j] - sf.ref_general), "predicted_dloss_general": pg - sf.ref_general,
                "band_general": [float(lo_g) - sf.ref_general, float(hi_g) - sf.ref_general],
                "inside_general": bool(lo_g <= g[j] <= hi_g),
                "observed_dloss_domain": float(d[j] - sf.ref_domain), "predicted_dloss_domain": pdm - sf.ref_domain,
                "band_domain": [float(lo_d) - sf.ref_domain, float(hi_d) - sf.ref_domain],
                "inside_domain": bool(lo_d <= d[j] <= hi_d),
                "cmr": s.cmr, "cmr_without": cmr_wo,
                "cmr_shift": None if cmr_wo is None or s.cmr is None else float(cmr_wo - s.cmr),
            })  # fmt: skip
    if not rows_out:
        return {"n_points": 0, "rows": []}
    eg_ = [abs(x["predicted_dloss_general"] - x["observed_dloss_general"]) for x in rows_out]
    ed_ = [abs(x["predicted_dloss_domain"] - x["observed_dloss_domain"]) for x in rows_out]
    ins = [x["inside_general"] for x in rows_out] + [x["inside_domain"] for x in rows_out]
    shifts = [abs(x["cmr_shift"]) for x in rows_out if x["cmr_shift"] is not None]
    return {"n_points": len(rows_out), "mae_general": float(np.mean(eg_)), "mae_domain": float(np.mean(ed_)),
            "coverage": float(np.mean(ins)), "max_cmr_shift": float(max(shifts)) if shifts else 0.0,
            "rows": rows_out}  # fmt: skip


def _held_out_size(dec: CMRDecision) -> dict[str, Any] | None:
    from mixlaw.decide.cmr.pipeline import cmr_size_trend, trend_exclusion

    sizes = [s for s in dec.sizes if is_number(s.n_params)]
    if len(sizes) < 3:
        return None
    last = max(sizes, key=lambda s: float(s.n_params))
    rest = [s for s in sizes if s is not last]
    # Only sizes with a comparable CMR feed the trend (pipeline.trend_exclusion). When fewer than two of the
    # other sizes have one, the tolerance-only reading (defined wherever the observations bracket ε) is trended
    # and compared instead, and ``reading`` says so.
    reading = "headline"
    tr = cmr_size_trend(rest)
    if tr is None:
        reading = "tolerance"
        tr = cmr_size_trend(rest, reading=reading)
    raw = None if tr is None else float(tr["a"] + tr["b"] * math.log10(float(last.n_params)))
    pred = None if raw is None else min(max(raw, 0.0), 1.0)  # a share is a share: the trend's value is clipped
    why_last = trend_exclusion(last, reading)
    value = last.cmr if reading == "headline" else last.tolerance_boundary
    actual = value if why_last is None else None  # a fallback CMR is not what the trend predicts
    out: dict[str, Any] = {"n_params": size_json(last.n_params), "predicted": pred, "predicted_raw": raw,
                           "clipped": raw is not None and raw != pred,
                           "n_trend_sizes": 0 if tr is None else tr["n_sizes"],
                           "trend_sizes": [] if tr is None else tr["sizes"],
                           "trend_left_out": [{"n_params": size_json(s.n_params), "reason": w} for s in rest
                                              if (w := trend_exclusion(s, reading)) is not None],
                           "reading": "CMR" if reading == "headline" else "tolerance boundary (tolerance-only)",
                           "held_out_not_comparable": why_last, "actual": actual,
                           "shift": None if pred is None or actual is None else float(actual - pred)}  # fmt: skip
    rows, inside, err = [], [], []
    for row in last.ratios:
        obs = row["observed_dloss_general_at_budget"]
        pts = [(float(s.n_params), r["observed_dloss_general_at_budget"]) for s in rest for r in s.ratios
               if r["ratio"] == row["ratio"] and r["observed_dloss_general_at_budget"] is not None]  # fmt: skip
        if obs is None or len(pts) < 3:
            continue
        x = np.log10([p[0] for p in pts])
        y = np.array([p[1] for p in pts])
        b, a = np.polyfit(x, y, 1)
        sd = float(np.std(y - (a + b * x), ddof=2)) if len(pts) > 2 else 0.0
        pr = float(a + b * math.log10(float(last.n_params)))
        half = 1.96 * sd
        ok = bool(abs(obs - pr) <= half)
        rows.append({"ratio": row["ratio"], "observed_dloss_general": obs, "predicted_dloss_general": pr,
                     "band_general": [pr - half, pr + half], "inside_general": ok})  # fmt: skip
        inside.append(abs(obs - pr) <= half)
        err.append(abs(obs - pr))
    out.update(rows=rows, mae_general=float(np.mean(err)) if err else None,
               coverage=float(np.mean(inside)) if inside else None)  # fmt: skip
    return out


def validate_decision(
    dec: CMRDecision, inc: pd.DataFrame, settings: CMRSettings, *, bootstrap: int, rng: np.random.Generator
) -> dict[str, Any]:
    """Held-out checks of ``dec`` (see the module docstring) under the decision's ``settings``."""
    return {
        "held_out_ratios": _held_out_ratios(dec, inc, bootstrap, rng, settings),
        "held_out_size": _held_out_size(dec),
    }
