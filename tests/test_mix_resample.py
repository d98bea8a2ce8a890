"""Resamples that converge: the Jacobian repair at subnormal amplitudes, and ``mix optimize``'s batched refits.

The CAMEL k = 3 SlimPajama point fit ends with one component's ``K = exp(−716.6)`` (a subnormal, carried by
``α`` = 366); reverse mode differentiates ``log K`` there as ``1/K`` = inf, so every bootstrap resample seeded at
the point failed on its first iteration and went through the rescue (``benchmarks/mixture_fit.py``). These tests
build that situation on a small simulated table.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from mixlaw.fit.problem.data import FitData
from mixlaw.fit.solver.solve import _residuals_and_jacobian
from mixlaw.fit.solver.steps import repair_jacobian
from mixlaw.fit.uncertainty.bootstrap import bootstrap_law
from mixlaw.laws import get_law
from mixlaw.options import FitOptions, SolverOptions, StartOptions

DOMS = ("web", "code", "math")
LOG_K0 = -716.0  # exp(LOG_K0) is subnormal: d log K / dK = 1/K overflows


def _subnormal_truth() -> dict[str, object]:
    """camel k = 2 whose component 0 is a constant 0.5·M^-0.1 written as a subnormal K_0 times a huge 3^α_0."""
    alpha0 = (math.log(0.5) - LOG_K0) / math.log(3.0)
    return {
        "C": 1.5, "K_0": math.exp(LOG_K0), "alpha_0": alpha0, "beta_0": 0.1, "t_0": [1 / 3, 1 / 3, 1 / 3],
        "K_1": 1.0, "alpha_1": 0.3, "beta_1": 0.3, "t_1": [0.7, 0.2, 0.1],
    }  # fmt: skip


def _table(
    law: object, params: dict[str, object], seed: int, n_mix: int = 8, sizes: tuple[float, ...] = (5e7, 2e8, 8e8)
) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i, w in enumerate(rng.dirichlet(np.full(3, 0.8), size=n_mix)):
        for j, n in enumerate(sizes):
            x = {"n_params": np.array([n])} | {f"w_{d}": w[j : j + 1] for j, d in enumerate(DOMS)}
            y = float(law.evaluate(x, params)[0]) * math.exp(3e-3 * rng.standard_normal())  # type: ignore[attr-defined]
            rows.append(
                {"run_id": f"m{i}_{j}", "n_params": n, "loss": y} | {f"w_{d}": w[j] for j, d in enumerate(DOMS)}
            )
    return pd.DataFrame(rows)


def test_reverse_mode_overflow_is_repaired_by_finite_differences_and_finite_entries_are_kept() -> None:
    x = torch.linspace(0.0, 1.0, 5, dtype=torch.float64)

    def residuals(U: torch.Tensor, pid: torch.Tensor) -> torch.Tensor:
        u0, u1 = (U[:, 0:1], U[:, 1:2]) if U.dim() == 2 else (U[..., 0], U[..., 1])  # (K, P) or (K, n, P)
        return torch.log(torch.exp(u0)) + u1 * x - 1.0  # log(exp(u)) = u: d/du = 1

    U = torch.tensor([[-720.0, 0.5], [-5.0, 0.5]], dtype=torch.float64)
    pid = torch.zeros(2, dtype=torch.long)
    Ue = U.unsqueeze(1).expand(-1, 5, -1).clone().requires_grad_(True)
    (raw,) = torch.autograd.grad(residuals(Ue, pid).sum(), Ue)
    assert not torch.isfinite(raw[0, :, 0]).any() and torch.isfinite(raw[1]).all()  # the overflow is real
    r, J = _residuals_and_jacobian(residuals, U, pid, 5)
    torch.testing.assert_close(J[0, :, 0], torch.ones(5, dtype=torch.float64), rtol=0, atol=1e-6)
    assert torch.equal(J[0, :, 1], x) and torch.equal(J[1], raw[1])  # reverse mode's finite entries untouched
    finite = raw[1:2]
    assert repair_jacobian(residuals, U[1:], pid[1:], r[1:], finite) is finite  # nothing to repair: no copy


def test_resamples_seeded_at_a_subnormal_amplitude_converge_in_the_first_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    law = get_law("camel", domains=DOMS, k=2)
    truth = _subnormal_truth()
    df = _table(law, truth, seed=11)
    data = FitData(law, df, target="loss", group_column="run_id")
    start = dict(truth) | {"K_1": 1.2, "beta_1": 0.25, "C": 1.4}  # off the truth; K_0 stays subnormal
    seeds = law.to_internal(start)[None, :]
    assert seeds[0, 1] == pytest.approx(LOG_K0)  # the natural -> internal map keeps a subnormal K exactly

    def boot() -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bootstrap_law(law, data, seeds, n=6, rng=np.random.default_rng(5), params=start, max_iter=None)

    draws = boot()
    assert draws.n_failed == 0 and draws.n_rescued == 0, (draws.status, draws.n_rescued)  # type: ignore[attr-defined]
    assert set(draws.status) <= {"converged", "stalled"}  # type: ignore[attr-defined]
    truth_f = np.array(law.evaluate(data.x_np, truth))
    fitted = [np.array(law.evaluate(data.x_np, law.unflatten(p))) for p in draws.params.to_numpy()]  # type: ignore[attr-defined]
    assert max(float(np.max(np.abs(np.log(f / truth_f)))) for f in fitted) < 0.02  # the resampled laws fit the data
    # Without the repair the same resamples fail on their first iteration, from the point and in the rescue.
    monkeypatch.setattr("mixlaw.fit.solver.solve.repair_jacobian", lambda residuals, U, pid, r, J: J)
    assert boot().n_failed == 6  # type: ignore[attr-defined]


def test_optimize_refits_every_resample_in_one_batch_as_the_duplicated_rows_would_and_counts_the_unusable() -> None:
    """``mix optimize``'s resamples: the drawn mixtures' counts as point weights give the fit of the duplicated rows;
    a resample that draws no row of the target is unusable and counted, not dropped."""
    from mixlaw.decide.mixture.checks import mixture_groups
    from mixlaw.decide.mixture.paired import refit_draws
    from mixlaw.fit import fit_law
    from mixlaw.fit.fitter import objective_at

    law = get_law("dml", domains=DOMS)
    df = _table(law, dict(law.example_params), seed=2, n_mix=10, sizes=(2e8, 2e8))  # type: ignore[attr-defined]
    df = df.assign(_mixture=mixture_groups(df, list(DOMS)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_law(law, df, FitOptions(solver=SolverOptions(max_iter=None), seed=0), target="loss")
    rng = np.random.default_rng(7)
    counts = np.stack([np.bincount(rng.integers(0, 10, 10), minlength=10) for _ in range(3)] + [np.zeros(10, int)])
    draws, info = refit_draws(res, df, counts)
    assert info["n_unusable"] == 1 and draws[3] is None and all(d is not None for d in draws[:3]), info
    for b in range(3):
        dup = df.iloc[np.repeat(np.arange(len(df)), counts[b, df["_mixture"].to_numpy()])].reset_index(drop=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            one = fit_law(
                law,
                dup.assign(run_id=np.arange(len(dup))),
                FitOptions(
                    starts=StartOptions(given=[res.params], use_grid=False, use_guess=False, n_polish=1),
                    solver=SolverOptions(max_iter=None),
                ),
                target="loss",
            )
        f_batch = objective_at(law, dup, draws[b].params, target="loss")  # type: ignore[union-attr]
        assert f_batch == pytest.approx(one.objective, rel=1e-3), b  # the same problem, solved to the same point
