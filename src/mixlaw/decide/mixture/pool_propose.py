"""``mix optimize --law causalmix``: the best mixture for a *new* data pool from runs in several pools.

The pool-aware surrogate (:mod:`mixlaw.surrogates.causalmix`, the R-learner with pool fixed effects) is fitted per
target loss on runs that carry a pool column (``pool``; law option ``pool=<column>``) and pool statistics
(covariates, constant within a pool: per-domain unique tokens, duplication rate, a quality proxy …; from the table
or joined by ``--meta``). The new pool, the law option ``new_pool``, is given by its statistics (``{stat: value}``,
``--pool-stats``) or by the name of a pool of the table (``--pool NAME``). The proposal minimises
``Σ_v a_v θ_v(X*)ᵀ φ(w)`` on the constraints' box (the pool level ``g(X*)`` does not move the mixture); predicted
losses add ``ĝ_v(X*)``.

Candidates (uniform, natural, named mixtures) are predicted by the same fits at the same pool. ``natural`` is the new
pool's own token shares when its statistics carry ``pool_tokens_<d>`` or ``unique_tokens_<d>`` for every domain.

Intervals (``bootstrap = B``): the *pools* are resampled ``B`` times (each pool's runs enter or leave together), the
surrogate is refitted and the mixture re-proposed on each; a candidate's paired regret is evaluated under the same
resampled fit. They carry the effects' estimation error across pools, not the error of extrapolating to a pool whose
statistics lie outside the fitted ones (``extrapolation`` names those) nor that of a misspecified effect model.
``pool_holdout``: leave-one-pool-out errors of the predicted losses, the check a user can read before trusting it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.checks import target_rows
from mixlaw.decide.mixture.constraints import MixtureConstraints
from mixlaw.decide.mixture.intervals import MIN_DRAWS
from mixlaw.errors import InputError

__all__ = ["propose_for_pool", "resolve_pool"]

#: Law options of ``--law causalmix`` (``--law-option key=value``).
OPTIONS = ("new_pool", "pool", "covariates", "nuisance", "ridge")
_SKIP = ("run_id", "_mixture", "step", "seed")


def resolve_pool(
    table: pd.DataFrame, pool_col: str, covariates: str | None, pool: Mapping[str, float] | str | None,
    skip: list[str],
) -> tuple[str | None, dict[str, float], tuple[str, ...]]:  # fmt: skip
    """``(pool name or None, the new pool's statistics, the covariates)`` with one-line errors.

    Covariates: the law option ``covariates`` (``;``-separated), else the keys of ``--pool-stats``, else (``--pool
    NAME``) every numeric column constant within each pool that differs between pools (``skip`` and ``w_*`` aside).
    """
    if pool_col not in table.columns:
        raise InputError(f"--law causalmix: the table has no pool column '{pool_col}' (--law-option pool=<column>)")
    if pool is None or (isinstance(pool, Mapping) and not pool):
        raise InputError("--law causalmix: name the new pool, --pool-stats stat=value,... or --pool NAME")
    pools = table[pool_col].astype(str)
    covs = tuple(c.strip() for c in str(covariates or "").split(";") if c.strip())
    if isinstance(pool, str):
        if pool not in set(pools):
            known = ", ".join(sorted(set(pools))[:8])
            raise InputError(f"--pool {pool}: no such pool in column '{pool_col}' (pools: {known})")
        if not covs:
            covs = _pool_constant_columns(table, pools, skip)
            if not covs:
                raise InputError("--pool: no pool-statistic column (numeric, constant within each pool, differing "
                                 "between pools); name them with --law-option covariates=a;b")  # fmt: skip
        row = table[pools == pool].iloc[0]
        stats = {c: float(row[c]) for c in covs if c in table.columns}
    else:
        stats = {str(k): float(v) for k, v in pool.items()}
        covs = covs or tuple(stats)
    missing = [c for c in covs if c not in table.columns]
    if missing:
        raise InputError(f"--law causalmix: the table has no pool-statistic column '{missing[0]}' (add it or --meta)")
    absent = [c for c in covs if c not in stats]
    if absent:
        raise InputError(f"--pool-stats: missing {', '.join(absent)} (a covariate of the fit)")
    bad = [c for c in covs if not np.isfinite(stats[c])]
    if bad:
        raise InputError(f"--pool-stats {bad[0]}: expected a finite number")
    return (pool if isinstance(pool, str) else None), stats, covs


def _pool_constant_columns(table: pd.DataFrame, pools: pd.Series, skip: list[str]) -> tuple[str, ...]:
    out = []
    for c in table.columns:
        c = str(c)
        if c in skip or c.startswith("w_") or not pd.api.types.is_numeric_dtype(table[c]):
            continue
        g = table[c].groupby(pools)
        if bool((g.nunique(dropna=False) == 1).all()) and g.first().nunique() > 1:
            out.append(c)
    return tuple(out)


def _fits(table: pd.DataFrame, opts: Any, targets: list[str]) -> dict[str, Any]:
    from dataclasses import replace

    from mixlaw.surrogates.causalmix import CausalMix

    return {t: CausalMix(replace(opts, target=t)).fit(target_rows(table, t)[0]) for t in targets}


def _theta(fits: Mapping[str, Any], loss_w: Mapping[str, float], x: np.ndarray) -> np.ndarray:
    return sum(float(loss_w.get(t, 0.0)) * f.theta(x)[0] for t, f in fits.items())  # type: ignore[return-value]


def _predict(fits: Mapping[str, Any], stats: Mapping[str, float], w: np.ndarray, doms: list[str]) -> dict[str, float]:
    frame = pd.DataFrame([{**stats, **{f"w_{d}": float(v) for d, v in zip(doms, w, strict=True)}}])
    return {t: float(f.predict(frame)[0]) for t, f in fits.items()}


def _token_counts(table: pd.DataFrame, pool_col: str, name: str | None, stats: Mapping[str, float]) -> dict[str, float]:
    """The new pool's ``pool_tokens_<d>`` / ``unique_tokens_<d>``: from ``--pool-stats``, or the named pool's rows."""
    if name is None:
        return dict(stats)
    row = table[table[pool_col].astype(str) == name].iloc[0]
    cols = [str(c) for c in table.columns if str(c).startswith(("pool_tokens_", "unique_tokens_"))]
    return {c: float(row[c]) for c in cols if np.isfinite(pd.to_numeric(row[c]))}


def _pool_repetition(cons: MixtureConstraints, table: pd.DataFrame,
                     counts: Mapping[str, float]) -> tuple[MixtureConstraints, str | None]:  # fmt: skip
    """Repetition limits (``--max-epochs``) at the *new* pool: its ``unique_tokens_<d>`` replace the table's largest
    (what the limits default to), never a ``--unique-tokens`` the user gave."""
    from dataclasses import replace

    from mixlaw.decide.mixture.targets import unique_tokens_from_table

    if not cons.max_epochs:
        return cons, None
    try:
        from_table = unique_tokens_from_table(table, list(cons.unique_tokens))
    except InputError:
        from_table = {}
    if dict(cons.unique_tokens) != from_table:
        return cons, "--unique-tokens"
    new = {d: counts.get(f"unique_tokens_{d}", u) for d, u in cons.unique_tokens.items()}
    if new == dict(cons.unique_tokens):
        return cons, "the table's unique_tokens_<d> (largest)"
    return replace(cons, unique_tokens=new), "the new pool's unique_tokens_<d>"


def _natural(stats: Mapping[str, float], doms: list[str]) -> np.ndarray | None:
    for prefix in ("pool_tokens_", "unique_tokens_"):
        v = [stats.get(f"{prefix}{d}") for d in doms]
        if all(x is not None and x > 0 for x in v):
            a = np.array(v, dtype=np.float64)
            return a / a.sum()
    return None


def propose_for_pool(
    table: pd.DataFrame, *, opts: Mapping[str, Any], doms: list[str],
    targets: list[str], loss_w: Mapping[str, float], cons: MixtureConstraints, cands: Mapping[str, np.ndarray],
    level: float, bootstrap: int, random_state: int, target_size: float | None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The ``mix optimize`` result for ``--law causalmix`` (module docstring); the same shape as the other laws'."""
    from mixlaw.surrogates.causalmix import CausalMixOptions, minimise_on_box

    unknown = sorted(set(opts) - set(OPTIONS))
    if unknown:
        raise InputError(f"--law-option {unknown[0]}: causalmix takes {', '.join(OPTIONS)}")
    if cons.kl_max is not None or cons.kl_weight:
        raise InputError("--law causalmix: --kl-max/--kl-weight are not supported (caps, floors, --fix, repetition)")
    pool_col = str(opts.get("pool", "pool"))
    pool = opts.get("new_pool")
    pool = str(pool) if pool is not None and not isinstance(pool, Mapping) else pool
    skip = [*_SKIP, pool_col, *targets]
    name, stats, covs = resolve_pool(table, pool_col, opts.get("covariates"), pool, skip)
    unused = [c for c in _pool_constant_columns(table, table[pool_col].astype(str), skip) if c not in covs]
    co = CausalMixOptions(tuple(doms), covs, targets[0], pool_col, str(opts.get("nuisance", "ridge")),
                          float(opts.get("ridge", 1e-4)))  # fmt: skip
    if progress:
        progress(f"causalmix: fitting {len(targets)} surrogate(s) on {table[pool_col].nunique()} pools")
    fits = _fits(table, co, targets)
    x = np.array([[stats[c] for c in covs]])
    counts = _token_counts(table, pool_col, name, stats)
    cons, u_source = _pool_repetition(cons, table, counts)
    lo, hi = cons.bounds()
    w = minimise_on_box(_theta(fits, loss_w, x), lo, hi, seed=random_state)
    pred = _predict(fits, stats, w, doms)
    obj = float(sum(float(loss_w.get(t, 0.0)) * v for t, v in pred.items()))
    f0 = next(iter(fits.values()))
    trained = table.groupby(table[pool_col].astype(str))[list(covs)].first()
    rng_of = {c: [float(trained[c].min()), float(trained[c].max())] for c in covs}
    far = [f"{c} = {stats[c]:.4g} outside the fitted pools' {a:.4g}–{b:.4g}" for c, (a, b) in rng_of.items()
           if not a - 1e-12 * abs(a) <= stats[c] <= b + 1e-12 * abs(b)]  # fmt: skip
    nat = _natural(counts, doms)
    cands = dict(cands)
    natural_source = None
    if "natural" in cands:
        natural_source = "the new pool's token shares" if nat is not None else "the table's largest token counts"
        if nat is not None:
            cands["natural"] = nat
    out: dict[str, Any] = {
        "law": "causalmix",
        "law_options": {**opts, "covariates": list(covs), "pool": pool_col, "new_pool": name or stats},
        "targets": targets, "goal": "minimise weighted loss", "objective_preset": None, "loss_weights": dict(loss_w),
        "benchmark_weights": {}, "target_size": target_size,
        "fits": {t: {"law": "causalmix", "n_rows": f.n_runs, "n_pools": f.n_pools} for t, f in fits.items()},
        "weights": dict(zip(doms, map(float, w), strict=True)), "objective": obj, "score": obj,
        "penalised_objective": obj, "active_constraints": cons.active(w), "kkt": None, "predicted_losses": pred,
        "predicted_accuracies": {}, "domains": doms, "n_starts": 16, "n_feasible": 0, "n_distinct": 1,
        "extrapolation": {t: "; ".join(far) for t in targets} if far else {},
        "pool": {"name": name, "statistics": stats, "covariates": list(covs), "in_training": name is not None,
                 "n_pools": f0.n_pools, "n_runs": f0.n_runs, "fitted_range": rng_of,
                 "natural": natural_source, "unused_pool_columns": unused,
                 "repetition_unique_tokens": u_source},
        "shares_vs_statistic": _curves(fits, loss_w, stats, covs, rng_of, lo, hi, doms, minimise_on_box),
        "pool_holdout": _pool_holdout(table, co, targets, pool_col),
    }  # fmt: skip
    boot = _bootstrap(table, co, targets, loss_w, x, stats, lo, hi, w, cands, pool_col, bootstrap, random_state,
                      doms, progress) if bootstrap else None  # fmt: skip
    band: dict[str, list[float] | None] = {}
    obj_iv = None
    if boot is not None and len(boot["objective"]) >= MIN_DRAWS:
        band = {d: _ends(boot["weights"][:, j], float(w[j]), level) for j, d in enumerate(doms)}
        obj_iv = _ends(boot["objective"], obj, level)
    if boot is not None and (obj_iv is None or any(v is None for v in band.values())):
        # too few usable resamples (or all identical): no interval, and the result says so
        out["bootstrap"] = {"n": 0, "n_failed": boot["n_failed"], "level": level, "resample": "pools"}
        boot = None
    if cands:
        out["candidates"] = []
        for name_c, cw in cands.items():
            pl = _predict(fits, stats, np.asarray(cw), doms)
            j = float(sum(float(loss_w.get(t, 0.0)) * v for t, v in pl.items()))
            c: dict[str, Any] = {"name": name_c, "weights": dict(zip(doms, map(float, cw), strict=True)),
                                 "objective": j, "score": j, "regret": j - obj, "predicted_losses": pl,
                                 "predicted_accuracies": {}}  # fmt: skip
            if boot is not None and name_c in boot["regrets"]:
                r = np.asarray(boot["regrets"].pop(name_c))
                c["regret_interval"] = _ends(r, j - obj, level)
                c["p_better_than_chosen"] = float(np.mean(r < 0))
            out["candidates"].append(c)
        from mixlaw.decide.mixture.verdict import verdict_of

        out["verdicts"] = [verdict_of(c, level).to_dict() for c in out["candidates"]]
    if boot is not None:
        out["bootstrap"] = {"n": boot["n"], "n_failed": boot["n_failed"], "level": level, "resample": "pools",
                            "weights": band, "objective": obj_iv}  # fmt: skip
    note = (f"{boot['n']} resamples of the {f0.n_pools} pools: the effects' estimation error, not a new pool's "
            "extrapolation error" if boot else "no interval: the regret is a point value (--bootstrap resamples "
            "the pools)")  # fmt: skip
    where = f"pool {name}" if name else "the pool of --pool-stats"
    out["proposer"] = {
        "method": "causalmix", "interval": note,
        "text": f"proposal: the mixture minimising the weighted CATE model θ(X*)ᵀφ(w) at {where} ("
                + ", ".join(f"{c}={stats[c]:.4g}" for c in covs) + f"; R-learner on {f0.n_runs} runs in "
                f"{f0.n_pools} pools); intervals: {note}"
                + (f"; pool-constant columns not used as covariates: {', '.join(unused)}" if unused else ""),
    }  # fmt: skip
    return out


def _ends(sample: np.ndarray, point: float, level: float) -> list[float] | None:
    from mixlaw.decide.mixture.intervals import bc_ends

    lo, hi, _ = bc_ends(np.asarray(sample, dtype=np.float64)[:, None], np.array([point]), level)
    return None if not (np.isfinite(lo[0]) and np.isfinite(hi[0])) else [float(lo[0]), float(hi[0])]


def _curves(fits: Mapping[str, Any], loss_w: Mapping[str, float], stats: Mapping[str, float], covs: tuple[str, ...],
            rng_of: Mapping[str, list[float]], lo: np.ndarray, hi: np.ndarray, doms: list[str],
            minimise: Callable[..., np.ndarray], n: int = 9) -> dict[str, Any]:  # fmt: skip
    """For each pool statistic: the proposed shares over its fitted range (and the new value), the others held."""
    out = {}
    for c in covs:
        a, b = min(rng_of[c][0], stats[c]), max(rng_of[c][1], stats[c])
        vals = np.unique(np.append(np.linspace(a, b, n), stats[c]))
        rows = []
        for v in vals:
            xs = np.array([[v if k == c else stats[k] for k in covs]])
            rows.append(minimise(_theta(fits, loss_w, xs), lo, hi, n_starts=6))
        sh = np.array(rows)
        out[c] = {"values": [float(v) for v in vals], "at": float(stats[c]),
                  "shares": {d: [float(s) for s in sh[:, j]] for j, d in enumerate(doms)}}  # fmt: skip
    return out


def _pool_holdout(table: pd.DataFrame, co: Any, targets: list[str], pool_col: str) -> list[dict[str, Any]]:
    """Leave-one-pool-out: each pool's runs predicted by the fit on the others (MAE, within-pool Spearman)."""
    pools = table[pool_col].astype(str)
    names = sorted(set(pools))
    if len(names) < 3:
        return []
    out = []
    for p in names:
        fits = _fits(table[pools != p], co, targets)
        for t, f in fits.items():
            rows = target_rows(table[pools == p], t)[0]
            pred = f.predict(rows)
            obs = rows[t].to_numpy(dtype=np.float64)
            rho = float(pd.Series(pred).corr(pd.Series(obs), method="spearman")) if len(obs) >= 3 else float("nan")
            out.append({"pool": p, "target": t, "n_runs": int(len(obs)), "mae": float(np.mean(np.abs(pred - obs))),
                        "bias": float(np.mean(pred - obs)), "spearman": rho})  # fmt: skip
    return out


def _bootstrap(table: pd.DataFrame, co: Any, targets: list[str], loss_w: Mapping[str, float], x: np.ndarray,
               stats: Mapping[str, float], lo: np.ndarray, hi: np.ndarray, w: np.ndarray,
               cands: Mapping[str, np.ndarray], pool_col: str, n: int, seed: int, doms: list[str],
               progress: Callable[[str], None] | None) -> dict[str, Any]:  # fmt: skip
    """Resample the pools ``n`` times: the re-proposed weights, the objective at the chosen mixture and each
    candidate's paired regret under the same resampled fits."""
    from mixlaw.surrogates.causalmix import minimise_on_box, treatment_features

    if progress:
        progress(f"causalmix: refitting on {n} resamples of the pools")
    pools = table[pool_col].astype(str).to_numpy()
    names = np.array(sorted(set(pools)))
    groups = {p: table[pools == p] for p in names}
    rng = np.random.default_rng(seed)
    ws, objs, failed = [], [], 0
    regrets: dict[str, list[float]] = {c: [] for c in cands}
    phi_w = treatment_features(w[None, :])[0]
    for _ in range(n):
        pick = rng.choice(names, size=names.size, replace=True)
        parts = [groups[p].assign(**{pool_col: f"{p}#{i}"}) for i, p in enumerate(pick)]
        try:
            fits = _fits(pd.concat(parts, ignore_index=True), co, targets)
        except (InputError, np.linalg.LinAlgError):
            failed += 1
            continue
        th = _theta(fits, loss_w, x)
        ws.append(minimise_on_box(th, lo, hi, n_starts=6))
        pl = _predict(fits, stats, w, doms)
        objs.append(sum(float(loss_w.get(t, 0.0)) * v for t, v in pl.items()))
        for c, cw in cands.items():
            regrets[c].append(float(th @ (treatment_features(np.asarray(cw)[None, :])[0] - phi_w)))
    return {"n": n, "n_failed": failed, "weights": np.array(ws).reshape(-1, len(doms)), "objective": np.array(objs),
            "regrets": regrets}  # fmt: skip
