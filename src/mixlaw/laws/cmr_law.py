"""CMR scaling law: the critical mixture ratio as a function of the CPT token budget (CMR paper, Eq. 8).

.. math:: R_{CMR}(T) = \\alpha_4 T^{s_4} + \\beta_3

Gu et al., "CMR Scaling Law: Predicting Critical Mixture Ratios for Continual Pre-training of Language
Models", arXiv:2407.17467 (Eq. 8). Fitted per model size through the points ``(T0(R_j), R_j)`` (laws.md §6.4);
``T = tokens / token_unit`` (paper unit 0.2B tokens).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register
from mixlaw.laws.dloss_domain import PAPER_TOKEN_UNIT, float_unit


@register
class CMRLaw(Law):
    """``R_CMR(T) = alpha4 * T**s4 + beta3`` (Gu et al. 2024, arXiv:2407.17467, Eq. 8).

    Options
    -------
    token_unit
        Tokens per unit of ``T`` (default ``2e8``: the published parameters use ``T = 100`` for 20B tokens).

    All parameters are free in sign (``alpha4, s4 < 0`` for the two larger published models, laws.md §6.6).
    The inverse, the critical token volume of a ratio, is :meth:`t0_tokens`.
    """

    name = "cmr_law"
    inputs = ("tokens",)
    param_specs = (
        ParamSpec("alpha4", description="amplitude (signed)"),
        ParamSpec("s4", description="token exponent (signed)"),
        ParamSpec("beta3", description="offset (share)"),
    )
    # 460M Finance of the CMR paper (laws.md §6.6).
    example_params = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}
    formula = "R_CMR = alpha4 * T^s4 + beta3,  T = tokens / token_unit"
    citation = "Gu et al. 2024, arXiv:2407.17467"
    fit_space = "raw"
    default_delta = 1e-3
    target = "ratio"

    options_schema = (
        Option("token_unit", PAPER_TOKEN_UNIT, "tokens per unit of T (the paper's 0.2B tokens)", check=float_unit),
    )

    def configure(self, **options: Any) -> None:
        self.token_unit = float(options["token_unit"])

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return p["alpha4"] * torch.pow(x["tokens"] / self.token_unit, p["s4"]) + p["beta3"]

    def t0_tokens(self, ratio: np.ndarray | float, params: Mapping[str, float]) -> np.ndarray:
        """Inverse law ``T0(R) = ((R − beta3) / alpha4) ** (1 / s4)`` in tokens; NaN where no solution
        exists."""
        r = np.asarray(ratio, dtype=np.float64)
        q = (r - params["beta3"]) / params["alpha4"]
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.where(q > 0, np.power(np.where(q > 0, q, 1.0), 1.0 / params["s4"]), np.nan)
        return t * self.token_unit

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Critical token volumes log-uniform over ``T ∈ [20, 250]`` units."""
        return {"tokens": self.token_unit * np.exp(rng.uniform(np.log(20.0), np.log(250.0), n))}

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "alpha4": np.array([-3.0, -1.0, -0.1, -0.01, 0.01, 0.1, 1.0, 3.0]),
            "s4": np.array([-1.0, -0.4, -0.15, 0.1, 0.3, 0.6, 1.0]),
            "beta3": np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 1.5]),
        }

    # ---- separable form (used by mixlaw.fit.solver.profiled): the exponent nonlinear, the rest linear
    def profile_points(self) -> dict[str, np.ndarray]:
        """Token exponents over ``[-3, 3]`` without 0."""
        e = np.round(np.arange(-3.0, 3.0001, 0.02), 3)
        return {"s4": e[np.abs(e) > 0.005]}

    def linear_design(
        self, x: Mapping[str, np.ndarray], theta: Mapping[str, np.ndarray]
    ) -> tuple[tuple[str, ...], np.ndarray]:
        """Columns ``[T^s4, 1]`` for ``alpha4, beta3``."""
        t = np.asarray(x["tokens"], dtype=np.float64) / self.token_unit
        with np.errstate(all="ignore"):
            a = t ** np.asarray(theta["s4"])[..., None]
        return ("alpha4", "beta3"), np.stack([a, np.ones_like(a)], axis=-1)
