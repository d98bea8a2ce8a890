"""Turning verdicts that cannot contradict the data, shares in [0, 1], honest statuses (issue 13 items 1-3)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.cmr import (
    STATUS_OK,
    STATUS_WEAK,
    CMRSettings,
    critical_mixture_ratio,
)
from mixlaw.design.simulate_cmr import simulate_cmr_runs

# The first shipped grid (5 sizes, 13k-200k): the cases issue 13 measured (200k legal R = 1/2, ...) are its runs.
RUNS = Path(__file__).resolve().parents[1] / "examples" / "cmr_probe" / "runs_v1.csv"
UNIT = 2e8
T = np.array([0.5, 1, 2, 3, 5, 8, 12, 18, 25, 35, 45, 55, 65, 75, 85, 95, 100.0])


def _runs(shape: str, ratios: tuple[float, ...] = (0.125, 0.25, 0.5), seed: int = 0) -> pd.DataFrame:
    """One run per ratio whose general-loss increment has a given shape over a budget of T = 100 units."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in ratios:
        k = 1 + r  # a little larger at larger ratios
        if shape == "rise_then_fall":  # peaks at T = 40
            g = k * 0.004 * (np.sqrt(T) - T / (2 * np.sqrt(40.0)))
        elif shape == "monotone_rise":
            g = k * 0.003 * T**0.5
        elif shape == "dip_then_rise":  # dips to about −0.006 near T ≈ 6, then rises through the budget
            g = k * (0.0003 * T - 0.008 * (1 - np.exp(-T / 3)))
        elif shape == "pure_fall":
            g = -k * 0.01 * T**0.4
        else:
            raise ValueError(shape)
        g = g + 2e-4 * rng.standard_normal(T.size)
        d = -0.05 * r**0.3 * T**0.4 + 2e-4 * rng.standard_normal(T.size)
        base = {"run_id": f"r{r}", "n_params": 1_000_000, "phase": "cpt", "w_code": r}
        rows.append(base | {"step": 0, "tokens": 0.0, "loss_general": 3.0, "loss_code": 4.0})
        rows += [base | {"step": i + 1, "tokens": t * UNIT, "loss_general": 3.0 + gi, "loss_code": 4.0 + di}
                 for i, (t, gi, di) in enumerate(zip(T, g, d, strict=True))]  # fmt: skip
    return pd.DataFrame(rows)


def _rows(shape: str) -> list[dict]:
    dec = critical_mixture_ratio(_runs(shape), general_eval="general", domain_eval="code", sensitivity_lambdas=(),
                                 sensitivity_epsilons=(), settings=CMRSettings(token_unit=UNIT))  # fmt: skip
    return dec.sizes[0].ratios


def test_rise_then_fall_is_feasible_at_its_peak() -> None:
    for r in _rows("rise_then_fall"):
        assert r["feasible"], r["reason"]
        assert r["t0_status"] == "root" and r["t0_tokens"] / UNIT == pytest.approx(40.0, rel=0.15)


def test_monotone_rise_is_never_feasible() -> None:
    for r in _rows("monotone_rise"):
        assert not r["feasible"] and (r["t0_tokens"] is None or r["t0_tokens"] > 100 * UNIT)
        assert "no root in budget" in r["reason"] and r["observed_still_rising"]


def test_dip_at_the_origin_is_not_a_turning_point() -> None:
    """The general loss dips just after T = 0 and then rises through the budget: not feasible, no T0 at the start."""
    for r in _rows("dip_then_rise"):
        assert not r["feasible"], r["reason"]
        assert r["t0_status"] != "falling at first evaluation"
        assert r["t0_tokens"] is None or r["t0_tokens"] > 5 * UNIT
        assert r["observed_still_rising"]


def test_pure_fall_never_rises_and_is_feasible() -> None:
    for r in _rows("pure_fall"):
        assert r["feasible"] and "never rises" in r["reason"]


@pytest.fixture(scope="module")
def shipped() -> dict[str, object]:
    runs = pd.read_csv(RUNS)
    return {d: critical_mixture_ratio(runs, general_eval="general", domain_eval=d, sensitivity_lambdas=(),
                                      sensitivity_epsilons=(), control_reading=False)
            for d in ("legal", "code")}  # fmt: skip


def test_shipped_runs_rising_observations_are_never_feasible_by_turning(shipped: dict) -> None:
    """No row is called feasible while its observed general loss is still rising at the budget; R = 1 (and every
    row whose data rise through the budget) gets no T0 at the first evaluation."""
    n_rising = 0
    for dec in shipped.values():
        for s in dec.sizes:
            t_first = min(c["t_lo"] for c in s.curves.values())
            for r in s.ratios:
                if r["observed_still_rising"]:
                    n_rising += 1
                    assert not r["feasible"], (s.n_params, r["ratio"], r["reason"])
                    assert r["t0_tokens"] is None or r["t0_tokens"] > 1.5 * t_first
                if r["feasible"] and r["ratio"] > 0:
                    assert r["t0_status"] in ("root", "observed peak", "falling at first evaluation")
    assert n_rising >= 5  # the R = 3/4 and R = 1 runs of the shipped example rise through the budget


