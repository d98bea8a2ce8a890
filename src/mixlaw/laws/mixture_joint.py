"""The joint law for optimal data mixtures, L(N, D, h) with mixture-dependent size and token terms (laws.md §10.1).

.. math::
    L(N, D, h) = E + \\frac{1}{\\sum_i C_i h_i^{\\gamma_i}} + \\frac{A_h}{N^{\\alpha}} + \\frac{B_h}{D^{\\beta}},\\quad
    A_h = \\Big(\\sum_i C^A_i h_i\\Big)^{\\gamma^A},\\quad B_h = \\Big(\\sum_i C^B_i h_i\\Big)^{\\gamma^B}

Shukor, Bethune, Busbridge, Grangier, Fini, El-Nouby and Ablin, "Scaling Laws for Optimal Data Mixtures",
arXiv:2507.09404 (NeurIPS 2025). Same inputs and options as ``mixture_additive``; ``4k + 5`` parameters (37 at
k = 8, the count the paper reports). The optimum moves with ``N`` and ``D``.

Choices (the form is tagged [unverified] in laws.md §10.1; §10.4 asks for a switch):

- ``exponents="shared"`` (default): one ``α`` and one ``β`` for every mixture, the 4k + 5 form.
  ``exponents="mixture"``: ``α_h = Σ_i α_i h_i`` and ``β_h = Σ_i β_i h_i`` (6k + 3 parameters), the
  h-dependent-exponent variant of §10.4 item 1.
- **Parameterisation.** ``A_h = (Σ_i C^A_i h_i)^γ^A`` is written ``A (Σ_i a_i h_i)^γ^A`` with ``a`` on the simplex
  and ``A = |C^A|_1^γ^A`` (same count, same predictions; :func:`to_paper` converts back). The paper's form couples
  the scale of ``C^A`` with ``γ^A`` and made the solver crawl (most starts ran to the iteration cap); this one
  separates the amplitude from the mixture shape. ``B_h`` alike.
- ``C_i, γ_i, A, B`` positive; ``γ_i <= 4``; ``γ^A, γ^B`` signed (``A_h`` is positive for any sign).
- Huber on log residuals, δ = 1e-3; log-sum-exp form with
  ``log(A_h/N^α) = log A + γ^A LSE_i(log a_i + log h_i) − α log N``. Starts as for ``mixture_additive``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from mixlaw.laws._base import Option, ParamSpec, Tensor, register
from mixlaw.laws._spec import ParamValue
from mixlaw.laws.mixture_additive import (
    ScaleMixtureLaw,
    configure_scale,
    example_scale_inputs,
    linear_guess,
    mixture_bias_log,
    scale_inputs,
    scale_options,
)

__all__ = ["MixtureJoint", "to_paper"]


def _vec(values: Sequence[float], k: int) -> list[float]:
    return [float(v) for v in np.resize(np.asarray(values, dtype=np.float64), k)]


def _simplex(values: Sequence[float], k: int) -> list[float]:
    v = np.resize(np.asarray(values, dtype=np.float64), k)
    return [float(x) for x in v / v.sum()]


def _log_dot(a: Tensor, log_h: Tensor) -> Tensor:
    """``log Σ_i a_i h_i`` (``a`` on the simplex; zero entries give −inf terms, which LSE ignores)."""
    return torch.logsumexp(torch.log(a) + log_h, dim=-1)


def to_paper(params: Mapping[str, Any]) -> dict[str, Any]:
    """This law's ``(A, a, γ^A)`` as the paper's loadings ``C^A_i = A^(1/γ^A) a_i`` (``B``, ``b`` alike).

    Undefined (NaN) where ``γ^A = 0``: the size amplitude then does not depend on the mixture.
    """
    out = {k: v for k, v in params.items() if k not in ("A", "a", "B", "b")}
    for amp, load, gam, name in (("A", "a", "gammaA", "CA"), ("B", "b", "gammaB", "CB")):
        g = float(params[gam])
        scale = float(params[amp]) ** (1.0 / g) if g != 0 else float("nan")
        out[name] = [scale * float(v) for v in params[load]]
    return out


@register
class MixtureJoint(ScaleMixtureLaw):
    """``L = E + 1/Σ C_i h_i^gamma_i + A_h/N^alpha + B_h/D^beta`` with ``A_h = A (Σ a_i h_i)^gammaA``, ``B_h`` alike
    (Shukor et al. 2025, arXiv:2507.09404).

    Options
    -------
    domains, size, size_unit, tokens, token_unit, floor
        As for ``mixture_additive``.
    exponents
        ``shared`` (default; scalar ``alpha``, ``beta``) or ``mixture`` (vectors: ``α_h = Σ_i alpha_i h_i``).
    """

    name = "mixture_joint"
    formula = "L = E + 1/sum_i C_i h_i^gamma_i + A (sum_i a_i h_i)^gammaA/N^alpha + B (sum_i b_i h_i)^gammaB/D^beta"
    citation = "Shukor et al. 2025, arXiv:2507.09404"
    options_schema = (
        *scale_options(),
        Option("exponents", "shared", "alpha, beta shared or mixture-weighted", choices=("shared", "mixture")),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        configure_scale(self, options)
        k = len(self.domains)
        self.mixture_exponents = options["exponents"] == "mixture"
        ke = k if self.mixture_exponents else None
        specs = (
            ParamSpec("E", 0.0, np.inf, plausible=(0.3, 4.0), description="irreducible loss"),
            ParamSpec("C", 0.0, np.inf, length=k, plausible=(0.2, 10.0), description="mixture amplitudes"),
            ParamSpec("gamma", 0.0, 4.0, length=k, plausible=(0.05, 2.0), description="mixture exponents (at most 4)"),
            ParamSpec("A", 0.0, np.inf, plausible=(0.05, 10.0), description="size amplitude"),
            ParamSpec("a", simplex=True, length=k, description="size-amplitude loadings (CA_i up to scale)"),
            ParamSpec("gammaA", plausible=(-2.0, 2.0), description="size-amplitude exponent (signed)"),
            ParamSpec("alpha", 0.0, np.inf, length=ke, plausible=(0.05, 1.2), description="size exponent"),
            ParamSpec("B", 0.0, np.inf, plausible=(0.05, 10.0), description="token amplitude"),
            ParamSpec("b", simplex=True, length=k, description="token-amplitude loadings (CB_i up to scale)"),
            ParamSpec("gammaB", plausible=(-2.0, 2.0), description="token-amplitude exponent (signed)"),
            ParamSpec("beta", 0.0, np.inf, length=ke, plausible=(0.05, 1.2), description="token exponent"),
        )
        example: dict[str, Any] = {
            "E": 1.6,
            "C": _vec([1.0, 2.5, 1.6, 0.7], k),
            "gamma": _vec([0.5, 1.2, 0.8, 0.3], k),
            "A": 0.8,
            "a": _simplex([0.3, 3.0, 1.0, 2.0], k),
            "gammaA": 0.9,
            "alpha": _vec([0.3, 0.45, 0.35, 0.4], k) if ke else 0.35,
            "B": 1.2,
            "b": _simplex([2.5, 0.4, 1.2, 0.8], k),
            "gammaB": 1.1,
            "beta": _vec([0.35, 0.25, 0.3, 0.2], k) if ke else 0.3,
        }
        return {
            "inputs": (self.size_col, self.tokens_col, *self.w_cols),
            "param_specs": specs,
            "example_params": example,
        }

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        h, log_h, log_n, log_d = scale_inputs(self, x)
        if self.mixture_exponents:
            alpha, beta = (h * p["alpha"]).sum(-1), (h * p["beta"]).sum(-1)
        else:
            alpha, beta = p["alpha"], p["beta"]
        terms = (
            torch.log(p["E"]),
            mixture_bias_log(log_h, p),
            torch.log(p["A"]) + p["gammaA"] * _log_dot(p["a"], log_h) - alpha * log_n,
            torch.log(p["B"]) + p["gammaB"] * _log_dot(p["b"], log_h) - beta * log_d,
        )
        return torch.logsumexp(torch.stack(torch.broadcast_tensors(*terms)), dim=0)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def guess(self, table: Any) -> Sequence[Mapping[str, ParamValue]]:
        """The additive law's fixed-exponent least squares (``A``, ``B``), uniform loadings, ``γ^A = γ^B = 1``."""
        k = len(self.domains)
        out: list[dict[str, ParamValue]] = []
        for a, b, g in ((0.3, 0.3, 0.5), (0.5, 0.5, 1.0), (0.2, 0.4, 0.3)):
            lin = linear_guess(self, table, a, b, g)
            if lin is None:
                return []
            out.append(
                {
                    "E": lin["E"],
                    "C": [lin["C"]] * k,
                    "gamma": [g] * k,
                    "A": lin["A"],
                    "a": [1.0 / k] * k,
                    "gammaA": 1.0,
                    "alpha": [a] * k if self.mixture_exponents else a,
                    "B": lin["B"],
                    "b": [1.0 / k] * k,
                    "gammaB": 1.0,
                    "beta": [b] * k if self.mixture_exponents else b,
                }
            )
        return out

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Dirichlet(1) mixtures; N log-uniform over 50M–5B and D over 1B–100B tokens."""
        return example_scale_inputs(self, n, rng)
