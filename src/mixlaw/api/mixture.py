"""Multi-domain mixture decisions (``mixlaw mix``): law comparison, the optimum at a target size, nested checks."""

from mixlaw.decide.mixture.api import compare, optimize
from mixlaw.decide.mixture.nested import nested

__all__ = ["compare", "nested", "optimize"]
