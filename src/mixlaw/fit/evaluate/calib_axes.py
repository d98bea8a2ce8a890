"""The axes of the extrapolation calibration: every input a law uses, and the derived ones a prediction reaches along.

Why
---
A prediction can leave the fitted data along any input, not only along model size: more tokens per parameter, more
epochs of the same unique tokens, more compute at fitted sizes, a longer schedule, a mixture share beyond the fitted
ones. The calibration of :mod:`mixlaw.fit.evaluate.calibrate` measured the growth of the out-of-sample error along one
axis
(the size input), so a query beyond the fitted epochs or compute at fitted sizes got the interval of an interpolation.

What
----
The *axes* of a fit are

- every law input that varies (at least :data:`MIN_DISTINCT` distinct values) over the fitted rows: strictly positive
  inputs are measured in e-folds (``log(v / hi)`` above the fitted range, ``log(lo / v)`` below: the scale on which
  scaling laws extrapolate), shares of a mixture (``w_<domain>``, ``ratio``) by difference (``v − hi``, ``lo − v``),
  any other input by difference over its fitted span;
- three derived axes where the law has their parts: ``compute`` ``= 6·N·D`` (``n_params`` and ``tokens``),
  ``epochs`` ``= D / U`` (``tokens`` and ``unique_tokens``) and ``tokens_per_param`` ``= D / N`` (the token
  multiplier of over-training), all in e-folds; they differ from their parts where a prediction stays inside the
  fitted range of each part but not of their product or ratio (a small fitted size trained 10× longer than any
  fitted run of its size, but on no more tokens than the largest fitted run; more repetitions of fewer unique
  tokens).

Nested refits hold out the far end of each axis (:func:`axis_masks`: fit the rows with the axis at most a cut,
predict the rest; for shares also the near end), and :func:`mixlaw.fit.evaluate.calib_growth.error_model` estimates
one growth
per axis from every nested fit's held-out errors, jointly (non-negative least squares over the folds), so that an
axis that moves with another (compute with size on a Chinchilla grid) does not count twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mixlaw.fit.evaluate.extrapolation import is_share

__all__ = [
    "DERIVED",
    "MAX_AXES",
    "MIN_DISTINCT",
    "N_AXIS_CUTS",
    "AxisGrowth",
    "axis_distance",
    "axis_kind",
    "axis_masks",
    "axis_values",
    "fit_axes",
]

#: Distinct values an input needs over the fitted rows to be an axis (two values give no cut with a fitted middle).
MIN_DISTINCT = 3
#: Forward cuts per axis besides the primary (size) axis, which keeps :data:`mixlaw.fit.evaluate.calib_folds.N_CUTS`.
N_AXIS_CUTS = 4
#: Axes at most (the primary first, then the derived ones, then the law's inputs in order): each adds nested fits.
MAX_AXES = 6
#: Derived axes: name -> (numerator input, denominator or second factor input, operation).
DERIVED: dict[str, tuple[str, str, str]] = {
    "compute": ("n_params", "tokens", "product"),
    "epochs": ("tokens", "unique_tokens", "ratio"),
    "tokens_per_param": ("tokens", "n_params", "ratio"),
}

Kind = Literal["log", "share", "linear"]


@dataclass(frozen=True)
class AxisGrowth:
    """One axis of a calibration: where the fitted rows lie along it and how fast the error grows beyond."""

    name: str
    """A law input, or a derived axis of :data:`DERIVED` (``compute``, ``epochs``)."""
    kind: str
    """``log`` (e-folds), ``share`` (difference) or ``linear`` (difference over the fitted span)."""
    lo: float
    hi: float
    growth: float = 0.0
    """Growth per unit of distance (e-fold, share) beyond the range: of the ratio of out-of-sample to predicted error
    (``term`` ``ratio``, the primary axis), or of the additive extrapolation error in fit space (``additive``)."""
    n_cuts: int = 0
    """Nested fits that hold out the far end of this axis."""
    term: str = "additive"
    """``ratio`` (the primary axis: :meth:`mixlaw.fit.evaluate.calibrate.Calibration.factor`) or ``additive``."""
    misfit: float = 1.0
    """Share of the full fit's residuals that trend along the axis, beyond noise (``additive`` axes: their growth is
    the nested fits' excess times its square root; :func:`mixlaw.fit.evaluate.calib_growth.misfit_share`). 1 for a
    calibration saved before it existed."""

    def distance(self, x: Mapping[str, np.ndarray], m: int) -> np.ndarray:
        """``(m,)`` distance of each row beyond ``[lo, hi]`` (0 inside, 0 where the axis cannot be formed), on the
        axis's scale (e-folds, share, spans)."""
        v = axis_values(self.name, x)
        if v is None:
            return np.zeros(m)
        return axis_distance(self.kind, np.broadcast_to(v, (m,)), self.lo, self.hi)

    @property
    def unit(self) -> str:
        return "e-folds" if self.kind == "log" else "share" if self.kind == "share" else "spans"


