"""A prediction outside the fitted range of an input says by how much (issue 9 item 5): in ``mixlaw predict``
(table and JSON, an ``extrapolation`` field per row) and in ``validate``'s held-out rows."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.fit import fit_law
from mixlaw.fit.evaluate.extrapolation import extrapolation, texts
from mixlaw.laws import get_law

TRUTH = {"A": 400.0, "B": 1500.0, "E": 1.8, "alpha": 0.34, "beta": 0.3}


def _table(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    N, D = np.meshgrid(np.geomspace(1e7, 1.3e9, 4), np.geomspace(1e9, 1e11, 4))
    N, D = N.ravel(), D.ravel()
    y = np.asarray(get_law("chinchilla").evaluate({"n_params": N, "tokens": D}, TRUTH))
    y = y * np.exp(0.002 * rng.standard_normal(N.size))
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(N.size)], "n_params": N, "tokens": D, "loss": y})


def test_factors_sides_and_the_additive_scale() -> None:
    ranges = {"n_params": [1e7, 1.3e9], "tokens": [1e9, 1e11], "r": [-1.0, 1.0]}
    x = {"n_params": np.array([9.1e10, 1e8, 1e8, 1.3e9 * (1 + 1e-12)]),
         "tokens": np.array([3e11, 1e10, 2.5e8, 1e11]), "r": np.array([0.0, 0.0, 0.0, 3.0])}  # fmt: skip
    out = extrapolation(ranges, x)
    first = {e["input"]: e for e in out[0]["inputs"]}
    assert first["n_params"]["factor"] == pytest.approx(70.0) and first["n_params"]["side"] == "above"
    assert first["tokens"]["factor"] == pytest.approx(3.0)
    assert out[0]["text"] == (
        "×70 in n_params beyond the largest fitted (1.3e+09), ×3 in tokens beyond the largest fitted (1e+11)"
    )
    assert out[1] is None  # inside on every input
    assert out[2]["inputs"][0]["side"] == "below" and out[2]["inputs"][0]["factor"] == pytest.approx(4.0)
    assert "below the smallest fitted (1e+09)" in out[2]["text"]
    # A rounding hair past the range is inside; a range through zero is measured by difference.
    last = out[3]["inputs"]
    assert [e["input"] for e in last] == ["r"] and last[0]["factor"] is None and last[0]["distance"] == 2.0
    assert texts(out)[1] == "" and "+2 in r" in texts(out)[3]


def test_mixture_shares_are_measured_by_difference() -> None:
    """A share of 0 is 0.011 below the smallest fitted share 0.011, not "×1e+20" below it (a mixture optimum at a
    vertex of the simplex); sizes keep their factor."""
    ranges = {"w_docs": [0.0111, 0.6], "ratio": [0.125, 0.75], "n_params": [1.3e4, 1.13e5]}
    x = {"w_docs": np.array([1e-22, 0.7]), "ratio": np.array([0.5, 1.0]), "n_params": np.array([2.5272e5, 5e4])}
    a, b = extrapolation(ranges, x)
    by = {e["input"]: e for e in a["inputs"]}
    assert by["w_docs"]["factor"] is None and by["w_docs"]["distance"] == pytest.approx(0.0111)
    assert by["n_params"]["factor"] == pytest.approx(2.2365, rel=1e-3)
    assert a["text"] == (
        "×2.24 in n_params beyond the largest fitted (1.13e+05), −0.0111 in w_docs below the smallest fitted (0.0111)"
    )
    assert "+0.1 in w_docs beyond the largest fitted (0.6)" in b["text"] and "+0.25 in ratio" in b["text"]


def test_mix_optimize_says_how_far_its_optimum_extrapolates() -> None:
    from pathlib import Path

    runs = Path(__file__).resolve().parents[1] / "examples" / "mixture_probe" / "runs.csv"
    args = ["mix", "optimize", str(runs), "--law", "camel", "--domains", "general,legal,docs,bio,code", "--target",
            "loss_general", "--final", "--where", "n_params < 2e5", "--target-size", "252720"]
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    far = json.loads(r.stdout)["extrapolation"]["loss_general"]
    assert far.startswith("×2.23 in n_params beyond the largest fitted (1.13e+05)")  # 252720 / 113184
    text = CliRunner().invoke(app, args)
    assert "extrapolates: ×2.23 in n_params" in text.output


def test_predict_json_and_table_say_how_far(tmp_path) -> None:
    df = _table(seed=11)
    res = fit_law("chinchilla", df)
    fit_json = tmp_path / "fit.json"
    fit_json.write_text(res.to_json())
    runner = CliRunner()
    r = runner.invoke(app, ["predict", str(fit_json), "--at", "n_params=9.1e10,tokens=3e11", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["extrapolation"]["text"].startswith("×70 in n_params beyond the largest fitted (1.3e+09)")
    r = runner.invoke(app, ["predict", str(fit_json), "--at", "n_params=1e8,tokens=1e10", "--json"])
    assert json.loads(r.stdout)["extrapolation"] is None
    new = pd.DataFrame({"run_id": ["in", "far"], "n_params": [1e8, 9.1e10], "tokens": [1e10, 1e10], "loss": [2.5, 2.2]})
    path = tmp_path / "new.csv"
    new.to_csv(path, index=False)
    r = runner.invoke(app, ["predict", str(fit_json), "--table", str(path), "--json"])
    rows = {row["run_id"]: row for row in json.loads(r.stdout)["rows"]}
    assert rows["in"]["extrapolation"] is None
    assert rows["far"]["extrapolation"]["inputs"][0]["factor"] == pytest.approx(70.0)
    r = runner.invoke(app, ["predict", str(fit_json), "--table", str(path)], terminal_width=250)
    assert r.exit_code == 0 and "extrapolation" in r.stdout and "×70 in n_params" in r.stdout


def test_validate_rows_carry_the_distance() -> None:
    from mixlaw.fit.evaluate.validate import validate_law

    val = validate_law("chinchilla", _table(seed=12), scheme="leave-largest-out")
    assert "extrapolation" in val.points.columns
    ex = val.points["extrapolation"].tolist()
    sizes = np.geomspace(1e7, 1.3e9, 4)
    factor = f"×{sizes[-1] / sizes[-2]:.3g} in n_params beyond the largest fitted ({sizes[-2]:.3g})"
    assert len(ex) == 4 and all(e == factor for e in ex)  # held out: the largest size, fitted up to the next
