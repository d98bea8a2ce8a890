"""Extrapolation-calibrated intervals along every axis a prediction extrapolates
(:mod:`mixlaw.fit.evaluate.calib_axes`).

The Chinchilla law is fitted on 5 sizes (1e8-3e9) trained at 4-40 tokens per parameter, and predicts the *same*
sizes at 160 and 320 tokens per parameter (held out): the queries lie inside the fitted range of ``n_params``, so a
calibration along size alone sees no extrapolation. With a known misspecification growing with the token
multiplier (``exp(b · log(r / 4)²)``), the bootstrap interval misses the held-out runs; the nested fits that hold out
the far end of the token-multiplier, token and compute axes measure the error growth, and the calibrated interval
covers most of them. On well-specified data it widens little. Seeded, starts away from the truth; a few seconds.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.fit import fit_law
from mixlaw.fit.evaluate.calib_axes import axis_distance, fit_axes
from mixlaw.fit.evaluate.calibrate import Calibration
from mixlaw.fit.result import FitResult
from mixlaw.fit.uncertainty.intervals import band, inputs_of
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

LAW = get_law("chinchilla")
TRUE = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 410.0, "beta": 0.28}
START = [{"E": 2.0, "A": 300.0, "alpha": 0.3, "B": 300.0, "beta": 0.3}]
SEEDS = range(3)


def _table(seed: int, bend: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ratios = np.concatenate([np.geomspace(4, 40, 5), [160.0, 320.0]])
    n, r = (a.ravel() for a in np.meshgrid(np.geomspace(1e8, 3e9, 5), ratios, indexing="ij"))
    y = np.asarray(LAW.evaluate({"n_params": n, "tokens": r * n}, TRUE), dtype=np.float64)
    y = y * np.exp(bend * np.log(r / 4) ** 2 + 0.003 * rng.standard_normal(n.size))
    return pd.DataFrame({"n_params": n, "tokens": r * n, "loss": y, "run_id": np.arange(n.size), "held": r > 50})


def _fit(seed: int, bend: float) -> tuple[FitResult, pd.DataFrame]:
    df = _table(seed, bend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # convergence notes of single fits
        res = fit_law(
            LAW,
            df[~df["held"]],
            FitOptions(
                starts=StartOptions(given=START),
                bootstrap=BootstrapOptions(resamples=20, scheme="parametric", calibrate=True),
                seed=seed,
            ),
        )
    return res, df[df["held"]]


def _coverage(bend: float) -> dict[str, tuple[float, float]]:
    """Per method: share of held-out points inside the 95 % prediction interval, mean log-width; ``size only``: the
    calibration along the size axis alone (what the interval was before the other axes)."""
    inside: dict[str, list[np.ndarray]] = {"bootstrap": [], "calibrated": [], "size only": []}
    width: dict[str, list[np.ndarray]] = {k: [] for k in inside}
    for seed in SEEDS:
        res, held = _fit(seed, bend)
        x, obs = inputs_of(res, held), held["loss"].to_numpy()
        cal = Calibration.from_dict(res.calibration or {})
        assert cal.axis == "n_params" and not cal.distance(x, len(obs)).any()  # inside the fitted sizes
        assert cal.beyond(x, len(obs)).all() and "tokens_per_param" in cal.far_axes(x, len(obs))
        for method in ("bootstrap", "calibrated"):
            b = band(res, x, level=0.95, kind="prediction", method=method)  # type: ignore[arg-type]
            assert b is not None
            inside[method].append((b.lo <= obs) & (obs <= b.hi))
            width[method].append(np.log(b.hi / b.lo))
        old = Calibration.from_dict({**(res.calibration or {}), "axes": []})  # the size axis alone
        boot = band(res, x, level=0.95, kind="prediction", method="bootstrap")
        assert boot is not None
        f = old.factor(old.distance(x, len(obs)))
        c = np.sqrt(boot.lo * boot.hi)
        lo, hi = c * (boot.lo / c) ** f, c * (boot.hi / c) ** f
        inside["size only"].append((lo <= obs) & (obs <= hi))
        width["size only"].append(np.log(hi / lo))
    return {m: (float(np.concatenate(inside[m]).mean()), float(np.concatenate(width[m]).mean())) for m in inside}


@pytest.fixture(scope="module")
def bent() -> dict[str, tuple[float, float]]:
    return _coverage(0.004)


@pytest.fixture(scope="module")
def straight() -> dict[str, tuple[float, float]]:
    return _coverage(0.0)


def test_the_interval_widens_along_the_token_multiplier_where_the_size_calibration_sees_nothing(bent: dict) -> None:
    boot, cal, size_only = bent["bootstrap"][0], bent["calibrated"][0], bent["size only"][0]
    assert boot <= 0.1 and size_only <= 0.2, bent  # inside the fitted sizes: no widening along size
    assert cal >= 0.45 and cal >= size_only + 0.4, bent  # 55 %: a bend that accelerates beyond the data
    assert bent["calibrated"][1] <= 0.15, bent  # not wider than the held-out losses spread (about 0.5 in log)


def test_well_specified_data_are_widened_little(straight: dict) -> None:
    (boot, w_boot), (cal, w_cal) = straight["bootstrap"], straight["calibrated"]
    assert boot >= 0.8 and cal >= boot
    assert 1.0 <= w_cal / w_boot <= 3.0, straight


def test_axes_travel_with_the_fit_json_and_say_how_the_interval_was_built() -> None:
    res, held = _fit(0, 0.004)
    cal = Calibration.from_dict(FitResult.from_dict(res.to_dict()).calibration or {})
    names = [a.name for a in cal.axes]
    assert names[0] == "n_params" and {"compute", "tokens_per_param", "tokens"} <= set(names)
    assert cal.axes[0].term == "ratio" and all(a.term == "additive" for a in cal.axes[1:])
    assert max(a.growth for a in cal.axes[1:]) > 0 and all(a.n_cuts >= 1 for a in cal.axes[1:])
    b = band(res, inputs_of(res, held), level=0.95, kind="prediction")
    assert b is not None and b.calibration is not None and "beyond the fitted tokens_per_param range" in b.calibration


def test_axes_of_a_law_and_their_distances() -> None:
    rng = np.random.default_rng(0)
    x = {"n_params": rng.uniform(1e8, 1e9, 30), "unique_tokens": rng.uniform(1e9, 1e10, 30)}
    x["tokens"] = x["unique_tokens"] * rng.choice([1.0, 2.0, 4.0], 30)
    names = [a.name for a in fit_axes(("n_params", "tokens", "unique_tokens"), x, "n_params")]
    assert names == ["n_params", "compute", "epochs", "tokens_per_param", "tokens", "unique_tokens"]
    fixed = {"n_params": np.geomspace(1e8, 1e9, 5), "tokens": 20 * np.geomspace(1e8, 1e9, 5)}
    assert "tokens" not in [a.name for a in fit_axes(("n_params", "tokens"), fixed, "n_params")]  # tokens = 20 N
    np.testing.assert_allclose(axis_distance("log", np.array([0.5, 2.0, 8.0]), 1.0, 4.0), [np.log(2), 0, np.log(2)])
    np.testing.assert_allclose(axis_distance("share", np.array([0.0, 0.5, 0.9]), 0.2, 0.6), [0.2, 0.0, 0.3])
