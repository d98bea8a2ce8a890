"""One feature path: a law's declared derived inputs are built the same way for fit, predict and validate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.fit.problem.features import add_features, missing_derived
from mixlaw.laws import get_law
from mixlaw.options import FitOptions
from mixlaw.runs.schema import Mixture, RunMeta
from mixlaw.runs.store import RunStore
from mixlaw.schedules import Schedule, add_schedule_features

runner = CliRunner()
PT = {
    "a": "wsd:peak=3e-4,steps=4000,warmup=200,decay=1000",
    "b": "cosine:peak=3e-4,steps=4000,warmup=200,final=3e-5",
    "c": "constant:peak=3e-4,steps=4000,warmup=200",
}
CPT = {
    "a-cpt": ("a", "cosine:peak=2e-4,steps=2000,warmup=100,final=2e-5"),
    "b-cpt": ("b", "constant:peak=1e-4,steps=2000"),
}
CPT_TRUTH = {"L0": 3.057, "A": 0.490, "alpha": 0.497, "C1": 0.299, "C2": 0.298, "B": 0.366, "E": 28.0, "beta": 0.189}


def _store(tmp_path: Path, law_name: str, options: dict[str, object] | None = None, seed: int = 0) -> Path:
    """A RunStore of PT runs (and CPT runs branched from them) whose losses follow ``law_name`` with 0.02 % noise."""
    rng = np.random.default_rng(seed)
    law = get_law(law_name, **(options or {}))
    params = CPT_TRUTH if law_name == "cpt" else law.example_params
    scheds = {rid: Schedule.parse(s) for rid, s in PT.items()}
    parents: dict[str, str | None] = dict.fromkeys(PT)
    if law_name == "cpt":
        scheds |= {rid: Schedule.parse(s) for rid, (_, s) in CPT.items()}
        parents |= {rid: p for rid, (p, _) in CPT.items()}
    path = tmp_path / f"{law_name}.db"
    frame = pd.concat(
        [
            pd.DataFrame({"run_id": rid, "step": np.arange(0, sched.total_steps + 1, 125), "parent_run": parents[rid]})
            for rid, sched in scheds.items()
        ],
        ignore_index=True,
    )
    feats = add_features(
        frame.assign(schedule=frame["run_id"].map(lambda r: scheds[r].to_dict())), law, drop_undefined=False
    )
    area = feats["s1_pt"] + feats["s1_cpt"] if "s1_pt" in feats else feats["mpl_s1" if "mpl_s1" in feats else "s1"]
    ok = area.to_numpy() > 0  # step 0 of a PT run: the law is undefined there
    loss = np.full(len(feats), 10.0)
    x = {c: feats[c].to_numpy()[ok] for c in law.inputs}
    loss[ok] = law.evaluate(x, params) * np.exp(2e-4 * rng.standard_normal(int(ok.sum())))
    with RunStore(str(path)) as store:
        for rid, sched in scheds.items():
            rows = (feats["run_id"] == rid).to_numpy()
            phase = "pt" if parents[rid] is None else "cpt"
            store.put_run(
                RunMeta(
                    run_id=rid,
                    phase=phase,
                    n_params=1e8,
                    mixture=Mixture({"general": 1.0}),
                    parent_run=parents[rid],
                    schedule=sched.to_dict(),
                )
            )
            steps = feats["step"].to_numpy()[rows]
            evals = pd.DataFrame({"step": steps, "tokens": steps * 4096, "lr": 0.0, "loss": loss[rows]})
            store.append_evals(rid, evals)
    return path


def _law_args(options: dict[str, object]) -> list[str]:
    return [a for k, v in options.items() for a in ("--law-option", f"{k}={v}")]


@pytest.mark.parametrize(("law_name", "options"), [("lr_annealing", {}), ("multi_power", {"n_bins": 8}), ("cpt", {})])
def test_predict_on_a_store_works_for_every_schedule_law_that_fits_on_it(tmp_path, law_name, options) -> None:
    store = _store(tmp_path, law_name, options)
    out = tmp_path / "fit.json"
    fit = runner.invoke(
        app,
        ["fit", str(store), "--law", law_name, *_law_args(options), "--random-state", "0", "--out", str(out), "--json"],
    )
    assert fit.exit_code == 0, fit.output
    n_fit = json.loads(fit.stdout)["n_points"]
    pred = runner.invoke(app, ["predict", str(out), "--table", str(store), "--json"])
    assert pred.exit_code == 0, pred.output
    p = json.loads(pred.stdout)
    assert len(p["rows"]) == n_fit  # the same rows are defined for the law in fit and predict
    assert p["mre"] < 2e-3, p["mre"]  # noise is 0.02 %: a wrong feature would miss by far more
    val = runner.invoke(
        app,
        [
            "validate",
            str(store),
            "--law",
            law_name,
            *_law_args(options),
            "--scheme",
            "rollout",
            "--order-column",
            "step",
            "--random-state",
            "0",
            "--json",
        ],
    )
    assert val.exit_code == 0, val.output
    v = json.loads(val.stdout)
    assert v["points"] and v["mre"] < 0.02, v["mre"]


def test_add_features_builds_what_the_law_declares_and_nothing_else() -> None:
    sched = Schedule.parse(PT["a"])
    table = pd.DataFrame({"run_id": "a", "step": [0, 100, 4000], "schedule": [sched.to_dict()] * 3})
    law = get_law("multi_power", n_bins=6)
    assert set(missing_derived(table, law)) == set(law.inputs)
    out = add_features(table, law)
    assert list(out["step"]) == [100, 4000]  # step 0 has no forward area: undefined, left out
    assert set(law.inputs) <= set(out.columns) and "s1" in out.columns
    ref = add_schedule_features(table[table["step"] > 0], multi_power_bins=6)
    np.testing.assert_allclose(out["mpl_s1"], ref["mpl_s1"])
    assert add_features(out, law) is out  # already featured: unchanged, not filtered again
    chin = get_law("chinchilla")
    assert add_features(table, chin) is table and missing_derived(table, chin) == []


def test_add_features_names_the_missing_schedule() -> None:
    with pytest.raises(InputError, match="needs schedule features"):
        add_features(pd.DataFrame({"run_id": ["a"], "step": [1], "loss": [3.0]}), get_law("lr_annealing"))


def test_input_map_counts_as_present() -> None:
    table = pd.DataFrame({"run_id": ["a"], "step": [1], "S1": [0.1], "S2": [0.0]})
    law = get_law("lr_annealing")
    assert add_features(table, law, input_map={"s1": "S1", "s2": "S2"}) is table


def test_the_engine_itself_builds_declared_features(tmp_path: Path) -> None:
    """fit_law / Fitter on a raw RunTable (schedules only, no LR-area columns) fit a schedule law: the feature path
    sits in the engine's data preparation, so decisions that call the engine directly get it too."""
    from mixlaw.api import load_table
    from mixlaw.fit import fit_law

    table = load_table(_store(tmp_path, "lr_annealing"))
    assert "s1" not in table.columns
    res = fit_law("lr_annealing", table, FitOptions(seed=0), target="loss")
    truth = get_law("lr_annealing").example_params
    assert res.params["alpha"] == pytest.approx(truth["alpha"], rel=0.05)
