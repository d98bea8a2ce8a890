"""Intervals on predictions: the parameter uncertainty of a fit propagated through its law, plus residual noise.

For a fit with bootstrap draws :math:`\\hat\\theta_b` (:mod:`mixlaw.fit.uncertainty.bootstrap`), the prediction at
inputs
:math:`x` in the law's fit space (``log`` for log-space laws) is :math:`m_b(x) = g(f(x; \\hat\\theta_b))` with
:math:`g = \\log` or the identity.

- ``confidence`` interval (where the law's *mean* curve lies): the percentile interval of :math:`m_b(x)` over the
  usable draws, mapped back with :math:`g^{-1}` (Efron & Tibshirani 1993, §13.3).
- ``prediction`` interval (where a *new observation* falls): the percentile interval of
  :math:`m_b(x) + \\hat\\sigma z_{bj}` with :math:`z_{bj} \\sim t_{n-p}` (Student-t with the fit's residual degrees
  of freedom, seeded: the uncertainty of :math:`\\hat\\sigma` itself, as in the classical regression interval),
  :math:`\\hat\\sigma` the residual standard deviation of the fit in its fit space,
  :math:`\\sqrt{\\sum_i r_i^2 / (n - p)}` (:func:`residual_sd`) — the bootstrap prediction interval of Davison &
  Hinkley (1997, §6.3).

Both are percentile intervals of a bootstrap distribution: they are as honest as the resampling scheme is for the
question (resample model sizes, ``sizes``, when predicting a larger model; see ``docs/laws.md``).

Prediction intervals have two methods (``method``): ``calibrated`` — the *extrapolation-calibrated* interval of
:mod:`mixlaw.fit.evaluate.calibrate`: the bootstrap prediction interval widened by a factor that nested refits on
parts of
the fitted data (K-fold over sizes, forward cuts along the size axis) measure, growing with the query's distance
beyond the fitted range, plus, for runs that are curves, a new-run term (:mod:`mixlaw.fit.evaluate.calib_runs`:
leave-runs-out
and within-run forward cuts) — and ``bootstrap``, the percentile interval above. ``auto`` (the
default) is ``calibrated`` wherever the fit carries its calibration (every user fit with a bootstrap, and the fold
fits of ``validate``): a prediction interval is about a *new* observation — a larger model, a later step, a new
run — and the calibration measures how far such predictions miss (inside the fitted range it widens the bootstrap
interval only by what a new size left out of the fit shows, ``max(1, c)``); a fit without calibration gets
``bootstrap``. The measured coverage of each method on public held-out data is in ``docs/coverage.md``
(``benchmarks/coverage.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from mixlaw.errors import InputError
from mixlaw.fit.uncertainty.fitted import Fitted, draw_predictions, inputs_of, residual_sd
from mixlaw.laws import Law

__all__ = [
    "INTERVALS", "METHODS", "Band", "band", "draw_predictions", "inputs_of", "quantiles", "residual_sd",
]  # fmt: skip

Interval = Literal["confidence", "prediction"]
INTERVALS: tuple[str, ...] = ("confidence", "prediction")
Method = Literal["auto", "calibrated", "bootstrap"]
METHODS: tuple[str, ...] = ("auto", "calibrated", "bootstrap")
#: Noise draws per prediction interval (spread over the bootstrap draws).
N_NOISE = 4000


@dataclass(frozen=True)
class Band:
    """Lower and upper ends (natural target units) of one interval per prediction, and how it was built."""

    lo: np.ndarray
    hi: np.ndarray
    level: float
    kind: str
    n_draws: int
    n_failed: int
    n_resamples: int
    method: str = "bootstrap"
    """``bootstrap`` (percentile interval of the draws) or ``calibrated`` (:mod:`mixlaw.fit.evaluate.calibrate`)."""
    calibrated: np.ndarray | None = None
    """``(m,)`` bool: the rows whose interval is extrapolation-calibrated (``None``: every row by ``method``)."""
    calibration: str | None = None
    """One line on the calibration behind the calibrated rows (nested fits, noise, growth)."""
    note: str | None = None
    """What changed the ends after the method: loose parameters carried (:mod:`mixlaw.fit.uncertainty.profile`), the
    law's
    output range (``None``: nothing)."""


def quantiles(
    law: Law,
    draws: np.ndarray,
    x: Mapping[str, np.ndarray],
    *,
    level: float,
    kind: str,
    sd: float,
    seed: int = 0,
    dof: int | None = None,
    noise: dict[tuple[Any, ...], np.ndarray] | None = None,
) -> np.ndarray | None:
    """``(2, m)`` lower/upper interval ends in natural target units from ``(B, F)`` flat draws (module docstring).

    ``dof`` (the residual degrees of freedom ``n − p`` of the fit): the noise of a prediction interval is
    ``σ̂ · t_dof`` instead of ``σ̂ · N(0, 1)``, for the uncertainty of ``σ̂`` itself (with 4 points and 3 parameters
    the 95 % noise quantile is 12.7 σ̂, not 1.96 σ̂). ``None`` when no draw gives a finite prediction at every row.
    ``noise``: a cache of the seeded noise draws by shape, for several intervals at the same rows (the same draws
    as without it)."""
    return quantiles_of(
        law, draw_predictions(law, draws, x), level=level, kind=kind, sd=sd, seed=seed, dof=dof, noise=noise
    )


def quantiles_of(
    law: Law, m: np.ndarray, *, level: float, kind: str, sd: float, seed: int = 0, dof: int | None = None,
    noise: dict[tuple[Any, ...], np.ndarray] | None = None,
) -> np.ndarray | None:  # fmt: skip
    """:func:`quantiles` from ``(B, m)`` fit-space predictions of the draws instead of the draws themselves."""
    m = m[np.isfinite(m).all(axis=1)]
    if len(m) == 0:
        return None
    if kind == "prediction":
        reps = max(1, -(-N_NOISE // len(m)))
        shape = (len(m) * reps, m.shape[1])
        key = (shape, seed, dof)
        z = None if noise is None else noise.get(key)
        if z is None:
            rng = np.random.default_rng(seed)
            z = rng.standard_t(dof, shape) if dof is not None and dof > 0 else rng.standard_normal(shape)
            if noise is not None:
                noise[key] = z
        drawn = (sd * z).reshape(len(m), reps, m.shape[1])  # each draw's row repeated reps times, without a copy
        drawn += m[:, None, :]
        q = np.quantile(drawn.reshape(shape), [(1 - level) / 2, (1 + level) / 2], axis=0, overwrite_input=True)
    else:
        q = np.quantile(m, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return np.exp(q) if law.fit_space == "log" else q


def band(
    result: Fitted,
    x: Mapping[str, np.ndarray],
    *,
    level: float = 0.95,
    kind: Interval = "confidence",
    seed: int = 0,
    method: Method = "auto",
) -> Band | None:
    """The ``level`` interval of ``kind`` at the input rows ``x`` (:func:`_band`), then carrying the parameters the
    data do not pin down and clipped to the law's output range (:mod:`mixlaw.fit.uncertainty.profile`;
    :attr:`Band.note`)."""
    noise: dict[tuple[Any, ...], np.ndarray] = {}  # the same seeded noise for the base and the carried intervals
    b = _band(result, x, level=level, kind=kind, seed=seed, method=method, noise=noise)
    if b is None:
        return None
    from dataclasses import replace

    from mixlaw.fit.uncertainty.profile import carry_loose, clip_to_range

    law = result.law
    widen = kind == "prediction" and (method == "calibrated" or (method == "auto" and result.calibration is not None))

    def at(point: np.ndarray, preds: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        q = quantiles_of(
            law, preds, level=level, kind=kind, sd=result.residual_sd or 0.0, seed=seed,
            dof=result.n_points - law.n_internal, noise=noise,
        )  # fmt: skip
        if q is None or not widen:
            return None if q is None else (q[0], q[1])
        natural = np.exp(point) if law.fit_space == "log" else point
        return _widen(result, x, level, natural, q[0], q[1], len(preds) > 1)[:2]

    lo, hi, loose = carry_loose(result, x, b.lo, b.hi, at)
    lo, hi, clipped = clip_to_range(result.law, lo, hi)
    notes = [n for n in (b.note, loose, clipped) if n]
    return b if not (loose or clipped) else replace(b, lo=lo, hi=hi, note="; ".join(notes))


def _band(
    result: Fitted,
    x: Mapping[str, np.ndarray],
    *,
    level: float = 0.95,
    kind: Interval = "confidence",
    seed: int = 0,
    method: Method = "auto",
    noise: dict[tuple[Any, ...], np.ndarray] | None = None,
) -> Band | None:
    """The ``level`` interval of ``kind`` at the input rows ``x`` (law input names), or ``None`` without draws.

    ``method`` (prediction intervals only): ``auto`` (``calibrated`` when the fit carries its calibration, else
    ``bootstrap``), ``calibrated`` or ``bootstrap`` (module docstring). Raises
    :class:`~mixlaw.errors.InputError`
    for a level outside (0, 1), an unknown kind or method, a calibrated interval from a fit without calibration,
    or a bootstrap prediction interval from a fit saved without its residual noise.
    """
    if not 0 < level < 1:
        raise InputError(f"expected a level in (0, 1), got {level}", column="level")
    if kind not in INTERVALS:
        raise InputError(f"expected interval 'confidence' or 'prediction', got {kind!r}", column="interval")
    if method not in METHODS:
        raise InputError(f"expected method {', '.join(METHODS)}, got {method!r}", column="method")
    draws = result.bootstrap_params
    law = result.law
    if kind == "prediction" and method == "calibrated":
        if result.calibration is None:
            raise InputError("expected a fit with its calibration for --method calibrated: refit with --bootstrap N")
        return _calibrated(result, x, level, seed, noise)
    if kind == "prediction" and method == "auto" and result.calibration is not None:
        return _calibrated(result, x, level, seed, noise)
    if draws is None or len(draws) == 0:
        return None
    if kind == "prediction" and result.residual_sd is None:
        raise InputError("expected a fit with its residual noise for --interval prediction: refit and save it")
    q = quantiles(
        law, draws[list(law.flat_names)].to_numpy(dtype=np.float64), x, level=level, kind=kind,
        sd=result.residual_sd or 0.0, seed=seed, dof=result.n_points - law.n_internal, noise=noise,
    )  # fmt: skip
    if q is None:
        return None
    return Band(
        lo=q[0],
        hi=q[1],
        level=level,
        kind=kind,
        n_draws=int(len(draws)),
        n_failed=result.n_failed_resamples,
        n_resamples=result.n_bootstrap,
    )


def _calibrated(
    result: Fitted, x: Mapping[str, np.ndarray], level: float, seed: int = 0,
    noise: dict[tuple[Any, ...], np.ndarray] | None = None,
) -> Band:  # fmt: skip
    """The extrapolation-calibrated prediction interval (:mod:`mixlaw.fit.evaluate.calibrate`) at the rows ``x``: the
    base
    interval widened about its centre (in fit space) by the calibration's factor at each row's distance."""
    law = result.law
    pred = np.asarray(law.evaluate(dict(x), result.params), dtype=np.float64).reshape(-1)
    base = _band(result, x, level=level, kind="prediction", seed=seed, method="bootstrap", noise=noise)
    if base is not None:
        lo, hi = base.lo, base.hi
    else:  # no draws: the classical interval of the residual noise alone, ŷ ± t(n − p) σ̂ in fit space
        from scipy.stats import t

        dof = max(1, result.n_points - law.n_internal)
        h = float(t.ppf((1 + level) / 2, dof)) * float(result.residual_sd or 0.0)
        lo, hi = (pred * np.exp(-h), pred * np.exp(h)) if law.fit_space == "log" else (pred - h, pred + h)
    lo, hi, cal, dist = _widen(result, x, level, pred, lo, hi, base is not None)
    n_draws = 0 if result.bootstrap_params is None else int(len(result.bootstrap_params))
    return Band(
        lo=lo, hi=hi, level=level, kind="prediction", n_draws=n_draws, n_failed=result.n_failed_resamples,
        n_resamples=result.n_bootstrap, method="calibrated", calibrated=np.ones(len(pred), dtype=bool),
        calibration=f"{cal.summary()}; {_applied(cal, dist, cal.distances(x, len(pred)))}",
    )  # fmt: skip


def _widen(
    result: Fitted, x: Mapping[str, np.ndarray], level: float, pred: np.ndarray, lo: np.ndarray, hi: np.ndarray,
    drawn: bool = True,
) -> tuple[np.ndarray, np.ndarray, Any, np.ndarray]:  # fmt: skip
    """``(lo, hi, calibration, distance)``: the base interval ``(lo, hi)`` about the point ``pred`` (natural units)
    widened by the fit's calibration (:func:`_calibrated`); ``drawn``: the base interval is of bootstrap draws."""
    from mixlaw.fit.evaluate.calibrate import Calibration

    cal = Calibration.from_dict(result.calibration or {})
    law = result.law
    dist = cal.distance(x, len(pred))
    f = cal.factor(dist)
    # new-run term (fit.calib_runs), in quadrature; a base bootstrap over the same runs (drawn whole, or their
    # residual vectors reweighted by the wild cluster bootstrap) carries the full fit's parameter error over runs
    # (the jackknife variance), which is not counted twice
    over_runs = drawn and cal.unit == "runs" and result.settings.get("bootstrap_scheme") in ("runs", "wild")
    r = cal.run_half(level, cal.run_distance(x, len(pred)), carried=cal.fold_var if over_runs else 0.0)
    # the other axes' extrapolation error (fit.calib_axes: tokens per parameter, epochs, compute, ...), in quadrature
    r = np.sqrt(r * r + cal.axis_half(level, x, len(pred)) ** 2)

    def side(h: np.ndarray) -> np.ndarray:  # the new run's and other axes' terms, about the point: never inside
        return np.sqrt(np.maximum(h, 0.0) ** 2 + r * r)

    with np.errstate(all="ignore"):  # widened about the interval's centre in fit space (log for log-space laws)
        if law.fit_space == "log":
            c = np.sqrt(lo * hi)
            lo, hi = c * (lo / c) ** f, c * (hi / c) ** f
            lo = np.minimum(lo, pred * np.exp(-side(np.log(pred / lo))))
            hi = np.maximum(hi, pred * np.exp(side(np.log(hi / pred))))
        else:
            c = (lo + hi) / 2
            lo, hi = c - f * (c - lo), c + f * (hi - c)
            lo, hi = np.minimum(lo, pred - side(pred - lo)), np.maximum(hi, pred + side(hi - pred))
    return lo, hi, cal, dist


def _applied(cal: Any, dist: np.ndarray, dists: np.ndarray | None = None) -> str:
    """Which terms of the calibration these rows use: what the prediction extrapolates (``dist``: e-folds beyond the
    fitted range of the calibration axis; ``dists``: ``(m, A)`` beyond each of the calibration's axes)."""
    beyond = int((dist > 0).sum())
    far = float(dist.max(initial=0.0))
    inside = f"all {dist.size} rows inside the fitted {cal.axis} range"
    outside = f"{beyond} of {dist.size} rows beyond the fitted {cal.axis} range (up to {far:.2f} e-folds)"
    parts = [outside if beyond else inside]
    for a, d in zip(cal.axes[1:], [] if dists is None else dists.T[1:], strict=False):
        if d.max(initial=0.0) > 0:
            unit = "e-folds" if a.kind == "log" else "of a share" if a.kind == "share" else "spans"
            parts.append(f"{int((d > 0).sum())} beyond the fitted {a.name} range (up to {d.max():.2f} {unit})")
    if cal.run_dof > 0:
        parts.append("every row as a new run (new-run term)")
    return ", ".join(parts)
