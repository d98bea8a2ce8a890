"""The repetition-aware mixture law: a scarce target corpus mixed with generic data (laws.md §11.2).

.. math::
    L = E + \\frac{C}{N^{\\beta}} + \\frac{B\\, N^{\\delta}}{D_{\\mathrm{eff}}^{\\alpha}} + \\gamma h,\\qquad
    r = \\frac{h D}{U},\\qquad
    D_{\\mathrm{eff}} = U \\big(\\min(r, 1) + r_1 (1 - e^{-\\max(r - 1, 0)/r_1})\\big)

Sedova, Seto, Schluter and Ablin, "Scaling Laws for Mixture Pretraining Under Data Constraints", arXiv:2605.12715.
``h`` is the target share of the mixture (column ``w_<domain>``, option ``domain``), ``D`` the total training tokens,
``U`` the unique tokens of the target pool (option ``unique``), ``r`` the passes over it and ``D_eff`` the effective
target tokens: every token counts on the first pass (``D_eff = hD`` for ``r <= 1``); repeats are discounted with
decay constant ``r1`` and saturate at ``U (1 + r1)`` — the data-constrained saturation of laws.md §3 applied to the
target stream. ``γ`` is signed: ``γ > 0`` penalises target share (generic data as a regulariser).

Choices (laws.md §11 tags the form [unverified] and the fitting recipe "not confirmed"):

- Letters and form follow the public adaptation in marin-community/marin (laws.md §11.2); generic tokens do not
  enter ``D_eff``.
- ``N`` and ``D_eff`` are divided by ``size_unit`` (1e8) and ``token_unit`` (1e9) before the powers.
- ``δ`` is signed; ``E, C, B, α, β, r1`` are positive.
- Estimator: the shared Huber on log losses, δ = 1e-3 (laws.md §1.1), with ``γ·h`` added outside the positive sum
  (the second recipe of §11.3); starts are 1,024 Sobol points plus :meth:`guess`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register
from mixlaw.laws._mixture_options import column_name, domain_name, positive_float
from mixlaw.laws._spec import ParamValue

__all__ = ["RepetitionAware", "effective_tokens"]


def effective_tokens(h: Any, d: Any, u: Any, r1: Any) -> Any:
    """``D_eff = U (min(r, 1) + r1 (1 − exp(−max(r − 1, 0)/r1)))`` with ``r = hD/U`` (numpy or torch)."""
    r = h * d / u
    if isinstance(r, torch.Tensor):
        return u * (torch.clamp(r, max=1.0) - r1 * torch.expm1(-torch.clamp(r - 1.0, min=0.0) / r1))
    return u * (np.minimum(r, 1.0) - r1 * np.expm1(-np.maximum(r - 1.0, 0.0) / r1))


@register
class RepetitionAware(Law):
    """``L = E + C/N^beta + B N^delta / D_eff^alpha + gamma h`` (Sedova et al. 2026, arXiv:2605.12715).

    Options
    -------
    domain
        The scarce target domain (default ``target``); its share is the column ``w_<domain>``.
    unique
        Column with the target pool's unique tokens ``U`` (default ``unique_tokens``).
    size, size_unit
        Model-size column (default ``n_params``) and its unit (default ``1e8``).
    tokens, token_unit
        Total training-token column (default ``tokens``) and the unit of ``D_eff`` (default ``1e9``).
    """

    name = "repetition_aware"
    formula = "L = E + C/N^beta + B N^delta / D_eff^alpha + gamma h,  D_eff = U (min(r,1) + r1 (1 - exp(-(r-1)+/r1)))"
    citation = "Sedova, Seto, Schluter, Ablin 2026, arXiv:2605.12715"

    options_schema = (
        Option(
            "domain", "target", "the scarce target domain (its w_<domain> column is the share h)", check=domain_name
        ),
        Option("unique", "unique_tokens", "column of the target pool's unique tokens U", check=column_name),
        Option("size", "n_params", "model-size column N", check=column_name),
        Option("size_unit", 1e8, "N is divided by this before the power", check=positive_float),
        Option("tokens", "tokens", "total training-token column D", check=column_name),
        Option("token_unit", 1e9, "D_eff is divided by this before the power", check=positive_float),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        self.share_col = f"w_{options['domain']}"
        self.unique_col = str(options["unique"])
        self.size_col = str(options["size"])
        self.size_unit = float(options["size_unit"])
        self.tokens_col = str(options["tokens"])
        self.token_unit = float(options["token_unit"])
        specs = (
            ParamSpec("E", 0.0, np.inf, plausible=(0.3, 4.0), description="irreducible loss"),
            ParamSpec("C", 0.0, np.inf, plausible=(0.05, 10.0), description="size amplitude"),
            ParamSpec("beta", 0.0, np.inf, plausible=(0.05, 1.2), description="size exponent"),
            ParamSpec("B", 0.0, np.inf, plausible=(0.05, 10.0), description="target-data amplitude"),
            ParamSpec("delta", plausible=(-0.5, 0.5), description="growth of the data term with N (signed)"),
            ParamSpec("alpha", 0.0, np.inf, plausible=(0.05, 1.2), description="effective-token exponent"),
            ParamSpec("gamma", plausible=(-1.0, 1.0), description="linear share coefficient (signed)"),
            ParamSpec("r1", 0.0, np.inf, plausible=(0.5, 50.0), description="repetition-decay constant"),
        )
        example = {
            "E": 1.7,
            "C": 1.0,
            "beta": 0.3,
            "B": 1.5,
            "delta": 0.1,
            "alpha": 0.35,
            "gamma": 0.15,
            "r1": 5.0,
        }
        return {
            "inputs": (self.share_col, self.unique_col, self.size_col, self.tokens_col),
            "param_specs": specs,
            "example_params": example,
        }

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        h = x[self.share_col]
        d_eff = effective_tokens(h, x[self.tokens_col], x[self.unique_col], p["r1"]) / self.token_unit
        log_n = torch.log(x[self.size_col] / self.size_unit)
        terms = (
            torch.log(p["E"]),
            torch.log(p["C"]) - p["beta"] * log_n,
            torch.log(p["B"]) + p["delta"] * log_n - p["alpha"] * torch.log(d_eff),
        )
        return torch.exp(torch.logsumexp(torch.stack(torch.broadcast_tensors(*terms)), dim=0)) + p["gamma"] * h

    def guess(self, table: Any) -> Sequence[Mapping[str, ParamValue]]:
        """Least squares of ``L`` on ``[1, N^−β, D_eff^−α, h]`` with ``β, α, r1`` fixed at a few values, ``δ = 0``."""
        y = np.asarray(table[self.target], dtype=np.float64)
        h = np.asarray(table[self.share_col], dtype=np.float64)
        n_ = np.asarray(table[self.size_col], dtype=np.float64) / self.size_unit
        d = np.asarray(table[self.tokens_col], dtype=np.float64)
        u = np.asarray(table[self.unique_col], dtype=np.float64)
        if len(y) < 5 or not (np.isfinite(y).all() and (n_ > 0).all() and (u > 0).all() and (h > 0).all()):
            return []
        out: list[dict[str, ParamValue]] = []
        floor = 1e-3 * float(np.mean(np.abs(y)))
        for beta, alpha, r1 in ((0.3, 0.3, 3.0), (0.5, 0.5, 10.0), (0.2, 0.2, 1.0)):
            d_eff = effective_tokens(h, d, u, r1) / self.token_unit
            X = np.column_stack([np.ones(len(y)), n_**-beta, d_eff**-alpha, h])
            e, c, b, g = np.linalg.lstsq(X, y, rcond=None)[0]
            out.append(
                {
                    "E": max(float(e), floor),
                    "C": max(float(c), floor),
                    "beta": beta,
                    "B": max(float(b), floor),
                    "delta": 0.0,
                    "alpha": alpha,
                    "gamma": float(g),
                    "r1": r1,
                }
            )
        return out

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """N log-uniform over 50M–5B, D over 5B–200B tokens, target share 5–50 %, passes r log-uniform over 0.3–40
        (so ``U = hD/r`` spans first-pass and heavily repeated pools)."""
        h = rng.uniform(0.05, 0.5, n)
        d = np.exp(rng.uniform(np.log(5e9), np.log(2e11), n))
        r = np.exp(rng.uniform(np.log(0.3), np.log(40.0), n))
        return {
            self.share_col: h,
            self.unique_col: h * d / r,
            self.size_col: np.exp(rng.uniform(np.log(5e7), np.log(5e9), n)),
            self.tokens_col: d,
        }
