"""The mixture report's held-out panel from the decision's fits (mixlaw.report.mix_heldout): the same predictions and
table layout as ``mix compare`` where the law has one basin, and ``mix compare`` (``None``) where it cannot stand in."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.mixture.compare import compare
from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.options import FitOptions
from mixlaw.report.mix_heldout import heldout_from_fits

DOMS = ("a", "b", "c")


def _out(df: pd.DataFrame) -> dict:
    """What the panel reads of ``mix optimize``'s result: the law, its options, the targets and their fits (started
    away from the truth: the law's default start design, fitted on every run)."""
    law = get_law("camel", domains=DOMS, k=1)
    fits = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for t in ("loss0", "loss1"):
            fits[t] = {"params": fit_law(law, df, FitOptions(seed=1), target=t).params}
    return {"law": "camel", "law_options": {"domains": list(DOMS), "k": 1}, "targets": ["loss0", "loss1"],
            "fits": fits, "camel_k": {t: {"k": 1} for t in fits}}  # fmt: skip


def test_panel_from_the_decisions_fits_predicts_as_mix_compare(camel_k1_table: Callable[..., pd.DataFrame]) -> None:
    """Fold fits started from the full fit reach the fold optimum that ``mix compare`` finds from its own starts:
    the same held-out predictions (1e-4 relative), the same rows and columns, intervals that cover alike."""
    df = camel_k1_table(3)
    out = _out(df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = heldout_from_fits(df, out, domains=DOMS, holdout="mixtures:3", bootstrap=8, random_state=0)
        ref = compare(df, domains=DOMS, targets=["loss0", "loss1"], holdout="mixtures:3", models="camel:k=1,blind",
                      bootstrap=8, random_state=0)  # fmt: skip
    assert fast is not None and fast["method"]
    for a, b in zip(fast["targets"], ref["targets"], strict=True):
        assert a["target"] == b["target"]
        ma, mb = a["models"], b["models"]
        assert [m["model"] for m in ma] == [m["model"] for m in mb] == ["camel:k=1", "blind"]
        assert set(ma[0]) >= set(mb[0]) - {"interval_method"} and ma[1] == mb[1]  # blind: mix compare's own rows
        pa = np.array([p["predicted"] for p in ma[0]["predictions"]])
        pb = np.array([p["predicted"] for p in mb[0]["predictions"]])
        assert [p["run_id"] for p in ma[0]["predictions"]] == [p["run_id"] for p in mb[0]["predictions"]]
        np.testing.assert_allclose(pa, pb, rtol=1e-4)
        assert ma[0]["mre"] == pytest.approx(mb[0]["mre"], rel=1e-2)
        assert ma[0]["n_interval"] == mb[0]["n_interval"] == ma[0]["n_test"]
        assert abs(ma[0]["coverage"] - mb[0]["coverage"]) <= 0.15
        width = np.mean([p["hi"] - p["lo"] for p in ma[0]["predictions"]])
        width_ref = np.mean([p["hi"] - p["lo"] for p in mb[0]["predictions"]])
        assert 0.67 < width / width_ref < 1.5


def test_panel_leaves_size_holdouts_and_surrogates_to_mix_compare(camel_k1_table: Callable[..., pd.DataFrame]) -> None:
    """A fold whose test runs lie beyond the training sizes needs the extrapolation calibration of ``mix compare``;
    a surrogate has no fit to start from: both return None (the report then runs ``mix compare``)."""
    df = camel_k1_table(4)
    out = _out(df)
    assert heldout_from_fits(df, out, domains=DOMS, holdout="n_params > 1e8", bootstrap=0) is None
    assert heldout_from_fits(df, {**out, "law": "regmix"}, domains=DOMS, holdout="mixtures:3", bootstrap=0) is None
    inside = heldout_from_fits(df, out, domains=DOMS, holdout="n_params == 6e7", bootstrap=0)
    assert inside is not None and inside["targets"][0]["models"][0]["n_test"] == 12
