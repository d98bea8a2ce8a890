"""The RegMix proposer: the optimum of a surrogate by Dirichlet simulation, top-k averaged (laws.md §8.1).

RegMix (Liu et al. 2024, arXiv:2407.01492) predicts the loss of many simulated mixtures with the fitted regressor
and averages the best ones: ``w_s ~ Dirichlet(temperature · n · prior)`` for ``s = 1 … S`` (``prior``: the natural
mixture when known, else uniform; ``temperature`` scales the concentration: small spreads the samples towards the
vertices, large keeps them near the prior), ``J(w_s) = Σ_v a_v L̂_v(w_s)`` from one surrogate per target loss, and the
proposal is the mean of the ``top_k`` samples with the lowest ``J`` (the paper: 100,000 samples, top 128). Samples
outside the constraints' box (caps, floors, fixed weights, repetition caps) are rejected before the ranking, so the
average of feasible samples stays feasible (the box is convex).

A surrogate has no parameters to resample: the proposal carries no bootstrap band; the candidates (uniform,
natural) are predicted by the same surrogates, and their regret is a point value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError

__all__ = ["DirichletProposer", "propose"]


@dataclass(frozen=True)
class DirichletProposer:
    """Options of the Dirichlet proposer (frozen, validated)."""

    n_samples: int = 100_000
    top_k: int = 128
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.n_samples < 1 or self.top_k < 1 or self.top_k > self.n_samples:
            raise InputError(f"proposer: expected 1 <= top_k ({self.top_k}) <= n_samples ({self.n_samples})")
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise InputError(f"proposer: expected a temperature > 0, got {self.temperature}")


def propose(
    table: pd.DataFrame,
    *,
    surrogate: str,
    surrogate_options: Mapping[str, Any],
    domains: Sequence[str],
    targets: Sequence[str],
    loss_weights: Mapping[str, float],
    cons: Any,
    prior: np.ndarray | None = None,
    options: DirichletProposer = DirichletProposer(),
    random_state: int = 0,
) -> dict[str, Any]:
    """Fit one surrogate per target and propose the top-k average of Dirichlet samples (module docstring).

    Returns ``{"weights", "objective", "predicted_losses", "proposer": {…}, "fits"}``; a one-line error when no
    sample satisfies the constraints.
    """
    from mixlaw.decide.mixture.checks import target_rows
    from mixlaw.surrogates import build_surrogate

    doms = list(domains)
    n = len(doms)
    fits = {}
    for t in targets:
        rows, _ = target_rows(table, t)
        fits[t] = build_surrogate(surrogate, tuple(doms), surrogate_options).fit(rows, t)
    q = np.full(n, 1.0 / n) if prior is None else np.asarray(prior, dtype=np.float64) / float(np.sum(prior))
    rng = np.random.default_rng(random_state)
    alpha = np.maximum(options.temperature * n * q, 1e-3)
    w = rng.dirichlet(alpha, size=options.n_samples)
    lo, hi = cons.bounds()
    ok = np.all((w >= lo - 1e-12) & (w <= hi + 1e-12), axis=1)
    if not ok.any():
        raise InputError(
            f"--law {surrogate}: none of {options.n_samples} Dirichlet samples meets the constraints; raise "
            "--law-option n_samples or loosen the caps/floors"
        )
    w = w[ok]
    frame = pd.DataFrame(w, columns=[f"w_{d}" for d in doms])
    preds = {t: np.asarray(f.predict(frame), dtype=np.float64) for t, f in fits.items()}
    J = np.zeros(len(w))
    for t, p in preds.items():
        J += float(loss_weights.get(t, 0.0)) * p
    k = min(options.top_k, len(w))
    top = np.argsort(J, kind="stable")[:k]
    best = w[top].mean(axis=0)
    best_frame = pd.DataFrame([best], columns=frame.columns)
    at_best = {t: float(np.asarray(f.predict(best_frame))[0]) for t, f in fits.items()}
    return {
        "weights": dict(zip(doms, map(float, best), strict=True)),
        "objective": float(sum(float(loss_weights.get(t, 0.0)) * v for t, v in at_best.items())),
        "predicted_losses": at_best,
        "proposer": {
            "method": "dirichlet_top_k", "n_samples": options.n_samples, "n_feasible": int(ok.sum()), "top_k": k,
            "temperature": options.temperature, "prior": dict(zip(doms, map(float, q), strict=True)),
            "top_k_objective": [float(J[top].min()), float(J[top].max())],
        },  # fmt: skip
        "fits": {t: {"law": f.law_name, "n_rows": int(len(target_rows(table, t)[0]))} for t, f in fits.items()},
        "_fits": fits,
    }
