"""The additive law for optimal data mixtures, L(N, D, h) (laws.md §10.1).

.. math:: L(N, D, h) = E + \\frac{1}{\\sum_i C_i h_i^{\\gamma_i}} + \\frac{A}{N^{\\alpha}} + \\frac{B}{D^{\\beta}}

Shukor, Bethune, Busbridge, Grangier, Fini, El-Nouby and Ablin, "Scaling Laws for Optimal Data Mixtures",
arXiv:2507.09404 (NeurIPS 2025). ``h`` is the training mixture over the ``k`` domains (columns ``w_<domain>``),
``N`` the model size (option ``size``, in ``size_unit``), ``D`` the training tokens (option ``tokens``, in
``token_unit``); one law per target loss. ``2k + 5`` parameters. Only the bias term depends on ``h``, so the optimal
mixture does not depend on ``N`` or ``D`` (use ``mixture_joint`` when it should).

Choices (laws.md §10.2 and §10.4 leave δ, the residual space and the starts open):

- ``C_i`` and ``γ_i`` are positive (through ``exp``), so ``Σ C_i h_i^γ_i > 0`` on the simplex (§10.4 item 3).
- Huber on **log** residuals, δ = 1e-3 (the recommended default of §10.2), in the log-sum-exp form
  ``log L = LSE(log E, −LSE_i(log C_i + γ_i log h_i), log A − α log N, log B − β log D)``.
- Starts: 1,024 scrambled Sobol points over the plausible box plus :meth:`guess` (a least-squares fit with fixed
  exponents), polished by the batched Gauss–Newton solver — in place of the paper's basin-hopping around L-BFGS.
- Shares are floored at ``floor`` (1e-6) inside the logarithm so a domain with weight 0 stays finite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register
from mixlaw.laws._mixture_options import column_name, domain_list, positive_float, share_floor
from mixlaw.laws._spec import ParamValue

__all__ = ["MixtureAdditive", "ScaleMixtureLaw", "scale_options", "mixture_bias_log", "scale_inputs"]


def scale_options() -> tuple[Option, ...]:
    """The options the additive and joint laws share: domains, size and token columns and their units, floor."""
    return (
        Option("domains", ("a", "b", "c"), "training domains (one w_<domain> column each)", check=domain_list),
        Option("size", "n_params", "model-size column N", check=column_name),
        Option("size_unit", 1e8, "N is divided by this before the power", check=positive_float),
        Option("tokens", "tokens", "training-token column D", check=column_name),
        Option("token_unit", 1e9, "D is divided by this before the power", check=positive_float),
        Option("floor", 1e-6, "shares are floored at this inside log h", check=share_floor),
    )


def mixture_bias_log(log_h: Tensor, p: Mapping[str, Tensor]) -> Tensor:
    """``log(1 / Σ_i C_i h_i^γ_i)`` from ``log h`` of shape ``(n, k)``."""
    return -torch.logsumexp(torch.log(p["C"]) + p["gamma"] * log_h, dim=-1)


def scale_inputs(law: Any, x: Mapping[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(h, log h, log N, log D)`` of a law configured by :func:`scale_options`."""
    h = torch.stack([x[c] for c in law.w_cols], dim=-1)
    log_h = torch.log(h.clamp_min(law.floor))
    return h, log_h, torch.log(x[law.size_col] / law.size_unit), torch.log(x[law.tokens_col] / law.token_unit)


def configure_scale(law: Any, options: Mapping[str, Any]) -> None:
    doms: tuple[str, ...] = tuple(options["domains"])
    law.domains = doms
    law.w_cols = tuple(f"w_{d}" for d in doms)
    law.size_col = str(options["size"])
    law.size_unit = float(options["size_unit"])
    law.tokens_col = str(options["tokens"])
    law.token_unit = float(options["token_unit"])
    law.floor = float(options["floor"])
    if law.size_col == law.tokens_col:
        raise InputError(f"options 'size' and 'tokens' name the same column {law.size_col!r}")


class ScaleMixtureLaw(Law):
    """Base of the laws over ``(N, D, h)`` configured by :func:`configure_scale` (not registered itself)."""

    domains: tuple[str, ...]
    w_cols: tuple[str, ...]
    size_col: str
    size_unit: float
    tokens_col: str
    token_unit: float
    floor: float


