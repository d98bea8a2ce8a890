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
    "level",
    "memory",
    "parse_size",
    "positive",
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
    return f"{n / 1024**3:,.1f} GiB" if n >= 1024**3 else f"{n / 1024**2:,.0f} MiB"


def memory(estimate: float, what: str, limit: MemoryLimit | None = None) -> None:
    """Stop a job whose memory ``estimate`` (bytes) exceeds the limit: one line with the estimate, what drives it
    (``what``) and the option to raise."""
    lim = limit or MemoryLimit()
    if not math.isfinite(estimate) or estimate > lim.max_bytes:
        raise InputError(
            f"{what} needs about {_gib(estimate) if math.isfinite(estimate) else 'unbounded memory'}, above the "
            f"limit of {_gib(lim.max_bytes)}: raise {lim.option} (e.g. {lim.option} "
            f"{max(1, math.ceil(estimate / 1024**3)) if math.isfinite(estimate) else 64}G) or ask for less"
        )


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
