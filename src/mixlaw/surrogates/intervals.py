"""Prediction intervals for the RegMix surrogate, from the training runs alone.

- ``gp``: the Gaussian process's own predictive distribution, ``ŷ ± z σ̂(x)`` with ``z = Φ⁻¹((1 + level) / 2)``;
  ``σ̂`` includes the fitted white-noise level, so it is an interval for a new run, not only for the mean
  (Rasmussen & Williams 2006, §2.2).
- ``lightgbm`` and ``linear``: cross-conformal residuals (the K-fold form of the jackknife+, Barber, Candès, Ramdas
  and Tibshirani 2021, "Predictive inference with the jackknife+", Ann. Statist. 49(1)). The training rows are split
  into ``K`` folds **by mixture** (a held-out mixture is what the interval is for); each fold is predicted by the
  surrogate fitted on the other folds; ``q`` is the ``⌈(n + 1) level⌉``-th smallest of the ``n`` out-of-fold absolute
  residuals, and the interval is ``ŷ ± q`` around the prediction of the surrogate fitted on every training row. The
  test rows are never used. With fewer than ``1 / (1 − level) − 1`` training rows ``q`` is infinite (no finite
  interval has the coverage), and the interval is reported as missing (NaN).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["CONFORMAL_FOLDS", "surrogate_interval"]

CONFORMAL_FOLDS = 5


def _conformal_quantile(residuals: np.ndarray, level: float) -> float:
    r = np.sort(np.abs(residuals[np.isfinite(residuals)]))
    k = math.ceil((r.size + 1) * level)
    return float(r[k - 1]) if 1 <= k <= r.size else math.inf


def surrogate_interval(
    spec: Any,
    train: Any,
    test: Any,
    target: str,
    domains: Sequence[str],
    *,
    level: float = 0.95,
    seed: int = 0,
    folds: int = CONFORMAL_FOLDS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
    """``(predicted, lo, hi, info)`` of a :class:`~mixlaw.surrogates.RegMix` ``spec`` fitted on ``train``.

    ``info`` names the method (``"gp predictive sd"`` or ``"cross-conformal"``) and, for the latter, the folds and
    the residual quantile ``q``.
    """
    from scipy import stats

    from mixlaw.runs.columns import mixture_groups

    fit = spec.fit(train, target)
    pred = np.asarray(fit.predict(test), dtype=np.float64)
    if spec.backend == "gp":
        z = float(stats.norm.ppf((1 + level) / 2))
        sd = np.asarray(fit.predict_std(test), dtype=np.float64)
        return pred, pred - z * sd, pred + z * sd, {"method": "gp predictive sd"}
    groups = mixture_groups(train, domains)
    n_groups = int(groups.max()) + 1 if groups.size else 0
    k = min(int(folds), n_groups)
    nan = np.full(len(pred), np.nan)
    if k < 2:
        why = f"cross-conformal interval needs 2 training mixtures, got {n_groups}"
        return pred, nan, nan.copy(), {"method": "cross-conformal", "folds": k, "q": math.nan, "reason": why}
    fold_of = np.random.default_rng(seed).permutation(n_groups) % k
    fold = fold_of[groups]
    y = np.asarray(train[target], dtype=np.float64)
    oof = np.full(len(y), np.nan)
    for f in range(k):
        inner, outer = train[fold != f], train[fold == f]
        if len(inner) < 3:
            continue
        oof[fold == f] = np.asarray(spec.fit(inner, target).predict(outer), dtype=np.float64)
    q = _conformal_quantile(oof - y, level)
    if not math.isfinite(q):
        n_res = int(np.isfinite(oof - y).sum())
        why = f"cross-conformal quantile infinite: {n_res} out-of-fold residuals for level {level:g}"
        return pred, nan, nan.copy(), {"method": "cross-conformal", "folds": k, "q": q, "reason": why}
    return pred, pred - q, pred + q, {"method": "cross-conformal", "folds": k, "q": q}
