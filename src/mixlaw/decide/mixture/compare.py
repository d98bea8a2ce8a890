"""``mixlaw mix compare``: fit mixture laws on the rows outside a holdout, predict the holdout, score it.

Every model named in ``--models`` is either ``blind`` (the mixture-blind baseline: the mean training loss at the
test row's size) or a registered law that reads ``w_<domain>`` columns (``camel``, ``dml``, and whatever else the
registry holds — ``bimix``, ``mixture_joint``, … are picked up by name). A law whose other inputs (model size,
tokens) are all in the table is fitted once over every training row; a law that reads only the mixture is fitted
once per model size (no prediction at a size without training rows).

Prediction intervals
--------------------
Each parametric fit is bootstrapped with the engine's one bootstrap
(:func:`mixlaw.fit.uncertainty.bootstrap.bootstrap_law`):
``B`` resamples of the training **runs** (every evaluation of a run enters or leaves together), refitted in one
batched solve from the point estimate under the adaptive iteration limit — they stop when their objective stops
falling measurably — while the point fit keeps the decisions' cap (:func:`_resample`). (Resampling whole mixtures
instead, every
size of a mixture together, left camel — 11 parameters from 12 mixtures — without an estimate in 40 % of the
resamples of the simulated test set: too few distinct mixtures remain to fix the loadings.) The 95 % prediction
interval of a held-out row is the bias-corrected percentile interval of the resampled predictions plus Student-t
residual noise of the fit's residual size, around the point prediction (:mod:`mixlaw.decide.mixture.intervals`:
Davison & Hinkley 1997, §6.3; Efron 1987): it always contains its point prediction, which the plain percentile
interval did not (``mixture_joint``).
The ``regmix`` surrogate has no parameters to resample: the Gaussian process gives its predictive interval,
LightGBM and OLS a cross-conformal one from K-fold-by-mixture residuals of the training rows
(:mod:`mixlaw.surrogates.intervals`); ``bootstrap = 0`` turns these off too. The blind baseline gets the classical
normal prediction interval ``ȳ ± t_{n−1} s √(1 + 1/n)``. ``coverage`` is the share of held-out rows with an
interval whose observed value lies inside it; ``n_interval`` counts those rows, and every row without one is named
in ``no_interval`` with its one-line reason (no prediction at that size, every resample of its fold failed, …).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.checks import check_mixture, holdout_folds, metrics, target_rows
from mixlaw.decide.mixture.intervals import extrapolates, size_widening
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, FitOptions, SolverOptions

__all__ = ["BASELINES", "build_model", "compare", "interval_notes", "mixture_law_names", "parse_models"]

BASELINES = ("blind",)
SURROGATES = ("regmix", "dml_mlp")  # nonparametric (mixlaw.surrogates): fitted per size, GP or conformal intervals
DEFAULT_BOOTSTRAP = 50


def mixture_law_names() -> list[str]:
    """Registered laws that read ``w_<domain>`` columns (built with their default options)."""
    from mixlaw.laws import get_law, law_names

    out = []
    for name in law_names():
        try:
            law = get_law(name)
        except (InputError, TypeError, ValueError, ImportError):
            continue
        if any(str(c).startswith("w_") for c in law.inputs):
            out.append(name)
    return out


def parse_models(text: str | Sequence[str]) -> list[tuple[str, str, dict[str, Any]]]:
    """``"camel,camel:k=3,dml"`` → ``[(label, model, options), …]``; options are ``key=value`` joined by ``;``."""
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t.strip()]
    if not items:
        raise InputError(
            f"--models: expected one or more of {', '.join([*BASELINES, *SURROGATES, *mixture_law_names()])}"
        )
    known: list[str] | None = None
    out = []
    for item in items:
        name, _, rest = item.partition(":")
        if name not in BASELINES and name not in SURROGATES:
            known = known if known is not None else mixture_law_names()
            if name not in known:
                raise InputError(
                    f"--models: unknown model '{name}'; known: {', '.join([*BASELINES, *SURROGATES, *known])}"
                )
        opts: dict[str, Any] = {}
        for kv in filter(None, rest.split(";")):
            if "=" not in kv:
                raise InputError(f"--models {item}: expected model:option=value, got {kv!r}")
            k, v = kv.split("=", 1)
            opts[k.strip()] = v.strip()
        out.append((item, name, opts))
    return out


def build_model(name: str, opts: Mapping[str, Any], domains: Sequence[str], size_column: str) -> Any:
    """The law ``name`` with ``domains`` (and ``size`` = the size column, where the law has such options) set."""
    from mixlaw.laws import get_law

    cls_opts = {o.name for o in type(get_law(name)).options_schema} if name else set()
    full = dict(opts)
    if "domains" in cls_opts:
        full.setdefault("domains", tuple(domains))
    if "size" in cls_opts:
        full.setdefault("size", size_column)
    try:
        return get_law(name, **full)
    except InputError as exc:
        raise InputError(f"--models {name}: {exc}") from None


def _fit(law: Any, rows: pd.DataFrame, target: str, random_state: int, bootstrap: int, solver: SolverOptions) -> Any:
    """The point fit under ``solver``'s cap, then its bootstrap over runs (:func:`_resample`)."""
    from mixlaw.fit import fit_law

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_law(
            law, rows, FitOptions(solver=solver, seed=random_state), target=target
        )
        if bootstrap and rows["run_id"].nunique() >= 3:
            res = _resample(res, rows, target, int(bootstrap), random_state, solver)
    for w in caught:  # re-emit once, naming the model (boundary notes are expected on small fits)
        warnings.warn(f"{law.name} on {target}: {w.message}", w.category, stacklevel=3)
    return res


