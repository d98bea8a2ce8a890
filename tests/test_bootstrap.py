"""One usable-row rule and one bootstrap: the Fitter, fit_batch and a decision calling the public functions count
the same rows as usable and the same resamples as failed."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import ConvergenceWarning, InputError
from mixlaw.fit import fit_batch, fit_law
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.solver.refits import USABLE, best_rows, root_status, usable
from mixlaw.fit.solver.solve import SolveResult
from mixlaw.fit.uncertainty.bootstrap import bootstrap_law, resample_targets, resample_weights
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions, SolverOptions


def _sol(status: list[str], f: list[float], merged_into: list[int]) -> SolveResult:
    K = len(status)
    return SolveResult(
        x=np.arange(K, dtype=np.float64)[:, None],
        f=np.array(f),
        grad_norm=np.zeros(K),
        n_iter=np.ones(K, dtype=np.int64),
        status=np.array(status, dtype=object),
        merged_into=np.array(merged_into),
        total_iter=1,
    )


def test_usable_row_rule() -> None:
    """converged and stalled rows count; max_iter and failed rows do not; a merged row inherits its root."""
    sol = _sol(
        ["converged", "max_iter", "stalled", "merged", "merged", "failed"],
        [1.0, 0.5, 2.0, 1.0, 0.5, np.inf],
        [-1, -1, -1, 0, 1, -1],
    )
    assert list(root_status(sol)) == ["converged", "max_iter", "stalled", "converged", "max_iter", "failed"]
    assert list(usable(sol)) == [True, False, True, True, False, False]
    assert set(USABLE) == {"converged", "stalled"}
    # Problem 0 = rows 0-2, problem 1 = rows 3-5: the best usable row, never the lower-objective max_iter one.
    best, ok = best_rows(sol, np.array([0, 0, 0, 1, 1, 1]), 2)
    assert list(best) == [0, 3] and list(ok) == [True, True]
    best, ok = best_rows(sol, np.array([0, 1, 1, 2, 2, 2]), 3)
    assert list(ok) == [True, True, True] and list(best) == [0, 2, 3]
    only_unfinished = _sol(["max_iter", "failed"], [0.1, np.inf], [-1, -1])
    best, ok = best_rows(only_unfinished, np.array([0, 0]), 1)
    assert list(ok) == [False] and list(best) == [-1]


def _power_data(seed: int, n: int = 40) -> pd.DataFrame:
    law = get_law("power_law")
    rng = np.random.default_rng(seed)
    x = law.example_inputs(n, rng)
    y = law.evaluate(x, {"A": 40.0, "E": 2.0, "alpha": 0.3}) * np.exp(3e-3 * rng.standard_normal(n))
    return pd.DataFrame(x).assign(loss=y, run_id=np.arange(n) // 4)


def test_unfinished_resamples_fail_the_same_way_in_fitter_and_fit_batch() -> None:
    df = _power_data(1)
    law = get_law("power_law")
    with pytest.warns(ConvergenceWarning):
        res = fit_law(
            law, df, FitOptions(solver=SolverOptions(max_iter=1), bootstrap=BootstrapOptions(resamples=12), seed=0)
        )
    # The point estimate falls back to the best unfinished start (and says so) ...
    assert res.status.value == "max_iter"
    # ... but a resample without a usable row is a failed resample.
    assert res.n_failed_resamples == 12 and res.bootstrap_params is not None and len(res.bootstrap_params) == 0
    Y = np.tile(df["loss"].to_numpy(), (5, 1))
    batch = fit_batch(law, df, Y, starts=[{"A": 10.0, "E": 1.0, "alpha": 0.5}], max_iter=1)
    assert list(batch.status) == ["max_iter"] * 5 and batch.n_failed == 5
    assert all(batch.row(b) is None for b in range(5)) and np.isinf(batch.objective).all()
    ok = fit_batch(law, df, Y, starts=[{"A": 10.0, "E": 1.0, "alpha": 0.5}])
    assert ok.n_failed == 0 and ok.row(0) is not None


def test_fitter_bootstrap_is_the_public_bootstrap() -> None:
    """A decision calling bootstrap_law with the fit's seeds gets exactly the Fitter's draws."""
    df = _power_data(2)
    law = get_law("power_law")
    res = fit_law(law, df, FitOptions(bootstrap=BootstrapOptions(resamples=25), seed=7))
    rng = np.random.default_rng(7)  # the Fitter's generator: no random starts, so resampling is its first use
    data = FitData(law, df)
    seeds = law.to_internal(res.params)[None, :]
    draws = bootstrap_law(law, data, seeds, n=25, rng=rng, scheme="runs")
    assert draws.n_failed == res.n_failed_resamples
    assert draws.unit == "run_id" == res.bootstrap_unit
    pd.testing.assert_frame_equal(draws.params, res.bootstrap_params)


@pytest.mark.parametrize("scheme", ["runs", "rows", "residuals"])
def test_every_scheme_gives_intervals_around_the_truth(scheme: str) -> None:
    df = _power_data(3, n=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = fit_law("power_law", df, FitOptions(bootstrap=BootstrapOptions(resamples=40, scheme=scheme), seed=0))
    assert res.n_failed_resamples <= 4
    lo, hi = res.ci()["alpha"]
    assert lo < res.params["alpha"] < hi and hi - lo < 0.2
    assert res.settings["bootstrap_scheme"] == scheme
    assert (res.bootstrap_unit or "").startswith({"runs": "run_id", "rows": "row", "residuals": "residuals"}[scheme])


def test_resampling_helpers() -> None:
    rng = np.random.default_rng(0)
    groups = np.array([0, 0, 1, 1, 1, 2])
    W = resample_weights(groups, 6, 50, rng)
    assert W.shape == (50, 6)
    assert (W[:, 0] == W[:, 1]).all() and (W[:, 2] == W[:, 4]).all()  # a run's points move together
    assert (W.reshape(50, 6)[:, [0, 2, 5]].sum(axis=1) == 3).all()  # G draws of G runs
    fitted = np.arange(6, dtype=np.float64)
    resid = np.array([0.1, -0.1, 0.2, 0.3, -0.5, 0.7])
    Y = resample_targets(fitted, resid, groups, 30, rng)
    r = Y - fitted

    def drawn_from(block: np.ndarray, pool: np.ndarray) -> bool:
        return bool((np.abs(block[..., None] - pool).min(-1) < 1e-12).all())

    assert drawn_from(r[:, :2], resid[:2]) and drawn_from(r[:, 2:5], resid[2:5])  # within runs
    assert not drawn_from(r[:, :2], resid[2:5])
    assert np.allclose(r[:, 5], 0.7)
    with pytest.raises(InputError, match="bootstrap_scheme"):
        fit_law("power_law", _power_data(4), FitOptions(bootstrap=BootstrapOptions(resamples=2, scheme="points")))  # type: ignore[arg-type]


def test_residuals_are_pooled_where_every_run_is_one_row() -> None:
    # Within a one-row run a residual can only be drawn as itself: the bootstrap would have no spread at all.
    rng = np.random.default_rng(3)
    fitted = np.linspace(1.0, 2.0, 12)
    resid = rng.normal(0.0, 0.1, 12)
    Y = resample_targets(fitted, resid, np.arange(12), 400, rng, n_params=3)
    r = Y - fitted
    pool = (resid - resid.mean()) * np.sqrt(12 / (12 - 3))  # centred, scaled to the unbiased variance
    assert (np.abs(r[..., None] - pool).min(-1) < 1e-12).all()
    assert (r.std(axis=0) > 0.05).all()  # every row gets other rows' residuals
    assert r.var() == pytest.approx((pool**2).mean(), rel=0.1)


def test_auto_scheme_keeps_a_fixed_design_and_resamples_curves_by_run() -> None:
    single = _power_data(5, n=24).assign(run_id=lambda d: np.arange(len(d)))  # one row per run: a fixed design
    curves = _power_data(5, n=24)  # 6 runs of 4 points
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = fit_law("power_law", single, FitOptions(bootstrap=BootstrapOptions(resamples=30), seed=0))
        b = fit_law("power_law", curves, FitOptions(bootstrap=BootstrapOptions(resamples=30), seed=0))
    assert a.settings["bootstrap_scheme"] == "residuals" and a.bootstrap_unit == "residuals (pooled)"
    assert b.settings["bootstrap_scheme"] == "runs" and b.bootstrap_unit == "run_id"
    lo, hi = a.ci()["alpha"]
    assert lo < 0.3 < hi and 0.0 < hi - lo < 0.2  # a real spread around the truth


def test_pooled_residual_bootstrap_covers_the_curve() -> None:
    # Fixed design, known truth: the 95 % confidence interval of the curve at an inside point covers it in most of
    # the seeded replicates (with the within-run draw of one-row runs every interval had width 0: coverage 0 %).
    from mixlaw.fit.uncertainty.intervals import band

    law = get_law("power_law")
    truth = {"A": 40.0, "E": 2.0, "alpha": 0.3}
    at = {"tokens": np.array([1e8])}
    hit = 0
    reps = 40
    for seed in range(reps):
        rng = np.random.default_rng(100 + seed)
        x = law.example_inputs(16, rng)
        y = law.evaluate(x, truth) * np.exp(0.01 * rng.standard_normal(16))
        df = pd.DataFrame(x).assign(loss=y, run_id=np.arange(16))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = fit_law(law, df, FitOptions(bootstrap=BootstrapOptions(resamples=60), seed=seed))
        b = band(res, at, level=0.95, kind="confidence")
        assert b is not None and res.settings["bootstrap_scheme"] == "residuals"
        hit += int(b.lo[0] <= law.evaluate(at, truth)[0] <= b.hi[0])
    assert 0.8 <= hit / reps <= 1.0  # 35 of 40 measured (a percentile interval on 16 points runs a little short)


def test_an_interval_from_a_selection_of_its_resamples_is_weak_not_ok() -> None:
    from mixlaw.fit.predict import predict_point
    from mixlaw.fit.result import FitResult

    df = _power_data(1)
    law = get_law("power_law")
    with pytest.warns(ConvergenceWarning):
        bad = fit_law(
            law, df, FitOptions(solver=SolverOptions(max_iter=1), bootstrap=BootstrapOptions(resamples=12), seed=0)
        )  # every resample unfinished
    good = fit_law(law, df, FitOptions(bootstrap=BootstrapOptions(resamples=12), seed=0))
    assert good.n_failed_resamples == 0 and good.interval_status == "ok"
    assert bad.interval_status.startswith("weak: 12 of 12 resamples unusable")
    again = FitResult.from_json(bad.to_json())  # saved and read back: the status comes with the counts
    assert again.to_dict()["bootstrap"]["status"] == bad.interval_status
    assert "intervals weak" in bad.report() and "intervals ok" in good.report()
    assert predict_point(bad, {"tokens": 1e8})["interval_status"].startswith("weak")
    assert predict_point(good, {"tokens": 1e8})["interval_status"] == "ok"
    # the threshold: more than 20 % lost
    from mixlaw.fit.uncertainty.resampling import interval_status

    assert (
        interval_status(8, 40) == "ok" and interval_status(9, 40).startswith("weak") and interval_status(0, 0) == "none"
    )


def test_wild_cluster_bootstrap_keeps_the_design_and_moves_a_run_together() -> None:
    from mixlaw.fit.uncertainty.resampling import WEBB, wild_targets

    rng = np.random.default_rng(11)
    groups = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    fitted = np.linspace(2.0, 3.0, 8)
    resid = rng.normal(0.0, 0.05, 8)
    Y = wild_targets(fitted, resid, groups, 500, rng)
    v = (Y - fitted) / resid  # the weight each row got
    for grp in range(3):
        rows = groups == grp
        assert np.allclose(v[:, rows], v[:, rows][:, :1])  # one weight per run and resample
    assert (np.abs(v[..., None] - WEBB).min(-1) < 1e-9).all()
    assert abs(v[:, 0].mean()) < 0.1 and v[:, 0].var() == pytest.approx(1.0, abs=0.15)
    assert not np.allclose(v[:, 0], v[:, 3])  # runs draw independently
    # on curves from three runs, every resample keeps all three: none is unusable, the scheme is recorded
    df = _power_data(8, n=24).assign(run_id=lambda d: np.arange(len(d)) // 8)
    res = fit_law("power_law", df, FitOptions(bootstrap=BootstrapOptions(resamples=30, scheme="wild"), seed=0))
    assert res.n_failed_resamples == 0 and res.interval_status == "ok"
    assert res.settings["bootstrap_scheme"] == "wild" and res.bootstrap_unit == "run_id"
    lo, hi = res.ci()["alpha"]
    assert lo < res.params["alpha"] < hi and 0.0 < hi - lo < 0.2


def test_auto_falls_back_from_runs_to_wild_where_few_runs_cannot_identify_the_law(external) -> None:
    """Three MultiPowerLaw 25M schedules: a draw of three runs holds all three with probability 2/9, and many of the
    runs resamples end where their schedules cannot identify the law (unusable). ``auto`` then uses the wild cluster
    bootstrap, which keeps every run, and says why; ``runs`` asked for by name stays ``runs``."""
    from mixlaw.schedules import Schedule
    from mixlaw.schedules.multi_power import multi_power_features

    folder = external / "MultiPowerLaw" / "loss_curve_repo" / "csv_25"
    specs = {
        "cosine_24000": "cosine:peak=3e-4,steps=24000,warmup=2160,final=3e-5",
        "constant_24000": "constant:peak=3e-4,steps=24000,warmup=2160",
        "wsdcon_9": "multistep:peak=3e-4,steps=16000,warmup=2160,milestones=8000,gamma=0.3",
    }
    parts = []
    for name, spec in specs.items():
        d = pd.read_csv(folder / f"{name}.csv").iloc[::8]
        s = Schedule.parse(spec)
        x = multi_power_features(s.lrs(), d["step"].to_numpy(), eta0=s.eta0, n_bins=16, longest=72000)
        parts.append(pd.DataFrame(x).assign(run_id=name, loss=d["loss"].to_numpy()))
    df = pd.concat(parts, ignore_index=True)
    law = get_law("multi_power", n_bins=16)
    opts = FitOptions(
        solver=SolverOptions(max_iter=500), bootstrap=BootstrapOptions(resamples=12, calibrate=False), seed=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the runs resamples' convergence notes
        auto = fit_law(law, df, opts)
        runs = fit_law(law, df, opts.replace(bootstrap=opts.bootstrap.replace(scheme="runs")))
    assert runs.settings["bootstrap_scheme"] == "runs" and runs.interval_status.startswith("weak")
    assert runs.settings["bootstrap_fallback"] is None
    assert auto.settings["bootstrap_scheme"] == "wild" and auto.interval_status == "ok"
    assert auto.n_failed_resamples < runs.n_failed_resamples
    why = auto.settings["bootstrap_fallback"]
    assert f"the runs bootstrap left {runs.n_failed_resamples} of 12 resamples unusable" in why
    assert "auto: the runs bootstrap left" in auto.report()
    from mixlaw.fit.predict import predict_point
    from mixlaw.fit.result import FitResult

    again = FitResult.from_json(auto.to_json())  # saved and read back: the reason comes with the scheme
    assert again.settings["bootstrap_fallback"] == why and again.to_dict()["bootstrap"]["fallback"] == why
    at = {c: float(df[c].iloc[-1]) for c in law.inputs}
    assert predict_point(again, at)["scheme_note"] == f"auto: {why}"
    lo, hi = auto.ci()["L0"]
    assert lo <= auto.params["L0"] <= hi
