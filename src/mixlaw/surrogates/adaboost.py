"""AdaBoost.R2 (Drucker 1997) as scikit-learn's ``AdaBoostRegressor`` runs it, for several seeds at once.

Drucker, "Improving Regressors using Boosting Techniques", ICML 1997; scikit-learn 1.x
``sklearn.ensemble.AdaBoostRegressor`` with its defaults ``loss="linear"``, ``learning_rate=1``. Per seed and per
round: draw ``n`` rows with replacement with probabilities equal to the sample weights
(``numpy.random.RandomState(seed).choice``, the draw scikit-learn makes for a base estimator without a
``random_state``), fit the base estimator on them, predict every row, scale the absolute errors by their maximum,
``ε = Σ w e``; stop when ``ε <= 0`` (a perfect fit, weight 1) or ``ε >= 0.5`` (the round's estimator is dropped
unless it is the first, which is kept with weight 0); otherwise the estimator weight is ``log(1/β)``,
``β = ε / (1 − ε)``, and every sample weight is multiplied by ``β^(1 − e)`` (not after the last round), clipped below
at the float epsilon and renormalised. The ensemble predicts the weighted median of its estimators (the lowest
prediction whose cumulative weight reaches half the total).

The seeds run in lock-step so that one call of ``fit_round`` fits the base estimators of every seed still boosting
(the MLP surrogate trains them as one batched network).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BoostedEnsemble", "adaboost_r2", "weighted_median"]

#: ``fit_round(seed_indices, X_list, y_list) -> predictors``: one fitted base estimator per (X, y) pair (drawn for
#: the seed at that index), each a callable X → ŷ.
FitRound = Callable[[Sequence[int], Sequence[np.ndarray], Sequence[np.ndarray]], Sequence[Any]]


@dataclass
class BoostedEnsemble:
    """The estimators of one seed and their weights (``predict`` is the weighted median)."""

    estimators: list[Any] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    stopped: str = ""

    def predict_all(self, X: np.ndarray) -> np.ndarray:
        """``(n, E)``: every estimator's prediction."""
        return np.column_stack([np.asarray(e(X), dtype=np.float64) for e in self.estimators])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return weighted_median(self.predict_all(X), np.asarray(self.weights, dtype=np.float64))


def weighted_median(predictions: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of ``predictions`` ``(n, E)``: the lowest value whose cumulative weight is at least half the total."""
    order = np.argsort(predictions, axis=1)
    cdf = np.cumsum(weights[order], axis=1)
    idx = (cdf >= 0.5 * cdf[:, -1:]).argmax(axis=1)
    rows = np.arange(predictions.shape[0])
    return np.asarray(predictions[rows, order[rows, idx]], dtype=np.float64)


def adaboost_r2(
    X: np.ndarray, y: np.ndarray, seeds: Sequence[int], n_estimators: int, fit_round: FitRound
) -> list[BoostedEnsemble]:
    """One AdaBoost.R2 ensemble per seed on ``(X, y)`` (module docstring); ``n_estimators`` rounds at most."""
    n = len(y)
    eps = np.finfo(np.float64).eps
    rngs = [np.random.RandomState(int(s)) for s in seeds]  # noqa: NPY002 - scikit-learn's generator, for its draws
    weights = [np.full(n, 1.0 / n) for _ in seeds]
    out = [BoostedEnsemble() for _ in seeds]
    active = list(range(len(seeds)))
    for it in range(int(n_estimators)):
        if not active:
            break
        idx = []
        for b in active:
            weights[b] = np.clip(weights[b], eps, None)
            idx.append(rngs[b].choice(np.arange(n), size=n, replace=True, p=weights[b]))
        fitted = fit_round(list(active), [X[i] for i in idx], [y[i] for i in idx])
        still = []
        for b, est in zip(active, fitted, strict=True):
            ens, w = out[b], weights[b]
            err = np.abs(np.asarray(est(X), dtype=np.float64) - y)
            mask = w > 0
            e = err[mask]
            if e.max() != 0:
                e = e / e.max()
            eps_b = float((w[mask] * e).sum())
            if eps_b <= 0:
                ens.estimators.append(est)
                ens.weights.append(1.0)
                ens.errors.append(0.0)
                ens.stopped = f"perfect fit at round {it + 1}"
                continue
            if eps_b >= 0.5:
                if not ens.estimators:
                    ens.estimators.append(est)
                    ens.weights.append(0.0)
                    ens.errors.append(eps_b)
                ens.stopped = f"error {eps_b:.3g} >= 0.5 at round {it + 1}"
                continue
            beta = eps_b / (1.0 - eps_b)
            ens.estimators.append(est)
            ens.weights.append(float(np.log(1.0 / beta)))
            ens.errors.append(eps_b)
            if it < n_estimators - 1:
                w = w.copy()
                w[mask] *= np.power(beta, 1.0 - e)
                total = float(w.sum())
                if not np.isfinite(total) or total <= 0:
                    ens.stopped = f"sample weights degenerate at round {it + 1}"
                    continue
                weights[b] = w / total
            still.append(b)
        active = still
    return out
