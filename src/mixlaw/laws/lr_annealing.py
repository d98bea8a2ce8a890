"""LR-annealing law (Tissue, Wang, Wang; arXiv:2408.11029).

.. math:: L(s) = L_0 + A \\cdot S_1(s)^{-\\alpha} - C \\cdot S_2(s)

``S1`` is the forward area ``Σ η`` and ``S2`` the annealing area of the momentum recurrence
(``decay`` λ = 0.999), both computed by :mod:`mixlaw.schedules` (columns ``s1``, ``s2``; see
:func:`mixlaw.schedules.add_schedule_features`). ``L`` is in nats/token; ``L0, A, α, C > 0``. One parameter
set holds for one (data set, model size, warm-up, peak LR, batch size); the law transfers across schedule
*shapes* only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from mixlaw.laws._base import DerivedInput, Law, ParamSpec, Tensor, register

__all__ = ["LRAnnealing", "safe_log"]


def safe_log(y: Tensor) -> Tensor:
    """``log y`` for a law that is not a sum of positive terms: non-positive predictions map to ``log 1e-12``
    (a huge residual, so the fitter moves away) instead of NaN."""
    return torch.log(torch.clamp(y, min=1e-12))


@register
class LRAnnealing(Law):
    """``L = L0 + A·S1^(−alpha) − C·S2`` (Tissue et al. 2024, arXiv:2408.11029).

    Inputs ``s1`` (Σ raw LR, LR·steps) and ``s2`` (annealing area, decay 0.999, no ``(1 − λ)`` factor — the
    form whose published C ≈ 0.3; laws.md §4.4 item 6). Fitted with Huber (δ = 1e-3) on log-loss residuals.
    ``example_params`` are the PT part of the 106M FineWeb fit of arXiv:2505.07796 (η_max = 2e-4).
    """

    name = "lr_annealing"
    inputs = ("s1", "s2")
    param_specs = (
        ParamSpec("L0", 0.0, np.inf, description="loss floor (nats/token)"),
        ParamSpec("A", 0.0, np.inf, description="forward-area coefficient"),
        ParamSpec("alpha", 0.0, np.inf, description="forward-area exponent"),
        ParamSpec("C", 0.0, np.inf, description="annealing-area coefficient (per unit of S2)"),
    )
    example_params = {"L0": 3.057, "A": 0.490, "alpha": 0.497, "C": 0.299}
    formula = "L = L0 + A*S1^(-alpha) - C*S2"
    citation = "Tissue et al. 2024, arXiv:2408.11029"

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return p["L0"] + p["A"] * x["s1"] ** (-p["alpha"]) - p["C"] * x["s2"]

    def continued_asymptote(self, params: Mapping[str, float], limits: Mapping[str, float]) -> float:
        """Loss that training continued at the final LR > 0 converges to: ``L_∞ = L0 − C·S2(∞)`` (the A-term
        vanishes as ``S1 → ∞``; Tissue et al. 2024).

        ``limits`` maps the law's inputs to their values in the limit of training continued forever at the
        final LR > 0: forward areas ``inf``, annealing areas at their limit (pending momentum decayed into
        them), plus ``lr`` (the final LR) and ``peak_lr``; ``replay_ratio`` and ``n_params`` as planned.
        """
        return params["L0"] - params["C"] * limits["s2"]

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return safe_log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "L0": np.array([1.5, 2.5, 3.5]),
            "A": np.array([0.2, 0.6]),
            "alpha": np.array([0.3, 0.6]),
            "C": np.array([0.05, 0.3, 1.5]),
        }

    def derived_inputs(self) -> tuple[DerivedInput, ...]:
        """LR-area columns from each run's schedule (:func:`mixlaw.fit.problem.features.add_features`)."""
        return (DerivedInput("schedule", ("s1", "s2"), positive=("s1",)),)

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        from mixlaw.laws._examples import schedule_feature_rows

        rows = schedule_feature_rows(n, rng, cpt=False)
        return {c: rows[c].to_numpy() for c in self.inputs}
