"""Multi-domain mixture decisions (``mixlaw mix``): law comparison, the optimum at a target size, nested checks."""

from mixlaw.decide.mixture.compare import compare
from mixlaw.decide.mixture.nested import nested
from mixlaw.decide.mixture.optimum import optimize

__all__ = ["compare", "nested", "optimize"]
