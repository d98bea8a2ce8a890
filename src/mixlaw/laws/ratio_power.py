"""Power ratio law of the CMR paper.

.. math:: L(R) = \\alpha R^{s} + \\beta

Gu et al., "CMR Scaling Law: Predicting Critical Mixture Ratios for Continual Pre-training of Language
Models", arXiv:2407.17467 (Sec. 3, Table 2). ``R`` is the domain share of the continual pre-training mix
(``ratio``, in ``(0, 1]``), ``L`` a validation loss (nats/token) at a fixed CPT token budget; general and
domain loss are fitted separately. All three parameters are free in sign (laws.md §13).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from mixlaw.laws._base import Law, ParamSpec, Tensor, register


@register
class RatioPower(Law):
    """``L(R) = alpha * R**s + beta`` at a fixed CPT budget (Gu et al. 2024, arXiv:2407.17467).

    Fitted in raw loss space (the paper reports MSE and R²). ``R`` must be positive: with ``s < 0`` the law
    diverges at ``R = 0``, so runs without domain data are not fitted by this law.
    """

    name = "ratio_power"
    inputs = ("ratio",)
    param_specs = (
        ParamSpec("alpha", description="amplitude (signed)"),
        ParamSpec("s", description="exponent of the domain share (signed)"),
        ParamSpec("beta", description="offset (nats/token)"),
    )
    # 460M domain loss of the CMR paper's Table 2, least squares on 33/50/75/100 % (laws.md §6.6).
    example_params = {"alpha": -0.42613, "s": 0.1781, "beta": 1.88902}
    formula = "L = alpha * R^s + beta"
    citation = "Gu et al. 2024, arXiv:2407.17467"
    fit_space = "raw"
    default_delta = 1e-3

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return p["alpha"] * torch.pow(x["ratio"], p["s"]) + p["beta"]

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Domain shares spread over ``[0.05, 1]`` (trained CPT ratios)."""
        return {"ratio": rng.uniform(0.05, 1.0, n)}

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "alpha": np.array([-1.0, -0.3, -0.1, -0.03, -0.01, 0.01, 0.03, 0.1, 0.3, 1.0]),
            "s": np.array([-1.5, -0.5, -0.2, -0.05, 0.05, 0.2, 0.5, 1.0, 2.0]),
            "beta": np.array([0.0, 1.0, 2.0, 3.0, 5.0]),
        }

    # ---- separable form (used by mixlaw.fit.solver.profiled): the exponent nonlinear, the rest linear
    def profile_points(self) -> dict[str, np.ndarray]:
        """Exponents of the share over ``[-2, 4]`` without 0."""
        e = np.round(np.arange(-2.0, 4.0001, 0.02), 3)
        return {"s": e[np.abs(e) > 0.005]}

    def linear_design(
        self, x: Mapping[str, np.ndarray], theta: Mapping[str, np.ndarray]
    ) -> tuple[tuple[str, ...], np.ndarray]:
        """Columns ``[R^s, 1]`` for ``alpha, beta``."""
        r = np.asarray(x["ratio"], dtype=np.float64)
        with np.errstate(all="ignore"):
            a = r ** np.asarray(theta["s"])[..., None]
        return ("alpha", "beta"), np.stack([a, np.ones_like(a)], axis=-1)

    def input_ok(self, x: Mapping[str, np.ndarray]) -> np.ndarray:
        """Where the law is defined: ``R > 0`` (``R^s`` diverges at 0 for ``s < 0``)."""
        return np.asarray(x["ratio"], dtype=np.float64) > 0
