"""General-loss increment during continual pre-training (CMR paper, Eq. 6, general part).

.. math:: \\Delta L_{gen}(T) = \\alpha_2 T^{s_2} + \\alpha_3 T^{s_3} + \\beta_2

Gu et al., "CMR Scaling Law: Predicting Critical Mixture Ratios for Continual Pre-training of Language
Models", arXiv:2407.17467 (Eq. 6). Two power terms let the general loss rise, then fall. ``T = tokens /
token_unit`` CPT tokens (paper unit 0.2B tokens); ``ΔL_gen = L_gen(T) − L_gen(0)`` in nats/token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.laws._base import Law, Option, ParamSpec, Symmetry, Tensor, register
from mixlaw.laws.dloss_domain import PAPER_TOKEN_UNIT, float_unit

_AMPS = np.array([-0.1, -0.01, -1e-3, 1e-3, 0.01, 0.1])


@register
class DLossGeneral(Law):
    """``ΔL_gen(T) = alpha2 * T**s2 + alpha3 * T**s3 + beta2`` (Gu et al. 2024, arXiv:2407.17467, Eq. 6).

    Options
    -------
    token_unit
        Tokens per unit of ``T`` (default ``2e8``, the paper's 0.2B tokens).
    pin_zero
        ``False`` (default, the paper's form): ``beta2`` free, fitted on ``T > 0``. ``True``: ``beta2 = 0``
        and ``s2, s3 > 0`` so that ``ΔL(0) = 0`` exactly (laws.md §6.7.6).

    The two power terms are interchangeable; :func:`canonical_params` orders them so that ``s2 <= s3``. Signs
    of the amplitudes and exponents are free (laws.md §13). Fitted in raw increment space.
    """

    name = "dloss_general"
    inputs = ("tokens",)
    param_specs = (
        ParamSpec("alpha2", description="first amplitude (signed)"),
        ParamSpec("s2", description="first token exponent (signed)"),
        ParamSpec("alpha3", description="second amplitude (signed)"),
        ParamSpec("s3", description="second token exponent (signed)"),
        ParamSpec("beta2", description="offset (nats/token)"),
    )
    example_params = {"alpha2": 0.03, "s2": 0.3, "alpha3": -0.002, "s3": 0.9, "beta2": 0.0}
    formula = "dL_gen = alpha2 * T^s2 + alpha3 * T^s3 + beta2,  T = tokens / token_unit"
    citation = "Gu et al. 2024, arXiv:2407.17467"
    fit_space = "raw"
    default_delta = 1e-3
    target = "dloss"
    # The two power terms are interchangeable: fits and draws are reported with s2 <= s3 (canonical_params).
    symmetry = Symmetry(components=(("s2", "alpha2"), ("s3", "alpha3")))
    options_schema = (
        Option("token_unit", PAPER_TOKEN_UNIT, "tokens per unit of T (the paper's 0.2B tokens)", check=float_unit),
        Option("pin_zero", False, "beta2 = 0 and s2, s3 > 0, so that dL(0) = 0 exactly", check=bool),
    )

    def configure(self, **options: Any) -> Mapping[str, Any] | None:
        self.token_unit = float(options["token_unit"])
        self.pin_zero = bool(options["pin_zero"])
        if not self.pin_zero:
            return None
        return {
            "param_specs": (
                ParamSpec("alpha2", description="first amplitude (signed)"),
                ParamSpec("s2", 0.0, np.inf, description="first token exponent (> 0)"),
                ParamSpec("alpha3", description="second amplitude (signed)"),
                ParamSpec("s3", 0.0, np.inf, description="second token exponent (> 0)"),
            ),
            "example_params": {"alpha2": 0.03, "s2": 0.3, "alpha3": -0.002, "s3": 0.9},
        }

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        t = x["tokens"] / self.token_unit
        out = p["alpha2"] * torch.pow(t, p["s2"]) + p["alpha3"] * torch.pow(t, p["s3"])
        return out if self.pin_zero else out + p["beta2"]

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """CPT token counts log-uniform over ``T ∈ [1, 100]`` units (the paper's trajectories)."""
        return {"tokens": self.token_unit * np.exp(rng.uniform(0.0, np.log(100.0), n))}

    def start_grid(self) -> dict[str, np.ndarray]:
        if self.pin_zero:
            return {
                "alpha2": _AMPS,
                "s2": np.array([0.05, 0.1, 0.3, 0.5]),
                "alpha3": _AMPS,
                "s3": np.array([0.6, 0.8, 1.0, 1.5]),
            }
        # s2 < s3 on every start: the two terms are interchangeable, and ordered starts make the fit come back in
        # the canonical order (see canonical_params) instead of an arbitrary one.
        return {
            "alpha2": _AMPS,
            "s2": np.array([-1.0, -0.5, 0.1, 0.3, 0.5]),
            "alpha3": _AMPS,
            "s3": np.array([0.6, 0.8, 1.0, 1.5]),
            "beta2": np.array([-0.05, 0.0, 0.05]),
        }

    # ---- separable form (used by mixlaw.fit.solver.profiled): exponents nonlinear, the rest linear
    def profile_points(self) -> dict[str, np.ndarray]:
        """Exponent pairs ``s2 < s3`` (gap ≥ 0.05, no exponent at 0) over ``[-1.5, 2.5]`` (``> 0`` pinned)."""
        e = np.round(np.arange(-1.5, 2.5001, 0.1), 3)
        e = e[np.abs(e) > 0.02] if not self.pin_zero else e[e > 0.02]
        i, j = np.triu_indices(e.size, k=1)
        return {"s2": e[i], "s3": e[j]}

    def linear_design(
        self, x: Mapping[str, np.ndarray], theta: Mapping[str, np.ndarray]
    ) -> tuple[tuple[str, ...], np.ndarray]:
        """Columns ``[T^s2, T^s3(, 1)]`` for the amplitudes ``alpha2, alpha3`` (and ``beta2``)."""
        t = np.asarray(x["tokens"], dtype=np.float64) / self.token_unit
        with np.errstate(all="ignore"):
            a = t ** np.asarray(theta["s2"])[..., None]
            b = t ** np.asarray(theta["s3"])[..., None]
        cols = [a, b] if self.pin_zero else [a, b, np.ones_like(a)]
        return (("alpha2", "alpha3") if self.pin_zero else ("alpha2", "alpha3", "beta2")), np.stack(
            np.broadcast_arrays(*cols), axis=-1
        )


def canonical_params(params: Mapping[str, float]) -> dict[str, float]:
    """Order the two interchangeable power terms so that ``s2 <= s3`` (for comparing fits)."""
    out = dict(params)
    if out["s2"] > out["s3"]:
        out["alpha2"], out["alpha3"] = out["alpha3"], out["alpha2"]
        out["s2"], out["s3"] = out["s3"], out["s2"]
    return out
