"""``mixlaw mix compare`` / ``mixlaw mix optimize``: JSON shapes pinned, bad input is one line naming what is wrong."""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.decide.mixture.checks import check_mixture
from mixlaw.errors import InputError
from mixlaw.laws import get_law

runner = CliRunner()
DOMS = "web,code,math"


@pytest.fixture(scope="module")
def runs_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 mixtures × 4 sizes simulated from camel (k = 2) with 0.3 % noise."""
    law = get_law("camel", domains=DOMS)
    rng = np.random.default_rng(0)
    rows = []
    for i, w in enumerate(rng.dirichlet(np.full(3, 0.8), size=12)):
        for n in (5e7, 1.5e8, 4e8, 1.2e9):
            x = {"n_params": np.array([n]), "w_web": w[:1], "w_code": w[1:2], "w_math": w[2:]}
            y = float(law.evaluate(x, law.example_params)[0]) * math.exp(3e-3 * rng.standard_normal())
            rows.append({"run_id": f"m{i}_{n:.0e}", "n_params": n, "w_web": w[0], "w_code": w[1]} | {"loss": y})
            rows[-1]["w_math"] = 1.0 - w[0] - w[1]
    path = tmp_path_factory.mktemp("mix") / "runs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _one_line_error(res: Any) -> str:
    assert res.exit_code == 1, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip() and not ln.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert "Traceback" not in res.output
    return lines[0]


def _json(res: Any) -> dict[str, Any]:
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("{"))
    return json.loads(line)


def test_compare_json_shape_and_camel_extrapolates_in_size(runs_csv: Path) -> None:
    res = runner.invoke(
        app,
        ["mix", "compare", str(runs_csv), "--domains", DOMS, "--target", "loss", "--holdout", "n_params > 9e8"]
        + ["--models", "camel,dml,blind", "--bootstrap", "20", "--json"],
    )
    out = _json(res)
    assert [t["target"] for t in out["targets"]] == ["loss"]
    models = {m["model"]: m for m in out["targets"][0]["models"]}
    assert list(models) == ["camel", "dml", "blind"]
    keys = {"model", "n_train", "n_test", "mae", "mre", "bias", "spearman", "coverage", "predictions"}
    for m in models.values():
        assert keys <= set(m) and m["n_train"] == 36 and m["n_test"] == 12 and len(m["predictions"]) == 12
        assert set(m["predictions"][0]) == {"run_id", "predicted", "lo", "hi", "observed"}
    camel = models["camel"]
    assert camel["mre"] < 0.02 and camel["spearman"] > 0.9  # extrapolates 3x in size from simulated runs
    # 95 % prediction intervals from the bootstrap: every held-out point has one around its prediction.
    assert all(p["lo"] < p["predicted"] < p["hi"] for p in camel["predictions"])
    inside = [p["lo"] <= p["observed"] <= p["hi"] for p in camel["predictions"]]
    assert camel["coverage"] == pytest.approx(sum(inside) / 12) and camel["coverage"] >= 0.75
    assert models["dml"]["coverage"] is None  # no interval at another size (NaN → null)
    # dml has no size term: at an unseen size it predicts under the stated rank-transfer assumption, its levels are
    # not compared (null), its Spearman is; the blind baseline follows a size curve L(N) (no row of nulls).
    dml = models["dml"]
    assert dml["n_predicted"] == 12 and dml["levels_comparable"] is False and dml["mre"] is None
    assert dml["rank_transfer"]["n_rows"] == 12 and "rank transfer" in dml["rank_transfer"]["assumption"]
    assert dml["spearman"] > 0.5 and len(dml["rank_transfer"]["ranking"]) == 12
    assert models["blind"]["n_predicted"] == 12 and models["blind"]["mre"] is not None


def test_compare_leave_mixtures_out_table(runs_csv: Path) -> None:
    res = runner.invoke(
        app,
        ["mix", "compare", str(runs_csv), "--domains", DOMS, "--target", "loss", "--holdout", "mixtures:4"]
        + ["--models", "dml,blind", "--where", "n_params == 4e8"],
    )
    assert res.exit_code == 0, res.output
    assert "dml" in res.output and "blind" in res.output and "Spearman" in res.output


def test_optimize_json_respects_caps_floors_and_fixed(runs_csv: Path) -> None:
    res = runner.invoke(
        app,
        ["mix", "optimize", str(runs_csv), "--law", "camel", "--domains", DOMS, "--target", "loss"]
        + ["--target-size", "7e9", "--cap", "math=0.3", "--floor", "code=0.02", "--fix", "web=0.5", "--json"],
    )
    out = _json(res)
    w = out["weights"]
    assert set(w) == {"web", "code", "math"} and abs(sum(w.values()) - 1) < 1e-9
    assert w["web"] == pytest.approx(0.5, abs=1e-12) and w["math"] <= 0.3 + 1e-9 and w["code"] >= 0.02 - 1e-9
    assert "fix web=0.5" in out["active_constraints"] and out["kkt"]["ok"]
    assert out["predicted_losses"]["loss"] == pytest.approx(out["objective"], rel=1e-12)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--domains", "web,code,wiki"], r"--domains wiki: runs\.csv has no column 'w_wiki'"),
        (["--holdout", "n_params > 0"], r"--holdout n_params > 0: leaves no training rows"),
        (["--holdout", "n_params > 1e12"], r"selects no test rows"),
        (["--holdout", "__import__('os')"], r"--holdout"),
        (["--models", "camel,nosuchlaw"], r"unknown model 'nosuchlaw'; known: blind, .*camel.*dml"),
    ],
)
def test_compare_bad_input_is_one_line(runs_csv: Path, args: list[str], match: str) -> None:
    base = {"--domains": DOMS, "--holdout": "n_params > 9e8", "--models": "dml"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    argv = ["mix", "compare", str(runs_csv), "--target", "loss"] + [x for kv in base.items() for x in kv]
    err = _one_line_error(runner.invoke(app, argv))
    assert re.search(match, err), err


def test_optimize_infeasible_caps_name_the_constraint(runs_csv: Path) -> None:
    argv = ["mix", "optimize", str(runs_csv), "--domains", DOMS, "--target", "loss", "--target-size", "7e9"]
    err = _one_line_error(runner.invoke(app, [*argv, "--cap", "web=0.2", "--cap", "code=0.2", "--cap", "math=0.2"]))
    assert "infeasible" in err and "0.6 < 1" in err
    err = _one_line_error(runner.invoke(app, [*argv, "--floor", "web=0.5", "--cap", "web=0.4"]))
    assert "--floor web=0.5 vs --cap web=0.4" in err


def test_mixture_rows_in_files_and_frames_are_checked(runs_csv: Path, tmp_path: Path) -> None:
    df = pd.read_csv(runs_csv)
    bad = df.copy()
    bad.loc[3, "w_web"] += 0.01
    path = tmp_path / "bad.csv"
    bad.to_csv(path, index=False)
    argv = ["mix", "compare", str(path), "--domains", DOMS, "--target", "loss", "--holdout", "mixtures:3"]
    err = _one_line_error(runner.invoke(app, argv))
    assert "bad.csv" in err and "1" in err
    with pytest.raises(InputError, match=r"table row 4 \(run m0_1e\+09\): the weights w_web\+w_code\+w_math sum to"):
        check_mixture(bad, DOMS.split(","))
    neg = df.copy()
    neg.loc[5, "w_code"] = -0.1
    neg.loc[5, "w_web"] += 0.1
    with pytest.raises(InputError, match=r"table row 6 \(run m1_2e\+08\), column w_code: expected a finite non-neg"):
        check_mixture(neg, DOMS.split(","))


def test_optimize_bootstrap_interval_and_optimum_vs_size(runs_csv: Path) -> None:
    from mixlaw.api.mixture import optimize

    df = pd.read_csv(runs_csv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        out = optimize(
            df,
            law="camel",
            domains=DOMS.split(","),
            target="loss",
            target_size=7e9,
            bootstrap=8,
            sizes=[1e8, 1e10, 1e12],
        )
    # The optimum against size: the high-beta component (loading on math) fades, so math's share falls with size.
    math_share = [row["weights"]["math"] for row in out["vs_size"]]
    assert [row["size"] for row in out["vs_size"]] == [1e8, 1e10, 1e12]
    assert math_share[0] > math_share[1] + 0.05 > math_share[2] + 0.1, math_share
    boot = out["bootstrap"]
    assert boot["n"] + boot["n_failed"] == 8 and boot["n"] >= 6
    assert (boot["status"] == "ok") == (boot["n_failed"] <= 0.2 * 8)  # weak when > 20 % of the resamples are lost
    for d, (lo, hi) in boot["weights"].items():
        assert 0.0 <= lo <= hi <= 1.0
        assert lo <= out["weights"][d] <= hi, (d, lo, out["weights"][d], hi)  # every interval holds its point
    lo, hi = boot["objective"]
    assert lo <= out["objective"] <= hi
    for row in out["vs_size"]:
        assert all(row["band"][d][0] <= w <= row["band"][d][1] for d, w in row["weights"].items()), row


def test_optimize_weighted_sum_of_two_losses_with_dml(runs_csv: Path, tmp_path: Path) -> None:
    df = pd.read_csv(runs_csv)
    df["loss_b"] = df["loss"] * (1 + 0.3 * df["w_code"])  # a second validation loss that dislikes code
    path = tmp_path / "two.csv"
    df.to_csv(path, index=False)
    argv = ["mix", "optimize", str(path), "--law", "dml", "--domains", DOMS, "--where", "n_params == 4e8"]
    argv += ["--target", "loss", "--target", "loss_b", "--weights", "loss=0.25", "--weights", "loss_b=0.75", "--json"]
    out = _json(runner.invoke(app, argv))
    pl = out["predicted_losses"]
    assert set(pl) == {"loss", "loss_b"} and out["loss_weights"] == {"loss": 0.25, "loss_b": 0.75}
    assert out["objective"] == pytest.approx(0.25 * pl["loss"] + 0.75 * pl["loss_b"], rel=1e-12)
    assert out["kkt"]["ok"] and abs(sum(out["weights"].values()) - 1) < 1e-9
    err = _one_line_error(runner.invoke(app, [*argv[:-1], "--weights", "loss_c=1"]))
    assert "--weights loss_c" in err


def test_optimize_evaluates_candidate_mixtures_with_paired_regret(runs_csv: Path) -> None:
    """--evaluate predicts other mixtures under the same laws; regret is never negative at the point estimate (the
    optimum is optimal), and under --bootstrap the paired regret interval comes from the same resampled laws."""
    law = get_law("camel", domains=DOMS)
    vertexish = {"web": 0.9, "code": 0.05, "math": 0.05}
    argv = ["mix", "optimize", str(runs_csv), "--law", "camel", "--domains", DOMS, "--target", "loss"]
    argv += ["--target-size", "7e9", "--evaluate", "uniform", "--evaluate", "webby:web=0.9,code=0.05,math=0.05"]
    out = _json(runner.invoke(app, [*argv, "--bootstrap", "8", "--json"]))
    cands = {c["name"]: c for c in out["candidates"]}
    assert list(cands) == ["uniform", "webby"]
    assert cands["uniform"]["weights"] == pytest.approx(dict.fromkeys(["web", "code", "math"], 1 / 3))
    for c in cands.values():
        assert c["regret"] >= -1e-9 and c["regret"] == pytest.approx(c["objective"] - out["objective"], abs=1e-12)
        lo, hi = c["regret_interval"]
        assert lo <= c["regret"] <= hi and 0.0 <= c["p_better_than_chosen"] <= 1.0  # intervals hold their points
        assert c["objective_interval"][0] <= c["objective"] <= c["objective_interval"][1]
    # the far-off mixture is predicted worse than the optimum in every resample, and its prediction is the law's
    webby = cands["webby"]  # with the size-extrapolation error of the regret added, P stays ~0 and the interval > 0
    assert webby["regret_interval"][0] > 0 and webby["p_better_than_chosen"] < 1e-6
    assert webby.get("p_better_than_chosen_paired", webby["p_better_than_chosen"]) == 0.0
    x = {"n_params": np.array([7e9])} | {f"w_{d}": np.array([w]) for d, w in vertexish.items()}
    truth = float(law.evaluate(x, law.example_params)[0])  # type: ignore[attr-defined]
    assert cands["webby"]["objective"] == pytest.approx(truth, rel=0.02)  # fitted on 0.3 %-noise runs ≤ 1.2e9
    err = _one_line_error(runner.invoke(app, [*argv[:-4], "--evaluate", "bad:web=0.5,code=0.2,math=0.2"]))
    assert "--evaluate bad: weights sum to 0.9" in err
    err = _one_line_error(runner.invoke(app, [*argv[:-4], "--evaluate", "oops"]))
    assert "--evaluate 'oops'" in err
