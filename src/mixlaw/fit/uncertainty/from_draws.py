"""One place for the arithmetic of intervals: percentile and bias-corrected intervals, unusable-resample counts, and
the run-level bootstrap every decision can use.

- :func:`percentile_interval` — the ``(1 − level)/2`` and ``(1 + level)/2`` quantiles of the usable draws.
- :func:`bias_corrected_interval` — Efron's bias-corrected percentile (BC) interval (Efron 1987, *JASA* 82:171;
  Efron & Tibshirani 1993, §14.3):

  .. math:: z_0 = \\Phi^{-1}(\\hat p_0), \\qquad [\\,\\hat G^{-1}(\\Phi(2 z_0 + z_{\\alpha/2})),\\;
            \\hat G^{-1}(\\Phi(2 z_0 + z_{1-\\alpha/2}))\\,]

  with ``p̂0`` the share of draws below the point estimate (ties count half) and ``Ĝ`` their empirical
  distribution. When the point estimate lies outside the result, the end on its side is moved to it and
  ``extended`` says so.
- :func:`bc_interval` — the same as a ``(lo, hi)`` tuple with ``extended``, and :func:`t_widened_interval`, which
  widens it to ``point ± t(B−1)·sd`` where a few resamples' quantiles are too narrow (the CMR's interval). Unlike a
  plain percentile interval, a BC interval contains its point estimate whenever the point lies in the central
  ``1 − α`` of its own resamples.
- :func:`run_resamples` — the index sets of a bootstrap over runs (whole runs drawn with replacement: the rows of
  one run are not independent evidence), and :func:`bootstrap_answers`, which re-evaluates any statistic of a
  table on them and counts the resamples that gave no answer.

Every interval carries the number of resamples it rests on and how many of them were unusable
(:class:`Interval`), and :func:`interval_health` says when that share makes it weak. The level is checked by
:func:`mixlaw.options.check_level`, the one check of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from mixlaw.options import check_level

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "LOST_MAX",
    "BCInterval",
    "Interval",
    "bc_interval",
    "bias_corrected_interval",
    "bootstrap_answers",
    "interval_from_draws",
    "interval_health",
    "percentile_interval",
    "run_resamples",
    "t_widened_interval",
]

_N = NormalDist()

#: An interval is ``weak``, not ``ok``, when more than this share of its resamples is unusable (failed, unfinished
#: or unable to identify the law): it then describes the usable resamples only, a selection the scheme did not
#: draw. Fits (:func:`mixlaw.fit.uncertainty.resampling.interval_status`) and decisions use this one share.
LOST_MAX = 0.2


@dataclass(frozen=True)
class Interval:
    """An interval with what it rests on.

    Attributes
    ----------
    lo, hi
        The ends (``lo <= hi``).
    level
        Its nominal coverage.
    method
        ``"percentile"`` or ``"bias_corrected"``.
    n_resamples
        Resamples drawn.
    n_unusable
        Resamples that gave no finite answer (failed fits, no answer in range); they are counted, never dropped
        silently.
    extended
        True when an end was moved to the point estimate (bias-corrected intervals only).
    """

    lo: float
    hi: float
    level: float
    method: str = "percentile"
    n_resamples: int = 0
    n_unusable: int = 0
    extended: bool = False

    @property
    def weak(self) -> bool:
        """More than :data:`LOST_MAX` of the resamples were unusable."""
        return interval_health(self.n_unusable, self.n_resamples) == "weak"

    def contains(self, value: float) -> bool:
        """``lo <= value <= hi``."""
        return self.lo <= value <= self.hi

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (an infinite end — an answer beyond the scanned range — is the string ``"inf"``)."""
        return {
            "lo": _end(self.lo), "hi": _end(self.hi), "level": self.level, "method": self.method,
            "n_resamples": self.n_resamples, "n_unusable": self.n_unusable, "extended": self.extended,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Interval:
        """Inverse of :meth:`to_dict` (``float`` reads the ``"inf"`` ends back)."""
        return cls(
            lo=float(d["lo"]), hi=float(d["hi"]), level=float(d["level"]), method=str(d.get("method", "percentile")),
            n_resamples=int(d.get("n_resamples", 0)), n_unusable=int(d.get("n_unusable", 0)),
            extended=bool(d.get("extended", False)),
        )  # fmt: skip


def _end(v: float) -> float | str:
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def interval_health(n_unusable: int, n_resamples: int) -> str:
    """``"none"`` (no resamples), ``"weak"`` (more than :data:`LOST_MAX` unusable) or ``"ok"``."""
    if n_resamples <= 0:
        return "none"
    return "weak" if n_unusable > LOST_MAX * n_resamples else "ok"


def _usable(draws: Any) -> np.ndarray:
    b = np.asarray(draws, dtype=np.float64).ravel()
    return b[np.isfinite(b)]


def percentile_interval(draws: Any, level: float = 0.95) -> Interval | None:
    """The percentile interval of the finite ``draws`` (``None`` when none is finite)."""
    level = check_level(level)
    raw = np.asarray(draws, dtype=np.float64).ravel()
    b = raw[np.isfinite(raw)]
    if b.size == 0:
        return None
    a = (1.0 - level) / 2.0
    return Interval(float(np.quantile(b, a)), float(np.quantile(b, 1.0 - a)), level, "percentile",
                    n_resamples=int(raw.size), n_unusable=int(raw.size - b.size))  # fmt: skip


def bias_corrected_interval(draws: Any, point: float | None, level: float = 0.95) -> Interval | None:
    """Efron's bias-corrected percentile interval of ``point`` from its ``draws`` (module docstring).

    Without a finite point estimate it is the percentile interval; ``None`` when no draw is finite."""
    level = check_level(level)
    raw = np.asarray(draws, dtype=np.float64).ravel()
    b = raw[np.isfinite(raw)]
    if b.size == 0:
        return None
    n_unusable = int(raw.size - b.size)
    a = (1.0 - level) / 2.0
    if point is None or not np.isfinite(point):
        return Interval(float(np.quantile(b, a)), float(np.quantile(b, 1 - a)), level, "bias_corrected",
                        n_resamples=int(raw.size), n_unusable=n_unusable)  # fmt: skip
    n = b.size
    p0 = (np.sum(b < point) + 0.5 * np.sum(b == point)) / n
    p0 = min(max(p0, 0.5 / n), 1.0 - 0.5 / n)
    z0 = _N.inv_cdf(p0)
    za = _N.inv_cdf(1.0 - a)
    lo = float(np.quantile(b, _N.cdf(2 * z0 - za)))
    hi = float(np.quantile(b, _N.cdf(2 * z0 + za)))
    ext = lo > point + 1e-12 or hi < point - 1e-12
    return Interval(min(lo, float(point)), max(hi, float(point)), level, "bias_corrected",
                    n_resamples=int(raw.size), n_unusable=n_unusable, extended=bool(ext))  # fmt: skip


def interval_from_draws(draws: Any, point: float | None, level: float, method: str) -> Interval | None:
    """The ``method`` interval (``"percentile"`` or ``"bias_corrected"``) of ``draws``."""
    if method == "bias_corrected":
        return bias_corrected_interval(draws, point, level)
    if method == "percentile":
        return percentile_interval(draws, level)
    raise ValueError(f"unknown interval method {method!r}")


def _runs_of(run_ids: Any) -> tuple[np.ndarray, list[np.ndarray]]:
    """The distinct run ids (as text, sorted) and the row indices of each."""
    uniq, inv = np.unique(np.asarray(run_ids).astype(str), return_inverse=True)
    return uniq, [np.flatnonzero(inv == k) for k in range(uniq.size)]


def _draw(rows_of: list[np.ndarray], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One resample over runs: the runs drawn (as many as there are, with replacement) and their rows."""
    pick = rng.integers(0, len(rows_of), size=len(rows_of))
    return pick, np.concatenate([rows_of[k] for k in pick]) if rows_of else np.array([], dtype=int)


def run_resamples(run_ids: Any, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``n`` row-index arrays of a bootstrap over runs: each draws as many runs as there are, with replacement,
    and keeps every row of each drawn run (a run drawn twice contributes its rows twice, under new run ids)."""
    _, rows_of = _runs_of(run_ids)
    return [_draw(rows_of, rng)[1] for _ in range(n)]


def _named_run_resamples(
    table: pd.DataFrame, run_column: str, n: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, pd.Series | None]]:
    """The draws of :func:`run_resamples` (the same generator calls, so the same resamples), each with the run id of
    every drawn row: a run drawn ``c + 1`` times keeps its id for its first copy and gets ``<id>#c`` for the
    ``c``-th repeat, so that a run drawn twice counts as two runs. Named once per drawn run, not per row."""
    import pandas as pd

    named = run_column in table.columns
    uniq, rows_of = _runs_of(table[run_column].to_numpy() if named else np.arange(len(table)))
    lengths = np.array([r.size for r in rows_of], dtype=np.int64)
    for _ in range(n):
        pick, idx = _draw(rows_of, rng)
        if not named:
            yield idx, None
            continue
        order = np.argsort(pick, kind="stable")
        first = np.searchsorted(pick[order], pick[order], side="left")
        copy = np.empty_like(pick)
        copy[order] = np.arange(pick.size) - first  # how many times this run was drawn before, in draw order
        labels = [uniq[k] if c == 0 else f"{uniq[k]}#{c}" for k, c in zip(pick.tolist(), copy.tolist(), strict=True)]
        yield idx, pd.Series(np.repeat(np.array(labels, dtype=object), lengths[pick]), dtype="str")


def bootstrap_answers(
    table: pd.DataFrame,
    statistic: Callable[[pd.DataFrame], Mapping[str, float | None]],
    names: list[str],
    n: int,
    rng: np.random.Generator,
    run_column: str = "run_id",
    progress: Callable[[str, int, int], None] | None = None,
) -> np.ndarray:
    """``(n, len(names))`` draws of ``statistic`` over a bootstrap over runs (rows when there is no run column).

    A resample whose statistic raises a :class:`~mixlaw.errors.MixlawError`, or returns no finite value for a
    name, gives NaN there: the caller counts it as unusable (the intervals of this module do). ``progress`` is
    called as ``progress("resamples", done, n)`` after each resample."""
    from mixlaw.errors import MixlawError

    table = table.reset_index(drop=True)
    out = np.full((n, len(names)), np.nan)
    for i, (idx, run_names) in enumerate(_named_run_resamples(table, run_column, n, rng)):
        sample = table.iloc[idx].reset_index(drop=True)
        if run_names is not None:
            sample[run_column] = run_names
        try:
            got = statistic(sample)
        except MixlawError:
            got = {}
        finally:
            if progress is not None:
                progress("resamples", i + 1, n)
        for j, name in enumerate(names):
            v = got.get(name)
            if v is not None:
                try:
                    out[i, j] = float(v)
                except (TypeError, ValueError):
                    pass
    return out


class BCInterval(tuple[float, float]):
    """``(lo, hi)`` with ``extended``: True when an end had to be moved to the point estimate."""

    extended: bool

    def __new__(cls, lo: float, hi: float, extended: bool = False) -> BCInterval:
        obj = super().__new__(cls, (float(lo), float(hi)))
        obj.extended = bool(extended)
        return obj

    def __getnewargs__(self) -> tuple[float, float, bool]:  # type: ignore[override]  # pickled to the workers
        return (self[0], self[1], self.extended)


def bc_interval(boot: np.ndarray, point: float | None, level: float = 0.95) -> BCInterval | None:
    """The bias-corrected percentile interval of ``point`` from its bootstrap values ``boot`` (``None`` if empty).

    Without a point estimate it is the plain percentile interval. The arithmetic is
    :func:`bias_corrected_interval`, the one every decision uses; this form is a tuple, for the CMR's tables."""
    iv = bias_corrected_interval(boot, point, level)
    return None if iv is None else BCInterval(iv.lo, iv.hi, iv.extended)


def t_widened_interval(boot: np.ndarray, point: float | None, level: float = 0.95) -> BCInterval | None:
    """An interval from ``B`` bootstrap values (the CMR's): the bias-corrected percentile interval
    (:func:`bc_interval`), widened where needed to the Student-t interval ``point ± t(B−1)·sd`` on the resamples'
    standard deviation.

    Why: the 2.5 and 97.5 % quantiles of a few resamples sit inside the distribution's own (the range of 20 draws
    covers a new one only 19/21 = 90.5 % of the time), so a percentile interval from the default 20 resamples is
    too narrow; the t interval pays for estimating the spread from ``B`` values. With many resamples the two agree
    and the percentile interval (which follows a skewed distribution) decides. On 20 simulated grids with a known
    CMR (``tests/test_cmr_coverage_simulated.py``) this brings the 95 % answers from 16 to 19 covered."""
    iv = bc_interval(boot, point, level)
    b = np.asarray(boot, dtype=np.float64)
    if iv is None or point is None or b.size < 3:
        return iv
    from scipy.stats import t as student_t

    half = float(student_t.ppf(0.5 + level / 2, b.size - 1)) * float(np.std(b, ddof=1))
    return BCInterval(min(iv[0], point - half), max(iv[1], point + half), iv.extended)
