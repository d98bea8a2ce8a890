"""Option groups shared by every fit and every decision: frozen, validated dataclasses passed explicitly.

The options that many verbs share travel as three small groups rather than as long keyword lists or hidden state:

- :class:`SolverOptions` — how hard each fit works (the iteration cap; ``None`` is the adaptive limit);
- :class:`IntervalOptions` — the interval level, the number of resamples and the seed of their generator;
- how a run table is read is :class:`mixlaw.runs.select.TableOptions` (``--where``, ``--derive``, ``--final``, …).

Each validates itself once, in ``__post_init__``, and raises :class:`~mixlaw.errors.InputError` naming the field,
so the engine and the decisions never re-check. The messages speak field names (``level``), not command-line flags:
the CLI maps its flags onto these fields and the same words are shown to Python callers. This module is at the
bottom of the package (it imports only :mod:`mixlaw.errors`), so every layer can use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, overload

from mixlaw.errors import InputError

__all__ = [
    "MAX_RESAMPLES",
    "MAX_ITER_LIMIT",
    "DEFAULT_SOLVER",
    "IntervalOptions",
    "SolverOptions",
    "check_level",
    "check_count",
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


@dataclass(frozen=True)
class SolverOptions:
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

    Examples
    --------
    >>> SolverOptions().cap(200), SolverOptions(max_iter=7).cap(200), SolverOptions().cap(None)
    (200, 7, None)
    """

    max_iter: int | None = None

    def __post_init__(self) -> None:
        if self.max_iter is not None:
            object.__setattr__(self, "max_iter", check_count(self.max_iter, "max_iter", minimum=1,
                                                             maximum=MAX_ITER_LIMIT))  # fmt: skip

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
class IntervalOptions:
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
