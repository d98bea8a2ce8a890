"""The size-extrapolation error of a regret (decide/mixture/regret_calib.py): measured on a nested size holdout,
zero when the law's regrets are right (a common level error cancels), proportional to the distance between
mixtures, and added to the paired interval in quadrature."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.mixture.regret_calib import (
    RegretCalibration,
    RegretCalibStatus,
    calibrate_regret,
    pair_errors,
    widen_candidate,
)
from mixlaw.decide.mixture.verdict import VerdictStatus, verdict_of
from mixlaw.options import FitOptions

DOMS = ["a", "b", "c"]


@dataclass
class _Law:
    inputs: tuple[str, ...] = ("w_a", "w_b", "w_c", "n_params")


@dataclass
class _Fit:
    predict_fn: Any

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return self.predict_fn(rows)


def _truth(rows: pd.DataFrame) -> np.ndarray:
    w = rows[["w_a", "w_b", "w_c"]].to_numpy()
    n = rows["n_params"].to_numpy(float)
    return 2.0 + 30.0 * n**-0.3 + (w**2).sum(axis=1) * (1 + 0.1 * np.log(n / 1e4))


def _table(rng: np.random.Generator, sizes=(1e4, 2e4, 4e4, 8e4), per_size: int = 12) -> pd.DataFrame:
    rows = []
    for n in sizes:
        for i, w in enumerate(rng.dirichlet(np.ones(3), per_size)):
            rows.append({"run_id": f"r{int(n)}-{i}", "n_params": n, "w_a": w[0], "w_b": w[1], "w_c": w[2]})
    t = pd.DataFrame(rows)
    return t.assign(loss=_truth(t))


def _calib(table: pd.DataFrame, predict: Any, target_size: float = 2e5) -> RegretCalibration:
    return calibrate_regret({"loss": table}, {"loss": _Law()}, {"loss": 1.0}, DOMS, target_size,
                            fit=lambda law, rows, t: _Fit(predict))  # fmt: skip


def test_right_regrets_give_no_widening_even_with_a_level_error() -> None:
    t = _table(np.random.default_rng(0))
    c = _calib(t, lambda r: _truth(r) + 0.3)  # every prediction 0.3 nats high: the regrets are exact
    assert c.status is RegretCalibStatus.CALIBRATED and c.n_runs == 12 and c.n_pairs == 66
    assert c.per_l1 == pytest.approx(0.0, abs=1e-12) and c.sd(1.0) == 0.0
    assert c.heldout_size == 8e4 and c.inner_size == 4e4
    assert c.growth == pytest.approx(math.log(2e5 / 8e4) / math.log(2.0))


def test_error_per_unit_distance_is_recovered() -> None:
    """Predictions whose mixture term is off by a factor: the regret error grows with the distance between mixtures,
    and s1 is the least-squares slope through the origin of e^2 on d^2."""
    t = _table(np.random.default_rng(1))

    def off(r: pd.DataFrame) -> np.ndarray:
        w = r[["w_a", "w_b", "w_c"]].to_numpy()
        return _truth(r) - 0.5 * (w**2).sum(axis=1)

    c = _calib(t, off)
    top = t[t["n_params"] == 8e4]
    e, d, _ = pair_errors(top["loss"].to_numpy(), off(top), top[["w_a", "w_b", "w_c"]].to_numpy())
    assert c.per_l1 == pytest.approx(np.sqrt((e**2).sum() / (d**2).sum()), rel=1e-12) and c.per_l1 > 0.05
    # the far pair's extra spread is larger than the near pair's, in proportion
    assert c.sd(1.0) == pytest.approx(2 * c.sd(0.5), rel=1e-12) and c.sd(1.0) == pytest.approx(c.per_l1 * c.growth)


@pytest.mark.parametrize(
    ("sizes", "target", "status"),
    [((1e4, 2e4), 1e5, RegretCalibStatus.TOO_FEW_SIZES), ((1e4, 2e4, 4e4), 3e4, RegretCalibStatus.INSIDE_RANGE),
     ((1e4, 2e4, 4e4), None, RegretCalibStatus.NOT_APPLICABLE)],
)  # fmt: skip
def test_statuses(sizes: tuple[float, ...], target: float | None, status: RegretCalibStatus) -> None:
    t = _table(np.random.default_rng(2), sizes)
    c = _calib(t, _truth, target)  # type: ignore[arg-type]
    assert c.status is status and c.sd(1.0) == 0.0 and c.text


def test_seed_replicates_carry_no_information() -> None:
    t = _table(np.random.default_rng(3), per_size=2)
    t = pd.concat([t, t.assign(run_id=t["run_id"] + "-rep1")], ignore_index=True)  # same mixtures again
    assert _calib(t, _truth).status is RegretCalibStatus.TOO_FEW_RUNS


def test_widened_interval_adds_in_quadrature_and_the_verdict_says_so() -> None:
    calib = RegretCalibration(RegretCalibStatus.CALIBRATED, per_l1=0.1, growth=1.5, heldout_size=1.0, inner_size=0.5)
    cand = {"name": "uniform", "weights": {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}, "regret": 0.02,
            "regret_interval": [0.01, 0.04], "p_better_than_chosen": 0.0}  # fmt: skip
    chosen = np.array([0.5, 0.3, 0.2])
    before = verdict_of(dict(cand), 0.95)
    widen_candidate(cand, chosen, calib, 0.95)
    d = float(np.abs(np.full(3, 1 / 3) - chosen).sum())
    sd = 0.1 * 1.5 * d
    assert cand["regret_sd_extrapolation"] == pytest.approx(sd)
    z = 1.959963984540054
    assert cand["regret_interval"] == pytest.approx([0.02 - math.hypot(0.01, z * sd), 0.02 + math.hypot(0.02, z * sd)])
    assert cand["regret_interval_paired"] == [0.01, 0.04] and cand["p_better_than_chosen_paired"] == 0.0
    after = verdict_of(cand, 0.95)
    assert before.status is VerdictStatus.BEATS and after.status is VerdictStatus.NO_EVIDENCE
    assert "with the size-extrapolation error" in after.text and 0 < 1 - after.p_chosen_better < 0.5


def test_not_calibrated_leaves_the_candidate_alone() -> None:
    cand = {"name": "u", "weights": {"a": 0.2, "b": 0.3, "c": 0.5}, "regret": 0.02, "regret_interval": [0.01, 0.04],
            "p_better_than_chosen": 0.0}  # fmt: skip
    widen_candidate(cand, np.array([0.5, 0.3, 0.2]), RegretCalibration(RegretCalibStatus.TOO_FEW_SIZES), 0.95)
    assert cand["regret_interval"] == [0.01, 0.04] and cand["regret_sd_extrapolation"] == 0.0
    assert verdict_of(cand, 0.95).status is VerdictStatus.BEATS


def test_nested_refit_from_the_point_reaches_the_fit_on_the_inner_rows() -> None:
    """The warm refit (the rows at the top size weigh 0) ends where a fit on the inner rows alone ends."""
    from mixlaw.decide.mixture.regret_calib import nested_refit
    from mixlaw.fit import fit_law
    from mixlaw.laws import get_law

    rng = np.random.default_rng(5)
    n = np.repeat([1e7, 3e7, 1e8, 3e8, 1e9], 6)
    d = n * rng.uniform(10, 60, n.size)
    truth = 1.7 + 400 * n**-0.34 + 410 * d**-0.28
    t = pd.DataFrame({"n_params": n, "tokens": d, "loss": truth * np.exp(rng.normal(0, 0.002, n.size))})
    law = get_law("chinchilla")
    full = fit_law(law, t, FitOptions(seed=0), target="loss")
    warm = nested_refit(full, t, "n_params", 1e9, None)
    cold = fit_law(law, t[t["n_params"] < 1e9], FitOptions(seed=0), target="loss")
    top = t[t["n_params"] == 1e9]
    assert warm is not None and warm.params != full.params
    assert warm.predict(top) == pytest.approx(cold.predict(top), rel=2e-3)


def test_exactly_one_way_to_refit() -> None:
    t = _table(np.random.default_rng(6))
    with pytest.raises(TypeError):
        calibrate_regret({"loss": t}, {"loss": _Law()}, {"loss": 1.0}, DOMS, 2e5)


def test_the_level_error_is_measured_and_widens_a_level_interval() -> None:
    """A level error that cancels in every regret still widens the objective's interval: RMS of O - P (bias included)
    times the growth, in quadrature."""
    from mixlaw.decide.mixture.regret_calib import widen_level

    t = _table(np.random.default_rng(7))
    c = _calib(t, lambda r: _truth(r) + 0.3)  # regrets exact, every level 0.3 high
    assert c.per_l1 == pytest.approx(0.0, abs=1e-12) and c.level_rms == pytest.approx(0.3, rel=1e-9)
    assert c.level_sd() == pytest.approx(0.3 * c.growth)
    z = 1.959963984540054
    got = widen_level([4.9, 5.1], 5.0, c.level_sd(), 0.95)
    assert got == pytest.approx([5.0 - math.hypot(0.1, z * c.level_sd()), 5.0 + math.hypot(0.1, z * c.level_sd())])
    assert widen_level([4.9, 5.1], 5.0, 0.0, 0.95) == [4.9, 5.1] and widen_level(None, 5.0, 0.1, 0.95) is None
    assert RegretCalibration(RegretCalibStatus.INSIDE_RANGE, level_rms=0.3).level_sd() == 0.0
    assert dict(c.level_rms_by_target)["loss"] == pytest.approx(0.3, rel=1e-9)  # one loss: its own miss
    assert c.level_sd("loss") == pytest.approx(c.level_sd()) and c.level_sd("other") == 0.0
