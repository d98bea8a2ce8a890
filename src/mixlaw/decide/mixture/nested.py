"""The nested step → size → mixture pipeline of Data Mixing Laws (laws.md §7.2): a mixture law at a target (N, S).

Ye et al., "Data Mixing Laws", arXiv:2403.16952, §4 (ICLR 2025). For every training mixture ``r`` and every
model size ``N < N*`` with runs up to ``S_fit`` steps:

1. **step law** ``L(S) = E + B S^(−β)`` (``power_law`` over the step column) fitted on that run's checkpoints with
   ``step <= S_fit``, extrapolated to the target step ``S*``;
2. **size law** ``L(N) = E + A N^(−α)`` (``power_law`` over the size column) fitted over the sizes' step-law
   predictions at ``S*``, extrapolated to ``N*``;
3. **mixture law** (``dml`` by default, ``L(r) = c + k exp(Σ_j t_j r_j)``) fitted on the predicted ``(r, L̂(N*, S*))``
   of every mixture: the law of the target model, from which any mixture is predicted (or optimised). Any law of the
   mixture alone works (``dml_implicit``), and so does the surrogate ``dml_mlp``: the released pipeline's last stage
   (boosted implicit MLPs, laws.md §7.3; its options through ``law_options``, e.g. ``{"protocol": "released"}``).
   ``mixture_law.estimator`` in the result names what ran.

Choices (laws.md §7.3 leaves them open or differs): every fit is the engine's robust fit (Huber δ = 1e-3 on log
losses) from the laws' own start designs, not the paper's raw-space L-BFGS with held-out snapshot selection; the step
and size exponents are fitted per curve, not tied. A curve with fewer distinct points than its law has parameters
plus one is skipped and counted. ``tie_size_exponent=True`` is the paper's ``--tie_alpha all`` size law instead: one
exponent α shared by every mixture's size curve (:func:`tied_size_law`), each curve's ``E, A >= 0`` by non-negative
least squares given α — 4 sizes per mixture leave a free exponent per curve badly fixed. Where the table has
observed runs at ``(N*, S*)``, they are predicted and scored (``validation``): the rows at the target size are never
used by the fits.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.checks import check_mixture, metrics, mixture_groups, target_rows
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, FitOptions, SolverOptions, StartOptions

__all__ = ["nested", "tied_size_law"]

#: Iterations of the second, batched attempt on the curves whose first batched fit ran out of iterations (when the
#: solver options set no cap: :class:`~mixlaw.options.SolverOptions`).
FALLBACK_ITER = 3000


def _fit_predict(
    law: Any, rows: pd.DataFrame, target: str, at: Mapping[str, float], seed: int, solver: SolverOptions
) -> tuple[float, Any]:
    from mixlaw.fit import fit_law

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # boundary notes on 4-10 point curves are expected; statuses are returned
        res = fit_law(
            law,
            rows,
            FitOptions(starts=StartOptions(n_polish=2), solver=solver, seed=seed),
            target=target,
        )
    x = pd.DataFrame({k: [float(v)] for k, v in at.items()})
    return float(res.predict(x)[0]), res


def _curves(
    law: Any, x_col: str, curves: Mapping[Any, pd.Series], target: str, at: float, seed: int, unfinished: list[Any],
    solver: SolverOptions,
) -> dict[Any, float]:  # fmt: skip
    """Fit ``law`` (one input ``x_col``) to each curve ``{key: Series(y, index=x)}`` and predict each at ``at``.

    Curves that share their x values are fitted in one batched solve (:func:`mixlaw.fit.fit_batch`), started from
    the fit of their mean curve; a resulting problem without a usable estimate is refitted on its own under the
    adaptive limit, and if that fit does not finish either (converged or stalled) its key is appended to
    ``unfinished`` (its prediction is still used, and counted). Every fit is capped by ``solver``."""
    from mixlaw.fit import fit_batch

    out: dict[Any, float] = {}
    by_x: dict[tuple[float, ...], list[Any]] = {}
    for key, c in curves.items():
        by_x.setdefault(tuple(float(v) for v in c.index), []).append(key)
    for xs, keys in by_x.items():
        x = pd.DataFrame({x_col: np.array(xs)})
        Y = np.stack([curves[k].to_numpy(dtype=np.float64) for k in keys])
        _, mean_fit = _fit_predict(law, x.assign(**{target: Y.mean(axis=0)}), target, {x_col: at}, seed, solver)
        batch = fit_batch(law, x, Y, starts=[[mean_fit.params] for _ in keys], max_iter=solver.cap(None))
        params = [batch.row(b) for b in range(len(keys))]
        failed = [b for b, p in enumerate(params) if p is None]
        if failed:  # a flat valley (4 points, 3 parameters) runs out of iterations: all of them again, longer
            again = fit_batch(
                law, x, Y[failed], starts=[[mean_fit.params] for _ in failed], max_iter=solver.cap(FALLBACK_ITER)
            )
            for i, b in enumerate(failed):
                params[b] = again.row(i)
        for b, key in enumerate(keys):
            if params[b] is None:
                out[key], done = _fit_one(law, x.assign(**{target: Y[b]}), target, {x_col: at}, mean_fit.params, seed,
                                          solver)  # fmt: skip
                if not done:
                    unfinished.append(key)
            else:
                out[key] = float(law.evaluate({x_col: np.array([float(at)])}, params[b])[0])
    return out


def _fit_one(
    law: Any, rows: pd.DataFrame, target: str, at: Mapping[str, float], start: Any, seed: int, solver: SolverOptions
) -> tuple[float, bool]:
    """The last resort of :func:`_curves`: one robust fit from the mean curve's estimate under the adaptive limit.
    Returns its prediction and whether it finished (converged or stalled)."""
    from mixlaw.fit import fit_law

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_law(
            law,
            rows,
            FitOptions(
                starts=StartOptions(given=[start], use_grid=False, n_polish=1),
                solver=solver,
                seed=seed,
            ),
            target=target,
        )
    done = res.starts["status"].isin(["converged", "stalled"]).any()
    return float(res.predict(pd.DataFrame({k: [float(v)] for k, v in at.items()}))[0]), bool(done)


def _mixture_stage(
    name: str,
    options: Mapping[str, Any],
    doms: Sequence[str],
    size_column: str,
    mtab: pd.DataFrame,
    target: str,
    seed: int,
    solver: SolverOptions,
) -> tuple[Any, dict[str, Any]]:
    """The last stage on the predicted ``(r, L̂)`` of every mixture: a registered law of the mixture alone (the
    engine's fit), or a surrogate (``dml_mlp``: the released pipeline's boosted MLPs). Returns the fitted object (it
    has ``predict``) and the result's ``mixture_law`` entry, which names the estimator that ran."""  # fmt: skip
    from mixlaw.decide.mixture.compare import build_model
    from mixlaw.surrogates import SURROGATES, build_surrogate

    if name in SURROGATES:
        spec = build_surrogate(name, doms, options)
        fit = spec.fit(mtab, target)
        what = spec.describe() if hasattr(spec, "describe") else name
        return fit, {"law": name, "estimator": what, "params": None, "status": "fitted", "info": dict(fit.info)}
    law = build_model(name, options, doms, size_column)
    if any(not str(c).startswith("w_") for c in law.inputs):
        raise InputError(f"--law {name}: the nested pipeline needs a law of the mixture alone (like dml)")
    if len(mtab) <= law.n_internal:
        raise InputError(
            f"the nested pipeline predicted {len(mtab)} mixture(s) at the target; the mixture law "
            f"'{name}' needs more than {law.n_internal}"
        )
    _, mres = _fit_predict(law, mtab, target, {f"w_{d}": 1.0 / len(doms) for d in doms}, seed, solver)
    return mres, {"law": name, "estimator": f"{name} (closed form, the engine's fit)", "params": mres.params,
                  "status": str(mres.status)}  # fmt: skip


