"""The law contract and the registry.

A law is one small file: a subclass of :class:`Law` that declares its inputs, a parameter spec with bounds, a
default start grid and ``example_params``, and implements :meth:`Law.predict` as a pure vectorised torch function
of inputs and named parameters in natural units. Decorating it with :func:`register` makes it visible to the
fitter, the CLI and the report; nothing else has to change to add a law.

Broadcasting contract: every input tensor has shape ``(n,)`` (one entry per data row) and every parameter tensor
has shape ``(S, 1)`` (one entry per start or resample), ``(S, n)`` (one copy per data point, used by the fitter
for Jacobians) or is a 0-d tensor; ``predict`` returns ``(S, n)`` (or ``(n,)`` for 0-d parameters). Never index
or reduce over a parameter's trailing dimension. Laws must use only broadcasting torch operations so that the
fitter can evaluate thousands of starts and resamples in one call and differentiate through them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from mixlaw.errors import InputError

Tensor = torch.Tensor
Transform = Literal["identity", "log", "logit", "neglog"]

__all__ = [
    "Law",
    "ParamSpec",
    "get_law",
    "law_names",
    "register",
    "LAWS",
]


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a law.

    Parameters
    ----------
    name
        Name as the user sees it (natural units).
    lower, upper
        Allowed range. The fitter optimises in an unconstrained internal space chosen from the bounds:
        ``(lower, inf)`` → ``lower + exp(u)``; ``(-inf, upper)`` → ``upper - exp(u)``; both finite →
        ``lower + (upper - lower) * sigmoid(u)``; neither → ``u``. ``transform="identity"`` forces the
        plain map and treats finite bounds as report-only (a value outside is flagged, not prevented).
    transform
        ``None`` (derive from the bounds, the default) or ``"identity"``.
    description
        One line for reports.
    """

    name: str
    lower: float = -math.inf
    upper: float = math.inf
    transform: Literal["identity"] | None = None
    description: str = ""

    @property
    def kind(self) -> Transform:
        if self.transform == "identity":
            return "identity"
        lo, hi = math.isfinite(self.lower), math.isfinite(self.upper)
        if lo and hi:
            return "logit"
        if lo:
            return "log"
        if hi:
            return "neglog"
        return "identity"

    def to_internal(self, value: np.ndarray | float) -> np.ndarray:
        """Natural value(s) → unconstrained internal value(s); values on or past a bound are nudged inside."""
        v = np.asarray(value, dtype=np.float64)
        kind = self.kind
        if kind == "identity":
            return v
        if kind == "log":
            return np.log(np.maximum(v - self.lower, 1e-300))
        if kind == "neglog":
            return np.log(np.maximum(self.upper - v, 1e-300))
        span = self.upper - self.lower
        q = np.clip((v - self.lower) / span, 1e-12, 1 - 1e-12)
        return np.log(q) - np.log1p(-q)

    def to_natural(self, u: Tensor) -> Tensor:
        """Internal (unconstrained) tensor → natural-unit tensor (differentiable)."""
        kind = self.kind
        if kind == "identity":
            return u
        if kind == "log":
            return self.lower + torch.exp(u) if self.lower != 0.0 else torch.exp(u)
        if kind == "neglog":
            return self.upper - torch.exp(u)
        return self.lower + (self.upper - self.lower) * torch.sigmoid(u)

    def at_bound(self, value: float, rtol: float = 1e-6) -> bool:
        """True when ``value`` sits on (or past) one of the finite bounds."""
        scale = max(1.0, abs(value))
        for b in (self.lower, self.upper):
            if math.isfinite(b) and abs(value - b) <= rtol * scale:
                return True
        if value < self.lower or value > self.upper:
            return True
        return False


