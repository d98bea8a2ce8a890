"""The new-run and along-the-curve terms of extrapolation-calibrated intervals (:mod:`mixlaw.fit.evaluate.calib_runs`).

Simulated loss curves ``L = E + A·t^(−α)`` (a few runs, 16 evaluations each, 0.2 % noise) with a known effect the
fitted runs hide from a bootstrap:

- every run deviates from the law by its own factor ``exp(δ_r)``, ``δ_r ~ N(0, 0.02²)`` (a schedule or data order
  the law does not describe), and the interval is for runs the fit has not seen;
- or the truth bends away from the law along the curves (``0.08·u²``, ``u`` = 0 → 1 over 1e3 → 1e5 tokens), runs
  of different lengths are fitted and ten times longer runs are predicted.

The bootstrap interval misses both; the calibrated one covers them, and each term is what does it (the same fits
with the term switched off cover less). Seeded, starts away from the truth; about 20 s.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.fit import fit_law
from mixlaw.fit.evaluate.calib_folds import FoldErrors, within_run_masks
from mixlaw.fit.evaluate.calib_runs import run_distance, run_excess
from mixlaw.fit.evaluate.calibrate import Calibration
from mixlaw.fit.result import FitResult
from mixlaw.fit.uncertainty.intervals import band, inputs_of
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

LAW = get_law("power_law", input="tokens")
TRUE = {"A": 50.0, "E": 2.0, "alpha": 0.3}
START = [{"A": 30.0, "E": 1.5, "alpha": 0.25}]


def _curves(seed: int, run_sd: float, bend: float, lengths: list[float], n_new: int, new_length: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for r, hi in enumerate([*lengths, *[new_length] * n_new]):
        t = np.geomspace(1e3, hi, 16)
        u = np.log(t / 1e3) / np.log(1e5 / 1e3)
        y = np.asarray(LAW.evaluate({"tokens": t}, TRUE), dtype=np.float64)
        y = y * np.exp(run_sd * rng.standard_normal() + bend * u**2 + 0.002 * rng.standard_normal(t.size))
        parts.append(pd.DataFrame({"tokens": t, "loss": y, "run_id": f"r{r}", "held": r >= len(lengths)}))
    return pd.concat(parts, ignore_index=True)


def _switched_off(res: FitResult, key: str) -> FitResult:
    cal = dict(res.calibration or {})
    cal[key] = 0.0
    return dataclasses.replace(res, calibration=cal)


def _coverage(run_sd: float, bend: float, lengths: list[float], new_length: float) -> dict:
    """Per interval: share of the new runs' points inside the 95 % prediction interval, mean log-width; and the
    calibrations."""
    inside: dict[str, list[np.ndarray]] = {"bootstrap": [], "auto": [], "no_run_sd": [], "no_step_growth": []}
    width: dict[str, list[np.ndarray]] = {k: [] for k in inside}
    cals = []
    for seed in range(4):
        df = _curves(seed, run_sd, bend, lengths, n_new=10, new_length=new_length)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)  # convergence notes of single fits
            res = fit_law(
                LAW,
                df[~df["held"]],
                FitOptions(
                    starts=StartOptions(given=START),
                    bootstrap=BootstrapOptions(resamples=10, scheme="parametric", calibrate=True),
                    seed=seed,
                ),
            )
        held = df[df["held"]]
        x, obs = inputs_of(res, held), held["loss"].to_numpy()
        cals.append(Calibration.from_dict(res.calibration or {}))
        for name in inside:
            fit = _switched_off(res, name[3:]) if name.startswith("no_") else res
            b = band(fit, x, level=0.95, kind="prediction", method="bootstrap" if name == "bootstrap" else "auto")
            assert b is not None
            inside[name].append((b.lo <= obs) & (obs <= b.hi))
            width[name].append(np.log(b.hi / b.lo))
    out = {k: (float(np.concatenate(v).mean()), float(np.concatenate(width[k]).mean())) for k, v in inside.items()}
    return {**out, "cals": cals}


@pytest.fixture(scope="module")
def run_effect() -> dict:
    return _coverage(0.02, 0.0, [1e5] * 4, 1e5)


@pytest.fixture(scope="module")
def bent_curves() -> dict:
    return _coverage(0.0, 0.08, [1e4, 3e4, 1e5, 3e4], 1e6)


def test_new_run_term_covers_runs_the_fit_has_not_seen(run_effect: dict) -> None:
    for cal in run_effect["cals"]:  # leave-one-run-out over the 4 runs; same grid: no within-run cuts
        assert cal.unit == "runs" and cal.run_dof == 4 and cal.run_sd > 0 and cal.n_within == 0
        assert "new-run error" in cal.summary()
    boot, auto, off = run_effect["bootstrap"][0], run_effect["auto"][0], run_effect["no_run_sd"][0]
    assert auto >= 0.9, run_effect
    assert boot <= auto - 0.1 and off <= auto - 0.1, run_effect  # the new-run term is what covers them


def test_step_term_covers_longer_runs_when_the_law_bends_along_the_curves(bent_curves: dict) -> None:
    for cal in bent_curves["cals"]:
        assert cal.n_within == 5 and cal.step_growth > 0 and cal.run_top == pytest.approx(3e4)
        assert "forward cuts within every run" in cal.summary()
    boot, auto, off = (bent_curves[k][0] for k in ("bootstrap", "auto", "no_step_growth"))
    assert boot <= auto - 0.1 and auto >= 0.9, bent_curves
    assert off <= auto - 0.1, bent_curves  # without the step term the other signals do not carry the bend


def test_run_excess_recovers_a_known_between_run_sd() -> None:
    """Errors of 300 held-out runs with a run deviation of sd 0.01 and noise 0.004 known to the folds."""
    rng = np.random.default_rng(7)
    runs = np.repeat(np.arange(300), 12)
    e = 0.01 * rng.standard_normal(300)[runs] + 0.004 * rng.standard_normal(runs.size)
    n = runs.size
    fe = FoldErrors(
        e=e, d=np.zeros(n), split=runs % 10, forward=np.zeros(n, dtype=bool), rows=np.arange(n),
        last=np.zeros(n, dtype=bool), span=np.ones(n), sd=np.full(n, 0.004), axis="tokens", n_folds=10, unit="runs",
        groups=runs, s2=np.full(n, 0.004**2),
    )  # fmt: skip
    tau, k = run_excess(fe)
    assert k == 300 and tau == pytest.approx(0.01, rel=0.12)
    assert run_excess(dataclasses.replace(fe, unit="sizes")) == (0.0, 0)  # folds over sizes: the ratio model
    single = dataclasses.replace(fe, groups=np.arange(n))  # one row per run: nothing shared within a run
    assert run_excess(single) == (0.0, 0)


def test_within_run_cuts_fit_each_runs_early_part_and_measure_from_its_own_end() -> None:
    v = np.concatenate([np.arange(1.0, 11.0), np.arange(1.0, 21.0)])
    g = np.repeat([0, 1], [10, 20])
    masks = within_run_masks(v, g)
    assert len(masks) == 5
    half = masks[0]
    assert half[g == 0].sum() == 5 and half[g == 1].sum() == 10  # the first half of each run, not of the axis
    held = np.flatnonzero(~half)
    d = run_distance(v, g, half, held)
    np.testing.assert_allclose(d, np.log(v[held] / np.where(g[held] == 0, 5.0, 10.0)))
    assert within_run_masks(np.arange(6.0), np.repeat([0, 1, 2], 2)) == []  # runs of 2 rows are not curves


def test_new_run_terms_travel_with_the_fit_json_and_old_fits_have_none() -> None:
    df = _curves(0, 0.02, 0.05, [1e4, 3e4, 1e5], n_new=1, new_length=1e6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(
            LAW,
            df[~df["held"]],
            FitOptions(
                starts=StartOptions(given=START), bootstrap=BootstrapOptions(resamples=10, calibrate=True), seed=0
            ),
        )
    again = FitResult.from_dict(res.to_dict())
    held = df[df["held"]]
    a = band(res, inputs_of(res, held), kind="prediction", method="auto")
    b = band(again, inputs_of(again, held), kind="prediction", method="auto")
    assert a is not None and b is not None
    np.testing.assert_allclose(a.lo, b.lo)
    np.testing.assert_allclose(a.hi, b.hi)
    cal = Calibration.from_dict(res.calibration or {})
    assert cal.run_dof == 3 and cal.run_sd > 0
    old = {k: v for k, v in (res.calibration or {}).items() if k not in ("run_sd", "run_dof", "step_growth")}
    assert Calibration.from_dict(old).run_half(0.95, np.array([0.0, 2.0])).tolist() == [0.0, 0.0]
    # the new-run term grows beyond the typical fitted run's end, not inside it
    r = cal.run_half(0.95, cal.run_distance({"tokens": np.array([1e4, 1e6])}, 2))
    assert r[0] == pytest.approx(cal.run_half(0.95, 0.0)) and (r[1] > r[0] or cal.step_growth == 0)


def _within(X: np.ndarray, D: np.ndarray, rows: int = 8) -> FoldErrors:
    """Within-run cut folds whose mean excess over the residual variance is ``X`` at mean squared distance ``D``."""
    k = X.size
    s2 = 1e-4
    e = np.repeat(np.sqrt(s2 + X), rows)  # every row of fold j: e² − s² = X_j
    d_run = np.repeat(np.sqrt(D), rows)
    n = e.size
    return FoldErrors(
        e=e, d=np.zeros(n), split=np.repeat(np.arange(k), rows), forward=np.ones(n, dtype=bool), rows=np.arange(n),
        last=np.zeros(n, dtype=bool), span=np.ones(n), sd=np.full(n, 0.01), axis="tokens", n_folds=k, unit="runs",
        within=np.ones(n, dtype=bool), d_run=d_run, s2=np.full(n, s2),
    )  # fmt: skip


def test_step_growth_is_the_expected_slope_not_the_clipped_one() -> None:
    """Within-run cuts that cannot tell a growth from none (slope below 0, standard error as large) give a positive
    step growth, the size growth's treatment; a slope many standard errors above 0 is kept. On 300 simulated sets of
    5 cuts with no growth (excess noise sd 2e-5) every step growth is positive — it errs wide — where the clipped
    slope is 0 for 47 % of them (a negative slope)."""
    from mixlaw.fit.evaluate.calib_growth import _nonnegative_mean
    from mixlaw.fit.evaluate.calib_runs import step_growth

    D = np.array([0.05, 0.1, 0.2, 0.3, 0.4])
    flat = np.array([2e-5, -3e-5, 1e-5, -4e-5, 1e-5])  # slope < 0, standard error of the same order
    kappa, k = step_growth(_within(flat, D))
    assert k == 5 and kappa > 0 and kappa**2 == pytest.approx(_nonnegative_mean(flat, D))
    clear = 1e-3 * D + 1e-6 * np.array([1, -1, 1, -1, 0])
    kappa, _ = step_growth(_within(clear, D))
    assert kappa**2 == pytest.approx(1e-3, rel=0.01)
    rng = np.random.default_rng(3)
    k2 = [step_growth(_within(np.maximum(2e-5 * rng.standard_normal(5), -9e-5), D))[0] ** 2 for _ in range(300)]
    assert np.mean(np.array(k2) > 0) == 1.0 and np.mean(k2) > 0
