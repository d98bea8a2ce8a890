"""CMR intervals checked against a known truth: simulated CPT grids (:func:`simulate_cmr_runs`) whose CMR law, and so
whose CMR at the budget, is known (laws.md §6.6: the 460M law with its offset β3 shifted, so that the true CMR
moves across the trained ratios).

What is checked, per grid: the answer agrees with its own table (a CMR inside the bracket of the trained ratios
the table marks feasible / infeasible, or that bracket); over all grids, how often the 95 % answer (interval, or
bracket when there is no point value) covers the true CMR; and whether the interval from 20 resamples agrees with
the one from 50 within the Monte-Carlo error of 20 resamples.
"""

from __future__ import annotations

import numpy as np
import pytest

from mixlaw.decide.cmr import CMRSettings, critical_mixture_ratio
from mixlaw.decide.cmr.result import Reading
from mixlaw.design.simulate_cmr import simulate_cmr_runs
from mixlaw.fit.uncertainty.from_draws import t_widened_interval
from mixlaw.laws.cmr_law import CMRLaw

UNIT = 2e8  # tokens per T unit; the budget is T = 100
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}  # laws.md §6.6
RATIOS = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0)
N_GRIDS = 20
NOISE = 1e-4


def _grid(i: int, shift: float) -> tuple[float, object]:
    law = {**P460, "beta3": P460["beta3"] + shift}
    truth = float(CMRLaw(token_unit=UNIT).evaluate({"tokens": np.array([100 * UNIT])}, law)[0])
    runs = simulate_cmr_runs(RATIOS, law, token_unit=UNIT, noise=NOISE, random_state=1000 + i)
    return truth, runs


def _decide(runs: object, n_boot: int, seed: int) -> object:
    dec = critical_mixture_ratio(runs, general_eval="general", domain_eval="code",  # type: ignore[arg-type]
                                 settings=CMRSettings(token_unit=UNIT), bootstrap=n_boot, random_state=seed,
                                 sensitivity_lambdas=(), sensitivity_epsilons=())  # fmt: skip
    return dec.sizes[0]


@pytest.fixture(scope="module")
def grids() -> list[tuple[float, object]]:
    rng = np.random.default_rng(20261203)
    shifts = rng.uniform(0.0, 0.4, N_GRIDS)  # true CMR(100) between 0.30 and 0.70
    out = []
    for i, sh in enumerate(shifts):
        truth, runs = _grid(i, float(sh))
        out.append((truth, _decide(runs, 20, i)))
    return out


def _answer_interval(s: object) -> tuple[float, float]:
    if s.ci is not None:  # type: ignore[attr-defined]
        return s.ci  # type: ignore[attr-defined,no-any-return]
    lo, hi = s.bracket  # type: ignore[attr-defined]
    return (0.0 if lo is None else lo, 1.0 if hi is None else hi)


def test_every_simulated_answer_agrees_with_its_table(grids: list) -> None:
    for truth, s in grids:
        lo, hi = s.bracket
        assert s.reading in (Reading.CMR_LAW, Reading.TOLERANCE, Reading.BRACKET, Reading.LOWER_BOUND), s.reading
        if s.cmr is not None and s.reading is not Reading.LOWER_BOUND:
            assert (lo is None or s.cmr >= lo) and (hi is None or s.cmr < hi), (truth, s.cmr, s.bracket)
        feas = sorted(r["ratio"] for r in s.ratios if r["feasible"])
        bad = sorted(r["ratio"] for r in s.ratios if not r["feasible"] and r["ratio"] > 0)
        assert lo == (max(x for x in feas if not bad or x < bad[0]) if feas else None)
        assert hi == (bad[0] if bad else None)


def test_point_estimates_track_the_truth(grids: list) -> None:
    """The CMR law refitted from noisy runs lands near the true CMR (a bias check independent of the intervals)."""
    err = [s.cmr - truth for truth, s in grids if s.cmr is not None]
    assert len(err) >= 0.75 * len(grids)
    assert float(np.median(np.abs(err))) < 0.02, err
    assert float(np.max(np.abs(err))) < 0.06, err


def test_95_percent_answers_cover_the_true_cmr(grids: list) -> None:
    cover = [lo - 1e-9 <= truth <= hi + 1e-9 for truth, s in grids for lo, hi in [_answer_interval(s)]]
    assert 0.90 <= float(np.mean(cover)) <= 0.99, f"{sum(cover)}/{len(cover)}"


def _mc_agree(s20: object, s50: object, rng: np.random.Generator) -> bool:
    """Whether both ends of the 20- and the 50-resample intervals agree within their Monte-Carlo error.

    The error of an end from ``B`` resamples is the spread of that end over 400 sets of ``B`` values drawn with
    replacement from the 50 resampled CMRs, by the verb's interval rule (:func:`t_widened_interval`); the two runs'
    errors add (both are estimates: centring a band of the 20-resample error on the 50-resample interval alone fails
    about a third of seeds under any rule). An end agrees within 2.58 combined standard errors (99 % per end, so
    that four ends of a calibrated pair agree about 96 % of the time)."""
    boot = np.asarray(s50.bootstrap_cmr)  # type: ignore[attr-defined]
    point = s50.cmr  # type: ignore[attr-defined]
    ends = {}
    for b in (20, 50):
        subs = [t_widened_interval(boot[rng.choice(boot.size, b, replace=True)], point) for _ in range(400)]
        ends[b] = np.array([[c[0], c[1]] for c in subs if c is not None])
    se = np.sqrt(ends[20].var(axis=0, ddof=1) + ends[50].var(axis=0, ddof=1))
    diff = np.abs(np.asarray(s20.ci) - np.asarray(s50.ci))  # type: ignore[attr-defined]
    return bool(np.all(diff <= 2.58 * se + 1e-9))


def test_twenty_and_fifty_resamples_agree_within_monte_carlo_error() -> None:
    """The interval from 20 resamples against the one from 50, on two simulated grids (:func:`_mc_agree`)."""
    rng = np.random.default_rng(7)
    checked = 0
    for i, sh in enumerate((0.1, 0.3)):
        _, runs = _grid(100 + i, sh)
        s50 = _decide(runs, 50, i)
        s20 = _decide(runs, 20, i)
        if s50.cmr is None or s50.bootstrap_cmr is None or s20.ci is None or s50.ci is None:
            continue
        assert _mc_agree(s20, s50, rng), (sh, s20.ci, s50.ci)
        checked += 1
    assert checked == 2
