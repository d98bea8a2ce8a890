"""The CMR decision: T0 solver, tolerance boundary, statuses and recovery of a known CMR law end to end."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.cmr import (
    STATUS_ALL_FEASIBLE,
    STATUS_NO_FEASIBLE,
    STATUS_NO_ROOT,
    STATUS_OK,
    CMRSettings,
    RatioLawFit,
    critical_mixture_ratio,
    critical_tokens,
    status_too_few,
    tolerance_boundary,
)
from mixlaw.decide.cmr.result import BracketReason, Reading
from mixlaw.design.simulate_cmr import simulate_cmr_runs
from mixlaw.errors import InputError
from mixlaw.laws import get_law

UNIT = 2e8  # the CMR paper's token unit (0.2B tokens)
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}  # laws.md §6.6


def t_star(ratio: float, p: dict[str, float] = P460) -> float:
    """Peak of the simulated general-loss curve, in T units: the inverse of the published CMR law."""
    return ((ratio - p["beta3"]) / p["alpha4"]) ** (1 / p["s4"])


def synthetic_runs(
    ratios: tuple[float, ...] = (0.125, 0.2, 0.25, 1 / 3, 0.5),
    *,
    noise: float = 1e-5,
    seed: int = 0,
    n_params: int = 460_000_000,
    t_units: np.ndarray | None = None,
    cmr_params: dict[str, float] = P460,
    domain: str = "code",
) -> pd.DataFrame:
    """Runs from a known CMR law (:func:`simulate_cmr_runs`): ΔL_gen peaks exactly at T0(R) (λ = ∞)."""
    return simulate_cmr_runs(
        ratios, cmr_params, token_unit=UNIT, t_units=t_units, noise=noise, n_params=n_params, domain=domain,
        random_state=seed,
    )  # fmt: skip


# ------------------------------------------------------------------------------------ pure decision math
def test_t0_lambda_inf_is_peak_and_finite_lambda_is_stationary() -> None:
    dom, gen = get_law("dloss_domain", token_unit=UNIT), get_law("dloss_general", token_unit=UNIT)
    pg = {"alpha2": 0.01, "s2": 0.5, "alpha3": -0.0005, "s3": 1.0, "beta2": 0.0}
    pd_ = {"alpha1": -0.05, "s1": 0.4, "beta1": 0.0}
    peak = (0.01 * 0.5 / (0.0005 * 1.0)) ** 2  # 100 T units
    res = critical_tokens(dom, pd_, gen, pg, t_lo=1 * UNIT, t_hi=1000 * UNIT)
    assert res.status == "root" and res.t0_tokens / UNIT == pytest.approx(peak, rel=1e-8)
    lam = 300.0
    res = critical_tokens(dom, pd_, gen, pg, lagrange_mult=lam, t_lo=1 * UNIT, t_hi=1000 * UNIT)
    t0 = res.t0_tokens / UNIT
    g = -0.05 * 0.4 * t0 ** (0.4 - 1) + lam * (0.01 * 0.5 * t0 ** (0.5 - 1) - 0.0005 * t0**0)  # Eq. 7 condition
    assert abs(g) < 1e-9 and t0 < peak  # at T0 the general loss is still rising (laws.md §6.7.8)
    # larger λ moves T0 towards the peak
    t0_big = critical_tokens(dom, pd_, gen, pg, lagrange_mult=1e5, t_lo=UNIT, t_hi=1000 * UNIT).t0_tokens / UNIT
    assert t0 < t0_big < peak


def test_t0_no_root_and_already_falling() -> None:
    dom, gen = get_law("dloss_domain", token_unit=UNIT), get_law("dloss_general", token_unit=UNIT)
    pd_ = {"alpha1": -0.05, "s1": 0.4, "beta1": 0.0}
    rising = {"alpha2": 0.01, "s2": 0.5, "alpha3": 0.0, "s3": 1.0, "beta2": 0.0}
    res = critical_tokens(dom, pd_, gen, rising, t_lo=UNIT, t_hi=100 * UNIT)
    assert res.status == "no root in search range" and res.t0_tokens is None
    falling = {"alpha2": -0.01, "s2": 0.5, "alpha3": 0.0, "s3": 1.0, "beta2": 0.0}
    res = critical_tokens(dom, pd_, gen, falling, t_lo=UNIT, t_hi=100 * UNIT)
    assert res.status == "falling at first evaluation" and res.t0_tokens == UNIT
    with pytest.raises(InputError):
        critical_tokens(dom, pd_, gen, rising, t_lo=0.0, t_hi=1.0)


def test_tolerance_boundary_analytic() -> None:
    # L(R) = 2 + 0.1 R^2 against reference 2.0: boundary at sqrt(eps / 0.1)
    fit = RatioLawFit("ratio_power", {"alpha": 0.1, "s": 2.0, "beta": 2.0}, "fit", 1.0, 0.0, 4)
    r, st = tolerance_boundary(fit, 2.0, 0.025)
    assert st == STATUS_OK and r == pytest.approx(0.5, abs=1e-9)
    r, st = tolerance_boundary(fit, 2.0, 0.2)
    assert r == 1.0 and st == "whole range within tolerance"
    r, st = tolerance_boundary(fit, 1.9, 0.0)
    assert r is None and st == "no ratio within tolerance"


# ------------------------------------------------------------------------------------ end to end
def test_recovers_published_cmr_from_synthetic_runs() -> None:
    """Runs simulated from the 460M CMR law: T0(R_j) = T*(R_j); the refit gives R_CMR(100) = 0.2976."""
    dec = critical_mixture_ratio(
        synthetic_runs(),
        general_eval="general",
        domain_eval="code",
        sensitivity_lambdas=(math.inf,), settings=CMRSettings(token_unit=UNIT))
    (s,) = dec.sizes
    assert s.status == STATUS_OK and s.cmr_source.startswith("CMR law")
    assert s.budget_tokens == pytest.approx(100 * UNIT)
    assert s.cmr == pytest.approx(0.2976, abs=5e-3)  # noise 1e-5 on ΔL moves T0 by ~0.5 %
    assert s.cmr_discrete == pytest.approx(0.25)
    for row in s.ratios:
        # beyond the budget T0 is an extrapolation of the fitted curve: looser
        rel = 1e-2 if t_star(row["ratio"]) <= 100 else 5e-2
        assert row["t0_tokens"] / UNIT == pytest.approx(t_star(row["ratio"]), rel=rel)
        assert row["feasible"] == (t_star(row["ratio"]) <= 100)
        if not row["feasible"]:
            assert "no root in budget" in row["reason"]
    # unseen ratio through the inverse CMR law, budget extrapolation through the law
    assert s.t0_for_ratio(0.3) / UNIT == pytest.approx(t_star(0.3), rel=2e-2)
    assert float(s.cmr_at(50e9)) == pytest.approx(0.5158, abs=1e-2)
    near, far = s.assess_ratio(0.28, 0.05), s.assess_ratio(0.30, 0.05)  # T0 = 91.9 and 101.1 (T units)
    assert near["feasible"] and not far["feasible"] and "no root in budget" in far["reason"]
    assert near["t0_tokens"] / UNIT == pytest.approx(t_star(0.28), rel=2e-2) and not near["extrapolated"]
    d = dec.to_dict()
    assert {"cmr", "ratios", "cmr_law"} <= set(d)
    assert {"n_params", "budget_tokens", "cmr", "ci", "tolerance_boundary", "status"} <= set(d["cmr"][0])
    assert {"n_params", "ratio", "t0_tokens", "feasible", "reason"} <= set(d["ratios"][0])


def test_status_all_feasible() -> None:
    dec = critical_mixture_ratio(
        synthetic_runs((0.125, 0.2, 0.25)), general_eval="loss_general", domain_eval="loss_code",
        sensitivity_lambdas=(), sensitivity_epsilons=(),
    )  # fmt: skip
    (s,) = dec.sizes
    assert s.status == STATUS_ALL_FEASIBLE and s.cmr == 0.25


def test_status_no_root_in_budget() -> None:
    dec = critical_mixture_ratio(
        synthetic_runs((1 / 3, 0.5, 0.75)), general_eval="general", domain_eval="code",
        sensitivity_lambdas=(), sensitivity_epsilons=(),
    )  # fmt: skip
    (s,) = dec.sizes
    assert s.status == STATUS_NO_ROOT and s.cmr is None
    assert all(not r["feasible"] for r in s.ratios)


def test_status_no_feasible_ratio_when_tolerance_binds() -> None:
    dec = critical_mixture_ratio(
        synthetic_runs((0.125, 0.2, 0.25)), general_eval="general", domain_eval="code", sensitivity_lambdas=(),
        sensitivity_epsilons=(), settings=CMRSettings(epsilon=0.0))  # fmt: skip
    (s,) = dec.sizes
    assert s.status == STATUS_NO_FEASIBLE and s.cmr is None
    assert all("> ε = 0" in r["reason"] for r in s.ratios)


def test_status_too_few_ratios_for_the_cmr_law() -> None:
    dec = critical_mixture_ratio(
        synthetic_runs((0.125, 0.2, 0.5)), general_eval="general", domain_eval="code", sensitivity_lambdas=(),
        sensitivity_epsilons=(), settings=CMRSettings(t0_search_factor=2.0))  # fmt: skip
    (s,) = dec.sizes
    # no CMR law: the headline is the table's bracket, never a trained ratio under the CMR's name
    assert s.status == status_too_few(3) and s.cmr is None and s.cmr_law is None
    assert s.cmr_discrete == 0.2 and s.bracket == (0.2, 0.5) and s.reading is Reading.BRACKET
    assert s.bracket_reason is BracketReason.NO_CMR_LAW
    assert "CMR between 0.2 and 0.5" in s.sentence("code")


def test_bootstrap_interval_and_sensitivity() -> None:
    runs = synthetic_runs((0.125, 0.2, 0.25, 1 / 3), noise=2e-4, seed=3)
    dec = critical_mixture_ratio(
        runs, general_eval="general", domain_eval="code", bootstrap=5, random_state=1,
        sensitivity_lambdas=(1000.0, math.inf), sensitivity_epsilons=(0.0, 0.05),
    )  # fmt: skip
    (s,) = dec.sizes
    assert s.ci is not None and s.ci[0] <= s.ci[1]
    assert s.n_bootstrap == 5 and s.n_bootstrap_failed < 5
    assert s.bootstrap_cmr is not None and len(s.bootstrap_cmr) == 5 - s.n_bootstrap_failed
    sens = dec.sensitivity
    assert len(sens) == 4 and set(sens["lagrange_mult"]) == {1000.0, "inf"}
    head = sens[(sens["lagrange_mult"] == "inf") & (sens["epsilon"] == 0.05)]
    assert head["cmr"].iloc[0] == pytest.approx(s.cmr)


def test_two_sizes_trend_and_parent_reference() -> None:
    """Two sizes; the second takes its T = 0 reference from a phase=pt parent run instead of a step-0 eval."""
    a = synthetic_runs(n_params=460_000_000)
    p940 = {"alpha4": 0.7520627, "s4": 0.13720245, "beta3": -1.06581937}
    b = synthetic_runs(n_params=940_000_000, cmr_params=p940)
    b = b[b["step"] > 0].assign(parent_run="pt940")
    parent = pd.DataFrame([{"run_id": "pt940", "step": 5000, "tokens": 1e11, "n_params": 940_000_000,
                            "phase": "pt", "w_code": 0.0, "w_general": 1.0, "loss_general": 2.0,
                            "loss_code": 2.5}])  # fmt: skip
    dec = critical_mixture_ratio(
        pd.concat([a, b, parent], ignore_index=True), general_eval="general", domain_eval="code",
        sensitivity_lambdas=(), sensitivity_epsilons=(), settings=CMRSettings(token_unit=UNIT))  # fmt: skip
    assert [s.n_params for s in dec.sizes] == [460_000_000, 940_000_000]
    assert dec.sizes[1].cmr == pytest.approx(0.3489, abs=3e-3)
    assert dec.trend is not None and dec.trend["b"] > 0  # larger model, higher CMR


def test_input_errors() -> None:
    runs = synthetic_runs((0.125, 0.2, 0.25))
    with pytest.raises(InputError, match="loss columns"):
        critical_mixture_ratio(runs, general_eval="nope", domain_eval="code")
    with pytest.raises(InputError, match="ratio column"):
        critical_mixture_ratio(runs.drop(columns="w_code"), general_eval="general", domain_eval="code")
    with pytest.raises(InputError, match="epsilon"):
        critical_mixture_ratio(runs, general_eval="general", domain_eval="code", settings=CMRSettings(epsilon=-1))
    no_ref = runs[runs["step"] > 0]
    with pytest.raises(InputError, match=r"T = 0 reference for run .*no step-0 evaluation"):
        critical_mixture_ratio(no_ref, general_eval="general", domain_eval="code")
    bad = runs.copy()
    bad.loc[3, "loss_general"] = np.nan
    with pytest.raises(InputError, match="loss_general"):
        critical_mixture_ratio(bad, general_eval="general", domain_eval="code")


def test_smaller_budget_moves_the_cmr_along_the_law() -> None:
    """At a 10B-token budget (T = 50) the same runs give R_CMR(50) = 0.1649 of the published 460M law."""
    dec = critical_mixture_ratio(
        synthetic_runs(), general_eval="general", domain_eval="code", sensitivity_lambdas=(), sensitivity_epsilons=(),
        settings=CMRSettings(token_unit=UNIT, budget_tokens=50 * UNIT))  # fmt: skip
    (s,) = dec.sizes
    assert s.budget_tokens == 50 * UNIT and s.status == STATUS_OK
    assert s.cmr == pytest.approx(0.1649, abs=5e-3)
    assert [r["feasible"] for r in s.ratios] == [True, False, False, False, False]


def test_control_run_and_unfinished_run() -> None:
    """R = 0 is a control, not a candidate; a run that stopped early does not drag the default budget down."""
    runs = synthetic_runs((0.0, 0.125, 0.2, 0.25))
    unfinished = synthetic_runs((1 / 3,), t_units=np.arange(5.0, 41.0, 5.0))
    dec = critical_mixture_ratio(
        pd.concat([runs, unfinished], ignore_index=True), general_eval="general", domain_eval="code",
        sensitivity_lambdas=(), sensitivity_epsilons=(), settings=CMRSettings(token_unit=UNIT))  # fmt: skip
    (s,) = dec.sizes
    assert s.budget_tokens == pytest.approx(100 * UNIT)
    assert any("left out 1 run(s)" in n and "r0.3333" in n for n in s.notes)
    assert [r["ratio"] for r in s.ratios] == [0.0, 0.125, 0.2, 0.25]
    control = s.ratios[0]
    assert not control["feasible"] and control["reason"].startswith("control run")
    assert s.status == STATUS_ALL_FEASIBLE and s.cmr == 0.25
