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
(:func:`carry_loose`): the union of the fit's interval and, at the accepted values where a prediction is extreme,
the interval of the draws with the effect of their own value of the parameter replaced by that value's (as far as
the draws keep it: their other parameters may make up for it), with the noise and the calibration — never a narrow
interval on a parameter the data do not pin down, and the parameter's own spread counted once, not once in the draws
and again along its range (moving the whole interval to each value did that, and made the ends depend on where the
solver left the parameter in its flat valley). Where the scan reaches its end, the interval says that it is bounded
only by the scan (``unbounded``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from mixlaw.laws import Law

__all__ = [
    "CHI2_95",
    "MAX_PINNED",
    "N_GRID",
    "SCAN",
    "STILL",
    "carry_loose",
    "clip_to_range",
    "loose_parameters",
    "profile_envelope",
]

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


def _scans(
    law: Law, flat0: np.ndarray, profile: Mapping[str, Any], x: Mapping[str, np.ndarray]
) -> Iterator[tuple[str, int, np.ndarray, np.ndarray]]:
    """``(name, j, grid, pred)`` per loose parameter of ``profile`` that the law has and that gives some finite
    prediction: its flat index, :data:`N_GRID` values over its profile range and the fit-space predictions ``(G, m)``
    at the rows ``x`` with the others at ``flat0``."""
    names = list(law.flat_names)
    for name, rng in profile.items():
        if name not in names:
            continue
        j = names.index(name)
        a, b = float(rng[0]), float(rng[1])
        grid = np.geomspace(a, b, N_GRID) if a > 0 and b > 0 else np.linspace(a, b, N_GRID)
        rows = np.repeat(flat0[None, :], grid.size, axis=0)
        rows[:, j] = grid
        pred = _fit_space(law, rows, x)
        if np.isfinite(pred).any():
            yield name, j, grid, pred


def profile_envelope(
    law: Law, params: Mapping[str, Any], profile: Mapping[str, Any], x: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
    """``(lo, hi, names)``: the smallest and largest fit-space prediction at the rows ``x`` over the profile range
    of each loose parameter (the others at the estimate), and the parameters behind them; ``None`` without any."""
    if not profile:
        return None
    m = len(next(iter(x.values()))) if x else 0
    lo, hi = np.full(m, np.inf), np.full(m, -np.inf)
    used = []
    for name, _, _, pred in _scans(law, np.asarray(law.flatten(params), dtype=np.float64), profile, x):
        pred = np.where(np.isfinite(pred), pred, np.nan)
        lo, hi = np.fmin(lo, np.nanmin(pred, axis=0)), np.fmax(hi, np.nanmax(pred, axis=0))
        used.append(name)
    if not used:
        return None
    return lo, hi, used


#: Most values of a loose parameter at which :func:`carry_loose` computes a band: the ends of its profile range
#: and the values where some row's prediction is smallest or largest.
MAX_PINNED = 8


def _pinned_values(pred: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Indices into ``grid`` worth a band: both ends and, at each row the parameter moves (``pred``: ``(G, m)``),
    its argmin and argmax, the most frequent first, at most :data:`MAX_PINNED` (a row it does not move, where
    nothing repeats, has every value extreme by rounding)."""
    ends = [0, grid.size - 1]
    with np.errstate(all="ignore"):
        p = np.where(np.isfinite(pred), pred, np.nan)
        lo, hi = np.nanmin(p, axis=0), np.nanmax(p, axis=0)
        moves = np.isfinite(lo) & (hi - lo > 1e-12 * np.maximum(1.0, np.abs(hi)))
    if not moves.any():
        return np.array(ends)
    hits = np.concatenate([np.nanargmin(p[:, moves], axis=0), np.nanargmax(p[:, moves], axis=0)])
    idx, count = np.unique(hits, return_counts=True)
    chosen = ends + [int(i) for i in idx[np.argsort(-count, kind="stable")]]
    return np.array(list(dict.fromkeys(chosen))[:MAX_PINNED])


#: Spread (fit space) of what the draws' own values of a parameter do below which the draws are taken not to move
#: it (resamples started at the estimate stay there along a flat direction): its effect is then carried whole.
STILL = 1e-9


def _kept(
    law: Law, draws: np.ndarray, m: np.ndarray, flat0: np.ndarray, j: int, x: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(m, e, c)``: the draws' fit-space predictions ``m`` ``(B, m)`` (non-finite where ``e`` is), what each
    draw's own value of parameter ``j`` does with the others at the estimate (``e_b = f(x; θ̂ with θ_j = θ_j,b)``),
    and per row how much of that the draws' predictions keep, ``c`` in [0, 1]: the least-squares slope of ``m_b`` on
    ``e_b`` (about 1 where the draws spread along the parameter, 0 where their other parameters make up for it), 1
    where the draws do not move it."""
    rows = np.repeat(flat0[None, :], len(draws), axis=0)
    rows[:, j] = draws[:, j]
    e = _fit_space(law, rows, x)
    ok = np.isfinite(m) & np.isfinite(e)
    n = np.maximum(ok.sum(axis=0), 1)
    with np.errstate(all="ignore"):
        de = np.where(ok, e - np.where(ok, e, 0.0).sum(axis=0) / n, 0.0)
        dm = np.where(ok, m - np.where(ok, m, 0.0).sum(axis=0) / n, 0.0)
        var = (de * de).sum(axis=0)
        still = var <= STILL**2 * n
        c = np.where(still, 1.0, np.clip((de * dm).sum(axis=0) / np.where(still, 1.0, var), 0.0, 1.0))
    return np.where(ok, m, np.nan), np.where(ok, e, np.nan), c


def carry_loose(
    result: Any, x: Mapping[str, np.ndarray], lo: np.ndarray, hi: np.ndarray,
    band_at: Callable[[np.ndarray, np.ndarray], Any],
) -> tuple[np.ndarray, np.ndarray, str | None]:  # fmt: skip
    """``(lo, hi, note)``: an interval at the rows ``x`` widened to carry the loose parameters of the fit (module
    docstring), ``note`` saying which parameters and whether the scan bounds the interval (``None``: unchanged).

    For each loose parameter, at the accepted values ``v`` where some row's prediction is extreme
    (:func:`_pinned_values`), ``band_at(point, predictions)`` gives the interval of the fit-space ``predictions``
    ``(B, m)`` about ``point`` (``(lo, hi)`` or ``None``): ``point`` is ``e(v)``, the prediction at ``v`` with the
    others at the estimate, and each draw is moved by ``c (e(v) − e_b)``, the part of its own value's effect it
    keeps replaced by ``v``'s (:func:`_kept`) — or ``e(v)`` alone without draws. The result is the union of those
    and of ``(lo, hi)``. Moving every draw by ``e(v) − ŷ`` instead counts the parameter's spread twice where the
    draws spread along it (once in the draws, once along its range) and makes the ends depend on where the solver
    left it; pinning ``v`` into every draw breaks the draws' trade-offs between parameters (an irreducible loss
    pinned near 0 in draws fitted with it at 0.5)."""
    ident = result.identifiability or {}
    profile = ident.get("profile") or {}
    law = result.law
    names = list(law.flat_names)
    flat0 = np.asarray(law.flatten(result.params), dtype=np.float64)
    table = result.bootstrap_params
    draws = None if table is None or not len(table) else table[names].to_numpy(dtype=np.float64)
    out_lo, out_hi = np.asarray(lo, dtype=np.float64).copy(), np.asarray(hi, dtype=np.float64).copy()
    drawn = None if draws is None else _fit_space(law, draws, x)  # once, whatever the number of loose parameters
    used = []
    for name, j, grid, pred in _scans(law, flat0, profile, x):
        used.append(name)
        kept = None if draws is None or drawn is None else _kept(law, draws, drawn, flat0, j, x)
        for k in _pinned_values(pred, grid):
            at = pred[k]
            got = band_at(at, at[None, :] if kept is None else kept[0] + kept[2] * (at - kept[1]))
            if got is not None:
                out_lo, out_hi = np.fmin(out_lo, got[0]), np.fmax(out_hi, got[1])
    tol = 1e-9 * np.maximum(np.abs(lo), np.abs(hi))  # rounding of the same prediction is not a loose parameter
    out_lo = np.where(out_lo < lo - tol, out_lo, lo)
    out_hi = np.where(out_hi > hi + tol, out_hi, hi)
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
