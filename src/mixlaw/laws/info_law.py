"""An information law for quality-weighted mixtures with repetition (InfoLaw-style; docs/laws.md, "info_law").

.. math::
    L = E + \\frac{A}{(N/N_u)^{\\alpha}} + \\frac{B}{(I/D_u)^{\\beta}},\\qquad
    I = k \\sum_{i=1}^{k} q_i\\, U_i\\, g(r_i;\\, r^*(N)),\\qquad r_i = \\frac{h_i D}{U_i},

.. math::
    g(r; r^*) = \\min(r, 1) + r^* \\big(1 - e^{-\\max(r - 1,\\,0)/r^*}\\big),\\qquad r^*(N) = R\\,(N/N_u)^{-\\rho}

The abstract of InfoLaw ("information scaling laws for quality-weighted mixtures with repetition": loss from
consumed tokens, model size, mixture weights and repetition, pre-training as *information accumulation* where
quality sets information density and repetition gives *scale-dependent* diminishing returns) fixes the ingredients,
not the equations; this form is mixlaw's reading of it:

- ``I`` is the **effective information** accumulated over domains: each domain contributes its consumed tokens
  ``h_i D`` at density ``q_i`` (``q`` on the simplex: relative quality; ``k q_i = 1`` for every domain is plain
  token counting), discounted once they repeat.
- A domain seen ``r_i`` times (epochs, from its unique tokens ``U_i``) contributes its first pass in full and
  repeats with the data-constrained decay of Muennighoff et al. (arXiv:2305.16264, laws.md §3):
  ``U_i g(r_i)`` saturates at ``U_i (1 + r*)``.
- The decay constant depends on scale, ``r*(N) = R (N/N_u)^(−ρ)``: with ``ρ > 0`` larger models exhaust repeated data
  sooner (the "scale-dependent diminishing returns" of the abstract); ``ρ`` is signed so the data decide.
- ``E + A/N^α`` is Chinchilla's size term; ``B/I^β`` its data term with ``I`` in place of ``D``: with one domain,
  ``q = 1`` and no repetition the law is Chinchilla's (arXiv:2203.15556).

Parameters: ``E, A, α, B, β, R > 0``, ``ρ`` signed, ``q`` on the simplex (``k + 6`` entries, ``k + 5`` free).
Inputs: ``n_params``, ``tokens``, ``w_<domain>`` and ``unique_tokens_<domain>`` per domain (a domain that never
repeats can carry any unique count far above its tokens). Estimator: the shared Huber on log losses (δ = 1e-3).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register
from mixlaw.laws._mixture_options import column_name, domain_list, positive_float

__all__ = ["InfoLaw", "effective_information"]


def effective_information(
    h: Any, d: Any, u: Any, q: Any, r_star: Any, k: int
) -> Any:
    """``I = k Σ_i q_i U_i g(h_i D / U_i; r*)`` (torch tensors; ``h, u`` of shape ``(..., k)``, ``d, r*`` broadcast)."""
    r = h * d[..., None] / u
    rs = r_star[..., None]
    g = torch.clamp(r, max=1.0) - rs * torch.expm1(-torch.clamp(r - 1.0, min=0.0) / rs)
    return k * (q * u * g).sum(-1)


@register
class InfoLaw(Law):
    """``L = E + A/N^alpha + B/I^beta``, ``I`` the quality-weighted, repetition-discounted information.

    Options
    -------
    domains
        Training domains (columns ``w_<domain>`` and ``<unique><domain>``).
    unique
        Prefix of the unique-token columns (default ``unique_tokens_``).
    size, size_unit
        Model-size column (default ``n_params``) and the unit ``N_u`` (default ``1e8``).
    tokens, token_unit
        Consumed-token column (default ``tokens``) and the unit ``D_u`` of ``I`` (default ``1e9``).
    """

    name = "info_law"
    formula = "L = E + A/N^alpha + B/I^beta,  I = k sum_i q_i U_i g(h_i D/U_i; R N^-rho)  (g: data-constrained decay)"
    citation = ("InfoLaw-style (mixlaw's form, docs/laws.md); decay of Muennighoff et al. 2023, arXiv:2305.16264; "
                "size term of Hoffmann et al. 2022, arXiv:2203.15556")

    options_schema = (
        Option("domains", ("a", "b", "c"), "training domains (w_<domain> and unique-token columns)", check=domain_list),
        Option("unique", "unique_tokens_", "prefix of the per-domain unique-token columns", check=column_name),
        Option("size", "n_params", "model-size column N", check=column_name),
        Option("size_unit", 1e8, "N is divided by this before the power", check=positive_float),
        Option("tokens", "tokens", "consumed-token column D", check=column_name),
        Option("token_unit", 1e9, "I is divided by this before the power", check=positive_float),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        self.domains: tuple[str, ...] = tuple(options["domains"])
        k = len(self.domains)
        self.w_cols = tuple(f"w_{d}" for d in self.domains)
        self.u_cols = tuple(f"{options['unique']}{d}" for d in self.domains)
        self.size_col = str(options["size"])
        self.size_unit = float(options["size_unit"])
        self.tokens_col = str(options["tokens"])
        self.token_unit = float(options["token_unit"])
        specs = (
            ParamSpec("E", 0.0, np.inf, plausible=(0.3, 4.0), description="irreducible loss"),
            ParamSpec("A", 0.0, np.inf, plausible=(0.05, 10.0), description="size amplitude"),
            ParamSpec("alpha", 0.0, np.inf, plausible=(0.05, 1.2), description="size exponent"),
            ParamSpec("B", 0.0, np.inf, plausible=(0.05, 10.0), description="information amplitude"),
            ParamSpec("beta", 0.0, np.inf, plausible=(0.05, 1.2), description="information exponent"),
            ParamSpec("q", simplex=True, length=k, description="information density (quality) of each domain"),
            ParamSpec("R", 0.0, np.inf, plausible=(0.5, 100.0), description="repetition decay at N = N_u (epochs)"),
            ParamSpec("rho", plausible=(-1.0, 1.0), description="scale dependence of the decay (signed)"),
        )
        q = np.resize(np.array([0.5, 0.3, 0.2, 0.4, 0.25]), k)
        example = {"E": 1.8, "A": 0.6, "alpha": 0.35, "B": 0.9, "beta": 0.3, "q": [float(v) for v in q / q.sum()],
                   "R": 8.0, "rho": 0.3}  # fmt: skip
        return {
            "inputs": (self.size_col, self.tokens_col, *self.w_cols, *self.u_cols),
            "param_specs": specs,
            "example_params": example,
        }

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        h = torch.stack([x[c] for c in self.w_cols], dim=-1)
        u = torch.stack([x[c] for c in self.u_cols], dim=-1)
        log_n = torch.log(x[self.size_col] / self.size_unit)
        d = x[self.tokens_col]
        r_star = p["R"] * torch.exp(-p["rho"] * log_n)
        d, r_star = torch.broadcast_tensors(d, r_star)
        info = effective_information(h, d, u, p["q"], r_star, len(self.domains)) / self.token_unit
        terms = (
            torch.log(p["E"]),
            torch.log(p["A"]) - p["alpha"] * log_n,
            torch.log(p["B"]) - p["beta"] * torch.log(info),
        )
        return torch.exp(torch.logsumexp(torch.stack(torch.broadcast_tensors(*terms)), dim=0))

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Dirichlet(1) mixtures; N log-uniform over 50M–5B, D over 1B–100B tokens and every domain's unique tokens
        over 100M–100B, so that runs range from a fraction of an epoch to hundreds of epochs per domain."""
        w = rng.dirichlet(np.ones(len(self.w_cols)), size=n)
        out = {c: w[:, j] for j, c in enumerate(self.w_cols)}
        out[self.size_col] = np.exp(rng.uniform(np.log(5e7), np.log(5e9), n))
        out[self.tokens_col] = np.exp(rng.uniform(np.log(1e9), np.log(1e11), n))
        for c in self.u_cols:
            out[c] = np.exp(rng.uniform(np.log(1e8), np.log(1e11), n))
        return out
