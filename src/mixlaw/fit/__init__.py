"""The fitting engine: robust, batched multi-start fits with bootstrap intervals and held-out validation.

Modules: ``data`` (validated inputs, residuals), ``starts`` (start design), ``solve`` (batched solver),
``bootstrap`` (the usable-row rule and the one bootstrap), ``batch`` (:func:`fit_batch`), ``diagnostics``,
``fitter`` (:class:`Fitter`, :func:`fit_law`), ``result`` (:class:`FitResult`), ``validate`` (held-out checks).
"""

from mixlaw.fit.batch import BatchFit, fit_batch
from mixlaw.fit.bootstrap import bootstrap_law
from mixlaw.fit.data import FitData, prepare_data
from mixlaw.fit.fitter import Fitter, fit_law, objective_at
from mixlaw.fit.refits import USABLE, BootstrapDraws, refit
from mixlaw.fit.result import FitResult, FitStatus

__all__ = [
    "USABLE",
    "BatchFit",
    "BootstrapDraws",
    "bootstrap_law",
    "fit_batch",
    "FitData",
    "FitResult",
    "FitStatus",
    "Fitter",
    "fit_law",
    "objective_at",
    "prepare_data",
    "refit",
]
