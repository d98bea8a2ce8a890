"""A CPT run without its pre-training history (no parent_run, no PT rows) is not pre-training: its LR areas cannot be
split into PT and CPT parts, and treating it as a PT run fits the CPT law on all-zero CPT areas (measured: a
prediction of 2.01 against 3.36 observed). The schedule features refuse it with one line naming the run."""

from __future__ import annotations

import pandas as pd
import pytest

from mixlaw.errors import InputError
from mixlaw.schedules import add_schedule_features


def _runs(with_parent: bool) -> pd.DataFrame:
    pt = [{"run_id": "pt", "step": s, "phase": "pt", "parent_run": None, "loss": 3.5 - 0.001 * s,
           "schedule": "constant:peak=3e-4,steps=400"} for s in (100, 200, 400)]  # fmt: skip
    cpt = [{"run_id": "cpt-a", "step": s, "phase": "cpt", "parent_run": "pt" if with_parent else None,
            "loss": 3.36 - 0.0005 * s, "schedule": "cosine:peak=3e-4,steps=200"}
           for s in (0, 50, 100, 200)]  # fmt: skip
    return pd.DataFrame(pt + cpt if with_parent else cpt)


def test_cpt_run_without_parent_is_refused_with_the_run_named() -> None:
    with pytest.raises(InputError, match="run 'cpt-a' is phase=cpt but has no parent_run") as ei:
        add_schedule_features(_runs(with_parent=False))
    assert "\n" not in str(ei.value) and "all-zero CPT areas" in str(ei.value)


def test_cpt_run_with_parent_gets_its_pt_history() -> None:
    out = add_schedule_features(_runs(with_parent=True))
    cpt = out[out["run_id"] == "cpt-a"]
    assert (cpt["s1_pt"] > 0).all() and (cpt["s1_cpt"].iloc[1:] > 0).all()