def test_shipped_200k_legal_half_has_no_turning_point_at_the_origin(shipped: dict) -> None:
    """200k legal R = 1/2 rises from +0.0003 at 2k tokens to its peak near 110k: T0 is not the first evaluation."""
    s = max(shipped["legal"].sizes, key=lambda s: s.n_params)
    (r,) = [r for r in s.ratios if r["ratio"] == 0.5]
    assert r["t0_status"] != "falling at first evaluation"
    assert r["t0_tokens"] is None or r["t0_tokens"] > 20_000
    assert r["observed_peak_tokens"] > 50_000


def test_shipped_shares_are_shares(shipped: dict) -> None:
    for dec in shipped.values():
        for s in dec.sizes:
            for v in (s.cmr, s.cmr_law_at_budget, s.tolerance_boundary, s.model_free_crossing):
                assert v is None or 0.0 <= v <= 1.0
            if s.cmr_law is not None:
                grid = np.geomspace(1e3, 1e8, 50)
                assert np.all((s.cmr_at(grid) >= 0) & (s.cmr_at(grid) <= 1))
            if s.cmr_law_at_budget_raw is not None and s.cmr_law_at_budget_raw > 1:
                assert s.cmr_law_at_budget == 1.0 and any("CMR law exceeds 1" in n for n in s.notes)


def test_cmr_law_above_one_is_clipped_and_said() -> None:
    """A CMR law that extrapolates above 1 at the budget: clipped, said, and the tolerance boundary decides."""
    law = {"alpha4": 0.5, "s4": 0.3, "beta3": -0.5}  # R_CMR(100) = 1.49
    # evaluations from T = 1 so that the early turning points (T0 = 2.1 and 3.9 at R = 1/8, 1/4) are observed
    runs = simulate_cmr_runs((0.125, 0.25, 0.5, 1.0), law, token_unit=UNIT, noise=1e-5, random_state=0,
                             t_units=np.arange(1.0, 101.0))  # fmt: skip
    dec = critical_mixture_ratio(runs, general_eval="general", domain_eval="code", sensitivity_lambdas=(math.inf,),
                                 sensitivity_epsilons=(0.005,), settings=CMRSettings(token_unit=UNIT,
                                 epsilon=0.005))  # fmt: skip
    (s,) = dec.sizes
    assert s.cmr_law_at_budget_raw is not None and s.cmr_law_at_budget_raw > 1.2
    assert s.cmr_law_at_budget == 1.0
    # R = 1 rises past ε = 0.005: the note says the law is clipped and that the table's verdict, not the law,
    # bounds the CMR; "every ratio tried is feasible" would contradict the table
    (r1,) = [r for r in s.ratios if r["ratio"] == 1.0]
    assert not r1["feasible"]
    assert any("CMR law exceeds 1 at this budget" in n and "the table marks R = 1 infeasible" in n for n in s.notes)
    assert not any("every ratio tried is feasible" in n for n in s.notes)
    assert s.cmr is not None and 0.5 <= s.cmr < 1.0 and s.cmr_source.startswith("tolerance")
    assert float(np.max(s.cmr_at(np.geomspace(1e9, 1e12, 20)))) <= 1.0


def test_noisy_curves_make_the_decision_weak_with_its_reason() -> None:
    """Evaluation noise as large as the bump itself: R² of the ΔL_gen fits falls below the threshold."""
    runs = simulate_cmr_runs((0.125, 0.2, 0.25, 1 / 3, 0.5), {"alpha4": 0.22524761, "s4": 0.26944345,
                             "beta3": -0.48139982}, token_unit=UNIT, noise=4e-3, random_state=2)  # fmt: skip
    dec = critical_mixture_ratio(runs, general_eval="general", domain_eval="code", bootstrap=10,
                                 random_state=0, sensitivity_lambdas=(), sensitivity_epsilons=(),
                                 settings=CMRSettings(token_unit=UNIT))  # fmt: skip
    (s,) = dec.sizes
    assert s.weak_reasons, (s.status, s.cmr_source)
    assert s.status != STATUS_OK
    if s.outcome == STATUS_OK:
        assert s.status == STATUS_WEAK
    assert "status " + s.status in s.sentence("code") and s.weak_reasons[0] in s.sentence("code")
    clean = critical_mixture_ratio(simulate_cmr_runs((0.125, 0.2, 0.25, 1 / 3, 0.5), {"alpha4": 0.22524761,
                                   "s4": 0.26944345, "beta3": -0.48139982}, token_unit=UNIT, noise=1e-5,
                                   random_state=2), general_eval="general", domain_eval="code",
                                   sensitivity_lambdas=(), sensitivity_epsilons=(),
                                   settings=CMRSettings(token_unit=UNIT))  # fmt: skip
    assert clean.sizes[0].status == STATUS_OK and not clean.sizes[0].weak_reasons


def test_shipped_tolerance_boundary_is_read_beside_the_observations(shipped: dict) -> None:
    """A binding tolerance boundary comes with the model-free crossing of the observations; where the two differ
    by more than 0.05 a note says so, and a ratio law that misses its points beyond noise makes the size weak."""
    n_binding = 0
    for dec in shipped.values():
        for s in dec.sizes:
            if not s.cmr_source.startswith("tolerance"):
                continue
            n_binding += 1
            assert s.model_free_crossing is not None and 0 < s.model_free_crossing <= 1
            if abs(s.tolerance_boundary - s.model_free_crossing) > 0.05:
                assert any("model-free crossing" in n for n in s.notes)
            if any("misses the end-of-budget" in w for w in s.weak_reasons):
                assert s.status != STATUS_OK
    assert n_binding >= 5
