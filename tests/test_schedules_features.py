"""``add_schedule_features``: RunTable LR-area columns for PT and CPT runs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import InputError
from mixlaw.schedules import Schedule, add_schedule_features, areas, cpt_areas
from mixlaw.schedules.multi_power import mpl_columns

PT = Schedule.parse("wsd:peak=2e-4,steps=4000,decay=800,warmup=100")
CPT = Schedule.parse("cosine:peak=2e-4,steps=2000,warmup=100")


def _table() -> pd.DataFrame:
    rows = [{"run_id": "pt", "step": s, "parent_run": None, "w_general": 1.0} for s in (100, 2000, 4000)]
    rows += [{"run_id": "cpt", "step": s, "parent_run": "pt", "w_general": 0.3} for s in (0, 1000, 2000)]
    return pd.DataFrame(rows)


def test_pt_and_cpt_rows() -> None:
    out = add_schedule_features(_table(), {"pt": PT, "cpt": CPT}, replay_column="w_general")
    pt, cpt = out[out["run_id"] == "pt"], out[out["run_id"] == "cpt"]
    a = areas(PT)
    np.testing.assert_allclose(pt["s1"], a.s1[[100, 2000, 4000]])
    assert np.all(pt["s1_cpt"] == 0) and np.all(pt["s2_cpt"] == 0)
    c = cpt_areas(PT, CPT)
    np.testing.assert_allclose(cpt["s1_pt"], c.s1_pt[[4000, 5000, 6000]])
    np.testing.assert_allclose(cpt["s2_cpt"], c.s2_cpt[[4000, 5000, 6000]])
    assert list(cpt["cpt_step"]) == [0, 1000, 2000]
    np.testing.assert_allclose(out["replay_ratio"], out["w_general"])
    # the same from the table's own schedule column (JSON), with steps counted from the root
    t = _table()
    t["schedule"] = np.where(t["run_id"] == "pt", json.dumps(PT.to_dict()), json.dumps(CPT.to_dict()))
    t.loc[t["run_id"] == "cpt", "step"] += 4000
    out2 = add_schedule_features(t, steps_from="root")
    np.testing.assert_allclose(out2["s2_cpt"], out["s2_cpt"])


def test_branch_step_and_multi_power_columns() -> None:
    out = add_schedule_features(_table(), {"pt": PT, "cpt": CPT}, branch_steps={"cpt": 3000}, multi_power_bins=8)
    cpt = out[out["run_id"] == "cpt"]
    assert cpt["s1_pt"].iloc[0] == pytest.approx(areas(PT).s1[3000])
    assert set(mpl_columns(8)) <= set(out.columns) and "mpl_s1" in out


@pytest.mark.parametrize(
    ("schedules", "kwargs", "match"),
    [
        ({"pt": PT}, {}, "no schedule for run 'cpt'"),
        ({"pt": PT, "cpt": CPT}, {"branch_steps": {"cpt": 9000}}, "branches from step 9000"),
        ({"pt": PT, "cpt": Schedule.parse("constant:peak=1e-4,steps=10")}, {}, "outside its schedule"),
        ({"pt": PT, "cpt": CPT}, {"replay_column": "w_code"}, "replay column"),
    ],
)
def test_errors(schedules, kwargs, match) -> None:
    with pytest.raises(InputError, match=match):
        add_schedule_features(_table(), schedules, **kwargs)


def test_features_for_law() -> None:
    from mixlaw.laws import get_law
    from mixlaw.schedules import features_for_law

    t = _table()
    t["schedule"] = np.where(t["run_id"] == "pt", PT.spec(), CPT.spec())
    out = features_for_law(t, get_law("cpt"))
    assert {"s1_pt", "s2_cpt"} <= set(out.columns)
    assert features_for_law(out, get_law("cpt")) is out  # already there: unchanged
    assert features_for_law(t, get_law("chinchilla")) is t
    mp = features_for_law(t[t["step"] > 0], get_law("multi_power", n_bins=8))
    assert set(get_law("multi_power", n_bins=8).inputs) <= set(mp.columns)


def test_parent_step_column_and_logged_lr0() -> None:
    t = _table()
    t["parent_step"] = np.where(t["run_id"] == "cpt", 3000, np.nan)
    out = add_schedule_features(t, {"pt": PT, "cpt": CPT})
    assert out.loc[out["run_id"] == "cpt", "s1_pt"].iloc[0] == pytest.approx(areas(PT).s1[3000])
    s = Schedule.from_dict({"kind": "table", "lr": [1e-3, 2e-3], "lr0": 0.0})
    assert s.eta0 == 0.0 and s.lr([1])[0] == 1e-3 and Schedule.from_dict(s.to_dict()) == s
    assert areas(s, warmup="raw").s2[1] < 0  # the logged step-0 LR makes the first update an LR increase
