"""Which probe runs to buy (``mixlaw plan``): priors, the plan, its sweep spec and measured costs."""

from mixlaw.design.budget import measured_cost
from mixlaw.design.plan import DEFAULT_ALLOCATION, parse_prior, plan, plan_to_dict, sweep_toml
from mixlaw.design.strategies import AllocationOptions

__all__ = [
    "DEFAULT_ALLOCATION", "AllocationOptions", "measured_cost", "parse_prior", "plan", "plan_to_dict", "sweep_toml",
]  # fmt: skip
