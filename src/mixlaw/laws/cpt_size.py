"""CPT law with model size (Wang et al., arXiv:2505.07796, Eq. 7).

.. math::
    L = L_0 + A (S_1^{pt} + S_1^{cpt})^{-\\alpha} - C_1 S_2^{pt} N^{\\gamma_1} - C_2 S_2^{cpt} N^{\\gamma_2}
        + B \\bigl(1 - (1 + E S_1^{cpt})^{-\\beta}\\bigr) + F N^{-\\gamma_3}

``N`` = non-embedding parameters **in millions** (the published constants only make sense in that unit:
at N = 106, ``0.090·106^0.235 = 0.269`` and ``1.829 + 3.072·106^(−0.195) = 3.066``, laws.md §5.6). The
input column is ``n_params`` (raw count); the law divides by 1e6. The shift term is shared across sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mixlaw.laws._base import DerivedInput, Law, ParamSpec, Tensor, register
from mixlaw.laws.cpt import FIXED_E_OPTION, base_specs, fix_shift_rate, shift_rate, shift_specs, shift_term
from mixlaw.laws.lr_annealing import safe_log

__all__ = ["CPTSize", "N_UNIT", "effective_single_size"]

N_UNIT = 1e6  # the law reads N in millions of non-embedding parameters


@register
class CPTSize(Law):
    """Eq. 7 of arXiv:2505.07796; ``example_params`` are the published Fig. 15 D_pt joint fit
    (106M/594M/1720M)."""

    name = "cpt_size"
    inputs = ("s1_pt", "s1_cpt", "s2_pt", "s2_cpt", "n_params")
    param_specs = (
        *base_specs(),
        ParamSpec("C1", 0.0, np.inf, description="PT annealing coefficient at N = 1M"),
        ParamSpec("gamma1", transform="identity", description="size exponent of the PT annealing term"),
        ParamSpec("C2", 0.0, np.inf, description="CPT annealing coefficient at N = 1M"),
        ParamSpec("gamma2", transform="identity", description="size exponent of the CPT annealing term"),
        *shift_specs(),
        ParamSpec("F", 0.0, np.inf, description="model-size coefficient"),
        ParamSpec("gamma3", 0.0, np.inf, description="model-size exponent (N in millions)"),
    )
    example_params = {
        "L0": 1.829,
        "A": 0.504,
        "alpha": 0.537,
        "C1": 0.090,
        "gamma1": 0.235,
        "C2": 0.103,
        "gamma2": 0.199,
        "B": 0.278,
        "E": 12.0,
        "beta": 0.359,
        "F": 3.072,
        "gamma3": 0.195,
    }
    formula = (
        "L = L0 + A*(S1pt+S1cpt)^(-alpha) - C1*S2pt*N^gamma1 - C2*S2cpt*N^gamma2"
        " + B*(1-(1+E*S1cpt)^(-beta)) + F*N^(-gamma3),  N = n_params/1e6"
    )
    citation = "Wang et al. 2025, arXiv:2505.07796 (Eq. 7)"

    options_schema = (FIXED_E_OPTION,)

    def configure(self, **options: Any) -> Mapping[str, Any]:
        return fix_shift_rate(self._declared, options["fixed_E"])

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        n = x["n_params"] / N_UNIT
        s1 = x["s1_pt"] + x["s1_cpt"]
        return (
            p["L0"]
            + p["A"] * s1 ** (-p["alpha"])
            - p["C1"] * x["s2_pt"] * n ** p["gamma1"]
            - p["C2"] * x["s2_cpt"] * n ** p["gamma2"]
            + shift_term(x["s1_cpt"], p["B"], shift_rate(self, p), p["beta"])
            + p["F"] * n ** (-p["gamma3"])
        )

    def continued_asymptote(self, params: Mapping[str, float], limits: Mapping[str, float]) -> float:
        """Loss that continued CPT converges to at size ``N`` (laws.md §5.5 with Eq. 7):

        ``L_∞ = L0 + B + F·N^(−γ3) − C1·S2_pt·N^γ1 − C2·S2_cpt(∞)·N^γ2`` (``N`` in millions).

        ``limits`` maps the law's inputs to their values in the limit of training continued forever at the
        final LR > 0: forward areas ``inf``, annealing areas at their limit (pending momentum decayed into
        them), plus ``lr`` (the final LR) and ``peak_lr``; ``replay_ratio`` and ``n_params`` as planned.
        """
        p = params
        n = float(limits["n_params"]) / N_UNIT
        return (
            p["L0"]
            + p["B"]
            + p["F"] * n ** (-p["gamma3"])
            - p["C1"] * limits["s2_pt"] * n ** p["gamma1"]
            - p["C2"] * limits["s2_cpt"] * n ** p["gamma2"]
        )

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return safe_log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "L0": np.array([1.8]),
            "A": np.array([0.5]),
            "alpha": np.array([0.4, 0.7]),
            "C1": np.array([0.1]),
            "gamma1": np.array([0.0, 0.2]),
            "C2": np.array([0.1]),
            "gamma2": np.array([0.0, 0.2]),
            "B": np.array([-0.5, 0.3]),
            "E": np.array([10.0, 300.0]),
            "beta": np.array([0.3]),
            "F": np.array([3.0]),
            "gamma3": np.array([0.2]),
        }

    def derived_inputs(self) -> tuple[DerivedInput, ...]:
        """LR-area columns from each run's schedule (:func:`mixlaw.fit.problem.features.add_features`)."""
        areas = ("s1_pt", "s1_cpt", "s2_pt", "s2_cpt")  # n_params is read from the table as logged
        return (DerivedInput("schedule", areas, positive=("s1_pt", "s1_cpt")),)

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        from mixlaw.laws._examples import schedule_feature_rows

        rows = schedule_feature_rows(n, rng, cpt=True)
        out = {c: rows[c].to_numpy() for c in self.inputs if c != "n_params"}
        out["n_params"] = rng.choice([36e6, 106e6, 300e6, 600e6, 1.7e9], size=n)
        return out


def effective_single_size(params: Mapping[str, float], n_params: float) -> dict[str, float]:
    """Eq. 4 parameters implied by an Eq. 7 fit at one size: ``C1·N^γ1``, ``C2·N^γ2``, ``L0 + F·N^(−γ3)``."""
    n = n_params / N_UNIT
    out = {k: float(params[k]) for k in ("A", "alpha", "B", "E", "beta")}
    out["C1"] = float(params["C1"] * n ** params["gamma1"])
    out["C2"] = float(params["C2"] * n ** params["gamma2"])
    out["L0"] = float(params["L0"] + params["F"] * n ** (-params["gamma3"]))
    return out
