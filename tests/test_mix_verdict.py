"""The verdict of ``mix optimize`` against the defaults: statuses from the paired regret, text rendered from them."""

from __future__ import annotations

import pandas as pd
import pytest

from mixlaw.cli.mix import _evaluate
from mixlaw.decide.mixture.verdict import VerdictStatus, verdict_of
from mixlaw.errors import InputError


@pytest.mark.parametrize(
    ("interval", "p_better", "status", "text"),
    [
        ((0.01, 0.05), 0.02, VerdictStatus.BEATS, "beats uniform by 0.030 [+0.010, +0.050] nats (P = 0.98"),
        ((-0.03, 0.02), 0.38, VerdictStatus.NO_EVIDENCE, "no evidence that it beats uniform at this size (+0.030"),
        ((-0.05, -0.01), 1.0, VerdictStatus.WORSE, "uniform is predicted better than the chosen mixture"),
        (None, None, VerdictStatus.NO_INTERVAL, "no paired interval"),
    ],
)
def test_verdict_status_and_sentence(interval, p_better, status, text) -> None:
    cand = {"name": "uniform", "regret": 0.03}
    if interval is not None:
        cand |= {"regret_interval": list(interval), "p_better_than_chosen": p_better}
    v = verdict_of(cand, 0.95)
    assert v.status is status and text in v.text
    assert v.to_dict()["status"] == status.value and v.to_dict()["text"] == v.text
    if p_better is not None:
        assert v.p_chosen_better == pytest.approx(1 - p_better)


def test_default_candidates_are_uniform_and_natural_when_tokens_are_known() -> None:
    doms = ["a", "b"]
    df = pd.DataFrame({"pool_tokens_a": [3e6, 3e6], "pool_tokens_b": [1e6, 1e6]})
    got = _evaluate(None, doms, df)
    assert got["uniform"] == {"a": 0.5, "b": 0.5} and got["natural"] == pytest.approx({"a": 0.75, "b": 0.25})
    assert list(_evaluate(None, doms, pd.DataFrame({"x": [1]}))) == ["uniform"]  # no token counts: no natural
    assert _evaluate(["none"], doms, df) == {}
    with pytest.raises(InputError, match="--evaluate natural"):
        _evaluate(["natural"], doms, pd.DataFrame({"x": [1]}))
