"""The verdict of ``mix optimize``: does the chosen mixture beat a default (uniform, natural) at the target?

The verdict rests on the *paired* regret of the default: its objective minus the chosen mixture's, both evaluated
under the same resampled laws (``regret_interval`` and ``p_better_than_chosen`` of a candidate). With ``P`` the
share of resamples in which the chosen mixture is better:

- ``beats``: the lower end of the paired interval is above 0 — "beats uniform by 0.030 [0.010, 0.050] nats
  (P = 0.98)";
- ``no_evidence``: the interval contains 0 — "no evidence that it beats uniform at this size (+0.013 [−0.030,
  +0.020] nats, P = 0.62)";
- ``worse``: the upper end is below 0 (the default is predicted better under the resampled laws);
- ``no_interval``: no resamples — the point regret only, and how to get the interval.

Statuses are an enum, the sentence is rendered from the status and the numbers (never parsed).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["Verdict", "VerdictStatus", "verdict_of"]


class VerdictStatus(StrEnum):
    """Reason code of a :class:`Verdict`."""

    BEATS = "beats"
    NO_EVIDENCE = "no_evidence"
    WORSE = "worse"
    NO_INTERVAL = "no_interval"


@dataclass(frozen=True)
class Verdict:
    """The chosen mixture against one default mixture, from its paired regret."""

    against: str
    status: VerdictStatus
    regret: float
    interval: tuple[float, float] | None
    p_chosen_better: float | None
    level: float
    unit: str = "nats"
    widened: bool = False
    """The interval carries the regret's size-extrapolation error (:mod:`mixlaw.decide.mixture.regret_calib`)."""

    @property
    def text(self) -> str:
        r, u = self.regret, self.unit
        if self.status is VerdictStatus.NO_INTERVAL or self.interval is None:
            return (
                f"{'beats' if r > 0 else 'does not beat'} {self.against} by {r:+.3f} {u} under the point fits; "
                "no paired interval (no resamples of the fits)"
            )
        lo, hi = self.interval
        iv = f"[{lo:+.3f}, {hi:+.3f}]"
        p = f"P = {self.p_chosen_better:.2f}" if self.p_chosen_better is not None else ""
        lvl = f"{100 * self.level:g} %" + (" with the size-extrapolation error" if self.widened else "")
        extra = f", paired {lvl}" if self.widened else ""
        if self.status is VerdictStatus.BEATS:
            return f"beats {self.against} by {r:.3f} {iv} {u} ({p}, paired {lvl})"
        if self.status is VerdictStatus.WORSE:
            return f"{self.against} is predicted better than the chosen mixture ({r:+.3f} {iv} {u}, {p}{extra})"
        return f"no evidence that it beats {self.against} at this size ({r:+.3f} {iv} {u}, {p}{extra})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "against": self.against, "status": self.status.value, "regret": self.regret,
            "interval": list(self.interval) if self.interval else None, "p_chosen_better": self.p_chosen_better,
            "level": self.level, "unit": self.unit, "widened": self.widened, "text": self.text,
        }  # fmt: skip


def verdict_of(candidate: dict[str, Any], level: float, unit: str = "nats") -> Verdict:
    """The verdict against one candidate of ``mix optimize`` (its ``regret``, and under ``--bootstrap`` its
    ``regret_interval`` and ``p_better_than_chosen``)."""
    regret = float(candidate["regret"])
    iv = candidate.get("regret_interval")
    if not iv:
        return Verdict(str(candidate["name"]), VerdictStatus.NO_INTERVAL, regret, None, None, level, unit)
    lo, hi = float(iv[0]), float(iv[1])
    p = 1.0 - float(candidate["p_better_than_chosen"])
    status = VerdictStatus.BEATS if lo > 0 else VerdictStatus.WORSE if hi < 0 else VerdictStatus.NO_EVIDENCE
    widened = float(candidate.get("regret_sd_extrapolation") or 0.0) > 0
    return Verdict(str(candidate["name"]), status, regret, (lo, hi), p, level, unit, widened)
