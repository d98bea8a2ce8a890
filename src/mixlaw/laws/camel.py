"""CAMEL: the capacity-aware mixture law (laws.md §12.2).

.. math:: L(r, M) = C + \\sum_{i=1}^{k} K_i \\langle t_i, r \\rangle^{-\\alpha_i} (M / M_0)^{-\\beta_i}

Li, Gu and Zhang, "Capacity-Aware Mixture Law Enables Efficient LLM Data Optimization", arXiv:2603.08022. ``r`` is
the training mixture over the ``n`` domains (columns ``w_<domain>``), ``M`` the model capacity (``n_params`` or an
active-parameter column, option ``size``), ``k`` the number of intrinsic domains; each loading ``t_i`` is a point of
the simplex (this fixes the scale degeneracy ``K_i (c⟨t_i, r⟩)^(−α_i)`` of the paper's form), so the law has
``k(n + 2) + 1`` free parameters. Components are interchangeable; fits are reported with ``beta_0 <= beta_1 <= …``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.laws import _camel_numpy as camel_numpy
from mixlaw.laws._base import Law, Option, ParamSpec, Symmetry, Tensor, register
from mixlaw.laws._mixture_options import column_name, domain_list, positive_float, positive_int

__all__ = ["Camel"]

#: Example loadings (canonical order: rising beta) for up to 4 components; cycled and renormalised beyond.
#: Each entry: (K, alpha, beta, t).
_EXAMPLE: tuple[tuple[float, float, float, tuple[float, float, float]], ...] = (
    (0.9, 0.35, 0.2, (0.6, 0.3, 0.1)),
    (1.5, 0.6, 0.45, (0.1, 0.25, 0.65)),
    (1.2, 0.25, 0.6, (0.3, 0.5, 0.2)),
    (0.7, 0.5, 0.75, (0.45, 0.1, 0.45)),
)


def _loading(j: int, n: int) -> list[float]:
    base = np.array(_EXAMPLE[j % len(_EXAMPLE)][3], dtype=np.float64)
    v = np.resize(base, n) + 0.05 * np.arange(n) / n
    return [float(x) for x in v / v.sum()]


@register
class Camel(Law):
    """``L = C + Σ_i K_i <t_i, r>^(-alpha_i) (M/size_unit)^(-beta_i)`` (Li et al. 2026, arXiv:2603.08022).

    Options
    -------
    domains
        Training domains (default ``a,b,c``); the law reads one ``w_<domain>`` column per domain.
    k
        Number of intrinsic domains (default 2). Parameters ``K_i, alpha_i, beta_i`` (scalars) and ``t_i`` (a
        simplex over the domains) for ``i = 0 … k−1``, plus ``C``.
    size
        Capacity column (default ``n_params``; an active-parameter column for MoE models, laws.md §12.8).
    size_unit
        ``M`` is divided by this before the power (default ``1e8``); ``K_i`` is in these units.

    Fitted in log space as ``log L = LSE(log C, log K_i − alpha_i log<t_i, r> − beta_i log M)``.
    """

    name = "camel"
    formula = "L = C + sum_i K_i * <t_i, r>^(-alpha_i) * (M/size_unit)^(-beta_i)"
    citation = "Li, Gu, Zhang 2026, arXiv:2603.08022"

    options_schema = (
        Option("domains", ("a", "b", "c"), "training domains (one w_<domain> column each)", check=domain_list),
        Option("k", 2, "number of intrinsic domains (components)", check=positive_int),
        Option("size", "n_params", "capacity column (total or active parameters)", check=column_name),
        Option("size_unit", 1e8, "M is divided by this before the power", check=positive_float),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        doms: tuple[str, ...] = tuple(options["domains"])
        k = int(options["k"])
        n = len(doms)
        self.domains = doms
        self.k = k
        self.size_col = str(options["size"])
        self.size_unit = float(options["size_unit"])
        self.w_cols = tuple(f"w_{d}" for d in doms)
        specs: list[ParamSpec] = [ParamSpec("C", 0.0, np.inf, plausible=(0.5, 4.0), description="irreducible loss")]
        example: dict[str, Any] = {"C": 1.8}
        components = []
        for i in range(k):
            specs += [
                ParamSpec(f"K_{i}", 0.0, np.inf, plausible=(0.05, 5.0), description=f"scale of component {i}"),
                ParamSpec(f"alpha_{i}", 0.0, np.inf, plausible=(0.05, 1.5), description=f"share exponent {i}"),
                ParamSpec(f"beta_{i}", 0.0, np.inf, plausible=(0.05, 1.2), description=f"capacity exponent {i}"),
                ParamSpec(f"t_{i}", simplex=True, length=n, description=f"loading of component {i} on the domains"),
            ]
            k_ex, a_ex, b_ex, _ = _EXAMPLE[i % len(_EXAMPLE)]
            example |= {
                f"K_{i}": k_ex,
                f"alpha_{i}": a_ex,
                f"beta_{i}": b_ex + 0.6 * (i // len(_EXAMPLE)),
                f"t_{i}": _loading(i, n),
            }
            components.append((f"beta_{i}", f"K_{i}", f"alpha_{i}", f"t_{i}"))
        return {
            "inputs": (self.size_col, *self.w_cols),
            "param_specs": tuple(specs),
            "example_params": example,
            "symmetry": Symmetry(components=tuple(components)) if k > 1 else None,
        }

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        """``log L``; without autograd (no tensor needs a gradient) by :mod:`mixlaw.laws._camel_numpy`."""
        plain = self._plain(x, p)
        if plain is not None:
            return torch.from_numpy(camel_numpy.log_predict(*plain, self.k))
        w = torch.stack([x[c] for c in self.w_cols], dim=-1)  # (n, D)
        log_m = torch.log(x[self.size_col] / self.size_unit)
        terms = [torch.log(p["C"])]
        for i in range(self.k):
            share = torch.einsum("...d,...d->...", w, p[f"t_{i}"])  # <t_i, r>; no (rows, n, D) product
            terms.append(torch.log(p[f"K_{i}"]) - p[f"alpha_{i}"] * torch.log(share) - p[f"beta_{i}"] * log_m)
        return torch.logsumexp(torch.stack(torch.broadcast_tensors(*terms)), dim=0)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return torch.exp(self.log_predict(x, p))

    def log_predict_grad(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        """``log L`` and its analytic derivative with respect to every natural parameter, one entry per point
        (:func:`mixlaw.laws._camel_numpy.log_predict_grad`): the solver's Jacobian without a backward pass."""
        plain = self._plain(x, p, need_grad=True)
        if plain is None:
            raise TypeError("log_predict_grad expects float64 CPU tensors")
        value, grads = camel_numpy.log_predict_grad(*plain, self.k)
        return torch.from_numpy(value), {k: torch.from_numpy(v) for k, v in grads.items()}

    def _plain(
        self, x: Mapping[str, Tensor], p: Mapping[str, Tensor], need_grad: bool = False
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]] | None:
        """``(w (n, D), log(M/M_0) (n,), parameters)`` as float64 numpy arrays, or ``None`` where the torch path is
        needed: a tensor that autograd must differentiate through (unless ``need_grad``: the caller takes the
        analytic derivatives), or one that is not a float64 CPU tensor."""
        xs = [x[c] for c in (*self.w_cols, self.size_col)]
        ps = list(p.values())
        for v in (*xs, *ps):
            if not isinstance(v, torch.Tensor) or v.dtype != torch.float64 or not v.is_cpu:
                return None
        if not need_grad and torch.is_grad_enabled() and any(v.requires_grad for v in (*xs, *ps)):
            return None
        key = [(v, v._version) for v in xs]  # the inputs of a fit are the same tensors call after call
        hit = getattr(self, "_x_cache", None)
        if (
            hit is not None
            and len(hit[0]) == len(key)
            and all(a is b and va == vb for (a, va), (b, vb) in zip(hit[0], key, strict=True))
        ):
            w, log_m = hit[1], hit[2]
        else:  # the cache holds its tensors, so their ids cannot be reused while it does
            w = np.stack([v.detach().numpy() for v in xs[:-1]], axis=-1)
            log_m = np.log(xs[-1].detach().numpy() / self.size_unit)
            self._x_cache = (key, w, log_m)
        return w, log_m, {k: v.detach().numpy() for k, v in p.items()}

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Dirichlet(0.7) mixtures (a fifth of them near a vertex) at sizes log-uniform over 50M–5B."""
        d = len(self.w_cols)
        w = rng.dirichlet(np.full(d, 0.7), size=n)
        out = {c: w[:, j] for j, c in enumerate(self.w_cols)}
        out[self.size_col] = np.exp(rng.uniform(np.log(5e7), np.log(5e9), n))
        return out
