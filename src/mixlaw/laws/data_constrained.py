"""Data-constrained scaling law (repeated data).

.. math::

    L(N, D, U_D) = E + A / N'^{\\alpha} + B / D'^{\\beta}, \\quad
    D' = U_D + U_D R_D^* (1 - e^{-R_D / R_D^*}), \\quad R_D = \\max(D / U_D - 1, 0),

    N' = U_N + U_N R_N^* (1 - e^{-R_N / R_N^*}), \\quad U_N = \\min(N, N_{opt}(U_D)),
    \\quad R_N = \\max(N / U_N - 1, 0),

with :math:`N_{opt}(D) = G (D G)^{\\beta/\\alpha}`, :math:`G = (\\alpha A / (\\beta B))^{1/(\\alpha+\\beta)}`.
Muennighoff et al., "Scaling Data-Constrained Language Models", arXiv:2305.16264 (laws.md §3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register


def saturate(total: Tensor, unique: Tensor, r_star: Tensor) -> Tensor:
    """Effective amount of a repeated resource: ``U + U·R*·(1 − exp(−R/R*))`` with ``R = max(total/U − 1, 0)``.

    After about ``R*`` repetitions a further repetition is worth ≈ 1/e of a fresh one; the value saturates at
    ``U(1 + R*)``. Shared primitive of the data-constrained law (arXiv:2305.16264) and the laws built on it
    (ATLAS, arXiv:2510.22037, uses ``R* = 1/λ``).
    """
    repeats = torch.clamp(total / unique - 1.0, min=0.0)
    return unique + unique * r_star * (-torch.expm1(-repeats / r_star))


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"expected true/false, got {value!r}")
    return value


@register
class DataConstrained(Law):
    """Chinchilla law on effective data and parameters under repetition (Muennighoff et al. 2023).

    ``L = E + A/N'^alpha + B/D'^beta`` with ``D'``/``N'`` from :func:`saturate` (see the module docstring).
    Inputs ``n_params`` (N), ``tokens`` (D, total training tokens), ``unique_tokens`` (U_D). Option
    ``tie_exponents=True`` fixes ``beta = alpha`` as in the paper's stage-1 fit. The paper fits in two stages
    (base law on unrepeated data, then ``R_D*``, ``R_N*`` with the base frozen); pass the base as ``starts`` to
    follow it, or fit all parameters jointly (the default grid).
    """

    name = "data_constrained"
    inputs = ("n_params", "tokens", "unique_tokens")
    formula = "L = E + A/N'^alpha + B/D'^beta, D' = U + U R_D*(1 - exp(-(D/U - 1)/R_D*)), N' likewise"
    citation = "Muennighoff et al. 2023, arXiv:2305.16264"
    example_params = {
        "A": 520.82,
        "B": 1487.72,
        "E": 1.86914,
        "alpha": 0.3526596,
        "beta": 0.3526596,
        "R_D_star": 15.387756,
        "R_N_star": 5.309743,
    }

    options_schema = (Option("tie_exponents", False, "fix beta = alpha (the paper's stage-1 fit)", check=_bool),)

    def configure(self, **options: Any) -> Mapping[str, Any]:
        tie_exponents = options["tie_exponents"]
        specs = [
            ParamSpec("A", 0.0, np.inf, description="model-size coefficient"),
            ParamSpec("B", 0.0, np.inf, description="data coefficient"),
            ParamSpec("E", 0.0, np.inf, description="irreducible loss"),
            ParamSpec("alpha", 0.0, np.inf, description="model-size exponent"),
        ]
        if not tie_exponents:
            specs.append(ParamSpec("beta", 0.0, np.inf, description="data exponent"))
        specs += [
            ParamSpec("R_D_star", 0.0, np.inf, description="data repetition decay (epochs)"),
            ParamSpec("R_N_star", 0.0, np.inf, description="excess-parameter decay"),
        ]
        example = dict(self._declared["example_params"])
        if tie_exponents:
            example.pop("beta")
        return {"param_specs": tuple(specs), "example_params": example}

    def _beta(self, p: Mapping[str, Tensor]) -> Tensor:
        return p["alpha"] if self.options["tie_exponents"] else p["beta"]

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        alpha, beta = p["alpha"], self._beta(p)
        A, B = p["A"], p["B"]
        n, d, u = x["n_params"], x["tokens"], x["unique_tokens"]
        d_eff = saturate(d, u, p["R_D_star"])
        g = (alpha * A / (beta * B)) ** (1.0 / (alpha + beta))
        n_opt = g * (u * g) ** (beta / alpha)
        u_n = torch.minimum(n, n_opt)
        n_eff = saturate(n, u_n, p["R_N_star"])
        terms = torch.stack(
            torch.broadcast_tensors(
                torch.log(p["E"]), torch.log(A) - alpha * torch.log(n_eff), torch.log(B) - beta * torch.log(d_eff)
            )
        )
        return torch.logsumexp(terms, dim=0)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        grid = {
            "A": np.exp(np.linspace(0.0, 25.0, 5)),
            "B": np.exp(np.linspace(0.0, 25.0, 5)),
            "E": np.exp(np.linspace(-1.0, 1.0, 4)),
            "alpha": np.linspace(0.05, 2.0, 4),
            "R_D_star": np.array([1.0, 7.0, 20.0]),
            "R_N_star": np.array([1.0, 7.0, 20.0]),
        }
        if not self.options["tie_exponents"]:
            grid["beta"] = np.linspace(0.05, 2.0, 4)
        return grid

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n_params = np.exp(rng.uniform(np.log(1e7), np.log(9e9), n))
        unique = np.exp(rng.uniform(np.log(1e8), np.log(1e11), n))
        tokens = unique * np.exp(rng.uniform(0.0, np.log(60.0), n))
        return {"n_params": n_params, "tokens": tokens, "unique_tokens": unique}
