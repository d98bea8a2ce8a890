"""The calibration's own check on extrapolation: a refit without the largest fitted size predicts it; when it misses
by much more than the in-sample noise, the fit warns that intervals for extrapolation are unreliable."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from mixlaw.fit import fit_batch
from mixlaw.fit.evaluate.calibrate import RELIABLE_RATIO, Calibration, calibrate
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.uncertainty.intervals import quantiles
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions


def _curves(bend: float, seed: int) -> pd.DataFrame:
    """``power_law`` over 8 token values × 4 repeats, 0.5 % noise; ``bend`` adds a log-quadratic term that only
    the largest values feel (a law that is wrong beyond the middle of the data)."""
    law = get_law("power_law")
    rng = np.random.default_rng(seed)
    x = np.repeat(np.geomspace(1e8, 1e11, 8), 4)
    y = np.asarray(law.evaluate({"tokens": x}, {"A": 40.0, "E": 2.0, "alpha": 0.3}), dtype=np.float64)
    t = np.log(x / 1e9) / np.log(1e11 / 1e9)
    y = y * np.exp(bend * np.clip(t, 0, None) ** 2 + 0.005 * rng.standard_normal(x.size))
    return pd.DataFrame({"tokens": x, "loss": y, "run_id": np.arange(x.size)})


def _calibration(df: pd.DataFrame) -> Calibration:
    law = get_law("power_law")
    data = FitData(law, df, group_column=None)
    start = {"A": 30.0, "E": 1.5, "alpha": 0.25}  # away from the truth
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # torch's read-only-array note on shared starts
        point = fit_batch(law, df, df["loss"].to_numpy()[None, :], starts=[start], max_iter=2000)
    params = point.row(0)
    assert params is not None
    seeds = law.to_internal(params)[None, :]
    cal = calibrate(law, data, params, seeds, clusters=pd.factorize(df["tokens"])[0], rng=np.random.default_rng(0))
    assert cal is not None
    return cal


def test_a_law_that_bends_beyond_the_middle_of_the_data_warns() -> None:
    good, bent = _calibration(_curves(0.0, 1)), _calibration(_curves(0.04, 1))
    assert good.forward_ratio < RELIABLE_RATIO and good.warnings == []
    assert bent.forward_ratio > RELIABLE_RATIO, bent.forward_ratio
    assert len(bent.warnings) == 1 and "unreliable" in bent.warnings[0] and "tokens" in bent.warnings[0]
    again = Calibration.from_dict(bent.to_dict())  # the warning travels with the fit JSON
    assert again.warnings == bent.warnings and again.forward_ratio == bent.forward_ratio


def test_student_t_noise_widens_small_sample_prediction_intervals() -> None:
    law = get_law("power_law")
    draws = np.array([[40.0, 2.0, 0.3]])
    x = {"tokens": np.array([1e9])}
    gauss = quantiles(law, draws, x, level=0.95, kind="prediction", sd=0.01)
    t1 = quantiles(law, draws, x, level=0.95, kind="prediction", sd=0.01, dof=1)
    t100 = quantiles(law, draws, x, level=0.95, kind="prediction", sd=0.01, dof=100)
    assert gauss is not None and t1 is not None and t100 is not None
    w = {k: float(np.log(q[1, 0] / q[0, 0])) for k, q in (("g", gauss), ("t1", t1), ("t100", t100))}
    assert abs(w["g"] / 2 / 0.01 - 1.96) < 0.1  # 4000 noise draws
    assert w["t1"] / 2 / 0.01 > 8.0  # t_1's 97.5 % quantile is 12.7
    assert abs(w["t100"] / w["g"] - 1.984 / 1.960) < 0.06


def test_a_confidence_interval_that_extrapolates_says_what_it_leaves_out() -> None:
    """``predict`` with the default confidence interval beyond the fitted range of a calibrated fit: a note that it is
    the parameter spread only, beside the extrapolation-calibrated prediction interval; nothing inside the range or
    when the prediction interval is asked for."""
    from mixlaw.fit import fit_law
    from mixlaw.fit.predict import predict_point, predict_rows

    df = _curves(0.04, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # boundary and extrapolation notes of the bent law
        res = fit_law(
            "power_law",
            df,
            FitOptions(bootstrap=BootstrapOptions(resamples=40, calibrate=True, size_column="tokens"), seed=0),
        )
    assert res.calibration is not None
    far = predict_point(res, {"tokens": 1e12})
    assert "confidence interval is the parameter spread only" in far["confidence_note"]
    assert far["prediction_lo"] < far["lo"] <= far["hi"] < far["prediction_hi"]
    assert "confidence_note" not in predict_point(res, {"tokens": 3e10})
    assert "confidence_note" not in predict_point(res, {"tokens": 1e12}, interval="prediction")
    rows = predict_rows(res, pd.DataFrame({"tokens": [3e10, 1e12, 3e12]}))
    assert rows["confidence_note"].startswith("note: 2 of 3 rows extrapolate")
