"""One definition, one headline: the CMR (max F, laws.md §6.3) agrees with the per-ratio table printed under it, in
the point estimate and in every resample; the tolerance boundary is a second, named number; every note agrees with
the tables."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from mixlaw.decide.cmr import CMRSettings, critical_mixture_ratio
from mixlaw.decide.cmr.result import Bracket, BracketReason, Reading, observed_bracket
from mixlaw.design.simulate_cmr import simulate_cmr_runs

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cmr_probe"
UNIT = 2e8
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}  # laws.md §6.6


def _table_bracket(s: object) -> tuple[float | None, float | None]:
    rows = [r for r in s.ratios if r["ratio"] > 0 and r["t0_status"] is not None]  # type: ignore[attr-defined]
    bad = sorted(r["ratio"] for r in rows if not r["feasible"])
    hi = bad[0] if bad else None
    ok = [r["ratio"] for r in rows if r["feasible"] and (hi is None or r["ratio"] < hi)]
    return (max(ok) if ok else None), hi


def _assert_agrees(s: object) -> None:
    """The headline, its interval and every resample lie in [largest feasible, smallest infeasible) of the table."""
    lo, hi = _table_bracket(s)
    assert tuple(s.bracket) == (lo, hi)  # type: ignore[attr-defined]
    vals = [] if s.cmr is None else [s.cmr]  # type: ignore[attr-defined]
    if s.ci is not None:  # type: ignore[attr-defined]
        vals += list(s.ci)  # type: ignore[attr-defined]
    if s.bootstrap_cmr is not None:  # type: ignore[attr-defined]
        vals += [float(v) for v in s.bootstrap_cmr]  # type: ignore[attr-defined]
    if s.reading is Reading.LOWER_BOUND:  # type: ignore[attr-defined]
        return
    for v in vals:
        assert lo is None or v >= lo - 1e-12, (s.n_params, v, lo, hi)  # type: ignore[attr-defined]
        assert hi is None or v <= hi + 1e-12, (s.n_params, v, lo, hi)  # type: ignore[attr-defined]
    if s.cmr is not None:  # type: ignore[attr-defined]
        assert hi is None or s.cmr < hi  # type: ignore[attr-defined]
        assert s.tolerance_boundary is None or s.cmr <= s.tolerance_boundary + 1e-12  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def shipped() -> dict:
    runs = pd.read_csv(EXAMPLES / "runs.csv")
    return {d: critical_mixture_ratio(runs, general_eval="general", domain_eval=d, bootstrap=20, random_state=0,
                                      sensitivity_epsilons=(0.05,), control_reading=False)
            for d in ("legal", "code")}  # fmt: skip


def test_bracket_rules() -> None:
    b = observed_bracket([(0.125, True), (0.25, True), (0.5, False), (0.75, True), (1.0, False)])
    assert (b.lo, b.hi, b.detached) == (0.25, 0.5, (0.75,))
    assert b.contains(0.25) and b.contains(0.49) and not b.contains(0.5) and not b.contains(0.2)
    assert b.clip(0.9) == 0.5 and b.clip(0.1) == 0.25 and b.text() == "between 0.25 and 0.5"
    assert Bracket(0.75, None).text() == "≥ 0.75" and Bracket(None, 0.125).text() == "< 0.125"


def test_shipped_headline_agrees_with_its_table_in_every_resample(shipped: dict) -> None:
    n = 0
    for dec in shipped.values():
        for s in dec.sizes:
            _assert_agrees(s)
            n += 1
            assert f"ε = {dec.settings['epsilon']:g}" in s.sentence("d")  # ε, budget and size in the answer
    assert n == 6


def test_shipped_113k_legal_is_bracketed_not_the_tolerance_boundary(shipped: dict) -> None:
    """Measured on main: R = 1/2 'no root in budget', yet the headline was the tolerance-only 0.582. Now the answer
    is the bracket the table gives, and the tolerance boundary stays beside it under its own name."""
    s = max(shipped["legal"].sizes, key=lambda s: s.n_params)
    (half,) = [r for r in s.ratios if r["ratio"] == 0.5]
    assert not half["feasible"]
    assert s.cmr is None and s.bracket == (0.25, 0.5) and s.reading is Reading.BRACKET
    assert s.bracket_reason is BracketReason.NO_CMR_LAW
    assert s.tolerance_boundary is not None and s.tolerance_boundary > 0.5
    text = s.sentence("legal")
    assert "CMR between 0.25 and 0.5" in text
    assert f"tolerance boundary (largest share within ε at the budget) {s.tolerance_boundary:.2f}" in text


def test_simulated_still_rising_three_quarters_caps_the_headline() -> None:
    """The issue's simulator case: R = 3/4 has no turning point in the budget while within ε, R = 1 passes ε; the
    CMR law alone said 0.79. Whatever the table marks infeasible bounds the headline."""
    law = {**P460, "beta3": P460["beta3"] + 0.47}  # true CMR(100) = 0.768
    for seed in (0, 1, 2):
        runs = simulate_cmr_runs((0.125, 0.25, 0.5, 0.75, 1.0), law, token_unit=UNIT, amp=0.008, noise=1e-5,
                                 random_state=seed)  # fmt: skip
        dec = critical_mixture_ratio(runs, general_eval="general", domain_eval="code", bootstrap=10,
                                     random_state=seed, sensitivity_lambdas=(),
                                     sensitivity_epsilons=(), settings=CMRSettings(token_unit=UNIT))  # fmt: skip
        (s,) = dec.sizes
        (r1,) = [r for r in s.ratios if r["ratio"] == 1.0]
        assert not r1["feasible"] and "> ε" in r1["reason"]
        _assert_agrees(s)


def test_notes_agree_with_the_tables(shipped: dict) -> None:
    """'every ratio tried is feasible' only when the table says so; failures counted in one vocabulary."""
    for dec in shipped.values():
        for s in dec.sizes:
            cand = [r for r in s.ratios if r["ratio"] > 0]
            all_ok = all(r["feasible"] for r in cand)
            for n in s.notes:
                if "every ratio tried is feasible" in n:
                    assert all_ok, n
                if "bootstrap" in n and "refits" in n:
                    assert f"{s.n_bootstrap_failed} of {s.n_bootstrap} resamples unusable" in n, n
            if s.cmr is not None:
                assert f"({s.n_bootstrap_failed}/{s.n_bootstrap} resamples unusable)" in s.sentence("d")


def test_lambda_sensitivity_never_rises_unexplained(shipped: dict) -> None:
    """A larger λ moves T0 towards the peak of ΔL_gen: the CMR (or its bracket's upper end) does not rise with λ,
    or the row says why."""
    for dec in shipped.values():
        sens = dec.sensitivity
        for (_, _), g in sens.groupby(["n_params", "epsilon"]):
            g = g.assign(_l=g["lagrange_mult"].map(lambda v: math.inf if v == "inf" else float(v))).sort_values("_l")
            up = [v if v is not None and not (isinstance(v, float) and math.isnan(v)) else h
                  for v, h in zip(g["cmr"], g["bracket_hi"], strict=True)]  # fmt: skip
            for k in range(1, len(up)):
                a, b = up[k - 1], up[k]
                if a is None or b is None or (isinstance(a, float) and math.isnan(a)) or (
                        isinstance(b, float) and math.isnan(b)):  # fmt: skip
                    continue
                if b > a + 1e-9:
                    assert isinstance(g["why_moves"].iloc[k], str) and "rises with λ" in g["why_moves"].iloc[k]


def test_clip_note_says_the_law_does_not_decide_when_the_table_disagrees() -> None:
    from mixlaw.decide.cmr.decision import _clip_note

    assert _clip_note("CMR law exceeds 1 at this budget", 1.2, Bracket(0.5, 0.75), True).endswith(
        "the table marks R = 0.75 infeasible, so the law does not set the CMR here")
    assert _clip_note("CMR law exceeds 1 at this budget", 1.2, Bracket(1.0, None), True).endswith(
        "every ratio tried is feasible")


def test_domain_similarity_finding_is_evaluated_on_the_data_shown(shipped: dict) -> None:
    """The paper's 'closer domain allows a higher CMR' comes with a verdict from these decisions: legal (lower base
    loss, closer to the general text) vs code per size, contradicted wherever code's answer lies wholly above."""
    from mixlaw.fmt import fmt_size
    from mixlaw.report.cmr_page import similarity_finding

    text = similarity_finding(shipped)
    legal = {s.n_params: s for s in shipped["legal"].sizes}
    code = {s.n_params: s for s in shipped["code"].sizes}
    assert all(legal[n].reference_domain < code[n].reference_domain for n in legal)  # legal is the closer domain
    for n in legal:
        lo_code = code[n].cmr if code[n].cmr is not None else code[n].bracket[0]
        hi_legal = legal[n].cmr if legal[n].cmr is not None else legal[n].bracket[1]
        if lo_code is not None and hi_legal is not None and lo_code > hi_legal:
            assert f"{fmt_size(n)} (code > legal)" in text, text
    assert "contradicted at" in text  # code > legal at 21.7k and 113k on the shipped runs


def test_the_decision_contract_carries_the_bracket() -> None:
    """On the Decision contract a bracket answer is two named answers and a reason code, status weak (not
    'no answer'): 113k legal on the example is 'CMR between 0.25 and 0.5'."""
    from mixlaw.decide.contract import Status
    from mixlaw.decide.run import run_decision
    from mixlaw.options import IntervalOptions

    runs = pd.read_csv(EXAMPLES / "runs.csv")
    res = run_decision(runs, "cmr", {"general_eval": "general", "domain_eval": "legal"},
                       intervals=IntervalOptions(resamples=0))  # fmt: skip
    got = {a.name: a.value for a in res.answers}
    assert got["cmr@1.132e+05"] is None and got["cmr_lower@1.132e+05"] == 0.25 and got["cmr_upper@1.132e+05"] == 0.5
    assert any(r.code == "cmr_size_bracket" for r in res.reasons) and res.status is Status.WEAK
