"""Prediction intervals of the RegMix surrogate in ``mix compare``: the GP's predictive sd, cross-conformal for
LightGBM and OLS — from the training runs only, covering held-out mixtures at about their level."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mixlaw.api.mixture import compare
from mixlaw.surrogates import RegMix
from mixlaw.surrogates.intervals import _conformal_quantile, surrogate_interval

DOMS = ("a", "b", "c", "d")
NOISE = 0.004


def _simulated(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(4, 0.8), size=n)
    loss = 2.0 + 0.3 * np.exp(-4 * w[:, 0]) + 0.2 / (0.05 + w[:, 1]) ** 0.3 - 0.1 * w[:, 2] * w[:, 3]
    df = pd.DataFrame({f"w_{d}": w[:, j] for j, d in enumerate(DOMS)})
    df["loss"] = loss + NOISE * rng.standard_normal(n)
    df["run_id"] = [f"s{seed}r{i}" for i in range(n)]
    df["n_params"] = 1e8
    return df


def test_conformal_quantile_is_the_finite_sample_rank() -> None:
    r = np.arange(1.0, 20.0)  # 19 residuals: ⌈20 · 0.95⌉ = 19 → the largest
    assert _conformal_quantile(r, 0.95) == 19.0
    assert _conformal_quantile(r, 0.5) == 10.0  # ⌈20 · 0.5⌉ = 10
    assert math.isinf(_conformal_quantile(np.arange(1.0, 11.0), 0.95))  # 10 rows cannot give 95 %


@pytest.mark.parametrize("backend", ["linear", "gp"])
def test_intervals_never_read_the_test_rows_observed_values(backend: str) -> None:
    if backend == "gp":
        pytest.importorskip("sklearn")
    train, test = _simulated(60, 1), _simulated(20, 2)
    spec = RegMix(DOMS, backend=backend)
    a = surrogate_interval(spec, train, test, "loss", DOMS, level=0.9, seed=0)
    b = surrogate_interval(spec, train, test.assign(loss=test["loss"] + 5.0), "loss", DOMS, level=0.9, seed=0)
    for x, y in zip(a[:3], b[:3], strict=True):
        np.testing.assert_array_equal(x, y)
    pred, lo, hi, info = a
    assert (lo < pred).all() and (pred < hi).all()
    assert info["method"] == ("gp predictive sd" if backend == "gp" else "cross-conformal")


@pytest.mark.parametrize(
    ("model", "need"),
    [
        ("regmix:backend=linear", None),
        ("regmix:backend=gp", "sklearn"),
        ("regmix:min_leaf=5;rounds=200;learning_rate=0.05", "lightgbm"),
    ],
)
def test_regmix_intervals_cover_held_out_mixtures_in_compare(model: str, need: str | None) -> None:
    if need:
        pytest.importorskip(need)
    df = _simulated(80, 3)
    out = compare(df, domains=DOMS, targets=["loss"], holdout="mixtures:4", models=f"{model},blind", bootstrap=1)
    r, blind = out["targets"][0]["models"]
    assert r["n_predicted"] == 80
    lo, hi, pred, obs = (np.array([p[k] for p in r["predictions"]]) for k in ("lo", "hi", "predicted", "observed"))
    assert np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < pred).all() and (pred < hi).all()
    assert r["coverage"] == pytest.approx(np.mean((lo <= obs) & (obs <= hi)))
    # 80 held-out runs at nominal 95 %: under 85 % is a broken interval (binomial p < 1e-3).
    assert 0.85 <= r["coverage"] <= 1.0, r["coverage"]
    half = np.median((hi - lo) / 2)
    assert half > 1.5 * NOISE  # at least the noise ...
    blind_half = np.median([(p["hi"] - p["lo"]) / 2 for p in blind["predictions"]])
    assert half < blind_half  # ... and narrower than knowing nothing about the mixture


def test_bootstrap_zero_gives_no_regmix_interval() -> None:
    out = compare(_simulated(40, 4), domains=DOMS, targets=["loss"], holdout="mixtures:2",
                  models="regmix:backend=linear", bootstrap=0)  # fmt: skip
    r = out["targets"][0]["models"][0]
    assert math.isnan(r["coverage"]) and all(math.isnan(p["lo"]) for p in r["predictions"])
