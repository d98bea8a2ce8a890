"""``mix optimize --law info_law`` at a (size, tokens) target: the information law reaches the optimiser through the
registry, its token and unique-token inputs get the target's values, and the optimum matches a brute-force simplex
grid over the same fitted law, with and without a repetition limit."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.api.mixture import optimize
from mixlaw.laws import get_law

DOMS = ("a", "b", "c")
U = {"a": 2e8, "b": 5e9, "c": 1e12}  # a: the best data, and scarce
TRUTH = {"E": 1.8, "A": 0.6, "alpha": 0.35, "B": 0.9, "beta": 0.3, "q": [0.5, 0.3, 0.2], "R": 8.0, "rho": 0.3}
N_T, D_T = 1e9, 2e10


def _x(w: np.ndarray, n: np.ndarray, d: np.ndarray) -> dict[str, np.ndarray]:
    x = {"n_params": n.astype(float), "tokens": d.astype(float)}
    for j, dom in enumerate(DOMS):
        x[f"w_{dom}"] = w[:, j]
        x[f"unique_tokens_{dom}"] = np.full(len(n), U[dom])
    return x


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    law = get_law("info_law", domains=DOMS)
    rng = np.random.default_rng(11)
    mixes = np.vstack([rng.dirichlet(np.ones(3), 10), np.full((1, 3), 1 / 3)])
    rows = []
    for i, w in enumerate(mixes):
        for n in (5e7, 1e8, 2e8, 4e8):
            for tpp in (20.0, 60.0):
                y = float(law.evaluate(_x(w[None, :], np.array([n]), np.array([tpp * n])), TRUTH)[0])
                rows.append({"run_id": f"m{i}_{n:.0e}_{tpp:g}", "n_params": n, "tokens": tpp * n, "loss":
                             y * np.exp(2e-3 * rng.standard_normal()), **{f"w_{d}": w[j] for j, d in enumerate(DOMS)},
                             **{f"unique_tokens_{d}": U[d] for d in DOMS}})  # fmt: skip
    return pd.DataFrame(rows)


def _grid(out: dict, cap_a: float = 1.0, step: float = 0.0025) -> np.ndarray:
    """The same fitted law at the same inputs, minimised over a simplex grid (w_a <= cap_a)."""
    law = get_law("info_law", domains=DOMS)
    g = np.arange(0.0, 1.0 + 1e-12, step)
    a, b = np.meshgrid(g, g, indexing="ij")
    keep = (a + b <= 1 + 1e-12) & (a <= cap_a + 1e-12)
    w = np.stack([a[keep], b[keep], np.clip(1 - a[keep] - b[keep], 0, 1)], axis=1)
    at = out["target_inputs"]["values"]
    x = {**{k: np.full(len(w), v) for k, v in at.items()}, **{f"w_{d}": w[:, j] for j, d in enumerate(DOMS)}}
    y = law.evaluate(x, out["fits"]["loss"]["params"])
    return w[int(np.argmin(y))]


def _optimize(runs: pd.DataFrame, **kw) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optimize(runs, law="info_law", domains=DOMS, target="loss", target_size=N_T, target_tokens=D_T,
                        **kw)  # fmt: skip


def test_info_law_optimum_at_a_token_budget_matches_a_grid(runs: pd.DataFrame) -> None:
    out = _optimize(runs)
    at = out["target_inputs"]["values"]
    assert at["n_params"] == N_T and at["tokens"] == D_T and at["unique_tokens_a"] == U["a"]
    w = np.array([out["weights"][d] for d in DOMS])
    assert 0.01 < w[0] < 0.6  # the scarce best domain: repeated, so neither ignored nor all-in
    np.testing.assert_allclose(w, _grid(out), atol=5e-3)
    assert out["kkt"]["ok"], out["kkt"]


def test_info_law_respects_a_repetition_limit(runs: pd.DataFrame) -> None:
    out = _optimize(runs, constraints={"max_epochs": {"a": 4.0}})
    cap = 4.0 * U["a"] / D_T  # at most 4 passes over a's pool: w_a <= 0.04
    w = np.array([out["weights"][d] for d in DOMS])
    assert w[0] <= cap + 1e-9 and abs(w.sum() - 1) < 1e-9
    np.testing.assert_allclose(w, _grid(out, cap_a=cap), atol=5e-3)
    assert out["kkt"]["ok"], out["kkt"]
