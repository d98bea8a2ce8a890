"""The ranges of mixlaw's arguments, declared once, and the memory bound of large requests.

Every verb checks its arguments with these before any work (a level outside (0, 1) fails in a millisecond, not
after a fit), each failure one :class:`~mixlaw.errors.InputError` line naming the option:

- :func:`level` — an interval level in the open interval (0, 1);
- :func:`count` — an integer ≥ ``lo`` (1 by default) and ≤ ``hi`` (:data:`MAX_COUNT` by default: counts past
  2^53 lose their meaning as floats and past 2^63 overflow every integer array);
- :func:`positive` — a finite number > 0 (≤ ``hi`` where the option has a physical ceiling).

Large jobs estimate their memory first (:func:`memory`): a bootstrap of ``B`` resamples over ``n`` rows and ``P``
parameters, a plan of ``S`` steps, ``R`` simulated replicates. Above the limit (``--max-memory``, default
:data:`DEFAULT_MAX_MEMORY`) the job stops before it starts with one line naming the estimate and the option to
raise — never an out-of-memory kill.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from mixlaw.errors import InputError

__all__ = [
    "DEFAULT_MAX_MEMORY",
    "MAX_BOOTSTRAP",
    "MAX_COUNT",
    "MemoryLimit",
    "bootstrap",
    "bootstrap_bytes",
    "count",
    "describe",
    "level",
    "memory",
    "parse_size",
    "plan",
    "plan_cost",
    "positive",
    "simulation",
    "simulation_cost",
]

MAX_COUNT = 2**53
"""Largest integer count or step an option takes (exact in float64; far below the int64 limit)."""
MAX_BOOTSTRAP = 1_000_000
"""Most bootstrap resamples any verb accepts (the memory estimate usually stops a large request earlier)."""
DEFAULT_MAX_MEMORY = 4 * 1024**3
"""Memory a single job may plan to use unless ``--max-memory`` says otherwise (4 GiB)."""


def level(v: Any, option: str = "--level") -> float:
    """An interval level in the open interval (0, 1)."""
    x = _number(v, option)
    if not 0.0 < x < 1.0:
        raise InputError(f"expected {option} in (0, 1), e.g. 0.95, got {v}")
    return x


def count(v: Any, option: str, *, lo: int = 1, hi: int = MAX_COUNT) -> int:
    """An integer in ``[lo, hi]``."""
    if isinstance(v, bool) or not isinstance(v, int | float) or (isinstance(v, float) and not v.is_integer()):
        raise InputError(f"expected {option} to be an integer, got {v!r}")
    if not lo <= v <= hi:
        raise InputError(f"expected {option} in [{lo:,}, {hi:,}], got {int(v):,}" if abs(v) < 1e30 else
                         f"expected {option} in [{lo:,}, {hi:,}], got {v:.3g}")  # fmt: skip
    return int(v)


def positive(v: Any, option: str, *, hi: float = math.inf) -> float:
    """A finite number > 0 (and ≤ ``hi``)."""
    x = _number(v, option)
    if not (math.isfinite(x) and x > 0):
        raise InputError(f"expected {option} to be a finite number > 0, got {v}")
    if x > hi:
        raise InputError(f"expected {option} at most {hi:.4g}, got {v}")
    return x


def _number(v: Any, option: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise InputError(f"expected {option} to be a number, got {v!r}")
    try:
        return float(v)
    except OverflowError:
        raise InputError(f"expected {option} to be a finite number, got an integer of {len(str(v))} digits") \
            from None


_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:e[0-9]+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str | int | float, option: str = "--max-memory") -> int:
    """``"4G"``, ``"512MB"``, ``"2GiB"``, ``"1e9"`` → bytes (binary units: 1G = 1024³)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return int(positive(text, option))
    m = _SIZE.match(str(text))
    if not m:
        raise InputError(f"expected {option} as a size such as 4G, 512M or 2GiB, got {text!r:.40}")
    value = float(m.group(1)) * 1024 ** "_kmgt".index((m.group(2) or "_").lower())
    return int(positive(value, option, hi=2.0**62))


@dataclass(frozen=True)
class MemoryLimit:
    """The memory a job may plan to use, and the option that raises it (``--max-memory``)."""

    max_bytes: int = DEFAULT_MAX_MEMORY
    option: str = "--max-memory"

    def __post_init__(self) -> None:
        if not 0 < self.max_bytes <= 2**62:
            raise InputError(f"expected {self.option} > 0, got {self.max_bytes}")


def _gib(n: float) -> str:
    if n >= 1024**5:
        return f"{n / 1024**3:.3g} GiB"
    return f"{n / 1024**3:,.1f} GiB" if n >= 1024**3 else f"{n / 1024**2:,.0f} MiB"


