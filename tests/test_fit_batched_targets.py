"""Several targets' point fits in one batched solve (mixlaw.fit.many), the halt rule (mixlaw.fit.solver.halt) and the
paired refits of one law in one solve (mixlaw.decide.mixture.paired.refit_all)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.mixture.camel_k import FitStatus, at_exponential_limit, camel_health
from mixlaw.fit import fit_law
from mixlaw.fit.many import fit_targets
from mixlaw.fit.solver.halt import HALT_CHECKS, HALT_EVERY, Halter
from mixlaw.laws import get_law
from mixlaw.options import FitOptions

DOMS = ("a", "b", "c")


def test_batched_targets_match_single_fits(camel_k1_table: Callable[..., pd.DataFrame]) -> None:
    """Each target of fit_targets is the fit fit_law gives alone: the same starts, the same optimum (objective to
    1e-9 relative, predictions to 1e-6), its own warnings."""
    df = camel_k1_table(0)
    law = get_law("camel", domains=DOMS, k=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        many, caught = fit_targets(law, {"loss0": df, "loss1": df}, FitOptions(seed=3))
        for t in ("loss0", "loss1"):
            one = fit_law(law, df, FitOptions(seed=3), target=t)
            assert many[t].target == t and set(caught) == {"loss0", "loss1"}
            assert many[t].objective == pytest.approx(one.objective, rel=1e-9)
            np.testing.assert_allclose(many[t].predict(df), one.predict(df), rtol=1e-6)
            assert len(many[t].starts) == len(one.starts)
    assert many["loss0"].params["C"] != pytest.approx(many["loss1"].params["C"], rel=1e-3)  # really two problems


def test_halter_needs_every_active_row_settled_and_the_best() -> None:
    """A problem is halted only after HALT_CHECKS checks on which all its active rows are settled and its lowest
    row is active; a finished unsettled best row keeps it running."""
    pid = np.array([0, 0, 1, 1])
    settled = np.array([True, True, True, False])
    h = Halter(lambda x: settled[x[:, 0].astype(int)], pid)
    rows = np.arange(4)
    x = rows[:, None].astype(float)
    f = np.array([1.0, 1.05, 1.0, 1.05])  # the other rows within SCREEN_GAP of the best: not screened out
    live = np.ones(4, dtype=bool)
    stops = [h.stop(HALT_EVERY * (i + 1), rows, x, f, live) for i in range(HALT_CHECKS)]
    assert not stops[0].any() and stops[-1].tolist() == [True, True, False, False]
    assert not h.stop(HALT_EVERY + 1, rows, x, f, live).any()  # only every HALT_EVERY iterations
    h2 = Halter(lambda x: np.ones(len(x), dtype=bool), np.array([0, 0]))
    f2 = np.array([0.5, 0.52])  # row 0 (finished, not in the active rows) is the best: never halted
    for i in range(HALT_CHECKS + 2):
        assert not h2.stop(HALT_EVERY * (i + 1), np.array([1]), np.zeros((1, 1)), f2, np.ones(2, dtype=bool)).any()


def test_halter_screens_out_rows_far_behind_their_best() -> None:
    """From SCREEN_FROM on, a row more than SCREEN_GAP above its problem's lowest live row stops at a check, and the
    problem is then halted on the settled rows that are left; before SCREEN_FROM and within the gap, nothing stops."""
    from mixlaw.fit.solver.halt import SCREEN_FROM, SCREEN_GAP

    pid = np.array([0, 0, 0])
    settled = np.array([True, False, False])  # the best row settled; the others not
    h = Halter(lambda x: settled[x[:, 0].astype(int)], pid)
    rows = np.arange(3)
    x = rows[:, None].astype(float)
    f = np.array([1.0, 1.0 + 2 * SCREEN_GAP, 1.0 + SCREEN_GAP / 2])  # row 1 far behind, row 2 near
    live = np.ones(3, dtype=bool)
    early = (SCREEN_FROM // HALT_EVERY - 1) * HALT_EVERY
    assert early < SCREEN_FROM and not h.stop(early, rows, x, f, live).any()
    out = h.stop(SCREEN_FROM, rows, x, f, live)
    assert out.tolist() == [False, True, False]  # the near unsettled row keeps the problem running
    left = np.array([0])  # the near row finished (not active): the best row alone is settled → halted
    stops = [h.stop(SCREEN_FROM + HALT_EVERY * (i + 1), left, x[:1], f, live) for i in range(HALT_CHECKS)]
    assert not stops[0].any() and stops[-1].tolist() == [True]


def test_halted_camel_fit_reaches_the_same_verdict() -> None:
    """On the shipped probes' loss_docs, k = 2 runs to the exponential limit: halted, the fit stops in fewer
    iterations and is classified exactly as the full fit (degenerate, the same components at the limit)."""
    d = pd.read_csv("examples/mixture_probe/runs.csv")
    d = d[d.n_params < 2e5].sort_values("step").groupby("run_id").tail(1).reset_index(drop=True)
    doms = ("general", "legal", "docs", "bio", "code")
    law = get_law("camel", domains=doms, k=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = fit_law(law, d, FitOptions(seed=0), target="loss_docs")
        halted = fit_law(law, d, FitOptions(seed=0), target="loss_docs", halt=at_exponential_limit(law))
    hf, hh = camel_health(law, full.params, d), camel_health(law, halted.params, d)
    assert halted.settings["halted"] is True
    assert hf.status is hh.status is FitStatus.DEGENERATE
    assert [c.status for c in hf.components] == [c.status for c in hh.components]
    assert halted.starts["n_iter"].max() < 0.6 * full.starts["n_iter"].max()
    assert halted.objective <= full.objective * 1.01  # stopped on the way down the same limit


def test_refit_all_matches_refit_draws(camel_k1_table: Callable[..., pd.DataFrame]) -> None:
    """The paired refits of two targets of one law in one solve give each target what refit_draws gives it alone
    (objective-level agreement: resample optima to 1e-6 in prediction), the same usable count."""
    from mixlaw.decide.mixture.checks import mixture_groups
    from mixlaw.decide.mixture.paired import refit_all, refit_draws

    df = camel_k1_table(1)
    df = df.assign(_mixture=mixture_groups(df, list(DOMS)))
    law = get_law("camel", domains=DOMS, k=1)
    rng = np.random.default_rng(5)
    n_mix = int(df["_mixture"].max()) + 1
    counts = np.stack([np.bincount(rng.integers(0, n_mix, n_mix), minlength=n_mix) for _ in range(6)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits, _ = fit_targets(law, {"loss0": df, "loss1": df}, FitOptions(seed=0))
        both = refit_all(fits, {"loss0": df, "loss1": df}, counts)
        for t in ("loss0", "loss1"):
            alone, info = refit_draws(fits[t], df, counts)
            assert both[t][1]["n_unusable"] == info["n_unusable"] == 0
            for a, b in zip(alone, both[t][0], strict=True):
                assert a is not None and b is not None
                pa = law.evaluate({c: df[c].to_numpy() for c in law.inputs}, a.params)
                pb = law.evaluate({c: df[c].to_numpy() for c in law.inputs}, b.params)
                np.testing.assert_allclose(pb, pa, rtol=1e-6)
