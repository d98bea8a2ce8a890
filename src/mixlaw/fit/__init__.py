"""The fitting engine: robust, batched multi-start fits with bootstrap intervals and held-out validation."""

from mixlaw.fit.fitter import FitData, Fitter, fit_law, objective_at, prepare_data
from mixlaw.fit.result import FitResult, FitStatus

__all__ = ["FitData", "FitResult", "FitStatus", "Fitter", "fit_law", "objective_at", "prepare_data"]
