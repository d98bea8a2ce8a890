"""A nested cut that does not identify what the full fit does must not make the full fit's width
(:func:`mixlaw.fit.evaluate.calib_growth.accepts_full_fit`, :func:`~mixlaw.fit.evaluate.calib_growth.axis_excess`).

- **Synthetic folds** (instant): a cut whose rows accept the full fit (``Δ_j ≤ p``) counts its miss up to its own
  delta-method parameter variance (where the full fit has a parameter its data do not bound, which the calibration
  checks before passing the flags); the same miss from a cut whose rows reject the full fit (the full fit bends away
  from them) counts whole.
- **Simulated truth, well specified** (a few seconds): the data-constrained law at its published parameters on the
  repetition grid of ``benchmarks/coverage.py`` (seed 0), fitted on ≤ 4 epochs. Its cut on ≤ 2 epochs fits the
  repetition decay in a second valley (``R_D*`` ≈ 1, the truth 15) and misses the 3-4-epoch rows by far more than
  its linearised error, although its rows accept the full fit: the interval at 8-60 epochs was 3.5 times the
  bootstrap one. It now stays near the bootstrap interval and still covers the held-out runs.
- **Simulated truth, bending along epochs** (a few seconds): the same grid with the loss multiplied by
  ``exp(0.03 · log(epochs)²)``, a misfit the law cannot follow beyond the fitted epochs but absorbs inside them: every
  cut's rows accept the full fit, yet the full fit bounds every parameter (nothing runs off), so the cuts' misses
  count whole and the interval widens along epochs (2.0x the bootstrap one; 1.2x if the cap applied regardless).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from mixlaw.fit.evaluate.calib_axes import AxisGrowth
from mixlaw.fit.evaluate.calib_folds import FoldErrors
from mixlaw.fit.evaluate.calib_growth import accepts_full_fit, axis_excess
from mixlaw.laws import get_law

P = 5  # parameters of the synthetic law


def _folds(full_extra: float) -> tuple[FoldErrors, np.ndarray]:
    """Two cuts along ``epochs`` on 40 rows (noise 0.01): each misses its 10 held-out rows by 0.05 where its delta
    method expects 0.02 (sd² − s² = 3e-4). ``full_extra``: the rise of the full fit's sum of squares on each cut's
    rows over the cut's own optimum, in residual variances (``Δ_j``)."""
    n, s2 = 40, 1e-4
    ax = (AxisGrowth("n_params", "log", 1e8, 1e9), AxisGrowth("epochs", "log", 1.0, 4.0))
    fitted = np.ones((2, n), dtype=bool)
    fitted[0, 30:] = False  # the first cut fits rows 0-29
    fitted[1, 20:30] = False  # the second cut fits every row but 20-29 (a share's near end, say)
    rows = [np.arange(30, 40), np.arange(20, 30)]
    d = np.full(10, 0.5)
    fe = FoldErrors(
        e=np.full(20, 0.05), d=np.zeros(20), split=np.repeat([0, 1], 10), forward=np.ones(20, dtype=bool),
        rows=np.concatenate(rows), last=np.zeros(20, dtype=bool), span=np.ones(20),
        sd=np.full(20, np.sqrt(s2 + 3e-4)), axis="n_params", n_folds=2, s2=np.full(20, s2),
        dists=np.column_stack([np.zeros(20), np.concatenate([d, d])]), axes=ax,
        cut=np.full(20, "epochs", dtype=object), fitted=fitted,
    )  # fmt: skip
    # full-fit residuals whose sum of squares on each cut's 30 rows is (30 - P + full_extra) s²
    r = np.full(n, np.sqrt(s2 * (30 - P + full_extra) / 30))
    return fe, r