def tied_size_law(sizes: np.ndarray, Y: np.ndarray, at: float) -> tuple[np.ndarray, float, float]:
    """``L_m(N) = E_m + A_m N^(−α)`` with one α for every row ``m`` of ``Y`` (losses at ``sizes``), least squares.

    Variable projection: for a given α each curve is linear in ``(E_m, A_m)`` (non-negative least squares); α
    minimises the total squared error (a grid over [0.01, 3], then a bounded scalar search around its best point).
    Returns ``(predictions at N = at, α, residual RMS)``.
    """
    from scipy.optimize import minimize_scalar, nnls

    n = np.asarray(sizes, dtype=np.float64)
    scale = float(np.exp(np.mean(np.log(n))))  # N / its geometric mean: a well-scaled design for every α

    def coefs(alpha: float) -> tuple[np.ndarray, float]:
        X = np.column_stack([np.ones_like(n), (n / scale) ** -alpha])
        fits = [nnls(X, y) for y in Y]
        return np.array([f[0] for f in fits]), float(sum(f[1] ** 2 for f in fits))

    grid = np.linspace(0.01, 3.0, 300)
    best = float(grid[int(np.argmin([coefs(a)[1] for a in grid]))])
    step = float(grid[1] - grid[0])
    res = minimize_scalar(lambda a: coefs(a)[1], bounds=(max(1e-3, best - step), best + step), method="bounded")
    alpha = float(res.x) if res.fun <= coefs(best)[1] else best
    c, sse = coefs(alpha)
    pred = c[:, 0] + c[:, 1] * (float(at) / scale) ** -alpha
    return pred, alpha, float(np.sqrt(sse / Y.size))