def memory(estimate: float, what: str, limit: MemoryLimit | None = None, instead: str = "ask for less") -> None:
    """Stop a job whose memory ``estimate`` (bytes) exceeds the limit: one line with the estimate, what drives it
    (``what``), the option to raise and ``instead`` (how to ask for less)."""
    lim = limit or MemoryLimit()
    if math.isfinite(estimate) and estimate <= lim.max_bytes:
        return
    if math.isfinite(estimate) and estimate < 2.0**62:
        fix = f"raise {lim.option} (e.g. {lim.option} {max(1, math.ceil(estimate / 1024**3))}G) or {instead}"
    else:
        fix = f"{instead} (no {lim.option} holds it)"
    need = _gib(estimate) if math.isfinite(estimate) else "unbounded memory"
    raise InputError(f"{what} needs about {need}, above the limit of {_gib(lim.max_bytes)}: {fix}")


#: Float64 arrays of ``resamples × rows`` a bootstrap holds at once: the run draws, their counts, the weights (NumPy
#: and torch) or the resampled targets and their index, and the refit's working copy.
BOOTSTRAP_ARRAYS = 6
#: Seconds per resample, row and parameter of a batched refit (measured: the 4,000-resample Epoch bootstrap, 240
#: rows × 5 parameters, about 45 s CPU on one thread → ~1e-5 s), for the time the refusal quotes.
BOOTSTRAP_SECONDS = 1e-5


def bootstrap_bytes(resamples: int, rows: int, parameters: int) -> float:
    """Memory of a bootstrap of ``resamples`` refits over ``rows`` rows and ``parameters`` parameters (bytes):
    ``resamples × (rows × BOOTSTRAP_ARRAYS + parameters × 4) × 8``."""
    return float(resamples) * (float(rows) * BOOTSTRAP_ARRAYS + float(parameters) * 4.0) * 8.0


def bootstrap(
    resamples: int, rows: int, parameters: int, limit: MemoryLimit | None = None, option: str = "--bootstrap"
) -> None:
    """Stop a bootstrap whose memory estimate (:func:`bootstrap_bytes`) exceeds ``limit`` before any fitting: one
    line with the estimate, the request (``option``, rows, parameters), its rough CPU time and ``--max-memory``."""
    if resamples <= 0:
        return
    est = bootstrap_bytes(resamples, rows, parameters)
    hours = float(resamples) * rows * max(1, parameters) * BOOTSTRAP_SECONDS / 3600.0
    when = f", about {hours:,.0f} CPU hour{'s' if round(hours) != 1 else ''}" if hours >= 1 else ""
    memory(est, f"{option} {resamples:,} ({rows:,} rows × {parameters} parameters{when})", limit)


def describe(nbytes: float, seconds: float) -> str:
    """``"about 1.2 GiB and 3 CPU minutes"``: an estimate as the refusals and notes quote it."""
    if seconds >= 5400:
        t = f"{seconds / 3600:,.0f} CPU hours"
    elif seconds >= 90:
        t = f"{seconds / 60:,.0f} CPU minutes"
    else:
        t = f"{max(seconds, 1.0):,.0f} CPU second{'s' if seconds >= 1.5 else ''}"
    return f"about {_gib(nbytes) if math.isfinite(nbytes) else 'unbounded memory'} and {t}"


#: Bytes a planned run holds while ``plan`` allocates it (its mixture row of ``d`` weights, its mixture index and
#: bookkeeping: measured 118 bytes a run at 5 domains, 2.7 million runs): ``PLAN_RUN_BYTES + 16 d``.
PLAN_RUN_BYTES = 64
#: CPU seconds per planned run (allocation, table and spec; measured ~1.6 µs a run at 2.7 million runs).
PLAN_RUN_SECONDS = 2e-6
#: CPU seconds per (chosen mixture × candidate) of the farthest-point mixture pool, per ``8 + 2.5 d`` (measured
#: 13–20 ns a pair at 2–5 domains, 2,000–15,000 mixtures); the pool has ``max(4096, 2n)`` to 20,000 candidates.
POOL_SECONDS = 1e-9
#: Most CPU seconds a plan's allocation may be estimated to take: above it ``plan`` stops before allocating and
#: names ``--max-mixtures`` (the distinct mixtures drive the time) and ``--budget``.
MAX_PLAN_SECONDS = 60.0


