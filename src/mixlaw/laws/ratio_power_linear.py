"""Power ratio law with a linear term: the CMR paper's ``L(R) = α R^s + β`` plus ``γ R``.

.. math:: L(R) = \\beta + \\gamma R + \\alpha R^{s}, \\quad s > 1

Extends the ratio law of Gu et al., "CMR Scaling Law: Predicting Critical Mixture Ratios for Continual
Pre-training of Language Models", arXiv:2407.17467 (Sec. 3, Table 2). ``R`` is the domain share of the continual
pre-training mix (``ratio``, in ``[0, 1]``), ``L`` a validation loss (nats/token) at a fixed CPT token budget.

Why the linear term: measured general-loss rises at the budget grow about linearly with the share at small ``R``
(each unit of domain data displaces general replay) and accelerate as the replay vanishes (``R → 1``). One power
term cannot do both: on the shipped CMR probe runs ``α R^s + β`` misses the small-ratio points by 0.005–0.035
nats (several times their noise), ``β + γ R + α R^s`` by 0.001–0.005. For a fixed ``s`` the law is linear in
``(β, γ, α)``, so it is fitted by exact profiled least squares over ``s`` alone (``profile_points``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from mixlaw.laws._base import Law, ParamSpec, Tensor, register


@register
class RatioPowerLinear(Law):
    """``L(R) = beta + gamma * R + alpha * R**s`` with ``s > 1`` (a linear trend plus an accelerating term).

    Four parameters: use it on five or more trained ratios (``mixlaw cmr --ratio-law auto`` only considers it
    then). ``R = 0`` is inside its domain (the control run is a point of the fit).
    """

    name = "ratio_power_linear"
    inputs = ("ratio",)
    param_specs = (
        ParamSpec("alpha", description="amplitude of the accelerating term (signed)"),
        ParamSpec("s", lower=1.0, description="exponent of the accelerating term (> 1)"),
        ParamSpec("gamma", description="linear slope in the share (signed, nats/token per unit share)"),
        ParamSpec("beta", description="loss at R = 0 (nats/token)"),
    )
    example_params = {"alpha": 0.2, "s": 4.0, "gamma": 0.05, "beta": 3.0}
    formula = "L = beta + gamma * R + alpha * R^s"
    citation = "extends Gu et al. 2024, arXiv:2407.17467 (ratio law)"
    fit_space = "raw"
    default_delta = 1e-3

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        r = x["ratio"]
        return p["beta"] + p["gamma"] * r + p["alpha"] * torch.pow(r, p["s"])

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Domain shares spread over ``[0, 1]`` (trained CPT ratios, the control included)."""
        return {"ratio": rng.uniform(0.0, 1.0, n)}

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "alpha": np.array([-1.0, -0.1, -0.01, 0.01, 0.1, 1.0]),
            "s": np.array([1.5, 2.5, 6.0, 10.0]),
            "gamma": np.array([-0.3, -0.03, 0.0, 0.03, 0.3]),
            "beta": np.array([0.0, 1.0, 2.0, 3.5, 5.0]),
        }

    # ---- separable form (used by mixlaw.fit.solver.profiled): the exponent nonlinear, the rest linear
    def profile_points(self) -> dict[str, np.ndarray]:
        """Exponents over ``[1.1, 16]``."""
        return {"s": np.round(np.arange(1.1, 16.0001, 0.02), 3)}

    def linear_design(
        self, x: Mapping[str, np.ndarray], theta: Mapping[str, np.ndarray]
    ) -> tuple[tuple[str, ...], np.ndarray]:
        """Columns ``[R^s, R, 1]`` for ``alpha, gamma, beta``."""
        r = np.asarray(x["ratio"], dtype=np.float64)
        with np.errstate(all="ignore"):
            a = r ** np.asarray(theta["s"])[..., None]
        rr = np.broadcast_to(r, a.shape)
        return ("alpha", "gamma", "beta"), np.stack([a, rr, np.ones_like(a)], axis=-1)

    def input_ok(self, x: Mapping[str, np.ndarray]) -> np.ndarray:
        """Defined on every share ``R ≥ 0``."""
        return np.asarray(x["ratio"], dtype=np.float64) >= 0
