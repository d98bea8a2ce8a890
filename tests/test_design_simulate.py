"""The simulator on a tiny configuration: a design with 2 distinct mixtures scores below one with 40."""

from __future__ import annotations

import numpy as np

from mixlaw.design.budget import resolve_sizes
from mixlaw.design.simulate import Priors, draw_truth, simulate
from mixlaw.design.strategies import AllocationOptions, Strategy


def test_two_distinct_mixtures_rank_below_forty() -> None:
    sizes, _ = resolve_sizes(["25k", "50k", "100k"])
    (target,), _ = resolve_sizes(["400k"])
    budget = 40 * sum(s.cost for s in sizes)  # 40 runs at every size (rectangle)
    doms = ("general", "legal", "code")
    res = simulate(
        [Strategy("rectangle"), Strategy("rectangle")],
        sizes,
        target,
        budget,
        doms,
        replicates=4,
        noise=0.005,
        k=1,
        n_test=128,
        seed=7,
        allocation=AllocationOptions(mixture_floor=0.02),
    )
    assert res.allocations[0].distinct_mixtures == 40  # same design twice: identical scores, zero differences
    assert np.array_equal(res.scores["rmse"][0], res.scores["rmse"][1])
    few = simulate(
        ["rectangle"], sizes, target, budget, doms, replicates=4, noise=0.005, k=1, n_test=128, seed=7,
        allocation=AllocationOptions(mixture_floor=0.02, max_mixtures=2),
    )  # fmt: skip
    assert few.allocations[0].distinct_mixtures == 2 and few.allocations[0].n_runs == res.allocations[0].n_runs
    # paired: same truths, noise and test mixtures (the seed), so per-replicate differences are meaningful
    d_rmse = few.scores["rmse"][0] - res.scores["rmse"][0]
    assert np.all(d_rmse > 0)  # worse in every paired replicate
    assert few.summary()[0]["rmse"] > 2 * res.summary()[0]["rmse"]
    assert few.scores["spearman"][0].mean() < res.scores["spearman"][0].mean()
    assert res.scores["spearman"][0].mean() > 0.9
    rows = res.summary()
    assert rows[1]["rmse_diff"] == 0.0 and rows[0]["rmse_se"] > 0


def test_truth_draws_follow_the_priors() -> None:
    rng = np.random.default_rng(0)
    pri = Priors(C=(2.0, 2.5), beta=(0.2, 0.3))
    for _ in range(20):
        p = draw_truth(4, 2, rng, pri)
        assert 2.0 <= p["C"] <= 2.5 and all(0.2 <= p[f"beta_{i}"] <= 0.3 for i in range(2))
        assert all(abs(sum(p[f"t_{i}"]) - 1) < 1e-12 for i in range(2))
