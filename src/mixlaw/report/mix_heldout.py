"""The mixture report's held-out panel from the decision's own fits, in a few batched solves.

``mixlaw mix optimize … --report`` shows, per target loss, the law the decision kept predicting held-out runs
(``--holdout``, default ``mixtures:5``: five folds of whole mixtures), with 95 % prediction intervals, beside the
mixture-blind baseline. :func:`mixlaw.decide.mixture.compare.compare` makes that comparison from scratch: per
target and fold a multi-start point fit (32 starts) and a bootstrap of the training runs, each its own solve; on
the README's 1b (5 losses × 5 folds) that was 50 solves and about 80 s of CPU, eight times the decision itself.

Here every fold fit of every target of one law, and every fold's bootstrap (``B`` resamples of its training runs,
:func:`~mixlaw.fit.uncertainty.resampling.resample_weights`), is one problem of ONE batched solve, weighted (the
fold's test rows weigh 0, a resample's runs their multiplicity) and started from the decision's fit of that target
(``mix compare`` starts a fold's resamples from the fold's fit; a solve of its own for the folds first cost 1-1.4 s
per law on 1b). The point and resample refits use the engine's refit rules (adaptive limit, noise-scaled stall test, the
rescue of failed problems: :mod:`mixlaw.fit.solver.refits`). The intervals are those of ``mix compare``
(:func:`mixlaw.decide.mixture.intervals.prediction_interval`: BC percentile of the resampled predictions plus
Student-t residual noise), and the table and figure the same.

What differs from ``mix compare``: a fold fit starts at the decision's fit, which has seen the fold's test runs, not
from the law's own start design. For a law with one basin that is the same fit; where the fit is multimodal it picks
the basin the full data chose, so the held-out errors can be optimistic by the basin choice (never by the fit's
values, which come from the training rows alone). The report says so under its table. Where a fold's test rows lie
outside the training sizes (a size holdout), the intervals of ``mix compare`` are calibrated for the extrapolation by
nested refits; this path does not do that, so :func:`heldout_from_fits` returns ``None`` and the caller runs
``mix compare``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["WARM_NOTE", "heldout_from_fits"]

#: The line the report prints under the held-out table when it was made by :func:`heldout_from_fits`.
WARM_NOTE = (
    "Each fold's fit started from the decision's fit of that loss (which saw the fold's runs) and was refitted on the "
    "fold's training runs only; with a multimodal law that can make the held-out errors optimistic by the basin choice."
)


#: The noise-scaled stall test of these refits (a fraction of one noise unit over two 30-iteration windows; the
#: resample refits of the decision use :data:`mixlaw.fit.solver.refine.ADAPTIVE_STALL_UNITS`, 0.01).
STALL_UNITS = 0.1


@dataclass(frozen=True)
class _Fold:
    """What :func:`mixlaw.decide.mixture.intervals.prediction_interval` reads of a fit (a fold's refit)."""

    law: Any
    params: Mapping[str, Any]
    bootstrap_params: pd.DataFrame | None
    n_bootstrap: int
    residual_sd: float | None
    n_points: int


def _law_of(out: Mapping[str, Any], target: str, domains: Sequence[str], size_column: str) -> Any:
    from mixlaw.decide.mixture.law_fits import build_mixture_law

    opts = {k: (tuple(v) if isinstance(v, list) else v) for k, v in dict(out.get("law_options") or {}).items()}
    k = (out.get("camel_k") or {}).get(target, {}).get("k")
    if k is not None:
        opts["k"] = int(k)
    return build_mixture_law(str(out["law"]), opts, domains, size_column)


def heldout_from_fits(
    table: pd.DataFrame,
    out: Mapping[str, Any],
    *,
    domains: Sequence[str],
    holdout: str,
    size_column: str = "n_params",
    bootstrap: int = 20,
    level: float = 0.95,
    random_state: int = 0,
    max_iter: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """The report's held-out comparison (``mix compare``'s result layout) of ``out``'s law on each of its targets,
    from its fits (module docstring); ``None`` where this path does not apply (a surrogate or benchmark objective, a
    fit without parameters, a fold whose test rows extrapolate in size): the caller then runs ``mix compare``.

    The blind baseline's rows are ``mix compare``'s own (no fit). ``bootstrap``: resamples of each fold's training
    runs (0: no intervals). ``progress``: called with one line before the refits (``None``: silent)."""
    from mixlaw.decide.mixture.checks import holdout_folds, target_rows
    from mixlaw.decide.mixture.compare import SURROGATES, compare
    from mixlaw.decide.mixture.intervals import extrapolates

    doms = list(domains)
    targets = list(out.get("targets") or [])
    fits = out.get("fits") or {}
    if not targets or str(out.get("law")) in SURROGATES or any("params" not in fits.get(t, {}) for t in targets):
        return None
    table = table.reset_index(drop=True)
    if "run_id" not in table.columns:
        table = table.assign(run_id=[f"row{i + 1}" for i in range(len(table))])
    subs, masks, laws = {}, {}, {}
    for t in targets:
        subs[t] = target_rows(table, t)[0]
        masks[t] = holdout_folds(subs[t], holdout, doms, seed=random_state)
        if any(extrapolates(subs[t][~m], subs[t][m], size_column) for m in masks[t]):
            return None
        laws[t] = _law_of(out, t, doms, size_column)
    if progress:
        progress(f"held-out runs ({holdout}): refitting every fold of {len(targets)} loss(es) from the decision's fits")
    blind = compare(table, domains=doms, targets=targets, holdout=holdout, models="blind", size_column=size_column,
                    bootstrap=bootstrap, level=level, random_state=random_state)  # fmt: skip
    groups: dict[str, list[str]] = {}
    for t in targets:
        groups.setdefault(repr((laws[t].name, sorted((k, repr(v)) for k, v in laws[t].options.items()))), []).append(t)
    rows_of: dict[str, dict[str, Any]] = {}
    for ts in groups.values():
        rows_of |= _group(laws[ts[0]], ts, subs, masks, fits, out, bootstrap, level, random_state, max_iter)
    res = []
    for t, b in zip(targets, blind["targets"], strict=True):
        res.append({**b, "models": [rows_of[t], *b["models"]]})
    return {"holdout": holdout, "domains": doms, "bootstrap": int(bootstrap), "level": level, "targets": res,
            "method": WARM_NOTE}  # fmt: skip


def _group(
    law: Any, ts: list[str], subs: Mapping[str, pd.DataFrame], masks: Mapping[str, list[np.ndarray]],
    fits: Mapping[str, Any], out: Mapping[str, Any], bootstrap: int, level: float, seed: int, max_iter: int | None,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """The held-out rows of the targets ``ts`` of one law: their folds' refits in batched solves, one per shared
    input table (targets without missing values share it)."""
    import torch

    from mixlaw.fit.problem.data import FitData

    datas = {t: FitData(law, subs[t], target=t, group_column="run_id") for t in ts}
    x0 = datas[ts[0]].x
    same = all(d.x.keys() == x0.keys() and all(torch.equal(d.x[k], x0[k]) for k in x0) for d in datas.values())
    parts = [ts] if same else [[t] for t in ts]
    rows: dict[str, dict[str, Any]] = {}
    for part in parts:
        rows |= _solve_part(law, part, datas, subs, masks, fits, out, bootstrap, level, seed, max_iter)
    return rows


def _refit_rows(law: Any, x: Any, Y: np.ndarray, W: np.ndarray, S: np.ndarray, max_iter: int | None) -> tuple:
    """One batched refit of problems ``(Y[i], W[i])`` from ``S[i]``, with the rescue of failed ones (params, ok)."""
    from mixlaw.fit.solver.batch import threads
    from mixlaw.fit.solver.refits import _refit, rescue

    kw: dict[str, Any] = {"loss": "huber", "delta": None, "max_iter": max_iter, "stall_units": STALL_UNITS}
    with threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fold and resample fits: boundary notes are not the point
        params, ok, status, objective, ends = _refit(law, x, Y, W, S[:, None, :], **kw)
        rescue(law, x, Y, W, S, ends, (params, ok, status, objective), **kw)
    return params, ok & (W.sum(axis=1) > 0)


def _solve_part(
    law: Any, ts: list[str], datas: Mapping[str, Any], subs: Mapping[str, pd.DataFrame],
    masks: Mapping[str, list[np.ndarray]], fits: Mapping[str, Any], out: Mapping[str, Any], bootstrap: int,
    level: float, seed: int, max_iter: int | None,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    from mixlaw.decide.mixture.checks import metrics
    from mixlaw.decide.mixture.compare import interval_notes
    from mixlaw.decide.mixture.intervals import no_draws_reason, prediction_interval
    from mixlaw.fit.uncertainty.fitted import residual_sd
    from mixlaw.fit.uncertainty.resampling import resample_weights

    x = datas[ts[0]].x
    probs = [(t, f) for t in ts for f in range(len(masks[t]))]
    seeds = {t: np.asarray(law.to_internal(dict(fits[t]["params"])), dtype=np.float64) for t in ts}
    Y = [np.stack([datas[t].y for t, _ in probs])]
    W = [np.stack([(~masks[t][f]).astype(np.float64) for t, f in probs])]
    S = [np.stack([seeds[t] for t, _ in probs])]
    owner: list[int] = []
    rng = np.random.default_rng([seed, 1])
    for i, (t, f) in enumerate(probs if bootstrap else []):  # each fold's run bootstrap, in the same solve
        train = ~masks[t][f]
        runs = subs[t]["run_id"].to_numpy()
        if len(set(runs[train])) < 3:
            continue
        w = np.zeros((bootstrap, len(runs)))
        w[:, train] = resample_weights(pd.factorize(runs[train])[0], int(train.sum()), bootstrap, rng)
        W.append(w)
        Y.append(np.broadcast_to(datas[t].y, w.shape))
        S.append(np.broadcast_to(seeds[t], (bootstrap, seeds[t].size)))
        owner += [i] * bootstrap
    params, good = _refit_rows(law, x, np.concatenate(Y), np.concatenate(W), np.concatenate(S), max_iter)
    point, ok = params[: len(probs)], good[: len(probs)]
    own, bp, bok = np.asarray(owner, dtype=np.int64), params[len(probs) :], good[len(probs) :]
    draws: list[pd.DataFrame | None] = [None] * len(probs)
    for i in set(owner):
        draws[i] = pd.DataFrame(bp[(own == i) & bok], columns=list(law.flat_names)) if ok[i] else None
    result: dict[str, dict[str, Any]] = {}
    for t in ts:
        sub, obs = subs[t], datas[t].y
        pred, lo, hi = (np.full(len(sub), np.nan) for _ in range(3))
        notes: list[Any] = [None if bootstrap else "intervals off (--bootstrap 0)"] * len(sub)
        n_train: list[int] = []
        for f, m in enumerate(masks[t]):
            i = probs.index((t, f))
            train, test = sub[~m], sub[m]
            n_train.append(len(train))
            rows = np.flatnonzero(m)
            if not ok[i]:
                for r in rows:
                    notes[r] = "no prediction: the fold's refit failed"
                continue
            params = law.unflatten(point[i])
            xt = {name: test[name].to_numpy(dtype=np.float64) for name in law.inputs}
            pred[m] = np.asarray(law.evaluate(xt, params), dtype=np.float64).reshape(-1)
            if not bootstrap:
                continue
            from mixlaw.fit.problem.data import FitData

            sd = residual_sd(law, FitData(law, train, target=t, group_column=None), params)
            fold = _Fold(law, params, draws[i], bootstrap, sd, len(train))
            a, b, _, reason = prediction_interval(fold, xt, level, seed)
            lo[m], hi[m] = a, b
            n_draws = 0 if fold.bootstrap_params is None else int(fold.bootstrap_params.shape[0])
            for r, good in zip(rows, np.isfinite(a) & np.isfinite(b), strict=True):
                notes[r] = None if good else (reason or no_draws_reason(n_draws))
        idx = np.flatnonzero(np.any(np.stack(masks[t]), axis=0))
        has = np.isfinite(lo[idx]) & np.isfinite(hi[idx]) & np.isfinite(pred[idx])
        inside = (lo[idx] <= obs[idx]) & (obs[idx] <= hi[idx])
        for r, good in zip(idx, has, strict=True):
            notes[r] = None if good else notes[r] or "no interval (prediction or interval not finite)"
        label = str(out["law"]) + (f":k={out['camel_k'][t]['k']}" if t in (out.get("camel_k") or {}) else "")
        ids = [str(v) for v in sub["run_id"]]
        result[t] = {
            "model": label,
            "n_parameters": int(law.n_internal),
            "n_train": int(round(float(np.mean(n_train)))),
            "n_test": int(idx.size),
            "n_predicted": int(np.isfinite(pred[idx]).sum()),
            **metrics(pred[idx], obs[idx]),
            "coverage": float(inside[has].mean()) if has.any() else math.nan,
            "n_interval": int(has.sum()),
            "interval_method": "bootstrap (BC percentile); fold fits started from the decision's fit",
            "no_interval": interval_notes([notes[r] for r in idx], [ids[r] for r in idx]),
            "predictions": [{"run_id": ids[r], "predicted": float(pred[r]), "lo": float(lo[r]), "hi": float(hi[r]),
                             "observed": float(obs[r])} for r in idx],  # fmt: skip
        }
    return result
