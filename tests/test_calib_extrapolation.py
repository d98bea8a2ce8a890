"""Extrapolation-calibrated prediction intervals (:mod:`mixlaw.fit.evaluate.calibrate`) on simulated size extrapolation.

A plain power law is fitted to 8 sizes (1e8-1e11, 3 runs each, 0.5 % noise) and predicts 3 larger ones
(2e11-1e12, held out). With a known misspecification that grows with size — a log-quadratic bend of the truth over
the whole range — the bootstrap interval misses the held-out sizes and the calibrated one, which learns the error
growth from forward fits inside the fitted sizes, covers most of them; on well-specified data the calibration
widens the interval little. Seeded, starts away from the truth; about 15 s.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.fit import fit_law
from mixlaw.fit.evaluate.calibrate import Calibration
from mixlaw.fit.result import FitResult
from mixlaw.fit.uncertainty.intervals import band, inputs_of
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

LAW = get_law("power_law", input="n_params")
SEEDS = range(6)


def _table(seed: int, bend: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = np.repeat(np.concatenate([np.geomspace(1e8, 1e11, 8), [2e11, 5e11, 1e12]]), 3)
    y = np.asarray(LAW.evaluate({"n_params": n}, {"A": 40.0, "E": 2.0, "alpha": 0.3}), dtype=np.float64)
    t = np.log(n / 1e8) / np.log(1e11 / 1e8)  # 0 at the smallest fitted size, 1 at the largest
    y = y * np.exp(bend * t**2 + 0.005 * rng.standard_normal(n.size))
    return pd.DataFrame({"n_params": n, "loss": y, "run_id": np.arange(n.size), "held": n > 1.5e11})


def _fit(seed: int, bend: float) -> tuple[FitResult, pd.DataFrame]:
    df = _table(seed, bend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # convergence notes of single fits
        res = fit_law(
            LAW,
            df[~df["held"]],
            FitOptions(
                starts=StartOptions(given=[{"A": 30.0, "E": 1.5, "alpha": 0.25}]),
                bootstrap=BootstrapOptions(resamples=20, scheme="parametric", calibrate=True),
                seed=seed,
            ),
        )
    return res, df[df["held"]]


def _coverage(bend: float) -> dict[str, tuple[float, float]]:
    """Per method: share of held-out points inside the 95 % prediction interval, mean log-width."""
    inside: dict[str, list[np.ndarray]] = {"bootstrap": [], "calibrated": [], "auto": []}
    width: dict[str, list[np.ndarray]] = {k: [] for k in inside}
    for seed in SEEDS:
        res, held = _fit(seed, bend)
        x, obs = inputs_of(res, held), held["loss"].to_numpy()
        for method in inside:
            b = band(res, x, level=0.95, kind="prediction", method=method)  # type: ignore[arg-type]
            assert b is not None
            inside[method].append((b.lo <= obs) & (obs <= b.hi))
            width[method].append(np.log(b.hi / b.lo))
            if method == "auto":  # a calibrated fit's default prediction interval, saying how it was built
                assert b.method == "calibrated" and b.calibration is not None and "nested fits" in b.calibration
    return {m: (float(np.concatenate(inside[m]).mean()), float(np.concatenate(width[m]).mean())) for m in inside}


@pytest.fixture(scope="module")
def bent() -> dict[str, tuple[float, float]]:
    return _coverage(0.05)


@pytest.fixture(scope="module")
def straight() -> dict[str, tuple[float, float]]:
    return _coverage(0.0)


def test_calibrated_interval_covers_a_misspecification_that_grows_with_size(bent: dict) -> None:
    boot, cal = bent["bootstrap"][0], bent["calibrated"][0]
    assert boot <= 0.25, bent  # the bootstrap describes interpolation: it misses the bend beyond the data
    assert cal >= 0.75 and cal >= boot + 0.5, bent
    assert bent["auto"] == bent["calibrated"]  # the default for prediction intervals of a calibrated fit


def test_calibration_widens_well_specified_intervals_little(straight: dict) -> None:
    (boot, w_boot), (cal, w_cal) = straight["bootstrap"], straight["calibrated"]
    assert boot >= 0.85 and cal >= boot
    assert 1.0 <= w_cal / w_boot <= 1.25, straight  # never narrower than the bootstrap, and at most ~20 % wider


def test_calibration_travels_with_the_fit_json_and_says_how_it_was_built() -> None:
    res, held = _fit(0, 0.05)
    again = FitResult.from_dict(res.to_dict())
    x = inputs_of(res, held)
    a = band(res, x, level=0.9, kind="prediction", method="calibrated")
    b = band(again, x, level=0.9, kind="prediction", method="calibrated")
    assert a is not None and b is not None
    np.testing.assert_allclose(a.lo, b.lo)
    np.testing.assert_allclose(a.hi, b.hi)
    cal = Calibration.from_dict(res.calibration or {})
    assert cal.n_forward >= 2 and cal.n_folds > cal.n_forward and cal.growth > 0
    assert cal.factor(0.0) >= 1.0 and cal.factor(2.0) > cal.factor(1.0)
    xin = inputs_of(res, pd.DataFrame({"n_params": [1e9]}))  # inside the fitted range: widened by max(1, c) only
    auto = band(res, xin, kind="prediction", method="auto")
    boot = band(res, xin, kind="prediction", method="bootstrap")
    assert auto is not None and boot is not None and auto.method == "calibrated"
    ratio = np.log(auto.hi / auto.lo) / np.log(boot.hi / boot.lo)
    np.testing.assert_allclose(ratio, max(1.0, cal.inflation), rtol=1e-9)
