"""CPT decisions: plan predictions, guards, family optimisation, schedule-aware CMR, plan/fit files."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.cpt import (
    CptFits,
    CptPlan,
    LawFit,
    critical_point,
    load_fits,
    load_plan,
    optimize,
    optimum_vs_weight,
    predict_plan,
    schedule_aware_cmr,
    turning_length,
)
from mixlaw.errors import ExtrapolationWarning, InputError
from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions
from mixlaw.schedules import Schedule, add_schedule_features

DPT = {"L0": 3.057, "A": 0.490, "alpha": 0.497, "C1": 0.299, "C2": 0.298, "B": 0.366, "E": 28.0, "beta": 0.189}
DCPT = {"L0": 3.024, "A": 0.412, "alpha": 0.677, "C1": 0.278, "C2": 0.324, "B": -0.666, "E": 5662.0, "beta": 0.146}


def _boot(law_name: str, p: dict[str, float], rng: np.random.Generator, n: int = 30, **opt: str) -> LawFit:
    law = get_law(law_name, **opt)
    point = np.array([p[k] for k in law.param_names])
    boot = point * (1 + 0.01 * rng.standard_normal((n, point.size)))
    return LawFit(law, dict(p), boot, max_lr=2e-4)


def _fits(rng: np.random.Generator | None = None) -> CptFits:
    rng = rng or np.random.default_rng(0)
    return CptFits(
        fits={"loss_fineweb": _boot("cpt", DPT, rng), "loss_kp": _boot("cpt", DCPT, rng)},
        pt_set="loss_fineweb",
        cpt_set="loss_kp",
        ood={"loss_c4": LawFit(get_law("ood_combination"), {"ood_coef_pt": 0.867, "ood_coef_cpt": 0.152})},
    )


def _replay_fits(rng: np.random.Generator) -> CptFits:
    dpt = {**DPT, "a1": 0.0, "a2": 1.5}
    dcpt = {**DCPT, "a1": 0.0, "a2": -1.0}
    return CptFits(
        fits={"loss_fineweb": _boot("cpt_replay", dpt, rng), "loss_kp": _boot("cpt_replay", dcpt, rng)},
        pt_set="loss_fineweb",
        cpt_set="loss_kp",
    )


PLAN = CptPlan(
    pt=Schedule.parse("wsd:peak=2e-4,steps=8000,decay=1600,final=2e-5"),
    cpt=Schedule.parse("cosine:peak=2e-4,steps=4000,warmup=200,start=2e-5,final=2e-5"),
    eval_every=250,
)


def test_predict_plan_sets_bands_and_composite() -> None:
    pred = predict_plan(_fits(), PLAN, weights=(0.3, 0.7))
    assert {"pred_loss_fineweb", "pred_loss_kp", "pred_loss_c4", "pred_composite"} <= set(pred.columns)
    assert pred["step"].iloc[-1] == 12000 and 8000 in set(pred["step"])
    np.testing.assert_allclose(
        pred["pred_composite"], 0.3 * pred["pred_loss_fineweb"] + 0.7 * pred["pred_loss_kp"], rtol=1e-12
    )
    np.testing.assert_allclose(
        pred["pred_loss_c4"], 0.867 * pred["pred_loss_fineweb"] + 0.152 * pred["pred_loss_kp"], rtol=1e-12
    )
    assert np.all(pred["lo_loss_kp"] <= pred["hi_loss_kp"])
    # PT rows follow the plain LR-annealing law
    pt_rows = pred[pred["cpt_step"] == 0]
    base = get_law("lr_annealing").evaluate(
        {"s1": pt_rows["s1_pt"].to_numpy(), "s2": pt_rows["s2_pt"].to_numpy()},
        {"L0": DPT["L0"], "A": DPT["A"], "alpha": DPT["alpha"], "C": DPT["C1"]},
    )
    np.testing.assert_allclose(pt_rows["pred_loss_fineweb"], base, rtol=1e-12)
    # D_pt rises after the switch, D_cpt falls
    at = pred.set_index("step")
    assert at.loc[9000, "pred_loss_fineweb"] > at.loc[8000, "pred_loss_fineweb"]
    assert at.loc[12000, "pred_loss_kp"] < at.loc[8000, "pred_loss_kp"] - 0.2


def test_guards_warn_on_peak_lr_and_zero_lr_tail() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        predict_plan(_fits(), PLAN)  # inside the fitted LR range, no zero tail: silent
    with pytest.warns(ExtrapolationWarning, match="exceeds the largest fitted LR"):
        predict_plan(_fits(), PLAN.with_cpt_peak(6e-4))
    tail = Schedule.from_lr(np.concatenate([PLAN.cpt.lrs(), np.zeros(2000)]))
    with pytest.warns(ExtrapolationWarning, match="LR ≈ 0"):
        predict_plan(_fits(), CptPlan(pt=PLAN.pt, cpt=tail))


def test_optimize_replay_follows_the_weights() -> None:
    fits = _replay_fits(np.random.default_rng(1))
    plan = CptPlan(pt=PLAN.pt, cpt=PLAN.cpt)
    keep_pt = optimize(fits, plan, "replay", (1.0, 0.0))
    keep_cpt = optimize(fits, plan, "replay", (0.0, 1.0))
    assert keep_pt.best > 0.8 and keep_cpt.best < 0.2
    assert keep_pt.interval is not None and keep_pt.interval[0] <= keep_pt.interval[1]
    table = optimum_vs_weight(fits, plan, "replay", [0.0, 0.5, 1.0])
    assert np.all(np.diff(table["best"].to_numpy()) >= 0)
    with pytest.raises(InputError, match="replay-aware"):
        optimize(_fits(), plan, "replay", (0.5, 0.5))


def test_optimize_peak_lr_and_loss_potential() -> None:
    fits = _fits()
    lo = optimize(fits, PLAN, "peak_lr", (0.95, 0.05), grid=np.geomspace(2.5e-5, 2e-4, 8))
    hi = optimize(fits, PLAN, "peak_lr", (0.05, 0.95), grid=np.geomspace(2.5e-5, 2e-4, 8))
    assert lo.best < hi.best
    res = optimize(fits, PLAN, "loss_potential", (0.5, 0.5), grid=np.linspace(0.1, 1.0, 10))
    assert 0.1 <= res.best <= 1.0 and res.objective.shape == (10,)
    assert json.loads(json.dumps(res.to_dict()))["over"] == "loss_potential"
    with pytest.raises(InputError):
        optimize(fits, PLAN, "peak_lr", (0.7, 0.7))


def test_schedule_aware_cmr() -> None:
    fit = _replay_fits(np.random.default_rng(2)).fits["loss_fineweb"]
    pt = Schedule.parse("constant:peak=2e-4,steps=8000")
    kw = {"budget_steps": 3000, "pt_schedule": pt}
    small = schedule_aware_cmr(fit, "cosine:peak=2e-4,steps=3000,warmup=100", 0.02, **kw)
    large = schedule_aware_cmr(fit, "cosine:peak=2e-4,steps=3000,warmup=100", 0.06, **kw)
    assert small.cmr is not None and large.cmr is not None
    assert 0 <= small.cmr <= large.cmr <= 1
    assert small.interval is not None and small.interval[0] <= small.interval[1]
    assert small.n_boot == 30 and small.constant_lr_cmr is not None
    # the annealed schedule forgets less than constant LR at the same peak
    assert small.cmr >= small.constant_lr_cmr
    with pytest.raises(InputError, match="replay law"):
        schedule_aware_cmr(_fits().fits["loss_fineweb"], "constant:peak=2e-4,steps=10", 0.02, **kw)
    with pytest.raises(InputError, match="budget"):
        schedule_aware_cmr(fit, "constant:peak=2e-4,steps=10", 0.02, pt_schedule=pt)


def test_plan_toml(tmp_path) -> None:
    p = tmp_path / "plan.toml"
    p.write_text(
        '[pt]\nschedule = "wsd:peak=2e-4,steps=40000,decay=8000"\nloss_potential = 0.5\nbranch_step = 30000\n'
        '[cpt]\nschedule = "cosine:peak=2e-4,steps=10000,warmup=500"\npeak_lr = 1e-4\nreplay_ratio = 0.25\n'
        "[areas]\neval_every = 500\n"
    )
    plan = load_plan(p)
    assert plan.pt is not None and plan.pt.final_lr == pytest.approx(1e-4)
    assert plan.cpt.peak_lr == pytest.approx(1e-4) and plan.replay_ratio == 0.25 and plan.pt_steps == 30000
    assert plan.cpt.start_lr == pytest.approx(1e-4)  # the re-warm-up starts from the annealed PT LR
    p.write_text('[cpt]\nschedule = "cosine:peak=2e-4,steps=100"\ncolour = 1\n')
    with pytest.raises(InputError, match="colour") as ei:
        load_plan(p)
    assert "\n" not in str(ei.value)
    p.write_text("[cpt\n")
    with pytest.raises(InputError, match="TOML"):
        load_plan(p)


def test_fit_bundle_round_trip_from_engine(tmp_path) -> None:
    rng = np.random.default_rng(4)
    scheds = {
        "a": Schedule.parse("constant:peak=2e-4,steps=6000,warmup=200"),
        "b": Schedule.parse("cosine:peak=2e-4,steps=6000,warmup=200"),
    }
    table = add_schedule_features(
        pd.DataFrame([{"run_id": r, "step": s} for r in scheds for s in range(300, 6001, 100)]), scheds
    )
    p = {"L0": 3.0, "A": 0.5, "alpha": 0.5, "C": 0.3}
    table["loss"] = get_law("lr_annealing").evaluate({"s1": table["s1"].to_numpy(), "s2": table["s2"].to_numpy()}, p)
    table["loss"] *= np.exp(3e-4 * rng.standard_normal(len(table)))
    res = fit_law("lr_annealing", table, FitOptions(bootstrap=BootstrapOptions(resamples=8), seed=0), target="loss")
    bundle = CptFits.from_results({"loss": res}, pt_set="loss", max_lr=2e-4)
    path = tmp_path / "fit.json"
    bundle.save(path)
    back = load_fits(path)
    assert back.fits["loss"].params == pytest.approx(res.params)
    assert back.fits["loss"].bootstrap is not None and back.max_lr == 2e-4
    # a single engine FitResult JSON also loads
    (tmp_path / "one.json").write_text(res.to_json())
    one = load_fits(tmp_path / "one.json")
    assert one.pt_set == "loss"
    with pytest.raises(InputError):
        load_fits(tmp_path / "missing.json")


def test_blackbox_mode() -> None:
    law = get_law("cpt", base="blackbox")
    fits = CptFits(fits={"loss_c4": LawFit(law, dict(law.example_params))}, pt_set="loss_c4")
    plan = CptPlan(pt=None, cpt=Schedule.parse("cosine:peak=2e-5,steps=20000,warmup=500"))
    pred = predict_plan(fits, plan)
    assert pred["step"].iloc[-1] == 20000 and np.all(np.isfinite(pred["pred_loss_c4"]))
    with pytest.raises(InputError, match="black-box"):
        critical_point(fits, plan)


def test_turning_length_composite_and_zero_final_lr() -> None:
    fits = _fits()
    plan = CptPlan(
        pt=Schedule.parse("constant:peak=2e-4,steps=4000"), cpt=Schedule.parse("constant:peak=2e-4,steps=10")
    )
    small_w = turning_length(fits, plan, weights=(0.1, 0.9), horizon=20000)
    assert small_w.steps == 0 and small_w.reason == "never above its start"
    big_w = turning_length(fits, plan, weights=(1.0, 0.0), horizon=20000)
    assert big_w.steps == 4325
    ends_at_zero = CptPlan(pt=plan.pt, cpt=Schedule.parse("cosine:peak=2e-4,steps=300"))
    tl = turning_length(fits, ends_at_zero)
    assert tl.horizon == 300 and tl.asymptotic_class == "unknown"


def test_schedule_aware_cmr_from_engine_fit_with_bootstrap() -> None:
    rng = np.random.default_rng(9)
    law = get_law("cpt_replay")
    truth = {**DPT, "a1": 0.0, "a2": 1.5}
    pt = Schedule.parse("wsd:peak=2e-4,steps=6000,decay=1000,final=2e-5")
    cpt = Schedule.parse("cosine:peak=2e-4,steps=3000,warmup=100,final=2e-5,start=2e-5")
    rows, scheds = [], {"pt": pt}
    rows += [{"run_id": "pt", "step": s, "parent_run": None, "w_general": 1.0} for s in range(500, 6001, 250)]
    for r in (0.0, 0.25, 0.5, 0.75):
        scheds[f"cpt-{r}"] = cpt
        rows += [{"run_id": f"cpt-{r}", "step": s, "parent_run": "pt", "w_general": r} for s in range(0, 3001, 100)]
    table = add_schedule_features(pd.DataFrame(rows), scheds, replay_column="w_general")
    clean = law.evaluate({c: table[c].to_numpy() for c in law.inputs}, truth)
    table["loss_general"] = clean * np.exp(2e-4 * rng.standard_normal(clean.size))
    # resample rows (a run-level bootstrap over five runs often drops the only PT run)
    res = fit_law(
        law,
        table,
        FitOptions(bootstrap=BootstrapOptions(resamples=6, group_column=None), seed=0),
        target="loss_general",
    )
    out = schedule_aware_cmr(res, cpt, 0.03, budget_tokens=3000 * 4e6, tokens_per_step=4e6, pt_schedule=pt)
    ref = schedule_aware_cmr(LawFit(law, truth), cpt, 0.03, budget_steps=3000, pt_schedule=pt)
    assert out.cmr is not None and ref.cmr is not None and abs(out.cmr - ref.cmr) < 0.1
    assert out.n_boot == 6 and out.interval is not None
