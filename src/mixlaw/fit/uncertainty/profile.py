"""Parameters the data do not bound, and what a prediction does along them.

Why
---
A fit can report ``converged`` with a parameter the data do not pin down: fitted on runs of at most 4 epochs, the
data-constrained law's repetition decay ``R_D*`` ran to 1.1e17 (no discount at all) because nothing in the data
distinguishes 15 from 1e17. The local test of :mod:`mixlaw.fit.uncertainty.identify` scales every Jacobian column to
unit norm,
so a column that is tiny because the parameter has run off to where it no longer matters looks as good as any. And
a prediction that depends on that parameter (60 epochs) then gets the narrow interval of a bootstrap whose
resamples run off the same way.

What
----
For every scalar parameter ``θ_j`` of a fit (:func:`loose_parameters`), the others held at the point estimate, the
objective is scanned over a grid of :data:`N_GRID` values from ``θ_j / SCAN`` to ``θ_j · SCAN`` (log-spaced for a
positive parameter, and reaching into its plausible range — ``1e-3``–``1e3`` by default — when it ran off far from
it, two more points per decade beyond six: ``R_D*`` at 8.5e16 is scanned down to 1e-3; for a bounded one, its whole
range; else ``θ_j ± SCAN·max(1, |θ_j|)`` linearly). A value is
*accepted* where the fit-space sum of squares rises by at most ``χ²₁(0.95) · σ̂²`` (``σ̂²`` the residual variance,
:func:`mixlaw.fit.uncertainty.fitted.residual_sd`): a profile likelihood-ratio set (Raue et al., *Bioinformatics* 25
(2009)
1923) with the other parameters held instead of re-optimised, so a subset of the true profile set. The parameter

- *runs off* when the accepted set reaches an end of the scan (the data cannot bound it on that side: a change by
  a factor :data:`SCAN` changes no fitted prediction by more than the noise);
- has the *profile range* ``[lo, hi]`` of its accepted values (contiguous with the estimate).

The fit's identifiability verdict carries both (``running_off``, ``profile``) for the parameters that run off and
those :mod:`mixlaw.fit.uncertainty.identify` finds undetermined or weak. A prediction's interval then carries them
(:func:`profile_envelope`): the base interval moved to the prediction at every accepted value of each such
parameter, its ends the union — never a narrow interval on a parameter the data do not pin down. Where the scan
reaches its end, the interval says that it is bounded only by the scan (``unbounded``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mixlaw.laws import Law

__all__ = ["CHI2_95", "N_GRID", "SCAN", "carry_loose", "clip_to_range", "loose_parameters", "profile_envelope"]

#: Scan factor each side of the estimate (a factor 1e3 either way; a change that moves no fitted prediction by more
#: than the noise over three decades is a direction the data do not bound).
SCAN = 1e3
#: Grid points of a scan.
N_GRID = 41
#: ``χ²₁`` 95 % quantile: the rise of the sum of squares (in residual variances) a profile set accepts.
CHI2_95 = 3.841458820694124


def _grid(law: Law, name: str, value: float) -> tuple[np.ndarray, bool, bool]:
    """Scan values of one flat parameter and whether each end is an open limit (the law continues past it)."""
    spec = law.spec(name.split("[")[0])
    lo, hi = spec.lower, spec.upper
    if math.isfinite(lo) and math.isfinite(hi):
        return np.linspace(lo, hi, N_GRID), False, False
    if value > 0 and lo >= 0:
        p0, p1 = (float(np.exp(v)) for v in spec.plausible_internal()) if spec.kind == "log" else (value, value)
        a = min(value / SCAN, p0 + max(lo, 0.0))  # the log map is lower + exp(u)
        a = max(a, lo) if lo > 0 else a
        b = max(value * SCAN, p1 + max(lo, 0.0))
        a = max(a, float(np.finfo(np.float64).tiny))  # a subnormal value (a switched-off amplitude) over SCAN is 0
        b = min(b, float(np.finfo(np.float64).max) / SCAN)  # a value run off to ~1e308: SCAN times it is inf
        decades = min(float(np.log10(b / a)), 66.0)  # bounded: at most 120 extra points however far it ran off
        n = N_GRID + 2 * int(max(0.0, decades - 6.0))  # a value run off far from the plausible range
        return np.geomspace(a, b, n), lo <= 0, True
    width = SCAN * max(1.0, abs(value))
    a = max(value - width, lo) if math.isfinite(lo) else value - width
    b = min(value + width, hi) if math.isfinite(hi) else value + width
    return np.linspace(a, b, N_GRID), not math.isfinite(lo), not math.isfinite(hi)


def _fit_space(law: Law, flat: np.ndarray, x: Mapping[str, np.ndarray]) -> np.ndarray:
    from mixlaw.fit.uncertainty.fitted import draw_predictions

    with np.errstate(all="ignore"):
        return draw_predictions(law, flat, x)


#: Scan rows × data points evaluated at once by :func:`loose_parameters` (8 MB per float64 array): the scan's memory
#: is bounded whatever the number of rows (at 250,000 rows one unchunked scan held ~800 MB of predictions).
PROFILE_CELLS = 1_000_000


def _sse(law: Law, rows: np.ndarray, x: Mapping[str, np.ndarray], target: np.ndarray) -> np.ndarray:
    """``Σ_i (pred_i − target_i)²`` per scan row, over the points in chunks of :data:`PROFILE_CELLS` cells."""
    n = int(target.size)
    step = max(1, PROFILE_CELLS // max(1, rows.shape[0]))
    if step >= n:
        return np.asarray(np.sum((_fit_space(law, rows, x) - target) ** 2, axis=1))
    total = np.zeros(rows.shape[0])
    for a in range(0, n, step):
        xs = {k: np.asarray(v)[a : a + step] if np.ndim(v) and np.shape(v)[0] == n else v for k, v in x.items()}
        total += np.sum((_fit_space(law, rows, xs) - target[a : a + step]) ** 2, axis=1)
    return total


def loose_parameters(
    law: Law, x: Mapping[str, np.ndarray], y: np.ndarray, params: Mapping[str, Any], sd: float | None,
    flagged: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:  # fmt: skip
    """``{"running_off": [...], "profile": {name: [lo, hi, open_lo, open_hi]}}`` of a fit (module docstring).

    ``x``, ``y``: the fitted rows (natural target units); ``sd``: the residual sd in fit space (nothing is scanned
    without it); ``flagged``: parameter names (:mod:`mixlaw.fit.uncertainty.identify`'s undetermined and weak ones)
    whose profile
    range is recorded even when they do not run off."""
    out: dict[str, Any] = {"running_off": [], "profile": {}}
    if sd is None or not sd > 0 or not len(y):
        return out
    flat0 = np.asarray(law.flatten(params), dtype=np.float64)
    target = np.log(y) if law.fit_space == "log" else np.asarray(y, dtype=np.float64)
    base = _fit_space(law, flat0[None, :], x)[0]
    with np.errstate(all="ignore"):
        sse0 = float(np.sum((base - target) ** 2))
    if not math.isfinite(sse0):
        return out
    names = list(law.flat_names)
    for j, name in enumerate(names):
        spec = law.spec(name.split("[")[0])
        if spec.simplex:
            continue
        grid, open_lo, open_hi = _grid(law, name, float(flat0[j]))
        rows = np.repeat(flat0[None, :], grid.size, axis=0)
        rows[:, j] = grid
        with np.errstate(all="ignore"):
            rise = _sse(law, rows, x, target) - sse0
        ok = np.isfinite(rise) & (rise <= CHI2_95 * sd * sd)
        k0 = int(np.argmin(np.abs(grid - flat0[j])))
        if not ok[k0]:
            continue
        a, b = k0, k0
        while a > 0 and ok[a - 1]:
            a -= 1
        while b < grid.size - 1 and ok[b + 1]:
            b += 1
        off_lo, off_hi = a == 0 and open_lo, b == grid.size - 1 and open_hi
        base_name = name.split("[")[0]
        if off_lo or off_hi:
            out["running_off"].append(name)
        if off_lo or off_hi or base_name in flagged:
            out["profile"][name] = [float(grid[a]), float(grid[b]), bool(off_lo), bool(off_hi)]
    return out


def profile_envelope(
    law: Law, params: Mapping[str, Any], profile: Mapping[str, Any], x: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
    """``(lo, hi, names)``: the smallest and largest fit-space prediction at the rows ``x`` over the profile range
    of each loose parameter (the others at the estimate), and the parameters behind them; ``None`` without any."""
    if not profile:
        return None
    flat0 = np.asarray(law.flatten(params), dtype=np.float64)
    names = list(law.flat_names)
    m = len(next(iter(x.values()))) if x else 0
    lo, hi = np.full(m, np.inf), np.full(m, -np.inf)
    used = []
    for name, rng in profile.items():
        if name not in names:
            continue
        j = names.index(name)
        a, b = float(rng[0]), float(rng[1])
        grid = np.geomspace(a, b, N_GRID) if a > 0 and b > 0 else np.linspace(a, b, N_GRID)
        rows = np.repeat(flat0[None, :], grid.size, axis=0)
        rows[:, j] = grid
        pred = _fit_space(law, rows, x)
        pred = np.where(np.isfinite(pred), pred, np.nan)
        if not np.isfinite(pred).any():
            continue
        lo, hi = np.fmin(lo, np.nanmin(pred, axis=0)), np.fmax(hi, np.nanmax(pred, axis=0))
        used.append(name)
    if not used:
        return None
    return lo, hi, used


def carry_loose(
    result: Any, x: Mapping[str, np.ndarray], lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, str | None]:
    """``(lo, hi, note)``: an interval at the rows ``x`` widened to carry the loose parameters of the fit (module
    docstring): the base interval moved to the prediction at every accepted value of each, the union of the ends
    (in fit space). ``note`` says which parameters and whether the scan bounds the interval (``None``: unchanged)."""
    ident = result.identifiability or {}
    profile = ident.get("profile") or {}
    law = result.law
    env = profile_envelope(law, result.params, profile, x)
    if env is None:
        return lo, hi, None
    e_lo, e_hi, used = env
    with np.errstate(all="ignore"):
        pt = np.asarray(law.evaluate(dict(x), result.params), dtype=np.float64).reshape(-1)
        if law.fit_space == "log":
            g_pt, g_lo, g_hi = np.log(pt), np.log(lo), np.log(hi)
            new_lo, new_hi = np.exp(e_lo + (g_lo - g_pt)), np.exp(e_hi + (g_hi - g_pt))
        else:
            new_lo, new_hi = e_lo + (lo - pt), e_hi + (hi - pt)
    tol = 1e-9 * np.maximum(np.abs(lo), np.abs(hi))  # rounding of the same prediction is not a loose parameter
    out_lo = np.where(new_lo < lo - tol, new_lo, lo)
    out_hi = np.where(new_hi > hi + tol, new_hi, hi)
    moved = (out_lo < lo) | (out_hi > hi)
    if not moved.any():
        return lo, hi, None
    open_side = [n for n in used if profile[n][2] or profile[n][3]]
    shown = ", ".join(f"{n} in [{profile[n][0]:.3g}, {profile[n][1]:.3g}]" for n in used)
    note = (
        f"{int(moved.sum())} of {moved.size} intervals carry parameters the data do not pin down ({shown}: every value "
        "the fitted rows accept)"
    )
    if open_side:
        note += (
            f"; unbounded: the data do not bound {', '.join(open_side)}, so these ends are those of the scan (a factor "
            f"{SCAN:g} beyond the estimate), not of the data"
        )
    return out_lo, out_hi, note


def clip_to_range(law: Law, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, str | None]:
    """``(lo, hi, note)``: interval ends clipped to the law's declared output range (:attr:`mixlaw.laws.Law
    .output_range`), with a note naming how many were (``None`` when none)."""
    r0, r1 = law.output_range
    if not (math.isfinite(r0) or math.isfinite(r1)):
        return lo, hi, None
    below, above = lo < r0, hi > r1
    if not (below.any() or above.any()):
        return lo, hi, None
    note = (
        f"{int((below | above).sum())} of {lo.size} intervals clipped to the output range [{r0:g}, {r1:g}] of law "
        f"'{law.name}'"
    )
    return np.maximum(lo, r0), np.minimum(hi, r1), note
