"""Which number a CMR headline is, and why: the reading and its reason code (laws.md §6.3, §6.5).

The CMR is the paper's ``max F`` with ``F = A ∩ {R : T0(R) ≤ T_max}``: with the CMR law increasing in ``T`` and
the ratio law increasing in ``R`` it is ``min(CMR law at the budget, tolerance boundary)``. The headline must agree
with the per-ratio table it is printed under: it never exceeds the smallest trained ratio the table marks
infeasible, nor lies below the largest feasible one below it (the **observed bracket**). A value outside the
bracket, or no CMR law at all, leaves the bracket itself as the answer ("CMR between a and b").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Reading", "BracketReason", "Bracket", "observed_bracket"]


class Reading(StrEnum):
    """What the headline CMR of a size is."""

    CMR_LAW = "cmr_law"
    """The CMR law at the budget (the turning-point constraint binds), inside the observed bracket."""
    TOLERANCE = "tolerance_binding"
    """The tolerance boundary (ε binds before the turning point does), inside the observed bracket."""
    BRACKET = "bracket"
    """No point value: the CMR lies between the largest feasible and the smallest infeasible trained ratio."""
    LOWER_BOUND = "lower_bound"
    """Every trained ratio is feasible: the CMR is at least the largest one tried."""
    UPPER_BOUND = "upper_bound"
    """No trained ratio is feasible: the CMR is below the smallest one tried."""
    TOLERANCE_ONLY = "tolerance_only"
    """Without the turning-point requirement (increments relative to a control): the tolerance boundary."""


class BracketReason(StrEnum):
    """Why a headline is the observed bracket rather than a point value."""

    NO_CMR_LAW = "no_cmr_law"
    """Too few ratios with a turning point to fit the three-parameter CMR law."""
    ABOVE = "law_above_bracket"
    """The law's value reaches a ratio the table marks infeasible."""
    BELOW = "law_below_bracket"
    """The law's value lies below a ratio the table marks feasible."""


@dataclass(frozen=True)
class Bracket:
    """The observed bracket of the CMR: ``lo`` = largest trained ratio marked feasible below ``hi``, ``hi`` =
    smallest trained ratio marked infeasible (``None``: no such ratio); ``detached`` lists feasible ratios above
    ``hi`` (a non-contiguous feasible set: noisy fits)."""

    lo: float | None
    hi: float | None
    detached: tuple[float, ...] = ()

    def contains(self, value: float) -> bool:
        """Whether ``value`` agrees with the table: ``lo ≤ value < hi`` (a value at ``hi`` would call an infeasible
        ratio the CMR)."""
        return (self.lo is None or value >= self.lo - 1e-12) and (self.hi is None or value < self.hi - 1e-12)

    def clip(self, value: float) -> float:
        """``value`` moved into ``[lo, hi]`` (for resamples: every resample's CMR agrees with its own table)."""
        v = value if self.lo is None else max(value, self.lo)
        return v if self.hi is None else min(v, self.hi)

    def text(self) -> str:
        """``"between 0.25 and 0.5"``, ``"≥ 0.75"`` or ``"< 0.125"``."""
        if self.lo is not None and self.hi is not None:
            return f"between {self.lo:g} and {self.hi:g}"
        if self.lo is not None:
            return f"≥ {self.lo:g}"
        if self.hi is not None:
            return f"< {self.hi:g}"
        return "undetermined"


def observed_bracket(ratios: list[tuple[float, bool]]) -> Bracket:
    """The bracket of ``(ratio, feasible)`` verdicts of the candidate ratios (``R > 0`` with fitted curves)."""
    cand = sorted(ratios)
    bad = [r for r, f in cand if not f]
    hi = bad[0] if bad else None
    below = [r for r, f in cand if f and (hi is None or r < hi)]
    detached = tuple(r for r, f in cand if f and hi is not None and r > hi)
    return Bracket(max(below) if below else None, hi, detached)
