"""CAMEL's fit health and the number of components: a degenerate fit is never reported as a k-component law.

The degenerate fits of the shipped probes and of SlimPajama end with ``K_i`` ≈ 1e-318, ``alpha_i`` in the hundreds and
``t_i`` at the barycentre: the exponential limit of the share power (``mixlaw.decide.mixture.camel_k``). Here the
classification is checked on constructed parameters (no fit), then ``mix optimize`` on data simulated from a law
that is log-linear in the mixture (the Data Mixing Laws form with a size term, which CAMEL reaches only in that
limit) and on data simulated from a healthy two-component CAMEL.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.api.mixture import optimize
from mixlaw.decide.mixture.camel_k import ALPHA_LIMIT, ComponentStatus, FitStatus, KChoiceStatus, camel_health, select_k
from mixlaw.laws import get_law

DOMS = ("web", "code", "math")


def _rows(seed: int, n_mix: int = 12, sizes: tuple[float, ...] = (5e7, 1.5e8, 4e8, 1.2e9)) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(3, 0.8), size=n_mix)
    rows = [
        {"run_id": f"m{i}_{n:.0e}", "n_params": n, **{f"w_{d}": w[i, j] for j, d in enumerate(DOMS)}}
        for i in range(n_mix)
        for n in sizes
    ]
    return pd.DataFrame(rows)


def _params(**over: object) -> dict[str, object]:
    law = get_law("camel", domains=DOMS)
    p = dict(law.example_params)
    p.update(over)
    return p


def test_health_names_each_kind_of_component() -> None:
    law = get_law("camel", domains=DOMS)
    rows = _rows(0)
    healthy = camel_health(law, _params(), rows)
    assert healthy.status is FitStatus.HEALTHY and healthy.k_effective == 2
    assert [c.status for c in healthy.components] == [ComponentStatus.ACTIVE] * 2 and not healthy.c_at_zero
    # the probes' degenerate fit: K underflows while the share power overflows, the product is O(1)
    third = np.full(3, 1 / 3) + np.array([2e-4, -1e-4, -1e-4])
    limit = camel_health(law, _params(K_1=3.0**-600, alpha_1=600.0, t_1=third, C=1e-13), rows)
    assert [c.status for c in limit.components] == [ComponentStatus.ACTIVE, ComponentStatus.EXPONENTIAL_LIMIT]
    assert limit.components[1].max_share > 0.1  # not switched off: it carries much of the loss
    assert limit.status is FitStatus.DEGENERATE and limit.k_effective == 1 and limit.c_at_zero
    assert set(limit.reason_codes) == {"exponential_limit", "no_irreducible_loss"}
    assert "exponential limit" in limit.text and "k = 2 fitted, 1 CAMEL component" in limit.text
    off = camel_health(law, _params(K_0=1e-40), rows)
    assert off.components[0].status is ComponentStatus.SWITCHED_OFF and off.k_effective == 1
    free = camel_health(law, _params(beta_0=0.0), rows)
    assert free.components[0].status is ComponentStatus.SIZE_FREE and free.status is FitStatus.HEALTHY
    # the threshold is on alpha alone once the component carries loss: just below it is a share power
    near = camel_health(law, _params(alpha_1=ALPHA_LIMIT * 0.99), rows)
    assert near.components[1].status is not ComponentStatus.EXPONENTIAL_LIMIT


def _simulate(rows: pd.DataFrame, f: np.ndarray, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return rows.assign(loss=f * np.exp(2e-3 * rng.standard_normal(len(rows))))


def test_optimize_refuses_a_degenerate_k2_fit_on_log_linear_data() -> None:
    rows = _rows(1)
    w = rows[[f"w_{d}" for d in DOMS]].to_numpy()
    n = rows["n_params"].to_numpy() / 1e8
    # two exp-linear terms (Data Mixing Laws' form) with a size term: CAMEL reaches these only as alpha -> infinity
    f = np.exp(0.4 + w @ np.array([-0.6, 0.3, 0.5])) * n**-0.25 + np.exp(0.2 + w @ np.array([0.4, -0.9, 0.2]))
    df = _simulate(rows, f, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = optimize(df, law="camel", domains=DOMS, target="loss", target_size=3e9, law_options={"k": 2})
    ck = out["camel_k"]["loss"]
    assert ck["k_requested"] == 2 and ck["k"] == 1 and len(ck["dropped"]) == 1
    # the mechanism of the probes' collapse, reproduced: both components of the k = 2 fit at the exponential limit
    assert [c["status"] for c in ck["dropped"][0]["components"]] == ["exponential_limit"] * 2
    assert ck["status"] == "degenerate" and "exponential_limit" in ck["health"]["reason_codes"]
    for d in ck["dropped"]:  # every refused fit was degenerate, with its reason codes
        assert d["status"] == "degenerate" and d["k_effective"] < d["k"]
        assert set(d["reason_codes"]) & {"exponential_limit", "switched_off"}
    params = out["fits"]["loss"]["params"]
    k = ck["k"]
    alphas = [float(params[f"alpha_{i}"]) for i in range(k)]
    # what is reported as a k-component CAMEL law has k share powers, or it says it is degenerate
    assert ck["status"] == "degenerate" or max(alphas) <= ALPHA_LIMIT
    assert (ck["status"] == "healthy") == (not ck["dropped"] and max(alphas) <= ALPHA_LIMIT)
    assert len([p for p in params if p.startswith("K_")]) == k


def test_optimize_keeps_a_healthy_two_component_fit() -> None:
    law = get_law("camel", domains=DOMS)
    rows = _rows(3)
    x = {c: rows[c].to_numpy() for c in ("n_params", *law.w_cols)}
    df = _simulate(rows, np.asarray(law.evaluate(x, law.example_params), dtype=np.float64), 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = optimize(df, law="camel", domains=DOMS, target="loss", target_size=3e9)
    ck = out["camel_k"]["loss"]
    assert ck["status"] == "healthy" and ck["k"] == 2 and not ck["dropped"]
    p = out["fits"]["loss"]["params"]
    betas = sorted(float(p[f"beta_{i}"]) for i in range(2))
    assert betas == pytest.approx([0.2, 0.45], abs=0.1)  # the truth's capacity exponents, from starts away from them
    assert math.isfinite(out["objective"])


def test_select_k_by_size_holdout_on_a_one_component_truth() -> None:
    law = get_law("camel", domains=DOMS, k=1)
    rows = _rows(5)
    x = {c: rows[c].to_numpy() for c in ("n_params", *law.w_cols)}
    p = {"C": 1.8, "K_0": 1.2, "alpha_0": 0.4, "beta_0": 0.3, "t_0": np.array([0.6, 0.3, 0.1])}
    df = _simulate(rows, np.asarray(law.evaluate(x, p), dtype=np.float64), 6)
    choice = select_k(df, "loss", DOMS, ks=(1,))
    (cand,) = choice.candidates
    assert choice.k == 1 and choice.status is KChoiceStatus.CHOSEN and choice.heldout_size == 1.2e9
    assert cand.health.status is FitStatus.HEALTHY and cand.heldout_mre < 0.01  # the truth is in the family
    assert "k = 1" in choice.text and choice.to_dict()["candidates"][0]["k"] == 1
