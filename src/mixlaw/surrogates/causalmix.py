"""A CausalMix-style pool-aware surrogate: data mixing as causal inference.

The CausalMix abstract treats the statistics of the data pool as covariates ``X`` and the domain mixture as the
treatment ``T``, fits a causal model on proxy runs and extrapolates the optimal mixture to a new, larger pool without
new proxies. mixlaw's reading (the exact estimator is not public; docs/design/causalmix.md) is the **R-learner** of
the partially linear model with heterogeneous effects (Robinson 1988; Chernozhukov et al. 2018, "Double/debiased
machine learning", arXiv:1608.00060; Nie & Wager 2021, "Quasi-oracle estimation of heterogeneous treatment effects",
arXiv:1712.04912):

.. math::
    Y = g(X) + \\theta(X)^\\top \\varphi(T) + \\varepsilon, \\qquad
    \\theta(X) = B\\,[1, X], \\qquad
    \\varphi(T) = [\\,T_1, …, T_{k-1},\\ \\log(T_1 + \\epsilon), …, \\log(T_k + \\epsilon)\\,]

The mixtures are assigned to runs within each pool, independently of the pool's statistics, so the nuisances
``E[Y | pool]`` and ``E[φ(T) | pool]`` are the pool's own means: ``B`` solves the residual-on-residual ridge
regression ``Y − Ȳ_pool ≈ θ(X)ᵀ (φ(T) − φ̄_pool)`` (the partialling-out of Robinson and the R-learner with pool fixed
effects; no learned nuisance can bias the effect). The level ``g(X)`` of a new pool is then learned across pools
(``nuisance``: ridge or LightGBM) from the runs' targets less their mixtures' effects. The conditional average
treatment effect of moving from mixture ``T₀`` to ``T`` in a pool ``X`` is ``θ(X)ᵀ (φ(T) − φ(T₀))``; the
proposed mixture for a new pool minimises ``θ(X)ᵀ φ(T)`` over the simplex (``g`` does not depend on the mixture).
Log terms let the effect of a share saturate, the linear terms tilt it; both change with the pool through ``θ(X)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixlaw.errors import FitError, InputError

__all__ = ["CausalMix", "CausalMixFit", "CausalMixOptions", "minimise_on_box", "treatment_features"]

#: Shares are offset by this inside the log features (a share of 0 stays finite).
EPS = 0.01


@dataclass(frozen=True)
class CausalMixOptions:
    """Options of :class:`CausalMix`.

    Parameters
    ----------
    domains
        Mixture domains (treatment columns ``w_<domain>``).
    covariates
        Pool-statistic columns (per-domain unique tokens, size shares, a quality or entropy proxy, duplication
        rate, …), constant within a pool.
    target
        Outcome column (a loss: lower is better).
    pool
        Column naming the pool of each run (at least 3 runs per pool).
    nuisance
        ``"ridge"`` (default; numpy) or ``"lightgbm"`` (optional extra) for the level ``g(X)`` of new pools.
    ridge
        Ridge penalty of the final effect regression (on standardised covariates).
    """

    domains: tuple[str, ...]
    covariates: tuple[str, ...]
    target: str = "loss"
    pool: str = "pool"
    nuisance: str = "ridge"
    ridge: float = 1e-4

    def __post_init__(self) -> None:
        if len(self.domains) < 2 or len(set(self.domains)) != len(self.domains):
            raise InputError(f"expected at least two distinct domains, got {self.domains!r}", column="domains")
        if not self.covariates:
            raise InputError("expected at least one pool covariate column", column="covariates")
        if self.nuisance not in ("ridge", "lightgbm"):
            raise InputError(f"expected nuisance 'ridge' or 'lightgbm', got {self.nuisance!r}", column="nuisance")
        if not (math.isfinite(self.ridge) and self.ridge >= 0):
            raise InputError(f"expected ridge >= 0, got {self.ridge}", column="ridge")


def treatment_features(w: np.ndarray) -> np.ndarray:
    """``φ(T)``: the first ``k − 1`` shares and the ``k`` log shares (``(n, 2k − 1)``)."""
    return np.column_stack([w[:, :-1], np.log(w + EPS)])


class _Ridge:
    """Least squares with a small ridge on standardised inputs (the numpy nuisance learner)."""

    def __init__(self, alpha: float = 1e-3) -> None:
        self.alpha = alpha

    def fit(self, x: np.ndarray, y: np.ndarray) -> _Ridge:
        self.mu, self.sd = x.mean(0), x.std(0) + 1e-12
        z = np.column_stack([np.ones(len(x)), (x - self.mu) / self.sd])
        pen = self.alpha * np.eye(z.shape[1])
        pen[0, 0] = 0.0
        self.coef = np.linalg.solve(z.T @ z + pen, z.T @ y)
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(x)), (x - self.mu) / self.sd]) @ self.coef


def _learner(kind: str) -> Any:
    if kind == "ridge":
        return _Ridge()
    from mixlaw.surrogates.regmix import optional_module

    lgb = optional_module("lightgbm", "lightgbm")
    return lgb.LGBMRegressor(n_estimators=200, learning_rate=0.05, min_child_samples=5, num_threads=1, seed=0,
                             verbose=-1)  # fmt: skip


def _fit_predict(kind: str, x_tr: np.ndarray, y_tr: np.ndarray, x_te: np.ndarray) -> np.ndarray:
    out = np.empty((len(x_te), y_tr.shape[1]))
    for j in range(y_tr.shape[1]):
        out[:, j] = _learner(kind).fit(x_tr, y_tr[:, j]).predict(x_te)
    return out


@dataclass(frozen=True)
class CausalMixFit:
    """A fitted pool-aware surrogate: effects, predictions and proposals for pools seen or new."""

    options: CausalMixOptions
    coef: np.ndarray  # (dim φ, 1 + p): θ(X) = coef @ [1, (X − mu)/sd]
    x_mu: np.ndarray
    x_sd: np.ndarray
    nuisance_x: np.ndarray  # the training covariates, for the level model g(X)
    nuisance_y: np.ndarray  # (n, 1): the training targets less their mixtures' effects
    n_runs: int
    n_pools: int

    def _z(self, x: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(x)), (x - self.x_mu) / self.x_sd])

    def theta(self, covariates: np.ndarray) -> np.ndarray:
        """``θ(X)`` per row, ``(n, dim φ)``."""
        return self._z(np.atleast_2d(covariates)) @ self.coef.T

    def effect(self, covariates: np.ndarray, w: np.ndarray, w0: np.ndarray) -> np.ndarray:
        """CATE of training on ``w`` instead of ``w0`` in pools ``covariates`` (change of the target)."""
        th = self.theta(covariates)
        return np.sum(th * (treatment_features(np.atleast_2d(w)) - treatment_features(np.atleast_2d(w0))), axis=1)

    def predict(self, table: Any) -> np.ndarray:
        """The target of each row of ``table``: ``ĝ(X) + θ(X)ᵀ φ(T)``."""
        x = _matrix(table, self.options.covariates)
        w = _matrix(table, [f"w_{d}" for d in self.options.domains])
        g = _fit_predict(self.options.nuisance, self.nuisance_x, self.nuisance_y, x)[:, 0]
        return g + np.sum(self.theta(x) * treatment_features(w), axis=1)

    def propose(self, covariates: Mapping[str, float], *, floor: float = 0.0, n_starts: int = 16,
                seed: int = 0) -> dict[str, float]:  # fmt: skip
        """The mixture minimising the predicted target in a pool with these statistics (shares ``>= floor``)."""
        k = len(self.options.domains)
        if not 0.0 <= floor < 1.0 / k:
            raise InputError(f"expected a floor in [0, 1/{k}), got {floor}")
        th = self.theta(self.covariate_row(covariates))[0]
        w = minimise_on_box(th, np.full(k, floor), np.ones(k), n_starts=n_starts, seed=seed)
        return {d: float(v) for d, v in zip(self.options.domains, w, strict=True)}

    def covariate_row(self, covariates: Mapping[str, float]) -> np.ndarray:
        """``(1, p)``: the pool statistics in the fit's covariate order (one-line error naming a missing one)."""
        missing = [c for c in self.options.covariates if c not in covariates]
        if missing:
            raise InputError(f"expected every pool covariate, missing {', '.join(missing)}")
        return np.array([[float(covariates[c]) for c in self.options.covariates]])


