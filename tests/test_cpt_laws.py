"""Schedule-aware and CPT laws: contract, limits, recovery through the engine, identifiability flags."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from mixlaw.decide.cpt import identifiability
from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.laws.cpt_replay import replay_factor
from mixlaw.laws.multi_power import PUBLISHED_MPL
from mixlaw.options import FitOptions, ObjectiveOptions
from mixlaw.schedules import Schedule, add_schedule_features
from mixlaw.schedules.multi_power import mpl_columns, multi_power_exact, multi_power_features

CPT_LAWS = ["lr_annealing", "cpt", "cpt_size", "cpt_replay", "ood_combination", "multi_power"]


def _inputs(law_name: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    law = get_law(law_name)
    if law_name == "multi_power":
        s = Schedule.parse("wsd:peak=3e-4,steps=3000,warmup=200,decay=600,final=3e-5")
        return multi_power_features(s.lrs(), np.linspace(300, 3000, n).astype(int), eta0=s.eta0)
    x = {}
    for c in law.inputs:
        if c in ("s1", "s1_pt"):
            x[c] = rng.uniform(0.5, 8.0, n)
        elif c == "s1_cpt":
            x[c] = rng.uniform(0.0, 2.0, n)
        elif c.startswith("s2"):
            x[c] = rng.uniform(-0.02, 0.18, n)
        elif c == "n_params":
            x[c] = rng.choice([106e6, 594e6, 1720e6], n)
        elif c == "replay_ratio":
            x[c] = rng.uniform(0, 1, n)
        else:  # loss_pt, loss_cpt
            x[c] = rng.uniform(2.5, 3.5, n)
    return x


@pytest.mark.parametrize("name", CPT_LAWS)
def test_law_contract_broadcast_and_gradients(name: str) -> None:
    rng = np.random.default_rng(1)
    law = get_law(name)
    assert law.formula and "arXiv" in (law.citation + (law.__doc__ or ""))
    x = _inputs(name, 7, rng)
    y = law.evaluate(x, law.example_params)
    assert y.shape == (7,) and np.all(np.isfinite(y))
    S = 5
    base = law.to_internal(law.example_params)
    U = torch.tensor(np.tile(base, (S, 1)) + 0.01 * rng.standard_normal((S, base.size)), requires_grad=True)
    xt = {k: torch.as_tensor(np.asarray(v, dtype=np.float64)) for k, v in x.items()}
    out = law.log_predict(xt, law.to_natural(U)) if law.fit_space == "log" else law.predict(xt, law.to_natural(U))
    assert out.shape == (S, 7)
    out.sum().backward()
    assert U.grad is not None and torch.all(torch.isfinite(U.grad))
    # the grid is well formed
    assert law.internal_grid().shape[1] == len(law.param_specs)


def test_shift_is_zero_on_pt_steps_and_signs() -> None:
    law = get_law("cpt")
    p = dict(law.example_params)
    x = {"s1_pt": np.array([1.0, 3.0]), "s1_cpt": np.zeros(2), "s2_pt": np.array([0.0, 0.1]), "s2_cpt": np.zeros(2)}
    base = get_law("lr_annealing").evaluate(
        {"s1": x["s1_pt"], "s2": x["s2_pt"]}, {"L0": p["L0"], "A": p["A"], "alpha": p["alpha"], "C": p["C1"]}
    )
    np.testing.assert_allclose(law.evaluate(x, p), base, rtol=1e-14)
    x["s1_cpt"] = np.array([0.5, 0.5])
    assert np.all(law.evaluate(x, p) > law.evaluate(x, {**p, "B": 0.0}))  # forgetting on D_pt
    assert np.all(law.evaluate(x, {**p, "B": -0.5}) < law.evaluate(x, {**p, "B": 0.0}))  # gain on D_cpt


def test_replay_factor_limits() -> None:
    r = torch.linspace(0, 1, 11, dtype=torch.float64)
    for a in (-3.0, -1e-9, 0.0, 1e-9, 2.0):
        g = replay_factor(r, torch.tensor(a, dtype=torch.float64))
        assert float(g[0]) == pytest.approx(0.0, abs=1e-12) and float(g[-1]) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(replay_factor(r, torch.tensor(0.0, dtype=torch.float64)).numpy(), r.numpy())
    a = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    replay_factor(r, a).sum().backward()
    assert a.grad is not None and torch.isfinite(a.grad)


def test_literal_replay_form_matches_printed_eq8() -> None:
    # Fig. 19 D_pt values (beta not printed: take 0.2)
    p = {"L0": 3.067, "A": 0.480, "alpha": 0.510, "C1": 0.280, "C2": 0.263, "a1": 0.055}
    p.update({"B": 0.276, "E": 99.35, "beta": 0.2, "a2": 3.238})
    x = {"s1_pt": np.array([6.0]), "s1_cpt": np.array([1.0]), "s2_pt": np.array([0.17]), "s2_cpt": np.array([0.1])}
    x["replay_ratio"] = np.array([1 / 3])
    r_pt, r_cpt = 1 / 3, 2 / 3
    shift = 1 - (1 + 99.35 * 1.0) ** -0.2
    want = 3.067 + 0.48 * 7.0**-0.51 - 0.28 * 0.17 - 0.263 * 0.1 * np.exp(0.055 * r_pt)
    want += 0.276 * shift * (1 - np.exp(-3.238 * r_cpt))
    got = get_law("cpt_replay", form="literal", side="pt").evaluate(x, p)
    assert got[0] == pytest.approx(want, rel=1e-12)
    # the normalised form is 1 at r_cpt = 1 and 0 at pure replay
    norm = get_law("cpt_replay")
    q = dict(norm.example_params)
    x0 = {**x, "replay_ratio": np.array([1.0])}
    no_shift = get_law("cpt").evaluate({k: v for k, v in x.items() if k != "replay_ratio"}, {**q, "B": 0.0})
    assert norm.evaluate(x0, {**q, "a1": 0.0})[0] == pytest.approx(no_shift[0] - 0.0, rel=1e-12)


def _sim_runs(params: dict[str, float], rng: np.random.Generator, noise: float = 2e-4) -> pd.DataFrame:
    """PT (WSD) runs and CPT (cosine, re-warm-up) runs branching from them, evaluated every 250 steps."""
    pt = {
        "pt-wsd": Schedule.parse("wsd:peak=2e-4,steps=8000,decay=1600,warmup=200"),
        "pt-const": Schedule.parse("constant:peak=2e-4,steps=8000,warmup=200"),
    }
    cpt = {
        "cpt-a": ("pt-wsd", Schedule.parse("cosine:peak=2e-4,steps=4000,warmup=200")),
        "cpt-b": ("pt-const", Schedule.parse("cosine:peak=1e-4,steps=4000,warmup=200")),
        "cpt-c": ("pt-const", Schedule.parse("constant:peak=2e-4,steps=4000")),
    }
    rows = []
    for rid in pt:
        for s in range(250, 8001, 250):
            rows.append({"run_id": rid, "step": s, "parent_run": None})
    for rid, (parent, _) in cpt.items():
        for s in range(0, 4001, 250):
            rows.append({"run_id": rid, "step": s, "parent_run": parent})
    table = pd.DataFrame(rows)
    scheds = {**pt, **{k: v for k, (_, v) in cpt.items()}}
    table = add_schedule_features(table, scheds)
    law = get_law("cpt")
    y = law.evaluate({c: table[c].to_numpy() for c in law.inputs}, params)
    table["loss"] = y * np.exp(noise * rng.standard_normal(y.size))
    return table


def test_cpt_law_recovered_through_engine() -> None:
    rng = np.random.default_rng(7)
    truth = get_law("cpt").example_params
    table = _sim_runs(truth, rng)
    res = fit_law("cpt", table, FitOptions(seed=0), target="loss")
    law = get_law("cpt")
    pred = law.evaluate({c: table[c].to_numpy() for c in law.inputs}, res.params)
    clean = law.evaluate({c: table[c].to_numpy() for c in law.inputs}, truth)
    assert np.max(np.abs(pred - clean)) < 3e-3
    for k in ("L0", "A", "alpha", "C1", "C2"):
        assert res.params[k] == pytest.approx(truth[k], rel=0.15), k


def test_lr_annealing_recovered_and_predicts_wsd() -> None:
    rng = np.random.default_rng(3)
    truth = {"L0": 3.0, "A": 0.5, "alpha": 0.5, "C": 0.3}
    scheds = {
        "constant": Schedule.parse("constant:peak=2e-4,steps=20000,warmup=500"),
        "cosine": Schedule.parse("cosine:peak=2e-4,steps=20000,warmup=500,final=2e-5"),
        "wsd": Schedule.parse("wsd:peak=2e-4,steps=20000,warmup=500,decay=4000"),
    }
    rows = [{"run_id": r, "step": s} for r in scheds for s in range(1000, 20001, 200)]
    table = add_schedule_features(pd.DataFrame(rows), scheds)
    law = get_law("lr_annealing")
    clean = law.evaluate({"s1": table["s1"].to_numpy(), "s2": table["s2"].to_numpy()}, truth)
    table["loss"] = clean * np.exp(5e-4 * rng.standard_normal(clean.size))
    train = table[table["run_id"] != "wsd"].reset_index(drop=True)
    res = fit_law("lr_annealing", train, FitOptions(seed=0), target="loss")
    for k, v in truth.items():
        assert res.params[k] == pytest.approx(v, rel=0.05), k
    wsd = table[table["run_id"] == "wsd"]
    pred = law.evaluate({"s1": wsd["s1"].to_numpy(), "s2": wsd["s2"].to_numpy()}, res.params)
    assert np.mean(np.abs(pred - clean[table["run_id"].to_numpy() == "wsd"])) < 2e-3


def test_ood_combination_recovers_coefficients() -> None:
    rng = np.random.default_rng(5)
    lpt, lcpt = rng.uniform(2.8, 3.4, 60), rng.uniform(2.0, 2.9, 60)
    table = pd.DataFrame({"loss_general": lpt, "loss_code": lcpt})
    table["loss_ood"] = 1.853 * lcpt - 0.546 * lpt + 1e-4 * rng.standard_normal(60)
    res = fit_law(
        "ood_combination",
        table,
        FitOptions(objective=ObjectiveOptions(loss="l2")),
        target="loss_ood",
        input_map={"loss_pt": "loss_general", "loss_cpt": "loss_code"},
    )
    assert res.params["ood_coef_cpt"] == pytest.approx(1.853, abs=2e-3)
    assert res.params["ood_coef_pt"] == pytest.approx(-0.546, abs=2e-3)


def test_identifiability_flags_shift_parameters_on_short_constant_cpt() -> None:
    # Constant-LR CPT over a short window: B, E, beta trade off (laws.md §5.7 item 5).
    law = get_law("cpt")
    p = law.example_params
    s1_cpt = np.linspace(0.0, 0.02, 40)  # 100 steps at 2e-4
    table = pd.DataFrame({"s1_pt": np.full(40, 2.0), "s1_cpt": s1_cpt, "s2_pt": np.zeros(40), "s2_cpt": np.zeros(40)})
    out = identifiability({"law": "cpt", "params": p}, table)
    assert set(out["flagged"]) & {"B", "E", "beta"}
    assert "C2" in out["flagged"]  # s2_cpt is identically 0: no information at all
    assert out["condition"] > 1e4


def test_multi_power_bins_option_and_columns() -> None:
    law = get_law("multi_power", n_bins=16)
    assert law.inputs[0] == "mpl_s1" and len(law.inputs) == 1 + 3 * 16
    assert law.inputs[1:] == mpl_columns(16)
    s = Schedule.parse("multistep:peak=3e-4,steps=4000,warmup=300,milestones=2000,gamma=0.1")
    steps = np.arange(400, 4001, 100)
    x = multi_power_features(s.lrs(), steps, eta0=s.eta0, n_bins=16, n_exact=6)
    p = PUBLISHED_MPL["100M"]
    # a single step drop after the warm-up is represented exactly; the warm-up ramp by quadrature
    np.testing.assert_allclose(law.evaluate(x, p), multi_power_exact(s.lrs(), steps, p, eta0=s.eta0), atol=5e-4)
    with pytest.raises(Exception, match="n_bins"):
        get_law("multi_power", n_bins=1)


@pytest.mark.parametrize("name", ["cpt", "cpt_size", "cpt_replay"])
def test_fixed_shift_rate_option(name: str) -> None:
    free, fixed = get_law(name), get_law(name, fixed_E=100.0)
    assert "E" in free.param_names and "E" not in fixed.param_names
    x = _inputs(name, 6, np.random.default_rng(2))
    p = dict(free.example_params)
    p["E"] = 100.0
    np.testing.assert_allclose(fixed.evaluate(x, {k: v for k, v in p.items() if k != "E"}), free.evaluate(x, p))
    with pytest.raises(Exception, match="fixed_E"):
        get_law(name, fixed_E=-1.0)


def test_fixed_shift_rate_fits_through_engine() -> None:
    rng = np.random.default_rng(11)
    truth = {**get_law("cpt").example_params, "E": 100.0}
    table = _sim_runs(truth, rng)
    res = fit_law(get_law("cpt", fixed_E=100.0), table, FitOptions(seed=0), target="loss")
    assert "E" not in res.params and res.law_options["fixed_E"] == 100.0
    assert res.params["B"] == pytest.approx(truth["B"], rel=0.3)


def test_identifiability_flags_distant_near_optimal_starts() -> None:
    law = get_law("lr_annealing")
    p = dict(law.example_params)
    table = pd.DataFrame({"s1": np.linspace(0.5, 8, 30), "s2": np.linspace(0, 0.17, 30)})
    starts = pd.DataFrame(
        [
            {**p, "objective": 1.0e-4, "status": "converged"},
            {**p, "C": p["C"] * 10, "objective": 1.5e-4, "status": "converged"},  # near-optimal, far away
            {**p, "A": p["A"] * 10, "objective": 9.0e-4, "status": "converged"},  # far worse: ignored
        ]
    )
    out = identifiability({"law": "lr_annealing", "params": p, "starts": starts.to_dict("records")}, table)
    assert out["flagged"] == ["C"] and out["multimodal"]["C"] == pytest.approx(10.0)