def nested(
    table: pd.DataFrame,
    *,
    domains: Sequence[str],
    target_size: float,
    target_step: float,
    target: str = "loss",
    max_fit_step: float | None = None,
    step_column: str = "step",
    size_column: str = "n_params",
    mixture_law: str = "dml",
    law_options: Mapping[str, Any] | None = None,
    random_state: int = 0,
    source: str = "table",
    tie_size_exponent: bool = False,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> dict[str, Any]:
    """Predict the mixture law of a ``target_size`` model at ``target_step`` from smaller, shorter runs.

    Rows at sizes ``>= target_size`` and steps ``> max_fit_step`` (default: below ``target_step``) are not fitted.
    Returns ``{"target", "target_size", "target_step", "max_fit_step", "n_step_fits", "n_skipped_curves",
    "n_unfinished_curves", "n_size_fits", "mixtures": [{"weights", "predicted", "sizes"}],
    "mixture_law": {"law", "estimator", "params", "status"[, "info"]},
    "size_law": {"tied": bool, "alpha": float | None, "rms": float | None},
    "validation": {"n", "mae", "mre", "bias", "spearman", "predictions"} | None}``.

    ``solver``: iteration caps of every fit the decision makes (:class:`~mixlaw.options.SolverOptions`,
    ``--max-iter``); default: the adaptive limit, and :data:`FALLBACK_ITER` for the second batched attempt.
    """
    from mixlaw.laws import get_law

    doms = list(domains)
    check_mixture(table, doms, source)
    for c in (target, step_column, size_column):
        if c not in table.columns:
            raise InputError(f"{source} has no column '{c}' (the nested pipeline needs {target}, step and size)")
        if not pd.api.types.is_numeric_dtype(table[c]) or pd.api.types.is_bool_dtype(table[c]):
            raise InputError(f"expected column '{c}' of {source} to be numeric (it is the {target}, step or size "
                             f"column), got {table[c].dtype} values such as {str(table[c].iloc[0])[:30]!r}")
    table, _ = target_rows(table.reset_index(drop=True), target, source)
    fit_step = float(max_fit_step) if max_fit_step is not None else np.nextafter(float(target_step), -np.inf)
    if fit_step >= float(target_step):
        raise InputError(f"--max-fit-step {max_fit_step:g}: must lie below --target-step {target_step:g}")
    table = table.assign(_mixture=mixture_groups(table, doms))
    size = table[size_column].to_numpy(dtype=np.float64)
    step = table[step_column].to_numpy(dtype=np.float64)
    train = table[(size < float(target_size)) & (step <= fit_step)]
    if train.empty:
        raise InputError(f"--target-size {target_size:g}: no runs below it with steps <= {fit_step:g} to fit")
    step_law = get_law("power_law", input=step_column)
    size_law = get_law("power_law", input=size_column)
    steps: dict[tuple[int, float], pd.Series] = {}
    n_skip = 0
    for (g, n), rows in train.groupby(["_mixture", size_column]):
        curve = rows.groupby(step_column)[target].mean()  # one point per checkpoint
        if len(curve) <= step_law.n_internal:
            n_skip += 1
            continue
        steps[(int(g), float(n))] = curve
    unfinished: list[Any] = []  # curves whose fits did not finish (counted in the result)
    at_step = _curves(step_law, step_column, steps, target, target_step, random_state, unfinished, solver)
    per_mix: dict[int, dict[float, float]] = {}
    for (g, n), v in at_step.items():
        per_mix.setdefault(g, {})[n] = v
    sizes_of = {}
    for g, by_size in sorted(per_mix.items()):
        if len(by_size) <= size_law.n_internal:
            n_skip += 1
            continue
        sizes_of[g] = pd.Series(by_size).sort_index()
    size_info: dict[str, Any] = {"tied": bool(tie_size_exponent), "alpha": None, "rms": None}
    if tie_size_exponent and sizes_of:
        common = max(
            {tuple(c.index) for c in sizes_of.values()},
            key=lambda k: sum(tuple(c.index) == k for c in sizes_of.values()),
        )
        keep = {g: c for g, c in sizes_of.items() if tuple(c.index) == common}
        n_skip += len(sizes_of) - len(keep)  # a tied law needs the same sizes on every curve
        preds, alpha, rms = tied_size_law(
            np.array(common), np.stack([c.to_numpy() for c in keep.values()]), target_size
        )
        at_size = {g: float(v) for g, v in zip(keep, preds, strict=True)}
        size_info |= {"alpha": alpha, "rms": rms}
    else:
        at_size = _curves(size_law, size_column, sizes_of, target, target_size, random_state, unfinished, solver)
    mixtures: list[dict[str, Any]] = []
    for g, pred in sorted(at_size.items()):
        first = table[table["_mixture"] == g].iloc[0]
        mixtures.append({"weights": {d: float(first[f"w_{d}"]) for d in doms}, "predicted": pred,
                         "sizes": {f"{k:g}": v for k, v in per_mix[g].items()}})  # fmt: skip
    n_step, n_size = len(at_step), len(at_size)
    mtab = pd.DataFrame([{**{f"w_{d}": m["weights"][d] for d in doms}, target: m["predicted"]} for m in mixtures])
    mtab["run_id"] = [f"mix{i}" for i in range(len(mtab))]
    mres, law_out = _mixture_stage(mixture_law, law_options or {}, doms, size_column, mtab, target, random_state,
                                   solver)  # fmt: skip
    out: dict[str, Any] = {
        "target": target,
        "target_size": float(target_size),
        "target_step": float(target_step),
        "max_fit_step": fit_step,
        "n_step_fits": n_step,
        "n_size_fits": n_size,
        "n_skipped_curves": n_skip,
        "n_unfinished_curves": len(unfinished),
        "mixtures": mixtures,
        "mixture_law": law_out,
        "size_law": size_info,
        "validation": None,
    }
    held = table[(size == float(target_size)) & (step == float(target_step))]
    if len(held):
        held = held.groupby("_mixture", as_index=False).agg({**{f"w_{d}": "first" for d in doms}, target: "mean"})
        hp = np.asarray(mres.predict(held), dtype=np.float64)
        obs = held[target].to_numpy(dtype=np.float64)
        out["validation"] = {
            "n": len(held),
            **metrics(hp, obs),
            "predictions": [
                {"weights": {d: float(r[f"w_{d}"]) for d in doms}, "predicted": float(p), "observed": float(o)}
                for (_, r), p, o in zip(held.iterrows(), hp, obs, strict=True)
            ],
        }
    return out