def minimise_on_box(theta: np.ndarray, lo: np.ndarray, hi: np.ndarray, *, n_starts: int = 16,
                    seed: int = 0) -> np.ndarray:  # fmt: skip
    """The mixture minimising ``θᵀ φ(w)`` on ``{w : Σ w = 1, lo <= w <= hi}`` (SLSQP from the box's centre and
    ``n_starts − 1`` Dirichlet points projected into the box; the level ``g(X)`` does not depend on ``w``)."""
    from scipy.optimize import minimize

    th = np.asarray(theta, dtype=np.float64)
    k = lo.size

    def f(w: np.ndarray) -> float:
        return float(th @ treatment_features(w[None, :])[0])

    rng = np.random.default_rng(seed)
    starts = [np.full(k, 1.0 / k), *rng.dirichlet(np.ones(k), size=max(n_starts - 1, 0))]
    cons = ({"type": "eq", "fun": lambda w: float(w.sum() - 1.0)},)
    best: tuple[float, np.ndarray | None] = (math.inf, None)
    for s in starts:
        s = _project(s, lo, hi)
        r = minimize(f, s, method="SLSQP", bounds=list(zip(lo, hi, strict=True)), constraints=cons,
                     options={"ftol": 1e-12, "maxiter": 500})  # fmt: skip
        w = _project(np.clip(r.x, lo, hi), lo, hi)
        if f(w) < best[0]:
            best = (f(w), w)
    if best[1] is None:  # every start evaluated to NaN or inf: the fitted effect is not finite on this box
        raise FitError("causalmix: the fitted effect is not finite anywhere on the constraints' box; no proposal")
    return best[1]


