"""One-variable saturating power law.

.. math:: L(x) = E + A \\cdot x^{-\\alpha}

The size law and step law of Data Mixing Laws (Ye et al., arXiv:2403.16952, §7.1), Kaplan et al.'s
single-variable laws (arXiv:2001.08361) and the Chinchilla law with one factor held fixed are all of this form.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register


def _column(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"expected the name of an input column, got {value!r}")
    return value


@register
class PowerLaw(Law):
    """``L(x) = E + A * x^(-alpha)`` over one named input (option ``input``, default ``tokens``).

    Fitted in log space as ``log L = LSE(log E, log A − alpha·log x)`` (Ye et al. 2024, arXiv:2403.16952;
    Kaplan et al. 2020, arXiv:2001.08361).
    """

    name = "power_law"
    inputs = ("tokens",)
    param_specs = (
        ParamSpec("A", 0.0, np.inf, description="coefficient"),
        ParamSpec("E", 0.0, np.inf, description="asymptote (irreducible loss)"),
        ParamSpec("alpha", 0.0, np.inf, transform="identity", description="exponent"),
    )
    example_params = {"A": 40.0, "E": 2.0, "alpha": 0.3}
    formula = "L = E + A * x^(-alpha)"
    citation = "Kaplan et al. 2020, arXiv:2001.08361; Ye et al. 2024, arXiv:2403.16952"

    options_schema = (
        Option("input", "tokens", "the input column the law reads (tokens, n_params, ...)", check=_column),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        return {"inputs": (options["input"],)}

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        log_x = torch.log(x[self.options["input"]])
        terms = torch.stack(torch.broadcast_tensors(torch.log(p["E"]), torch.log(p["A"]) - p["alpha"] * log_x))
        return torch.logsumexp(terms, dim=0)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "A": np.exp(np.arange(0.0, 26.0, 2.5)),
            "E": np.exp(np.linspace(-1.0, 1.5, 6)),
            "alpha": np.linspace(0.05, 1.5, 7),
        }

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {self.options["input"]: np.exp(rng.uniform(np.log(1e6), np.log(1e10), n))}
