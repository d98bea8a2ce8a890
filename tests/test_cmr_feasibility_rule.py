"""One feasibility rule for a domain share (CMR paper, laws.md §6.4): the per-ratio table and the query of an unseen
share both decide by :func:`mixlaw.decide.cmr.common.unmet_criteria` and render their reasons from its codes."""

from __future__ import annotations

import math

import pytest

from mixlaw.decide.cmr import CMRSettings, critical_mixture_ratio
from mixlaw.decide.cmr.common import Unmet, unmet_criteria
from mixlaw.design.simulate_cmr import simulate_cmr_runs
from mixlaw.errors import InputError

UNIT = 2e8
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}  # laws.md §6.6


def test_the_rule_at_its_boundaries() -> None:
    eps = 0.05
    assert unmet_criteria(eps, -1e-9, eps, True) == []  # ε itself is tolerated; any domain gain counts
    assert unmet_criteria(eps + 1e-12, -0.1, eps, True) == [Unmet.TOLERANCE]
    assert unmet_criteria(0.0, 0.0, eps, True) == [Unmet.DOMAIN_GAIN]  # no change is no improvement
    assert unmet_criteria(0.0, -0.1, eps, False) == [Unmet.TURN]
    assert unmet_criteria(1.0, 1.0, eps, False) == [Unmet.TOLERANCE, Unmet.DOMAIN_GAIN, Unmet.TURN]
    assert unmet_criteria(math.nan, math.nan, eps, True) == [Unmet.TOLERANCE, Unmet.DOMAIN_GAIN]  # NaN never passes
    assert unmet_criteria(0.0, None, eps, None) == []  # not judged: no domain law, no turning-point requirement


def test_table_and_query_agree_with_the_rule_on_the_numbers_they_print() -> None:
    """Every verdict of the per-ratio table agrees with the rule applied to the increments and T0 printed in its
    own row, and the query of a share (trained or not) is feasible exactly when the rule finds nothing unmet,
    with one reason per unmet criterion."""
    runs = simulate_cmr_runs((0.125, 0.2, 0.25, 1 / 3, 0.5), P460, token_unit=UNIT, noise=1e-5, random_state=3)
    (s,) = critical_mixture_ratio(runs, general_eval="general", domain_eval="code", sensitivity_lambdas=(math.inf,),
                                  sensitivity_epsilons=(), settings=CMRSettings(token_unit=UNIT)).sizes  # fmt: skip
    eps = 0.05
    seen = {True: 0, False: 0}
    for row in s.ratios:
        g = row["observed_dloss_general_at_budget"]
        g = row["dloss_general_at_budget"] if g is None else g
        d = row["observed_dloss_domain_at_budget"]
        d = row["dloss_domain_at_budget"] if d is None else d
        t0 = row["t0_tokens"]
        unmet = unmet_criteria(g, d, eps, t0 is not None and t0 <= s.budget_tokens)
        assert row["within_tolerance"] == (Unmet.TOLERANCE not in unmet), row
        if row["feasible"]:
            assert unmet == [], row
        seen[bool(row["feasible"])] += 1
    assert seen[True] and seen[False]  # the synthetic law puts the CMR between the trained ratios
    for ratio in (0.125, 0.28, 0.3, 0.5, 0.9):
        for e in (eps, -0.5):  # ε = −0.5: the general loss "rises" past it at every share
            q = s.assess_ratio(ratio, e)
            t0 = q["t0_tokens"]
            unmet = unmet_criteria(q["dloss_general_at_budget"], q["dloss_domain_at_budget"], e,
                                   t0 <= s.budget_tokens)  # fmt: skip
            assert q["feasible"] == (not unmet), q
            reasons = [] if q["feasible"] else q["reason"].split("; ")
            assert len(reasons) == len(unmet), q
            assert (Unmet.TOLERANCE in unmet) == any(r.startswith("general loss rises") for r in reasons)
            if e < 0:
                assert Unmet.TOLERANCE in unmet
    with pytest.raises(InputError, match="domain share"):
        s.assess_ratio(1.5, eps)
