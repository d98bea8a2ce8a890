"""Bounded ``plan``: the allocation (runs × distinct mixtures) and ``--simulate`` (replicates × runs × fits) are
estimated before any work; above ``--max-memory`` or the planning time limit the command stops with one line
naming the option, and neither the mixture pool nor a simulated fit runs. Requests within the limits are untouched."""

from __future__ import annotations

import re
from typing import Any

import pytest
from typer.testing import CliRunner

from mixlaw import limits
from mixlaw.cli import app
from mixlaw.design.budget import resolve_sizes
from mixlaw.design.plan import expected_counts, plan
from mixlaw.design.strategies import AllocationOptions, Strategy, allocate
from mixlaw.errors import InputError

runner = CliRunner()
SMALL = ["plan", "--sizes", "25k,50k,100k", "--domains", "a,b"]
ISSUE = ["plan", "--sizes", "25k,50k,100k,200k,400k", "--target-size", "1.6m", "--budget", "2.0x-target",
         "--domains", "general,legal,docs,bio,code", "--compare", "rectangle"]  # fmt: skip


def _never(*_a: object, **_k: object) -> None:
    raise AssertionError("work started before the request was bounded")


def _one_line(args: list[str]) -> str:
    r = runner.invoke(app, args)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert r.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def test_estimates_are_linear_in_replicates_and_runs() -> None:
    fixed = limits.SIM_FIXED_BYTES
    b1, s1 = limits.simulation_cost(10, [100], 1024, 15, 2)
    b2, s2 = limits.simulation_cost(20, [100], 1024, 15, 2)
    b3, s3 = limits.simulation_cost(10, [200], 1024, 15, 2)
    assert b2 - fixed == pytest.approx(2 * (b1 - fixed)) and s2 == pytest.approx(2 * s1)
    assert b3 - fixed == pytest.approx(2 * (b1 - fixed)) and s3 == pytest.approx(2 * s1)
    assert b1 - fixed >= 10 * 1024 * 100 * 8  # at least the (replicates × starts, runs) float64 objective screen
    _, two = limits.simulation_cost(10, [100, 100], 1024, 15, 2)
    assert two == pytest.approx(2 * s1)  # strategies run one after the other: time adds, memory does not
    assert limits.plan_cost(2e6, 100, 5)[0] > limits.plan_cost(1e6, 100, 5)[0]
    assert limits.plan_cost(1e4, 4e4, 2)[1] > 10 * limits.plan_cost(1e4, 4e3, 2)[1]  # the pool is quadratic


CASES = [("hourglass", 3e13, 0), ("rectangle", 1e14, 0), ("triangle", 5e14, 40), ("diamond:space=compute", 1e14, 0)]


@pytest.mark.parametrize(("strategy", "budget", "caps"), CASES)
def test_expected_counts_bound_the_allocations_closely(strategy: str, budget: float, caps: Any) -> None:
    sizes, _ = resolve_sizes(["25k", "50k", "100k", "200k"])
    strat = Strategy.parse(strategy)
    got = allocate(strat, sizes, budget, ("a", "b"), AllocationOptions(caps=caps or None)).counts
    est = expected_counts(strat, sizes, budget, 1, caps or None)
    assert all(g <= e for g, e in zip(got, est, strict=True)), (got, est)  # an upper bound: safe to refuse on
    assert sum(est) <= 1.1 * sum(got) + 2 * len(got), (got, est)  # and a close one: fair to quote


def test_a_runaway_target_is_refused_before_the_mixture_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    import mixlaw.design.strategies as strategies

    monkeypatch.setattr(strategies, "mixture_pool", _never)
    line = _one_line([*SMALL, "--target-size", "1e23", "--budget", "2.0x-target"])  # the issue's reproducer
    assert re.search(r"about 206,72\d runs over 90,92\d distinct mixtures .* 4 CPU minutes", line), line
    assert "--max-mixtures" in line
    line = _one_line([*SMALL, "--target-size", "400k", "--budget", "1e40"])  # 1e28 runs: no int64 wrap-around
    assert "about 1.35e+28 runs" in line and "--cap-runs" in line and "--max-memory" in line


def test_the_same_target_with_max_mixtures_is_planned() -> None:
    r = runner.invoke(app, [*SMALL, "--target-size", "1e23", "--budget", "2.0x-target", "--max-mixtures", "500",
                            "--json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert '"distinct_mixtures": 500' in r.stdout and '"runs": 206' in r.stdout


def test_a_huge_budget_with_caps_is_planned_without_overflow() -> None:
    r = runner.invoke(app, [*SMALL, "--target-size", "400k", "--budget", "1e40", "--cap-runs", "3", "--json"])
    assert r.exit_code == 0 and "invalid value" not in r.output, r.output
    assert '"runs": 9' in r.stdout


def test_simulate_is_bounded_by_memory_before_any_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    import mixlaw.design.simulate as sim

    monkeypatch.setattr(sim, "simulate", _never)
    line = _one_line([*ISSUE, "--simulate", "10000"])  # the issue asked 100,000 (refused by its range)
    assert "--simulate 10,000 (2 strategies of ≤ 115 runs, 1,024 starts × 15 parameters" in line
    assert "needs about 140.5 GiB, above the limit of 4.0 GiB: raise --max-memory" in line and "CPU hours" in line
    line = _one_line([*ISSUE, "--simulate", "10", "--max-memory", "64M"])
    assert "above the limit of 64 MiB" in line
    assert "--simulate in [0, 10,000]" in _one_line([*ISSUE, "--simulate", "100000"])


def test_a_simulation_within_the_limit_runs_and_a_long_one_is_announced(monkeypatch: pytest.MonkeyPatch) -> None:
    import mixlaw.design.simulate as sim

    calls: list[int] = []
    monkeypatch.setattr(sim, "simulate", lambda *a, **k: calls.append(k["replicates"]))
    said: list[str] = []
    kw: dict[str, Any] = dict(sizes=["25k", "50k", "100k", "200k", "400k"], target_size="1.6m", budget="2.0x-target",
                              domains=["general", "legal", "docs", "bio", "code"], compare="rectangle")  # fmt: skip
    plan(**kw, simulate=100, announce=said.append)  # ~1.5 GiB, about a minute: runs, said first
    assert calls == [100] and len(said) == 1 and said[0].startswith("simulating --simulate 100: about 1.5 GiB")
    with pytest.raises(InputError, match="raise --max-memory"):
        plan(**kw, simulate=100, limit=limits.MemoryLimit(512 * 1024**2))
    plan(**kw, simulate=2, announce=said.append)  # a few seconds: nothing said
    assert calls == [100, 2] and len(said) == 1
