"""CPT runs stored without a parent and without PT rows (a black-box or downloaded base model): the CPT law gets
the base model's PT history from ``base_schedule`` or, with ``base="blackbox"``, fits ``S1_pt`` as a free parameter
(Wang et al. 2025, Sec. 6; laws.md §5.5); without either the fit is refused with both remedies named. Runs are
simulated from the paper's Fig. 3 D_pt law behind a known PT schedule; fits use the first 1,000 CPT steps and are
judged on the last 500 (held out)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw import api
from mixlaw.decide.cmr.common import evaluate
from mixlaw.errors import InputError
from mixlaw.fit.problem.features import add_features
from mixlaw.laws.cpt import base_assumption
from mixlaw.options import FitOptions, StartOptions
from mixlaw.schedules import add_schedule_features

PT = "wsd:peak=2e-4,steps=4000,warmup=50,decay=800"
CPT = ("constant:peak=2e-4,steps=1500,warmup=50", "cosine:peak=2e-4,steps=1500,warmup=50",
       "wsd:peak=1e-4,steps=1500,warmup=50,decay=600")  # fmt: skip


def _orphans(noise: float = 5e-4, seed: int = 0) -> pd.DataFrame:
    """Three CPT runs without parent_run; their loss is the known-base law behind PT (a parent the table lacks)."""
    rng = np.random.default_rng(seed)
    rows = [{"run_id": "pt", "step": 0, "phase": "pt", "parent_run": None, "schedule": PT}]
    for k, sch in enumerate(CPT):
        rows += [{"run_id": f"c{k}", "step": s, "phase": "cpt", "parent_run": "pt", "schedule": sch}
                 for s in range(100, 1501, 100)]  # fmt: skip
    full = add_schedule_features(pd.DataFrame(rows))
    law = api.build_law("cpt")
    loss = evaluate(law, {c: full[c].to_numpy() for c in law.inputs}, law.example_params)
    out = full.assign(loss=loss + noise * rng.standard_normal(len(full)))
    out = out[out["phase"] == "cpt"].drop(columns=["s1", "s2", "s1_pt", "s1_cpt", "s2_pt", "s2_cpt", "cpt_step"])
    return out.assign(parent_run=None).reset_index(drop=True)


def _held_out_error(options: dict[str, str]) -> tuple[float, object, list[str]]:
    runs = _orphans()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = api.fit(
            runs[runs["step"] <= 1000],
            "cpt",
            FitOptions(starts=StartOptions(n_polish=2)),
            target="loss",
            law_options=options,
        )
    law = api.build_law("cpt", options)
    test = add_features(runs[runs["step"] > 1000], law)
    pred = evaluate(law, {c: test[c].to_numpy() for c in law.inputs}, fit.params)
    return float(np.max(np.abs(pred - test["loss"].to_numpy()))), fit, [str(w.message) for w in caught]


def test_orphan_cpt_runs_are_refused_with_both_remedies_named() -> None:
    with pytest.raises(InputError) as ei:
        api.fit(_orphans(), "cpt", target="loss")
    msg = str(ei.value)
    assert "\n" not in msg and "base_schedule=SPEC" in msg and "base=blackbox" in msg and "'c0'" in msg


def test_given_base_schedule_recovers_the_held_out_losses() -> None:
    err, _, said = _held_out_error({"base_schedule": PT})
    assert err < 0.005, err  # noise 5e-4; the refused reading predicted 2.01 against 3.36 observed
    # one base for every run: the PT areas are constant, and the fit says what that leaves undetermined
    assert any("'s2_pt' is constant" in m for m in said), said


def test_black_box_base_fits_s1_pt_and_predicts_the_held_out_losses() -> None:
    err, fit, _ = _held_out_error({"base": "blackbox"})
    assert err < 0.02, err
    assert "s1_pt_offset" in fit.params and fit.params["s1_pt_offset"] > 0  # type: ignore[attr-defined]


def test_the_assumption_is_said() -> None:
    assert base_assumption(api.build_law("cpt", {"base": "blackbox"})).startswith("black-box base: the PT forward")
    assert PT in base_assumption(api.build_law("cpt", {"base_schedule": PT}))
    assert base_assumption(api.build_law("cpt")) == "PT history from each CPT run's parent run"


def test_orphans_in_blackbox_mode_get_their_own_areas_as_cpt_areas() -> None:
    t = pd.DataFrame([{"run_id": "c", "step": s, "phase": "cpt", "parent_run": None,
                       "schedule": "constant:peak=1e-3,steps=100"} for s in (0, 10, 100)])  # fmt: skip
    out = add_schedule_features(t, orphans="blackbox")
    assert (out["s1_pt"] == 0).all() and (out["s2_pt"] == 0).all()
    assert out["s1_cpt"].tolist() == pytest.approx([0.0, 0.01, 0.1])


def test_cpt_verbs_say_which_base_they_assume(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from mixlaw.cli.cpt import app
    from mixlaw.decide.cpt import CptFits, LawFit
    from mixlaw.laws import get_law

    bb = get_law("cpt", base="blackbox")
    p = dict(bb.example_params)
    fits = CptFits(fits={"loss_c4": LawFit(bb, p, max_lr=2e-4), "loss_law": LawFit(bb, {**p, "B": -0.79},
                                                                                      max_lr=2e-4)},
                   pt_set="loss_c4", cpt_set="loss_law")  # fmt: skip
    fits.save(tmp_path / "fit.json")
    plan = tmp_path / "plan.toml"
    plan.write_text('[cpt]\nschedule = "cosine:peak=2e-4,steps=3000,warmup=100"\n[areas]\neval_every = 500\n')
    r = CliRunner().invoke(app, ["predict", str(tmp_path / "fit.json"), "--plan", str(plan)])
    assert r.exit_code == 0, r.output
    assert "base: black-box base: the PT forward area S1_pt is a fitted parameter" in r.output
    r = CliRunner().invoke(app, ["predict", str(tmp_path / "fit.json"), "--plan", str(plan), "--json"])
    assert json.loads(r.output)["base"].startswith("black-box base")
