"""The paired bootstrap of ``mix optimize`` (its module docstring, *Intervals*): every law refitted on the same
resamples of the mixtures in one batched solve each, the mixture re-optimised per resample, and bias-corrected
percentile intervals around the point estimates (:func:`mixlaw.decide.mixture.intervals.bc_ends`)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import torch

from mixlaw.decide.mixture.constraints import MixtureConstraints
from mixlaw.decide.mixture.objective import FittedLaw
from mixlaw.decide.mixture.optimize import optimize_mixture
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, IntervalOptions, SolverOptions

__all__ = ["bc_pair", "paired_bootstrap", "refit_all", "refit_draws"]


def refit_draws(
    res: Any, rows: pd.DataFrame, counts: np.ndarray, solver: SolverOptions = DEFAULT_SOLVER
) -> tuple[list[FittedLaw | None], dict[str, Any]]:
    """Refit ``res``'s law on every resample of the mixtures in ONE batched solve, from the point estimate.

    ``counts`` ``(B, n_mix)`` says how often each mixture was drawn; every row of a mixture gets its count as its
    weight (the same objective as duplicating the rows). The resamples run under ``solver``'s cap (default: the
    adaptive limit) with the noise-scaled stall test (:mod:`mixlaw.fit.solver.refine`), the failed ones are rescued
    from the point and from where they stopped (:func:`mixlaw.fit.uncertainty.bootstrap.refit_resamples`); those
    still unusable are ``None`` and counted in the returned ``{"n_unusable", "n_rescued", "status"}`` (a resample
    without any row of this target is unusable).
    """
    from mixlaw.fit.problem.data import FitData
    from mixlaw.fit.solver.batch import threads
    from mixlaw.fit.uncertainty.bootstrap import refit_resamples

    law = res.law
    data = FitData(law, rows, target=res.target, input_map=res.input_map, group_column=None)
    W = counts[:, rows["_mixture"].to_numpy()].astype(np.float64)
    seeds = np.asarray(law.to_internal(res.params), dtype=np.float64)[None, :]
    with threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resample fits: boundary notes are not the point
        boot = refit_resamples(
            law, data, data.y, W, seeds, params=res.params, scheme="mixtures", unit="mixtures", loss=res.loss,
            delta=res.delta, max_iter=solver.cap(None),
        )  # fmt: skip
    ok = boot.ok & (W.sum(axis=1) > 0)
    it = iter(boot.params.to_numpy(dtype=np.float64))
    out: list[FittedLaw | None] = []
    for b in range(len(W)):
        row = next(it) if boot.ok[b] else None
        out.append(FittedLaw(law, law.unflatten(row)) if ok[b] and row is not None else None)
    status = {str(k): int(v) for k, v in zip(*np.unique(boot.status.astype(str), return_counts=True), strict=True)}
    return out, {"n_unusable": int((~ok).sum()), "n_rescued": boot.n_rescued, "status": status}


def _group_key(res: Any) -> tuple[Any, ...]:
    law = res.law
    return (law.name, repr(sorted((k, repr(v)) for k, v in dict(law.options).items())), res.loss, res.delta,
            repr(sorted(dict(res.input_map).items())))  # fmt: skip


def refit_all(
    fits: Mapping[str, Any],
    rows: Mapping[str, pd.DataFrame],
    counts: np.ndarray,
    solver: SolverOptions = DEFAULT_SOLVER,
    extra: Mapping[str, np.ndarray] | None = None,
) -> dict[str, tuple[list[FittedLaw | None], dict[str, Any]]]:
    """:func:`refit_draws` for every fit of ``fits``; the fits of one law (name and options) over the same inputs
    are refitted together, all their resamples in ONE batched solve (each problem: one target's values, one
    resample's weights, seeded at that target's point estimate; rescued as in :func:`refit_draws`). Problems never
    interact in the solver, so each target gets what :func:`refit_draws` gives it alone, up to the rounding of
    batched kernels of another size; the solver's fixed cost per iteration is paid once per group.

    ``extra``: ``{target: (m, n_rows) point weights}``, further problems of that target solved in the same batched
    solve from the same point estimate (the nested size holdout of
    :func:`~mixlaw.decide.mixture.regret_calib.calibrate_regret`: the rows at the largest size weigh 0). Their
    refits (``None`` where unusable) are the info's ``"extra"`` entry, which is not counted in ``n_unusable``,
    ``n_rescued`` or ``status``; the caller pops it. A problem alone in a solve pays the solver's whole per-iteration
    cost for one row (the README's 1b: five nested refits, 300-400 iterations, 1.6-2.8 s of CPU; inside the
    resample solves they ride along).
    """
    from mixlaw.fit.problem.data import FitData

    extra = dict(extra or {})
    groups: dict[tuple[Any, ...], list[str]] = {}
    for t, r in fits.items():
        groups.setdefault(_group_key(r), []).append(t)
    out: dict[str, tuple[list[FittedLaw | None], dict[str, Any]]] = {}
    for ts in groups.values():
        datas = {t: FitData(fits[t].law, rows[t], target=fits[t].target, input_map=fits[t].input_map,
                            group_column=None) for t in ts}  # fmt: skip
        x0 = datas[ts[0]].x
        same = all(d.x.keys() == x0.keys() and all(torch.equal(d.x[k], x0[k]) for k in x0) for d in datas.values())
        parts = [[t] for t in ts] if len(ts) < 2 or not same else [ts]
        for part in parts:
            Ws = {t: counts[:, rows[t]["_mixture"].to_numpy()].astype(np.float64) for t in part}
            more = {t: np.asarray(extra.get(t, np.zeros((0, len(rows[t])))), dtype=np.float64) for t in part}
            out |= _refit_group({t: fits[t] for t in part}, {t: datas[t] for t in part}, Ws, more, solver)
    return {t: out[t] for t in fits}


def _refit_group(
    fits: Mapping[str, Any], datas: Mapping[str, Any], Ws: Mapping[str, np.ndarray], more: Mapping[str, np.ndarray],
    solver: SolverOptions,
) -> dict[str, tuple[list[FittedLaw | None], dict[str, Any]]]:  # fmt: skip
    """Every target's resample weights ``Ws[t]`` ``(B, n_t)`` and extra weights ``more[t]`` ``(m_t, n_t)`` in ONE
    batched solve over the targets' shared inputs, seeded at each target's point, rescued (:func:`refit_all`)."""
    from mixlaw.fit.solver.batch import threads
    from mixlaw.fit.solver.refits import _refit, rescue
    from mixlaw.fit.uncertainty.bootstrap import point_centre

    ts = list(fits)
    first = fits[ts[0]]
    law = first.law
    Wt = {t: np.concatenate([Ws[t], more[t]]) for t in ts}
    sizes = {t: len(Wt[t]) for t in ts}
    seeds = {t: np.asarray(fits[t].law.to_internal(fits[t].params), dtype=np.float64) for t in ts}
    Y = np.concatenate([np.broadcast_to(datas[t].y, (sizes[t], datas[t].n)) for t in ts])
    W = np.concatenate([Wt[t] for t in ts])
    S = np.concatenate([np.broadcast_to(seeds[t], (sizes[t], 1, seeds[t].size)) for t in ts])
    kw: dict[str, Any] = dict(loss=first.loss, delta=first.delta, max_iter=solver.cap(None))
    with threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resample fits: boundary notes are not the point
        params, ok, status, objective, ends = _refit(law, datas[ts[0]].x, Y, W, S, **kw)
        centres = np.concatenate([
            np.broadcast_to(point_centre(fits[t].law, datas[t], fits[t].params, seeds[t][None, :], loss=first.loss,
                                         delta=first.delta), (sizes[t], seeds[t].size)) for t in ts
        ])  # fmt: skip
        before = ok.copy()
        rescue(law, datas[ts[0]].x, Y, W, centres, ends, (params, ok, status, objective), **kw)
    out = {}
    lo = 0
    for t in ts:
        B, hi = len(Ws[t]), lo + sizes[t]
        good = ok[lo:hi] & (Wt[t].sum(axis=1) > 0)
        fl = fits[t].law
        draws = [FittedLaw(fl, fl.unflatten(params[lo + b])) if good[b] else None for b in range(sizes[t])]
        st = status[lo : lo + B].astype(str)
        out[t] = (draws[:B], {"n_unusable": int((~good[:B]).sum()),
                              "n_rescued": int((ok[lo : lo + B] & ~before[lo : lo + B]).sum()),
                              "status": {str(k): int(v) for k, v in zip(*np.unique(st, return_counts=True),
                                                                         strict=True)},
                              **({"extra": draws[B:]} if len(more[t]) else {})})  # fmt: skip
        lo = hi
    return out


def bc_pair(values: np.ndarray, level: float, point: float) -> list[float]:
    """The BC percentile interval of bootstrap ``values`` around ``point`` (it always contains the point).

    The rule of :func:`mixlaw.decide.mixture.intervals.bc_ends` for one column (non-finite values dropped, NaN ends
    below :data:`~mixlaw.decide.mixture.intervals.MIN_DRAWS` finite values), with the standard normal of the
    standard library (``statistics.NormalDist``, the same Wichura AS 241 quantile as scipy's): importing
    ``scipy.stats`` for it cost about 1 s of the README's ``mix optimize`` (1b), a sixth of its fits' time.
    """
    from mixlaw.decide.mixture.intervals import MIN_DRAWS

    b = np.asarray(values, dtype=np.float64)
    b = b[np.isfinite(b)]
    pt = float(point)
    if b.size < MIN_DRAWS or not math.isfinite(pt):
        return [math.nan, math.nan]
    n, nd = b.size, NormalDist()
    za = nd.inv_cdf(1.0 - (1.0 - level) / 2.0)
    p0 = (np.sum(b < pt) + 0.5 * np.sum(b == pt)) / n
    z0 = nd.inv_cdf(min(max(float(p0), 0.5 / n), 1.0 - 0.5 / n))
    q_lo, q_hi = np.quantile(b, [nd.cdf(2 * z0 - za), nd.cdf(2 * z0 + za)])
    return [min(float(q_lo), pt), max(float(q_hi), pt)]


def paired_bootstrap(
    intervals: IntervalOptions,
    doms: list[str],
    cons: MixtureConstraints,
    fits: Mapping[str, Any],
    bench_fits: Mapping[str, Any],
    rows: Mapping[str, pd.DataFrame],
    objective_of: Any,
    opt: Any,
    grid: list[float],
    curve: list[Any],
    out: dict[str, Any],
    solver: SolverOptions,
    extra: Mapping[str, np.ndarray] | None = None,
) -> tuple[dict[str, Any], dict[str, list[FittedLaw | None]]]:
    """Refit every law on ``intervals.resamples`` resamples of the mixtures (the same draws for every law, from
    ``intervals.seed``), re-optimise each, and give BC intervals at ``intervals.level`` (module docstring).

    ``extra``: further weighted refits per target made in the same batched solves (:func:`refit_all`); returns the
    bootstrap's result and ``{target: those refits}``."""
    B, level = intervals.resamples, intervals.level
    rng = np.random.default_rng((intervals.seed or 0) + 1)
    n_mix = int(max(int(r["_mixture"].max()) for r in rows.values())) + 1
    picks = [rng.integers(0, n_mix, n_mix) for _ in range(B)]  # the same mixtures for every law
    counts = np.stack([np.bincount(p, minlength=n_mix) for p in picks])
    refits = refit_all({**fits, **bench_fits}, rows, counts, solver, extra)  # one batched solve per law
    extras = {t: info.pop("extra") for t, (_, info) in refits.items() if "extra" in info}
    draws = {t: d for t, (d, _) in refits.items()}
    sign = -1.0 if bench_fits else 1.0
    W, J, S, P = [], [], [], []
    cand = {c["name"]: np.array(list(c["weights"].values())) for c in out.get("candidates", [])}
    CJ: dict[str, list[float]] = {k: [] for k in cand}
    CR: dict[str, list[float]] = {k: [] for k in cand}
    band: list[list[np.ndarray]] = [[] for _ in grid]
    n_failed = 0
    uniform = np.full(len(doms), 1.0 / len(doms))
    for b in range(B):
        laws = {t: d[b] for t, d in draws.items()}
        if any(v is None for v in laws.values()):
            n_failed += 1
            continue
        ls = {t: laws[t] for t in fits}
        bs = {t: laws[t] for t in bench_fits}
        try:
            ob = objective_of(ls, bs)
            o = optimize_mixture(ob, cons, starts=np.stack([opt.w, uniform]), polish=False)
            at_sizes = [
                optimize_mixture(objective_of(ls, bs, m), cons, starts=np.stack([curve[j].w, uniform]), polish=False).w
                for j, m in enumerate(grid)
            ]
        except (InputError, ValueError, RuntimeError):
            n_failed += 1
            continue
        for j, w in enumerate(at_sizes):
            band[j].append(w)
        W.append(o.w)
        J.append(o.objective)
        S.append(sign * o.objective)
        rep = ob.report(opt.w)  # the predictions at the chosen mixture, under the resampled laws
        P.append({**rep["predicted_losses"], **rep["predicted_accuracies"]})
        if cand:
            with torch.no_grad():
                at_opt = float(ob(torch.as_tensor(opt.w)))
                for k, w in cand.items():
                    jc = float(ob(torch.as_tensor(w)))
                    CJ[k].append(jc)
                    CR[k].append(jc - at_opt)
    fits_info = {t: info for t, (_, info) in refits.items()}  # per law: unusable and rescued resamples
    from mixlaw.fit.uncertainty.resampling import interval_status

    status = interval_status(n_failed, B)  # weak when the bands rest on <= 80 % of the resamples
    if not W:
        return {"n": 0, "n_failed": n_failed, "status": status, "level": level, "refits": fits_info}, extras
    Wa = np.array(W)
    at_point = {**out["predicted_losses"], **out["predicted_accuracies"]}
    res: dict[str, Any] = {
        "n": len(W),
        "n_failed": n_failed,
        "status": status,
        "refits": fits_info,
        "level": level,
        "unit": "mixtures",
        "weights": {d: bc_pair(Wa[:, j], level, opt.w[j]) for j, d in enumerate(doms)},
        "objective": bc_pair(np.array(J), level, opt.objective),
        "score": bc_pair(np.array(S), level, sign * opt.objective),
        "predicted_at_optimum": {k: bc_pair(np.array([p[k] for p in P]), level, at_point[k]) for k in P[0]},
    }
    for c in out.get("candidates", []):
        c["objective_interval"] = bc_pair(np.array(CJ[c["name"]]), level, c["objective"])
        c["regret_interval"] = bc_pair(np.array(CR[c["name"]]), level, c["regret"])
        c["p_better_than_chosen"] = float(np.mean(np.array(CR[c["name"]]) < 0))
    if grid:
        for j, row in enumerate(out["vs_size"]):
            arr = np.array(band[j])
            row["band"] = {d: bc_pair(arr[:, i], level, curve[j].w[i]) for i, d in enumerate(doms)}
    return res, extras
