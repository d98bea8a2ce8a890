"""BiMix: the bivariate data-mixing law of one validation domain (laws.md §9).

.. math:: L_i(r_i, s) = \\frac{A_i}{r_i^{\\alpha_i}} \\Big(\\frac{B_i}{s^{\\beta_i}} + C_i\\Big)

Ge, Ma, Chen, Li and Ding, "BiMix: A Bivariate Data Mixing Law for Language Model Pretraining", arXiv:2405.14908.
``r_i`` is the share of domain ``i`` in the training mixture (column ``w_<domain>``), ``s`` the data volume (steps
or tokens, option ``volume``). The loss of domain ``i`` depends on its own share only (no transfer term).

Choices (the form is tagged [unverified] in laws.md §9.1; the estimator is not published):

- **Scale degeneracy.** The paper's five coefficients are four: only ``A·B`` and ``A·C`` enter the prediction. This
  law is ``L = A r^(−α) (1 + B (s/volume_unit)^(−β))`` (``A = A_paper·C_paper``, ``B = B_paper / C_paper``, same
  predictions).
- **Targets that are not a training domain** (an aggregate or held-out loss such as OpenHermes): ``domain=all``
  (the default) sums one term per training domain, ``L = (Σ_j A_j r_j^(−α_j)) (1 + B s^(−β))`` — the fixed-budget
  BiMix adaptation of allenai/olmix (laws.md §9.4, ``f(x) = Σ_j F_j x_j^(−α_j)``) times the paper's data-volume
  factor. ``domain=<name>`` is the paper's own-domain form.
- ``volume=none`` drops the data-volume factor (fixed budget, e.g. the final checkpoint at one size).
- Shares are floored at ``floor`` (1e-4) before the negative power (laws.md §9.1: the law diverges at 0).
- Fitted by the shared Huber estimator on log losses, δ = 1e-3 (laws.md §1.1), in the log-sum-exp form
  ``log L = LSE_j(log A_j − α_j log r_j) + log(1 + exp(log B − β log s))``.
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

__all__ = ["BiMix"]


@register
class BiMix(Law):
    """``L = A r^(-alpha) (1 + B s^(-beta))`` per domain, or summed over domains (Ge et al. 2024, arXiv:2405.14908).

    Options
    -------
    domains
        Training domains (default ``a,b,c``); one ``w_<domain>`` column each.
    domain
        ``all`` (default): ``L = (Σ_j A_j r_j^(−α_j)) (1 + B s^(−β))`` for any target (the olmix adaptation);
        a domain name: the paper's own-domain form ``L = A r^(−α) (1 + B s^(−β))`` on that domain's share.
    volume
        Data-volume column ``s`` (default ``tokens``; ``steps`` works too), or ``none`` for a fixed budget.
    volume_unit
        ``s`` is divided by this before the power (default ``1e9``); ``B`` is in these units.
    floor
        Shares below this are raised to it before the power (default ``1e-4``).
    """

    name = "bimix"
    formula = "L = (sum_j A_j r_j^(-alpha_j)) * (1 + B (s/volume_unit)^(-beta))"
    citation = "Ge, Ma, Chen, Li, Ding 2024, arXiv:2405.14908"

    options_schema = (
        Option("domains", ("a", "b", "c"), "training domains (one w_<domain> column each)", check=domain_list),
        Option("domain", "all", "'all' (sum over domains) or the one domain whose share drives the loss"),
        Option("volume", "tokens", "data-volume column (tokens or steps), or 'none'", check=column_name),
        Option("volume_unit", 1e9, "s is divided by this before the power", check=positive_float),
        Option("floor", 1e-4, "shares are floored at this before the negative power", check=share_floor),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        doms: tuple[str, ...] = tuple(options["domains"])
        own = str(options["domain"]).strip()
        if own != "all" and own not in doms:
            raise InputError(f"option 'domain': expected 'all' or one of {', '.join(doms)}, got {own!r}")
        self.domains = doms
        self.own = own
        self.share_cols = tuple(f"w_{d}" for d in doms) if own == "all" else (f"w_{own}",)
        vol = str(options["volume"])
        self.volume_col = None if vol.lower() == "none" else vol
        self.volume_unit = float(options["volume_unit"])
        self.floor = float(options["floor"])
        m = len(self.share_cols)
        length = None if own != "all" else m
        specs = [
            ParamSpec("A", 0.0, np.inf, length=length, plausible=(0.05, 5.0), description="scale per share term"),
            ParamSpec("alpha", 0.0, np.inf, length=length, plausible=(0.01, 1.0), description="share exponent"),
        ]
        if own == "all":
            example: dict[str, Any] = {
                "A": [float(v) for v in np.resize([1.1, 0.6, 0.9, 0.4], m)],
                "alpha": [float(v) for v in np.resize([0.12, 0.3, 0.2, 0.08], m)],
            }
        else:
            example = {"A": 2.2, "alpha": 0.15}
        if self.volume_col is not None:
            specs += [
                ParamSpec("B", 0.0, np.inf, plausible=(0.05, 20.0), description="data-volume amplitude"),
                ParamSpec("beta", 0.0, np.inf, plausible=(0.05, 1.5), description="data-volume exponent"),
            ]
            example |= {"B": 0.8, "beta": 0.45}
        inputs = (*self.share_cols, *(() if self.volume_col is None else (self.volume_col,)))
        formula = "L = A * r^(-alpha)" if own != "all" else "L = sum_j A_j r_j^(-alpha_j)"
        if self.volume_col is not None:
            formula += f" * (1 + B ({self.volume_col}/{self.volume_unit:g})^(-beta))"
        return {"inputs": inputs, "param_specs": tuple(specs), "example_params": example, "formula": formula}

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        r = torch.stack([x[c] for c in self.share_cols], dim=-1).clamp_min(self.floor)  # (n, m)
        if self.own == "all":
            share = torch.logsumexp(torch.log(p["A"]) - p["alpha"] * torch.log(r), dim=-1)
        else:
            share = torch.log(p["A"]) - p["alpha"] * torch.log(r[..., 0])
        if self.volume_col is None:
            return share
        log_s = torch.log(x[self.volume_col] / self.volume_unit)
        return share + torch.nn.functional.softplus(torch.log(p["B"]) - p["beta"] * log_s)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def guess(self, table: Any) -> Sequence[Mapping[str, ParamValue]]:
        """Log-linear least squares: ``log L ≈ a − α log r`` (own form) or ``L ≈ Σ_j A_j r_j^(−α₀)`` with the
        data-volume factor held at a few ``(B, β)`` values."""
        y = np.asarray(table[self.target], dtype=np.float64)
        r = np.maximum(np.column_stack([np.asarray(table[c], dtype=np.float64) for c in self.share_cols]), self.floor)
        if not (np.all(y > 0) and np.isfinite(y).all() and len(y) > r.shape[1] + 1):
            return []
        if self.volume_col is None:
            vol_options: list[tuple[float, float]] = [(0.0, 0.0)]
            s = np.ones(len(y))
        else:
            vol_options = [(0.3, 0.3), (1.0, 0.5), (3.0, 0.8)]
            s = np.asarray(table[self.volume_col], dtype=np.float64) / self.volume_unit
        out: list[dict[str, ParamValue]] = []
        for b, beta in vol_options:
            base = y / (1.0 + b * s ** (-beta)) if b else y
            extra = {} if self.volume_col is None else {"B": b, "beta": beta}
            if self.own != "all":
                X = np.column_stack([np.ones(len(y)), -np.log(r[:, 0])])
                coef = np.linalg.lstsq(X, np.log(base), rcond=None)[0]
                out.append({"A": float(np.exp(coef[0])), "alpha": float(np.clip(coef[1], 0.01, 2.0)), **extra})
                continue
            for a0 in (0.1, 0.3):
                coef = np.linalg.lstsq(r ** (-a0), base, rcond=None)[0]
                amp = np.clip(coef, 1e-3 * float(np.mean(base)), None)
                out.append({"A": [float(v) for v in amp], "alpha": [a0] * r.shape[1], **extra})
        return out

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Dirichlet(1) mixtures over the domains; data volume log-uniform over 0.5B–50B tokens."""
        w = rng.dirichlet(np.ones(len(self.domains)), size=n)
        out = {f"w_{d}": w[:, j] for j, d in enumerate(self.domains)}
        if self.volume_col is not None:
            out[self.volume_col] = np.exp(rng.uniform(np.log(5e8), np.log(5e10), n))
        return out
