"""``mix optimize --law regmix``: the RegMix Dirichlet proposer (top-k average) behind the same interface and output."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mixlaw.api.mixture import optimize
from mixlaw.decide.mixture.propose import DirichletProposer
from mixlaw.errors import InputError

DOMS = ("web", "code", "math", "books")
COST = np.array([0.9, 0.3, 0.6, 0.5])  # the loss falls most with code


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    w = rng.dirichlet(np.ones(4), size=60)
    y = 3.0 + w @ COST + 0.01 * rng.standard_normal(60)
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(60)], **{f"w_{d}": w[:, j] for j, d in enumerate(DOMS)},
                         "loss": y})  # fmt: skip


def test_proposal_respects_caps_and_beats_uniform_under_the_surrogate(runs: pd.DataFrame) -> None:
    uniform = dict.fromkeys(DOMS, 0.25)
    out = optimize(runs, law="regmix", law_options={"backend": "linear", "n_samples": 20000, "top_k": 64},
                   domains=DOMS, target="loss", constraints={"caps": {"code": 0.5}},
                   candidates={"uniform": uniform}, random_state=1)  # fmt: skip
    w = out["weights"]
    assert abs(sum(w.values()) - 1) < 1e-9 and w["code"] <= 0.5 + 1e-12  # a mean of feasible samples is feasible
    assert max(w, key=w.get) == "code" and w["web"] == min(w.values())  # mass where the loss falls most
    assert out["proposer"]["top_k"] == 64 and out["proposer"]["n_feasible"] < 20000  # the cap rejected samples
    (c,) = out["candidates"]
    assert c["regret"] > 0 and out["verdicts"][0]["status"] == "no_interval"  # no resamples of a surrogate
    assert out["verdicts"][0]["text"].startswith("beats uniform by")


def test_proposer_options_are_checked() -> None:
    with pytest.raises(InputError, match="temperature"):
        DirichletProposer(temperature=0.0)
    with pytest.raises(InputError, match="top_k"):
        DirichletProposer(n_samples=10, top_k=20)
