"""The fitting engine: robust, batched multi-start fits with bootstrap intervals and held-out validation."""

from mixlaw.fit.fitter import BatchFit, FitData, Fitter, fit_batch, fit_law, objective_at, prepare_data
from mixlaw.fit.result import FitResult, FitStatus

__all__ = [
    "BatchFit",
    "fit_batch",
    "FitData",
    "FitResult",
    "FitStatus",
    "Fitter",
    "fit_law",
    "objective_at",
    "prepare_data",
]
