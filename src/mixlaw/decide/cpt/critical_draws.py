"""Bootstrap intervals of the critical point and the turning length (``mixlaw cpt critical``).

:func:`~mixlaw.decide.cpt.critical.critical_point` and :func:`~mixlaw.decide.cpt.critical.turning_length` answer
from the point estimate. Every fitted set of a CPT fit bundle also carries its bootstrap parameter sets
(:meth:`~mixlaw.decide.cpt.fits.LawFit.param_sets`); the same answer under each set (the D_pt and D_cpt sets paired
by position, as every composite of :mod:`mixlaw.decide.cpt.predict`) gives its sampling distribution, and the
percentile interval at ``level`` is the interval printed beside the answer.

- **Critical point** per draw: the first crossing of ``L_init(b) − L_∞(b)`` over the same scan of branch steps
  (``n_scan`` of them), linearly interpolated between the two scanned steps around it (the point estimate itself is
  refined by bisection on integer steps; the draws' resolution is the scan's, ``T / n_scan`` steps).
- **Turning length** per draw: the first CPT step after the draw's own peak at which its curve is back at its
  start, on every step up to :data:`EVERY_STEP` and on :data:`LOG_POINTS` log-spaced steps beyond (a horizon of
  a million steps would otherwise cost a million evaluations per draw), linearly interpolated.

An answer that does not exist for a draw is *censored*, not dropped: a draw whose every branch is pre-critical has
its crossing beyond the PT schedule (``+inf``), one whose every branch is post-critical before its first step
(``0``), a curve that does not return within the horizon an infinite turning length. The percentile interval is
taken over every draw with these values (``inverted_cdf``: no interpolation with an infinite end), so an end can
be "beyond the PT schedule" or "∞", and the counts are reported (``n_censored``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mixlaw.decide.cpt.critical import continued_limits, continued_plan, scan_plan
from mixlaw.decide.cpt.fits import CptFits, LawFit
from mixlaw.decide.cpt.plan import CptPlan, _features, plan_areas
from mixlaw.decide.cpt.predict import _check_weights
from mixlaw.errors import InputError

__all__ = ["EVERY_STEP", "LOG_POINTS", "DrawInterval", "critical_point_interval", "turning_length_interval"]

#: CPT steps evaluated one by one for the draws' turning lengths; beyond, :data:`LOG_POINTS` log-spaced steps.
EVERY_STEP = 20_000
LOG_POINTS = 2_000


@dataclass(frozen=True)
class DrawInterval:
    """Percentile interval of an answer over the bootstrap draws (``inf`` ends: censored draws, module docstring)."""

    lo: float
    hi: float
    level: float
    n_draws: int
    n_censored: int
    """Draws whose answer does not exist in the scanned range (no crossing, no return within the horizon)."""

    def to_dict(self) -> dict[str, Any]:
        def num(v: float) -> float | str:
            return "inf" if math.isinf(v) else v

        return {"lo": num(self.lo), "hi": num(self.hi), "level": self.level, "n_draws": self.n_draws,
                "n_censored": self.n_censored}  # fmt: skip


def _interval(values: np.ndarray, censored: np.ndarray, level: float) -> DrawInterval | None:
    v = np.asarray(values, dtype=np.float64)
    if v.size < 2:
        return None
    q = (1 - level) / 2
    lo, hi = (float(np.quantile(v, p, method="inverted_cdf")) for p in (q, 1 - q))
    return DrawInterval(lo, hi, level, int(v.size), int(np.sum(censored)))


def _sets(fits: CptFits, weights: tuple[float, float] | None, set_name: str | None) -> list[tuple[LawFit, float]]:
    """The fitted sets an answer reads, with their weights (one set at weight 1 without ``weights``)."""
    if weights is None:
        return [(fits.fits[set_name or fits.pt_set], 1.0)]
    if fits.cpt_set is None:
        raise InputError("a composite needs fits for both the D_pt and the D_cpt set")
    w_pt, w_cpt = _check_weights(weights)
    return [(fits.fits[fits.pt_set], w_pt), (fits.fits[fits.cpt_set], w_cpt)]


def _draws(sets: list[tuple[LawFit, float]]) -> list[np.ndarray]:
    """Each set's bootstrap parameter rows, cut to the common count (paired by position); no point row."""
    rows = [f.param_sets()[1:] for f, _ in sets]
    n = min(r.shape[0] for r in rows)
    return [r[:n] for r in rows]


