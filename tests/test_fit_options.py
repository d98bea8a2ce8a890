"""The option groups of an engine fit: validated once, frozen, picklable, recorded in the fit's settings as before,
and reached from the CLI's unchanged flags."""

from __future__ import annotations

import dataclasses
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.errors import InputError
from mixlaw.fit import fit_law
from mixlaw.options import BootstrapOptions, FitOptions, ObjectiveOptions, SolverOptions, StartOptions


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: ObjectiveOptions(loss="l1"), "loss"),
        (lambda: ObjectiveOptions(delta=0.0), "delta"),
        (lambda: ObjectiveOptions(delta=float("nan")), "delta"),
        (lambda: StartOptions(n_polish=0), "n_polish"),
        (lambda: StartOptions(n_random=-1), "n_random"),
        (lambda: StartOptions(strategy="all"), "strategy"),
        (lambda: StartOptions(use_grid="yes"), "use_grid"),
        (lambda: StartOptions(given={"A": 1.0}), "given"),
        (lambda: SolverOptions(max_iter=0), "max_iter"),
        (lambda: SolverOptions(ftol=-1.0), "ftol"),
        (lambda: BootstrapOptions(resamples=-3), "resamples"),
        (lambda: BootstrapOptions(resamples=2.5), "resamples"),
        (lambda: BootstrapOptions(scheme="points"), "bootstrap_scheme"),
        (lambda: BootstrapOptions(refit_starts=0), "refit_starts"),
        (lambda: BootstrapOptions(calibrate="auto"), "calibrate"),
        (lambda: FitOptions(seed=-1), "seed"),
        (lambda: FitOptions(bootstrap=200), "bootstrap"),  # a count where the group belongs
    ],
)
def test_a_bad_field_is_one_line_naming_it(make, field: str) -> None:
    with pytest.raises(InputError) as e:
        make()
    assert e.value.column == field and "\n" not in str(e.value) and str(e.value).endswith(f"in {field}")


def test_groups_are_frozen_picklable_and_replaced_with_validation() -> None:
    opts = FitOptions(starts=StartOptions(given=[{"A": 1.0}], n_polish=4), bootstrap=BootstrapOptions(resamples=9),
                      seed=5)  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.seed = 6  # type: ignore[misc]
    assert isinstance(opts.starts.given, tuple)  # a given list is copied: the caller's list cannot change the fit
    assert pickle.loads(pickle.dumps(opts)) == opts  # worker processes get the same options
    more = opts.replace(solver=opts.solver.replace(max_iter=50))
    assert more.solver.max_iter == 50 and opts.solver.max_iter is None and more.bootstrap is opts.bootstrap
    with pytest.raises(InputError, match="n_polish"):
        opts.starts.replace(n_polish=0)


def _power(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = np.geomspace(1e6, 1e9, 12)
    y = (1.8 + 40.0 * x**-0.25) * np.exp(0.004 * rng.standard_normal(x.size))
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(x.size)], "tokens": x, "loss": y})


def test_the_fit_records_the_same_settings_keys_and_honours_every_group() -> None:
    df = _power(0)
    opts = FitOptions(
        objective=ObjectiveOptions(loss="l2"),
        starts=StartOptions(n_random=3, n_polish=5),
        solver=SolverOptions(max_iter=400, ftol=1e-10),
        bootstrap=BootstrapOptions(resamples=6, scheme="rows", refit_starts=2),
        seed=11,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_law("power_law", df, opts)
    s = res.settings
    assert (res.loss, s["n_random_starts"], s["n_polish"], s["max_iter"], s["ftol"]) == ("l2", 3, 5, 400, 1e-10)
    assert (s["random_state"], s["bootstrap_starts"], s["bootstrap_scheme"], res.n_bootstrap) == (11, 2, "rows", 6)
    assert res.calibration is None  # fit_law leaves an unset calibrate off
    with pytest.raises(InputError, match="expected options to be a FitOptions"):
        fit_law("power_law", df, {"bootstrap": 3})  # type: ignore[arg-type]  # the old keywords, as a dict


def test_api_fit_calibrates_a_bootstrapped_fit_unless_told_not_to() -> None:
    from mixlaw import api

    df = _power(1)
    boot = BootstrapOptions(resamples=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on = api.fit(df, "power_law", FitOptions(bootstrap=boot, seed=0))
        off = api.fit(df, "power_law", FitOptions(bootstrap=boot.replace(calibrate=False), seed=0))
    assert on.calibration is not None and off.calibration is None
    assert on.params == off.params  # the calibration draws after the bootstrap: the fit itself is the same


def test_the_cli_reports_a_bad_value_under_its_flag(tmp_path) -> None:
    from mixlaw.cli import app

    path = tmp_path / "t.csv"
    _power(2).to_csv(path, index=False)
    for flags, flag in ((["--n-polish", "0"], "--n-polish"), (["--resample", "bogus"], "--resample"),
                        (["--loss", "l3"], "--loss")):  # fmt: skip
        r = CliRunner().invoke(app, ["fit", str(path), "--law", "power_law", *flags])
        assert r.exit_code == 1 and f"error: {flag}: expected" in r.output and "Traceback" not in r.output
