"""Score allocation strategies on a known law: simulate their runs, fit the law, predict at the target size.

For each replicate ``r`` a true CAMEL law (laws.md §12.2; Li, Gu, Zhang 2026, arXiv:2603.08022)

.. math:: L(w, M) = C + \\sum_{i<k} K_i \\langle t_i, w \\rangle^{-\\alpha_i} (M / M_*)^{-\\beta_i}

is drawn from declared priors (:class:`Priors`; ``M_*`` is the target size, so ``K_i`` is component ``i``'s
reducible loss at the target on a pure share of 1) or given. Every strategy's runs (its
:class:`~mixlaw.design.strategies.Allocation`, mixtures from one master list) observe
``L · exp(σ ε)`` with ``ε ~ N(0, 1)``; the law is fitted to them (Huber on log loss, the engine's batched solver:
all replicates of one strategy and their starts in one solve) and scored at the target size on a fresh set of
random mixtures (Dirichlet(1) in the floor box):

- ``rmse``: root mean squared error of the predicted loss (nats) over the test mixtures;
- ``regret``: true loss at the predicted argmin (over the test mixtures) minus the true minimum;
- ``spearman``: rank correlation of predicted and true losses.

Replicates are *paired*: the same truth, master list, noise draw (keyed by size and run position) and test set for
every strategy, so strategies are compared by the mean and standard error of their paired differences. A fit
with no usable estimate is scored with the mixture-blind prediction (the mean observed loss at the largest
fitted size: regret of an arbitrary choice, Spearman 0) and counted in ``n_failed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mixlaw.design.budget import SizeSpec
from mixlaw.design.strategies import Allocation, AllocationOptions, Strategy, allocate, mixture_pool
from mixlaw.errors import InputError

#: Iterations of each simulated fit when the solver options set no cap (``plan --simulate`` without
#: ``--max-iter``): many replicates are refitted, so a hard cap keeps the simulation's time bounded.
SIM_MAX_ITER = 200

__all__ = ["Priors", "SimResult", "draw_truth", "simulate"]

METRICS = ("rmse", "regret", "spearman")


@dataclass(frozen=True)
class Priors:
    """Priors of the true CAMEL law: uniform ``C``, log-uniform ``K_i``, uniform ``alpha_i`` and ``beta_i``,
    loadings ``t_i ~ Dirichlet(t_concentration)``."""

    C: tuple[float, float] = (1.5, 3.0)
    K: tuple[float, float] = (0.1, 0.6)
    alpha: tuple[float, float] = (0.1, 0.6)
    beta: tuple[float, float] = (0.1, 0.35)
    t_concentration: float = 0.5


def draw_truth(n_domains: int, k: int, rng: np.random.Generator, priors: Priors = Priors()) -> dict[str, Any]:
    """CAMEL parameters drawn from ``priors`` (``t_i`` as lists)."""
    p: dict[str, Any] = {"C": float(rng.uniform(*priors.C))}
    for i in range(k):
        p[f"K_{i}"] = float(math.exp(rng.uniform(math.log(priors.K[0]), math.log(priors.K[1]))))
        p[f"alpha_{i}"] = float(rng.uniform(*priors.alpha))
        p[f"beta_{i}"] = float(rng.uniform(*priors.beta))
        p[f"t_{i}"] = [float(v) for v in rng.dirichlet(np.full(n_domains, priors.t_concentration))]
    return p


@dataclass(frozen=True)
class SimResult:
    """Per strategy and replicate: the scores; summaries with paired differences against the first strategy."""

    strategies: tuple[str, ...]
    allocations: tuple[Allocation, ...]
    scores: Mapping[str, np.ndarray]  # metric -> (n_strategies, R)
    n_failed: tuple[int, ...]
    replicates: int
    noise: float
    seconds: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def summary(self) -> list[dict[str, Any]]:
        """One row per strategy: mean and s.e. of each metric, and the paired difference to the first strategy."""
        R = self.replicates
        rows = []
        for j, name in enumerate(self.strategies):
            a = self.allocations[j]
            row: dict[str, Any] = {
                "strategy": name,
                "runs": a.n_runs,
                "distinct_mixtures": a.distinct_mixtures,
                "compute_share_of_budget": a.spent / a.budget,
                "n_failed": self.n_failed[j],
            }
            for m in METRICS:
                v = self.scores[m][j]
                d = v - self.scores[m][0]
                row[m] = float(np.mean(v))
                row[f"{m}_se"] = float(np.std(v, ddof=1) / math.sqrt(R)) if R > 1 else math.nan
                row[f"{m}_diff"] = float(np.mean(d))
                row[f"{m}_diff_se"] = float(np.std(d, ddof=1) / math.sqrt(R)) if R > 1 else math.nan
            rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "replicates": self.replicates,
            "noise": self.noise,
            "seconds": self.seconds,
            "reference": self.strategies[0],
            "strategies": self.summary(),
            **dict(self.extra),
        }


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _fit_replicates(law: Any, X: dict[str, np.ndarray], Y: np.ndarray, n_polish: int, max_iter: int) -> np.ndarray:
    """``(R, F)`` natural parameters (NaN rows: no usable estimate) of ``law`` fitted to each row of ``Y``.

    Every replicate's starts are screened from the law's own start design in one batched objective evaluation;
    the ``n_polish`` best distinct ones of every replicate are then polished in one batched solve."""
    import pandas as pd
    import torch

    from mixlaw.fit.problem.data import FitData, make_residuals
    from mixlaw.fit.problem.starts import distinct
    from mixlaw.fit.solver.refits import _refit
    from mixlaw.fit.solver.solve import objective_values

    R, n = Y.shape
    data = FitData(law, pd.DataFrame(X).assign(loss=Y[0]), target="loss", group_column=None)
    U0 = law.start_design()  # (S, P)
    S = len(U0)
    residuals = make_residuals(law, data.x, torch.tensor(Y))
    pid = np.repeat(np.arange(R), S)
    f = objective_values(
        residuals, np.tile(U0, (R, 1)), pid, torch.ones(R, n, dtype=torch.float64), delta=law.default_delta
    ).reshape(R, S)
    seeds = []
    for r in range(R):
        order = np.argsort(np.where(np.isfinite(f[r]), f[r], np.inf), kind="stable")
        best = distinct(U0[order], n_polish)
        if len(best) < n_polish:  # pad with the next starts so every replicate has the same number
            best = np.vstack([best, U0[order[: n_polish - len(best)]]])
        seeds.append(best)
    params, _, status, _, ends = _refit(law, data.x, Y, None, np.stack(seeds), max_iter=max_iter)
    # an estimate stopped at the iteration cap is still what a user would get: score it (its best finite row)
    capped = ~np.isfinite(params).all(axis=1) & (status == "max_iter")
    if capped.any():
        params[capped] = law.natural_rows(ends[capped])
    return params


def simulate(
    strategies: Sequence[Strategy | str],
    sizes: Sequence[SizeSpec],
    target: SizeSpec,
    budget: float,
    domains: Sequence[str],
    *,
    replicates: int = 8,
    noise: float = 0.01,
    k: int = 2,
    fit_k: int | None = None,
    truth: Mapping[str, Any] | None = None,
    priors: Priors = Priors(),
    n_test: int = 512,
    n_polish: int = 8,
    max_iter: int = SIM_MAX_ITER,
    seed: int = 0,
    allocation: AllocationOptions | None = None,
    max_runs: int = 5000,
    progress: Callable[[str], None] | None = None,
) -> SimResult:
    """Score each strategy on ``replicates`` paired simulations (see the module docstring).

    Parameters
    ----------
    strategies
        Strategies (or their text, ``"hourglass:waist=0.2"``); the first is the reference of the differences.
    sizes, target, budget, domains
        Fitting sizes, the target size, the budget (the sizes' cost unit) and the mixture domains.
    replicates, noise
        Paired replicates; relative loss noise ``σ`` (0.01: 1 % of the loss).
    k, fit_k
        Components of the true law, and of the fitted one (default ``k``).
    truth
        Fixed CAMEL parameters (``size_unit`` = the target size) instead of drawing them from ``priors``.
    n_test
        Random test mixtures per replicate (the RMSE, regret and Spearman set).
    allocation
        How allocations are built (:class:`~mixlaw.design.strategies.AllocationOptions`: floors, caps, prior,
        mixture floor, max mixtures, the pool's seed ...).
    progress
        Called with one line per strategy before its batched fit (stage lines on stderr); ``None``: silent.
    max_runs
        Refuse designs with more simulated runs than this (compute-space allocations can ask for thousands).
    """
    import time

    from mixlaw.fit.solver.batch import threads
    from mixlaw.laws import get_law

    t0 = time.perf_counter()
    if replicates < 1:
        raise InputError(f"--simulate: expected at least 1 replicate, got {replicates}")
    if not (noise >= 0 and math.isfinite(noise)):
        raise InputError(f"--noise: expected a non-negative relative noise, got {noise}")
    doms = tuple(domains)
    d = len(doms)
    opts = allocation or AllocationOptions()
    strats = [Strategy.parse(s) if isinstance(s, str) else s for s in strategies]
    allocs = [allocate(s, sizes, budget, doms, opts) for s in strats]
    too_big = [(s.label, a.n_runs) for s, a in zip(strats, allocs, strict=True) if a.n_runs > max_runs]
    if too_big:
        raise InputError(f"--simulate: {too_big[0][0]} asks for {too_big[0][1]} runs, more than {max_runs} to simulate")
    top = max(max(a.counts) for a in allocs)
    master = mixture_pool(
        doms, top, prior=opts.prior, floor=float(opts.mixture_floor), seed=int(opts.seed)
    )
    allocs = [allocate(s, sizes, budget, doms, opts, master=master) for s in strats]
    unit = float(target.n_params)
    true_law = get_law("camel", domains=doms, k=k, size="n_params", size_unit=unit)
    fit_law = get_law("camel", domains=doms, k=fit_k or k, size="n_params", size_unit=unit)
    rng = np.random.default_rng(seed)
    truths = [dict(truth) if truth is not None else draw_truth(d, k, rng, priors) for _ in range(replicates)]
    floor = float(opts.mixture_floor)
    tests = [floor + (1 - d * floor) * rng.dirichlet(np.ones(d), size=n_test) for _ in range(replicates)]
    S = len(allocs[0].sizes)
    eps = rng.standard_normal((replicates, S, max(max(a.counts) for a in allocs)))  # keyed by (r, size, run position)
    true_test = np.stack([_evaluate(true_law, truths[r], tests[r], unit, doms) for r in range(replicates)])  # (R, T)
    scores = {m: np.zeros((len(strats), replicates)) for m in METRICS}
    n_failed = []
    for j, a in enumerate(allocs):
        if progress:
            progress(f"simulating {strats[j].label}: {a.n_runs} runs x {replicates} replicates, one batched fit")
        n_params = np.concatenate([np.full(n, s.n_params) for s, n in zip(a.sizes, a.counts, strict=True)])
        W = np.vstack([m for m in a.mixtures if len(m)])  # (n_runs, d)
        pos = np.concatenate([np.arange(n) for n in a.counts])
        size_idx = np.concatenate([np.full(n, i) for i, n in enumerate(a.counts)])
        X = {"n_params": n_params, **{f"w_{dm}": W[:, i] for i, dm in enumerate(doms)}}
        L = np.stack([true_law.evaluate(X, truths[r]) for r in range(replicates)])  # (R, n)
        Y = L * np.exp(noise * eps[:, size_idx, pos])
        with threads(1):  # tiny batched problems: one thread is fastest, and predictable on shared machines
            params = _fit_replicates(fit_law, X, Y, n_polish, max_iter)
        failed = 0
        largest = size_idx == size_idx.max()
        for r in range(replicates):
            if np.isfinite(params[r]).all():
                pred = _evaluate(fit_law, fit_law.unflatten(params[r]), tests[r], unit, doms)
            else:
                pred = np.full(n_test, float(Y[r, largest].mean()))
            if not np.isfinite(pred).all():
                pred = np.full(n_test, float(Y[r, largest].mean()))
                failed += 1
            elif not np.isfinite(params[r]).all():
                failed += 1
            true = true_test[r]
            scores["rmse"][j, r] = float(np.sqrt(np.mean((pred - true) ** 2)))
            scores["regret"][j, r] = float(true[int(np.argmin(pred))] - true.min())
            scores["spearman"][j, r] = _spearman(pred, true)
        n_failed.append(failed)
    return SimResult(
        tuple(s.label for s in strats),
        tuple(allocs),
        scores,
        tuple(n_failed),
        replicates,
        noise,
        time.perf_counter() - t0,
        {"k": k, "fit_k": fit_k or k, "n_test": n_test},
    )


def _evaluate(law: Any, params: Mapping[str, Any], W: np.ndarray, n_params: float, doms: Sequence[str]) -> np.ndarray:
    X = {"n_params": np.full(len(W), n_params), **{f"w_{dm}": W[:, i] for i, dm in enumerate(doms)}}
    return np.asarray(law.evaluate(X, params), dtype=np.float64).reshape(-1)
