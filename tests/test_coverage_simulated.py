"""Simulated coverage for every registered law: known truth, known noise, 95 % prediction intervals.

For each law (``mixlaw laws``): ``R`` seeded replicates of ``n`` noisy observations of the law's example truth
(``law.example_params``) at inputs drawn by the law's own generic simulator (``law.example_inputs``: its declared
inputs over their plausible ranges, schedule features included), plus one new point from the same simulator that
no replicate is fitted on. Every replicate is fitted in one batched solve (:func:`mixlaw.fit.fit_batch`, started
30 % away from the truth in internal coordinates); its parametric bootstrap (``B`` resamples ``fitted + σ̂ z``, the
tool's ``--resample parametric``) is refitted in a second batched solve, and the tool's 95 % bootstrap prediction
interval (:func:`mixlaw.fit.uncertainty.intervals.quantiles`, the method behind
``--interval prediction --method bootstrap``,
with its Student-t noise of ``n − p`` degrees of freedom) at the new point must contain a fresh observation there in
90-99 % of the replicates.

The fast configuration: Gaussian noise with least squares (``--loss l2``, the maximum-likelihood fit for it: the
Huber loss with the laws' δ = 1e-3 makes the solver crawl at 1 % noise), the tool's adaptive iteration limit (a
row runs while its objective still falls by 1 % of a noise unit per 30 iterations; a replicate or resample without
a usable row after the tool's rescue refit is unusable and counted, never kept), and ``B = 10`` resamples: the
percentile interval then spreads 4,000 noise draws over 10 parameter draws; the parameter part of a prediction
inside the design is small beside the noise, so few draws suffice.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mixlaw.fit import fit_batch
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.uncertainty.intervals import quantiles, residual_sd
from mixlaw.laws import get_law, law_names

R, B, SIGMA = 200, 10, 0.01
MAX_ITER: int | None = None  # the tool's adaptive limit (mixlaw.fit.solver.refine), what `mixlaw fit` uses by default

#: Per-law settings where the defaults do not fit the law or CI's time (each with its measured reason: unusable
#: replicate / resample fits, coverage, CPU seconds; B = 5 where B = 10 costs more than 15 s on a quiet machine).
#: Keys: ``B`` (resamples per replicate), ``options`` (the law's options), ``sigma``, ``max_iter``, ``n``, ``slow``.
SETTINGS: dict[str, dict[str, Any]] = {
    "camel": {
        "B": 5,
        "why": "B = 10 passes (0/200, 0/2,000, 97 %) in 27 s on a quiet machine; B = 5: 0/200, 0/1,000, 96 %, 19 s",
    },
    "cpt_size": {
        "B": 5,
        "why": "B = 10 passes (0/200, 0/2,000, 95.5 %) in 17 s on a quiet machine; B = 5: 0/200, 0/1,000, 94.5 %, 9 s",
    },
    "mixture_joint": {
        "B": 5,
        "slow": True,
        "why": "17 parameters, 68 points, a log-sum-exp per loading: B = 10 passes (0/200, 0/2,000, 93.5 %) in 78 s"
        " CPU at load 5; B = 5: 0/200, 0/1,000, 92 %, 36 s (3 starts per replicate: the same 92 %, 52 s)",
    },
    "multi_power": {
        "B": 5,
        "options": {"n_bins": 16},
        "slow": True,
        "why": "the law costs (S, n, n_bins) transcendentals per evaluation: 48 bins (the default) pass at B = 10"
        " (0/200, 90/2,000 before the floor on C, 93.7 %, 109 s CPU at load 5) and B = 5 (0/200, 0/1,000, 92.5 %,"
        " 67 s); 16 bins, B = 5: 0/200, 0/1,000, 93.5 %, 24 s",
    },
}
#: Laws not exercised here, with the reason (measured with this file's configuration). None at present: under the
#: hard cap of 200 iterations of before, camel, cpt, cpt_replay, cpt_size, mixture_joint and multi_power lost
#: 2-77 of 200 replicate fits (multi_power's 33 to a NaN derivative of the law, since fixed); under the adaptive
#: limit none loses one.
SKIP: dict[str, str] = {}


def _noisy(law: Any, f: np.ndarray, z: np.ndarray, scale: float, sigma: float) -> np.ndarray:
    """Multiplicative noise in log space, additive (``sigma`` × the mean |f|) in raw space."""
    return f * np.exp(sigma * z) if law.fit_space == "log" else f + sigma * scale * z


def _batch(law: Any, table: pd.DataFrame, Y: np.ndarray, starts: Any, max_iter: int | None) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # torch's read-only-array note on shared starts
        return fit_batch(law, table, Y, starts=starts, max_iter=max_iter, loss="l2")


def simulate(name: str, *, seed: int = 2024) -> dict[str, Any]:
    """Coverage of the 95 % prediction interval at a new point over ``R`` replicates (module docstring)."""
    cfg = SETTINGS.get(name, {})
    sigma, max_iter = float(cfg.get("sigma", SIGMA)), cfg.get("max_iter", MAX_ITER)  # None: the adaptive limit
    n_boot = int(cfg.get("B", B))
    law = get_law(name, **cfg.get("options", {}))
    rng = np.random.default_rng(seed)
    n = int(cfg.get("n", max(24, 4 * law.n_internal)))
    x = law.example_inputs(n + 1, rng)
    x0 = {k: np.asarray(v, dtype=np.float64)[n:] for k, v in x.items()}  # the new point: same design, not fitted
    x = {k: np.asarray(v, dtype=np.float64)[:n] for k, v in x.items()}
    truth = dict(law.example_params)
    f = np.asarray(law.evaluate(x, truth), dtype=np.float64)
    f0 = float(np.asarray(law.evaluate(x0, truth), dtype=np.float64)[0])
    scale = float(np.mean(np.abs(f)))
    Y = _noisy(law, f[None, :], rng.standard_normal((R, n)), scale, sigma)
    y0 = _noisy(law, np.full(R, f0), rng.standard_normal(R), scale, sigma)
    u = law.to_internal(truth)
    start = law.natural(u + 0.3 * np.sign(u + 1e-12) * np.maximum(np.abs(u), 0.1))  # away from the truth
    table = pd.DataFrame(x)
    point = _batch(law, table, Y, [start], max_iter)
    kept, targets = [], []
    for r in range(R):
        p = point.row(r)
        if p is None:
            continue
        fitted = np.asarray(law.evaluate(x, p), dtype=np.float64)
        sd = residual_sd(law, FitData(law, table.assign(loss=Y[r]), group_column=None), p)
        assert sd is not None
        z = sd * rng.standard_normal((n_boot, n))
        targets.append(fitted * np.exp(z) if law.fit_space == "log" else fitted + z)
        kept.append((r, sd, p))
    assert kept, f"{name}: no replicate fit finished"
    boot = _batch(law, table, np.concatenate(targets), [[p] for _, _, p in kept for _ in range(n_boot)], max_iter)
    inside = used = 0
    dof = n - law.n_internal
    for i, (r, sd, _) in enumerate(kept):
        block = slice(i * n_boot, (i + 1) * n_boot)
        draws = boot.params.iloc[block][boot.ok[block]].to_numpy()
        if len(draws) < n_boot // 2:
            continue
        q = quantiles(law, draws, x0, level=0.95, kind="prediction", sd=sd, seed=r, dof=dof)
        if q is None:
            continue
        used += 1
        inside += int(q[0, 0] <= y0[r] <= q[1, 0])
    return {"point_failed": point.n_failed, "boot_failed": boot.n_failed, "used": used, "coverage": inside / used}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[pytest.mark.slow] if SETTINGS.get(n, {}).get("slow") else [])
        for n in law_names()
        if n not in SKIP
    ],
)
def test_prediction_intervals_cover_new_observations_for_every_law(name: str) -> None:
    out = simulate(name)
    assert out["point_failed"] <= R // 20, (name, out)  # at most 5 % of the replicate fits unfinished
    assert out["used"] >= 0.9 * R, (name, out)
    assert 0.90 <= out["coverage"] <= 0.99, (name, out)


def test_every_skipped_law_is_registered_and_has_a_reason() -> None:
    assert set(SKIP) <= set(law_names()) and all(len(r) > 20 for r in SKIP.values())
    assert set(SETTINGS) <= set(law_names()) and all(len(c["why"]) > 20 for c in SETTINGS.values())


@pytest.mark.parametrize("edge", [{"gamma": 50.0, "C": 6e8, "beta": 0.0094}, {"C": 0.0}])
def test_multi_power_derivatives_stay_finite_where_its_bracket_saturates(edge: dict[str, float]) -> None:
    """Where ``C·η^(−γ)·S`` overflows (γ ≈ 50: 33 of 200 multi_power replicate fits above got there and were
    discarded as failed) or ``C`` underflows to 0 (the linear regime, where ``log C`` would give 1/C·0 = NaN: 57 of
    600 resample fits), the loss is finite; its derivatives must be too, or the solver discards the row as failed."""
    import torch

    law = get_law("multi_power")
    x = {k: torch.tensor(v) for k, v in law.example_inputs(40, np.random.default_rng(7)).items()}
    p = {k: torch.tensor(float(v), dtype=torch.float64, requires_grad=True) for k, v in law.example_params.items()}
    with torch.no_grad():
        for k, v in edge.items():
            p[k].fill_(v)
    out = law.log_predict(x, p)
    grads = torch.autograd.grad(out.sum(), list(p.values()))
    assert torch.isfinite(out).all() and all(torch.isfinite(g) for g in grads), (edge, grads)
