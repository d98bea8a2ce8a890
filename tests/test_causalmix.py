"""The CausalMix-style surrogate on a simulated pool experiment with a known best mixture per pool: fit, predict,
propose for pools it has not seen, and beat both uniform and the pool-blind answer there."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import InputError
from mixlaw.surrogates.causalmix import EPS, CausalMix, CausalMixOptions

DOMAINS = ("a", "b", "c")


def _c(x1: float, x2: float) -> np.ndarray:
    """True per-domain effect sizes: a matters more when its pool is large (x1 = log10 unique tokens of a), b more
    when its quality x2 is high."""
    return np.array([0.06 + 0.15 * (x1 - 8.0), 0.09 + 0.18 * x2, 0.15])


def _loss(x1: float, x2: float, w: np.ndarray) -> np.ndarray:
    return 3.0 + 0.2 * (10 - x1) - 0.1 * x2 - np.log(np.atleast_2d(w) + EPS) @ _c(x1, x2)


def _best(x1: float, x2: float) -> np.ndarray:
    from scipy.optimize import minimize

    r = minimize(lambda w: float(_loss(x1, x2, w)[0]), np.full(3, 1 / 3), method="SLSQP", bounds=[(0, 1)] * 3,
                 constraints=({"type": "eq", "fun": lambda w: w.sum() - 1},), options={"ftol": 1e-14})  # fmt: skip
    return r.x


def _experiment(rng: np.random.Generator, pools: list[tuple[float, float]], runs: int) -> pd.DataFrame:
    rows = []
    for i, (x1, x2) in enumerate(pools):
        for w in rng.dirichlet(np.ones(3), size=runs):
            y = float(_loss(x1, x2, w)[0]) + 0.003 * rng.standard_normal()
            rows.append({"pool": f"p{i}", "x1": x1, "x2": x2, **{f"w_{d}": w[j] for j, d in enumerate(DOMAINS)},
                         "loss": y})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("nuisance", ["ridge", "lightgbm"])
def test_fit_predict_propose_on_unseen_pools(nuisance: str) -> None:
    rng = np.random.default_rng(0)
    train = [(float(a), float(b)) for a, b in zip(rng.uniform(8, 10, 10), rng.uniform(0, 1, 10), strict=True)]
    table = _experiment(rng, train, runs=12)
    fit = CausalMix(CausalMixOptions(DOMAINS, ("x1", "x2"), nuisance=nuisance)).fit(table)
    assert fit.n_pools == 10 and fit.n_runs == 120
    new = [(8.3, 0.9), (9.7, 0.1), (9.0, 0.5)]
    held = _experiment(np.random.default_rng(1), new, runs=10)
    err = np.abs(fit.predict(held) - held["loss"].to_numpy())
    # levels of new pools within a few hundredths of a nat (trees over 10 pools are piecewise constant in X: looser)
    assert err.mean() < (0.02 if nuisance == "ridge" else 0.06)
    mean_pool = (float(np.mean([p[0] for p in train])), float(np.mean([p[1] for p in train])))
    blind = _best(*mean_pool)  # the pool-blind answer: the best mixture of the average pool
    for x1, x2 in new:
        w = np.array(list(fit.propose({"x1": x1, "x2": x2}).values()))
        assert w.min() >= 0 and w.sum() == pytest.approx(1.0)
        best = float(_loss(x1, x2, _best(x1, x2))[0])
        regret = float(_loss(x1, x2, w)[0]) - best
        assert regret < 0.25 * (float(_loss(x1, x2, np.full(3, 1 / 3))[0]) - best)
        assert regret < 0.5 * (float(_loss(x1, x2, blind)[0]) - best) + 1e-4


def test_the_effect_of_a_pool_statistic_has_the_true_sign() -> None:
    rng = np.random.default_rng(2)
    pools = [(float(a), float(b)) for a, b in zip(rng.uniform(8, 10, 8), rng.uniform(0, 1, 8), strict=True)]
    fit = CausalMix(CausalMixOptions(DOMAINS, ("x1", "x2"))).fit(_experiment(rng, pools, runs=15))
    # more weight on b helps more where b's quality is high (the CATE of a → b moves with x2 as the truth does)
    w0, w1 = np.array([0.5, 0.2, 0.3]), np.array([0.2, 0.5, 0.3])
    low, high = fit.effect(np.array([[9.0, 0.1]]), w1, w0)[0], fit.effect(np.array([[9.0, 0.9]]), w1, w0)[0]
    true_low, true_high = (float(_loss(9.0, x2, w1)[0] - _loss(9.0, x2, w0)[0]) for x2 in (0.1, 0.9))
    assert high < low and true_high < true_low
    assert high == pytest.approx(true_high, abs=0.02) and low == pytest.approx(true_low, abs=0.02)
    shares_b = [fit.propose({"x1": 9.0, "x2": q})["b"] for q in (0.1, 0.5, 0.9)]
    assert shares_b[0] < shares_b[1] < shares_b[2]


def test_errors_are_one_line() -> None:
    with pytest.raises(InputError, match="two distinct domains"):
        CausalMixOptions(("a",), ("x1",))
    with pytest.raises(InputError, match="nuisance"):
        CausalMixOptions(DOMAINS, ("x1",), nuisance="forest")
    table = _experiment(np.random.default_rng(0), [(9.0, 0.5)], runs=5)
    with pytest.raises(InputError, match="at least two pools"):
        CausalMix(CausalMixOptions(DOMAINS, ("x1", "x2"))).fit(table)
    with pytest.raises(InputError, match="x3"):
        CausalMix(CausalMixOptions(DOMAINS, ("x1", "x3"))).fit(table)


def test_the_share_plot_follows_the_proposals() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from mixlaw.report.causalmix_plot import plot_proposed_shares

    rng = np.random.default_rng(3)
    pools = [(float(a), float(b)) for a, b in zip(rng.uniform(8, 10, 8), rng.uniform(0, 1, 8), strict=True)]
    fit = CausalMix(CausalMixOptions(DOMAINS, ("x1", "x2"))).fit(_experiment(rng, pools, runs=12))
    ax = plot_proposed_shares(fit, {"x1": 9.0, "x2": 0.5}, "x2", [0.0, 0.5, 1.0])
    assert len(ax.collections) == 3 and ax.get_xlabel() == "x2"
    tops = ax.collections[0].get_paths()[0].vertices[:, 1]  # the stack's first band is domain a
    assert tops.max() <= 1.0 + 1e-9


def test_a_non_finite_effect_is_a_one_line_error_not_an_assert() -> None:
    import numpy as np

    from mixlaw.errors import FitError
    from mixlaw.surrogates.causalmix import minimise_on_box

    with pytest.raises(FitError, match="not finite"):
        minimise_on_box(np.full(5, np.nan), np.zeros(3), np.ones(3))
