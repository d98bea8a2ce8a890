"""The fitting engine: robust, batched multi-start fits with bootstrap intervals and held-out validation.

Four rooms and a small top (``docs/design/layout.md``):

- ``fit.problem``: what is fitted — validated data and residuals (``data``), derived features, the start design;
- ``fit.solver``: how — the batched solver (``solve``, ``steps``), iteration limits (``refine``), thread pools
  (``pools``), batched refits under the usable-row rule (``refits``), many fits at once (``batch``);
- ``fit.uncertainty``: what the data leave uncertain — the one bootstrap, intervals, identifiability, loose parameters;
- ``fit.evaluate``: how a fit does on data it did not see — validation, the extrapolation calibration, coverage;
- here: :class:`Fitter` and :func:`fit_law` (``fitter``), :class:`FitResult` (``result``) and its file schema.
"""

from mixlaw.fit.fitter import Fitter, fit_law, objective_at
from mixlaw.fit.problem.data import FitData, prepare_data
from mixlaw.fit.result import FitResult, FitStatus
from mixlaw.fit.solver.batch import BatchFit, fit_batch
from mixlaw.fit.solver.refits import USABLE, BootstrapDraws, refit
from mixlaw.fit.uncertainty.bootstrap import bootstrap_law
from mixlaw.options import BootstrapOptions, FitOptions, ObjectiveOptions, SolverOptions, StartOptions

__all__ = [
    "USABLE",
    "BootstrapOptions",
    "FitOptions",
    "ObjectiveOptions",
    "SolverOptions",
    "StartOptions",
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
