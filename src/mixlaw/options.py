"""Option groups shared by every fit and every decision: frozen, validated dataclasses passed explicitly.

The options that many verbs share travel as small groups rather than as long keyword lists or hidden state:

- :class:`SolverOptions` — how hard each fit works (the iteration cap; ``None`` is the adaptive limit; tolerances);
- :class:`IntervalOptions` — the interval level, the number of resamples and the seed of their generator;
- how a run table is read is :class:`mixlaw.runs.select.TableOptions` (``--where``, ``--derive``, ``--final``, …);
- the options of one engine fit, :class:`FitOptions`: :class:`ObjectiveOptions`, :class:`StartOptions`,
  :class:`SolverOptions` and :class:`BootstrapOptions`, one group each, and the seed.

Each validates itself once, in ``__post_init__``, and raises :class:`~mixlaw.errors.InputError` naming the field,
so the engine and the decisions never re-check. The messages speak field names (``level``), not command-line flags:
the CLI maps its flags onto these fields and the same words are shown to Python callers. This module is at the
bottom of the package (it imports only :mod:`mixlaw.errors`), so every layer can use it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self, overload

from mixlaw.errors import InputError
from mixlaw.limits import MAX_BOOTSTRAP

__all__ = [
    "MAX_RESAMPLES",
    "MAX_ITER_LIMIT",
    "DEFAULT_SOLVER",
    "IntervalOptions",
    "SolverOptions",
    "check_level",
    "check_count",
    "check_tolerance",
    "Group",
    "BOOTSTRAP_SCHEMES",
    "BootstrapOptions",
    "FitOptions",
    "ObjectiveOptions",
    "StartOptions",
]

#: The largest number of resamples a request may ask for (a bound, so that a typo cannot exhaust memory).
MAX_RESAMPLES = 100_000
#: The largest explicit iteration cap.
MAX_ITER_LIMIT = 1_000_000


def check_level(level: Any, name: str = "level") -> float:
    """``level`` as a float in the open interval (0, 1), or a one-line :class:`InputError` naming ``name``.

    >>> check_level(0.9)
    0.9
    """
    try:
        value = float(level)
    except (TypeError, ValueError):
        raise InputError(f"expected {name} in (0, 1), got {level!r}", column=name) from None
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise InputError(f"expected {name} in (0, 1), got {level}", column=name)
    return value


def check_count(value: Any, name: str, *, minimum: int = 0, maximum: int) -> int:
    """``value`` as an int in ``[minimum, maximum]``, or a one-line :class:`InputError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, float) and (
        not math.isfinite(value) or value != int(value)
    ):
        raise InputError(f"expected {name} to be a whole number, got {value!r}", column=name)
    v = int(value)
    if not minimum <= v <= maximum:
        raise InputError(f"expected {name} in [{minimum}, {maximum}], got {v}", column=name)
    return v


def check_tolerance(value: Any, name: str, *, positive: bool = False) -> float:
    """``value`` as a finite float ``>= 0`` (``> 0`` with ``positive``), or a one-line :class:`InputError` naming
    ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"expected {name} to be a number, got {value!r}", column=name) from None
    if isinstance(value, bool) or not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise InputError(f"expected a finite {name} {'>' if positive else '>='} 0, got {value!r}", column=name)
    return v


class Group:
    """Base of the frozen option groups: :meth:`replace` is :func:`dataclasses.replace` as a method (the changed
    copy is validated again by its ``__post_init__``)."""

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (field names of this group), validated.

        >>> SolverOptions().replace(max_iter=50).max_iter
        50
        """
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


@dataclass(frozen=True)
class SolverOptions(Group):
    """How hard each fit works; passed explicitly to every function that fits (``--max-iter`` of the verbs).

    The one rule: an explicit ``max_iter`` is a hard cap on every fit a computation makes — point fits, bootstrap
    refits, rescues, and the rounds of the profiled least-squares search of the CMR decision. ``None`` (the
    default) leaves each fit its own limit, read through :meth:`cap` from a named default declared once where the
    fit is made:

    - every engine fit (:func:`mixlaw.fit.fit_law`, :func:`mixlaw.fit.fit_batch`, the bootstrap refits): the
      adaptive limit (``None``), which stops a row when its objective no longer falls measurably
      (:mod:`mixlaw.fit.solver.refine`);
    - the profiled least-squares search of :mod:`mixlaw.fit.solver.profiled`: ``PROFILE_ROUNDS`` rounds of its
      pattern search (it halves its step until the exponents are known to its tolerance, far sooner);
    - the nested mixture pipeline's second batched attempt on curves whose first one ran out of iterations:
      ``FALLBACK_ITER`` iterations (:mod:`mixlaw.decide.mixture.nested`);
    - each simulated fit of ``plan --simulate``: ``SIM_MAX_ITER`` iterations (:mod:`mixlaw.design.simulate`; many
      replicates, a hard cap keeps the simulation's time bounded).

    Parameters
    ----------
    max_iter
        Iteration cap of every fit, ``>= 1``; ``None`` (default): each fit's own limit, as above.
    ftol, xtol
        Convergence tolerances of the engine's Levenberg–Marquardt solver (:mod:`mixlaw.fit.solver.solve`): a row
        converges when an accepted step changes the objective ``f`` by at most ``ftol·f`` and every internal
        parameter ``u`` by at most ``xtol·(1 + |u|)``.

    Examples
    --------
    >>> SolverOptions().cap(200), SolverOptions(max_iter=7).cap(200), SolverOptions().cap(None)
    (200, 7, None)
    """

    max_iter: int | None = None
    ftol: float = 1e-11
    xtol: float = 1e-9

    def __post_init__(self) -> None:
        if self.max_iter is not None:
            object.__setattr__(self, "max_iter", check_count(self.max_iter, "max_iter", minimum=1,
                                                             maximum=MAX_ITER_LIMIT))  # fmt: skip
        object.__setattr__(self, "ftol", check_tolerance(self.ftol, "ftol"))
        object.__setattr__(self, "xtol", check_tolerance(self.xtol, "xtol"))

    @overload
    def cap(self, default: int) -> int: ...
    @overload
    def cap(self, default: None) -> int | None: ...

    def cap(self, default: int | None) -> int | None:
        """The iteration limit of one fit: ``max_iter`` when set, else that fit's own ``default`` (``None``: the
        adaptive limit)."""
        return default if self.max_iter is None else self.max_iter


#: The solver options of a computation that was given none: every fit at its own limit.
DEFAULT_SOLVER = SolverOptions()


@dataclass(frozen=True)
class IntervalOptions(Group):
    """Intervals of a fit or a decision.

    Parameters
    ----------
    level
        Coverage of every interval, in (0, 1); default 0.95.
    resamples
        Number of bootstrap resamples (0: no intervals).
    seed
        Seed of the resampling generator (``None``: fresh entropy).
    method
        ``"percentile"`` or ``"bias_corrected"`` (Efron's BC; contains the point estimate whenever it lies in the
        central ``level`` of its own resamples).
    """

    level: float = 0.95
    resamples: int = 0
    seed: int | None = 0
    method: str = "percentile"

    def __post_init__(self) -> None:
        object.__setattr__(self, "level", check_level(self.level))
        object.__setattr__(self, "resamples", check_count(self.resamples, "resamples", maximum=MAX_RESAMPLES))
        if self.seed is not None:
            object.__setattr__(self, "seed", check_count(self.seed, "seed", maximum=2**63 - 1))
        if self.method not in ("percentile", "bias_corrected"):
            raise InputError(f"expected method 'percentile' or 'bias_corrected', got {self.method!r}",
                             column="method")  # fmt: skip


# ---------------------------------------------------------------------------------------------- one engine fit
#: The resampling schemes of an engine fit (:mod:`mixlaw.fit.uncertainty.resampling`; ``auto`` resolves per table).
BOOTSTRAP_SCHEMES: tuple[str, ...] = ("auto", "runs", "rows", "residuals", "parametric", "sizes", "wild")


def _choice(value: Any, name: str, choices: tuple[str, ...], column: str | None = None) -> None:
    if value not in choices:
        raise InputError(f"expected {name} {' or '.join(repr(c) for c in choices)}, got {value!r}",
                         column=column or name)  # fmt: skip


def _flag(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise InputError(f"expected {name} to be True or False, got {value!r}", column=name)


@dataclass(frozen=True)
class ObjectiveOptions(Group):
    """What an engine fit minimises.

    Parameters
    ----------
    loss
        ``"huber"`` (default: the Huber function of the residuals in the law's ``fit_space``, summed over points, as
        Hoffmann et al. 2022 and Besiroglu et al. 2024) or ``"l2"`` (half the sum of squared residuals).
    delta
        Huber threshold in residual units, ``> 0``; ``None`` (default): the law's ``default_delta`` (1e-3 on log
        losses).
    """

    loss: str = "huber"
    delta: float | None = None

    def __post_init__(self) -> None:
        _choice(self.loss, "loss", ("huber", "l2"))
        if self.delta is not None:
            object.__setattr__(self, "delta", check_tolerance(self.delta, "delta", positive=True))


@dataclass(frozen=True)
class StartOptions(Group):
    """Where an engine fit starts and which starts it optimises.

    Parameters
    ----------
    given
        Starts in natural units: an ``(S, F)`` array in ``law.flat_names`` order or a sequence of dicts (one
        value per parameter). Added to the law's design, or replacing it with ``use_grid=False``.
    use_grid
        Include the law's start design (:meth:`mixlaw.laws.Law.start_design`).
    use_guess
        Include the law's data-informed starts (:meth:`mixlaw.laws.Law.guess`).
    n_random
        Seeded random starts added to the design (drawn around the design's range in internal space), ``>= 0``.
    strategy
        ``"screen"`` (default): the objective is evaluated at every start in one batched call and the ``n_polish``
        best distinct starts are optimised (grid search with local polish, as ``scipy.optimize.brute``);
        ``"full"``: every start is optimised.
    n_polish
        Starts optimised under ``"screen"``, ``>= 1``.
    """

    given: Any = None
    use_grid: bool = True
    use_guess: bool = True
    n_random: int = 0
    strategy: str = "screen"
    n_polish: int = 32

    def __post_init__(self) -> None:
        if self.given is not None and not hasattr(self.given, "shape"):  # a list of dicts: an immutable copy
            if isinstance(self.given, (str, bytes, Mapping)) or not isinstance(self.given, Sequence):
                raise InputError(f"expected given starts as an array or a list of dicts, got {self.given!r}",
                                 column="given")  # fmt: skip
            object.__setattr__(self, "given", tuple(self.given))
        _flag(self.use_grid, "use_grid")
        _flag(self.use_guess, "use_guess")
        object.__setattr__(self, "n_random", check_count(self.n_random, "n_random", maximum=MAX_RESAMPLES))
        _choice(self.strategy, "strategy", ("screen", "full"))
        object.__setattr__(self, "n_polish", check_count(self.n_polish, "n_polish", minimum=1,
                                                         maximum=MAX_RESAMPLES))  # fmt: skip


@dataclass(frozen=True)
class BootstrapOptions(Group):
    """The bootstrap of an engine fit: its resamples, their scheme, and the error model of calibrated intervals.

    A fit draws resamples and stores their parameters; the interval level and method are chosen later, when a
    prediction or a decision reads them (:class:`IntervalOptions`), so they are not fit options.

    Parameters
    ----------
    resamples
        Number of bootstrap resamples, ``>= 0`` (0: none).
    scheme
        One of :data:`BOOTSTRAP_SCHEMES`: ``"auto"`` (default: ``"runs"`` where runs are curves, ``"residuals"``
        where every run is one row; the scheme that ran is recorded in ``result.settings["bootstrap_scheme"]``),
        ``"runs"``, ``"rows"``, ``"residuals"``, ``"parametric"``, ``"sizes"`` (clusters of ``size_column``) or
        ``"wild"`` (:mod:`mixlaw.fit.uncertainty.bootstrap`).
    refit_starts
        Starts per resample, ``>= 1``: the point estimate, then the next-best distinct local optima of the main fit.
    group_column
        The column naming the run of every row (``None``: every row is its own run).
    size_column
        The column whose distinct values are the clusters of the ``"sizes"`` scheme and of the calibration folds
        (default ``n_params``; the column the law's ``n_params`` input is mapped to when the table has none).
    calibrate
        Fit the out-of-sample error model of calibrated prediction intervals (:mod:`mixlaw.fit.evaluate.calibrate`).
        ``None`` (default): the entry point decides — :func:`mixlaw.fit.fit_law` does not (internal fits of
        decisions do not pay for it), :func:`mixlaw.api.fit` (``mixlaw fit``) does whenever ``resamples > 0``,
        :func:`mixlaw.fit.evaluate.validate.validate_law` does where its interval method needs it.
    """

    resamples: int = 0
    scheme: str = "auto"
    refit_starts: int = 1
    group_column: str | None = "run_id"
    size_column: str = "n_params"
    calibrate: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "resamples", check_count(self.resamples, "resamples", maximum=MAX_BOOTSTRAP))
        _choice(self.scheme, "scheme", BOOTSTRAP_SCHEMES, "bootstrap_scheme")  # the key of the fit's settings
        object.__setattr__(self, "refit_starts", check_count(self.refit_starts, "refit_starts", minimum=1,
                                                             maximum=MAX_RESAMPLES))  # fmt: skip
        if self.group_column is not None and not isinstance(self.group_column, str):
            raise InputError(f"expected group_column to be a column name or None, got {self.group_column!r}",
                             column="group_column")  # fmt: skip
        if not isinstance(self.size_column, str):
            raise InputError(f"expected size_column to be a column name, got {self.size_column!r}",
                             column="size_column")  # fmt: skip
        if self.calibrate is not None:
            _flag(self.calibrate, "calibrate")


@dataclass(frozen=True)
class FitOptions(Group):
    """Every option of one engine fit (:func:`mixlaw.fit.fit_law`, :class:`mixlaw.fit.Fitter`), one group each.

    A group left out keeps its defaults; a group is replaced whole, or one field of it with
    :meth:`~Group.replace` (``opts.replace(solver=opts.solver.replace(max_iter=500))``). Each group checked its
    fields when it was made, so a fit never re-checks. Runtime hooks that are not options — a progress callback,
    the memory limit, a stop rule, the thread count — are keyword arguments of the fit itself.

    Parameters
    ----------
    objective
        :class:`ObjectiveOptions`: the loss and the Huber threshold.
    starts
        :class:`StartOptions`: the start design and how many starts are polished.
    solver
        :class:`SolverOptions`: the iteration cap and the tolerances.
    bootstrap
        :class:`BootstrapOptions`: resamples, scheme, columns, calibration.
    seed
        Seed of the one generator of the fit: its random starts, its resamples, its calibration folds. The same
        seed gives an identical result; ``None`` (default): fresh entropy.

    Examples
    --------
    >>> opts = FitOptions(bootstrap=BootstrapOptions(resamples=200), seed=0)
    >>> opts.bootstrap.resamples, opts.objective.loss, opts.replace(seed=1).seed
    (200, 'huber', 1)
    """

    objective: ObjectiveOptions = ObjectiveOptions()
    starts: StartOptions = StartOptions()
    solver: SolverOptions = SolverOptions()
    bootstrap: BootstrapOptions = BootstrapOptions()
    seed: int | None = None

    def __post_init__(self) -> None:
        for name, kind in (("objective", ObjectiveOptions), ("starts", StartOptions), ("solver", SolverOptions),
                           ("bootstrap", BootstrapOptions)):  # fmt: skip
            if not isinstance(getattr(self, name), kind):
                raise InputError(f"expected {name} to be a {kind.__name__}, got {getattr(self, name)!r}", column=name)
        if self.seed is not None:
            object.__setattr__(self, "seed", check_count(self.seed, "seed", maximum=2**63 - 1))