def _resample(res: Any, rows: pd.DataFrame, target: str, n: int, random_state: int, solver: SolverOptions) -> Any:
    """``res`` with ``n`` bootstrap resamples of the training runs, refitted from the point under the adaptive limit
    (or ``solver``'s explicit cap).

    The resamples stop on convergence or on the noise-scaled stall test (:mod:`mixlaw.fit.solver.refine`), not at the
    decisions' 300-iteration cap: at that cap camel's resamples on SlimPajama 310M (leave-mixtures-out, 48 runs)
    ended ``max_iter`` — unusable — in 18-20 of 20 per fold, leaving 2 of 5 folds without an interval and the others
    with intervals from 1-2 resamples; under the adaptive limit 20 of 20 stall, in about the same time.
    """
    from dataclasses import replace

    from mixlaw.fit.problem.data import FitData
    from mixlaw.fit.uncertainty.bootstrap import bootstrap_law

    data = FitData(res.law, rows, target=target, input_map=res.input_map, group_column="run_id")
    seeds = np.asarray(res.law.to_internal(res.params), dtype=np.float64)[None, :]
    rng = np.random.default_rng([random_state, 1])
    boot = bootstrap_law(
        res.law, data, seeds, n=n, rng=rng, scheme="runs", params=res.params, loss=res.loss, delta=res.delta,
        max_iter=solver.cap(None),
    )  # fmt: skip
    if boot.n_failed:
        warnings.warn(f"{boot.n_failed} of {n} bootstrap resamples failed to finish", UserWarning, stacklevel=2)
    return replace(
        res, bootstrap_params=boot.params, n_bootstrap=n, n_failed_resamples=boot.n_failed, bootstrap_unit=boot.unit,
        n_rescued_resamples=boot.n_rescued,
    )  # fmt: skip


def _method_line(calibrations: Sequence[str | None]) -> str:
    """How the intervals of one model were built: BC bootstrap, or extrapolation-calibrated in some folds."""
    done = [c for c in calibrations if c]
    if not done:
        return "bootstrap (BC percentile)"
    return f"bootstrap (BC percentile), {done[0]} (in {len(done)} of {len(calibrations)} folds)"


def _interval(res: Any, test: pd.DataFrame, level: float, seed: int) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """``(lo, hi, notes)``: the BC prediction interval (:mod:`.intervals`) and, per row without one, its reason."""
    from mixlaw.decide.mixture.intervals import no_draws_reason, prediction_interval
    from mixlaw.fit.uncertainty.intervals import inputs_of

    lo, hi, _, reason = prediction_interval(res, inputs_of(res, test), level, seed)
    if reason is None:
        n = 0 if res.bootstrap_params is None else len(res.bootstrap_params)
        reason = no_draws_reason(n)
    ok = np.isfinite(lo) & np.isfinite(hi)
    return lo, hi, [None if o else reason for o in ok]