def example_scale_inputs(law: Any, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Dirichlet(1) mixtures; N log-uniform over 50M–5B and D over 1B–100B tokens, drawn independently."""
    w = rng.dirichlet(np.ones(len(law.w_cols)), size=n)
    out = {c: w[:, j] for j, c in enumerate(law.w_cols)}
    out[law.size_col] = np.exp(rng.uniform(np.log(5e7), np.log(5e9), n))
    out[law.tokens_col] = np.exp(rng.uniform(np.log(1e9), np.log(1e11), n))
    return out


def linear_guess(law: Any, table: Any, alpha: float, beta: float, gamma: float) -> dict[str, float] | None:
    """Least squares of ``L`` on ``[1, N^-α, D^-β, 1/Σ_i h_i^γ]`` with the exponents fixed (amplitudes clipped > 0).

    Returns ``E, A, B`` and a common ``C`` (``1 / coefficient`` of the mixture column), or ``None``.
    """
    y = np.asarray(table[law.target], dtype=np.float64)
    h = np.maximum(np.column_stack([np.asarray(table[c], dtype=np.float64) for c in law.w_cols]), law.floor)
    n_ = np.asarray(table[law.size_col], dtype=np.float64) / law.size_unit
    d_ = np.asarray(table[law.tokens_col], dtype=np.float64) / law.token_unit
    if len(y) < 5 or not (np.isfinite(y).all() and (y > 0).all() and (n_ > 0).all() and (d_ > 0).all()):
        return None
    cols = [np.ones(len(y)), n_**-alpha, d_**-beta, 1.0 / (h**gamma).sum(axis=1)]
    X = np.column_stack(cols)
    keep = [0] + [j for j in (1, 2, 3) if np.ptp(X[:, j]) > 1e-9 * max(1.0, float(np.abs(X[:, j]).max()))]
    coef = np.zeros(4)
    coef[keep] = np.linalg.lstsq(X[:, keep], y, rcond=None)[0]
    floor = 1e-3 * float(np.mean(y))
    e, a, b, m = (max(float(c), floor) for c in coef)
    return {"E": min(e, 0.95 * float(y.min())), "A": a, "B": b, "C": 1.0 / m}


@register
class MixtureAdditive(ScaleMixtureLaw):
    """``L = E + 1/Σ_i C_i h_i^gamma_i + A/N^alpha + B/D^beta`` (Shukor et al. 2025, arXiv:2507.09404).

    Options
    -------
    domains
        Training domains (default ``a,b,c``); one ``w_<domain>`` column each; ``C`` and ``gamma`` have one entry
        per domain.
    size, size_unit
        Model-size column (default ``n_params``) and its unit (default ``1e8``).
    tokens, token_unit
        Training-token column (default ``tokens``) and its unit (default ``1e9``).
    floor
        Shares are floored at this inside ``log h`` (default ``1e-6``).
    """

    name = "mixture_additive"
    formula = "L = E + 1/sum_i C_i h_i^gamma_i + A/(N/size_unit)^alpha + B/(D/token_unit)^beta"
    citation = "Shukor et al. 2025, arXiv:2507.09404"
    options_schema = scale_options()

    def configure(self, **options: Any) -> Mapping[str, Any]:
        configure_scale(self, options)
        k = len(self.domains)
        specs = (
            ParamSpec("E", 0.0, np.inf, plausible=(0.3, 4.0), description="irreducible loss"),
            ParamSpec("C", 0.0, np.inf, length=k, plausible=(0.2, 10.0), description="mixture amplitudes"),
            ParamSpec("gamma", 0.0, 4.0, length=k, plausible=(0.05, 2.0), description="mixture exponents (at most 4)"),
            ParamSpec("A", 0.0, np.inf, plausible=(0.05, 10.0), description="size amplitude"),
            ParamSpec("alpha", 0.0, np.inf, plausible=(0.05, 1.2), description="size exponent"),
            ParamSpec("B", 0.0, np.inf, plausible=(0.05, 10.0), description="token amplitude"),
            ParamSpec("beta", 0.0, np.inf, plausible=(0.05, 1.2), description="token exponent"),
        )
        example = {
            "E": 1.6,
            "C": [float(v) for v in np.resize([1.0, 2.5, 1.6, 0.7], k)],
            "gamma": [float(v) for v in np.resize([0.5, 1.2, 0.8, 0.3], k)],
            "A": 0.8,
            "alpha": 0.35,
            "B": 1.2,
            "beta": 0.3,
        }
        return {
            "inputs": (self.size_col, self.tokens_col, *self.w_cols),
            "param_specs": specs,
            "example_params": example,
        }

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        _, log_h, log_n, log_d = scale_inputs(self, x)
        terms = (
            torch.log(p["E"]),
            mixture_bias_log(log_h, p),
            torch.log(p["A"]) - p["alpha"] * log_n,
            torch.log(p["B"]) - p["beta"] * log_d,
        )
        return torch.logsumexp(torch.stack(torch.broadcast_tensors(*terms)), dim=0)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def guess(self, table: Any) -> Sequence[Mapping[str, ParamValue]]:
        """Least squares with the exponents fixed at a few values (:func:`linear_guess`); every ``C_i`` equal."""
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
                    "alpha": a,
                    "B": lin["B"],
                    "beta": b,
                }
            )
        return out

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Dirichlet(1) mixtures; N log-uniform over 50M–5B and D over 1B–100B tokens."""
        return example_scale_inputs(self, n, rng)
