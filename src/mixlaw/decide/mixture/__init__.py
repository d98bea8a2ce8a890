"""Multi-domain mixture decisions: a constrained optimiser on the simplex and the ``mixlaw mix`` logic.

- :mod:`~mixlaw.decide.mixture.constraints`: floors, caps, fixed weights, repetition limits, KL to a prior;
- :mod:`~mixlaw.decide.mixture.optimize`: multi-start SLSQP with active constraints and a KKT check;
- :mod:`~mixlaw.decide.mixture.objective`: weighted predicted losses and benchmark-weighted accuracies;
- :mod:`~mixlaw.decide.mixture.compare` (held-out evaluation of mixture laws) and
  :mod:`~mixlaw.decide.mixture.optimum` (the optimal mixture), re-exported by the facade :mod:`mixlaw.api.mixture`.
"""

from mixlaw.decide.mixture.constraints import MixtureConstraints, kl_divergence, project_box_simplex
from mixlaw.decide.mixture.objective import PRESETS, FittedLaw, MixtureObjective
from mixlaw.decide.mixture.optimize import MixtureOptimum, kkt_check, optimize_mixture, start_points

__all__ = [
    "PRESETS",
    "FittedLaw",
    "MixtureConstraints",
    "MixtureObjective",
    "MixtureOptimum",
    "kkt_check",
    "kl_divergence",
    "optimize_mixture",
    "project_box_simplex",
    "start_points",
]