def _blind(train_y: np.ndarray, n_test: int, level: float) -> tuple[float, float, float]:
    from scipy import stats

    y = train_y[np.isfinite(train_y)]
    mean = float(y.mean())
    if y.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf((1 + level) / 2, y.size - 1)) * float(y.std(ddof=1)) * math.sqrt(1 + 1 / y.size)
    return mean, mean - half, mean + half


#: The assumption under which a size-blind model predicts another size (RegMix's premise).
RANK_TRANSFER = (
    "rank transfer: the model fitted at {src:g} ranks the mixtures at {dst:g} as it ranks them at {src:g}; its levels "
    "are those of {src:g} and are not compared with the held-out losses"
)


def _size_curve(train: pd.DataFrame, target: str, size_column: str, at: float) -> tuple[float, float, int] | None:
    """The mixture-blind baseline at an unseen size: ``L(N) = E + A N^(−α)`` through the per-size mean training loss
    (the size-aware blind model), with the sd and count of the rows at the nearest training size; ``None`` with fewer
    than 3 training sizes."""
    from scipy.optimize import curve_fit

    g = train.groupby(size_column)[target].agg(["mean", "std", "size"])
    if len(g) < 3:
        return None
    n = g.index.to_numpy(dtype=np.float64)
    y = g["mean"].to_numpy(dtype=np.float64)
    n0 = float(np.exp(np.mean(np.log(n))))

    def f(x: np.ndarray, e: float, a: float, alpha: float) -> np.ndarray:
        return e + a * (x / n0) ** (-alpha)

    span = float(y.max() - y.min()) or 1e-3
    try:
        p0 = (max(float(y.min()) - span, 0.0), span, 0.3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # three points, three parameters: no covariance, not needed
            p, _ = curve_fit(f, n, y, p0=p0, bounds=([0.0, 0.0, 0.0], [np.inf, np.inf, 5.0]), maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    near = g.iloc[int(np.argmin(np.abs(np.log(n) - np.log(at))))]
    sd = float(near["std"]) if near["size"] > 1 else math.nan
    return float(f(np.array([at]), *p)[0]), sd, int(near["size"])


def _predict_model(
    name: str,
    opts: Mapping[str, Any],
    train: pd.DataFrame,
    test: pd.DataFrame,
    domains: Sequence[str],
    target: str,
    size_column: str,
    random_state: int,
    bootstrap: int,
    level: float,
    solver: SolverOptions,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, list[Any], str | None, dict[str, Any]]:
    """``(predicted, lo, hi, n_parameters, notes, calibration, transfer)`` for the test rows (NaN where the model makes
    no prediction or no interval; ``notes[i]`` is the one-line reason row ``i`` has no interval, ``None`` where it has
    one; ``calibration`` the line on the extrapolation calibration where the test rows extrapolate in size).

    At a held-out size without training rows, a model of the mixture alone predicts under the stated rank-transfer
    assumption (:data:`RANK_TRANSFER`: fitted at the nearest smaller training size; ``transfer["rows"]`` are these
    rows, their levels are not compared), and the blind baseline is the size-aware ``L(N)`` of :func:`_size_curve`.
    For a size-aware law whose test rows extrapolate in size, ``transfer["size_calibration"]`` is the summary of
    :meth:`mixlaw.decide.mixture.intervals.SizeWidening.to_dict` (which rows the nested size cuts calibrate)."""
    out = np.full((3, len(test)), np.nan)
    notes: list[Any] = ["intervals off (--bootstrap 0)" if not bootstrap else None] * len(test)
    law = None if name in BASELINES or name in SURROGATES else build_model(name, opts, domains, size_column)
    n_par = 1 if law is None else int(law.n_internal)
    if law is not None:
        others = [c for c in law.inputs if not str(c).startswith("w_")]
        missing = [c for c in others if c not in train.columns]
        if others and missing:
            raise InputError(f"--models {name}: the table has no column '{missing[0]}' (an input of {name})")
        if others:  # size-aware: one fit over every training row
            res = _fit(law, train, target, random_state, bootstrap, solver)
            pred = np.asarray(res.predict(test), dtype=np.float64)
            if not bootstrap:
                return pred, out[1], out[2], n_par, notes, None, {}
            lo, hi, notes = _interval(res, test, level, random_state)
            if not extrapolates(train, test, size_column):
                return pred, lo, hi, n_par, notes, None, {}
            # larger (smaller) models: intervals see size extrapolation (nested size cuts; rows beyond them flagged)
            w = size_widening(res, train, test, target, size_column, lo, hi, random_state, solver, level)
            lo, hi = w.ends(law.fit_space)
            return pred, lo, hi, n_par, notes, w.summary(law.fit_space == "log"), {"size_calibration": w.to_dict()}
    # Laws of the mixture alone and the blind baseline work per size (NaN at a size with no training rows).
    surrogate_line: str | None = None
    sizes_tr = train[size_column].to_numpy() if size_column in train else np.zeros(len(train))
    sizes_te = test[size_column].to_numpy() if size_column in test else np.zeros(len(test))
    transfer: dict[str, Any] = {}
    for s in np.unique(sizes_te):
        tr = train[sizes_tr == s]
        sel = sizes_te == s
        rows = np.flatnonzero(sel)
        if len(tr) == 0 and law is None and name not in SURROGATES and len(train):  # blind: size-aware L(N)
            from scipy import stats

            fitted = _size_curve(train, target, size_column, float(s))
            if fitted is not None:
                m, sd, k = fitted  # the blind interval of the nearest size, around the size curve
                t = float(stats.t.ppf((1 + level) / 2, max(k - 1, 1)))
                half = t * sd * math.sqrt(1 + 1 / k) if bootstrap and np.isfinite(sd) else math.nan
                out[:, sel] = np.array([m, m - half, m + half])[:, None]
                for i in rows:
                    notes[i] = notes[i] if np.isfinite(half) else "no interval: no spread at the nearest training size"
                    notes[i] = "intervals off (--bootstrap 0)" if not bootstrap else notes[i]
                transfer.setdefault("blind_size_law", "E + A N^-alpha through the per-size mean training loss")
                continue
        if len(tr) == 0 and len(train) and size_column in train:  # size-blind: rank transfer from the nearest size
            below = np.unique(sizes_tr[sizes_tr < s])
            src = float(below.max()) if below.size else float(np.unique(sizes_tr)[0])
            tr = train[sizes_tr == src]
            transfer.setdefault("rows", []).extend(int(i) for i in rows)
            transfer.setdefault("pairs", set()).add((src, float(s)))
            for i in rows:
                notes[i] = "levels not comparable (rank transfer from another size)"
        if len(tr) == 0:
            for i in rows:
                notes[i] = f"no prediction: no training rows at {size_column} = {s:g}"
            continue
        if name in SURROGATES:
            from mixlaw.surrogates import build_surrogate
            from mixlaw.surrogates.intervals import surrogate_interval

            spec = build_surrogate(name, tuple(domains), opts)
            what = spec.describe() if hasattr(spec, "describe") else name  # which estimator ran (dml_mlp's protocol)
            if not bootstrap:
                out[0, sel] = spec.fit(tr, target).predict(test[sel])
                surrogate_line = f"{what}; intervals off"
                continue
            out[0, sel], out[1, sel], out[2, sel], info = surrogate_interval(
                spec, tr, test[sel], target, domains, level=level, seed=random_state
            )
            surrogate_line = f"{what}; {info.get('method', 'interval')}"
            if not np.isfinite(out[1, sel]).all():
                why = info.get("reason") or f"{info.get('method', 'interval')} interval not finite"
                for i in rows[~np.isfinite(out[1, sel])]:
                    notes[i] = why
            continue
        if law is None:
            out[:, sel] = np.array(_blind(tr[target].to_numpy(dtype=np.float64), int(sel.sum()), level))[:, None]
            if bootstrap and len(tr) < 2:
                for i in rows:
                    notes[i] = "fewer than 2 training rows at this size for the blind interval"
            continue
        if len(tr) <= law.n_internal:  # fewer training mixtures than parameters at this size: no prediction
            for i in rows:
                notes[i] = f"no prediction: {len(tr)} training rows at {size_column} = {s:g} for {n_par} parameters"
            continue
        res = _fit(law, tr, target, random_state, bootstrap, solver)
        out[0, sel] = res.predict(test[sel])
        if bootstrap:
            out[1, sel], out[2, sel], part = _interval(res, test[sel], level, random_state)
            for i, note in zip(rows, part, strict=True):
                notes[i] = note
    for i in transfer.get("rows", []):
        out[1, i] = out[2, i] = math.nan  # an interval at the source size says nothing about the held-out level
    if transfer.get("pairs"):
        transfer["assumption"] = "; ".join(RANK_TRANSFER.format(src=a, dst=b) for a, b in sorted(transfer["pairs"]))
        transfer["pairs"] = sorted(transfer["pairs"])
    return out[0], out[1], out[2], n_par, notes, surrogate_line, transfer


def _ranking(sub: pd.DataFrame, pred: np.ndarray, obs: np.ndarray, rows: np.ndarray) -> list[dict[str, Any]]:
    """The transferred rows ranked by prediction (best first), with each row's observed rank among them."""
    ok = rows[np.isfinite(pred[rows])]
    order = ok[np.argsort(pred[ok], kind="stable")]
    obs_rank = {int(i): r + 1 for r, i in enumerate(ok[np.argsort(obs[ok], kind="stable")])}
    return [{"run_id": str(sub["run_id"].iloc[i]), "predicted_rank": r + 1, "observed_rank": obs_rank[int(i)]}
            for r, i in enumerate(order)]  # fmt: skip


def interval_notes(notes: Sequence[Any], run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """``[{"reason", "n", "run_ids"}]``: the rows without an interval grouped by their reason, most frequent first."""
    groups: dict[str, list[str]] = {}
    for note, rid in zip(notes, run_ids, strict=True):
        if note is not None:
            groups.setdefault(str(note), []).append(str(rid))
    return [
        {"reason": r, "n": len(ids), "run_ids": ids} for r, ids in sorted(groups.items(), key=lambda kv: -len(kv[1]))
    ]


def compare(
    table: pd.DataFrame,
    *,
    domains: Sequence[str],
    targets: Sequence[str],
    holdout: str,
    models: str | Sequence[str] = "camel,dml,blind",
    size_column: str = "n_params",
    bootstrap: int = DEFAULT_BOOTSTRAP,
    level: float = 0.95,
    random_state: int = 0,
    source: str = "table",
    solver: SolverOptions = DEFAULT_SOLVER,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fit each model on the rows outside the holdout, predict the holdout; one result per target.

    ``progress``: called with one line per target and model before it is fitted (``None``: silent).

    Returns ``{"holdout", "domains", "bootstrap", "level", "targets": [{"target", "n_missing", "models": [{"model",
    "n_parameters", "n_train", "n_test", "n_predicted", "mae", "mre", "bias", "spearman", "coverage", "n_interval",
    "no_interval": [{"reason", "n", "run_ids"}], "predictions": [{"run_id", "predicted", "lo", "hi",
    "observed"}]}]}]}``. Rows without a value of a target are left out for that target only (``n_missing``).
    ``bootstrap = 0`` gives no intervals (``lo``/``hi``/``coverage`` NaN, ``null`` in JSON).

    ``solver``: iteration caps of every fit the decision makes, point fits, resample refits and calibration refits
    (:class:`~mixlaw.options.SolverOptions`, ``--max-iter``); default: the engine's adaptive limit.
    """
    from mixlaw.fit.solver.pools import threads

    with threads(1):  # small fits: extra torch/BLAS threads only spin
        doms = list(domains)
        check_mixture(table, doms, source)
        if not 0 < level < 1:
            raise InputError(f"--level {level}: expected a number in (0, 1)")
        if bootstrap < 0:
            raise InputError(f"--bootstrap {bootstrap}: expected a non-negative number of resamples")
        for t in targets:
            if t not in table.columns:
                raise InputError(f"--target {t}: {source} has no column '{t}'")
        parsed = parse_models(models)
        table = table.reset_index(drop=True)
        if "run_id" not in table.columns:
            table = table.assign(run_id=[f"row{i + 1}" for i in range(len(table))])
        out: list[dict[str, Any]] = []
        for target in targets:
            sub, n_missing = target_rows(table, target, source)
            masks = holdout_folds(sub, holdout, doms, seed=random_state)
            obs = sub[target].to_numpy(dtype=np.float64)
            rows = []
            for label, name, opts in parsed:
                if progress:
                    progress(f"{target}: {label} on {len(masks)} fold(s)")
                pred, lo, hi = (np.full(len(sub), np.nan) for _ in range(3))
                notes: list[Any] = [None] * len(sub)
                tested = np.zeros(len(sub), dtype=bool)
                n_train, n_par = [], 0
                calibrations: list[str | None] = []
                transferred = np.zeros(len(sub), dtype=bool)
                assumptions: list[str] = []
                blind_law: str | None = None
                size_cals: list[dict[str, Any]] = []
                for m in masks:
                    train, test = sub[~m], sub[m]
                    p, a, b, n_par, why, cal, moved = _predict_model(
                        name, opts, train, test, doms, target, size_column, random_state, bootstrap, level, solver
                    )
                    transferred[np.flatnonzero(m)[moved.get("rows", [])]] = True
                    if moved.get("assumption") and moved["assumption"] not in assumptions:
                        assumptions.append(moved["assumption"])
                    blind_law = moved.get("blind_size_law", blind_law)
                    if "size_calibration" in moved:
                        size_cals.append(moved["size_calibration"])
                    pred[m], lo[m], hi[m] = p, a, b
                    for i, note in zip(np.flatnonzero(m), why, strict=True):
                        notes[i] = note
                    tested |= m
                    n_train.append(len(train))
                    calibrations.append(cal)
                idx = np.flatnonzero(tested)
                level_idx = idx[~transferred[idx]]  # levels at another size are not compared with the losses
                has = np.isfinite(lo[idx]) & np.isfinite(hi[idx]) & np.isfinite(pred[idx])
                inside = (lo[idx] <= obs[idx]) & (obs[idx] <= hi[idx])
                for i, ok in zip(idx, has, strict=True):  # no silent gaps: every row without an interval says why
                    notes[i] = None if ok else notes[i] or "no interval (prediction or interval not finite)"
                rows.append(
                    {
                        "model": label,
                        "n_parameters": n_par,
                        "n_train": int(round(float(np.mean(n_train)))),
                        "n_test": int(idx.size),
                        "n_predicted": int(np.isfinite(pred[idx]).sum()),
                        **metrics(pred[level_idx], obs[level_idx]),
                        "spearman": metrics(pred[idx], obs[idx])["spearman"],
                        **(
                            {"levels_comparable": False, "rank_transfer": {
                                "n_rows": int(transferred[idx].sum()), "assumption": " | ".join(assumptions),
                                "ranking": _ranking(sub, pred, obs, idx[transferred[idx]]),
                            }}
                            if transferred[idx].any() else {}
                        ),  # fmt: skip
                        **({"blind_size_law": blind_law} if blind_law else {}),
                        **({"size_calibration": size_cals} if size_cals else {}),
                        "coverage": float(inside[has].mean()) if has.any() else math.nan,
                        "n_interval": int(has.sum()),
                        "interval_method": (
                            next((c for c in calibrations if c), name)
                            if name in SURROGATES
                            else _method_line(calibrations)
                        ),
                        "no_interval": interval_notes(
                            [notes[i] for i in idx], [str(sub["run_id"].iloc[i]) for i in idx]
                        ),
                        "predictions": [
                            {
                                "run_id": str(sub["run_id"].iloc[i]),
                                "predicted": float(pred[i]),
                                "lo": float(lo[i]),
                                "hi": float(hi[i]),
                                "observed": float(obs[i]),
                            }
                            for i in idx
                        ],
                    }
                )
            out.append({"target": target, "n_missing": n_missing, "models": rows})
        return {"holdout": holdout, "domains": doms, "bootstrap": int(bootstrap), "level": level, "targets": out}
