"""The built-in CMR and CPT decisions carry the identifiability verdict of every fit they use (``DecisionResult.fits``)
and are weak, with a ``fit_unpinned`` reason naming the fit, when they rest on a fit the data do not pin down where
they read it. A fit is constructed unidentifiable (its rows all at one input value); the same decision on well-spread
rows stays ``ok``. Seeded; a few seconds each."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw import api
from mixlaw.decide.builtin.cmr import CriticalMixtureRatio
from mixlaw.decide.builtin.cpt import fit_health as cpt_health
from mixlaw.decide.contract import DecisionResult, FitHealth, Status
from mixlaw.design.simulate_cmr import simulate_cmr_runs
from mixlaw.laws import get_law
from mixlaw.options import FitOptions

UNIT = 2e8
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}  # laws.md §6.6
RATIOS = (0.125, 0.2, 0.25, 1 / 3, 0.5)
OPTS = {"general_eval": "general", "domain_eval": "code"}


def test_assess_reads_rows_at_one_input_as_unidentifiable_and_moving_only_off_them() -> None:
    law = get_law("dloss_domain", token_unit=UNIT)
    p = {"alpha1": -0.05, "s1": 0.4, **{k: 0.0 for k in law.param_names if k not in ("alpha1", "s1")}}
    rng = np.random.default_rng(0)
    t = np.full(12, 20 * UNIT)
    y = np.asarray(law.evaluate({"tokens": t}, p)) + 1e-4 * rng.standard_normal(t.size)
    here = FitHealth.assess("one_t", law, {"tokens": t}, y, p, at={"tokens": t[:1]})
    assert here.identifiability == "unidentifiable" and not here.pinned
    assert not here.moves_answer  # read at its own rows: nothing the data miss moves the reading
    far = FitHealth.assess("one_t", law, {"tokens": t}, y, p, at={"tokens": np.array([20, 200]) * UNIT})
    assert far.moves_answer and far.reason() is not None and far.reason().code == "fit_unpinned"
    spread = np.linspace(2, 100, 12) * UNIT
    ok = FitHealth.assess("spread", law, {"tokens": spread}, np.asarray(law.evaluate({"tokens": spread}, p))
                          + 1e-4 * rng.standard_normal(12), p, at={"tokens": np.array([200]) * UNIT})  # fmt: skip
    assert ok.identifiability == "ok" and ok.pinned


def _one_t(dec: object, size_index: int, ratio: float) -> object:
    """``dec`` with the rows of one ratio's curves moved to one token count: an unidentifiable fit that
    the decision still reads from its first evaluation to the budget."""
    sizes = list(dec.sizes)  # type: ignore[attr-defined]
    s = sizes[size_index]
    c = dict(s.curves[ratio])
    c["tokens"] = np.full(len(c["tokens"]), float(np.median(c["tokens"])))
    sizes[size_index] = dataclasses.replace(s, curves={**s.curves, ratio: c})
    return dataclasses.replace(dec, sizes=sizes)  # type: ignore[type-var]


def test_cmr_carries_every_fit_and_is_weak_on_an_unpinned_one(monkeypatch: pytest.MonkeyPatch) -> None:
    table = simulate_cmr_runs(RATIOS, P460, token_unit=UNIT, noise=1e-5, random_state=0)
    res = api.decide(table, "cmr", options=OPTS)
    names = [f.name for f in res.fits]
    assert res.status is Status.OK and "fit_unpinned" not in res.reason_codes
    assert len(names) == 2 * len(RATIOS) + 1 and names[-1].startswith("cmr_law@")  # both curves a ratio, the law
    assert all(f.identifiability for f in res.fits)  # every fit has its verdict, none invented as "unknown"
    assert DecisionResult.from_json(res.to_json()) == res

    run = CriticalMixtureRatio._run

    def constructed(self: CriticalMixtureRatio, *a: object, **k: object) -> object:
        dec = run(self, *a, **k)
        return _one_t(dec, 0, 0.25)

    monkeypatch.setattr(CriticalMixtureRatio, "_run", constructed)
    weak = api.decide(table, "cmr", options=OPTS)
    bad = [f for f in weak.fits if f.name == "dL_general@4.6e+08,R=0.25"]
    assert bad and bad[0].identifiability == "unidentifiable" and bad[0].moves_answer
    assert weak.status is Status.WEAK
    why = {r.params["name"] for r in weak.reasons if r.code == "fit_unpinned"}  # the ratio's rows feed both curves
    assert why == {"dL_general@4.6e+08,R=0.25", "dL_domain@4.6e+08,R=0.25"}
    assert DecisionResult.from_json(weak.to_json()) == weak


def _lr_bundle(tmp_path: object, kinds: tuple[str, ...]) -> str:
    from mixlaw.decide.cpt import CptFits
    from mixlaw.fit import fit_law
    from mixlaw.schedules import Schedule, add_schedule_features

    rng = np.random.default_rng(4)
    scheds = {k: Schedule.parse(f"{k}:peak=2e-4,steps=6000,warmup=200") for k in kinds}
    table = add_schedule_features(
        pd.DataFrame([{"run_id": r, "step": s} for r in scheds for s in range(300, 6001, 100)]), scheds
    )
    p = {"L0": 3.0, "A": 0.5, "alpha": 0.5, "C": 0.3}
    table["loss"] = get_law("lr_annealing").evaluate({"s1": table["s1"].to_numpy(), "s2": table["s2"].to_numpy()}, p)
    table["loss"] *= np.exp(3e-4 * rng.standard_normal(len(table)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unidentifiable fit warns: the decision must say it
        res = fit_law("lr_annealing", table, FitOptions(seed=0), target="loss")
    path = f"{tmp_path}/fit_{'_'.join(kinds)}.json"
    CptFits.from_results({"loss": res}, pt_set="loss", max_lr=2e-4).save(path)
    return path


def test_cpt_carries_the_law_fit_verdict_and_is_weak_on_an_unpinned_one(tmp_path: object) -> None:
    from mixlaw.decide.cpt import load_fits

    plan = f"{tmp_path}/plan.toml"
    with open(plan, "w") as fh:
        fh.write('[pt]\nschedule = "wsd:peak=2e-4,steps=20000,decay=1600,final=2e-5"\n[cpt]\nschedule = "cosine:'
                 'peak=2e-4,steps=3000,warmup=100,start=2e-5,final=2e-5"\n[areas]\neval_every = 500\n')  # fmt: skip
    constant = _lr_bundle(tmp_path, ("constant",))  # no annealing in the rows: the annealing term C is not pinned
    (h,) = cpt_health(load_fits(constant))
    assert h.identifiability == "unidentifiable" and "C" in h.weak and h.status == "unidentifiable"
    res = api.decide(None, "cpt_critical", options={"fit": constant, "plan": plan})
    assert res.status is not Status.OK and res.fits == (h,)
    assert any(r.code == "fit_unpinned" and "C" in r.text for r in res.reasons)
    both = _lr_bundle(tmp_path, ("constant", "cosine"))
    res2 = api.decide(None, "cpt_critical", options={"fit": both, "plan": plan})
    assert res2.fits[0].identifiability == "ok" and "fit_unpinned" not in res2.reason_codes


def test_the_decision_page_says_when_an_unpinned_fit_does_not_move_the_answer() -> None:
    from mixlaw.decide.contract import FitHealth
    from mixlaw.report.decision_page import _pinned

    base = dict(name="f", law="chinchilla", status="converged", identifiable=False, identifiability="unidentifiable")
    assert _pinned(FitHealth(**base, moves_answer=False)) == "NOT identifiable (does not move the answer)"
    assert _pinned(FitHealth(**base, moves_answer=True)) == "NOT identifiable"
    assert _pinned(FitHealth(**{**base, "identifiable": True, "identifiability": "ok"}, moves_answer=False)) == (
        "identifiable"
    )