def axis_values(name: str, x: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The values of axis ``name`` at the rows ``x`` (law input names), ``None`` where its inputs are missing."""
    if name in x:
        return np.asarray(x[name], dtype=np.float64).reshape(-1)
    if name in DERIVED:
        a, b, op = DERIVED[name]
        if a not in x or b not in x:
            return None
        va, vb = (np.asarray(x[k], dtype=np.float64).reshape(-1) for k in (a, b))
        with np.errstate(all="ignore"):
            return 6.0 * va * vb if op == "product" else va / vb
    return None


def axis_kind(name: str, v: np.ndarray) -> Kind:
    """How distances along the axis are measured (module docstring)."""
    if is_share(name):
        return "share"
    return "log" if bool(np.all(v > 0)) else "linear"


def axis_distance(kind: str, v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Distance of ``v`` outside ``[lo, hi]`` on the axis's scale (0 inside; 0 where undefined)."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(all="ignore"):
        if kind == "log":
            d = np.maximum(np.log(v / hi), np.log(lo / v))
        elif kind == "share":
            d = np.maximum(v - hi, lo - v)
        else:
            span = hi - lo
            d = np.maximum(v - hi, lo - v) / span if span > 0 else np.zeros_like(v)
    return np.where(np.isfinite(d), np.maximum(d, 0.0), 0.0)


def fit_axes(inputs: tuple[str, ...], x: Mapping[str, np.ndarray], primary: str | None) -> list[AxisGrowth]:
    """The axes of a fit on the rows ``x`` (module docstring), the primary (calibration) axis first; no growth yet."""
    names: list[str] = [primary] if primary is not None else []
    names += [d for d in DERIVED if all(k in inputs for k in DERIVED[d][:2])]
    names += list(inputs)
    out: list[AxisGrowth] = []
    for name in dict.fromkeys(names):
        v = axis_values(name, x)
        if v is None or not np.isfinite(v).all() or np.unique(v).size < (1 if name == primary else MIN_DISTINCT):
            continue
        kind = axis_kind(name, v)
        if kind == "log" and name != primary and _duplicates(v, [axis_values(a.name, x) for a in out]):
            continue  # an input that is another axis times a constant (tokens = 20 N on one ratio) adds nothing
        out.append(AxisGrowth(name=name, kind=kind, lo=float(v.min()), hi=float(v.max())))
        if len(out) >= MAX_AXES:
            break
    return out


def _duplicates(v: np.ndarray, others: list[np.ndarray | None]) -> bool:
    lv = np.log(v)
    for o in others:
        if o is None or not np.all(o > 0):
            continue
        diff = lv - np.log(o)
        if float(np.ptp(diff)) < 1e-9:
            return True
    return False


def axis_masks(axis: AxisGrowth, v: np.ndarray, n_cuts: int = N_AXIS_CUTS) -> list[np.ndarray]:
    """Fit masks holding out the far end of one axis: ``v ≤ cut`` for up to ``n_cuts`` cuts between distinct values
    from the median to the second largest; a share's near end too (``v ≥ cut``, the second smallest to the
    median)."""
    distinct = np.unique(v)
    if distinct.size < MIN_DISTINCT:
        return []
    first = max(1, (distinct.size - 1) // 2)
    cand = distinct[first:-1]
    idx = np.unique(np.round(np.linspace(0, cand.size - 1, min(n_cuts, cand.size))).astype(int))
    masks = [v <= c for c in cand[idx]]
    if axis.kind == "share":
        low = distinct[1 : first + 1]
        jdx = np.unique(np.round(np.linspace(0, low.size - 1, min(n_cuts, low.size))).astype(int))
        masks += [v >= c for c in low[jdx]]
    return masks
