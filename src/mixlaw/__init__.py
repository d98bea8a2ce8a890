"""mixlaw: scaling laws for data mixtures and continual pre-training, fitted to small probe runs.

The public API is listed in ``__all__``; everything heavy (torch, pandas, scipy) is imported on first use of a
name, so ``import mixlaw`` is cheap::

    import mixlaw
    table = mixlaw.load_table("runs.db")
    fit = mixlaw.api.fit(table, "chinchilla")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mixlaw.errors import (
    BoundaryWarning,
    ConvergenceWarning,
    ExtrapolationWarning,
    FitError,
    InputError,
    MixlawError,
)

if TYPE_CHECKING:
    __version__: str
    from mixlaw import api as api
    from mixlaw.api import decide as decide
    from mixlaw.api import load_fit as load_fit
    from mixlaw.api import load_table as load_table
    from mixlaw.decide.contract import Decision as Decision
    from mixlaw.decide.contract import DecisionResult as DecisionResult
    from mixlaw.decide.contract import Estimate as Estimate
    from mixlaw.decide.contract import Status as Status
    from mixlaw.decide.registry import register_decision as register_decision
    from mixlaw.fit import FitResult as FitResult
    from mixlaw.fit import fit_law as fit_law
    from mixlaw.fit.problem.features import add_features as add_features
    from mixlaw.laws import Law as Law
    from mixlaw.laws import ParamSpec as ParamSpec
    from mixlaw.laws import get_law as get_law
    from mixlaw.laws import law_names as law_names
    from mixlaw.laws import load_law_file as load_law_file
    from mixlaw.laws import register as register
    from mixlaw.options import BootstrapOptions as BootstrapOptions
    from mixlaw.options import FitOptions as FitOptions
    from mixlaw.options import IntervalOptions as IntervalOptions
    from mixlaw.options import ObjectiveOptions as ObjectiveOptions
    from mixlaw.options import SolverOptions as SolverOptions
    from mixlaw.options import StartOptions as StartOptions
    from mixlaw.runs.select import TableOptions as TableOptions
    from mixlaw.schedules import Schedule as Schedule


#: public name → (module, attribute or None for the module itself), imported on first access
_LAZY: dict[str, tuple[str, str | None]] = {
    "api": ("mixlaw.api", None),
    "load_table": ("mixlaw.api", "load_table"),
    "load_fit": ("mixlaw.api", "load_fit"),
    "fit_law": ("mixlaw.fit", "fit_law"),
    "FitResult": ("mixlaw.fit", "FitResult"),
    "add_features": ("mixlaw.fit.problem.features", "add_features"),
    "Law": ("mixlaw.laws", "Law"),
    "ParamSpec": ("mixlaw.laws", "ParamSpec"),
    "get_law": ("mixlaw.laws", "get_law"),
    "law_names": ("mixlaw.laws", "law_names"),
    "load_law_file": ("mixlaw.laws", "load_law_file"),
    "register": ("mixlaw.laws", "register"),
    "Schedule": ("mixlaw.schedules", "Schedule"),
    "decide": ("mixlaw.api", "decide"),
    "Decision": ("mixlaw.decide.contract", "Decision"),
    "DecisionResult": ("mixlaw.decide.contract", "DecisionResult"),
    "Estimate": ("mixlaw.decide.contract", "Estimate"),
    "Status": ("mixlaw.decide.contract", "Status"),
    "register_decision": ("mixlaw.decide.registry", "register_decision"),
    "BootstrapOptions": ("mixlaw.options", "BootstrapOptions"),
    "FitOptions": ("mixlaw.options", "FitOptions"),
    "IntervalOptions": ("mixlaw.options", "IntervalOptions"),
    "ObjectiveOptions": ("mixlaw.options", "ObjectiveOptions"),
    "StartOptions": ("mixlaw.options", "StartOptions"),
    "SolverOptions": ("mixlaw.options", "SolverOptions"),
    "TableOptions": ("mixlaw.runs.select", "TableOptions"),
}

__all__ = [
    "__version__",
    *_LAZY,
    "MixlawError",
    "InputError",
    "FitError",
    "ConvergenceWarning",
    "BoundaryWarning",
    "ExtrapolationWarning",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # importlib.metadata costs ~50 ms: only when asked
        from mixlaw._provenance import package_version

        globals()["__version__"] = version = package_version()
        return version
    if name not in _LAZY:
        raise AttributeError(f"module 'mixlaw' has no attribute {name!r}")
    module, attr = _LAZY[name]
    mod = importlib.import_module(module)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