def _project(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Euclidean projection onto ``{lo <= w <= hi, Σ w = 1}`` (bisection on the shift; the box meets the simplex)."""
    a, b = float(np.min(v - hi)) - 1.0, float(np.max(v - lo)) + 1.0
    for _ in range(200):
        tau = 0.5 * (a + b)
        a, b = (tau, b) if np.clip(v - tau, lo, hi).sum() > 1.0 else (a, tau)
        if b - a < 1e-15:
            break
    return np.clip(v - 0.5 * (a + b), lo, hi)


def _matrix(table: Any, cols: Sequence[str]) -> np.ndarray:
    missing = [c for c in cols if c not in table.columns]
    if missing:
        raise InputError(f"expected column {missing[0]!r} (causalmix)", column=missing[0])
    x = np.column_stack([np.asarray(table[c], dtype=np.float64) for c in cols])
    if not np.isfinite(x).all():
        raise InputError(f"expected finite values in {', '.join(cols)} (causalmix)")
    return x


class CausalMix:
    """Fit :class:`CausalMixFit` by cross-fitted residual-on-residual regression (module docstring)."""

    def __init__(self, options: CausalMixOptions) -> None:
        self.options = options

    def fit(self, table: Any) -> CausalMixFit:
        o = self.options
        x = _matrix(table, o.covariates)
        w = _matrix(table, [f"w_{d}" for d in o.domains])
        y = _matrix(table, [o.target])[:, 0]
        if o.pool not in table.columns:
            raise InputError(f"expected a pool column {o.pool!r} naming each run's data pool", column=o.pool)
        pools = np.asarray(table[o.pool]).astype(str)
        uniq = np.unique(pools)
        if uniq.size < 2:
            raise InputError(f"expected runs from at least two pools, got {uniq.size}")
        phi = treatment_features(w)
        # Partialling out within pools: the mixture is assigned to runs within each pool, independently of the
        # pool's statistics, so E[Y | pool] and E[φ(T) | pool] are the pool's own means and the residuals carry
        # θ(X)ᵀ(φ − φ̄) exactly — no nuisance model can bias the effect.
        inv = np.unique(pools, return_inverse=True)[1]
        counts = np.bincount(inv)
        if (counts < 3).any():
            raise InputError("expected at least 3 runs per pool (each pool's mixtures identify its effects)")
        y_res = y - (np.bincount(inv, weights=y) / counts)[inv]
        pool_phi = np.column_stack([np.bincount(inv, weights=phi[:, j]) / counts for j in range(phi.shape[1])])
        phi_res = phi - pool_phi[inv]
        mu, sd = x.mean(0), x.std(0) + 1e-12
        zx = np.column_stack([np.ones(len(x)), (x - mu) / sd])
        design = (phi_res[:, :, None] * zx[:, None, :]).reshape(len(x), -1)  # φ̃ ⊗ [1, X]
        pen = o.ridge * len(x) * np.eye(design.shape[1])
        coef = np.linalg.solve(design.T @ design + pen, design.T @ y_res).reshape(phi.shape[1], zx.shape[1])
        # the level of a pool, g(X): the runs' targets less their mixtures' effects, learned across pools
        theta = zx @ coef.T
        base = y - np.sum(theta * phi, axis=1)
        targets = np.column_stack([base])
        return CausalMixFit(o, coef, mu, sd, x, targets, len(x), int(uniq.size))
