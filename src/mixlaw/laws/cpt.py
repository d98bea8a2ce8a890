"""CPT learning-dynamics law (Wang, Tissue, Wang, Li, Zeng; arXiv:2505.07796, Eq. 4).

.. math::
    L(t) = L_0 + A (S_1^{pt} + S_1^{cpt})^{-\\alpha} - C_1 S_2^{pt} - C_2 S_2^{cpt}
           + B \\bigl(1 - (1 + E\\, S_1^{cpt})^{-\\beta}\\bigr)

fitted separately for each validation set (the pre-training set D_pt and the CPT set D_cpt). Areas from
:mod:`mixlaw.schedules` (``s1_pt, s1_cpt, s2_pt, s2_cpt``; λ = 0.999, PT/CPT split by time by default).
The law holds on PT steps (``s1_cpt = s2_cpt = 0``) and on CPT steps.

Signs and units (laws.md §5.6, §5.7, §13): ``B`` is signed — **B > 0 for the D_pt loss (forgetting), B < 0
for the D_cpt loss** — and left free; ``L0, A, α, C1, C2 > 0``; ``E`` is per unit of S1 (LR·steps):
E = 28 ⇔ 0.0056 per step at η = 2e-4. ``B, E, β`` are weakly identifiable: ``E`` and ``β`` are optimised in
log space (their bounds are ``(0, ∞)``), the start grid spans decades of ``E``, and
:func:`mixlaw.decide.cpt.identifiability` flags the directions the data do not determine. Never interpret
B, E, β one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import DerivedInput, Law, Option, ParamSpec, Tensor, register
from mixlaw.laws.lr_annealing import safe_log

__all__ = ["CPT", "shift_term", "CPT_SHIFT_PARAMS", "base_assumption", "schedule_input"]

CPT_SHIFT_PARAMS = ("B", "E", "beta")


def shift_term(s1_cpt: Tensor, B: Tensor, E: Tensor, beta: Tensor) -> Tensor:
    """Distribution-shift term ``B·(1 − (1 + E·S1_cpt)^(−β))`` (0 at ``S1_cpt = 0``), computed stably."""
    return -B * torch.expm1(-beta * torch.log1p(E * torch.clamp(s1_cpt, min=0.0)))


def check_fixed_E(value: Any) -> float | None:
    """``check`` of the ``fixed_E`` option: ``None`` or a positive number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value) or value <= 0:
        raise InputError(f"fixed_E must be a positive number, got {value!r}")
    return float(value)


def check_base_schedule(value: Any) -> str | None:
    """``check`` of the ``base_schedule`` option: ``None`` or a schedule spec (the base model's PT schedule)."""
    if value is None:
        return None
    from mixlaw.schedules import as_schedule

    as_schedule(value)  # a bad spec is one InputError line
    return str(value)


BASE_SCHEDULE_OPTION = Option(
    "base_schedule", None, "PT schedule spec of the base model, for CPT runs stored without a parent (Sec. 6)",
    check=check_base_schedule,
)  # fmt: skip


def schedule_input(law: Law, columns: tuple[str, ...], positive: tuple[str, ...]) -> DerivedInput:
    """The LR-area input of a CPT law, with what to do about CPT runs stored without a parent (no PT history):
    the black-box base reads their own areas as CPT areas (``S1_pt`` is its parameter); ``base_schedule`` gives
    them the base model's PT history; otherwise they are refused (:func:`mixlaw.schedules.add_schedule_features`)."""
    if law.options.get("base") == "blackbox":
        return DerivedInput("schedule", columns, options={"orphans": "blackbox"}, positive=positive)
    spec = law.options.get("base_schedule")
    return DerivedInput("schedule", columns, options=None if spec is None else {"orphans": spec}, positive=positive)


def base_assumption(law: Law) -> str:
    """One line saying which pre-training history the law assumes (printed with every CPT fit and decision)."""
    if law.options.get("base") == "blackbox":
        return ("black-box base: the PT forward area S1_pt is a fitted parameter (s1_pt_offset), the S2_pt term is "
                "absorbed into L0 (Wang et al. 2025, Sec. 6)")  # fmt: skip
    spec = law.options.get("base_schedule")
    if spec is not None:
        return f"base model's PT schedule as given: {spec} (CPT runs without a parent continue from its end)"
    return "PT history from each CPT run's parent run"


FIXED_E_OPTION = Option(
    "fixed_E", None, "pin the shift rate E to this value and fit B, beta only (laws.md 5.7)", check=check_fixed_E
)


