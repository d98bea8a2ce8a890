"""``mix compare``'s size calibration where the fold fits' delta-method standard errors overflow
(:mod:`mixlaw.decide.mixture.size_folds`): the overflowing Jacobian columns dropped.

CAMEL on SlimPajama (fitted 122M-937M) ends on the ridge ``K_1 → 0``, ``α_1 → ∞``: ``K_1`` is subnormal, reverse
mode puts ``inf`` in the ``log K_1`` column, every nested fit's standard error was NaN, and the calibration did not
widen the interval at all. Simulated rows, known parameters; a few seconds.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.size_folds import repaired_calibration, repaired_delta_sd
from mixlaw.fit import fit_law
from mixlaw.fit.calib_delta import delta_sd
from mixlaw.fit.calibrate import calibrate
from mixlaw.fit.data import FitData
from mixlaw.laws import get_law

DOMS = "web,code,math"


def _camel_rows(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(3, 0.8), size=10)
    rows = []
    for i, r in enumerate(w):
        for n in (5e7, 1.5e8, 4e8, 1.2e9):
            rows.append({"run_id": f"m{i}_{n:.0e}", "n_params": n, "w_web": r[0], "w_code": r[1], "w_math": r[2]})
    return pd.DataFrame(rows)


def _camel_params(log_k1: float, alpha1: float) -> dict[str, object]:
    law = get_law("camel", domains=DOMS)
    p = dict(law.example_params)
    return p | {"K_1": math.exp(log_k1), "alpha_1": alpha1, "t_1": [1 / 3, 1 / 3, 1 / 3]}


def test_repaired_delta_sd_is_the_delta_method_where_the_jacobian_overflows() -> None:
    """On the ridge (``K_1 = e^-735`` subnormal, ``α_1 = 669``, a uniform loading, so ``K_1 <t_1, r>^-α_1`` is the
    constant ``e^-0.05``) the plain delta method is NaN everywhere; the repaired one equals the delta method of the
    same predictions written with a normal ``K_1`` and ``α_1 = 1`` (the same column space of the Jacobian)."""
    law = get_law("camel", domains=DOMS)
    df = _camel_rows(0)
    ridge = _camel_params(-735.0, 669.0)
    alpha_eq = 1.0
    normal = _camel_params(-735.0 + (669.0 - alpha_eq) * math.log(3.0), alpha_eq)
    pred_r = np.asarray(law.evaluate({c: df[c].to_numpy() for c in law.inputs}, ridge), dtype=np.float64)
    pred_n = np.asarray(law.evaluate({c: df[c].to_numpy() for c in law.inputs}, normal), dtype=np.float64)
    np.testing.assert_allclose(pred_r, pred_n, rtol=1e-4)  # K_1 subnormal: ~4 digits
    rng = np.random.default_rng(1)
    df["loss"] = pred_r * np.exp(0.004 * rng.standard_normal(len(df)))
    data = FitData(law, df, target="loss", group_column="run_id")
    y = np.log(data.y)
    fit = df["n_params"].to_numpy() < 1e9
    flat_r = np.asarray(law.flatten(ridge), dtype=np.float64)
    flat_n = np.asarray(law.flatten(normal), dtype=np.float64)
    assert np.isnan(delta_sd(law, data, flat_r, fit, y)).all()  # the failure the calibration hit
    want = delta_sd(law, data, flat_n, fit, y)
    got = repaired_delta_sd(law, data, flat_r, fit, y)
    assert np.isfinite(want).all() and np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-3)  # K_1 subnormal: ~4 digits in the predictions
    np.testing.assert_allclose(repaired_delta_sd(law, data, flat_n, fit, y), want, rtol=1e-6)  # finite J: same


def _bent_power_table(seed: int) -> pd.DataFrame:
    """``tests/test_calib_mixture.py``'s table: a power law whose truth bends over 1e8-1e11 (0.05·t²)."""
    law = get_law("power_law", input="n_params")
    rng = np.random.default_rng(seed)
    n = np.repeat(np.geomspace(1e8, 1e11, 8), 3)
    y = np.asarray(law.evaluate({"n_params": n}, {"A": 40.0, "E": 2.0, "alpha": 0.3}), dtype=np.float64)
    t = np.log(n / 1e8) / np.log(1e11 / 1e8)
    y = y * np.exp(0.05 * t**2 + 0.005 * rng.standard_normal(n.size))
    return pd.DataFrame({"n_params": n, "loss": y, "run_id": [f"r{i}" for i in range(n.size)]})


def test_repaired_calibration_reproduces_the_calibration_where_it_was_defined() -> None:
    """Where the delta method is finite the repaired folds are the calibration's own: the same inflation and growth
    (a bent power law whose extrapolation bias the bootstrap misses: growth well above 0); it is not used there."""
    law = get_law("power_law", input="n_params")
    df = _bent_power_table(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(law, df, random_state=0, starts=[{"A": 30.0, "E": 1.5, "alpha": 0.25}])
        data = FitData(law, df, target="loss", input_map=res.input_map, group_column="run_id")
        clusters = pd.factorize(df["n_params"].to_numpy())[0]
        seeds = np.asarray(law.to_internal(res.params), dtype=np.float64)[None, :]
        kw = {"loss": res.loss, "delta": res.delta, "max_iter": 300}
        cal = calibrate(law, data, res.params, seeds, size_input="n_params", clusters=clusters,
                        rng=np.random.default_rng([0, 2]), **kw)  # fmt: skip
        assert cal is not None and cal.n_scores > 0 and cal.growth > 0.5
        again = repaired_calibration(law, data, cal, seeds, size_input="n_params", clusters=clusters, seed=0, **kw)
        assert again is None  # no more errors standardised than the calibration's own: not used
        fixed = repaired_calibration(
            law, data, replace(cal, n_scores=0), seeds, size_input="n_params", clusters=clusters, seed=0, **kw
        )
    assert fixed is not None and fixed.n_scores == cal.n_scores and fixed.n_growth == cal.n_growth
    assert math.isclose(fixed.inflation, cal.inflation, rel_tol=1e-6)
    assert math.isclose(fixed.growth, cal.growth, rel_tol=1e-6)
    assert fixed.method == "calibrated (Jacobian repaired)"
