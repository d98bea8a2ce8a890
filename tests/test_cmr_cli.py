"""``mixlaw cmr`` through typer's CliRunner: JSON contract, the readable table, one-line user errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli.cmr import app
from mixlaw.design.simulate_cmr import simulate_cmr_runs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mixinglaws_ct" / "runs.csv"
runner = CliRunner()


def test_json_contract_on_the_example() -> None:
    res = runner.invoke(
        app,
        [str(EXAMPLE), "--general-eval", "general", "--domain-eval", "python", "--epsilon", "0",
         "--ratio-law", "exp", "--c-method", "corr_grid", "--where", "split == 'fit'", "--json",
         "--query-ratio", "0.6"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert {"cmr", "ratios", "cmr_law", "sensitivity", "settings"} <= set(out)
    (c,) = out["cmr"]
    assert {"n_params", "budget_tokens", "cmr", "ci", "tolerance_boundary", "status"} <= set(c)
    assert c["n_params"] == 18_915_328 and c["budget_tokens"] == 10000 * 4096 * 256
    assert c["tolerance_boundary"] == pytest.approx(0.7138, abs=5e-3)
    assert c["status"] in {"ok", "no feasible ratio", "all ratios feasible — CMR ≥ largest tried"} or c[
        "status"
    ].startswith("too few")
    assert len(out["ratios"]) == 4
    for r in out["ratios"]:
        assert {"n_params", "ratio", "t0_tokens", "feasible", "reason"} <= set(r) and r["reason"]
    assert out["cmr_law"][0]["n_params"] == 18_915_328
    (q,) = out["queries"]
    assert q["ratio"] == 0.6 and not q["extrapolated"] and q["dloss_general_at_budget"] < 0


def test_rich_table_and_report(tmp_path: Path) -> None:
    report = tmp_path / "cmr.html"
    res = runner.invoke(
        app, [str(EXAMPLE), "--general-eval", "loss_general", "--domain-eval", "loss_python", "--report", str(report)]
    )
    assert res.exit_code == 0, res.output
    assert "Critical mixture ratio" in res.stdout and "feasible" in res.stdout
    text = report.read_text()
    assert text.startswith("<!DOCTYPE html>") and "data:image/png;base64," in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope.csv", "--general-eval", "general", "--domain-eval", "python"], "no such file"),
        ([str(EXAMPLE), "--general-eval", "nope", "--domain-eval", "python"], "not found"),
        ([str(EXAMPLE), "--general-eval", "general", "--domain-eval", "python", "--lambda", "-3"], "--lambda"),
        ([str(EXAMPLE), "--general-eval", "general", "--domain-eval", "python", "--where", "(("], "--where"),
        ([str(EXAMPLE), "--general-eval", "general", "--domain-eval", "python", "--ratio-law", "x"], "ratio-law"),
    ],
)
def test_user_errors_are_one_line(args: list[str], message: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 1
    err = res.stderr.strip()
    assert err.startswith("error:") and message in err and "\n" not in err


def test_two_domains_side_by_side(tmp_path: Path) -> None:
    """Two domains in one table (runs tagged by ``domain``): JSON per domain, the nearer domain's CMR is higher."""

    p460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}
    p940 = {"alpha4": 0.7520627, "s4": 0.13720245, "beta3": -1.06581937}
    ratios = (0.125, 0.25, 0.5)
    table = pd.concat(
        [
            simulate_cmr_runs(ratios, p460, noise=1e-5, random_state=0, domain="code"),
            simulate_cmr_runs(ratios, p940, noise=1e-5, random_state=0, domain="legal"),
        ],
        ignore_index=True,
    ).fillna({"w_code": 0.0, "w_legal": 0.0, "loss_code": 2.5, "loss_legal": 2.5})  # every run evaluates both
    path = tmp_path / "runs.csv"
    table.to_csv(path, index=False)
    report = tmp_path / "two.html"
    res = runner.invoke(
        app,
        [str(path), "--general-eval", "general", "--domain-eval", "code", "--domain-eval", "legal", "--json",
         "--report", str(report)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert set(out["domains"]) == {"code", "legal"}
    cmr = {c["domain"]: c["cmr"] for c in out["comparison"]}
    assert cmr["code"] == pytest.approx(0.2976, abs=1e-2) and cmr["legal"] == pytest.approx(0.3489, abs=1e-2)
    assert all(len(o["ratios"]) == 3 for o in out["domains"].values())  # no cross-domain ratio-0 runs
    assert "Domains side by side" in report.read_text()