def fix_shift_rate(decl: Mapping[str, Any], fixed_E: float | None) -> dict[str, Any]:
    """The declaration changes of the ``fixed_E`` option: ``E`` leaves the fitted parameters and the given rate is
    used instead (laws.md §5.7 item 5: "fix E and fit B·β"; the paper pins E = 100 in several fits)."""
    if fixed_E is None:
        return {}
    return {
        "param_specs": tuple(s for s in decl["param_specs"] if s.name != "E"),
        "example_params": {k: v for k, v in decl["example_params"].items() if k != "E"},
    }


def shift_rate(law: Law, p: Mapping[str, Tensor]) -> Tensor:
    """``E`` as fitted, or the ``fixed_E`` option as a 0-d tensor."""
    fixed = law.options.get("fixed_E")
    if fixed is None:
        return p["E"]
    return torch.tensor(float(fixed), dtype=torch.float64)


def base_specs() -> tuple[ParamSpec, ...]:
    return (
        ParamSpec("L0", 0.0, np.inf, description="loss floor (nats/token)"),
        ParamSpec("A", 0.0, np.inf, description="forward-area coefficient"),
        ParamSpec("alpha", 0.0, np.inf, description="forward-area exponent"),
    )


def shift_specs() -> tuple[ParamSpec, ...]:
    return (
        ParamSpec("B", description="signed shift amplitude (>0 forgetting on D_pt, <0 gain on D_cpt)"),
        ParamSpec("E", 0.0, np.inf, description="shift rate per unit of S1_cpt (fitted as log E)"),
        ParamSpec("beta", 0.0, np.inf, description="shift exponent (fitted as log beta)"),
    )