class Law:
    """Base class of every scaling law.

    Subclasses set the class attributes and implement :meth:`predict`. Options (e.g. which input a one-variable
    power law reads) are keyword-only constructor arguments stored in :attr:`options`, so that a law can be
    rebuilt from ``(name, options)`` in a saved fit.

    Attributes
    ----------
    name
        Registry key.
    inputs
        Canonical input columns (RunTable names with units, e.g. ``n_params``, ``tokens``).
    param_specs
        The parameters, in a fixed order.
    example_params
        A realistic parameter set; used in docs and in the recovery tests.
    formula, citation
        Shown by ``mixlaw laws`` and in reports.
    fit_space
        ``"log"``: residuals ``log L̂ − log L`` (losses are positive); ``"raw"``: ``L̂ − L`` (signed targets such
        as loss increments).
    default_delta
        Huber δ in the residual space (1e-3 on log losses, the value of Chinchilla and its replication).
    """

    name: ClassVar[str] = ""
    inputs: ClassVar[tuple[str, ...]] = ()
    param_specs: ClassVar[tuple[ParamSpec, ...]] = ()
    example_params: ClassVar[dict[str, float]] = {}
    formula: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    fit_space: ClassVar[Literal["log", "raw"]] = "log"
    default_delta: ClassVar[float] = 1e-3
    target: ClassVar[str] = "loss"

    def __init__(self, **options: Any) -> None:
        if options:
            raise InputError(f"law '{self.name}' takes no options, got {sorted(options)}")
        self.options: dict[str, Any] = {}

    # ------------------------------------------------------------------ contract
    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        """Predicted target in natural units. Must broadcast as described in the module docstring."""
        raise NotImplementedError

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        """``log predict``; laws that are sums of positive terms override this with a log-sum-exp form."""
        return torch.log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        """Per-parameter start values in natural units; the fitter takes their Cartesian product."""
        return {s.name: np.array([self.example_params[s.name]]) for s in self.param_specs}

    def random_starts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``(n, P)`` random starts in *internal* units: the grid's internal range widened by 25 %."""
        grid = self.internal_grid()
        lo, hi = grid.min(axis=0), grid.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        return rng.uniform(lo - 0.25 * span, hi + 0.25 * span, size=(n, len(self.param_specs)))

    def canonical(self, params: dict[str, float]) -> dict[str, float]:
        """Canonical form of a parameter set for laws with interchangeable components (identity by default).

        A law whose terms can swap without changing the prediction (two power terms, implicit domains) overrides
        this to order them, e.g. by exponent; the fitter reports every fit and bootstrap draw in this form, so that
        fits, starts and resamples can be compared (laws.md §1.2).
        """
        return params

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` plausible input rows (canonical units) for simulations and the law-recovery tests.

        Every law overrides this so that the engine's tests can check, for each registered law, that the fitter
        recovers ``example_params`` from simulated noisy data.
        """
        raise NotImplementedError(f"law '{self.name}' does not define example_inputs()")

    # ------------------------------------------------------------------ derived inputs (mixlaw.fit.features)
    def derived_inputs(self) -> tuple[DerivedInput, ...]:
        """Input columns this law reads that are derived from other data rather than logged (none by default).

        A law over LR-schedule features returns e.g. ``(DerivedInput("schedule", ("s1", "s2"), positive=("s1",)),)``;
        :func:`mixlaw.fit.features.add_features` builds the missing columns for ``fit``, ``predict``, ``validate``,
        the bootstrap and the decisions alike, so a law never has to be special-cased by name.
        """
        return ()

    # ------------------------------------------------------------------ helpers
    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.param_specs)

    def spec(self, name: str) -> ParamSpec:
        for s in self.param_specs:
            if s.name == name:
                return s
        raise KeyError(name)

    def internal_grid(self) -> np.ndarray:
        """The start grid as an ``(S, P)`` array of internal values."""
        g = self.start_grid()
        cols = []
        for s in self.param_specs:
            if s.name not in g:
                raise KeyError(f"law '{self.name}': start grid lacks parameter '{s.name}'")
            cols.append(s.to_internal(np.asarray(g[s.name], dtype=np.float64)))
        return np.array(list(itertools.product(*cols)), dtype=np.float64).reshape(-1, len(cols))

    def to_natural(self, u: Tensor) -> dict[str, Tensor]:
        """Internal tensor → dict of natural-unit tensors.

        ``(S, P)`` gives ``(S, 1)`` tensors (one value per start); ``(S, n, P)`` — one copy of the parameters per
        data point, as the fitter uses to get Jacobians in one reverse pass — gives ``(S, n)`` tensors. Both
        broadcast against ``(n,)`` inputs to ``(S, n)``.
        """
        if u.dim() == 3:
            return {s.name: s.to_natural(u[..., i]) for i, s in enumerate(self.param_specs)}
        return {s.name: s.to_natural(u[..., i : i + 1]) for i, s in enumerate(self.param_specs)}

    def to_internal(self, params: Mapping[str, float]) -> np.ndarray:
        return np.array([float(self.spec(n).to_internal(params[n])) for n in self.param_names])

    def evaluate(self, x: Mapping[str, np.ndarray | float], params: Mapping[str, float]) -> np.ndarray:
        """Convenience: numpy in, numpy out, for one parameter set."""
        missing = [n for n in self.param_names if n not in params]
        if missing:
            raise InputError(f"law '{self.name}' needs parameters {missing}")
        xt = {k: torch.tensor(np.array(v, dtype=np.float64)) for k, v in x.items()}
        pt = {k: torch.tensor(float(params[k]), dtype=torch.float64) for k in self.param_names}
        with torch.no_grad():
            out = self.predict(xt, pt)
        return out.numpy()

    def describe(self) -> str:
        return f"{self.name}: {self.formula}  [inputs: {', '.join(self.inputs)}]"

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({opts})"


# ---------------------------------------------------------------------- derived inputs (mixlaw.fit.features)
@dataclass(frozen=True)
class DerivedInput:
    """One group of derived input columns a law needs (returned by :meth:`Law.derived_inputs`).

    Parameters
    ----------
    source
        Which builder makes them: ``"schedule"`` (LR areas ``s1, s2``, their PT/CPT split and the multi-power history
        ``mpl_*``, from each run's stored schedule; :func:`mixlaw.schedules.add_schedule_features`).
    columns
        The columns of the law's inputs this group provides.
    options
        Keyword options for the builder (e.g. ``{"multi_power_bins": 48}``).
    positive
        Columns whose row-wise sum must be > 0 for the law to be defined there (``S1^(-alpha)`` at step 0); other
        rows are left out of fits and predictions.
    """

    source: str
    columns: tuple[str, ...]
    options: Mapping[str, Any] | None = None
    positive: tuple[str, ...] = ()


LAWS: dict[str, type[Law]] = {}


def register(cls: type[Law]) -> type[Law]:
    """Class decorator: add a law to the registry under ``cls.name``."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no name")
    if cls.name in LAWS and LAWS[cls.name] is not cls:
        raise TypeError(f"law name '{cls.name}' registered twice")
    LAWS[cls.name] = cls
    return cls


def _load_builtin() -> None:
    # Importing the package modules runs their @register decorators.
    import importlib
    import pkgutil

    import mixlaw.laws as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"mixlaw.laws.{mod.name}")


def law_names() -> list[str]:
    """Names of every registered law, sorted."""
    _load_builtin()
    return sorted(LAWS)


def get_law(name: str | Law, **options: Any) -> Law:
    """Build a registered law by name (``InputError`` listing the known names otherwise)."""
    if isinstance(name, Law):
        return name
    _load_builtin()
    if name not in LAWS:
        raise InputError(f"unknown law '{name}'; known laws: {', '.join(sorted(LAWS))}")
    return LAWS[name](**options)