def plan_cost(runs: float, distinct: float, domains: int, independent: float = 0.0) -> tuple[float, float]:
    """``(bytes, CPU seconds)`` of allocating ``runs`` runs over ``distinct`` mixtures of ``domains`` domains.

    Memory: ``runs × (PLAN_RUN_BYTES + 16 d)`` plus the pool's candidates (``3 × 8 d`` bytes each). Time: the
    farthest-point pool, ``distinct × candidates × (8 + 2.5 d) × POOL_SECONDS``, plus ``PLAN_RUN_SECONDS`` a
    run; ``independent`` adds the pairwise matching of per-size pools (``--mixtures independent``: pairs of
    mixtures compared, ~2 µs each).
    """
    d = float(domains)
    cand = max(min(max(4096.0, 4.0 * distinct), 20000.0), 2.0 * distinct) if distinct > 0 else 0.0
    nbytes = float(runs) * (PLAN_RUN_BYTES + 16.0 * d) + cand * 24.0 * d
    seconds = distinct * cand * (8.0 + 2.5 * d) * POOL_SECONDS + float(runs) * PLAN_RUN_SECONDS + independent * 2e-6
    return nbytes, seconds


def plan(
    runs: float, distinct: float, domains: int, what: str, limit: MemoryLimit | None = None, *,
    independent: float = 0.0,
) -> tuple[float, float]:  # fmt: skip
    """Stop a plan whose allocation (:func:`plan_cost`) exceeds ``limit`` (``--max-memory``) or
    :data:`MAX_PLAN_SECONDS` before it is allocated: one line with the runs, the estimate and the option to use.
    Returns the estimate ``(bytes, seconds)``."""
    nbytes, seconds = plan_cost(runs, distinct, domains, independent)
    head = f"{what}: about {_count(runs)} runs over {_count(distinct)} distinct mixtures"
    if not math.isfinite(nbytes) or nbytes > (limit or MemoryLimit()).max_bytes:
        memory(nbytes, head, limit, instead="set --cap-runs or lower --budget")
    if seconds > MAX_PLAN_SECONDS:
        raise InputError(
            f"{head} would take {describe(nbytes, seconds)} to allocate, above {MAX_PLAN_SECONDS:.0f} s: set "
            f"--max-mixtures (e.g. --max-mixtures 2000: runs beyond it repeat mixtures), --cap-runs, or lower --budget"
        )
    return nbytes, seconds


def _count(x: float) -> str:
    return f"{x:,.0f}" if x < 1e12 else f"{x:.3g}"


#: Float64 arrays of ``replicates × starts × runs`` the simulator's start screen holds besides and per CAMEL
#: component (measured: 8 at k = 1, 11 at k = 2 on 16–64 replicates of 13–52 runs; peaks up to 14 at k = 2 on
#: 32 replicates of 115 runs, ``benchmarks/plan_bounds.py``): 6 + 5 k, an upper bound.
SIM_SCREEN_ARRAYS = (6, 5)
#: Memory of a simulation besides its arrays (the laws, the allocations, the test mixtures; measured 45–50 MB at
#: 8–100 replicates by ``benchmarks/plan_bounds.py``).
SIM_FIXED_BYTES = 64 * 1024**2
#: CPU seconds per replicate, run and parameter of the simulator's polish (8 starts, ≤ 200 iterations; measured
#: 0.12–0.18 ms at k = 1–2, 64 replicates of 52 runs, one thread).
SIM_SECONDS = 2e-4


def simulation_cost(
    replicates: int, runs: list[int], starts: int, parameters: int, components: int
) -> tuple[float, float]:
    """``(bytes, CPU seconds)`` of ``plan --simulate``: per strategy (one after the other, so memory is the largest
    strategy's), ``replicates × starts × runs`` cells of the start screen, ``SIM_SCREEN_ARRAYS`` float64 arrays
    each (a fixed part plus one per component) and :data:`SIM_FIXED_BYTES`; ``replicates × runs × parameters ×
    SIM_SECONDS`` of polish."""
    arrays = SIM_SCREEN_ARRAYS[0] + SIM_SCREEN_ARRAYS[1] * components
    big = float(max(runs, default=0))
    nbytes = float(replicates) * float(starts) * big * arrays * 8.0 + float(replicates) * big * 8.0 * 8.0
    nbytes += SIM_FIXED_BYTES
    seconds = sum(float(replicates) * n * max(1, parameters) * SIM_SECONDS for n in runs)
    return nbytes, seconds


def simulation(
    replicates: int, runs: list[int], starts: int, parameters: int, components: int, limit: MemoryLimit | None = None
) -> tuple[float, float]:
    """Stop a simulation whose memory (:func:`simulation_cost`) exceeds ``limit`` before any fit: one line with the
    request (replicates × runs × fits), its estimated memory and time, and ``--max-memory``. Returns the
    estimate ``(bytes, seconds)``."""
    nbytes, seconds = simulation_cost(replicates, runs, starts, parameters, components)
    fits = f"{len(runs)} strateg{'y' if len(runs) == 1 else 'ies'} of ≤ {max(runs, default=0):,} runs"
    when = f", {describe(nbytes, seconds).split(' and ')[1]}"
    memory(nbytes, f"--simulate {replicates:,} ({fits}, {starts:,} starts × {parameters} parameters{when})", limit)
    return nbytes, seconds
