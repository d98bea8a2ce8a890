"""Which probe runs to buy: compute accounting, allocation strategies over sizes and mixtures, and a simulator.

:mod:`~mixlaw.design.budget` prices runs (6·N·D by default) and reads budgets; :mod:`~mixlaw.design.strategies`
turns a strategy (rectangle, triangle, inverted triangle, hourglass, diamond, random) into run counts per size and
the mixtures they train on; :mod:`~mixlaw.design.simulate` scores strategies by the target-size prediction error
they yield on a known law. ``mixlaw plan`` (:mod:`mixlaw.cli.plan`) puts them together and writes a probe sweep.
"""

from __future__ import annotations

from mixlaw.design.budget import Budget, SizeSpec, flops_6nd, parse_budget, parse_count, resolve_sizes
from mixlaw.design.strategies import STRATEGIES, Allocation, Strategy, allocate, mixture_pool, solve_counts

__all__ = [
    "STRATEGIES",
    "Allocation",
    "Budget",
    "SizeSpec",
    "Strategy",
    "allocate",
    "flops_6nd",
    "mixture_pool",
    "parse_budget",
    "parse_count",
    "resolve_sizes",
    "solve_counts",
]
