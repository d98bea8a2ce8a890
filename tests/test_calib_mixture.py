"""``mix compare``'s intervals when the holdout extrapolates in size (:func:`mixlaw.decide.mixture.intervals
.size_calibrated`): the BC bootstrap interval widened by the extrapolation calibration of the fit.

A power law in size fitted to 8 sizes (1e8-1e11, 3 runs each, 0.5 % noise) whose truth bends over the fitted range
(a log-quadratic 0.05·t², as in ``tests/test_calib_extrapolation.py``) predicts 3 larger sizes: the BC interval
misses them, the size-calibrated one covers most, and contains its point. Seeded; a few seconds.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.intervals import extrapolates, prediction_interval, size_calibrated
from mixlaw.fit import fit_law
from mixlaw.fit.uncertainty.intervals import inputs_of
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

LAW = get_law("power_law", input="n_params")


def _table(seed: int, bend: float = 0.05) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = np.repeat(np.concatenate([np.geomspace(1e8, 1e11, 8), [2e11, 5e11, 1e12]]), 3)
    y = np.asarray(LAW.evaluate({"n_params": n}, {"A": 40.0, "E": 2.0, "alpha": 0.3}), dtype=np.float64)
    t = np.log(n / 1e8) / np.log(1e11 / 1e8)
    y = y * np.exp(bend * t**2 + 0.005 * rng.standard_normal(n.size))
    return pd.DataFrame({"n_params": n, "loss": y, "run_id": [f"r{i}" for i in range(n.size)], "held": n > 1.5e11})


def test_size_calibrated_mixture_intervals_cover_larger_sizes_the_bc_interval_misses() -> None:
    inside_bc, inside_cal = [], []
    for seed in range(4):
        df = _table(seed)
        train, test = df[~df["held"]], df[df["held"]]
        assert extrapolates(train, test, "n_params") and not extrapolates(train, train, "n_params")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            res = fit_law(
                LAW,
                train,
                FitOptions(
                    starts=StartOptions(given=[{"A": 30.0, "E": 1.5, "alpha": 0.25}]),
                    bootstrap=BootstrapOptions(resamples=20, scheme="parametric"),
                    seed=seed,
                ),
            )
        lo, hi, _, reason = prediction_interval(res, inputs_of(res, test), 0.95, seed)
        assert reason is None
        lo2, hi2, line = size_calibrated(res, train, test, "loss", "n_params", lo, hi, seed)
        assert "nested size cuts" in line
        pred = res.predict(test)
        assert np.all(lo2 <= lo) and np.all(hi2 >= hi) and np.all((lo2 <= pred) & (pred <= hi2))
        obs = test["loss"].to_numpy()
        inside_bc.append((lo <= obs) & (obs <= hi))
        inside_cal.append((lo2 <= obs) & (obs <= hi2))
    bc, cal = float(np.concatenate(inside_bc).mean()), float(np.concatenate(inside_cal).mean())
    assert bc <= 0.3 and cal >= 0.7, (bc, cal)


def _folds(seed: int, bend: float) -> tuple[Any, np.ndarray]:
    """The nested refits of a power-law fit on the 8 fitted sizes of :func:`_table` (truth bent by ``bend``)."""
    from mixlaw.fit.evaluate.calibrate import fold_errors
    from mixlaw.fit.problem.data import FitData

    df = _table(seed, bend)
    train = df[~df["held"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(
            LAW, train, FitOptions(starts=StartOptions(given=[{"A": 30.0, "E": 1.5, "alpha": 0.25}]), seed=seed)
        )
    data = FitData(LAW, train, target="loss", input_map=res.input_map, group_column="run_id")
    fe = fold_errors(
        LAW, data, np.asarray(LAW.to_internal(res.params))[None, :], size_input="n_params",
        clusters=pd.factorize(train["n_params"])[0], rng=np.random.default_rng([seed, 2]), loss=res.loss,
        delta=res.delta,
    )  # fmt: skip
    v = train["n_params"].to_numpy(dtype=np.float64)
    return fe, v[fe.rows] > np.median(v)


def test_size_excess_reads_the_misfit_beyond_the_same_end() -> None:
    """The additive excess of the size intervals: larger when the truth bends away from the law than when the law is
    right, and read from the nested fits that extrapolate to larger sizes only (a fit left without its smallest size
    diverges below it on seed 3 with the bend: it must not widen the interval at larger sizes)."""
    from mixlaw.fit.evaluate.calib_growth import size_excess

    right, bent = [], []
    for seed in (0, 3):
        fe, above = _folds(seed, 0.0)
        right.append(size_excess(fe, above)[0])
        fe, above = _folds(seed, 0.05)
        k2_up, n_up = size_excess(fe, above)
        bent.append(k2_up)
        assert n_up >= 3  # the forward cuts and the K-fold leaving out the largest size
        if seed == 3:
            k2_down, _ = size_excess(fe, ~above)
            assert k2_down > 1.0 > 100 * k2_up  # e^20 below the fitted sizes; a few % per e-fold above
    assert all(b > 4 * r for b, r in zip(bent, right, strict=True)), (bent, right)
    assert max(right) < 1e-3  # the right law: at most ~3 % (z · sqrt(κ²)) per sqrt(e-fold)
