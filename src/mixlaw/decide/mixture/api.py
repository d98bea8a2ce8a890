"""The logic behind ``mixlaw mix``: held-out comparison of mixture laws and the optimal mixture of a fitted law.

:func:`compare` fits each named model on the rows outside a holdout and predicts the holdout; :func:`optimize` fits
one mixture law and finds the best mixture at a target size under the constraints of
:class:`~mixlaw.decide.mixture.constraints.MixtureConstraints`, optionally with a bootstrap interval per weight.

Models of :func:`compare`: ``camel`` (size-aware; ``camel:k=3`` sets an option), ``dml`` (one mixture law per
model size: it has no size term) and ``blind`` (the mixture-blind baseline: the mean training loss at each size).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.constraints import MixtureConstraints
from mixlaw.decide.mixture.objective import FittedLaw, MixtureObjective
from mixlaw.decide.mixture.optimize import optimize_mixture
from mixlaw.errors import InputError

__all__ = ["MODELS", "check_mixture", "compare", "holdout_folds", "optimize", "parse_models", "metrics"]

MODELS = ("camel", "dml", "blind", "bimix", "mixture_additive", "mixture_joint", "repetition_aware", "regmix")
MIXTURE_ATOL = 1e-6


# ---------------------------------------------------------------------------------------------- input checks
def check_mixture(table: pd.DataFrame, domains: Sequence[str], source: str = "table") -> None:
    """Every domain has a ``w_<domain>`` column; weights are finite, non-negative and sum to 1 within 1e-6 per row."""
    doms = list(domains)
    if len(doms) < 2 or len(set(doms)) != len(doms):
        raise InputError(f"--domains: expected at least two distinct domains, got {','.join(doms) or 'none'}")
    have = [c for c in table.columns if str(c).startswith("w_")]
    for d in doms:
        if f"w_{d}" not in table.columns:
            raise InputError(
                f"--domains {d}: {source} has no column 'w_{d}' (mixture columns: {', '.join(have) or 'none'})"
            )
    cols = [f"w_{d}" for d in doms]
    w = table[cols].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
    rid = table["run_id"].astype(str).to_numpy() if "run_id" in table else None

    def where(i: int) -> str:
        return f"{source} row {i + 1}" + (f" (run {rid[i]})" if rid is not None else "")

    bad = np.argwhere(~np.isfinite(w) | (w < 0))
    if len(bad):
        i, j = (int(v) for v in bad[0])
        raise InputError(f"{where(i)}, column {cols[j]}: expected a finite non-negative weight, got {float(w[i, j])!r}")
    s = w.sum(axis=1)
    off = np.flatnonzero(np.abs(s - 1.0) > MIXTURE_ATOL)
    if off.size:
        i = int(off[0])
        raise InputError(f"{where(i)}: the weights {'+'.join(cols)} sum to {s[i]:.9g}, expected 1 within 1e-6")


def parse_models(text: str | Sequence[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """``"camel,camel:k=3,dml"`` → ``[(label, model, options), …]`` (``InputError`` on an unknown model)."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    if not items:
        raise InputError(f"--models: expected one or more of {', '.join(MODELS)}")
    out = []
    for item in items:
        name, _, rest = item.partition(":")
        if name not in MODELS:
            raise InputError(f"--models: unknown model '{name}'; known: {', '.join(MODELS)}")
        opts: dict[str, Any] = {}
        for kv in filter(None, rest.split(";")):
            if "=" not in kv:
                raise InputError(f"--models {item}: expected model:option=value, got {kv!r}")
            k, v = kv.split("=", 1)
            opts[k.strip()] = v.strip()
        out.append((item, name, opts))
    return out


def holdout_folds(table: pd.DataFrame, holdout: str, domains: Sequence[str], seed: int = 0) -> list[np.ndarray]:
    """Test-row masks: one for a filter expression (safe :mod:`mixlaw.expr` grammar), K for ``mixtures:K``."""
    if holdout.startswith("mixtures:"):
        try:
            k = int(holdout.split(":", 1)[1])
        except ValueError:
            raise InputError(f"--holdout {holdout}: expected mixtures:K with an integer K >= 2") from None
        key = table[[f"w_{d}" for d in domains]].round(9).astype(str).agg("|".join, axis=1)
        ids, uniq = pd.factorize(key)
        if not 2 <= k <= len(uniq):
            raise InputError(f"--holdout {holdout}: expected 2 <= K <= {len(uniq)} (the distinct mixtures)")
        perm = np.random.default_rng(seed).permutation(len(uniq))
        fold_of = np.empty(len(uniq), dtype=np.int64)
        fold_of[perm] = np.arange(len(uniq)) % k
        masks = [fold_of[ids] == f for f in range(k)]
    else:
        from mixlaw.expr import evaluate

        try:
            mask = evaluate(table, holdout, what="--holdout")
        except InputError as exc:
            raise InputError(f"--holdout {holdout!r}: {exc}") from None
        masks = [np.asarray(pd.Series(mask, index=table.index).astype(bool), dtype=bool)]
    for m in masks:
        if m.all():
            raise InputError(f"--holdout {holdout}: leaves no training rows")
        if not m.any():
            raise InputError(f"--holdout {holdout}: selects no test rows")
    return masks


