"""Loss-to-benchmark law: a benchmark's accuracy as a logistic function of validation losses (laws.md §12.3).

.. math:: \\mathrm{Acc}_b = C_b + \\frac{A_b}{1 + \\exp(k_b^\\top L + B_b)}

Li, Gu and Zhang, "Capacity-Aware Mixture Law Enables Efficient LLM Data Optimization", arXiv:2603.08022. ``L`` is a
vector of validation losses (option ``losses``: the columns), ``C_b`` the floor (chance accuracy), ``C_b + A_b`` the
ceiling, ``k_b`` per-loss weights (positive: accuracy falls as loss rises), ``B_b`` an offset. One law per benchmark;
fitted by robust least squares on the accuracy in its own units (raw space).

An accuracy lives in ``[0, scale]``: the law declares ``chance ≤ C`` (option ``chance``, default 0) and
``C + A ≤ scale`` — the range used is ``min(A, scale − C)``, and a fit is reported with ``A`` at most
``scale − C`` (the same predictions; :meth:`BenchmarkLogistic.canonical`) — and its output range ``[0, scale]``, to
which prediction intervals are clipped (:func:`mixlaw.fit.uncertainty.profile.clip_to_range`). Before, a fitted PIQA
ceiling
reached 1.51 on a scale of 1 and intervals reached 4.5 accuracy units.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import Law, Option, ParamSpec, Tensor, register
from mixlaw.laws._mixture_options import column_list, column_name, positive_float

__all__ = ["BenchmarkLogistic"]


def _share_of_scale(value: Any) -> float:
    v = float(value)
    if not np.isfinite(v) or v < 0:
        raise InputError(f"expected a chance level >= 0, got {value!r}")
    return v


@register
class BenchmarkLogistic(Law):
    """``Acc = C + A / (1 + exp(k·L + B))`` over a vector of loss columns (Li et al. 2026, arXiv:2603.08022).

    Options
    -------
    losses
        Validation-loss columns (default ``loss_a,loss_b``); ``k`` has one entry per column.
    benchmark
        Accuracy column (the default target, default ``acc``).
    scale
        Upper end of the accuracy scale (default 1.0; 100 for percentages): ``C`` and ``A`` lie in ``[0, scale]``,
        ``C + A ≤ scale``, and the output in ``[0, scale]``.
    chance
        Chance level: the lowest floor ``C`` (default 0; 0.25 for four-way multiple choice on a scale of 1).
    """

    name = "benchmark_logistic"
    formula = "Acc = C + A / (1 + exp(k . L + B))"
    citation = "Li, Gu, Zhang 2026, arXiv:2603.08022"
    fit_space = "raw"

    options_schema = (
        Option("losses", ("loss_a", "loss_b"), "validation-loss columns (the vector L)", check=column_list),
        Option("benchmark", "acc", "accuracy column (the target)", check=column_name),
        Option("scale", 1.0, "top of the accuracy scale (1 or 100)", check=positive_float),
        Option("chance", 0.0, "chance level: the lowest floor C (0 <= chance < scale)", check=_share_of_scale),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        cols: tuple[str, ...] = tuple(options["losses"])
        s = float(options["scale"])
        chance = float(options["chance"])
        if not 0.0 <= chance < s:
            raise InputError(f"option 'chance': expected 0 <= chance < scale ({s:g}), got {chance:g}", column="chance")
        self.loss_cols = cols
        self.scale = s
        n = len(cols)
        example_k = [float(v) for v in np.resize(np.array([2.0, 1.2, 0.8]), n)]
        return {
            "inputs": cols,
            "target": str(options["benchmark"]),
            "default_delta": 1e-2 * s,
            "param_specs": (
                ParamSpec("C", chance, s, description="floor (chance accuracy)"),
                ParamSpec("A", 0.0, s, description="range (ceiling = C + A <= scale)"),
                ParamSpec("k", length=n, plausible=(-1.0, 6.0), description="per-loss weights (> 0: acc falls)"),
                ParamSpec("B", plausible=(-40.0, 5.0), description="offset"),
            ),
            "example_params": {
                "C": max(0.25 * s, chance),
                "A": 0.6 * s,
                "k": example_k,
                "B": -float(sum(example_k)) * 3.0,
            },
            "output_range": (0.0, s),
        }

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        losses = torch.stack([x[c] for c in self.loss_cols], dim=-1)  # (n, V)
        z = (losses * p["k"]).sum(-1) + p["B"]
        return p["C"] + torch.minimum(p["A"], self.scale - p["C"]) * torch.sigmoid(-z)  # C + A <= scale

    def canonical(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``A`` reported as the range it acts with, ``min(A, scale − C)`` (the same predictions: ``C + A ≤ scale``).

        Not a symmetry (which is declared, not overridden): the range beyond the scale's headroom has no effect."""
        out = super().canonical(params)
        if "A" in out and "C" in out:
            a, c = np.asarray(out["A"], dtype=np.float64), np.asarray(out["C"], dtype=np.float64)
            out["A"] = float(np.minimum(a, self.scale - c)) if a.ndim == 0 else np.minimum(a, self.scale - c)
        return out

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Losses spread over 1.5–4.5 nats with a shared component, so the sigmoid is traversed."""
        common = rng.uniform(1.5, 4.5, n)
        return {c: common + rng.normal(0.0, 0.35, n) for c in self.loss_cols}