def test_a_cut_that_accepts_the_full_fit_counts_up_to_its_linearised_error() -> None:
    fe, r = _folds(full_extra=2.0)
    acc = accepts_full_fit(fe, r, P)
    assert acc is not None and acc.tolist() == [True, True]
    kappa, _ = axis_excess(fe, accepts=acc)
    assert np.isclose(kappa[1], np.sqrt(3e-4) / 0.5)  # the delta-method variance, not the miss
    plain, _ = axis_excess(fe)
    assert np.isclose(plain[1], np.sqrt(0.05**2 - 1e-4) / 0.5)  # the miss over the noise, as before


def test_a_cut_that_rejects_the_full_fit_counts_whole() -> None:
    fe, r = _folds(full_extra=3.0 * P)  # the full fit bends away from the cut's rows
    acc = accepts_full_fit(fe, r, P)
    assert acc is not None and not acc.any()
    kappa, _ = axis_excess(fe, accepts=acc)
    plain, _ = axis_excess(fe)
    assert np.allclose(kappa, plain)


def _grid(seed: int, bend: float) -> pd.DataFrame:
    law = get_law("data_constrained")
    rng = np.random.default_rng(seed)
    n, u, ep = (g.ravel() for g in np.meshgrid([1e8, 3e8, 1e9], [2e9, 6e9, 2e10], [1, 1.5, 2, 3, 4, 8, 16, 32, 60],
                                               indexing="ij"))  # fmt: skip
    x = {"n_params": n, "tokens": ep * u, "unique_tokens": u}
    y = np.asarray(law.evaluate(x, law.example_params), dtype=np.float64) * np.exp(bend * np.log(ep) ** 2)
    y = y * np.exp(0.01 * rng.standard_normal(n.size))
    return pd.DataFrame({**x, "loss": y, "run_id": [f"r{i}" for i in range(n.size)], "held": ep > 4})


def _widths(seed: int, bend: float) -> tuple[float, float, float, float]:
    """``(inside, width, bootstrap width, spread)`` of the 95 % intervals at 8-60 epochs after a fit on ≤ 4."""
    from mixlaw.fit import fit_law
    from mixlaw.fit.uncertainty.intervals import band, inputs_of
    from mixlaw.options import BootstrapOptions, FitOptions

    df = _grid(seed, bend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(get_law("data_constrained"), df[~df["held"]],
                      FitOptions(bootstrap=BootstrapOptions(resamples=20, calibrate=True), seed=0))  # fmt: skip
    held = df[df["held"]]
    x = inputs_of(res, held)
    b = band(res, x, level=0.95, kind="prediction", method="calibrated")
    boot = band(res, x, level=0.95, kind="prediction", method="bootstrap")
    assert b is not None and boot is not None
    obs = held["loss"].to_numpy()
    inside = float(np.mean((b.lo <= obs) & (obs <= b.hi)))
    width = float(np.mean((b.hi - b.lo) / np.sqrt(b.lo * b.hi)))
    wboot = float(np.mean((boot.hi - boot.lo) / np.sqrt(boot.lo * boot.hi)))
    return inside, width, wboot, float(np.ptp(obs) / np.median(obs))


def test_a_cut_in_a_second_valley_does_not_make_the_width() -> None:
    inside, width, wboot, spread = _widths(0, 0.0)
    assert inside >= 0.85, inside
    assert width <= 1.5 * wboot, (width, wboot)  # was 3.5x: the 2-epoch cut's miss carried to 60 epochs
    assert width <= 0.5 * spread, (width, spread)


def test_a_bend_the_law_absorbs_still_widens() -> None:
    # seed 0: every cut's rows accept the full fit (the law follows the bend inside 4 epochs with a stronger
    # repetition decay), but the full fit bounds every parameter, so no cut's miss is read as a non-identification
    # the full fit's interval carries: the cuts count whole (1.2x the bootstrap interval without that condition)
    _, width, wboot, _ = _widths(0, 0.03)
    assert width >= 1.6 * wboot, (width, wboot)  # the accelerating bend is still under-covered