# ---------------------------------------------------------------------------------------------- metrics
def metrics(pred: np.ndarray, obs: np.ndarray) -> dict[str, float]:
    """MAE, MRE (mean |p − o| / o), bias (signed mean relative error) and Spearman ρ over the finite predictions."""
    ok = np.isfinite(pred) & np.isfinite(obs)
    p, o = pred[ok], obs[ok]
    if not ok.any():
        return {"mae": math.nan, "mre": math.nan, "bias": math.nan, "spearman": math.nan}
    rel = (p - o) / np.abs(o)
    rho = math.nan
    if p.size >= 3 and np.ptp(p) > 0 and np.ptp(o) > 0:
        rp = pd.Series(p).rank().to_numpy()
        ro = pd.Series(o).rank().to_numpy()
        rho = float(np.corrcoef(rp, ro)[0, 1])
    return {
        "mae": float(np.mean(np.abs(p - o))),
        "mre": float(np.mean(np.abs(rel))),
        "bias": float(np.mean(rel)),
        "spearman": rho,
    }


# ---------------------------------------------------------------------------------------------- models
def _fit(law: Any, rows: pd.DataFrame, target: str, random_state: int) -> Any:
    from mixlaw.fit import fit_law
    from mixlaw.fit.refine import DECISION_MAX_ITER

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_law(law, rows, target=target, random_state=random_state, max_iter=DECISION_MAX_ITER)
    for w in caught:  # re-emit once, naming the model (boundary notes are expected on small fits)
        warnings.warn(f"{law.name} on {target}: {w.message}", w.category, stacklevel=3)
    return res


def _predict_model(
    name: str,
    opts: Mapping[str, Any],
    train: pd.DataFrame,
    test: pd.DataFrame,
    domains: Sequence[str],
    target: str,
    size_column: str,
    random_state: int,
) -> np.ndarray:
    from mixlaw.laws import describe_law, get_law

    out = np.full(len(test), np.nan)
    law = None
    if name not in ("blind", "regmix"):  # a registered law: give it the domains and size column it has options for
        schema = {o["name"] for o in describe_law(name)["options"]}
        given = {"domains": tuple(domains)} if "domains" in schema else {}
        law = get_law(name, **({"size": size_column} if "size" in schema else {}) | given | dict(opts))
        if size_column in law.inputs:  # size-aware: one fit over every training size
            return np.asarray(_fit(law, train, target, random_state).predict(test), dtype=np.float64)
    # Mixture laws without a size term, the surrogate and the blind baseline work per size (NaN at a size with no
    # training rows).
    sizes_tr = train[size_column].to_numpy() if size_column in train else np.zeros(len(train))
    sizes_te = test[size_column].to_numpy() if size_column in test else np.zeros(len(test))
    for s in np.unique(sizes_te):
        tr = train[sizes_tr == s]
        sel = sizes_te == s
        if len(tr) == 0:
            continue
        if name == "blind":
            out[sel] = float(tr[target].mean())
            continue
        if law is None:
            from mixlaw.surrogates import RegMix

            out[sel] = RegMix.from_options(tuple(domains), opts).fit(tr, target).predict(test[sel])
            continue
        if len(tr) <= law.n_internal:
            continue  # fewer training mixtures than parameters at this size: no prediction
        out[sel] = _fit(law, tr, target, random_state).predict(test[sel])
    return out