def _evaluate(sets: list[tuple[LawFit, float]], draws: list[np.ndarray], x: Mapping[str, np.ndarray]) -> np.ndarray:
    """``(B, n)``: the weighted curve of every draw at the rows ``x``."""
    return sum(w * f.evaluate(x, d) for (f, w), d in zip(sets, draws, strict=True))  # type: ignore[return-value]


def _asymptotes(sets: list[tuple[LawFit, float]], draws: list[np.ndarray], limits: Mapping[str, float]) -> np.ndarray:
    """``(B,)``: the weighted ``L_∞`` of every draw (each law's own continued-training limit)."""
    from mixlaw.decide.cpt.critical import law_asymptote

    out = np.zeros(draws[0].shape[0])
    for (f, w), d in zip(sets, draws, strict=True):
        law_asymptote(f, limits)  # the law's checks (an asymptote, the inputs it needs) once, on the point fit
        names, law = f.law.param_names, f.law
        out += w * np.array([law.continued_asymptote(dict(zip(names, row, strict=True)), limits)  # type: ignore[attr-defined]
                             for row in d])  # fmt: skip
    return out


def critical_point_interval(
    fits: CptFits,
    plan: CptPlan,
    *,
    weights: tuple[float, float] | None = None,
    set_name: str | None = None,
    level: float = 0.95,
    n_scan: int = 200,
) -> DrawInterval | None:
    """Percentile interval of the critical point's PT step over the bootstrap draws (module docstring); ``None``
    without at least two draws."""
    sets = _sets(fits, weights, set_name)
    draws = _draws(sets)
    if draws[0].shape[0] < 2 or plan.pt is None:
        return None
    plan, _, b = scan_plan(plan, n_scan)  # the scan of critical_point
    diff = np.empty((draws[0].shape[0], b.size))
    for i, bi in enumerate(b):
        p = replace(plan, branch_step=int(bi))
        x = _features(p, plan_areas(p), np.array([int(bi)]))
        diff[:, i] = _evaluate(sets, draws, x)[:, 0] - _asymptotes(sets, draws, continued_limits(p))
    steps = np.empty(diff.shape[0])
    censored = np.zeros(diff.shape[0], dtype=bool)
    for s, d in enumerate(diff):
        down = np.flatnonzero((d[:-1] > 0) & (d[1:] <= 0))
        change = down if down.size else np.flatnonzero(np.sign(d[:-1]) != np.sign(d[1:]))
        if change.size:
            j = int(change[0])
            frac = d[j] / (d[j] - d[j + 1]) if d[j] != d[j + 1] else 0.0
            steps[s] = b[j] + frac * (b[j + 1] - b[j])
        else:  # censored: every branch pre-critical (crossing beyond the schedule) or post-critical (before it)
            steps[s], censored[s] = (math.inf if np.all(d > 0) else 0.0), True
    return _interval(steps, censored, level)


def turning_length_interval(
    fits: CptFits,
    plan: CptPlan,
    *,
    weights: tuple[float, float] | None = None,
    set_name: str | None = None,
    horizon: int | None = None,
    level: float = 0.95,
) -> DrawInterval | None:
    """Percentile interval of the turning length (CPT steps) over the bootstrap draws (module docstring); ``None``
    without at least two draws."""
    sets = _sets(fits, weights, set_name)
    draws = _draws(sets)
    if draws[0].shape[0] < 2:
        return None
    long_plan, horizon = continued_plan(plan, horizon)  # as turning_length
    k = np.arange(min(horizon, EVERY_STEP) + 1)
    if horizon > EVERY_STEP:
        k = np.unique(np.concatenate([k, np.geomspace(EVERY_STEP, horizon, LOG_POINTS).round().astype(np.int64)]))
    T_pt = long_plan.pt_steps
    y = _evaluate(sets, draws, _features(long_plan, plan_areas(long_plan), T_pt + k))
    rise = y - y[:, :1]
    out = np.empty(y.shape[0])
    for s, r in enumerate(rise):
        peak = int(np.argmax(r))
        if r[peak] <= 0:
            out[s] = 0.0  # never above its start
            continue
        after = np.flatnonzero(r[peak:] <= 0)
        if after.size == 0:
            out[s] = math.inf
            continue
        j = peak + int(after[0])  # first grid step at or below the start; interpolate from the one before
        frac = r[j - 1] / (r[j - 1] - r[j]) if r[j - 1] != r[j] else 1.0
        out[s] = k[j - 1] + frac * (k[j] - k[j - 1])
    return _interval(out, np.isinf(out), level)
