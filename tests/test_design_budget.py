"""Compute accounting and the budget solver: never over budget, floors and caps honoured, deterministic, shapes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mixlaw.design.budget import flops_6nd, parse_budget, parse_count, resolve_sizes
from mixlaw.design.strategies import STRATEGIES, AllocationOptions, Strategy, allocate, mixture_pool, solve_counts
from mixlaw.errors import InputError

LADDER = ["25k", "50k", "100k", "200k", "400k"]


def test_cost_is_6nd_and_sizes_use_the_probe_models() -> None:
    assert flops_6nd(1e6, 2e7) == 1.2e14
    sizes, notes = resolve_sizes(LADDER, tokens_per_param=20)
    assert [s.probe_size for s in sizes] == LADDER and notes == []
    for s in sizes:
        assert s.tokens == 20 * s.n_params and s.cost == 6 * s.n_params * s.tokens
    (far,), notes = resolve_sizes(["430k"])  # a count between 400k and 450k: nearest probe model, no note
    assert far.probe_size == "450k" and notes == []
    (odd,), notes = resolve_sizes(["700k"])
    assert odd.probe_size in ("450k", "1m") and len(notes) == 1 and "700k" in notes[0]
    (custom,), _ = resolve_sizes(["1e6"], cost=lambda n, d: 2.0 * n * d, probe=False)
    assert custom.n_params == 1e6 and custom.cost == 2.0 * 1e6 * 2e7


def test_budget_units() -> None:
    assert parse_budget("3e15").flops == 3e15 and parse_budget("3e15flops").unit == "flops"
    assert parse_budget("2.0x-target", target_cost=5e12).flops == 1e13
    assert parse_budget("2gpu-h@1e14").flops == 2 * 3600 * 1e14
    assert parse_budget("2gpu-h", flops_per_s=5e13).flops == 2 * 3600 * 5e13
    assert parse_count("1.6m") == 1.6e6 and parse_count("25k") == 25e3 and parse_count("7B") == 7e9
    for bad, kw in (("2gpu-h", {}), ("2x-target", {}), ("-1", {}), ("lots", {}), ("3e15@1e14", {})):
        with pytest.raises(InputError, match="--budget"):
            parse_budget(bad, **kw)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    profile=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=6),
    scale=st.floats(1.0, 3.0),
    budget_runs=st.floats(0.0, 400.0),
    floor=st.integers(0, 3),
    extra_cap=st.one_of(st.none(), st.integers(0, 30)),
    space=st.sampled_from(["count", "compute"]),
)
def test_solver_never_exceeds_the_budget_and_honours_floors_and_caps(
    profile: list[float], scale: float, budget_runs: float, floor: int, extra_cap: int | None, space: str
) -> None:
    costs = [scale**i for i in range(len(profile))]
    caps = None if extra_cap is None else floor + extra_cap
    budget = floor * sum(costs) + budget_runs
    n, left = solve_counts(profile, costs, budget, floors=floor, caps=caps, space=space)  # type: ignore[arg-type]
    spent = math.fsum(n * np.array(costs))
    assert spent <= budget * (1 + 1e-12) and math.isclose(left, budget - spent, rel_tol=1e-9, abs_tol=1e-9)
    assert np.all(n >= floor) and (caps is None or np.all(n <= caps))
    again, left2 = solve_counts(profile, costs, budget, floors=floor, caps=caps, space=space)  # type: ignore[arg-type]
    assert np.array_equal(n, again) and left == left2  # deterministic


def test_solver_stops_only_when_the_next_run_does_not_fit() -> None:
    costs = [1.0, 4.0, 16.0]
    n, left = solve_counts([1, 1, 1], costs, 100.0, floors=0)
    assert n.tolist() == [4, 4, 4] and left == 16.0  # a 5th run at every size would cost 21 > 16
    with pytest.raises(InputError, match="floor"):
        solve_counts([1, 1, 1], costs, 10.0, floors=1)


@pytest.mark.parametrize("space", ["count", "compute"])
def test_each_strategy_has_its_declared_shape(space: str) -> None:
    sizes, _ = resolve_sizes(LADDER)
    cost = np.array([s.cost for s in sizes])
    budget = (400 if space == "count" else 40) * cost[-1]
    doms = ("general", "legal", "code")
    got = {}
    for name in STRATEGIES:
        strat = Strategy(name, space=space)  # type: ignore[arg-type]
        a = allocate(strat, sizes, budget, doms, AllocationOptions(seed=0, max_mixtures=8))
        assert a.spent <= budget and a.leftover == pytest.approx(budget - a.spent)
        got[name] = np.array(a.counts) if space == "count" else np.array(a.counts) * cost
    tol = 0 if space == "count" else cost[-1]  # compute shares: within one run of the largest size
    assert np.ptp(got["rectangle"]) <= tol
    assert np.all(np.diff(got["triangle"]) <= tol) and got["triangle"][0] > got["triangle"][-1]
    assert (
        np.all(np.diff(got["inverted_triangle"]) >= -tol) and got["inverted_triangle"][-1] > got["inverted_triangle"][0]
    )
    h = got["hourglass"]
    assert h[0] > h.min() + tol and h[-1] > h.min() + tol and h.argmin() not in (0, len(h) - 1)
    d = got["diamond"]
    assert d.max() > d[0] + tol and d.max() > d[-1] + tol


def test_mixture_pool_anchors_floor_and_space_filling() -> None:
    doms = ("general", "legal", "docs", "bio", "code")
    prior = {"general": 0.6, "legal": 0.1, "docs": 0.15, "bio": 0.05, "code": 0.1}
    W = mixture_pool(doms, 30, prior=prior, floor=0.02, seed=3)
    assert np.allclose(W[0], [prior[d] for d in doms]) and np.allclose(W[1], 0.2)
    assert np.allclose(W.sum(1), 1.0) and W.min() >= 0.02 - 1e-12
    assert np.array_equal(W, mixture_pool(doms, 30, prior=prior, floor=0.02, seed=3))
    rand = 0.02 + 0.9 * np.random.default_rng(3).dirichlet(np.ones(5), size=30)

    def min_dist(X: np.ndarray) -> float:
        D = np.linalg.norm(X[:, None] - X[None], axis=-1)
        return float(D[np.triu_indices(len(X), 1)].min())

    assert min_dist(W) > 2 * min_dist(rand)


def test_nested_mixtures_and_design_warnings() -> None:
    sizes, _ = resolve_sizes(LADDER)
    budget = 2 * resolve_sizes(["1.6m"])[0][0].cost
    doms = ("general", "legal", "docs", "bio", "code")
    a = allocate("hourglass", sizes, budget, doms, AllocationOptions(mixture_floor=0.01))
    top = max(a.counts)
    for ids, n in zip(a.mixture_ids, a.counts, strict=True):
        assert list(ids) == list(range(n))  # nested prefixes of one master list
    assert a.distinct_mixtures == top and not a.notes
    few = allocate("hourglass", sizes, budget, doms, AllocationOptions(max_mixtures=4))
    assert few.distinct_mixtures == 4 and any("distinct mixtures" in n for n in few.notes)
    thin = allocate("triangle:tip=0.01", sizes, budget, doms)
    assert thin.counts[-1] < 3 and any("largest size" in n for n in thin.notes)
    ind = allocate("rectangle", sizes, budget, doms, AllocationOptions(sharing="independent"))
    assert ind.distinct_mixtures > max(ind.counts)


def test_user_cost_column_gives_the_mean_cost_per_size() -> None:
    import pandas as pd

    from mixlaw.design.budget import costs_from_column

    t = pd.DataFrame({"n_params": [1e5, 1e5, 2e5], "gpu_s": [10.0, 14.0, 30.0]})
    assert costs_from_column(t, "gpu_s") == {1e5: 12.0, 2e5: 30.0}
    with pytest.raises(InputError, match="gpu_s"):
        costs_from_column(t.assign(gpu_s=[1.0, -1.0, 2.0]), "gpu_s", source="runs.csv")
