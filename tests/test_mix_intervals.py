"""Every mixture law in ``mix compare`` carries a prediction interval: the engine's bootstrap over training runs gives
``lo``/``hi`` and a ``coverage`` for bimix, mixture_additive, mixture_joint, repetition_aware and camel as for dml.

Measured on SlimPajama leave-mixtures-out at 310M (60 mixtures, 5 folds, OpenHermes loss, ``--bootstrap 50``) when
written, coverage of the 95 % interval / median relative half-width: dml 96.7 % / 1.8 %, bimix:volume=none 96.7 % /
2.4 %, regmix GP 88.3 % / 0.7 %, regmix OLS (cross-conformal) 95.0 % / 2.2 %, regmix LightGBM min_leaf=5
(cross-conformal) 96.7 % / 2.6 %; camel (k = 2) has an interval on only 36 of the 60 rows (the others' folds left
too few usable resamples), covering 88.9 % of them at 1.0 % half-width. On this file's simulated runs, by hand:
camel and mixture_additive pass the test below; mixture_joint has finite intervals on every row, but on some rows the
point prediction lies outside its percentile interval (the bootstrap distribution of 17 parameters from 20 runs is
off-centre) — not fixed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.api.mixture import compare
from mixlaw.laws import get_law

NOISE = 0.01


def _simulated(name: str, n: int, seed: int) -> tuple[pd.DataFrame, list[str]]:
    """``n`` runs of law ``name`` at its example parameters, log-normal noise ``NOISE``; its mixture domains."""
    law = get_law(name)
    rng = np.random.default_rng(seed)
    x = law.example_inputs(n, rng)
    y = np.asarray(law.evaluate(x, law.example_params)) * np.exp(NOISE * rng.standard_normal(n))
    df = pd.DataFrame(x).assign(loss=y, run_id=[f"r{i}" for i in range(n)])
    doms = [c.removeprefix("w_") for c in df.columns if c.startswith("w_")]
    if len(doms) == 1:  # repetition_aware: the target share and the generic rest
        df["w_generic"] = 1.0 - df[f"w_{doms[0]}"]
        doms.append("generic")
    w = df[[f"w_{d}" for d in doms]].to_numpy()
    df[[f"w_{d}" for d in doms]] = w / w.sum(axis=1, keepdims=True)
    if "n_params" not in df:
        df["n_params"] = 1e8  # a law of the mixture alone is fitted per size
    return df, doms


# camel, mixture_additive and mixture_joint (11, 11 and 17 parameters) take 1-4 minutes each here under a bootstrap
# on a loaded 2-core machine: measured by hand, not in CI (module docstring).
@pytest.mark.parametrize("name", ["bimix", "repetition_aware"])
def test_every_new_mixture_law_has_prediction_intervals_in_compare(name: str) -> None:
    df, doms = _simulated(name, 40, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # boundary notes of small fits
        out = compare(df, domains=doms, targets=["loss"], holdout="mixtures:2", models=name, bootstrap=8)
    (r,) = out["targets"][0]["models"]
    assert r["n_predicted"] == 40
    lo, hi, pred, obs = (np.array([p[k] for p in r["predictions"]]) for k in ("lo", "hi", "predicted", "observed"))
    assert np.isfinite(lo).all() and np.isfinite(hi).all(), name
    assert (lo < pred).all() and (pred < hi).all()
    assert r["coverage"] == pytest.approx(np.mean((lo <= obs) & (obs <= hi)))
    assert r["coverage"] >= 0.7, r["coverage"]  # 40 points at nominal 95 %; 8 resamples make it rough
    rel_half = np.median((hi - lo) / 2 / pred)
    assert NOISE < rel_half < 10 * NOISE, rel_half  # about the noise: ±2σ, not orders of magnitude off
