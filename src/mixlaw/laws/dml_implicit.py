"""Data Mixing Laws, implicit aggregation over ``K`` implicit validation domains (laws.md §7.1).

.. math:: L(r) = b + k \\sum_{i=1}^{K} s_i \\exp\\Big(\\sum_{j<n} t_{ij} r_j\\Big)

Ye, Liu, Sun, Zhou, Zhan and Qiu, "Data Mixing Laws: Optimizing Data Mixtures by Predicting Language Modeling
Performance", arXiv:2403.16952 (ICLR 2025), §3.3 "implicit domain aggregation": when the composition of the
validation set is unknown, its loss is a mixture ``Σ_i s_i L_i(r)`` of ``K`` explicit laws
``L_i = c_i + k_i exp(Σ_j t_ij r_j)`` with unknown proportions ``s`` on the simplex; the constants collapse into one
bias. The released code writes it as a one-hidden-layer network, ``softmax(w) · exp(W r + c) + bias``
(``pipeline/mixlaw.py``).

Identifiability. The network form has two redundancies that this law removes:

1. ``Σ_j r_j = 1``, so adding ``a`` to every entry of row ``W_i`` and subtracting it from ``c_i`` changes nothing.
   Here the last domain is the reference (``t_in = 0``, as in :mod:`mixlaw.laws.dml`) and the intercept ``c_i`` is
   folded into the component's scale.
2. ``softmax(w)_i exp(c_i)``: the proportion and the intercept of a component multiply, so only their product is
   determined. Here the products are written ``k s_i`` with one overall scale ``k > 0`` and ``s`` on the simplex.

So a network ``(w, W, c, bias)`` maps to ``k = Σ_i softmax(w)_i exp(c_i + W_in)``,
``s_i = softmax(w)_i exp(c_i + W_in) / k``, ``t_ij = W_ij − W_in`` (:func:`from_network`), with the same predictions:
``1 + nK`` free parameters for ``n`` domains. The ``K`` components are interchangeable; fits are reported with
``s`` ascending (the entries of every ``t_<domain>`` permuted with it). ``K = 1`` is the explicit law ``dml``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike

from mixlaw.laws._base import Law, Option, ParamSpec, Symmetry, Tensor, register
from mixlaw.laws._mixture_options import domain_list, positive_int

__all__ = ["ImplicitDataMixingLaw", "from_network"]

#: Example exponents per (component, domain) before cycling: distinct signs so the components are told apart.
_EXAMPLE_T = np.array([[-2.0, 0.8, -0.6, 1.2], [1.0, -1.5, 0.7, -0.4], [0.4, 0.3, -2.2, 0.9]])


def from_network(w: ArrayLike, W: ArrayLike, c: ArrayLike, bias: float, domains: Sequence[str]) -> dict[str, Any]:
    """The released network ``softmax(w) · exp(W r + c) + bias`` (``W`` of shape ``(K, n)``) as this law's parameters.

    The components are returned in canonical order (``s`` ascending).
    """
    wa = np.asarray(w, dtype=np.float64)
    Wa = np.asarray(W, dtype=np.float64)
    ca = np.asarray(c, dtype=np.float64)
    sm = np.exp(wa - wa.max())
    sm /= sm.sum()
    scale = sm * np.exp(ca + Wa[:, -1])
    order = np.argsort(scale, kind="stable")
    k = float(scale.sum())
    out: dict[str, Any] = {"b": float(bias), "k": k}
    if len(wa) > 1:
        out["s"] = [float(v) for v in scale[order] / k]
    for j, d in enumerate(domains[:-1]):
        out[f"t_{d}"] = [float(v) for v in (Wa[:, j] - Wa[:, -1])[order]]
    return out


@register
class ImplicitDataMixingLaw(Law):
    """``L = b + k Σ_i s_i exp(Σ_{j<n} t_ij r_j)``, ``K`` implicit domains (Ye et al. 2024, arXiv:2403.16952, §3.3).

    Options
    -------
    domains
        Training domains (default ``a,b,c``); one ``w_<domain>`` column each. Each domain but the last has a vector
        parameter ``t_<domain>`` with one (signed) exponent per implicit domain; the last is the reference.
    k
        Number of implicit domains ``K`` (default 2; the released code uses 30). ``s`` (a simplex over the ``K``
        components) exists for ``K >= 2``.
    fit_space
        ``"log"`` (default): Huber on log-loss residuals, δ = 1e-3; ``"raw"``: Huber on raw losses, δ = 0.02.

    Evaluated in log space as ``log L = LSE(log b, log k + log s_i + Σ_j t_ij r_j)``. The identifiable form and its
    map from the released network are in the module docstring (:func:`from_network`).
    """

    name = "dml_implicit"
    formula = "L = b + k * sum_i s_i exp(sum_j t_ij r_j)   (t_i,last = 0, s on the simplex)"
    citation = "Ye et al. 2024, arXiv:2403.16952"

    options_schema = (
        Option("domains", ("a", "b", "c"), "training domains (one w_<domain> column each)", check=domain_list),
        Option("k", 2, "number of implicit validation domains (components)", check=positive_int),
        Option("fit_space", "log", "residuals of log losses, or raw losses as in the paper", choices=("log", "raw")),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        doms: tuple[str, ...] = tuple(options["domains"])
        kk = int(options["k"])
        self.domains = doms
        self.n_components = kk
        self.w_cols = tuple(f"w_{d}" for d in doms)
        self.t_names = tuple(f"t_{d}" for d in doms[:-1])
        specs = [
            ParamSpec("b", 0.0, np.inf, plausible=(0.3, 4.0), description="bias (asymptotic loss)"),
            ParamSpec("k", 0.0, np.inf, plausible=(0.01, 5.0), description="total scale at the reference domain"),
        ]
        example: dict[str, Any] = {"b": 2.0, "k": 0.8}
        if kk > 1:
            specs.append(ParamSpec("s", simplex=True, length=kk, description="proportions of the implicit domains"))
            raw = np.arange(1, kk + 1, dtype=np.float64)
            example["s"] = [float(v) for v in raw / raw.sum()]  # ascending: the canonical order
        for j, name in enumerate(self.t_names):
            specs.append(
                ParamSpec(name, length=kk, plausible=(-5.0, 5.0), description=f"exponents of {doms[j]} vs {doms[-1]}")
            )
            col = [_EXAMPLE_T[i % len(_EXAMPLE_T), j % _EXAMPLE_T.shape[1]] + 0.3 * (i // len(_EXAMPLE_T))
                   for i in range(kk)]  # fmt: skip
            example[name] = [float(v) for v in col]
        return {
            "fit_space": options["fit_space"],
            "default_delta": 1e-3 if options["fit_space"] == "log" else 0.02,
            "inputs": self.w_cols,
            "param_specs": tuple(specs),
            "example_params": example,
            "symmetry": Symmetry(indexed=("s", *self.t_names)) if kk > 1 else None,
        }

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        expo = torch.log(p["k"]).unsqueeze(-1)  # (..., 1): broadcast over the K components
        if self.n_components > 1:
            expo = expo + torch.log(p["s"])
        for c, name in zip(self.w_cols[:-1], self.t_names, strict=True):
            expo = expo + x[c].unsqueeze(-1) * p[name]
        comp = torch.logsumexp(expo, dim=-1)
        return torch.logsumexp(torch.stack(torch.broadcast_tensors(torch.log(p["b"]), comp)), dim=0)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Dirichlet(0.7) mixtures over the domains."""
        w = rng.dirichlet(np.full(len(self.w_cols), 0.7), size=n)
        return {c: w[:, j] for j, c in enumerate(self.w_cols)}
