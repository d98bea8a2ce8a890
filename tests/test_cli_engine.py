"""CLI contract of the engine verbs: laws, fit, predict, validate (other tools script against these)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app

runner = CliRunner()


@pytest.fixture()
def runs_csv(tmp_path):
    rng = np.random.default_rng(0)
    n = np.repeat([1e7, 3e7, 1e8, 3e8, 1e9], 6)
    d = n * np.tile([5, 10, 20, 40, 80, 160], 5)
    loss = (1.8 + 400 / n**0.34 + 2000 / d**0.36) * np.exp(2e-3 * rng.standard_normal(len(n)))
    df = pd.DataFrame({"run_id": [f"r{i}" for i in range(len(n))], "step": 0, "n_params": n, "tokens": d,
                       "loss": loss})
    path = tmp_path / "runs.csv"
    df.to_csv(path, index=False)
    return path


def test_laws_lists_registered_laws_with_formula_and_inputs() -> None:
    res = runner.invoke(app, ["laws", "--json"])
    assert res.exit_code == 0, res.output
    laws = {r["name"]: r for r in json.loads(res.stdout)["laws"]}
    assert {"chinchilla", "data_constrained", "power_law"} <= set(laws)
    assert laws["chinchilla"]["inputs"] == ["n_params", "tokens"]
    assert "A/N^alpha" in laws["chinchilla"]["formula"]


def test_fit_json_contract_and_round_trip(runs_csv, tmp_path) -> None:
    out = tmp_path / "fit.json"
    res = runner.invoke(app, ["fit", str(runs_csv), "--law", "chinchilla", "--bootstrap", "40", "--random-state",
                              "3", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for key in ("law", "params", "objective", "status", "n_starts", "n_converged", "ci"):
        assert key in d
    assert d["law"] == "chinchilla" and d["status"] == "converged"
    assert d["params"]["alpha"] == pytest.approx(0.34, abs=0.05)
    lo, hi = d["ci"]["alpha"]
    assert lo <= d["params"]["alpha"] <= hi
    saved = json.loads(out.read_text())
    assert saved["params"] == d["params"]

    pred = runner.invoke(app, ["predict", str(out), "--table", str(runs_csv), "--json"])
    assert pred.exit_code == 0, pred.output
    p = json.loads(pred.stdout)
    assert len(p["rows"]) == 30 and {"run_id", "step", "predicted", "observed"} <= set(p["rows"][0])
    assert {"run_id", "mae", "mre"} <= set(p["per_run"][0])
    assert p["mre"] < 0.01

    at = runner.invoke(app, ["predict", str(out), "--at", "n_params=1e9,tokens=2e10", "--json"])
    assert at.exit_code == 0, at.output
    assert json.loads(at.stdout)["predicted"] > 1.8


def test_fit_with_store_selection(runs_csv, tmp_path) -> None:
    store = tmp_path / "m.db"
    ing = runner.invoke(app, ["ingest", str(runs_csv), "--store", str(store)])
    assert ing.exit_code == 0, ing.output
    res = runner.invoke(app, ["fit", "--store", str(store), "--law", "power_law", "--law-option", "input=tokens",
                              "--where", "n_params == 1e9", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n_points"] == 6


def test_validate_reports_held_out_errors(runs_csv) -> None:
    res = runner.invoke(app, ["validate", str(runs_csv), "--law", "chinchilla", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["scheme"] == "leave-largest-out"
    assert len(d["points"]) == 6 and all(pt["n_params"] == 1e9 for pt in d["points"])
    assert 0 < d["mre"] < 0.02


@pytest.mark.parametrize(
    "args, needle",
    [
        (["fit", "missing.csv", "--law", "chinchilla"], "no such path"),
        (["fit", "{csv}", "--law", "nope"], "unknown law"),
        (["fit", "{csv}", "--law", "chinchilla", "--loss-column", "zzz"], "zzz"),
        (["fit", "{csv}", "--law", "chinchilla", "--where", "n_params >"], "--where"),
        (["predict", "{csv}", "--at", "x=1"], "JSON"),
    ],
)
def test_user_errors_are_one_line_without_traceback(runs_csv, args, needle) -> None:
    args = [a.replace("{csv}", str(runs_csv)) for a in args]
    res = runner.invoke(app, args)
    assert res.exit_code == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and needle in lines[0]
    assert "Traceback" not in res.output


def test_fit_schedule_law_from_store_computes_lr_areas(tmp_path) -> None:
    """`mixlaw fit STORE --law lr_annealing` takes S1/S2 from each run's stored schedule."""
    from mixlaw.laws import get_law
    from mixlaw.runs.schema import Mixture, RunMeta
    from mixlaw.runs.store import RunStore
    from mixlaw.schedules import Schedule, add_schedule_features

    law = get_law("lr_annealing")
    store_path = tmp_path / "s.db"
    with RunStore(str(store_path)) as store:
        for rid, spec in {"a": "wsd:peak=2e-4,steps=8000,warmup=200,decay=2000",
                          "b": "cosine:peak=2e-4,steps=8000,warmup=200,final=2e-5"}.items():
            sched = Schedule.parse(spec)
            steps = np.arange(0, 8001, 250)
            feats = add_schedule_features(pd.DataFrame({"run_id": rid, "step": steps}), {rid: sched})
            loss = np.full(len(steps), 10.0)
            ok = feats["s1"].to_numpy() > 0
            loss[ok] = law.evaluate({"s1": feats["s1"].to_numpy()[ok], "s2": feats["s2"].to_numpy()[ok]},
                                    law.example_params)
            store.put_run(RunMeta(run_id=rid, phase="pt", n_params=1e8, n_params_total=1.2e8,
                                  mixture=Mixture({"general": 1.0}), parent_run=None, seed=0,
                                  schedule=sched.to_dict(), meta={}))
            store.append_evals(rid, pd.DataFrame({"step": steps, "tokens": steps * 4096, "lr": sched.lr(steps),
                                                  "loss": loss}))
    res = runner.invoke(app, ["fit", str(store_path), "--law", "lr_annealing", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["n_points"] == 2 * 32  # the two step-0 rows (no area yet) are left out
    for p, v in law.example_params.items():
        assert d["params"][p] == pytest.approx(v, rel=1e-3), p


@pytest.mark.parametrize("verb", ["fit", "validate"])
def test_law_is_required_and_a_typo_gets_did_you_mean(runs_csv, verb) -> None:
    """No law is a meaningful default of `fit` / `validate` (was: chinchilla, silently): a missing --law is a usage
    error naming every law; a typo is one line with the closest names; a name close to none lists them all."""
    from mixlaw.laws import law_names

    res = runner.invoke(app, [verb, str(runs_csv)])
    assert res.exit_code == 2
    (line,) = [ln for ln in res.stderr.splitlines() if "--law" in ln]
    assert "Missing option '--law'. Choose a law: " in line and all(n in line for n in law_names())
    res = runner.invoke(app, [verb, str(runs_csv), "--law", "chinchila"])
    assert res.exit_code == 1
    assert res.stderr.strip() == "error: unknown law 'chinchila'; did you mean 'chinchilla'? (every law: mixlaw laws)"
    res = runner.invoke(app, [verb, str(runs_csv), "--law", "nope"])
    (line,) = res.stderr.strip().splitlines()
    assert res.exit_code == 1 and line.endswith(", ".join(law_names())), line  # the whole list, not cut short


def test_builtin_law_names_are_found_without_importing_the_laws() -> None:
    """`mixlaw.cli._laws` knows the built-in laws by their module names (the package imports torch): every public
    module of mixlaw.laws registers exactly the law of its name."""
    import importlib

    from mixlaw.cli._laws import builtin_law_names
    from mixlaw.laws import LAWS

    names = builtin_law_names()
    assert len(names) >= 20 and "chinchilla" in names
    for name in names:
        mod = importlib.import_module(f"mixlaw.laws.{name}")
        own = {cls.name for cls in LAWS.values() if cls.__module__ == mod.__name__}
        assert own == {name}, (name, own)
