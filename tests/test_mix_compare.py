"""``mix compare``: the pinned JSON shape, prediction intervals that cover held-out runs, tables with empty cells."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.api.mixture import compare
from mixlaw.cli import app
from mixlaw.laws import get_law

runner = CliRunner()
DOMS = ("web", "code", "math", "books")
SLIM = ("arxiv", "book", "c4", "github", "commoncrawl", "stackexchange", "wikipedia")
NOISE = 4e-3


def _simulated(n_mix: int, seed: int) -> pd.DataFrame:
    """``n_mix`` mixtures at one size from dml with log-normal noise of ``NOISE``."""
    law = get_law("dml", domains=DOMS)
    params = {"c": 2.1, "k": 0.9, "t": [-1.6, 0.7, -0.9]}
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(len(DOMS), 1.0), size=n_mix)
    x = {f"w_{d}": w[:, j] for j, d in enumerate(DOMS)}
    y = law.evaluate(x, params) * np.exp(NOISE * rng.standard_normal(n_mix))
    df = pd.DataFrame({"run_id": [f"r{i}" for i in range(n_mix)], "n_params": 1e8, **x, "loss": y})
    df["w_books"] = 1.0 - df[["w_web", "w_code", "w_math"]].sum(axis=1)
    return df


def _json(res: Any) -> dict[str, Any]:
    assert res.exit_code == 0, res.output
    return json.loads(next(ln for ln in res.output.splitlines() if ln.startswith("{")))


def test_compare_json_shape_is_pinned(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    _simulated(16, seed=1).to_csv(path, index=False)
    argv = ["mix", "compare", str(path), "--domains", ",".join(DOMS), "--target", "loss", "--holdout"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # convergence notes of small fits
        out = _json(runner.invoke(app, [*argv, "mixtures:2", "--models", "dml,blind", "--bootstrap", "8", "--json"]))
    assert set(out) == {"holdout", "domains", "bootstrap", "level", "targets"}
    assert out["bootstrap"] == 8 and out["level"] == 0.95 and out["domains"] == list(DOMS)
    (t,) = out["targets"]
    assert set(t) == {"target", "n_missing", "models"} and t["target"] == "loss" and t["n_missing"] == 0
    for m in t["models"]:
        # The keys, plus n_parameters, n_predicted and the interval count and reasons; nothing else.
        assert set(m) == {
            "model", "n_parameters", "n_train", "n_test", "n_predicted", "mae", "mre", "bias", "spearman",
            "coverage", "n_interval", "no_interval", "interval_method", "predictions",
        }  # fmt: skip
        assert isinstance(m["n_interval"], int) and isinstance(m["no_interval"], list)
        assert isinstance(m["model"], str) and isinstance(m["n_train"], int) and isinstance(m["n_test"], int)
        for k in ("mae", "mre", "bias", "spearman", "coverage"):
            assert isinstance(m[k], float), (m["model"], k, m[k])
        assert m["n_test"] == 16 and m["n_train"] == 8 and len(m["predictions"]) == 16
        for p in m["predictions"]:
            assert set(p) == {"run_id", "predicted", "lo", "hi", "observed"} and isinstance(p["run_id"], str)
            assert all(isinstance(p[k], float) for k in ("predicted", "lo", "hi", "observed"))
    assert [m["n_parameters"] for m in t["models"]] == [2 + len(DOMS) - 1, 1]


def test_prediction_intervals_cover_held_out_mixtures_at_about_their_level() -> None:
    df = _simulated(48, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        out = compare(df, domains=DOMS, targets=["loss"], holdout="mixtures:4", models="dml,blind", bootstrap=30)
    dml, blind = out["targets"][0]["models"]
    assert dml["n_predicted"] == 48
    lo = np.array([p["lo"] for p in dml["predictions"]])
    hi = np.array([p["hi"] for p in dml["predictions"]])
    pred = np.array([p["predicted"] for p in dml["predictions"]])
    obs = np.array([p["observed"] for p in dml["predictions"]])
    assert (lo < pred).all() and (pred < hi).all()
    assert dml["coverage"] == pytest.approx(np.mean((lo <= obs) & (obs <= hi)))
    # 48 held-out points, nominal 95 %: under 80 % would be a broken interval (binomial p < 1e-4).
    assert 0.8 <= dml["coverage"] <= 1.0
    # The width matches the noise: a 95 % interval is about ±2σ (relative), not orders of magnitude wider.
    rel_half = np.median((hi - lo) / 2 / pred)
    assert 1.5 * NOISE < rel_half < 6 * NOISE, rel_half
    blind_half = np.median([(p["hi"] - p["lo"]) / 2 / p["predicted"] for p in blind["predictions"]])
    assert blind_half > 2 * rel_half  # the mixture-blind baseline knows less, and its interval says so
    assert blind["coverage"] >= 0.8


def test_slimpajama_csv_with_empty_cells_loads_through_the_cli(external: Path) -> None:
    """The raw SlimPajama table has empty ``github_loss`` cells: those rows are left out for that target only."""
    path = external / "Explaining-Data-Mixing-Scaling-Laws" / "data" / "dmsl_llm_slimpajama.csv"
    maps = ["n_params=model_size", "tokens=n_tokens", "loss_github=github_loss", "loss_c4=c4_loss"]
    maps += [f"w_{d}=weight_{d}" for d in SLIM]
    argv = ["mix", "compare", str(path), "--domains", ",".join(SLIM), "--holdout", "mixtures:3"]
    argv += ["--target", "loss_github", "--target", "loss_c4", "--models", "blind", "--bootstrap", "0"]
    argv += ["--where", "n_params == 3.1e8 and tokens == 1.1998e10"]
    argv += [x for m in maps for x in ("--map", m)]
    out = _json(runner.invoke(app, [*argv, "--json"]))
    github, c4 = out["targets"]
    assert github["n_missing"] == 1 and c4["n_missing"] == 0  # row 744 of the file has no github_loss
    assert github["models"][0]["n_test"] == 59 and c4["models"][0]["n_test"] == 60
    assert all(math.isfinite(p["observed"]) for p in github["models"][0]["predictions"])
    res = runner.invoke(app, argv)
    assert res.exit_code == 0, res.output
    assert "loss_github: 1 row(s) without a value left out for this target" in res.output


def test_compare_refuses_a_negative_bootstrap_and_a_target_without_values(tmp_path: Path) -> None:
    df = _simulated(8, seed=0).assign(loss_empty=np.nan)
    with pytest.raises(Exception, match=r"--bootstrap -1: expected a non-negative number"):
        compare(df, domains=DOMS, targets=["loss"], holdout="mixtures:2", models="blind", bootstrap=-1)
    with pytest.raises(Exception, match=r"--target loss_empty: no row of table has a value"):
        compare(df, domains=DOMS, targets=["loss_empty"], holdout="mixtures:2", models="blind")


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        ({"w_code": -0.1, "w_web": "+0.1"}, r"runs\.csv:4:w_code|row 3.*w_code"),
        ({"w_web": "+0.01"}, r"runs\.csv.*(row 3|:4).*sum|sum.*(row 3|:4)"),
    ],
)
def test_bad_mixture_rows_in_a_file_are_one_line_errors_naming_row_and_column(
    tmp_path: Path, edit: dict[str, Any], match: str
) -> None:
    import re

    df = _simulated(8, seed=0)
    for col, v in edit.items():
        df.loc[2, col] = df.loc[2, col] + float(v) if isinstance(v, str) else v
    path = tmp_path / "runs.csv"
    df.to_csv(path, index=False)
    argv = ["mix", "compare", str(path), "--domains", ",".join(DOMS), "--target", "loss", "--holdout", "mixtures:2"]
    res = runner.invoke(app, [*argv, "--models", "blind"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and re.search(match, lines[0]), res.output
