"""Chinchilla parametric law.

.. math:: L(N, D) = E + A / N^{\\alpha} + B / D^{\\beta}

Hoffmann et al., "Training Compute-Optimal Large Language Models", arXiv:2203.15556 (Approach 3); replication by
Besiroglu et al., arXiv:2404.10102. ``N`` parameters, ``D`` training tokens, ``L`` loss in nats/token.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from mixlaw.laws._base import Law, ParamSpec, Tensor, register


@register
class Chinchilla(Law):
    """``L(N, D) = E + A/N^alpha + B/D^beta`` (Hoffmann et al. 2022, arXiv:2203.15556).

    Fitted in log space through ``log L = LSE(e, a - alpha log N, b - beta log D)`` with ``A = e^a``,
    ``B = e^b``, ``E = e^e`` (Besiroglu et al. 2024, arXiv:2404.10102). ``alpha`` and ``beta`` are left
    unconstrained as in the published recipe; the default start grid is Hoffmann's 4,500 points
    (alpha, beta in {0, 0.5, ..., 2}; e in {-1, -0.5, ..., 1}; a, b in {0, 5, ..., 25}).
    """

    name = "chinchilla"
    inputs = ("n_params", "tokens")
    param_specs = (
        ParamSpec("A", 0.0, np.inf, description="model-size coefficient"),
        ParamSpec("B", 0.0, np.inf, description="data coefficient"),
        ParamSpec("E", 0.0, np.inf, description="irreducible loss (nats/token)"),
        ParamSpec("alpha", 0.0, np.inf, transform="identity", description="model-size exponent"),
        ParamSpec("beta", 0.0, np.inf, transform="identity", description="data exponent"),
    )
    example_params = {"A": 482.01, "B": 2085.43, "E": 1.8169, "alpha": 0.34781, "beta": 0.36585}
    formula = "L = E + A/N^alpha + B/D^beta"
    citation = "Hoffmann et al. 2022, arXiv:2203.15556; Besiroglu et al. 2024, arXiv:2404.10102"

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        log_n, log_d = torch.log(x["n_params"]), torch.log(x["tokens"])
        terms = torch.stack(
            torch.broadcast_tensors(
                torch.log(p["E"]),
                torch.log(p["A"]) - p["alpha"] * log_n,
                torch.log(p["B"]) - p["beta"] * log_d,
            )
        )
        return torch.logsumexp(terms, dim=0)

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "A": np.exp(np.arange(0.0, 26.0, 5.0)),
            "B": np.exp(np.arange(0.0, 26.0, 5.0)),
            "E": np.exp(np.arange(-1.0, 1.01, 0.5)),
            "alpha": np.arange(0.0, 2.01, 0.5),
            "beta": np.arange(0.0, 2.01, 0.5),
        }

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        n_params = np.exp(rng.uniform(np.log(7e7), np.log(1.6e10), n))
        tokens = n_params * np.exp(rng.uniform(np.log(2.0), np.log(200.0), n))
        return {"n_params": n_params, "tokens": tokens}
