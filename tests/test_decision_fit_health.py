"""Every decision carries the identifiability verdict of the fits it uses (what the data do not pin down).

A decision written here fits the data-constrained law (Muennighoff et al. 2023), simulated at its published
parameters, and answers the loss at 60 epochs. Fitted on runs of at most 4 epochs, the repetition decay ``R_D*`` runs
off (nothing in the rows bounds it from above): the decision must say so — status ``weak``, a ``fit_unpinned`` reason
naming ``R_D_star`` — in its result, its JSON and its text, never a plain "ok". Fitted on runs up to 60 epochs the
same decision is ``ok`` and its fit is ``identifiable``. Seeded; a few seconds.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mixlaw import api
from mixlaw.decide.contract import (
    Decision,
    DecisionContext,
    DecisionResult,
    Estimate,
    FitHealth,
    Status,
)
from mixlaw.decide.registry import DECISIONS, register_decision
from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions
from mixlaw.report.decision_page import decision_section, decision_text

LAW = get_law("data_constrained")


def _table(max_epochs: float, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    grid = np.array(np.meshgrid([1e8, 3e8, 1e9], [2e9, 6e9, 2e10], [1, 1.5, 2, 3, 4, 8, 16, 32, 60], indexing="ij"))
    n, u, ep = (g.ravel() for g in grid)
    x = {"n_params": n, "tokens": ep * u, "unique_tokens": u}
    y = np.asarray(LAW.evaluate(x, LAW.example_params), dtype=np.float64) * np.exp(0.005 * rng.standard_normal(n.size))
    df = pd.DataFrame({**x, "epochs": ep, "loss": y, "run_id": np.arange(n.size).astype(str), "step": 1})
    return df[df["epochs"] <= max_epochs].reset_index(drop=True)


@dataclass(frozen=True)
class Opts:
    epochs: float = 60.0


def _register() -> type[Decision]:
    class LossAtEpochs(Decision):
        name = "test_loss_at_epochs"
        summary = "The loss of the largest fitted size at many epochs of its unique tokens."
        Options = Opts

        def estimate(self, table: pd.DataFrame, options: Opts, ctx: DecisionContext) -> Estimate:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)  # the weak fit warns: the result says it
                res = fit_law(LAW, table, FitOptions(bootstrap=BootstrapOptions(calibrate=False), seed=0))
            n, u = 1e9, 2e10
            loss = float(res.predict({"n_params": [n], "tokens": [options.epochs * u], "unique_tokens": [u]})[0])
            return Estimate({"loss": loss}, fits=(FitHealth.of("loss", res),), units={"loss": "nats"})

    return register_decision(LossAtEpochs)


def test_a_decision_on_a_fit_whose_parameter_runs_off_is_weak_and_says_which() -> None:
    _register()
    try:
        short = api.decide(_table(4), "test_loss_at_epochs")
        fit = short.fits[0]
        assert fit.identifiability == "weak" and "R_D_star" in fit.running_off and not fit.healthy
        assert short.status is Status.WEAK
        codes = {r.code: r for r in short.reasons}
        assert "fit_unpinned" in codes and "R_D_star" in codes["fit_unpinned"].text
        back = DecisionResult.from_json(short.to_json())
        assert back == short and back.fits[0].running_off == fit.running_off
        text = decision_text(short)
        assert "running off: R_D_star" in text and "weak" in text.splitlines()[0]
        assert "R_D_star" in decision_section(short).html

        full = api.decide(_table(60), "test_loss_at_epochs")
        assert full.fits[0].identifiability == "ok" and full.fits[0].healthy, full.fits[0]
        assert full.status is Status.OK and not full.reasons
        assert "identifiable" in decision_text(full)
    finally:
        DECISIONS.pop("test_loss_at_epochs", None)


def test_fit_health_reads_old_results_without_the_verdict() -> None:
    """A result written before fits carried their verdict reads back with the verdict unknown, not invented."""
    old: dict[str, object] = {"name": "t", "law": "chinchilla", "status": "converged", "identifiable": None,
                              "at_bounds": []}  # fmt: skip
    f = FitHealth.from_dict(old)
    assert f.identifiability == "" and f.running_off == () and f.healthy and f.reason() is None
    bounded = FitHealth("t", "chinchilla", "converged", True, ("alpha",), "ok")
    why = bounded.reason()
    assert not bounded.healthy and why is not None and why.code == "fit_at_bounds"
