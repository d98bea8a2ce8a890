"""The CPT decisions on the Decision contract agree with the `mixlaw cpt` verbs on the same fits and plan."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.decide.contract import DecisionResult, Status
from test_cpt_cli import _bundle

runner = CliRunner()


@pytest.fixture()
def files(tmp_path):  # a PT schedule long enough (20k steps) to hold the critical point (≈ 9k steps)
    fit = tmp_path / "fit.json"
    _bundle().save(fit)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[pt]\nschedule = "wsd:peak=2e-4,steps=20000,decay=1600,final=2e-5"\n'
        '[cpt]\nschedule = "cosine:peak=2e-4,steps=3000,warmup=100,start=2e-5,final=2e-5"\n[areas]\neval_every = 500\n'
    )
    return fit, plan


def test_cpt_critical_on_the_contract_matches_the_verb(files) -> None:
    fit, plan = files
    verb = runner.invoke(app, ["cpt", "critical", str(fit), "--plan", str(plan), "--json", "--horizon", "20000"])
    assert verb.exit_code == 0, verb.output
    want = json.loads(verb.stdout)
    r = runner.invoke(app, ["decide", "cpt_critical", "-o", f"fit={fit}", "-o", f"plan={plan}", "-o",
                            "horizon=20000", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    res = DecisionResult.from_dict(json.loads(r.stdout))
    cp = res.answer("critical_pt_step")
    assert cp.value == pytest.approx(want["critical_point"]["pt_step"])
    assert cp.interval is not None and cp.interval.lo <= cp.value <= cp.interval.hi
    assert cp.interval.n_resamples == want["critical_point"]["interval"]["n_draws"]


def test_cpt_critical_never_assumes_a_plan(files) -> None:
    fit, _ = files
    r = runner.invoke(app, ["decide", "cpt_critical", "-o", f"fit={fit}"])
    assert r.exit_code == 1 and "never assumed" in r.stderr


def test_cpt_optimize_on_the_contract_matches_the_verb(files) -> None:
    fit, plan = files
    verb = runner.invoke(app, ["cpt", "optimize", str(fit), "--over", "peak_lr", "--weights", "0.8,0.2", "--plan",
                               str(plan), "--json"])  # fmt: skip
    assert verb.exit_code == 0, verb.output
    want = json.loads(verb.stdout)
    r = runner.invoke(app, ["decide", "cpt_optimize", "-o", f"fit={fit}", "-o", f"plan={plan}", "-o", "over=peak_lr",
                            "-o", "weights=0.8;0.2", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    res = DecisionResult.from_dict(json.loads(r.stdout))
    assert res.answer("best_peak_lr").value == pytest.approx(want["best"])
    assert res.status is (Status.WEAK if want["at_edge"] else Status.OK)
