"""Domain-loss increment during continual pre-training (CMR paper, Eq. 6, domain part).

.. math:: \\Delta L_{dom}(T) = \\alpha_1 T^{s_1} + \\beta_1

Gu et al., "CMR Scaling Law: Predicting Critical Mixture Ratios for Continual Pre-training of Language
Models", arXiv:2407.17467 (Eq. 6). ``T = tokens / token_unit`` CPT tokens (paper unit: 0.2B tokens, i.e.
``token_unit = 2e8``); ``ΔL_dom = L_dom(T) − L_dom(0)`` in nats/token, negative when the domain improves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register

#: The CMR paper's token unit: T = 100 is 20B tokens, so one unit is 0.2B tokens (laws.md §6.1, §13).
PAPER_TOKEN_UNIT = 2e8

_AMPS = np.array([-1.0, -0.1, -0.01, -1e-3, 1e-3, 0.01, 0.1, 1.0])


def check_token_unit(name: str, token_unit: Any) -> float:
    """Validate the ``token_unit`` option shared by the token-axis CMR laws."""
    try:
        unit = float(token_unit)
    except (TypeError, ValueError) as exc:
        raise InputError(f"law '{name}': token_unit must be a positive number, got {token_unit!r}") from exc
    if not math.isfinite(unit) or unit <= 0:
        raise InputError(f"law '{name}': token_unit must be a positive number, got {token_unit!r}")
    return unit


def float_unit(value: Any) -> float:
    """``check`` of the ``token_unit`` option (a positive number)."""
    try:
        unit = float(value)
    except (TypeError, ValueError):
        raise InputError(f"token_unit must be a positive number, got {value!r}") from None
    if not math.isfinite(unit) or unit <= 0:
        raise InputError(f"token_unit must be a positive number, got {value!r}")
    return unit


@register
class DLossDomain(Law):
    """``ΔL_dom(T) = alpha1 * T**s1 + beta1`` (Gu et al. 2024, arXiv:2407.17467, Eq. 6).

    Options
    -------
    token_unit
        Tokens per unit of ``T`` (default ``2e8``, the paper's 0.2B tokens). Parameters are in these units.
    pin_zero
        ``False`` (default, the paper's form): ``beta1`` free, fitted on ``T > 0`` only; the curve need not
        pass through ``ΔL(0) = 0``, which lets it absorb the jump of the first evaluations. ``True``: ``beta1
        = 0`` and ``s1 > 0``, so ``ΔL(0) = 0`` exactly (laws.md §6.7.6).

    Signs of ``alpha1`` and ``s1`` are free (laws.md §13). Fitted in raw increment space.
    """

    name = "dloss_domain"
    inputs = ("tokens",)
    param_specs = (
        ParamSpec("alpha1", description="amplitude (signed)"),
        ParamSpec("s1", description="token exponent (signed)"),
        ParamSpec("beta1", description="offset (nats/token)"),
    )
    example_params = {"alpha1": -0.05, "s1": 0.3, "beta1": 0.02}
    formula = "dL_dom = alpha1 * T^s1 + beta1,  T = tokens / token_unit"
    citation = "Gu et al. 2024, arXiv:2407.17467"
    fit_space = "raw"
    default_delta = 1e-3
    target = "dloss"

    options_schema = (
        Option("token_unit", PAPER_TOKEN_UNIT, "tokens per unit of T (the paper's 0.2B tokens)", check=float_unit),
        Option("pin_zero", False, "beta1 = 0 and s1 > 0, so that dL(0) = 0 exactly", check=bool),
    )

    def configure(self, **options: Any) -> Mapping[str, Any] | None:
        self.token_unit = float(options["token_unit"])
        self.pin_zero = bool(options["pin_zero"])
        if not self.pin_zero:
            return None
        return {
            "param_specs": (
                ParamSpec("alpha1", description="amplitude (signed)"),
                ParamSpec("s1", 0.0, np.inf, description="token exponent (> 0 so that dL(0) = 0)"),
            ),
            "example_params": {"alpha1": -0.05, "s1": 0.3},
        }

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        t = x["tokens"] / self.token_unit
        out = p["alpha1"] * torch.pow(t, p["s1"])
        return out if self.pin_zero else out + p["beta1"]

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """CPT token counts log-uniform over ``T ∈ [1, 100]`` units (the paper's trajectories)."""
        return {"tokens": self.token_unit * np.exp(rng.uniform(0.0, np.log(100.0), n))}

    def start_grid(self) -> dict[str, np.ndarray]:
        if self.pin_zero:
            return {"alpha1": _AMPS, "s1": np.array([0.05, 0.1, 0.2, 0.4, 0.7, 1.0, 1.5])}
        return {
            "alpha1": _AMPS,
            "s1": np.array([-1.0, -0.5, -0.2, 0.1, 0.3, 0.6, 1.0]),
            "beta1": np.array([-0.3, -0.05, 0.0, 0.05]),
        }

    # ---- separable form (used by mixlaw.fit.solver.profiled): the exponent nonlinear, the rest linear
    def profile_points(self) -> dict[str, np.ndarray]:
        """Exponents over ``[-1.5, 2.5]`` without 0 (``> 0`` when pinned)."""
        e = np.round(np.arange(-1.5, 2.5001, 0.05), 3)
        return {"s1": e[np.abs(e) > 0.02] if not self.pin_zero else e[e > 0.02]}

    def linear_design(
        self, x: Mapping[str, np.ndarray], theta: Mapping[str, np.ndarray]
    ) -> tuple[tuple[str, ...], np.ndarray]:
        """Columns ``[T^s1(, 1)]`` for ``alpha1`` (and ``beta1``)."""
        t = np.asarray(x["tokens"], dtype=np.float64) / self.token_unit
        with np.errstate(all="ignore"):
            a = t ** np.asarray(theta["s1"])[..., None]
        if self.pin_zero:
            return ("alpha1",), a[..., None]
        return ("alpha1", "beta1"), np.stack([a, np.ones_like(a)], axis=-1)
