"""Per-ratio increment curves (CMR paper, Eq. 6) of one model size, and their residual bootstrap — batched.

Every ratio's ΔL_gen and ΔL_dom curve is fitted by exact profiled least squares
(:mod:`mixlaw.fit.solver.profiled`): the amplitudes and offsets are solved in closed form for every exponent, so
only the exponents are searched. The point estimates of a size are one solve per law; all ``ratios × resamples``
bootstrap refits another. Laws that do not declare a separable form, and non-``l2`` objectives, go through the
engine instead (:func:`engine_fit`, also used for non-separable ratio laws).

The measured noise of the end-of-budget increments: evaluation jitter and seed spread, per trained ratio.

A ratio law is judged by how well it fits the observed end-of-budget increments *within their noise*, and a curve
whose whole range is a few noise units is judged by its residual RMS against that noise, not by R² (which is
meaningless at the noise level). Two measured parts:

- **evaluation jitter** ``σ_eval`` of one run near the budget: the model-free second-difference estimator on the
  last :data:`TAIL` evaluations, ``σ² = mean(Δ²y)² / 6`` (Δ² of independent noise has variance ``6σ²``; a smooth
  trend contributes only its curvature), pooled over the runs of the ratio;
- **seed spread** ``σ_seed``: the standard deviation of the end-of-budget increments of replicate runs (seeds) of
  one (size, ratio), pooled over the cells of the size that have replicates (``None`` where none has).

The noise of the observed end-of-budget increment of a ratio with ``n`` runs is
``σ = sqrt((σ_eval² + σ_seed²) / n)``, floored at :data:`NOISE_FLOOR`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.cmr.common import evaluate, law_of, r2_mse
from mixlaw.errors import BoundaryWarning, ConvergenceWarning, FitError, InputError
from mixlaw.fit.solver.profiled import fit_profiled, is_separable
from mixlaw.laws import Law
from mixlaw.options import DEFAULT_SOLVER, FitOptions, ObjectiveOptions, SolverOptions, StartOptions

__all__ = [
    "RatioCurves",
    "SizeFits",
    "curve_laws",
    "fit_size",
    "bootstrap_size",
    "TAIL",
    "NOISE_FLOOR",
    "BudgetNoise",
    "eval_jitter",
    "budget_noise",
    "pooled_seed_spread",
]


#: Evaluations near the budget used for the jitter of one run.
TAIL = 8
#: Smallest noise used to normalise a residual (nats/token): below it a miss is a rounding matter.
NOISE_FLOOR = 5e-4


@dataclass(frozen=True)
class BudgetNoise:
    """Per trained ratio: the noise of its observed end-of-budget ΔL_gen (``sigma``) and its parts."""

    sigma: dict[float, float]
    jitter: dict[float, float]
    seed_spread: float | None
    n_runs: dict[float, int]
    seed_from: str = "none"

    def describe(self) -> str:
        jit = ", ".join(f"{v:.4f}" for v in self.jitter.values())
        seed = "unknown (one run per ratio)"
        if self.seed_spread is not None:
            seed = f"{self.seed_spread:.4f} ({self.seed_from})"
        return f"noise at the budget: evaluation jitter {jit}; seed spread {seed}"


def eval_jitter(tokens: np.ndarray, y: np.ndarray, tail: int = TAIL) -> float:
    """Evaluation jitter of one run from the second differences of its last ``tail`` evaluations (NaN if < 3)."""
    o = np.argsort(np.asarray(tokens, dtype=np.float64), kind="stable")
    v = np.asarray(y, dtype=np.float64)[o][-tail:]
    if v.size < 3:
        return float("nan")
    d2 = np.diff(v, 2)
    return float(math.sqrt(float(np.mean(d2**2)) / 6.0))


def budget_noise(
    ratios: Sequence[float],
    runs: Sequence[Sequence[tuple[np.ndarray, np.ndarray]]],
    budget_values: Sequence[Sequence[float]],
    seed_fallback: float | None = None,
) -> BudgetNoise:
    """The noise of each ratio's observed end-of-budget increment.

    Parameters
    ----------
    ratios
        The trained ratios of one size.
    runs
        Per ratio, the ``(tokens, ΔL_gen)`` trajectory of each of its runs.
    budget_values
        Per ratio, each run's observed ΔL_gen at the budget (two or more: replicate seeds).
    seed_fallback
        The seed spread to assume when no ratio of this size has replicates (e.g. pooled over the other sizes,
        :func:`pooled_seed_spread`); ``seed_from`` says which was used.
    """
    jit: dict[float, float] = {}
    for r, rr in zip(ratios, runs, strict=True):
        vals = [eval_jitter(t, y) for t, y in rr]
        vals = [v for v in vals if math.isfinite(v)]
        jit[float(r)] = float(math.sqrt(np.mean(np.square(vals)))) if vals else float("nan")
    seed = pooled_seed_spread(budget_values)
    seed_from = "replicate runs of this size" if seed is not None else "none"
    if seed is None and seed_fallback is not None:
        seed, seed_from = float(seed_fallback), "replicate runs of the other sizes (none at this size)"
    fin = [v for v in jit.values() if math.isfinite(v)]
    fallback = float(np.median(fin)) if fin else NOISE_FLOOR
    sigma: dict[float, float] = {}
    n_runs: dict[float, int] = {}
    for r, bvals in zip(ratios, budget_values, strict=True):
        n = max(1, sum(1 for v in bvals if math.isfinite(v)))
        j = jit[float(r)] if math.isfinite(jit[float(r)]) else fallback
        sigma[float(r)] = max(math.sqrt((j**2 + (seed or 0.0) ** 2) / n), NOISE_FLOOR)
        n_runs[float(r)] = n
    return BudgetNoise(sigma=sigma, jitter=jit, seed_spread=seed, n_runs=n_runs, seed_from=seed_from)


def pooled_seed_spread(groups: Sequence[Sequence[float]]) -> float | None:
    """Pooled standard deviation of replicate values (each group: the end-of-budget increments of the runs of one
    (size, ratio) cell); ``None`` without replicates."""
    ss, dof = 0.0, 0
    for vals in groups:
        v = np.asarray(vals, dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size >= 2:
            ss += float(np.sum((v - v.mean()) ** 2))
            dof += v.size - 1
    return math.sqrt(ss / dof) if dof else None


DEFAULT_CURVE_LAWS = ("dloss_domain", "dloss_general")


@dataclass(frozen=True)
class RatioCurves:
    """The fitted ΔL_dom and ΔL_gen curves of one trained ratio, with their quality and the observations."""

    ratio: float
    run_ids: tuple[str, ...]
    t_lo: float
    t_last: float
    n_points: int
    gen_params: dict[str, float] | None
    dom_params: dict[str, float] | None
    r2_gen: float
    r2_dom: float
    mse_gen: float
    mse_dom: float
    obs_gen_at_budget: float | None
    obs_dom_at_budget: float | None
    tokens: np.ndarray
    obs_gen: np.ndarray
    obs_dom: np.ndarray
    gen_status: str = "converged"
    dom_status: str = "converged"
    error: str | None = None


@dataclass(frozen=True)
class SizeFits:
    """Every ratio's curves of one model size at one budget."""

    size: Any
    budget_tokens: float
    token_unit: float
    ref_general: float
    ref_domain: float
    curves: tuple[RatioCurves, ...]
    pin_zero: bool
    excluded_runs: tuple[str, ...] = ()
    laws: tuple[str, str] = DEFAULT_CURVE_LAWS
    #: The measured noise of each ratio's observed ΔL_gen at the budget (:class:`BudgetNoise`; resamples keep the
    #: point estimate's).
    noise: BudgetNoise | None = None


