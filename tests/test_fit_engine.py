"""The fitting engine: every registered law is recovered, fits are deterministic and order-invariant, failures
are loud, and the published Chinchilla replication is reproduced on the real Epoch data."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import ConvergenceWarning, FitError, InputError, NotFittedError
from mixlaw.fit import FitResult, Fitter, fit_law, objective_at
from mixlaw.fit.evaluate.validate import validate_law
from mixlaw.laws import get_law, law_names
from mixlaw.options import BootstrapOptions, FitOptions, SolverOptions, StartOptions


def _simulate(name: str, seed: int, n: int = 160, noise: float = 1e-4) -> tuple[pd.DataFrame, dict[str, float]]:
    rng = np.random.default_rng(seed)
    law = get_law(name)
    x = law.example_inputs(n, rng)
    y = law.evaluate(x, law.example_params)
    if law.fit_space == "log":
        y = y * np.exp(noise * rng.standard_normal(n))
    else:
        y = y + noise * np.std(y) * rng.standard_normal(n)
    df = pd.DataFrame(x)
    df["loss"] = y
    df["run_id"] = [f"r{i}" for i in range(n)]
    return df, dict(law.example_params)


@pytest.mark.parametrize("name", law_names())
def test_every_law_recovers_its_example_params(name: str) -> None:
    # Multiplicative noise of 2e-5: small, but it matters — the multi-power law's loss-drop shape (C, beta, gamma)
    # is only weakly identified and drifts by ~12 % at 1e-4 while the fit objective is below the truth's (a
    # data limit, not an optimiser one). Every law must come back to a few per cent at this noise level.
    df, truth = _simulate(name, seed=11, noise=2e-5)
    law = get_law(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # boundary/convergence notes are not the point here
        res = fit_law(
            law, df, FitOptions(starts=StartOptions(use_guess=False), seed=0)
        )  # the design only: guess() is data-informed
    # The fit started from the law's own design only, away from the truth: every start is more than 10 % off
    # (relative, in internal units, in at least one coordinate), so recovering the truth is the optimiser's work.
    assert res.settings["n_grid"] == res.n_starts == len(law.start_design()) < 100_000
    starts = res.starts[[f"start_{p}" for p in law.flat_names]].to_numpy()
    U = np.stack([law.to_internal(law.unflatten(row)) for row in starts])
    u_true = law.to_internal(truth)
    assert (np.abs(U - u_true) / (0.1 + np.abs(u_true))).max(axis=1).min() > 0.1
    pred = res.predict(df)
    truth_pred = law.evaluate({k: df[k].to_numpy() for k in law.inputs}, truth)
    # The fitted law reproduces the noiseless truth to the noise level everywhere it was fitted ...
    scale = np.abs(truth_pred).max()
    assert np.max(np.abs(pred - truth_pred)) <= 5e-3 * scale
    # ... and the parameters themselves come back (identifiable laws: all of them, to a few per cent).
    for p, v in truth.items():
        tol = 0.02 * max(1.0, float(np.max(np.abs(v))))
        assert res.params[p] == pytest.approx(v, rel=0.05, abs=tol), (p, res.params[p], v)


@pytest.mark.parametrize("name", ["chinchilla", "power_law", "data_constrained"])
def test_fit_is_invariant_to_row_order(name: str) -> None:
    df, _ = _simulate(name, seed=3, noise=3e-3)
    a = fit_law(name, df, FitOptions(seed=1))
    b = fit_law(name, df.sample(frac=1.0, random_state=7).reset_index(drop=True), FitOptions(seed=1))
    for p in a.params:
        assert a.params[p] == pytest.approx(b.params[p], rel=1e-6, abs=1e-9)
    assert a.objective == pytest.approx(b.objective, rel=1e-9)


def test_same_random_state_gives_identical_result() -> None:
    df, _ = _simulate("chinchilla", seed=5, noise=5e-3)
    opts = FitOptions(starts=StartOptions(n_random=50), bootstrap=BootstrapOptions(resamples=30), seed=42)
    a = fit_law("chinchilla", df, opts)
    b = fit_law("chinchilla", df, opts)
    assert a == b
    c = fit_law("chinchilla", df, opts.replace(seed=43))
    assert c.bootstrap_params is not None and not c.bootstrap_params.equals(a.bootstrap_params)


def test_json_round_trip_is_exact(tmp_path) -> None:
    df, _ = _simulate("power_law", seed=2, noise=1e-3)
    res = fit_law("power_law", df, FitOptions(bootstrap=BootstrapOptions(resamples=20), seed=0))
    back = FitResult.from_json(res.to_json())
    assert back == res
    assert back.ci() == res.ci()
    np.testing.assert_allclose(back.predict(df), res.predict(df))


def test_non_converging_fit_warns_with_law_and_parameter_named() -> None:
    df, _ = _simulate("chinchilla", seed=4, noise=1e-2)
    with pytest.warns(ConvergenceWarning, match=r"law 'chinchilla'.*parameter '(A|B|E|alpha|beta)'"):
        res = fit_law("chinchilla", df, FitOptions(solver=SolverOptions(max_iter=2), seed=0))
    assert res.status.value == "max_iter"
    assert "max_iter" in res.report() or "did not converge" in res.report()


def test_every_start_is_recorded() -> None:
    df, _ = _simulate("chinchilla", seed=8, noise=1e-3)
    res = fit_law("chinchilla", df, FitOptions(starts=StartOptions(n_random=25, n_polish=10), seed=0))
    assert res.n_starts == 4500 + 25
    assert set(res.starts["status"]) <= {"screened", "converged", "stalled", "merged", "max_iter", "failed"}
    assert (res.starts["status"] != "screened").sum() == 10
    assert res.n_converged >= 1
    assert np.isfinite(res.starts["initial_objective"]).all()


def test_bad_inputs_are_input_errors() -> None:
    df, _ = _simulate("chinchilla", seed=1)
    with pytest.raises(InputError, match="n_params"):
        fit_law("chinchilla", df.drop(columns="n_params"))
    bad = df.copy()
    bad.loc[3, "loss"] = -1.0
    with pytest.raises(InputError, match=r"table:4:loss"):
        fit_law("chinchilla", bad)
    bad = df.copy()
    bad.loc[5, "tokens"] = np.nan
    with pytest.raises(InputError, match=r"table:6:tokens"):
        fit_law("chinchilla", bad)
    with pytest.raises(InputError, match="unknown law"):
        fit_law("no_such_law", df)
    with pytest.raises(NotFittedError):
        _ = Fitter("chinchilla").result


def test_all_starts_non_finite_is_a_fit_error() -> None:
    df = pd.DataFrame({"tokens": [0.0, 0.0], "loss": [1.0, 2.0]})  # x^(-alpha) at x = 0: nothing is finite
    with pytest.raises(FitError, match="power_law"):
        fit_law("power_law", df)


# --------------------------------------------------------------------------- published reproductions


@pytest.fixture(scope="module")
def epoch(external) -> pd.DataFrame:
    raw = pd.read_csv(external / "analyzing-chinchilla" / "svg_extracted_data.csv")
    raw = raw.sort_values("loss", kind="stable").iloc[:-5]  # the published recipe drops the 5 highest losses
    return pd.DataFrame(
        {
            "run_id": [f"p{i}" for i in range(len(raw))],
            "n_params": raw["Model Size"].to_numpy(),
            "tokens": raw["Training FLOP"].to_numpy() / (6 * raw["Model Size"].to_numpy()),
            "loss": raw["loss"].to_numpy(),
        }
    )


def test_epoch_replication_reproduces_published_fit(epoch: pd.DataFrame) -> None:
    res = fit_law("chinchilla", epoch)  # Hoffmann's 4,500-start grid, Huber δ = 1e-3, sum reduction
    published = {"A": 477.84, "B": 2143.86, "E": 1.8172, "alpha": 0.34731, "beta": 0.36718}
    for p, v in published.items():
        assert res.params[p] == pytest.approx(v, rel=0.005), p
    assert res.objective <= 0.0010183
    assert res.status.value == "converged"
    # The Hoffmann parameters are a worse fit of the same data (laws.md §14).
    hoffmann = {"A": math.exp(6.0073404), "B": math.exp(6.0179186), "E": math.exp(0.5267228),
                "alpha": 0.33917084, "beta": 0.2849083}
    assert objective_at("chinchilla", epoch, hoffmann) > res.objective
    assert objective_at("chinchilla", epoch, res.params) == pytest.approx(res.objective, rel=1e-12)


def test_epoch_bootstrap_intervals_near_published(epoch: pd.DataFrame) -> None:
    # The replication resamples the 240 points (a pairs bootstrap): its scheme, not the default for a fixed design.
    res = fit_law("chinchilla", epoch, FitOptions(bootstrap=BootstrapOptions(resamples=300, scheme="runs"), seed=42))
    ci = res.ci()
    assert res.n_failed_resamples <= 3
    # Published 95 % CIs (4,000 resamples): alpha 0.317-0.373, beta 0.331-0.415, E 1.769-1.871.
    for p, (lo, hi) in {"alpha": (0.317, 0.373), "beta": (0.331, 0.415), "E": (1.769, 1.871)}.items():
        width = hi - lo
        assert ci[p][0] == pytest.approx(lo, abs=0.15 * width), p
        assert ci[p][1] == pytest.approx(hi, abs=0.15 * width), p


def test_data_constrained_published_point_checks() -> None:
    law = get_law("data_constrained", tie_exponents=True)
    params = {"A": math.exp(6.255414), "B": math.exp(7.3049974), "E": math.exp(0.6254804), "alpha": 0.3526596,
              "R_D_star": 15.387756, "R_N_star": 5.309743}
    x = {"n_params": np.array([6.34e9, 8.67e9]), "tokens": np.array([242e9, 178e9]),
         "unique_tokens": np.array([25e9, 25e9])}
    np.testing.assert_allclose(law.evaluate(x, params), [2.2256440889984477, 2.2269634075087867], rtol=1e-12)


def test_leave_largest_out_validation_on_epoch(epoch: pd.DataFrame) -> None:
    val = validate_law("chinchilla", epoch.assign(size=np.round(np.log10(epoch["n_params"]), 1)),
                       scheme="leave-largest-out", size_column="size")
    assert len(val.points) >= 1
    assert val.mre < 0.05
    assert set(val.folds["status"]) == {"converged"}
    roll = validate_law("chinchilla", epoch, scheme="rollout", order_column="tokens", quantile=0.8)
    assert 0 < roll.mre < 0.05
    assert json.loads(json.dumps(roll.to_dict(), default=float))["scheme"] == "rollout"


def test_fit_batch_matches_individual_fits() -> None:
    """Many targets over one design in one batched solve give the same answers as separate fits."""
    from mixlaw.fit import fit_batch

    law = get_law("power_law")
    rng = np.random.default_rng(21)
    x = pd.DataFrame(law.example_inputs(40, rng))
    y = law.evaluate({"tokens": x["tokens"].to_numpy()}, law.example_params)
    Y = y * np.exp(2e-3 * rng.standard_normal((12, 40)))
    batch = fit_batch(law, x, Y, starts=[law.example_params, {"A": 10.0, "E": 1.0, "alpha": 0.5}])
    assert list(batch.status) == ["converged"] * 12
    for b in (0, 5, 11):
        single = fit_law(law, x.assign(loss=Y[b]))
        for p, v in single.params.items():
            assert batch.row(b)[p] == pytest.approx(v, rel=1e-6), (b, p)
        assert batch.objective[b] == pytest.approx(single.objective, rel=1e-8)
    with pytest.raises(InputError, match="columns"):
        fit_batch(law, x, Y[:, :10], starts=[law.example_params])
