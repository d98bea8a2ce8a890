"""Data Mixing Laws, explicit form for one validation domain (laws.md §7.1).

.. math:: L(r) = c + k \\exp\\Big(\\sum_j t_j r_j\\Big)

Ye, Liu, Sun, Zhou, Zhan and Qiu, "Data Mixing Laws: Optimizing Data Mixtures by Predicting Language Modeling
Performance", arXiv:2403.16952 (ICLR 2025). ``r`` is the training mixture (columns ``w_<domain>``, summing to 1) at
one model size and step. Because ``Σ_j r_j = 1``, adding a constant to every ``t_j`` only rescales ``k``: the paper's
form is not identifiable as written. Here the last domain is the reference (``t_n = 0``); the paper's
``(log k, t_1 … t_n)`` map to this law's ``(log k + t_n, t_1 − t_n, …, t_{n−1} − t_n)`` with the same predictions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register
from mixlaw.laws._mixture_options import domain_list

__all__ = ["DataMixingLaw", "from_paper"]


def from_paper(log_c: float, log_k: float, t: list[float] | tuple[float, ...]) -> dict[str, Any]:
    """The paper's published ``(log c, log k, t_1..t_n)`` (laws.md §7.5) as this law's parameters."""
    tn = float(t[-1])
    return {"c": float(np.exp(log_c)), "k": float(np.exp(log_k + tn)), "t": [float(v) - tn for v in t[:-1]]}


@register
class DataMixingLaw(Law):
    """``L = c + k * exp(Σ_{j<n} t_j r_j)``, last domain as reference (Ye et al. 2024, arXiv:2403.16952, Eq. 1).

    Options
    -------
    domains
        Training domains (default ``a,b,c``); one ``w_<domain>`` column each. ``t`` has one entry per domain but
        the last (signed; the domain's own entry is usually strongly negative).
    fit_space
        ``"log"`` (default): Huber on log-loss residuals, δ = 1e-3; ``"raw"``: Huber on raw losses, δ = 0.02 (the
        paper's 2-domain setting, laws.md §7.3).

    In log space the law is evaluated as ``log L = LSE(log c, log k + Σ_j t_j r_j)``.
    """

    name = "dml"
    formula = "L = c + k * exp(sum_j t_j r_j)   (t_last = 0)"
    citation = "Ye et al. 2024, arXiv:2403.16952"

    options_schema = (
        Option("domains", ("a", "b", "c"), "training domains (one w_<domain> column each)", check=domain_list),
        Option("fit_space", "log", "residuals of log losses, or raw losses as in the paper", choices=("log", "raw")),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        doms: tuple[str, ...] = tuple(options["domains"])
        self.domains = doms
        self.w_cols = tuple(f"w_{d}" for d in doms)
        n = len(doms)
        example_t = [float(v) for v in np.resize(np.array([-2.0, 0.8, -0.6, 1.2]), n - 1)]
        return {
            "fit_space": options["fit_space"],
            "default_delta": 1e-3 if options["fit_space"] == "log" else 0.02,
            "inputs": self.w_cols,
            "param_specs": (
                ParamSpec("c", 0.0, np.inf, plausible=(0.3, 4.0), description="asymptotic loss"),
                ParamSpec("k", 0.0, np.inf, plausible=(0.01, 5.0), description="scale (at the last domain)"),
                ParamSpec(
                    "t", length=n - 1, plausible=(-5.0, 5.0), description="mixture coefficients vs the last domain"
                ),
            ),
            "example_params": {"c": 2.0, "k": 0.8, "t": example_t},
        }

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        w = torch.stack([x[c] for c in self.w_cols[:-1]], dim=-1)  # (n, D-1)
        expo = torch.log(p["k"]) + (w * p["t"]).sum(-1)
        return torch.logsumexp(torch.stack(torch.broadcast_tensors(torch.log(p["c"]), expo)), dim=0)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Dirichlet(0.7) mixtures over the domains."""
        w = rng.dirichlet(np.full(len(self.w_cols), 0.7), size=n)
        return {c: w[:, j] for j, c in enumerate(self.w_cols)}