def curve_laws(token_unit: float, pin_zero: bool, names: tuple[str, str] = DEFAULT_CURVE_LAWS) -> tuple[Law, Law]:
    """The (domain, general) increment laws from the registry, validated by their spec (input ``tokens``)."""
    out = []
    for n in names:
        law = law_of(n, token_unit=token_unit, pin_zero=pin_zero)
        if tuple(law.inputs) != ("tokens",):
            raise InputError(f"law '{n}' cannot be an increment curve: its inputs are {', '.join(law.inputs)}")
        out.append(law)
    return out[0], out[1]


def engine_fit(
    law: str | Law,
    table: pd.DataFrame,
    target: str,
    *,
    starts: Sequence[Mapping[str, float]] | None = None,
    loss: str = "l2",
    sink: list[str] | None = None,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> dict[str, float]:
    """One fit through the engine; returns the parameters or raises :class:`FitError`.

    The engine's convergence/boundary warnings go to ``sink`` (the decision's notes) when it is given. ``solver``:
    its iteration cap (default: the engine's adaptive limit, :class:`~mixlaw.options.SolverOptions`)."""
    from mixlaw.fit import FitStatus, fit_law

    opts = FitOptions(
        objective=ObjectiveOptions(loss=loss),
        starts=StartOptions(given=None if starts is None else list(starts), use_grid=starts is None),
        solver=solver,
    )
    if sink is None:
        res = fit_law(law, table, opts, target=target)
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            warnings.simplefilter("always", BoundaryWarning)
            res = fit_law(law, table, opts, target=target)
        for w in caught:
            if issubclass(w.category, (ConvergenceWarning, BoundaryWarning)):
                sink.append(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if res.status is FitStatus.FAILED:
        raise FitError(f"fit of '{getattr(law, 'name', law)}' failed: {res.message}")
    params = {k: float(v) for k, v in res.params.items()}
    if not all(math.isfinite(v) for v in params.values()):
        raise FitError(f"fit of '{getattr(law, 'name', law)}' returned non-finite parameters")
    return params


def _fit_many(
    law: Law, t: np.ndarray, Y: np.ndarray, fit_loss: str, batched: bool = True, solver: SolverOptions = DEFAULT_SOLVER
) -> list[tuple[dict[str, float] | None, str]]:
    """Fit ``law`` to every row of ``Y`` on the same tokens: one profiled solve (``batched=False``: one solve per
    row, the reference the batching is tested against), or engine fits as fallback; ``solver``: their caps."""
    if is_separable(law) and fit_loss == "l2" and not batched:
        out1 = []
        for y in Y:
            f1 = fit_profiled(law, {"tokens": t}, y[None], solver=solver)
            out1.append((f1.params[0], str(f1.status[0])))
        return out1
    if is_separable(law) and fit_loss == "l2":
        pf = fit_profiled(law, {"tokens": t}, Y, solver=solver)
        return [(pf.params[b], str(pf.status[b])) for b in range(Y.shape[0])]
    out: list[tuple[dict[str, float] | None, str]] = []
    for y in Y:
        try:
            p = engine_fit(law, pd.DataFrame({"tokens": t, "y": y}), "y", loss=fit_loss, sink=[], solver=solver)
            out.append((law.canonical(p), "converged"))
        except FitError:
            out.append((None, "failed"))
    return out


def _quality(law: Law, params: dict[str, float] | None, t: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if params is None:
        return float("nan"), float("nan")
    return r2_mse(y, evaluate(law, {"tokens": t}, params))


def fit_size(
    inc: pd.DataFrame,
    size: Any,
    budget_tokens: float | None,
    token_unit: float | None,
    pin_zero: bool,
    fit_loss: str,
    sink: list[str] | None = None,
    laws: tuple[str, str] = DEFAULT_CURVE_LAWS,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> SizeFits:
    """Fit every ratio's increment curves of one size (evaluations with ``T > 0``) under ``solver``'s caps."""
    d = inc[inc["size"] == size]
    fitted = d[d["tokens"] > 0]
    if fitted.empty:
        raise InputError(f"size {size}: no CPT evaluation after T = 0")
    t_last_runs = fitted.groupby("run_id")["tokens"].max()
    excluded: tuple[str, ...] = ()
    if budget_tokens is not None:
        budget = float(budget_tokens)
    else:
        # The budget the runs were planned for: the median final token count (a sweep in progress, or a crashed
        # run, must not drag it down to its own last evaluation). Runs that stop before it are left out, noted.
        budget = float(t_last_runs.sort_values().iloc[(len(t_last_runs) - 1) // 2 :].min())
        budget = float(t_last_runs[t_last_runs >= budget].min())
        short = t_last_runs[t_last_runs < 0.995 * budget]
        if not short.empty:
            excluded = tuple(sorted(map(str, short.index)))
            fitted = fitted[~fitted["run_id"].isin(excluded)]
            if sink is not None:
                sink.append(f"left out {len(excluded)} run(s) that stop before the budget {budget:.4g} tokens: "
                            + ", ".join(excluded))  # fmt: skip
    unit = float(token_unit) if token_unit is not None else budget / 100.0
    dom_law, gen_law = curve_laws(unit, pin_zero, laws)
    need = len(gen_law.param_names) + 1
    groups: dict[tuple[float, ...], list[tuple[float, pd.DataFrame]]] = {}
    base: dict[float, dict[str, Any]] = {}
    runs_of: dict[float, list[tuple[np.ndarray, np.ndarray]]] = {}
    at_budget: dict[float, list[float]] = {}
    for ratio, grp in fitted.groupby("ratio", sort=True):
        grp = grp.sort_values("tokens", kind="stable")
        t = grp["tokens"].to_numpy(dtype=np.float64, copy=True)
        near = np.isclose(t, budget, rtol=5e-3)
        runs_of[float(ratio)], at_budget[float(ratio)] = [], []
        for _, run in grp.groupby("run_id", sort=True):
            up = run[run["tokens"] <= budget * 1.005]
            tr, yr = up["tokens"].to_numpy(dtype=np.float64), up["dloss_general"].to_numpy(dtype=np.float64)
            runs_of[float(ratio)].append((tr, yr))
            nb = np.isclose(tr, budget, rtol=5e-3)
            if nb.any():
                at_budget[float(ratio)].append(float(yr[nb].mean()))
        base[float(ratio)] = dict(
            ratio=float(ratio), run_ids=tuple(sorted(map(str, grp["run_id"].unique()))), t_lo=float(t.min()),
            t_last=float(t.max()), n_points=int(t.size),
            obs_gen_at_budget=float(grp.loc[near, "dloss_general"].mean()) if near.any() else None,
            obs_dom_at_budget=float(grp.loc[near, "dloss_domain"].mean()) if near.any() else None,
            tokens=t, obs_gen=grp["dloss_general"].to_numpy(dtype=np.float64, copy=True),
            obs_dom=grp["dloss_domain"].to_numpy(dtype=np.float64, copy=True),
        )  # fmt: skip
        if np.unique(t).size >= need:
            groups.setdefault(tuple(t), []).append((float(ratio), grp))
    fits: dict[float, dict[str, Any]] = {}
    for key, members in groups.items():
        t = np.array(key)
        Yd = np.stack([base[r]["obs_dom"] for r, _ in members])
        Yg = np.stack([base[r]["obs_gen"] for r, _ in members])
        fd, fg = _fit_many(dom_law, t, Yd, fit_loss, solver=solver), _fit_many(gen_law, t, Yg, fit_loss, solver=solver)
        for i, (r, _) in enumerate(members):
            fits[r] = {"dom_params": fd[i][0], "dom_status": fd[i][1], "gen_params": fg[i][0],
                       "gen_status": fg[i][1]}  # fmt: skip
    curves = []
    for r, b in base.items():
        if r not in fits:
            n_t = np.unique(b["tokens"]).size
            curves.append(RatioCurves(**b, gen_params=None, dom_params=None, r2_gen=float("nan"),
                                      r2_dom=float("nan"), mse_gen=float("nan"), mse_dom=float("nan"),
                                      gen_status="failed", dom_status="failed",
                                      error=f"too few evaluations to fit ΔL_gen (need ≥ {need} token values, "
                                      f"got {n_t})"))  # fmt: skip
            continue
        f = fits[r]
        r2g, mg = _quality(gen_law, f["gen_params"], b["tokens"], b["obs_gen"])
        r2d, md = _quality(dom_law, f["dom_params"], b["tokens"], b["obs_dom"])
        err = None if f["gen_params"] is not None and f["dom_params"] is not None else "curve fit failed"
        curves.append(RatioCurves(**b, **f, r2_gen=r2g, r2_dom=r2d, mse_gen=mg, mse_dom=md, error=err))
    refs = d.groupby("run_id")[["ref_general", "ref_domain"]].first()
    rs = [c.ratio for c in curves]
    noise = budget_noise(rs, [runs_of[r] for r in rs], [at_budget[r] for r in rs], _seed_spread_all(inc))
    return SizeFits(size=size, budget_tokens=budget, token_unit=unit, ref_general=float(refs["ref_general"].mean()),
                    ref_domain=float(refs["ref_domain"].mean()), curves=tuple(curves), pin_zero=pin_zero,
                    excluded_runs=excluded, laws=laws, noise=noise)  # fmt: skip


def _seed_spread_all(inc: pd.DataFrame) -> float | None:
    """Seed spread pooled over every (size, ratio) cell with replicate runs: each run's ΔL_gen at the cell's
    common last evaluation (the fallback for a size without replicates)."""
    groups = []
    for _, cell in inc[inc["tokens"] > 0].groupby(["size", "ratio"]):
        if cell["run_id"].nunique() < 2:
            continue
        last = cell.groupby("run_id")["tokens"].max()
        t_end = float(last.min())
        at = cell[np.isclose(cell["tokens"], t_end, rtol=5e-3)].groupby("run_id")["dloss_general"].mean()
        if at.size >= 2:
            groups.append(at.to_numpy(dtype=np.float64))
    return pooled_seed_spread(groups)


def _inflate(resid: np.ndarray, n_par: int) -> np.ndarray:
    """Residuals centred and scaled by ``sqrt(n / (n − p))`` (unchanged when ``n ≤ p``)."""
    n = resid.size
    if n <= n_par:
        return resid
    return (resid - resid.mean()) * math.sqrt(n / (n - n_par))


def bootstrap_size(
    sf: SizeFits, n_boot: int, rng: np.random.Generator, fit_loss: str, batched: bool = True,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> list[SizeFits]:  # fmt: skip
    """Residual bootstrap within runs: every ratio's curves refitted on ``fitted + resampled residuals``.

    Why residuals and not runs: with one run per (size, ratio), resampling runs drops whole ratios and leaves the
    CMR law undetermined; why not evaluation points: a pairs resample of ~15 points leaves too few distinct
    token values for a 5-parameter curve. One index draw is shared by the general and the domain curve of a run
    (keeps their correlation at an evaluation). Evaluations along one trajectory are autocorrelated, so the
    intervals are a lower bound on the seed-to-seed spread. All ``ratios × resamples`` refits of a law are one
    solve, under ``solver``'s caps.
    """
    dom_law, gen_law = curve_laws(sf.token_unit, sf.pin_zero, sf.laws)
    use = [c for c in sf.curves if c.gen_params is not None and c.dom_params is not None]
    groups: dict[tuple[float, ...], list[RatioCurves]] = {}
    for c in use:
        groups.setdefault(tuple(c.tokens), []).append(c)
    boot: dict[float, list[RatioCurves]] = {}
    for key, members in groups.items():
        t = np.array(key)
        n = t.size
        Yd, Yg, idxs = [], [], []
        for c in members:
            fg = evaluate(gen_law, {"tokens": t}, c.gen_params)  # type: ignore[arg-type]
            fd = evaluate(dom_law, {"tokens": t}, c.dom_params)  # type: ignore[arg-type]
            idx = rng.integers(0, n, size=(n_boot, n))
            # residuals rescaled by sqrt(n / (n − p)) (Davison & Hinkley 1997, §6.2.3: fitted residuals are
            # smaller than the errors by the parameters the fit spent on them; unscaled they make narrow intervals)
            Yg.append(fg[None] + (_inflate(c.obs_gen - fg, len(gen_law.param_names)))[idx])
            Yd.append(fd[None] + (_inflate(c.obs_dom - fd, len(dom_law.param_names)))[idx])
            idxs.append(idx)
        fd_all = _fit_many(dom_law, t, np.concatenate(Yd), fit_loss, batched, solver)
        fg_all = _fit_many(gen_law, t, np.concatenate(Yg), fit_loss, batched, solver)
        near = np.isclose(t, sf.budget_tokens, rtol=5e-3)
        for i, c in enumerate(members):
            # The observed end-of-budget increments are resampled around the *observations* (not the curve fit,
            # which can miss them: centring on it biased every interval against its point estimate): general by
            # its measured noise (.noise: evaluation jitter and seed spread), domain by the run's own residuals.
            sig = sf.noise.sigma.get(c.ratio) if sf.noise is not None else None
            zg = rng.standard_normal(n_boot)
            rd = c.obs_dom - evaluate(dom_law, {"tokens": t}, c.dom_params)  # type: ignore[arg-type]
            ed = rd[idxs[i][:, near]].mean(axis=1) - rd.mean() if near.any() else np.zeros(n_boot)
            rows = []
            for b in range(n_boot):
                (dp, ds), (gp, gs) = fd_all[i * n_boot + b], fg_all[i * n_boot + b]
                yg, yd = Yg[i][b], Yd[i][b]
                og = c.obs_gen_at_budget
                if og is not None:
                    og = float(og + sig * zg[b]) if sig is not None else float(og + yg[near].mean()
                                                                               - Yg[i][:, near].mean())  # fmt: skip
                od = None if c.obs_dom_at_budget is None else float(c.obs_dom_at_budget + ed[b])
                rows.append(replace(
                    c, gen_params=gp, dom_params=dp, gen_status=gs, dom_status=ds, obs_gen=yg, obs_dom=yd,
                    error=None if gp is not None and dp is not None else "bootstrap refit failed",
                    obs_gen_at_budget=og, obs_dom_at_budget=od,
                ))  # fmt: skip
            boot[c.ratio] = rows
    return [
        replace(sf, curves=tuple(boot[c.ratio][b] if c.ratio in boot else c for c in sf.curves)) for b in range(n_boot)
    ]
