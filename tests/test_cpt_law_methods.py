"""Per-law knowledge CPT decisions need lives on the laws (issue 8 item 7): continued-training asymptotes,
the constant-LR critical area, and fits validated against the registry and the law's spec."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mixlaw.decide.cpt import CptFits, CptPlan, LawFit, critical_point, critical_s1_constant, turning_length
from mixlaw.decide.cpt.critical import continued_limits
from mixlaw.errors import InputError
from mixlaw.laws import get_law
from mixlaw.laws.cpt import CPT
from mixlaw.schedules import Schedule
from mixlaw.schedules.multi_power import multi_power_exact

DPT = {"L0": 3.057, "A": 0.490, "alpha": 0.497, "C1": 0.299, "C2": 0.298, "B": 0.366, "E": 28.0, "beta": 0.189}
FAR = 1e40  # a forward area far beyond any run: the A-term and the (slow, beta = 0.19) shift saturation are gone


def _far(law_name: str, params: dict[str, float], x: dict[str, float], **options: object) -> float:
    law = get_law(law_name, **options)
    xt = {k: torch.tensor([v], dtype=torch.float64) for k, v in x.items() if k in law.inputs}
    pt = {k: torch.tensor(v, dtype=torch.float64) for k, v in params.items()}
    return float(law.predict(xt, pt)[0])


@pytest.mark.parametrize(
    ("law_name", "params", "options"),
    [
        ("cpt", DPT, {}),
        ("cpt", {k: v for k, v in DPT.items() if k != "C1"} | {"s1_pt_offset": 2.0}, {"base": "blackbox"}),
        ("cpt_replay", {**DPT, "a1": 0.3, "a2": 1.5}, {}),
        ("cpt_replay", {**DPT, "a1": 0.3, "a2": 1.5}, {"form": "literal", "side": "cpt"}),
        ("cpt_replay", {**DPT, "a1": 0.3, "a2": 1.5}, {"form": "literal", "side": "pt"}),
        ("cpt_size", dict(get_law("cpt_size").example_params), {}),
        ("lr_annealing", {"L0": 3.057, "A": 0.490, "alpha": 0.497, "C": 0.299}, {}),
    ],
)
def test_asymptote_is_the_far_limit_of_the_law(law_name, params, options) -> None:
    law = get_law(law_name, **options)
    limits = {"s2_pt": 0.11, "s2_cpt": 0.05, "s2": 0.16, "replay_ratio": 0.25, "n_params": 3e8, "lr": 1e-4}
    x = {**limits, "s1": FAR, "s1_pt": 7.2, "s1_cpt": FAR}
    far = _far(law_name, params, x, **options)
    assert law.continued_asymptote(params, limits) == pytest.approx(far, abs=1e-6)


def test_multi_power_asymptote_matches_a_long_constant_tail() -> None:
    p = dict(get_law("multi_power").example_params)
    lr = np.concatenate([np.full(1000, 3e-4), np.linspace(3e-4, 1e-4, 1000), np.full(400_000, 1e-4)])
    tail = float(multi_power_exact(lr, [lr.size], p, eta0=3e-4)[0])
    a_term = p["A"] * float(lr.sum()) ** (-p["alpha"])  # still 0.08 at S1 = 40; it vanishes only as S1 → ∞
    want = get_law("multi_power").continued_asymptote(p, {"peak_lr": 3e-4, "lr": 1e-4})
    assert want == pytest.approx(tail - a_term, abs=2e-3)  # the loss drop has saturated to B·(η_peak − η_final)
    assert want < tail - a_term


def test_critical_area_is_a_method_of_the_law() -> None:
    assert CPT().critical_forward_area(DPT) == pytest.approx(1.7987, abs=1e-4)  # laws.md §5.5
    assert critical_s1_constant(DPT) == CPT().critical_forward_area(DPT)
    with pytest.raises(InputError, match="not positive"):
        CPT().critical_forward_area({**DPT, "B": -0.1})


def test_critical_point_for_any_law_with_an_asymptote() -> None:
    """``lr_annealing`` has no forgetting term: its asymptote lies below every start (pre-critical)."""
    fits = CptFits(
        fits={"loss": LawFit(get_law("lr_annealing"), {"L0": 3.0, "A": 0.5, "alpha": 0.5, "C": 0.3})}, pt_set="loss"
    )
    plan = CptPlan(
        pt=Schedule.parse("constant:peak=2e-4,steps=4000"), cpt=Schedule.parse("constant:peak=2e-4,steps=2000")
    )
    cp = critical_point(fits, plan, n_scan=20)
    assert cp.step is None and "pre-critical" in cp.reason
    tl = turning_length(fits, plan, horizon=3000)
    assert tl.asymptotic_class == "pre-critical" and tl.asymptote == pytest.approx(
        3.0 - 0.3 * continued_limits(plan)["s2"]
    )


def test_a_law_without_an_asymptote_is_named() -> None:
    law = get_law("ood_combination")
    fits = CptFits(fits={"loss": LawFit(law, {"ood_coef_pt": 0.8, "ood_coef_cpt": 0.2})}, pt_set="loss")
    plan = CptPlan(
        pt=Schedule.parse("constant:peak=2e-4,steps=400"), cpt=Schedule.parse("constant:peak=2e-4,steps=200")
    )
    with pytest.raises(InputError, match="'ood_combination'"):
        critical_point(fits, plan, n_scan=5)


def test_plan_predictions_name_inputs_a_plan_lacks() -> None:
    from mixlaw.decide.cpt import predict_plan

    law = get_law("multi_power")
    fits = CptFits(fits={"loss": LawFit(law, dict(law.example_params))}, pt_set="loss")
    plan = CptPlan(
        pt=Schedule.parse("constant:peak=2e-4,steps=400"), cpt=Schedule.parse("constant:peak=2e-4,steps=200")
    )
    with pytest.raises(InputError, match="'multi_power' needs inputs .*mpl_s1"):
        predict_plan(fits, plan)


def test_fits_are_validated_by_the_spec_and_the_registry() -> None:
    law = get_law("cpt")
    with pytest.raises(InputError, match="parameter E = -3 is outside"):
        LawFit(law, {**DPT, "E": -3.0})
    with pytest.raises(InputError, match="lacks parameters \\['beta'\\]"):
        LawFit(law, {k: v for k, v in DPT.items() if k != "beta"})
    with pytest.raises(InputError, match="outside"):
        LawFit(law, {**DPT, "A": math.nan})
    with pytest.raises(InputError, match="bootstrap parameters"):
        LawFit(law, DPT, np.zeros((3, 2)))

    class Unregistered(CPT):
        pass

    with pytest.raises(InputError, match="not the registered law"):
        LawFit(Unregistered(), DPT)
