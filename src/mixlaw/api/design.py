"""Which probe runs to buy (``mixlaw plan``): priors, the plan, its sweep spec and measured costs."""

from mixlaw.design.budget import measured_cost
from mixlaw.design.plan import parse_prior, plan, plan_to_dict, sweep_toml

__all__ = ["measured_cost", "parse_prior", "plan", "plan_to_dict", "sweep_toml"]
