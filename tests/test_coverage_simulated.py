"""Simulated coverage for every registered law: known truth, known noise, 95 % prediction intervals.

For each law (``mixlaw laws``): ``R`` seeded replicates of ``n`` noisy observations of the law's example truth
(``law.example_params``) at inputs drawn by the law's own generic simulator (``law.example_inputs``: its declared
inputs over their plausible ranges, schedule features included), plus one new point from the same simulator that
no replicate is fitted on. Every replicate is fitted in one batched solve (:func:`mixlaw.fit.fit_batch`, started
30 % away from the truth in internal coordinates); its parametric bootstrap (``B`` resamples ``fitted + σ̂ z``, the
tool's ``--resample parametric``) is refitted in a second batched solve, and the tool's 95 % bootstrap prediction
interval (:func:`mixlaw.fit.intervals.quantiles`, the method behind ``--interval prediction --method bootstrap``,
with its Student-t noise of ``n − p`` degrees of freedom) at the new point must contain a fresh observation there in
90-99 % of the replicates.

The fast configuration: Gaussian noise with least squares (``--loss l2``, the maximum-likelihood fit for it: the
Huber loss with the laws' δ = 1e-3 makes the solver crawl at 1 % noise), a hard cap of 200 iterations (a replicate
or resample still running then is unusable and counted, never kept), and ``B = 10`` resamples: the percentile
interval then spreads 4,000 noise draws over 10 parameter draws; the parameter part of a prediction inside the
design is small beside the noise, so few draws suffice.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mixlaw.fit import fit_batch
from mixlaw.fit.data import FitData
from mixlaw.fit.intervals import quantiles, residual_sd
from mixlaw.laws import get_law, law_names

R, B, SIGMA, MAX_ITER = 200, 10, 0.01, 200

#: Per-law settings where the defaults do not fit the law (each with its reason). ``max_iter: None`` is the tool's
#: adaptive limit (:mod:`mixlaw.fit.refine`: a row runs while its objective still falls by 1 % of a noise unit per
#: 30 iterations); ``starts: k`` fits each replicate from ``k`` starts in the same batched solve (every coordinate
#: 30 % away from the truth, seeded signs; the best usable one is kept, as the tool's multi-start does). Figures:
#: unusable replicate fits / resample fits of 200 / 2,000, coverage, CPU seconds on the shared 2-core machine.
_WEAK = "at 1 % noise one exponent over one input is weakly identified: 10 % of the replicate fits still crawl at 1000"
_AUTO = "at the hard cap of 200: {} unusable, {} covered; under the adaptive limit: {}"
SETTINGS: dict[str, dict[str, Any]] = {
    "ratio_power": {"sigma": 0.003, "why": _WEAK},
    "dloss_general": {"sigma": 0.003, "max_iter": 1000, "why": _WEAK + " (two power terms trading places)"},
    "camel": {"max_iter": None, "why": _AUTO.format("77/200, 332/2,000", "96 %", "0/200, 0/2,000, 97 %, 29 s")},
    "cpt": {"max_iter": None, "why": _AUTO.format("51/200, 173/2,000", "92 %", "0/200, 0/2,000, 92 %, 11 s")},
    "cpt_replay": {"max_iter": None, "why": _AUTO.format("47/200, 197/2,000", "97 %", "0/200, 0/2,000, 96 %, 13 s")},
    "cpt_size": {"max_iter": None, "why": _AUTO.format("36/200, 193/2,000", "96 %", "0/200, 0/2,000, 96 %, 16 s")},
    "mixture_additive": {
        "max_iter": None,
        "why": "passes at the cap of 200 too (0/200, 3/2,000, 94.5 %, 25 s); the adaptive limit is faster (20 s)",
    },
}
#: Laws not exercised here, with the reason (measured with this file's configuration on the shared machine).
SKIP: dict[str, str] = {
    "mixture_joint": "passes under the adaptive limit (0/200, 0/2,000 unusable, 93.5 %) but takes 78 s: one resample"
    " refit from a replicate's poor single-start estimate crawls 4,479 iterations (2.87e-3 -> 2.63e-3); at the cap"
    " of 200: 2/200, 29/2,000, 92 %, 113 s",
    "multi_power": "passes under the adaptive limit (0/200, 90/2,000 unusable, 94 %) but takes 109 s; at the cap of"
    " 200 (before the law's softplus fix): 33/200, 134/2,000, 93 %",
}


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
    law = get_law(name)
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
    away = np.sign(u + 1e-12) * np.maximum(np.abs(u), 0.1)
    flips = np.random.default_rng(seed + 1).choice([-1.0, 1.0], (int(cfg.get("starts", 1)) - 1, u.size))
    signs = np.vstack([np.ones_like(u), flips])  # the first start as before; the others flip seeded coordinates
    starts = [law.natural(u + 0.3 * s * away) for s in signs]  # each coordinate 30 % away from the truth
    table = pd.DataFrame(x)
    point = _batch(law, table, Y, starts, max_iter)
    kept, targets = [], []
    for r in range(R):
        p = point.row(r)
        if p is None:
            continue
        fitted = np.asarray(law.evaluate(x, p), dtype=np.float64)
        sd = residual_sd(law, FitData(law, table.assign(loss=Y[r]), group_column=None), p)
        assert sd is not None
        z = sd * rng.standard_normal((B, n))
        targets.append(fitted * np.exp(z) if law.fit_space == "log" else fitted + z)
        kept.append((r, sd, p))
    assert kept, f"{name}: no replicate fit finished"
    boot = _batch(law, table, np.concatenate(targets), [[p] for _, _, p in kept for _ in range(B)], max_iter)
    inside = used = 0
    dof = n - law.n_internal
    for i, (r, sd, _) in enumerate(kept):
        block = slice(i * B, (i + 1) * B)
        draws = boot.params.iloc[block][boot.ok[block]].to_numpy()
        if len(draws) < B // 2:
            continue
        q = quantiles(law, draws, x0, level=0.95, kind="prediction", sd=sd, seed=r, dof=dof)
        if q is None:
            continue
        used += 1
        inside += int(q[0, 0] <= y0[r] <= q[1, 0])
    return {"point_failed": point.n_failed, "boot_failed": boot.n_failed, "used": used, "coverage": inside / used}


@pytest.mark.parametrize("name", [n for n in law_names() if n not in SKIP])
def test_prediction_intervals_cover_new_observations_for_every_law(name: str) -> None:
    out = simulate(name)
    assert out["point_failed"] <= R // 20, (name, out)  # at most 5 % of the replicate fits unfinished
    assert out["used"] >= 0.9 * R, (name, out)
    assert 0.90 <= out["coverage"] <= 0.99, (name, out)


def test_every_skipped_law_is_registered_and_has_a_reason() -> None:
    assert set(SKIP) <= set(law_names()) and all(len(r) > 20 for r in SKIP.values())
    assert set(SETTINGS) <= set(law_names())
