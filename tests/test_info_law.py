"""The information law (``info_law``): its limits, its repetition discount and its recovery from a simulated
repetition grid, with the held-out epochs a user would extrapolate to."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.options import FitOptions

P = {"E": 1.8, "A": 0.6, "alpha": 0.35, "B": 0.9, "beta": 0.3, "q": [0.5, 0.3, 0.2], "R": 8.0, "rho": 0.3}


def _x(law, n, d, w, u) -> dict[str, np.ndarray]:
    n_rows = max(len(np.atleast_1d(n)), len(np.atleast_1d(d)))
    out = {"n_params": np.broadcast_to(n, n_rows).astype(float), "tokens": np.broadcast_to(d, n_rows).astype(float)}
    for j, dom in enumerate(law.domains):
        out[f"w_{dom}"] = np.full(n_rows, w[j])
        out[f"unique_tokens_{dom}"] = np.full(n_rows, u[j])
    return out


def test_without_repetition_and_with_equal_quality_it_is_chinchilla() -> None:
    law = get_law("info_law")
    chin = get_law("chinchilla")
    n = np.array([1e8, 1e9, 7e9])
    d = np.array([2e9, 2e10, 4e11])
    p = {**P, "q": [1 / 3] * 3}
    got = law.evaluate(_x(law, n, d, [0.2, 0.5, 0.3], [1e30] * 3), p)
    # Chinchilla with the same units: L = E + A / N^alpha + B / D^beta, N in 1e8 and D in 1e9 units
    cp = {"E": 1.8, "A": 0.6 * 1e8**0.35, "alpha": 0.35, "B": 0.9 * 1e9**0.3, "beta": 0.3}
    want = chin.evaluate({"n_params": n, "tokens": d}, cp)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_repeated_data_saturates_and_saturates_sooner_at_larger_sizes() -> None:
    law = get_law("info_law")
    u = [1e9, 1e9, 1e9]
    d = np.geomspace(1e9, 1e13, 60)  # up to 10,000 epochs of every domain
    for n in (1e8, 1e10):
        loss = law.evaluate(_x(law, n, d, [1 / 3] * 3, u), P)
        assert np.all(np.diff(loss) <= 1e-12)  # more tokens never hurt ...
        r_star = P["R"] * (n / 1e8) ** -P["rho"]
        info_max = 3 * sum(q * 1e9 * (1 + r_star) for q in P["q"]) / 1e9
        floor = P["E"] + P["A"] * (n / 1e8) ** -P["alpha"] + P["B"] * info_max ** -P["beta"]
        assert loss[-1] == pytest.approx(floor, rel=1e-6)  # ... but repeats stop adding information
    # the decay constant falls with size (rho > 0): a fifth epoch adds less information to a 100x larger model
    import torch

    from mixlaw.laws.info_law import effective_information

    def info(n: float, d: float) -> float:
        r_star = torch.tensor([P["R"] * (n / 1e8) ** -P["rho"]], dtype=torch.float64)
        h, u_ = torch.full((1, 3), 1 / 3, dtype=torch.float64), torch.full((1, 3), 1e9, dtype=torch.float64)
        q = torch.tensor(P["q"], dtype=torch.float64)
        return float(effective_information(h, torch.tensor([d], dtype=torch.float64), u_, q, r_star, 3)[0])

    gain_small, gain_large = info(1e8, 15e9) - info(1e8, 12e9), info(1e10, 15e9) - info(1e10, 12e9)
    assert 0 < gain_large < gain_small < 3e9  # and a repeated token is worth less than a fresh one


def test_quality_orders_the_domains() -> None:
    """All tokens from the densest domain give a lower loss than all from the thinnest (no repetition)."""
    law = get_law("info_law")
    best = law.evaluate(_x(law, 1e9, 2e10, [1.0, 0.0, 0.0], [1e30] * 3), P)
    worst = law.evaluate(_x(law, 1e9, 2e10, [0.0, 0.0, 1.0], [1e30] * 3), P)
    assert best[0] < worst[0]


def test_recovered_from_a_repetition_grid_and_extrapolates_in_epochs() -> None:
    """Fit runs of at most 4 epochs per domain, predict runs of up to 60 epochs: the truth comes back and the
    held-out losses are predicted within a few tenths of a per cent."""
    rng = np.random.default_rng(4)
    law = get_law("info_law")
    rows = []
    u = np.array([2e9, 5e9, 1e9])
    for n in (5e7, 1.5e8, 5e8, 1.5e9):
        for d in np.geomspace(1e9, 6e10, 7):
            for w in rng.dirichlet(np.ones(3), size=6):
                rows.append({"n_params": n, "tokens": d, **{f"w_{k}": w[j] for j, k in enumerate(law.domains)},
                             **{f"unique_tokens_{k}": u[j] for j, k in enumerate(law.domains)}})  # fmt: skip
    df = pd.DataFrame(rows)
    shares = df[[f"w_{k}" for k in law.domains]].to_numpy()
    epochs = np.max(shares * df["tokens"].to_numpy()[:, None] / u, axis=1)
    noise = np.exp(2e-3 * rng.standard_normal(len(df)))
    df["loss"] = law.evaluate({c: df[c].to_numpy() for c in law.inputs}, P) * noise
    df["run_id"] = [f"r{i}" for i in range(len(df))]
    fit_rows, held = df[epochs <= 4].reset_index(drop=True), df[(epochs > 8) & (epochs <= 60)]
    assert len(fit_rows) > 60 and len(held) > 20
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(law, fit_rows, FitOptions(seed=0))
    truth = law.evaluate({c: held[c].to_numpy() for c in law.inputs}, P)
    rel = np.abs(res.predict(held) / truth - 1)
    assert rel.mean() < 5e-3 and rel.max() < 2e-2
    assert res.params["beta"] == pytest.approx(P["beta"], rel=0.25)
