"""The measured noise of the end-of-budget increments: evaluation jitter and seed spread, per trained ratio.

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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["TAIL", "NOISE_FLOOR", "BudgetNoise", "eval_jitter", "budget_noise", "pooled_seed_spread"]

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
