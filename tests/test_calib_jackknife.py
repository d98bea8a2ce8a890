"""The two rules of this round for intervals over few runs (known truth, seeded):

- the new-run term of :mod:`mixlaw.fit.evaluate.calib_runs` is the error of a new run under the *full* fit, not under a
  leave-one-run-out fit on one run fewer (grouped-jackknife correction, :func:`new_run_sd`), and it does not count
  twice what a runs bootstrap already carries;
- a bootstrap resample whose rows cannot identify the law is refitted from the point estimate or counted unusable
  and shown (:mod:`mixlaw.fit.uncertainty.resample_check`), never used for an interval.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from mixlaw import fit_law
from mixlaw.fit.evaluate.calib_folds import FoldErrors
from mixlaw.fit.evaluate.calib_runs import fold_spread, new_run_sd, run_excess
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.uncertainty.bootstrap import BootstrapDraws, bootstrap_law, refit_resamples, resample_weights
from mixlaw.fit.uncertainty.resample_check import STATUS_UNIDENTIFIABLE
from mixlaw.laws import get_law
from mixlaw.options import FitOptions


def _loo_errors(rng: np.random.Generator, k: int, m: int, tau: float, sigma: float) -> FoldErrors:
    """Leave-one-run-out errors of a law that is the runs' common level: ``k`` runs of ``m`` rows, run deviations
    ``δ ~ N(0, τ²)``, noise ``σ`` (known to the folds), every fold predicting the mean of the runs it fitted."""
    runs = np.repeat(np.arange(k), m)
    y = (tau * rng.standard_normal(k))[runs] + sigma * rng.standard_normal(runs.size)
    p = np.array([y[runs != j].mean() for j in range(k)])  # fold j leaves run j out
    jack = (k - 1) / k * np.sum((p - p.mean()) ** 2)  # the same at every row: the law is one level
    n = runs.size
    return FoldErrors(
        e=p[runs] - y, d=np.zeros(n), split=runs, forward=np.zeros(n, dtype=bool), rows=np.arange(n),
        last=np.zeros(n, dtype=bool), span=np.ones(n), sd=np.full(n, sigma), axis="tokens", n_folds=k, unit="runs",
        groups=runs, s2=np.full(n, sigma**2), jack=np.full(n, jack),
    )  # fmt: skip


def test_jackknife_takes_the_fold_excess_to_the_full_fits_new_run_error() -> None:
    """3 runs: a left-out run misses by τ²(1 + 1/2), a new run under the full fit by τ²(1 + 1/3), and a new run's
    own deviation is τ². Averaged over 3000 replicates, the raw excess, the corrected term and the corrected term
    less what a runs bootstrap carries recover these three within 10 %."""
    rng = np.random.default_rng(11)
    tau, k = 0.01, 3
    raw2, new2, own2 = [], [], []
    for _ in range(3000):
        fe = _loo_errors(rng, k, 12, tau, 0.002)
        raw, dof = run_excess(fe)
        assert dof == k
        v = fold_spread(fe)
        new = new_run_sd(raw, v, k)
        raw2.append(raw**2)
        new2.append(new**2)
        own2.append(max(0.0, new**2 - v))
    assert np.mean(raw2) / tau**2 == pytest.approx(1.5, rel=0.1)  # the leave-one-out excess over-states
    assert np.mean(new2) / tau**2 == pytest.approx(4 / 3, rel=0.1)
    assert np.mean(own2) / tau**2 == pytest.approx(1.0, rel=0.1)
    assert new_run_sd(0.01, 1.0, 1) == 0.01  # a single fold: nothing to correct with
    assert fold_spread(dataclasses.replace(fe, jack=None)) == 0.0  # errors saved without the jackknife


def _sizes_table(seed: int) -> pd.DataFrame:
    """Chinchilla truth, 4 model sizes × 6 token counts, one run per size, 1 % noise."""
    law = get_law("chinchilla")
    rng = np.random.default_rng(seed)
    n = np.repeat([1e8, 3e8, 1e9, 3e9], 6)
    d = np.tile(np.geomspace(2e9, 6e10, 6), 4)
    truth = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 410.0, "beta": 0.28}
    y = law.evaluate({"n_params": n, "tokens": d}, truth) * np.exp(0.01 * rng.standard_normal(n.size))
    return pd.DataFrame({"n_params": n, "tokens": d, "loss": y, "run_id": [f"s{i}" for i in np.log10(n)]})


def test_a_design_that_cannot_identify_the_law_at_the_point_is_left_to_the_solver() -> None:
    """A runs resample holding two of the four sizes cannot determine E, A and α at the point estimate either (two
    values of N for three parameters): the solver does not move along that direction, so the draw is kept (not
    flagged), as the module docstring says."""
    df = _sizes_table(3)
    law = get_law("chinchilla")
    data = FitData(law, df)
    point = fit_law(law, df, FitOptions(seed=0))
    seeds = law.to_internal(point.params)[None, :]
    B = 40
    draws = bootstrap_law(law, data, seeds, n=B, rng=np.random.default_rng(5), params=point.params)
    W = resample_weights(data.groups, data.n, B, np.random.default_rng(5))
    few = np.array([np.unique(np.asarray(data.groups)[w > 0]).size for w in W]) <= 2
    assert 3 <= few.sum() < B
    assert draws.ok.all() and draws.n_unidentifiable == 0 and STATUS_UNIDENTIFIABLE not in set(draws.status)


def test_resamples_whose_fit_degenerates_are_refitted_from_the_point_or_counted() -> None:
    """Started far away, runs resamples of a power law stop at α = 0, where only E + A is determined (the solver
    calls them converged); their rows identify the law at the point estimate. Each is flagged and refitted from the
    point: identifiable refits with an objective no higher replace them (counted rescued), and no degenerate fit
    is used for an interval."""
    rng = np.random.default_rng(3)
    law = get_law("power_law")
    x = law.example_inputs(40, rng)
    y = law.evaluate(x, {"A": 40.0, "E": 2.0, "alpha": 0.3}) * np.exp(3e-3 * rng.standard_normal(40))
    df = pd.DataFrame(x).assign(loss=y, run_id=np.arange(40) // 4)
    data = FitData(law, df)
    point = fit_law(law, df, FitOptions(seed=0))
    far = law.to_internal({"A": 3.0, "E": 0.3, "alpha": 1.5})[None, :]
    kw = dict(n=30, params=point.params, max_iter=25)
    W = resample_weights(data.groups, data.n, 30, np.random.default_rng(5))
    plain = refit_resamples(law, data, data.y, W, far, params=point.params, max_iter=25)
    degenerate = plain.ok & np.isclose(np.nan_to_num(_alpha(plain), nan=1.0), 0.0)
    assert degenerate.sum() >= 5  # what the check catches: the solver alone calls these usable
    draws = bootstrap_law(law, data, far, rng=np.random.default_rng(5), **kw)
    assert draws.n_unidentifiable == 0 and draws.n_rescued >= plain.n_rescued + degenerate.sum()
    assert (draws.params["alpha"] > 0.1).all() and len(draws.params) == 30 - draws.n_failed


def _alpha(d: BootstrapDraws) -> np.ndarray:
    out = np.full(d.ok.size, np.nan)
    out[d.ok] = d.params["alpha"].to_numpy()
    return out
