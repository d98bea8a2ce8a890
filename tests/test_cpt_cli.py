"""``mixlaw cpt`` sub-app (typer CliRunner), plots and the HTML report section."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli.cpt import app
from mixlaw.decide.cpt import (
    CptFits,
    CptPlan,
    LawFit,
    load_fits,
    optimum_vs_weight,
    predict_plan,
    schedule_aware_cmr,
)
from mixlaw.laws import get_law
from mixlaw.report.cpt_plots import (
    cpt_section,
    plot_optimum_vs_weight,
    plot_plan_trajectory,
    plot_predicted_vs_observed,
)
from mixlaw.schedules import Schedule

os.environ.setdefault("MPLBACKEND", "Agg")

DPT = {"L0": 3.057, "A": 0.490, "alpha": 0.497, "C1": 0.299, "C2": 0.298, "B": 0.366, "E": 28.0, "beta": 0.189}
DCPT = {"L0": 3.024, "A": 0.412, "alpha": 0.677, "C1": 0.278, "C2": 0.324, "B": -0.666, "E": 5662.0, "beta": 0.146}


def _bundle(replay: bool = False) -> CptFits:
    rng = np.random.default_rng(0)
    name = "cpt_replay" if replay else "cpt"
    law = get_law(name)
    out = {}
    for set_name, p in (("loss_fineweb", DPT), ("loss_kp", DCPT)):
        q = {**p, "a1": 0.0, "a2": 1.0} if replay else dict(p)
        point = np.array([q[k] for k in law.param_names])
        out[set_name] = LawFit(law, q, point * (1 + 0.01 * rng.standard_normal((12, point.size))), max_lr=2e-4)
    return CptFits(fits=out, pt_set="loss_fineweb", cpt_set="loss_kp")


@pytest.fixture()
def files(tmp_path):
    fit = tmp_path / "fit.json"
    _bundle().save(fit)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[pt]\nschedule = "wsd:peak=2e-4,steps=8000,decay=1600,final=2e-5"\n'
        '[cpt]\nschedule = "cosine:peak=2e-4,steps=3000,warmup=100,start=2e-5,final=2e-5"\n[areas]\neval_every = 500\n'
    )
    return fit, plan


runner = CliRunner()


def test_predict_json_and_table(files) -> None:
    fit, plan = files
    r = runner.invoke(app, ["predict", str(fit), "--plan", str(plan), "--json", "--weights", "0.5,0.5"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert set(d["final"]) == {"loss_fineweb", "loss_kp", "composite"}
    assert d["trajectory"][-1]["step"] == 11000 and d["warnings"] == []
    r = runner.invoke(app, ["predict", str(fit), "--plan", str(plan)])
    assert r.exit_code == 0 and "loss_kp" in r.stdout


def test_optimize_and_critical(files) -> None:
    fit, plan = files
    r = runner.invoke(
        app, ["optimize", str(fit), "--over", "peak_lr", "--weights", "0.8,0.2", "--plan", str(plan), "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["over"] == "peak_lr" and d["best"] > 0
    r = runner.invoke(
        app, ["optimize", str(fit), "--over", "loss_potential", "--weights", "0.5,0.5", "--plan", str(plan)]
    )
    assert r.exit_code == 0 and "best loss_potential" in r.stdout
    r = runner.invoke(app, ["critical", str(fit), "--plan", str(plan), "--json", "--horizon", "20000"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["s1_pt_star_constant_lr"] == pytest.approx(1.7987, abs=1e-4)
    # the constant-LR critical point (≈ 8,994 steps) lies beyond this 8000-step PT: every branch is pre-critical
    assert d["critical_point"]["pt_step"] is None and "pre-critical" in d["critical_point"]["reason"]
    r = runner.invoke(app, ["critical", str(fit), "--plan", str(plan), "--horizon", "5000"])
    assert r.exit_code == 0 and "turning length" in r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["predict", "missing.json", "--plan", "missing.toml"],
        ["optimize", "{fit}", "--over", "colour", "--weights", "0.5,0.5"],
        ["optimize", "{fit}", "--over", "replay", "--weights", "0.5,0.5"],
        ["optimize", "{fit}", "--over", "peak_lr", "--weights", "0.5"],
        ["optimize", "{fit}", "--over", "peak_lr", "--weights", "0.9,0.9"],
    ],
)
def test_user_errors_one_line_exit_1(files, args) -> None:
    fit, _ = files
    r = runner.invoke(app, [a.format(fit=fit) for a in args])
    assert r.exit_code == 1
    err = r.stderr.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in r.output


def test_plots_and_report_section() -> None:
    import matplotlib.pyplot as plt

    fits = _bundle(replay=True)
    plan = CptPlan(
        pt=Schedule.parse("wsd:peak=2e-4,steps=8000,decay=1600,final=2e-5"),
        cpt=Schedule.parse("cosine:peak=2e-4,steps=3000,warmup=100,start=2e-5,final=2e-5"),
        replay_ratio=0.25,
        eval_every=500,
    )
    pred = predict_plan(fits, plan, weights=(0.5, 0.5))
    ax = plot_plan_trajectory(pred)
    assert len(ax.lines) >= 3
    tab = optimum_vs_weight(fits, plan, "replay", [0.0, 0.5, 1.0], grid=np.linspace(0, 1, 11))
    assert plot_optimum_vs_weight(tab, over="replay").get_xlabel().startswith("weight")
    curves = pd.DataFrame(
        {"schedule": ["a"] * 5 + ["b"] * 5, "step": list(range(5)) * 2, "observed": np.arange(10.0)}
    ).assign(predicted=lambda d: d["observed"] + 0.01)
    assert len(plot_predicted_vs_observed(curves, fitted=["a"]).lines) == 4
    cmr = schedule_aware_cmr(
        fits.fits["loss_fineweb"],
        "cosine:peak=2e-4,steps=3000",
        0.03,
        budget_steps=3000,
        pt_schedule=plan.pt,
        n_grid=51,
    )
    table = pred.assign(replay_ratio=0.25)
    html = cpt_section(fits, plan, weights=(0.5, 0.5), over=["replay"], observed=curves, schedule_cmr=cmr, table=table)
    assert "not identifiable" in html  # one replay ratio only: a1, a2 are not determined
    assert html.startswith("<section") and html.rstrip().endswith("</section>")
    assert html.count("data:image/png;base64,") == 3 and "turning length" in html and "CMR" in html
    # every fitted set's parameter table, the fit report's own (values, intervals, bounds)
    assert "fitted parameters" in html and html.count("<td>a2</td>") == 2 and "90% lo" in html
    plt.close("all")


def test_report_section_object_renders_in_page() -> None:
    import matplotlib.pyplot as plt

    from mixlaw.report.cpt_plots import cpt_report_section
    from mixlaw.report.html import render_report

    fits = _bundle()
    plan = CptPlan(
        pt=Schedule.parse("constant:peak=2e-4,steps=4000"),
        cpt=Schedule.parse("constant:peak=2e-4,steps=2000"),
        eval_every=250,
    )
    sec = cpt_report_section(fits, plan)
    assert not sec.html.startswith("<section") and "turning length" in sec.html
    page = render_report("CPT", [sec])
    assert page.count("<section") == 1 and "Continual pre-training" in page
    plt.close("all")


def test_cpt_verbs_option_sets_are_pinned() -> None:
    import typer.main

    group = typer.main.get_command(app)
    got = {
        name: sorted(o for p in cmd.params for o in p.opts)
        for name, cmd in group.commands.items()  # type: ignore[attr-defined]
    }
    base = ["--base-tokens", "--tokens-per-step", "--base-lr"]  # a base known by its PT token count
    assert got == {
        "predict": sorted(["fit", "--plan", "--weights", "--level", "--json", "--max-memory", "--report", *base]),
        "optimize": sorted(
            ["fit", "--over", "--weights", "--plan", "--grid", "--level", "--json", "--max-memory", "--report", *base]
        ),
        "critical": sorted(
            ["fit", "--plan", "--weights", "--horizon", "--level", "--json", "--max-memory", "--report", *base]
        ),
        "bundle": sorted(["pt_fit", "cpt_fit", "--out", "--json"]),
    }
    for name in got:
        r = runner.invoke(app, [name, "--help"])
        assert r.exit_code == 0 and "--json" in r.stdout


def test_fit_verb_has_report_and_validate_options() -> None:
    import typer.main

    from mixlaw.cli import app as main_app

    fit = typer.main.get_command(main_app).get_command(None, "fit")  # type: ignore[attr-defined,arg-type]
    opts = {o for p in fit.params for o in p.opts}
    assert {"--report", "--validate", "--out", "--bootstrap", "--law"} <= opts


def test_critical_point_and_turning_length_have_bootstrap_intervals(files, tmp_path) -> None:
    """Issue 9 item 2: the critical point and the turning length get their percentile intervals over the fits'
    draws (paired D_pt/D_cpt draws for the composite); a draw without an answer in range is counted, not dropped."""
    fit, short = files
    long_plan = tmp_path / "long.toml"
    long_plan.write_text(
        '[pt]\nschedule = "constant:peak=2e-4,steps=20000"\n[cpt]\nschedule = "constant:peak=2e-4,steps=3000"\n'
        "[areas]\neval_every = 500\n"
    )
    got = {}
    for level in ("0.95", "0.5"):
        r = runner.invoke(app, ["critical", str(fit), "--plan", str(long_plan), "--json", "--level", level,
                                "--horizon", "400000"])  # fmt: skip
        assert r.exit_code == 0, r.output
        got[level] = json.loads(r.stdout)
    cp, iv = got["0.95"]["critical_point"], got["0.95"]["critical_point"]["interval"]
    assert cp["pt_step"] == pytest.approx(8994, abs=2)  # the constant-LR critical point of the published fit
    assert iv["n_draws"] == 12 and iv["n_censored"] == 0 and iv["lo"] < cp["pt_step"] < iv["hi"]
    narrow = got["0.5"]["critical_point"]["interval"]
    assert iv["lo"] <= narrow["lo"] <= narrow["hi"] <= iv["hi"] and narrow["hi"] - narrow["lo"] < iv["hi"] - iv["lo"]
    # the 8000-step PT of the short plan is pre-critical at every branch: for every draw too, censored beyond it
    r = runner.invoke(app, ["critical", str(fit), "--plan", str(short), "--json", "--horizon", "300000"])
    d = json.loads(r.stdout)
    assert d["critical_point"]["pt_step"] is None
    assert d["critical_point"]["interval"] == {"lo": "inf", "hi": "inf", "level": 0.95, "n_draws": 12,
                                               "n_censored": 12}  # fmt: skip
    t, tiv = d["turning_length"], d["turning_length"]["interval"]  # returns within the horizon: a finite interval
    assert not t["infinite"] and tiv["n_censored"] == 0 and tiv["lo"] <= t["steps"] <= tiv["hi"]
    text = runner.invoke(app, ["critical", str(fit), "--plan", str(short), "--horizon", "300000"])
    assert "95% [beyond the PT schedule, beyond the PT schedule] over 12 draws" in text.stdout


def test_critical_without_plan_says_the_assumed_plan_first_and_predict_is_95(files) -> None:
    """`cpt critical` without --plan uses the paper's 40k-step plan: its first line says so (JSON: plan.assumed);
    with --plan it does not. `cpt predict` reports 95 % intervals by default, as every other verb."""
    fit, plan = files
    r = runner.invoke(app, ["critical", str(fit), "--horizon", "5000"])
    assert r.exit_code == 0, r.output
    first = r.stdout.splitlines()[0]
    assert first.startswith("assumed plan (no --plan given): PT wsd:peak=2e-4,steps=40000") and "--plan" in first
    d = json.loads(runner.invoke(app, ["critical", str(fit), "--json", "--horizon", "5000"]).stdout)
    assert d["plan"]["assumed"] is True and d["plan"]["pt"].startswith("wsd:")
    r = runner.invoke(app, ["critical", str(fit), "--plan", str(plan), "--horizon", "5000"])
    assert r.exit_code == 0 and "assumed plan" not in r.stdout
    r = runner.invoke(app, ["predict", str(fit), "--plan", str(plan)])
    assert r.exit_code == 0 and "95% interval" in r.stdout and "90% interval" not in r.stdout


def test_bundle_writes_the_two_fits_that_critical_reads(files, tmp_path) -> None:
    """`cpt bundle` joins a D_pt and a D_cpt fit into the bundle `optimize`/`critical` read: no Python needed."""
    fit, plan = files
    b = _bundle()
    paths = []
    for k in ("loss_fineweb", "loss_kp"):
        p = tmp_path / f"{k}.json"
        p.write_text(json.dumps({**b.fits[k].to_dict(), "target": k}))
        paths.append(str(p))
    out = tmp_path / "bundle.json"
    r = runner.invoke(app, ["bundle", *paths, "--out", str(out)])
    assert r.exit_code == 0, r.output
    got = load_fits(out)
    assert got.pt_set == "loss_fineweb" and got.cpt_set == "loss_kp"
    for k in ("loss_fineweb", "loss_kp"):
        assert got.fits[k].params == pytest.approx(b.fits[k].params)
    args = ["--plan", str(plan), "--json", "--horizon", "20000"]
    a = json.loads(runner.invoke(app, ["critical", str(out), *args]).stdout)
    want = json.loads(runner.invoke(app, ["critical", str(fit), *args]).stdout)
    assert a["critical_point"]["reason"] == want["critical_point"]["reason"]
    assert a["turning_length"]["steps"] == pytest.approx(want["turning_length"]["steps"])
    r = runner.invoke(app, ["bundle", paths[0], paths[0], "--out", str(out)])
    assert r.exit_code == 1 and "same eval set" in r.output


def test_report_on_the_cpt_verbs_leads_with_the_answer(files, tmp_path) -> None:
    """`--report` on critical (and predict): the page opens with the lines the verb printed, then the CPT analysis."""
    fit, plan = files
    page = tmp_path / "critical.html"
    r = runner.invoke(app, ["critical", str(fit), "--horizon", "5000", "--report", str(page)])
    assert r.exit_code == 0, r.output
    html = page.read_text()
    first = r.stdout.splitlines()[0]
    assert first.startswith("assumed plan") and html.index("assumed plan") < html.index("fitted parameters")
    assert "critical point" in html and html.count("data:image/png;base64,") >= 1
    page = tmp_path / "predict.html"
    r = runner.invoke(app, ["predict", str(fit), "--plan", str(plan), "--report", str(page)])
    assert r.exit_code == 0, r.output
    assert "loss_kp: final loss" in page.read_text() and "95% interval" in page.read_text()


def test_critical_repeats_an_unidentifiable_fit() -> None:
    """A fit whose engine record says the data do not pin it down is named beside the critical point's answer."""
    from dataclasses import replace

    from mixlaw.cli.cpt import _identifiability_notes

    b = _bundle()
    rec = {"status": "unidentifiable", "identifiability": {"status": "unidentifiable", "reason": "one replay ratio"}}
    bad = CptFits(fits={**b.fits, "loss_fineweb": replace(b.fits["loss_fineweb"], record=rec)}, pt_set="loss_fineweb",
                  cpt_set="loss_kp")  # fmt: skip
    notes = _identifiability_notes(bad)
    assert notes == ["note: the loss_fineweb fit is unidentifiable (one replay ratio): answers that rest on it are "
                     "not determined by the data"]  # fmt: skip
    assert _identifiability_notes(b) == []
