"""Fits the data cannot identify say so (issue 9 item 5, issue 12 item 8): fewer rows than parameters, or a
constant input the law needs variation in, give status ``unidentifiable`` with a one-line reason naming the
parameters and the column; a well-posed fit stays ``ok`` and converged."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.errors import IdentifiabilityWarning
from mixlaw.fit import fit_law
from mixlaw.fit.result import FitResult, FitStatus
from mixlaw.fit.uncertainty.identify import assess
from mixlaw.laws import get_law
from mixlaw.options import FitOptions, StartOptions

TRUTH = {"A": 400.0, "B": 1500.0, "E": 1.8, "alpha": 0.34, "beta": 0.3}


def _grid(n_sizes: int, n_tokens: int, seed: int, *, noise: float = 0.002) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    N, D = np.meshgrid(np.geomspace(1e7, 1e9, n_sizes), np.geomspace(1e9, 1e11, n_tokens))
    N, D = N.ravel(), D.ravel()
    law = get_law("chinchilla")
    y = np.asarray(law.evaluate({"n_params": N, "tokens": D}, TRUTH)) * np.exp(noise * rng.standard_normal(N.size))
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(N.size)], "n_params": N, "tokens": D, "loss": y})


def _fit_recording(
    df: pd.DataFrame, options: FitOptions, input_map: dict[str, str] | None = None
) -> tuple[FitResult, list[warnings.WarningMessage]]:
    """Fit and keep the warnings (an unidentifiable fit may also sit at a bound: both are said)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_law("chinchilla", df, options, input_map=input_map)
    return res, list(caught)


@pytest.mark.parametrize("n_rows", [1, 2])
def test_fewer_rows_than_parameters_is_unidentifiable(n_rows: int) -> None:
    df = _grid(4, 4, seed=1).iloc[:n_rows]
    res, caught = _fit_recording(df, FitOptions(starts=StartOptions(n_polish=4)))
    ident = [w for w in caught if issubclass(w.category, IdentifiabilityWarning)]
    assert len(ident) == 1 and "for 5 parameters" in str(ident[0].message)
    assert res.status is FitStatus.UNIDENTIFIABLE
    assert not res.converged
    assert res.message.startswith(f"{n_rows} row")
    assert "\n" not in res.message
    info = res.identifiability
    assert info is not None and info["status"] == "unidentifiable"
    assert info["rank"] <= n_rows < 5
    # A null space of dimension >= 5 - n_rows: at least that many parameters carry it, and the message names them.
    assert set(info["undetermined"]) <= set(TRUTH) and len(info["undetermined"]) >= 5 - n_rows
    assert all(p in res.message for p in info["undetermined"])
    assert "unidentifiable" in res.report()


def test_constant_n_params_names_the_column_and_the_parameters() -> None:
    df = _grid(4, 6, seed=2).assign(n_params=3e8)
    df["loss"] = np.asarray(
        get_law("chinchilla").evaluate(
            {"n_params": df["n_params"].to_numpy(), "tokens": df["tokens"].to_numpy()}, TRUTH
        )
    )
    res, caught = _fit_recording(
        df.rename(columns={"n_params": "N"}), FitOptions(starts=StartOptions(n_polish=4)), input_map={"n_params": "N"}
    )
    assert any(issubclass(w.category, IdentifiabilityWarning) for w in caught)
    assert res.status is FitStatus.UNIDENTIFIABLE
    assert "'N' is constant" in res.message  # the table's column name, not only the law's input
    info = res.identifiability
    assert info is not None
    # E, A and alpha enter only as E + A / N^alpha at one N: a 2-dimensional null space among them.
    assert set(info["undetermined"]) == {"A", "E", "alpha"}
    assert info["rank"] == 3 and info["constant_inputs"] == ["N"]
    assert info["solver_status"] in ("converged", "stalled", "max_iter")
    # B and beta are still determined by the token axis: they are not blamed.
    assert "B" not in res.message.split("separate")[1]


def test_a_well_posed_fit_stays_ok_and_reports_its_conditioning() -> None:
    df = _grid(5, 5, seed=3)
    res = fit_law("chinchilla", df)
    assert res.status is FitStatus.CONVERGED
    info = res.identifiability
    assert info is not None and info["status"] == "ok"
    assert info["rank"] == 5 and info["undetermined"] == [] and np.isfinite(info["condition"])
    assert "identify   ok" in res.report()
    back = FitResult.from_json(res.to_json())
    assert back.identifiability == info and back == res


def test_a_weak_direction_is_named_without_changing_the_status() -> None:
    # A power law in tokens over a factor 1.02 of range: E and A trade off almost exactly.
    law = get_law("power_law")
    x = np.geomspace(1e9, 1.02e9, 12)
    params = {"E": 1.5, "A": 20.0, "alpha": 0.2}
    u = law.to_internal(params)
    y = np.asarray(law.evaluate({"tokens": x}, params))
    info = assess(law, {"tokens": x}, y, u)
    assert info["status"] in ("weak", "unidentifiable")
    assert info["condition"] > 1e8
    wide = assess(law, {"tokens": np.geomspace(1e6, 1e12, 12)}, y, u)
    assert wide["condition"] < info["condition"] / 1e3


def test_epoch_reproduction_is_identified(external) -> None:
    raw = pd.read_csv(external / "analyzing-chinchilla" / "svg_extracted_data.csv")
    raw = raw.sort_values("loss", kind="stable").iloc[:-5]
    epoch = pd.DataFrame({"n_params": raw["Model Size"].to_numpy(),
                          "tokens": raw["Training FLOP"].to_numpy() / (6 * raw["Model Size"].to_numpy()),
                          "loss": raw["loss"].to_numpy()})  # fmt: skip
    res = fit_law("chinchilla", epoch)
    assert res.status is FitStatus.CONVERGED
    assert res.params["alpha"] == pytest.approx(0.34731, rel=0.005)
    info = res.identifiability
    assert info is not None and info["status"] == "ok" and info["rank"] == 5
    assert 1e3 < info["condition"] < 1e7  # the A–alpha / B–beta valleys of this law, but determined


def test_cli_fit_prints_and_saves_the_reason(tmp_path) -> None:
    from mixlaw.cli import app

    df = _grid(3, 3, seed=4).assign(n_params=1e8)
    path = tmp_path / "const.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "fit.json"
    r = CliRunner().invoke(app, ["fit", str(path), "--law", "chinchilla", "--out", str(out), "--n-polish", "4"])
    assert r.exit_code == 0, r.output
    assert "unidentifiable" in r.output and "'n_params' is constant" in r.output
    saved = json.loads(out.read_text())
    assert saved["status"] == "unidentifiable"
    assert saved["identifiability"]["constant_inputs"] == ["n_params"]