@register
class CPT(Law):
    """Eq. 4 of Wang et al. 2025 (arXiv:2505.07796): base LR-annealing law on the total areas, separate
    annealing coefficients ``C1`` (PT area) and ``C2`` (CPT area), plus the distribution-shift term in
    ``S1_cpt``.

    ``example_params`` are the published Fig. 3 D_pt fit (106M, FineWeb → Knowledge-Pile, η_max = 2e-4).

    Option ``fixed_E=<rate>`` removes ``E`` from the fitted parameters (laws.md §5.7 item 5).

    Option ``base="blackbox"`` (Sec. 6 of the paper, open or unknown base model): the PT history is
    unknown, so ``S1_pt`` becomes a free parameter ``s1_pt_offset`` inside ``(S1_cpt + s1_pt_offset)``, the
    ``S2_pt`` term is dropped (absorbed into ``L0``) and only ``s1_cpt, s2_cpt`` are inputs:
    ``L = L0 + A (S1cpt + s1_pt_offset)^(−α) − C2 S2cpt + B (1 − (1 + E S1cpt)^(−β))``. Fit it on a CPT
    prefix of a proxy D_pt set; flag non-physical exponents (the paper's own fit has α = 7.1).
    """

    name = "cpt"
    inputs = ("s1_pt", "s1_cpt", "s2_pt", "s2_cpt")
    param_specs = (
        *base_specs(),
        ParamSpec("C1", 0.0, np.inf, description="annealing coefficient of the PT area"),
        ParamSpec("C2", 0.0, np.inf, description="annealing coefficient of the CPT area"),
        *shift_specs(),
    )
    example_params = {
        "L0": 3.057,
        "A": 0.490,
        "alpha": 0.497,
        "C1": 0.299,
        "C2": 0.298,
        "B": 0.366,
        "E": 28.0,
        "beta": 0.189,
    }
    formula = "L = L0 + A*(S1pt+S1cpt)^(-alpha) - C1*S2pt - C2*S2cpt + B*(1-(1+E*S1cpt)^(-beta))"
    citation = "Wang et al. 2025, arXiv:2505.07796 (Eq. 4); Tissue et al. 2024, arXiv:2408.11029"

    options_schema = (
        Option("base", "known", "'known' PT history, or 'blackbox' (open/unknown base model)", ("known", "blackbox")),
        FIXED_E_OPTION,
        BASE_SCHEDULE_OPTION,
    )

    def configure(self, **options: Any) -> Mapping[str, Any]:
        decl: dict[str, Any] = dict(self._declared)
        if options["base"] == "blackbox":
            decl["inputs"] = ("s1_cpt", "s2_cpt")
            decl["param_specs"] = (
                *base_specs(),
                ParamSpec("s1_pt_offset", 0.0, np.inf, description="unknown PT forward area (fitted)"),
                ParamSpec("C2", 0.0, np.inf, description="annealing coefficient of the CPT area"),
                *shift_specs(),
            )
            decl["example_params"] = {
                "L0": 2.742,
                "A": 0.887,
                "alpha": 0.414,
                "s1_pt_offset": 5.157,
                "C2": 0.279,
                "B": 3.112,
                "E": 100.0,
                "beta": 0.072,
            }
            decl["formula"] = "L = L0 + A*(S1cpt+s1_pt_offset)^(-alpha) - C2*S2cpt + B*(1-(1+E*S1cpt)^(-beta))"
        decl.update(fix_shift_rate(decl, options["fixed_E"]))
        return {k: decl[k] for k in ("inputs", "param_specs", "example_params", "formula")}

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        if self.options["base"] == "blackbox":
            return (
                p["L0"]
                + p["A"] * (x["s1_cpt"] + p["s1_pt_offset"]) ** (-p["alpha"])
                - p["C2"] * x["s2_cpt"]
                + shift_term(x["s1_cpt"], p["B"], shift_rate(self, p), p["beta"])
            )
        s1 = x["s1_pt"] + x["s1_cpt"]
        return (
            p["L0"]
            + p["A"] * s1 ** (-p["alpha"])
            - p["C1"] * x["s2_pt"]
            - p["C2"] * x["s2_cpt"]
            + shift_term(x["s1_cpt"], p["B"], shift_rate(self, p), p["beta"])
        )

    def continued_asymptote(self, params: Mapping[str, float], limits: Mapping[str, float]) -> float:
        """Loss that continued CPT converges to (laws.md §5.5): the A-term vanishes and the shift saturates,

        ``L_∞ = L0 + B − C1·S2_pt − C2·S2_cpt(∞)`` (black-box base: ``L0 + B − C2·S2_cpt(∞)``, the S2_pt term
        being absorbed into ``L0`` as in :meth:`predict`).

        ``limits`` maps the law's inputs to their values in the limit of training continued forever at the
        final LR > 0: forward areas ``inf``, annealing areas at their limit (pending momentum decayed into
        them), plus ``lr`` (the final LR) and ``peak_lr``; ``replay_ratio`` and ``n_params`` as planned.
        """
        p = params
        if self.options["base"] == "blackbox":
            return p["L0"] + p["B"] - p["C2"] * limits["s2_cpt"]
        return p["L0"] + p["B"] - p["C1"] * limits["s2_pt"] - p["C2"] * limits["s2_cpt"]

    def critical_forward_area(self, params: Mapping[str, float]) -> float:
        """``S1_pt* = (A/B)^(1/α)``: the PT forward area whose CPT curve at constant PT and CPT LR converges
        back to its start (laws.md §5.5, Wang et al. 2025); defined for ``B > 0`` (a forgetting set) only."""
        A, B, alpha = float(params["A"]), float(params["B"]), float(params["alpha"])
        if B <= 0:
            raise InputError(f"no critical point: the shift amplitude B = {B:.4g} is not positive (the set improves)")
        return (A / B) ** (1.0 / alpha)

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return safe_log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        if self.options["base"] == "blackbox":
            return {
                "L0": np.array([2.0, 3.0]),
                "A": np.array([0.5]),
                "alpha": np.array([0.4, 1.0]),
                "s1_pt_offset": np.array([0.3, 3.0]),
                "C2": np.array([0.3]),
                "B": np.array([-0.5, 0.5]),
                "E": np.array([10.0, 300.0]),
                "beta": np.array([0.1, 0.5]),
            }
        return {
            "L0": np.array([2.0, 3.0]),
            "A": np.array([0.5]),
            "alpha": np.array([0.35, 0.7]),
            "C1": np.array([0.3]),
            "C2": np.array([0.3]),
            "B": np.array([-0.5, -0.05, 0.05, 0.5]),
            "E": np.array([3.0, 100.0, 3000.0]),
            "beta": np.array([0.15, 0.6]),
        }

    def derived_inputs(self) -> tuple[DerivedInput, ...]:
        """LR-area columns from each run's schedule (:func:`mixlaw.fit.problem.features.add_features`)."""
        known = self.options.get("base") != "blackbox"  # the black-box base reads the CPT areas only
        return (schedule_input(self, tuple(self.inputs), ("s1_pt", "s1_cpt") if known else ()),)

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        from mixlaw.laws._examples import schedule_feature_rows

        rows = schedule_feature_rows(n, rng, cpt=True)
        return {c: rows[c].to_numpy() for c in self.inputs}
