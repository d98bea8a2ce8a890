"""``info_law`` on the SlimPajama leave-mixtures-out harness of ``test_mix_slimpajama.py`` (310M, final checkpoint,
60 mixtures, 5 folds of 12, OpenHermes loss), the row docs/mix.md quotes ("The information law on held-out data",
from ``benchmarks/info_law_compare.py --cases slimpajama-lmo-final``): MRE 0.57 %, Spearman 0.875. A point check
(no bootstrap): the figures, and that it explains most of what the mixture does (under half the blind error)."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from mixlaw.api.mixture import compare

DOMAINS = ("arxiv", "book", "c4", "github", "commoncrawl", "stackexchange", "wikipedia")



@pytest.mark.slow  # about 30 s of CPU: 5 fits of a 7-domain law from 1,024 starts
def test_info_law_leave_mixtures_out_at_310m(slim_310m: pd.DataFrame) -> None:
    slim_310m = slim_310m.assign(**{f"unique_tokens_{x}": 1e15 for x in DOMAINS})  # SlimPajama's pools never repeat
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # boundary notes of single folds
        warnings.simplefilter("error", category=RuntimeWarning)  # a numpy warning escaping the fit is a bug
        out = compare(slim_310m, domains=DOMAINS, targets=["openhermes_loss"], holdout="mixtures:5",
                      models="info_law,blind", bootstrap=0, random_state=0)  # fmt: skip
    m = {r["model"]: r for r in out["targets"][0]["models"]}
    il, blind = m["info_law"], m["blind"]
    assert il["n_test"] == il["n_predicted"] == 60 and il["n_train"] == 48
    assert il["mre"] < 0.5 * blind["mre"] and il["spearman"] > 0.8 and abs(il["bias"]) < 0.002
    assert il["mre"] == pytest.approx(0.0057, abs=5e-4) and il["spearman"] == pytest.approx(0.875, abs=0.01)
