"""The delta-method standard error of the calibrations' nested fits (:func:`mixlaw.fit.evaluate.calib_delta.delta_sd`)
where
reverse mode overflows: the overflowing Jacobian columns dropped, not the whole answer.

CAMEL on SlimPajama (fitted 122M-937M) ends on the ridge ``K_1 → 0``, ``α_1 → ∞``: ``K_1`` is subnormal, reverse
mode puts ``inf`` in the ``log K_1`` column, and every nested fit's standard error used to be NaN, so the size
calibration of ``mix compare`` standardised none of its errors and did not widen the interval at all. Simulated
rows, known parameters; a few seconds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import torch

from mixlaw.fit.evaluate.calib_delta import delta_sd
from mixlaw.fit.problem.data import FitData
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


def _classical_sd(law: Any, data: FitData, flat: np.ndarray, fit: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``sqrt(σ̂² (1 + gᵀ (JᵀJ)⁻¹ g))`` written out, for a full-rank, finite Jacobian."""
    u0 = torch.as_tensor(law.to_internal(law.unflatten(flat)), dtype=torch.float64)
    xt = {k: torch.tensor(np.array(v, dtype=np.float64)) for k, v in data.x_np.items()}

    def f(u: torch.Tensor) -> torch.Tensor:
        return law.log_predict(xt, law.to_natural(u[None, :])).reshape(-1)

    J = np.asarray(torch.autograd.functional.jacobian(f, u0), dtype=np.float64).reshape(data.n, -1)
    with torch.no_grad():
        r = np.asarray(f(u0), dtype=np.float64)[fit] - y[fit]
    s2 = float(r @ r) / (int(fit.sum()) - u0.numel())
    cov = np.linalg.inv(J[fit].T @ J[fit])
    return np.sqrt(s2 * (1.0 + np.einsum("ip,pq,iq->i", J, cov, J)))


def test_delta_sd_where_the_jacobian_overflows_is_the_delta_method_of_the_same_predictions() -> None:
    """On the ridge (``K_1 = e^-735`` subnormal, ``α_1 = 669``, a uniform loading, so ``K_1 <t_1, r>^-α_1`` is the
    constant ``e^-0.05``) the Jacobian has an ``inf`` column; the standard error equals that of the same predictions
    written with a normal ``K_1`` and ``α_1 = 1`` (the same column space), and is finite on every row."""
    law = get_law("camel", domains=DOMS)
    df = _camel_rows(0)
    ridge = _camel_params(-735.0, 669.0)
    alpha_eq = 1.0
    normal = _camel_params(-735.0 + (669.0 - alpha_eq) * math.log(3.0), alpha_eq)
    cols = {c: df[c].to_numpy() for c in law.inputs}
    pred_r = np.asarray(law.evaluate(cols, ridge), dtype=np.float64)
    np.testing.assert_allclose(pred_r, np.asarray(law.evaluate(cols, normal), dtype=np.float64), rtol=1e-4)
    rng = np.random.default_rng(1)
    df["loss"] = pred_r * np.exp(0.004 * rng.standard_normal(len(df)))
    data = FitData(law, df, target="loss", group_column="run_id")
    y = np.log(data.y)
    fit = df["n_params"].to_numpy() < 1e9
    flat_r = np.asarray(law.flatten(ridge), dtype=np.float64)
    flat_n = np.asarray(law.flatten(normal), dtype=np.float64)
    got = delta_sd(law, data, flat_r, fit, y)
    want = delta_sd(law, data, flat_n, fit, y)
    assert np.isfinite(got).all() and np.isfinite(want).all()  # was NaN on every row
    np.testing.assert_allclose(got, want, rtol=1e-3)  # K_1 subnormal: ~4 digits in the predictions


def test_delta_sd_with_a_finite_full_rank_jacobian_is_the_classical_prediction_error() -> None:
    """Away from any overflow the unit-scaled columns change nothing: the classical formula, written out."""
    law = get_law("camel", domains=DOMS)
    df = _camel_rows(2)
    p = dict(law.example_params)
    cols = {c: df[c].to_numpy() for c in law.inputs}
    rng = np.random.default_rng(3)
    df["loss"] = np.asarray(law.evaluate(cols, p), dtype=np.float64) * np.exp(0.01 * rng.standard_normal(len(df)))
    data = FitData(law, df, target="loss", group_column="run_id")
    y = np.log(data.y)
    fit = df["n_params"].to_numpy() < 1e9
    flat = np.asarray(law.flatten(p), dtype=np.float64)
    np.testing.assert_allclose(delta_sd(law, data, flat, fit, y), _classical_sd(law, data, flat, fit, y), rtol=1e-6)
