"""CPT law with replay (Wang et al., arXiv:2505.07796, Eq. 8), normalised (recommended) and literal forms.

``r_pt`` = replay share of D_pt data in the CPT mix (input ``replay_ratio``), ``r_cpt = 1 − r_pt``.

Normalised form (default, ``form="normalised"``; laws.md §5.7 item 4):

.. math::
    L = L_0 + A (S_1^{pt}+S_1^{cpt})^{-\\alpha} - C_1 S_2^{pt} - C_2 S_2^{cpt} e^{a_1 r_{cpt}}
        + B \\bigl(1 - (1 + E S_1^{cpt})^{-\\beta}\\bigr)\\, g(r_{cpt}),
    \\qquad g(r) = \\frac{e^{a_2 r} - 1}{e^{a_2} - 1}

with signed ``a1, a2`` (``a2 → 0`` gives ``g = r``; ``g(1) = 1`` so ``B`` is the no-replay shift and ``g(0)
= 0``: pure replay has no shift). ``e^{a_1 r_cpt}`` with a signed ``a1`` also covers the printed
``e^{a_1 r_pt}`` (``= e^{a_1} e^{-a_1 r_cpt}``, the constant absorbed into ``C2``).

Literal form (``form="literal"``, Eq. 8 as printed; ``side`` picks the validation set):

* ``side="pt"``:  ``… − C2 S2cpt e^(a1 r_pt) + B·shift·(1 − e^(−a2 r_cpt))``
* ``side="cpt"``: ``… − C2 S2cpt e^(a1 r_cpt) + B·shift·(e^(a2 r_cpt) − 1)``

The paper's equation and its Fig. 19 fit disagree on the D_cpt annealing factor, its β is not printed, and its
factors look swapped against its own per-ratio fits (laws.md §5.7 item 4): fit both forms and report both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.laws._base import DerivedInput, Law, Option, ParamSpec, Tensor, register
from mixlaw.laws.cpt import (
    BASE_SCHEDULE_OPTION,
    FIXED_E_OPTION,
    base_specs,
    fix_shift_rate,
    schedule_input,
    shift_rate,
    shift_specs,
    shift_term,
)
from mixlaw.laws.lr_annealing import safe_log

__all__ = ["CPTReplay", "replay_factor"]


def replay_factor(r: Tensor, a: Tensor) -> Tensor:
    """``g(r) = (e^(a r) − 1)/(e^a − 1)``, continuous at ``a = 0`` (``g = r``), NaN-free gradient."""
    small = torch.abs(a) < 1e-6
    a_safe = torch.where(small, torch.full_like(a, 1e-6), a)
    g = torch.expm1(a_safe * r) / torch.expm1(a_safe)
    return torch.where(small, r * (1 + 0.5 * a * (r - 1)), g)


@register
class CPTReplay(Law):
    """Eq. 8 of arXiv:2505.07796 (replay), options ``form="normalised"|"literal"`` and ``side="pt"|"cpt"``."""

    name = "cpt_replay"
    inputs = ("s1_pt", "s1_cpt", "s2_pt", "s2_cpt", "replay_ratio")
    param_specs = (
        *base_specs(),
        ParamSpec("C1", 0.0, np.inf, description="annealing coefficient of the PT area"),
        ParamSpec("C2", 0.0, np.inf, description="annealing coefficient of the CPT area"),
        ParamSpec("a1", transform="identity", description="replay exponent of the CPT annealing term"),
        *shift_specs(),
        ParamSpec("a2", transform="identity", description="replay exponent of the shift factor"),
    )
    example_params = {
        "L0": 3.067,
        "A": 0.480,
        "alpha": 0.510,
        "C1": 0.280,
        "C2": 0.263,
        "a1": 0.0,
        "B": 0.366,
        "E": 28.0,
        "beta": 0.189,
        "a2": 1.0,
    }
    formula = (
        "L = L0 + A*(S1pt+S1cpt)^(-alpha) - C1*S2pt - C2*S2cpt*exp(a1*r_cpt)"
        " + B*(1-(1+E*S1cpt)^(-beta))*(exp(a2*r_cpt)-1)/(exp(a2)-1),  r_cpt = 1 - replay_ratio"
    )
    citation = "Wang et al. 2025, arXiv:2505.07796 (Eq. 8; normalised replay factor per laws.md §5.7)"

    options_schema = (
        Option("form", "normalised", "'normalised' replay factor or the 'literal' Eq. 8", ("normalised", "literal")),
        Option("side", "pt", "validation set of the literal form: 'pt' or 'cpt'", ("pt", "cpt")),
        FIXED_E_OPTION,
        BASE_SCHEDULE_OPTION,
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        form, side = options["form"], options["side"]
        out: dict[str, Any] = fix_shift_rate(self._declared, options["fixed_E"])
        if form == "literal":
            side_txt = "exp(a1*r_pt)" if side == "pt" else "exp(a1*r_cpt)"
            fac = "(1-exp(-a2*r_cpt))" if side == "pt" else "(exp(a2*r_cpt)-1)"
            out["formula"] = (
                f"L = L0 + A*(S1pt+S1cpt)^(-alpha) - C1*S2pt - C2*S2cpt*{side_txt}"
                f" + B*(1-(1+E*S1cpt)^(-beta))*{fac}  (Eq. 8 as printed, {side} side)"
            )
        return out

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        r_pt = x["replay_ratio"]
        r_cpt = 1.0 - r_pt
        s1 = x["s1_pt"] + x["s1_cpt"]
        shift = shift_term(x["s1_cpt"], p["B"], shift_rate(self, p), p["beta"])
        if self.options["form"] == "normalised":
            anneal = torch.exp(p["a1"] * r_cpt)
            factor = replay_factor(r_cpt, p["a2"])
        elif self.options["side"] == "pt":
            anneal = torch.exp(p["a1"] * r_pt)
            factor = -torch.expm1(-p["a2"] * r_cpt)
        else:
            anneal = torch.exp(p["a1"] * r_cpt)
            factor = torch.expm1(p["a2"] * r_cpt)
        return (
            p["L0"]
            + p["A"] * s1 ** (-p["alpha"])
            - p["C1"] * x["s2_pt"]
            - p["C2"] * x["s2_cpt"] * anneal
            + shift * factor
        )

    def continued_asymptote(self, params: Mapping[str, float], limits: Mapping[str, float]) -> float:
        """Loss that continued CPT at replay share ``r_pt`` converges to (laws.md §5.5 with Eq. 8): the A-term
        vanishes and the shift saturates at ``B·g(r_cpt)``,

        ``L_∞ = L0 + B·g(r_cpt) − C1·S2_pt − C2·e^(a1·r)·S2_cpt(∞)`` with this law's factor ``g`` and side ``r``.

        ``limits`` maps the law's inputs to their values in the limit of training continued forever at the
        final LR > 0: forward areas ``inf``, annealing areas at their limit (pending momentum decayed into
        them), plus ``lr`` (the final LR) and ``peak_lr``; ``replay_ratio`` and ``n_params`` as planned.
        """
        p = params
        r_pt = float(limits["replay_ratio"])
        r_cpt = 1.0 - r_pt
        if self.options["form"] == "normalised":
            fac = float(
                replay_factor(torch.tensor([r_cpt], dtype=torch.float64), torch.tensor(p["a2"], dtype=torch.float64))[0]
            )
            ann = math.exp(p["a1"] * r_cpt)
        elif self.options["side"] == "pt":
            fac, ann = -math.expm1(-p["a2"] * r_cpt), math.exp(p["a1"] * r_pt)
        else:
            fac, ann = math.expm1(p["a2"] * r_cpt), math.exp(p["a1"] * r_cpt)
        return p["L0"] + p["B"] * fac - p["C1"] * limits["s2_pt"] - p["C2"] * ann * limits["s2_cpt"]

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return safe_log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "L0": np.array([2.0, 3.0]),
            "A": np.array([0.5]),
            "alpha": np.array([0.35, 0.7]),
            "C1": np.array([0.3]),
            "C2": np.array([0.3]),
            "a1": np.array([0.0]),
            "B": np.array([-0.5, 0.3]),
            "E": np.array([10.0, 1000.0]),
            "beta": np.array([0.2]),
            "a2": np.array([-2.0, 1.0, 3.0]),
        }

    def derived_inputs(self) -> tuple[DerivedInput, ...]:
        """LR-area columns from each run's schedule (:func:`mixlaw.fit.problem.features.add_features`)."""
        areas = ("s1_pt", "s1_cpt", "s2_pt", "s2_cpt")  # replay_ratio is read from the table as logged
        return (schedule_input(self, areas, ("s1_pt", "s1_cpt")),)

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        from mixlaw.laws._examples import schedule_feature_rows

        rows = schedule_feature_rows(n, rng, cpt=True, replay=True)
        return {c: rows[c].to_numpy() for c in self.inputs}