def compare(
    table: pd.DataFrame,
    *,
    domains: Sequence[str],
    targets: Sequence[str],
    holdout: str,
    models: str | Sequence[str] = "camel,dml,blind",
    size_column: str = "n_params",
    random_state: int = 0,
    source: str = "table",
) -> dict[str, Any]:
    """Fit each model on the rows outside the holdout, predict the holdout; one result per target.

    Returns ``{"targets": [{"target", "models": [{"model", "n_train", "n_test", "mae", "mre", "bias", "spearman",
    "coverage", "predictions": [{"run_id", "predicted", "lo", "hi", "observed"}]}]}]}``. Prediction intervals are
    not computed yet: ``lo``/``hi``/``coverage`` are NaN (``null`` in JSON).
    """
    doms = list(domains)
    check_mixture(table, doms, source)
    for t in targets:
        if t not in table.columns:
            raise InputError(f"--target {t}: {source} has no column '{t}'")
    if "camel" in str(models) and size_column not in table.columns:
        raise InputError(f"--size-column {size_column}: {source} has no column '{size_column}' (camel needs it)")
    parsed = parse_models(models)
    table = table.reset_index(drop=True)
    if "run_id" not in table.columns:
        table = table.assign(run_id=[f"row{i + 1}" for i in range(len(table))])
    masks = holdout_folds(table, holdout, doms, seed=random_state)
    out: list[dict[str, Any]] = []
    for target in targets:
        rows = []
        for label, name, opts in parsed:
            pred = np.full(len(table), np.nan)
            tested = np.zeros(len(table), dtype=bool)
            n_train = []
            for m in masks:
                train, test = table[~m], table[m]
                pred[m] = _predict_model(name, opts, train, test, doms, target, size_column, random_state)
                tested |= m
                n_train.append(len(train))
            obs = pd.to_numeric(table[target], errors="coerce").to_numpy(dtype=np.float64)
            idx = np.flatnonzero(tested)
            stats = metrics(pred[idx], obs[idx])
            rows.append(
                {
                    "model": label,
                    "n_train": int(round(float(np.mean(n_train)))),
                    "n_test": int(idx.size),
                    "n_predicted": int(np.isfinite(pred[idx]).sum()),
                    **stats,
                    "coverage": math.nan,
                    "predictions": [
                        {
                            "run_id": str(table["run_id"].iloc[i]),
                            "predicted": float(pred[i]),
                            "lo": math.nan,
                            "hi": math.nan,
                            "observed": float(obs[i]),
                        }
                        for i in idx
                    ],
                }
            )
        out.append({"target": target, "models": rows})
    return {"holdout": holdout, "domains": doms, "targets": out}


