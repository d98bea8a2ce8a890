"""The logic behind ``mixlaw mix``: held-out comparison of mixture laws and the optimal mixture of a fitted law.

:func:`compare` fits each named model on the rows outside a holdout and predicts the holdout; :func:`optimize` fits
one mixture law and finds the best mixture at a target size under the constraints of
:class:`~mixlaw.decide.mixture.constraints.MixtureConstraints`, optionally with a bootstrap interval per weight.

Models of :func:`compare`: ``camel`` (size-aware; ``camel:k=3`` sets an option), ``dml`` (one mixture law per
model size: it has no size term) and ``blind`` (the mixture-blind baseline: the mean training loss at each size).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.checks import check_mixture, holdout_folds, load_runs, metrics, mixture_groups
from mixlaw.decide.mixture.compare import compare, parse_models
from mixlaw.decide.mixture.constraints import MixtureConstraints
from mixlaw.decide.mixture.objective import FittedLaw, MixtureObjective
from mixlaw.decide.mixture.optimize import optimize_mixture
from mixlaw.errors import InputError

__all__ = [
    "check_mixture",
    "compare",
    "holdout_folds",
    "load_runs",
    "metrics",
    "mixture_groups",
    "optimize",
    "parse_models",
]


def _fit(law: Any, rows: pd.DataFrame, target: str, random_state: int) -> Any:
    from mixlaw.fit import fit_law
    from mixlaw.fit.refine import DECISION_MAX_ITER

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_law(law, rows, target=target, random_state=random_state, max_iter=DECISION_MAX_ITER)
    for w in caught:  # re-emit once, naming the law (boundary notes are expected on small fits)
        warnings.warn(f"{law.name} on {target}: {w.message}", w.category, stacklevel=3)
    return res


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
