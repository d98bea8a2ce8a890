"""The law contract.

A law is one small file: a subclass of :class:`Law` that declares its inputs, its parameters (with bounds; scalar,
vector or simplex, see :mod:`mixlaw.laws._spec`), optionally its options, a start grid, ``example_params`` and its
symmetry, and implements :meth:`Law.predict` as a pure vectorised torch function of inputs and named parameters in
natural units. Decorating it with :func:`register` makes it visible to the fitter, the CLI and the report; nothing
else has to change to add a law.

Declaring a law
---------------
A law without options declares everything as class attributes (``inputs = ("n_params", "tokens")``,
``param_specs = (...)``, ``example_params = {...}``, ``formula = "..."``). A law with options lists them in
``options_schema`` (:class:`Option`: name, default, one-line help) and overrides :meth:`Law.configure`, which gets
the checked options and returns what they change (e.g. ``{"inputs": ("w_a", "w_b", "w_c")}``). ``Law(**options)``
then builds one frozen :class:`LawSpec`; ``law.inputs``, ``law.param_specs``, ``law.example_params``, … read it.

Broadcasting contract: every input tensor has shape ``(n,)`` (one entry per data row) and every scalar parameter
tensor has shape ``(S, 1)`` (one entry per start or resample), ``(S, n)`` (one copy per data point, used by the
fitter for Jacobians) or is a 0-d tensor; vector parameters add one trailing axis of their length. ``predict``
returns ``(S, n)`` (or ``(n,)`` for 0-d parameters). Laws must use only broadcasting torch operations so that the
fitter can evaluate thousands of starts and resamples in one call and differentiate through them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._spec import REQUIRED, LawSpec, Option, ParamSpec, ParamValue, Symmetry, resolve_options

Tensor = torch.Tensor

__all__ = ["LAWS", "REQUIRED", "Law", "LawSpec", "Option", "ParamSpec", "Symmetry", "Tensor", "register"]

#: A start grid whose Cartesian product is larger than this is replaced by scrambled Sobol points in its box.
MAX_GRID_POINTS = 20_000
#: Sobol points of a law without a (small enough) grid.
N_SOBOL_STARTS = 1024

# Declaration attributes: a class attribute of these names is moved into ``_declared`` when the class is created,
# so that instances read the configured value from their spec (see ``Law.__init_subclass__``).
_DECLARED = (
    "inputs",
    "param_specs",
    "example_params",
    "formula",
    "citation",
    "fit_space",
    "default_delta",
    "target",
    "symmetry",
    "output_range",
)


class Law:
    """Base class of every scaling law.

    Subclasses set the declaration attributes and implement :meth:`predict`. ``Law(**options)`` checks the
    options against ``options_schema`` (unknown or missing options are a one-line :class:`InputError` naming the
    law and its options) and builds the law's frozen :class:`LawSpec` from the class declaration and
    :meth:`configure`. A law is rebuilt from ``(name, options)`` in a saved fit.

    Attributes
    ----------
    name
        Registry key (class attribute).
    options_schema
        The options (class attribute), each an :class:`Option`.
    inputs
        Canonical input columns (RunTable names with units, e.g. ``n_params``, ``tokens``).
    param_specs
        The parameters, in a fixed order.
    example_params
        A realistic parameter set; used in docs and in the recovery tests (never as a start).
    formula, citation
        Shown by ``mixlaw laws`` and in reports.
    fit_space
        ``"log"``: residuals ``log L̂ − log L`` (losses are positive); ``"raw"``: ``L̂ − L`` (signed targets such
        as loss increments).
    default_delta
        Huber δ in the residual space (1e-3 on log losses, the value of Chinchilla and its replication).
    target
        Default target column.
    symmetry
        :class:`Symmetry` of interchangeable components (``None``: none); fits and draws are reported canonically.
    """

    name: ClassVar[str] = ""
    options_schema: ClassVar[tuple[Option, ...]] = ()
    _declared: ClassVar[dict[str, Any]] = {
        "inputs": (),
        "param_specs": (),
        "example_params": {},
        "formula": "",
        "citation": "",
        "fit_space": "log",
        "default_delta": 1e-3,
        "target": "loss",
        "symmetry": None,
        "output_range": (-math.inf, math.inf),
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = dict(getattr(cls, "_declared", {}))
        for attr in _DECLARED:
            if attr in cls.__dict__ and not isinstance(cls.__dict__[attr], property):
                declared[attr] = cls.__dict__[attr]
                delattr(cls, attr)
        cls._declared = declared

    def __init__(self, **options: Any) -> None:
        cls = type(self)
        opts = resolve_options(cls.name or cls.__name__, cls.options_schema, options)
        self._options: Mapping[str, Any] = MappingProxyType(dict(opts))
        decl = dict(cls._declared)
        changes = self.configure(**opts) or {}
        bad = [k for k in changes if k not in _DECLARED]
        if bad:
            raise TypeError(f"law '{cls.name}': configure() returned unknown fields {bad}")
        decl.update(changes)
        self._spec = LawSpec(
            name=cls.name,
            inputs=tuple(decl["inputs"]),
            params=tuple(decl["param_specs"]),
            example_params=MappingProxyType(dict(decl["example_params"])),
            formula=str(decl["formula"]),
            citation=str(decl["citation"]),
            fit_space=decl["fit_space"],
            default_delta=float(decl["default_delta"]),
            target=str(decl["target"]),
            options=self._options,
            symmetry=decl["symmetry"],
            output_range=(float(decl["output_range"][0]), float(decl["output_range"][1])),
        )

    def configure(self, **options: Any) -> Mapping[str, Any] | None:
        """What the (checked, defaults filled) options change in the declaration; ``None``: nothing.

        Return a mapping with any of ``inputs``, ``param_specs``, ``example_params``, ``formula``, ``citation``,
        ``fit_space``, ``default_delta``, ``target``, ``symmetry``. A law may also keep derived settings it needs in
        ``predict`` as plain attributes here (e.g. ``self.token_unit``).
        """
        return None

    # ------------------------------------------------------------------ the spec
    @property
    def law_spec(self) -> LawSpec:
        """The frozen spec of this configured law."""
        return self._spec

    @property
    def options(self) -> Mapping[str, Any]:
        """Every option with its value (defaults filled in), read-only."""
        return self._options

    @property
    def inputs(self) -> tuple[str, ...]:
        return self._spec.inputs

    @property
    def param_specs(self) -> tuple[ParamSpec, ...]:
        return self._spec.params

    @property
    def example_params(self) -> Mapping[str, ParamValue]:
        return self._spec.example_params

    @property
    def formula(self) -> str:
        return self._spec.formula

    @property
    def citation(self) -> str:
        return self._spec.citation

    @property
    def fit_space(self) -> Literal["log", "raw"]:
        return self._spec.fit_space

    @property
    def default_delta(self) -> float:
        return self._spec.default_delta

    @property
    def target(self) -> str:
        return self._spec.target

    @property
    def output_range(self) -> tuple[float, float]:
        """``(lo, hi)``: the values the law's output can take (an accuracy in ``[0, scale]``; unbounded by default).
        Predictions' intervals are clipped to it, with a note (:func:`mixlaw.fit.uncertainty.profile.clip_to_range`)."""
        return self._spec.output_range

    @property
    def symmetry(self) -> Symmetry | None:
        return self._spec.symmetry

    # ------------------------------------------------------------------ contract
    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        """Predicted target in natural units. Must broadcast as described in the module docstring."""
        raise NotImplementedError

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        """``log predict``; laws that are sums of positive terms override this with a log-sum-exp form."""
        return torch.log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        """Per-parameter start values in natural units (optional; ``{}``: none).

        A vector parameter's values are an ``(m, k)`` array of candidate vectors (or ``(m,)`` values used for every
        entry). :meth:`start_design` takes the Cartesian product when it is small (at most
        :data:`MAX_GRID_POINTS` points), and scrambled Sobol points in the grid's box otherwise.
        """
        return {}

    def guess(self, table: Any) -> Sequence[Mapping[str, ParamValue]]:
        """Data-informed starts (natural units) for the rows about to be fitted (like lmfit's ``guess``).

        ``table`` is a :class:`pandas.DataFrame` with the law's inputs under their canonical names and the target
        under ``self.target``. Return complete parameter sets (an empty list: no guess, the default). The fitter
        adds them to the start design.
        """
        return []

    def canonical(self, params: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
        """Canonical form of a parameter set (laws.md §1.2): the declared :attr:`symmetry` applied.

        The fitter reports every fit and bootstrap draw in this form, so that fits, starts and resamples can be
        compared. Declare ``symmetry`` rather than overriding this.
        """
        sym = self.symmetry
        return sym.canonical(params) if sym is not None else dict(params)

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` plausible input rows (canonical units) for simulations and the law-recovery tests."""
        raise NotImplementedError(f"law '{self.name}' does not define example_inputs()")

    # ------------------------------------------------------------------ derived inputs (mixlaw.fit.problem.features)
    def derived_inputs(self) -> tuple[DerivedInput, ...]:
        """Input columns this law reads that are derived from other data rather than logged (none by default).

        A law over LR-schedule features returns e.g. ``(DerivedInput("schedule", ("s1", "s2"), positive=("s1",)),)``;
        :func:`mixlaw.fit.problem.features.add_features` builds the missing columns for ``fit``, ``predict``,
        ``validate``,
        the bootstrap and the decisions alike, so a law never has to be special-cased by name.
        """
        return ()

    # ------------------------------------------------------------------ parameter layout
    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.param_specs)

    @property
    def flat_names(self) -> tuple[str, ...]:
        """Natural entries in order: ``A``, ``t[0]``, ``t[1]``, … (columns of bootstrap and start tables)."""
        return tuple(n for s in self.param_specs for n in s.flat_names)

    @property
    def n_internal(self) -> int:
        """Length of the unconstrained internal parameter vector the solver sees."""
        return sum(s.n_internal for s in self.param_specs)

    @property
    def is_scalar(self) -> bool:
        return all(s.is_scalar for s in self.param_specs)

    def spec(self, name: str) -> ParamSpec:
        """The :class:`ParamSpec` of ``name`` (or of a flat entry name such as ``t[1]``)."""
        base = name.split("[", 1)[0]
        for s in self.param_specs:
            if s.name == name or s.name == base:
                return s
        raise KeyError(name)

    def check_params(self, params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Every parameter as a float64 array of its shape (``InputError`` naming what is missing or malformed)."""
        missing = [n for n in self.param_names if n not in params]
        if missing:
            raise InputError(f"law '{self.name}' needs parameters {missing}")
        return {s.name: s.check_value(params[s.name], self.name) for s in self.param_specs}

    def flatten(self, params: Mapping[str, Any]) -> np.ndarray:
        """Natural parameters → ``(len(flat_names),)`` array."""
        vals = self.check_params(params)
        return np.concatenate([vals[n].reshape(-1) for n in self.param_names]) if vals else np.zeros(0)

    def unflatten(self, row: np.ndarray | Sequence[float]) -> dict[str, ParamValue]:
        """``(len(flat_names),)`` natural entries → parameters (floats and lists)."""
        r = np.asarray(row, dtype=np.float64).reshape(-1)
        out: dict[str, ParamValue] = {}
        i = 0
        for s in self.param_specs:
            out[s.name] = s.natural_value(r[i] if s.is_scalar else r[i : i + s.size])
            i += s.size
        return out

    def to_internal(self, params: Mapping[str, Any]) -> np.ndarray:
        """Natural parameters → ``(n_internal,)`` unconstrained vector."""
        vals = self.check_params(params)
        parts = [np.atleast_1d(s.to_internal(vals[s.name])).reshape(-1) for s in self.param_specs]
        return np.concatenate(parts) if parts else np.zeros(0)

    def to_natural(self, u: Tensor) -> dict[str, Tensor]:
        """Internal tensor → dict of natural-unit tensors.

        ``(S, P)`` gives ``(S, 1)`` scalars (one value per start); ``(S, n, P)`` — one copy of the parameters per
        data point, as the fitter uses to get Jacobians in one reverse pass — gives ``(S, n)`` scalars; ``(P,)``
        gives 0-d scalars. Vector parameters add their trailing axis. All broadcast against ``(n,)`` inputs.
        """
        out: dict[str, Tensor] = {}
        i = 0
        for s in self.param_specs:
            m = s.n_internal
            if s.is_scalar:
                if u.dim() == 2:
                    out[s.name] = s.to_natural(u[..., i : i + 1])
                else:
                    out[s.name] = s.to_natural(u[..., i])
            else:
                blk = u[..., i : i + m]
                out[s.name] = s.to_natural(blk.unsqueeze(-2) if u.dim() == 2 else blk)
            i += m
        return out

    def natural(self, u: np.ndarray | Sequence[float], canonical: bool = True) -> dict[str, ParamValue]:
        """One internal vector → natural parameters (floats and lists), in canonical form by default."""
        with torch.no_grad():
            t = self.to_natural(torch.as_tensor(np.asarray(u, dtype=np.float64).reshape(-1)))
        params = {s.name: s.natural_value(t[s.name].numpy()) for s in self.param_specs}
        return self.canonical(params) if canonical else params

    def natural_rows(self, U: np.ndarray, canonical: bool = True) -> np.ndarray:
        """``(S, n_internal)`` internal rows → ``(S, len(flat_names))`` natural entries (canonical by default)."""
        U = np.atleast_2d(np.asarray(U, dtype=np.float64))
        if not canonical or self.symmetry is None:
            with torch.no_grad():
                t = self.to_natural(torch.as_tensor(U))
            cols = [t[s.name].reshape(len(U), -1).numpy() for s in self.param_specs]
            return np.concatenate(cols, axis=1) if cols else np.zeros((len(U), 0))
        return np.array([self.flatten(self.natural(u)) for u in U]).reshape(len(U), -1)

    def evaluate(self, x: Mapping[str, np.ndarray | float], params: Mapping[str, Any]) -> np.ndarray:
        """Convenience: numpy in, numpy out, for one parameter set."""
        vals = self.check_params(params)
        xt = {k: torch.tensor(np.array(v, dtype=np.float64)) for k, v in x.items()}
        pt = {k: torch.tensor(v, dtype=torch.float64) for k, v in vals.items()}
        with torch.no_grad():
            out = self.predict(xt, pt)
        return out.numpy()

    # ------------------------------------------------------------------ starts
    def start_design(self) -> np.ndarray:
        """The law's own start design as an ``(S, n_internal)`` array of internal values.

        The Cartesian product of :meth:`start_grid` when it names every parameter and has at most
        :data:`MAX_GRID_POINTS` points; otherwise :data:`N_SOBOL_STARTS` scrambled Sobol points (fixed seed) in
        the box spanned by the grid, or by each parameter's ``plausible`` range where the grid is silent. Never
        derived from ``example_params``.
        """
        # Entries for parameters an option removed (e.g. ``E`` under ``fixed_E``) are ignored.
        grid = {k: v for k, v in self.start_grid().items() if k in self.param_names}
        cols: list[np.ndarray] = []
        for s in self.param_specs:
            if s.name not in grid:
                cols = []
                break
            v = np.asarray(grid[s.name], dtype=np.float64)
            if not s.is_scalar and v.ndim == 1:
                v = np.repeat(v[:, None], s.size, axis=1)
            cols.append(s.to_internal(v).reshape(len(v), -1))
        n_points = math.prod(len(c) for c in cols) if cols else 0
        if cols and n_points <= MAX_GRID_POINTS:
            return _product(cols)
        lo, hi = [], []
        for s in self.param_specs:
            if s.name in grid:
                v = np.asarray(grid[s.name], dtype=np.float64)
                if not s.is_scalar and v.ndim == 1:
                    v = np.repeat(v[:, None], s.size, axis=1)
                iv = s.to_internal(v).reshape(len(v), -1)
                a, b = iv.min(axis=0), iv.max(axis=0)
                p0, p1 = s.plausible_internal()
                flat = b <= a
                a = np.where(flat, a - 0.5 * (p1 - p0) / 4, a)
                b = np.where(flat, b + 0.5 * (p1 - p0) / 4, b)
            else:
                p0, p1 = s.plausible_internal()
                a, b = np.full(s.n_internal, p0), np.full(s.n_internal, p1)
            lo.append(np.atleast_1d(a))
            hi.append(np.atleast_1d(b))
        lo_a, hi_a = np.concatenate(lo), np.concatenate(hi)
        sobol = torch.quasirandom.SobolEngine(dimension=lo_a.size, scramble=True, seed=0)
        pts = sobol.draw(N_SOBOL_STARTS, dtype=torch.float64).numpy()
        return lo_a + pts * (hi_a - lo_a)

    def internal_grid(self) -> np.ndarray:
        """The start design as an ``(S, n_internal)`` array of internal values (alias of :meth:`start_design`)."""
        return self.start_design()

    def random_starts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``(n, n_internal)`` random starts in *internal* units: the design's internal range widened by 25 %."""
        design = self.start_design()
        lo, hi = design.min(axis=0), design.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        return rng.uniform(lo - 0.25 * span, hi + 0.25 * span, size=(n, self.n_internal))

    # ------------------------------------------------------------------ display
    def describe(self) -> str:
        return f"{self.name}: {self.formula}  [inputs: {', '.join(self.inputs)}]"

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({opts})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickle (process pools, Ray, deepcopy) as "class + options": the spec is rebuilt, never copied.
        return (_rebuild, (type(self), dict(self.options)))


def _rebuild(cls: type[Law], options: dict[str, Any]) -> Law:
    return cls(**options)


def _product(cols: list[np.ndarray]) -> np.ndarray:
    """Cartesian product of per-parameter ``(m_i, d_i)`` internal candidates → ``(Π m_i, Σ d_i)``."""
    idx = np.indices([len(c) for c in cols]).reshape(len(cols), -1).T
    return np.concatenate([c[idx[:, i]] for i, c in enumerate(cols)], axis=1).astype(np.float64)


# ---------------------------------------------------------------------- derived inputs (mixlaw.fit.problem.features)
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
