"""Multi-power law (Luo et al., "A Multi-Power Law for Loss Curve Prediction Across Learning Rate Schedules",
arXiv:2503.12811, ICLR 2025).

.. math::
    L(t) = L_0 + A\\,S_1(t)^{-\\alpha}
           - B \\sum_{k=1}^{t} (\\eta_{k-1} - \\eta_k)\\,
             \\bigl[1 - (C\\,\\eta_k^{-\\gamma} S_k(t) + 1)^{-\\beta}\\bigr],
    \\qquad S_k(t) = \\sum_{\\tau=k}^{t} \\eta_\\tau

``S1`` includes the warm-up LRs and the decrement sum runs over every step from ``η_0`` (the LR before the
first update, 0 for a warm-up from zero), so warm-up *increments* enter it with a negative sign — the
``"raw"`` warm-up convention of :mod:`mixlaw.schedules`. This is what the published parameters assume: with
the warm-up excluded they mispredict every MultiPowerLaw curve by ≈ +0.11 nats (``B·η_peak·[…] ≈ 364·3e-4``).

Inputs: how the LR history enters a pure vectorised law
-------------------------------------------------------
The loss-drop term needs the whole LR history of each point, and its parameters (``C, β, γ``) sit inside the
sum, so it cannot be reduced to fixed areas. Passing a padded ``(n, T)`` LR array would cost ``S·n·T`` per
evaluation (10⁸ and more for 72k-step curves) and break the ``(n,)`` input contract. Instead every row
carries a
**compressed history**: the decrements before the row's step are grouped into ``K`` bins of look-back distance
``d = t − k`` — one step each for the last ``n_exact`` steps (where the bracket changes fastest), then
geometrically wider bins up to the longest history — and each bin is represented by its summed decrement
``dlr_j = Σ (η_{k−1} − η_k)``, the LR ``lr_j`` and the area ``area_j = S_k(t)`` at its |decrement|-weighted
centre. The law is then ``… − B Σ_j dlr_j [1 − (C lr_j^(−γ) area_j + 1)^(−β)]``: exact for step changes and
for the last ``n_exact`` steps, a midpoint quadrature elsewhere (on the MultiPowerLaw curves the published
parameters give the same predictions as the exact sum to < 3e-4 nats with the defaults; see
``tests/test_cpt_laws.py``). The ``3·K`` columns are ``mpl_dlr_<j>``, ``mpl_lr_<j>``, ``mpl_area_<j>``
(``j = 00..K−1``), built by :func:`multi_power_features` (or
:func:`mixlaw.schedules.add_schedule_features` with ``multi_power_bins=K``).
Every input stays ``(n,)`` and ``predict`` is one broadcast over ``(S, n, K)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import DerivedInput, Law, Option, ParamSpec, Tensor, register
from mixlaw.laws.lr_annealing import safe_log
from mixlaw.schedules.multi_power import (  # the history builders live beside the schedules
    DEFAULT_BINS,
    mpl_columns,
)

__all__ = ["MultiPower", "PUBLISHED_MPL"]


# Published "best parameters" (README of thu-yao-01-luo/MultiPowerLaw; laws.md §4.5).
PUBLISHED_MPL: dict[str, dict[str, float]] = {
    "25M": {
        "L0": 3.04045406,
        "A": 0.52468604,
        "alpha": 0.50786857,
        "B": 363.78751622,
        "C": 2.06560812,
        "beta": 0.58279013,
        "gamma": 0.64142257,
    },
    "100M": {
        "L0": 2.6514477,
        "A": 0.60115152,
        "alpha": 0.45295811,
        "B": 437.9464276,
        "C": 2.13245612,
        "beta": 0.59785199,
        "gamma": 0.65523644,
    },
    "400M": {
        "L0": 2.37474466,
        "A": 0.65421216,
        "alpha": 0.42878731,
        "B": 523.42464371,
        "C": 2.02462735,
        "beta": 0.59350493,
        "gamma": 0.63472457,
    },
}


_TINY = float(np.finfo(np.float64).tiny)


def _bins(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise InputError(f"multi_power n_bins must be an integer >= 2, got {value!r}")
    return value


@register
class MultiPower(Law):
    """Multi-power law of Luo et al. 2025 (arXiv:2503.12811) on compressed per-row LR histories.

    Option ``n_bins`` (default 48) sets the history width; the feature columns must be built with the same
    value. ``example_params`` are the published 25M parameters.
    """

    name = "multi_power"
    inputs = ("mpl_s1", *mpl_columns(DEFAULT_BINS))
    param_specs = (
        ParamSpec("L0", 0.0, np.inf, description="loss floor (nats/token)"),
        ParamSpec("A", 0.0, np.inf, description="forward-area coefficient"),
        ParamSpec("alpha", 0.0, np.inf, description="forward-area exponent"),
        ParamSpec("B", 0.0, np.inf, description="loss-drop amplitude (per unit LR decrement)"),
        ParamSpec("C", 0.0, np.inf, description="loss-drop rate"),
        ParamSpec("beta", 0.0, np.inf, description="loss-drop exponent"),
        ParamSpec("gamma", 0.0, np.inf, description="LR exponent of the loss-drop rate"),
    )
    example_params = dict(PUBLISHED_MPL["25M"])
    formula = "L = L0 + A*S1^(-alpha) - B*sum_k (eta_{k-1}-eta_k)*(1-(C*eta_k^(-gamma)*S_k(t)+1)^(-beta))"
    citation = "Luo et al. 2025, arXiv:2503.12811 (ICLR 2025)"

    options_schema = (
        Option("n_bins", DEFAULT_BINS, "history bins per row (build the features with the same value)", check=_bins),
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        return {"inputs": ("mpl_s1", *mpl_columns(options["n_bins"]))}

    def _history(self, x: Mapping[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        cols = mpl_columns(self.options["n_bins"])
        K = self.options["n_bins"]
        dlr = torch.stack([x[c] for c in cols[:K]], dim=-1)
        lr = torch.stack([x[c] for c in cols[K : 2 * K]], dim=-1)
        area = torch.stack([x[c] for c in cols[2 * K :]], dim=-1)
        return dlr, lr, area  # each (n, K)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        dlr, lr, area = self._history(x)

        def expand(v: Tensor) -> Tensor:  # (S, 1) → (S, 1, 1); 0-d stays 0-d
            return v.unsqueeze(-1) if v.dim() > 0 else v

        C, beta, gamma = expand(p["C"]), expand(p["beta"]), expand(p["gamma"])
        # 1 − (C·η^(−γ)·S + 1)^(−β), with log(1 + C·η^(−γ)·S) = softplus(log C + log S − γ log η): the value and
        # its derivatives stay finite where C·η^(−γ)·S overflows (γ ≈ 50 at η ≈ 3e-5: a bracket of 1, whose
        # derivatives were inf·0 = NaN, so the solver discarded such rows as failed); C is floored at the smallest
        # normal float so that a C underflowed to 0 (the linear regime, where only B·β·C is fitted) keeps a zero
        # derivative, as in C·η^(−γ)·S, instead of 1/C·0 = NaN
        # (S, n, K) temporaries are the cost of a fit (S rows × n data rows × K bins): the data-only logs are
        # (n, K), the γ term is one fused multiply-add, and the bin sum contracts without a product tensor
        w = torch.addcmul(torch.log(torch.clamp(C, min=_TINY)) + torch.log(area), gamma, torch.log(lr), value=-1.0)
        neg_bracket = torch.expm1(-beta * torch.nn.functional.softplus(w, threshold=36.0))  # = −bracket
        drop = -torch.einsum("...k,...k->...", dlr, neg_bracket)  # (S, n) or (n,)
        return p["L0"] + p["A"] * x["mpl_s1"] ** (-p["alpha"]) - p["B"] * drop

    def continued_asymptote(self, params: Mapping[str, float], limits: Mapping[str, float]) -> float:
        """Loss that training continued at the final LR > 0 converges to: every ``S_k(t) → ∞`` so each bracket
        → 1 and the loss drop telescopes to ``B·(η_peak − η_final)``: ``L_∞ = L0 − B·(η_peak − η_final)``
        (Luo et al. 2025).

        ``limits`` maps the law's inputs to their values in the limit of training continued forever at the
        final LR > 0: forward areas ``inf``, annealing areas at their limit (pending momentum decayed into
        them), plus ``lr`` (the final LR) and ``peak_lr``; ``replay_ratio`` and ``n_params`` as planned.
        """
        return params["L0"] - params["B"] * (limits["peak_lr"] - limits["lr"])

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return safe_log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "L0": np.array([2.0, 3.0]),
            "A": np.array([0.5]),
            "alpha": np.array([0.3, 0.6]),
            "B": np.array([100.0, 500.0]),
            "C": np.array([0.5, 3.0]),
            "beta": np.array([0.3, 0.7]),
            "gamma": np.array([0.4, 0.7]),
        }

    def derived_inputs(self) -> tuple[DerivedInput, ...]:
        """LR-area columns from each run's schedule (:func:`mixlaw.fit.problem.features.add_features`)."""
        bins = {"multi_power_bins": int(self.options["n_bins"])}
        return (DerivedInput("schedule", tuple(self.inputs), options=bins, positive=("mpl_s1",)),)

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        from mixlaw.laws._examples import schedule_feature_rows

        rows = schedule_feature_rows(n, rng, cpt=False, multi_power_bins=int(self.options["n_bins"]), peak_lr=3e-4)
        return {c: rows[c].to_numpy() for c in self.inputs}