# ---------------------------------------------------------------------------------------------- optimise
def _fit_for_optimum(
    law_name: str,
    law_options: Mapping[str, Any],
    table: pd.DataFrame,
    domains: Sequence[str],
    target: str,
    size_column: str,
    random_state: int,
    starts: Any = None,
) -> Any:
    from mixlaw.fit import fit_law
    from mixlaw.laws import get_law

    opts = dict(law_options)
    opts.setdefault("domains", tuple(domains))
    if law_name == "camel":
        opts.setdefault("size", size_column)
    law = get_law(law_name, **opts)
    if any(c.startswith("w_") for c in law.inputs) is False:
        raise InputError(f"--law {law_name}: not a mixture law (it reads no w_<domain> column)")
    if starts is None:
        return _fit(law, table, target, random_state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resample fits: boundary notes are not the point
        return fit_law(law, table, target=target, random_state=random_state, starts=starts, use_grid=False, n_polish=1)


def optimize(
    table: pd.DataFrame,
    *,
    law: str = "camel",
    domains: Sequence[str],
    target: str | Sequence[str] = "loss",
    weights: Mapping[str, float] | None = None,
    target_size: float | None = None,
    size_column: str = "n_params",
    law_options: Mapping[str, Any] | None = None,
    constraints: Mapping[str, Any] | None = None,
    bootstrap: int = 0,
    level: float = 0.95,
    sizes: Sequence[float] | None = None,
    random_state: int = 0,
    source: str = "table",
) -> dict[str, Any]:
    """Fit ``law`` to each target loss and minimise the weighted sum of the predicted losses over feasible mixtures.

    ``target`` is one loss column or several; ``weights`` ``{target: a}`` (default 1 each) make the objective
    ``Σ a_v L_v(w)``. ``constraints`` are :class:`MixtureConstraints` keywords (``caps``, ``floors``, ``fixed``,
    ``max_epochs``, ``unique_tokens``, ``target_tokens``, ``prior``, ``kl_max``, ``kl_weight``). With
    ``bootstrap = B``, the laws are refitted (from the point estimates) on ``B`` resamples of the runs (whole
    mixtures enter or leave together) and the mixture re-optimised for each; the result carries a percentile
    interval per weight and for the objective. ``sizes``: the optimum re-computed at each of these target sizes
    (``vs_size``, the optimal mixture against model size; a size-aware law only).
    """
    doms = list(domains)
    targets = [target] if isinstance(target, str) else list(target)
    check_mixture(table, doms, source)
    for t in targets:
        if t not in table.columns:
            raise InputError(f"--target {t}: {source} has no column '{t}'")
    loss_weights = {t: 1.0 for t in targets} if not weights else dict(weights)
    unknown = [t for t in loss_weights if t not in targets]
    if unknown:
        raise InputError(f"--weights {unknown[0]}: not one of the --target columns ({', '.join(targets)})")
    cons = MixtureConstraints(tuple(doms), **dict(constraints or {}))  # infeasible boxes fail before any fit
    table = table.reset_index(drop=True)
    if "run_id" not in table.columns:
        table = table.assign(run_id=[f"row{i + 1}" for i in range(len(table))])
    fits = {t: _fit_for_optimum(law, law_options or {}, table, doms, t, size_column, random_state) for t in targets}
    fixed_inputs: dict[str, float] = {}
    for c in next(iter(fits.values())).law.inputs:
        if c.startswith("w_"):
            continue
        if target_size is None:
            raise InputError(f"--target-size: law '{law}' needs the target model size (its input '{c}')")
        fixed_inputs[c] = float(target_size)

    def objective_of(results: Mapping[str, Any], at: Mapping[str, float] = fixed_inputs) -> MixtureObjective:
        laws = {t: FittedLaw.from_result(r) for t, r in results.items()}
        return MixtureObjective(tuple(doms), laws, loss_weights=loss_weights, fixed_inputs=at)

    objective = objective_of(fits)
    opt = optimize_mixture(objective, cons, random_state=random_state)
    first = next(iter(fits.values()))
    out: dict[str, Any] = {
        "law": law,
        "law_options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in first.law_options.items()},
        "targets": targets,
        "loss_weights": loss_weights,
        "target_size": target_size,
        "fits": {t: {"params": r.params, "n_points": r.n_points, "status": str(r.status)} for t, r in fits.items()},
        **opt.to_dict(),
        **objective.report(opt.w),
    }
    if sizes:
        if not fixed_inputs:
            raise InputError(f"--sizes: law '{law}' has no size input, its optimum does not depend on size")
        out["vs_size"] = []
        for m in sizes:
            om = optimize_mixture(objective_of(fits, dict.fromkeys(fixed_inputs, float(m))), cons, n_dirichlet=16)
            out["vs_size"].append({"size": float(m), "weights": om.weights, "objective": om.objective})
    if bootstrap:
        rng = np.random.default_rng(random_state + 1)
        key = table[[f"w_{d}" for d in doms]].round(9).astype(str).agg("|".join, axis=1)
        ids, uniq = pd.factorize(key)
        groups = [np.flatnonzero(ids == g) for g in range(len(uniq))]
        W, J = [], []
        for b in range(int(bootstrap)):
            pick = rng.integers(0, len(groups), len(groups))
            rows = table.iloc[np.concatenate([groups[g] for g in pick])].reset_index(drop=True)
            rows = rows.assign(run_id=[f"b{b}_{i}" for i in range(len(rows))])
            try:
                refits = {
                    t: _fit_for_optimum(law, law_options or {}, rows, doms, t, size_column, random_state, [r.params])
                    for t, r in fits.items()
                }
                ob = optimize_mixture(objective_of(refits), cons, n_dirichlet=8, random_state=random_state + b)
            except (InputError, ValueError, RuntimeError):
                continue
            W.append(ob.w)
            J.append(ob.objective)
        out["bootstrap"] = _intervals(np.array(W), np.array(J), doms, int(bootstrap), level)
    return out


def _intervals(W: np.ndarray, J: np.ndarray, doms: list[str], n: int, level: float) -> dict[str, Any]:
    if len(W) == 0:
        return {"n": 0, "n_failed": n}
    a = (1 - level) / 2
    return {
        "n": len(W),
        "n_failed": n - len(W),
        "level": level,
        "weights": {
            d: [float(np.quantile(W[:, j], a)), float(np.quantile(W[:, j], 1 - a))] for j, d in enumerate(doms)
        },
        "objective": [float(np.quantile(J, a)), float(np.quantile(J, 1 - a))],
    }
