"""The logic behind ``mixlaw mix``: held-out comparison of mixture laws and the optimal mixture of a fitted law.

:func:`compare` (:mod:`~mixlaw.decide.mixture.compare`) fits each named model on the rows outside a holdout and
predicts the holdout with 95 % prediction intervals; :func:`optimize` (:mod:`~mixlaw.decide.mixture.optimum`) fits
one mixture law per loss (and benchmark laws) and finds the best mixture at a target size under the constraints of
:class:`~mixlaw.decide.mixture.constraints.MixtureConstraints`, with bootstrap intervals; :func:`nested`
(:mod:`~mixlaw.decide.mixture.nested`) predicts a mixture law at a target (size, steps) through the step → size →
mixture pipeline of Data Mixing Laws. This module re-exports them (the old import path).
"""

from __future__ import annotations

from mixlaw.decide.mixture.checks import check_mixture, holdout_folds, load_runs, metrics, mixture_groups
from mixlaw.decide.mixture.compare import compare, parse_models
from mixlaw.decide.mixture.optimum import optimize

__all__ = [
    "check_mixture",
    "compare",
    "holdout_folds",
    "load_runs",
    "metrics",
    "mixture_groups",
    "optimize",
    "parse_models",
]
