"""``mix optimize --law causalmix``: fit the pool-aware surrogate on a simulated pool experiment, propose for a pool it
has not seen, and check the proposal against the simulated truth; the CLI's flags, output shape and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.api.mixture import optimize
from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.surrogates.causalmix import EPS

DOMAINS = ["a", "b", "c"]
runner = CliRunner()


def _c(x1: float, x2: float) -> np.ndarray:
    """True effect sizes: domain a matters more in a larger pool (x1 = log10 unique tokens of a), b with quality x2."""
    return np.array([0.06 + 0.15 * (x1 - 8.0), 0.09 + 0.18 * x2, 0.15])


def _loss(x1: float, x2: float, w: np.ndarray) -> float:
    return float(3.0 + 0.2 * (10 - x1) - 0.1 * x2 - np.log(np.asarray(w) + EPS) @ _c(x1, x2))


def _best(x1: float, x2: float, cap_a: float = 1.0) -> np.ndarray:
    from scipy.optimize import minimize

    r = minimize(lambda w: _loss(x1, x2, w), np.full(3, 1 / 3), method="SLSQP",
                 bounds=[(0, cap_a), (0, 1), (0, 1)], constraints=({"type": "eq", "fun": lambda w: w.sum() - 1},),
                 options={"ftol": 1e-14})  # fmt: skip
    return np.asarray(r.x)


def _experiment(seed: int = 0, n_pools: int = 10, runs: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i, (x1, x2) in enumerate(zip(rng.uniform(8, 10, n_pools), rng.uniform(0, 1, n_pools), strict=True)):
        for j, w in enumerate(rng.dirichlet(np.ones(3), size=runs)):
            rows.append({"run_id": f"p{i}r{j}", "pool": f"p{i}", "log_unique_a": x1, "quality_b": x2,
                         "pool_tokens_a": 10**x1, "pool_tokens_b": 2e9, "pool_tokens_c": 5e9,
                         **{f"w_{d}": w[k] for k, d in enumerate(DOMAINS)},
                         "loss": _loss(x1, x2, w) + 0.003 * rng.standard_normal()})  # fmt: skip
    return pd.DataFrame(rows)


COVS = "log_unique_a;quality_b"


@pytest.mark.parametrize("new", [(8.3, 0.8), (9.7, 0.15)])
def test_the_proposal_for_a_new_pool_beats_uniform_under_the_truth(new: tuple[float, float]) -> None:
    table = _experiment()
    x1, x2 = new
    out = optimize(table, law="causalmix", domains=DOMAINS, target="loss", bootstrap=10,
                   law_options={"covariates": COVS, "new_pool": {"log_unique_a": x1, "quality_b": x2}},
                   candidates={"uniform": dict.fromkeys(DOMAINS, 1 / 3)})  # fmt: skip
    w = np.array([out["weights"][d] for d in DOMAINS])
    assert w.min() >= 0 and w.sum() == pytest.approx(1.0)
    best = _loss(x1, x2, _best(x1, x2))
    uni = _loss(x1, x2, np.full(3, 1 / 3))
    assert _loss(x1, x2, w) - best < 0.1 * (uni - best)  # the true regret of the proposal: a tenth of uniform's
    # the predicted loss at the new pool (level g(X*) + effect) is within a few hundredths of a nat of the truth
    assert out["predicted_losses"]["loss"] == pytest.approx(_loss(x1, x2, w), abs=0.03)
    # the same shape as the other laws: a candidate predicted by the same fit, a verdict, a pool-bootstrap band
    (cand,) = out["candidates"]
    assert cand["name"] == "uniform" and cand["regret"] == pytest.approx(cand["objective"] - out["objective"])
    assert cand["regret"] == pytest.approx(uni - _loss(x1, x2, w), rel=0.3)  # the predicted regret ≈ the true one
    lo, hi = cand["regret_interval"]
    assert 0 < lo <= cand["regret"] <= hi and out["verdicts"][0]["status"] == "beats"
    assert out["bootstrap"]["resample"] == "pools" and out["bootstrap"]["n"] == 10
    for d in DOMAINS:
        a, b = out["bootstrap"]["weights"][d]
        assert a <= out["weights"][d] + 1e-9 and out["weights"][d] - 1e-9 <= b
    assert out["pool"]["n_pools"] == 10 and not out["pool"]["in_training"]


def test_constraints_hold_and_the_share_curves_follow_the_truth() -> None:
    table = _experiment(seed=1)
    out = optimize(table, law="causalmix", domains=DOMAINS, constraints={"caps": {"a": 0.25}},
                   law_options={"covariates": COVS, "new_pool": {"log_unique_a": 9.8, "quality_b": 0.5}})  # fmt: skip
    w = np.array([out["weights"][d] for d in DOMAINS])
    assert w[0] <= 0.25 + 1e-9 and out["active_constraints"] == ["cap a=0.25"]
    truth = _best(9.8, 0.5, cap_a=0.25)
    assert np.abs(w - truth).max() < 0.03
    # b's proposed share rises with its quality, as the truth's optimum does
    cur = out["shares_vs_statistic"]["quality_b"]
    b = np.array(cur["shares"]["b"])
    assert np.all(np.diff(b) > -1e-6) and b[-1] - b[0] > 0.1
    assert out["pool_holdout"] and max(r["mae"] for r in out["pool_holdout"]) < 0.03


def test_repetition_limits_use_the_new_pools_unique_tokens() -> None:
    table = _experiment(seed=4, n_pools=6, runs=8)
    table = table.assign(unique_tokens_a=10 ** table["log_unique_a"], unique_tokens_b=1e12, unique_tokens_c=1e12)
    # the new pool has 2e8 unique tokens of a; 1e9 target tokens at most 1 epoch: w_a <= 0.2 (the table's largest
    # pool would have allowed far more)
    out = optimize(table, law="causalmix", domains=DOMAINS, target_tokens=1e9,
                   constraints={"max_epochs": {"a": 1.0}},
                   law_options={"covariates": COVS, "new_pool": {"log_unique_a": 9.9, "quality_b": 0.2,
                                                                 "unique_tokens_a": 2e8}})  # fmt: skip
    assert out["weights"]["a"] == pytest.approx(0.2, abs=1e-6) and out["active_constraints"]
    assert out["pool"]["repetition_unique_tokens"] == "the new pool's unique_tokens_<d>"
    out = optimize(table, law="causalmix", domains=DOMAINS, target_tokens=1e9,
                   constraints={"max_epochs": {"a": 1.0}, "unique_tokens": {"a": 3e8}},
                   law_options={"covariates": COVS, "new_pool": {"log_unique_a": 9.9, "quality_b": 0.2,
                                                                 "unique_tokens_a": 2e8}})  # fmt: skip
    assert out["weights"]["a"] == pytest.approx(0.3, abs=1e-6)  # the user's --unique-tokens wins
    assert out["pool"]["repetition_unique_tokens"] == "--unique-tokens"


def test_natural_is_the_new_pools_token_shares() -> None:
    table = _experiment(seed=2, n_pools=6, runs=8)
    stats = {"log_unique_a": 8.5, "quality_b": 0.4, "pool_tokens_a": 1e8, "pool_tokens_b": 3e8, "pool_tokens_c": 6e8}
    out = optimize(table, law="causalmix", domains=DOMAINS, law_options={"covariates": COVS, "new_pool": stats},
                   candidates={"natural": {"a": 0.5, "b": 0.25, "c": 0.25}})  # fmt: skip
    nat = out["candidates"][0]
    assert nat["weights"] == pytest.approx({"a": 0.1, "b": 0.3, "c": 0.6})
    assert out["pool"]["natural"] == "the new pool's token shares"
    assert out["verdicts"][0]["status"] == "no_interval" and "no paired interval" in out["verdicts"][0]["text"]
    one = optimize(table, law="causalmix", domains=DOMAINS, law_options={"covariates": COVS, "new_pool": stats},
                   candidates={"uniform": dict.fromkeys(DOMAINS, 1 / 3)}, bootstrap=1)  # fmt: skip
    assert one["bootstrap"]["n"] == 0 and one["verdicts"][0]["status"] == "no_interval"  # 1 resample: no interval


def test_cli_pool_by_name_json_report_and_one_line_errors(tmp_path: Path) -> None:
    csv = tmp_path / "pools.csv"
    _experiment(seed=3, n_pools=6, runs=8).to_csv(csv, index=False)
    base = ["mix", "optimize", str(csv), "--domains", "a,b,c", "--law", "causalmix", "--bootstrap", "4"]
    r = runner.invoke(app, [*base, "--pool", "p2", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout[r.stdout.index("{") :])
    # the pool statistics found by themselves: the numeric columns constant within each pool that differ between
    assert set(out["pool"]["covariates"]) == {"log_unique_a", "quality_b", "pool_tokens_a"}
    assert out["pool"]["in_training"] and {c["name"] for c in out["candidates"]} == {"uniform", "natural"}
    rep = tmp_path / "cm.html"
    r = runner.invoke(app, [*base, "--pool-stats", "log_unique_a=9,quality_b=0.5", "--report", str(rep)])
    assert r.exit_code == 0, r.output
    assert "proposal: the mixture minimising" in r.output and "verdict" in r.output
    assert "pool_tokens_a" in r.output  # the pool-constant column left out of the covariates is named
    html = rep.read_text()
    assert html.count("<img") == 2 and "Leave-one-pool-out" in html
    for extra, msg in [
        (["--pool-stats", "log_unique_a=9", "--law-option", f"covariates={COVS}"], "missing quality_b"),
        (["--pool", "p1", "--pool-stats", "quality_b=1"], "one way"),
        (["--pool", "nope"], "no such pool"),
        ([], "name the new pool"),
    ]:
        r = runner.invoke(app, [*base, *extra])
        assert r.exit_code != 0 and msg in r.output and "Traceback" not in r.output, (extra, r.output)
    r = runner.invoke(app, [*base[:6], "regmix", "--pool", "p1"])
    assert r.exit_code != 0 and "only --law causalmix" in r.output
    with pytest.raises(InputError, match="new_pool"):
        optimize(_experiment(n_pools=3, runs=4), law="causalmix", domains=DOMAINS, law_options={"pools": "p1"})
