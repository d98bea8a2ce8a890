"""The implicit-aggregation Data Mixing Law ``dml_implicit`` (laws.md §7.1): its map from the released network, its
reduction to ``dml`` at K = 1, recovery with more components than the registry-wide test uses, and ``mix compare``."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.laws.dml_implicit import from_network
from mixlaw.options import FitOptions, StartOptions

DOMS = ("web", "code", "math", "books")


def _mixtures(n: int, seed: int) -> dict[str, np.ndarray]:
    w = np.random.default_rng(seed).dirichlet(np.full(len(DOMS), 0.8), size=n)
    return {f"w_{d}": w[:, j] for j, d in enumerate(DOMS)}


def test_released_network_maps_to_the_same_predictions() -> None:
    rng = np.random.default_rng(3)
    K = 3
    w, W, c, bias = rng.normal(size=K), rng.normal(size=(K, len(DOMS))), rng.normal(size=K), 2.1
    x = _mixtures(50, 1)
    r = np.column_stack(list(x.values()))
    sm = np.exp(w) / np.exp(w).sum()
    network = np.exp(r @ W.T + c) @ sm + bias  # softmax(w) · exp(W r + c) + bias, pipeline/mixlaw.py
    law = get_law("dml_implicit", domains=",".join(DOMS), k=K)
    p = from_network(w, W, c, bias, DOMS)
    assert p["s"] == sorted(p["s"])  # canonical order
    np.testing.assert_allclose(law.evaluate(x, p), network, rtol=1e-12)
    # Shifting every W_ij of a component by a (Σ r = 1) and c_i by −a, or w by a constant, changes nothing.
    q = from_network(w + 0.7, W + np.array([[0.5], [-1.0], [2.0]]), c - np.array([0.5, -1.0, 2.0]), bias, DOMS)
    for name in p:
        np.testing.assert_allclose(q[name], p[name], rtol=1e-12, atol=1e-12)


def test_one_component_is_the_explicit_law() -> None:
    x = _mixtures(40, 2)
    dml = get_law("dml", domains=",".join(DOMS))
    imp = get_law("dml_implicit", domains=",".join(DOMS), k=1)
    assert "s" not in imp.param_names and imp.n_internal == dml.n_internal
    t = [-1.5, 0.4, 2.0]
    p_imp = {"b": 2.2, "k": 0.6} | {f"t_{d}": [v] for d, v in zip(DOMS[:-1], t, strict=True)}
    np.testing.assert_allclose(imp.evaluate(x, p_imp), dml.evaluate(x, {"c": 2.2, "k": 0.6, "t": t}), rtol=1e-13)


def test_three_components_on_four_domains_are_recovered_from_starts_away_from_the_truth() -> None:
    law = get_law("dml_implicit", domains=",".join(DOMS), k=3)
    truth = dict(law.example_params)
    x = _mixtures(200, 5)
    rng = np.random.default_rng(6)
    y = law.evaluate(x, truth) * np.exp(2e-5 * rng.standard_normal(200))
    df = pd.DataFrame(x).assign(loss=y, run_id=[f"r{i}" for i in range(200)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(law, df, FitOptions(starts=StartOptions(use_guess=False), seed=0))
    U = np.stack(
        [law.to_internal(law.unflatten(r)) for r in res.starts[[f"start_{p}" for p in law.flat_names]].to_numpy()]
    )
    u = law.to_internal(truth)
    assert (np.abs(U - u) / (0.1 + np.abs(u))).max(axis=1).min() > 0.1  # no start near the truth
    for name, v in truth.items():
        np.testing.assert_allclose(res.params[name], v, rtol=0.05, atol=0.02, err_msg=name)


def test_mix_compare_runs_the_implicit_law_and_beats_the_explicit_one_on_implicit_data(tmp_path) -> None:
    law = get_law("dml_implicit", domains=",".join(DOMS), k=2)
    x = _mixtures(36, 7)
    y = law.evaluate(x, law.example_params) * np.exp(2e-3 * np.random.default_rng(8).standard_normal(36))
    path = tmp_path / "runs.csv"
    pd.DataFrame(x).assign(loss=y, run_id=[f"m{i}" for i in range(36)], n_params=1e8).to_csv(path, index=False)
    res = CliRunner().invoke(
        app,
        ["mix", "compare", str(path), "--domains", ",".join(DOMS), "--target", "loss", "--holdout", "mixtures:4",
         "--models", "dml_implicit,dml", "--bootstrap", "0", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(next(ln for ln in res.output.splitlines() if ln.startswith("{")))
    rows = {m["model"]: m for m in out["targets"][0]["models"]}
    assert rows["dml_implicit"]["n_parameters"] == 1 + 2 * len(DOMS) and rows["dml_implicit"]["n_test"] == 36
    # Measured: implicit MAE 0.0066 (the noise alone: mean |ε| ≈ 0.0045), explicit 0.023.
    assert rows["dml_implicit"]["mae"] < 0.5 * rows["dml"]["mae"]
    assert rows["dml_implicit"]["mae"] < 0.01
