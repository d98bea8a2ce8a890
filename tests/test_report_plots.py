"""The CMR plot functions: pure (ax in → same ax out), one artist per ratio/size, no global state."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from mixlaw.decide.cmr import CMRDecision, critical_mixture_ratio
from mixlaw.design.simulate_cmr import simulate_cmr_runs
from mixlaw.report import plots

RATIOS = (0.125, 0.25, 1 / 3)
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}


@pytest.fixture(scope="module")
def decision() -> CMRDecision:
    runs = pd.concat(
        [
            simulate_cmr_runs(RATIOS, P460, noise=1e-4, random_state=0),
            simulate_cmr_runs(RATIOS, P460, noise=1e-4, random_state=5, n_params=940_000_000),
        ],
        ignore_index=True,
    )
    return critical_mixture_ratio(
        runs, general_eval="general", domain_eval="code", sensitivity_lambdas=(math.inf,), sensitivity_epsilons=(0.05,)
    )


def test_tradeoff_3d(decision: CMRDecision) -> None:
    fig = plt.figure()
    ax = fig.add_subplot(projection="3d")
    assert plots.plot_tradeoff_3d(decision.increments, size=460_000_000, ax=ax) is ax
    assert len(ax.lines) == len(RATIOS)
    plt.close(fig)
    ax2 = plots.plot_tradeoff_3d(decision.increments)
    assert ax2.name == "3d"
    plt.close(ax2.figure)


def test_general_increments_residuals_ratio_law(decision: CMRDecision) -> None:
    s = decision.sizes[0]
    fig, axes = plt.subplots(1, 3)
    assert plots.plot_general_increments(s, decision.increments, epsilon=0.05, ax=axes[0]) is axes[0]
    stars = [ln for ln in axes[0].lines if ln.get_marker() == "*"]
    assert len(stars) == sum(r["t0_tokens"] is not None and r["t0_tokens"] <= s.budget_tokens * 1.0001
                             for r in s.ratios)  # fmt: skip
    assert plots.plot_fit_residuals(s, decision.increments, ax=axes[1]) is axes[1]
    assert plots.plot_ratio_law(s, epsilon=0.05, ax=axes[2]) is axes[2]
    plt.close(fig)


def test_cmr_vs_budget_and_size(decision: CMRDecision) -> None:
    ax = plots.plot_cmr_vs_budget(decision.sizes)
    assert ax.get_xscale() == "log" and len(ax.lines) >= 2
    plt.close(ax.figure)
    ax = plots.plot_cmr_vs_size({"code": decision, "same again": decision})
    assert len(ax.get_legend().get_texts()) == 2
    plt.close(ax.figure)
