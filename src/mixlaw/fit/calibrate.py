"""Prediction intervals calibrated on out-of-sample errors of the fit's own data (the default prediction interval).

Why
---
A bootstrap prediction interval (:mod:`mixlaw.fit.intervals`, method ``bootstrap``) adds the *in-sample* residual
noise to the parameter spread of a resampling scheme. Both parts are wrong for extrapolation, which is what a
scaling law is used for: in-sample residuals do not see the law's misspecification, and the parameter spread of a
row or run bootstrap describes independent points, not a law carried a decade past its largest model. On public
data the two fail in opposite directions (Epoch N > 5e9: 59 % of held-out points inside the 95 % interval; OLMo
≤ 1.3B → 3–13B: 100 % inside, ~6× wider than the errors; ``docs/laws.md``).

What
----
The calibrated interval asks the fit's own data how large an error a prediction of this law makes *out of sample*,
at a given extrapolation distance, by refitting the law on parts of the data and predicting the rest:

- **grouped K-fold** (``K = min(10, groups)``) over the model sizes (the distinct values of the size column) when
  there is one, else over runs (rows without a run column): errors at distance ~0 (interior sizes), the
  out-of-sample noise. Points of one size share that size's deviation from the law (digitised points along one
  curve, runs of one model), so they are left out together;
- **forward chaining** along the calibration *axis* (the law's size input ``n_params`` when it has one, else its
  first strictly positive input — ``mpl_s1`` for the multi-power law, i.e. the step axis): fit on the rows with
  axis ≤ a cut (cuts at up to 8 distinct values from the median of the distinct values up to the second largest),
  predict the rows beyond it.

Distances are *relative to the fitted span* of the axis: ``d = log(axis / max fitted axis) / log(max / min fitted
axis)`` (and the same below the minimum). A law fitted on sizes spanning one decade and carried one decade further
is at ``d = 1`` whatever the decades: the error of a fitted exponent scales with one over the log-span (the lever
arm), so errors of fold fits on narrower spans are commensurate with those of the full fit.

Every fold fit is one problem of a single batched solve warm-started from the point estimate (:func:`refit`).
The out-of-sample error ``e`` (fit space: log for log-space laws) is modelled as ``e ~ N(0, s(d)²)`` with

.. math:: s(d)^2 = \\sigma_0^2 + (\\kappa d)^2,

``σ0`` (noise) and ``κ`` (error growth per e-fold of extrapolation: parameter uncertainty and misspecification
together) by Gaussian maximum likelihood over the pooled fold errors. The interval at inputs ``x`` is
``ŷ(x) · exp(± q · s(d(x)))`` (``ŷ ± q s`` in raw space), ``d(x)`` the relative log-distance of ``x``'s axis
value outside the fitted range (0 inside), and ``q`` the split-conformal quantile of the normalised scores
``|e| / s(d)`` at the requested level (Vovk et al. 2005; Lei et al. 2018: the ``⌈(m+1)·level⌉``-th of ``m``
scores), or the Gaussian quantile when there are too few scores for that level. Heavy-tailed errors (the law's
bias beyond the fitted range) widen ``q``; light-tailed ones narrow it.

Only the fitted rows are used; the held-out points of a validation are never seen. Fold errors include the larger
parameter error of fits on less data, so the interval errs on the wide side where data are few.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from mixlaw.fit.data import FitData
from mixlaw.laws import Law

__all__ = ["Calibration", "calibrate", "calibration_axis"]

#: Folds of the grouped K-fold and forward cuts at most.
N_GROUP_FOLDS = 10
N_CUTS = 8
#: Quantile probabilities at which the normalised scores are kept (the fit JSON stays small).
_PROBS = np.linspace(0.0, 1.0, 201)
#: A fit warns when the refit without its largest axis value misses it by more than this many in-sample residual
#: standard deviations (RMS): the law's error grows beyond the fitted range faster than its noise.
RELIABLE_RATIO = 2.0


def calibration_axis(law: Law, data: FitData, size_input: str = "n_params") -> str | None:
    """The law input the extrapolation distance is measured along (``None`` when no input is strictly positive)."""
    if size_input in data.x_np and (data.x_np[size_input] > 0).all():
        return size_input
    for name in law.inputs:
        v = data.x_np[name]
        if (v > 0).all() and np.unique(v).size > 1:
            return name
    return None


@dataclass(frozen=True)
class Calibration:
    """The out-of-sample error model of one fit (module docstring): ``s(d)² = sigma² + (kappa·d)²``."""

    axis: str | None
    lo: float
    hi: float
    sigma: float
    kappa: float
    score_quantiles: list[float]
    n_scores: int
    n_folds: int
    n_forward: int
    method: str = "calibrated"
    forward_ratio: float = float("nan")
    """RMS error at the largest fitted axis value when a refit leaves it out, over the in-sample residual sd."""
    warnings: list[str] = field(default_factory=list)
    """Notes for the user (e.g. ``forward_ratio`` above :data:`RELIABLE_RATIO`: extrapolation is unreliable)."""

    def distance(self, x: Mapping[str, np.ndarray], m: int) -> np.ndarray:
        """``(m,)`` distance of each row's axis value outside ``[lo, hi]`` in fitted log-spans (0 inside)."""
        if self.axis is None or self.axis not in x:
            return np.zeros(m)
        v = np.asarray(x[self.axis], dtype=np.float64).reshape(-1)
        return _rel_distance(v, self.lo, self.hi)

    def scale(self, d: np.ndarray) -> np.ndarray:
        return np.sqrt(self.sigma**2 + (self.kappa * np.asarray(d, dtype=np.float64)) ** 2)

    def quantile(self, level: float) -> float:
        """The split-conformal ``level`` quantile of the normalised scores (Gaussian when too few scores)."""
        from statistics import NormalDist

        m = self.n_scores
        gauss = NormalDist().inv_cdf((1 + level) / 2)
        rank = math.ceil((m + 1) * level)
        if m < 20 or rank > m:
            return gauss
        return float(np.interp((rank - 1) / max(1, m - 1), _PROBS, self.score_quantiles))

    def halfwidth(self, x: Mapping[str, np.ndarray], m: int, level: float) -> np.ndarray:
        """``(m,)`` half-width of the ``level`` interval in fit space at the rows ``x``."""
        return self.quantile(level) * self.scale(self.distance(x, m))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibration:
        return cls(
            axis=None if d.get("axis") is None else str(d["axis"]),
            lo=float(d["lo"]),
            hi=float(d["hi"]),
            sigma=float(d["sigma"]),
            kappa=float(d["kappa"]),
            score_quantiles=[float(v) for v in d["score_quantiles"]],
            n_scores=int(d["n_scores"]),
            n_folds=int(d["n_folds"]),
            n_forward=int(d["n_forward"]),
            method=str(d.get("method", "calibrated")),
            forward_ratio=float(d.get("forward_ratio", float("nan"))),
            warnings=[str(w) for w in d.get("warnings", [])],
        )


def _rel_distance(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Log-distance of ``v`` outside ``[lo, hi]`` in units of ``log(hi / lo)`` (0 inside; 0 for a zero span)."""
    span = math.log(hi / lo) if hi > lo > 0 else 0.0
    if span <= 0:
        return np.zeros(len(v))
    with np.errstate(all="ignore"):
        d = np.maximum(np.log(v / hi), np.log(lo / v)) / span
    return np.where(np.isfinite(d), np.maximum(d, 0.0), 0.0)


def _masks(
    data: FitData, axis: str | None, clusters: np.ndarray | None, min_rows: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Boolean *fit* masks: grouped K-fold, then forward cuts along ``axis`` (see the module docstring).

    The forward masks are the last ones, in increasing cut order (the last leaves out the largest axis value)."""
    n = data.n
    groups = clusters if clusters is not None else (data.groups if data.groups is not None else np.arange(n))
    uniq = np.unique(groups)
    masks: list[np.ndarray] = []
    if uniq.size >= 3:
        k = min(N_GROUP_FOLDS, uniq.size)
        fold_of = rng.permutation(uniq.size) % k
        lookup = dict(zip(uniq.tolist(), fold_of.tolist(), strict=True))
        g_fold = np.array([lookup[g] for g in groups.tolist()])
        masks += [g_fold != f for f in range(k)]
    if axis is not None:
        v = data.x_np[axis]
        distinct = np.unique(v)
        if distinct.size >= 3:
            first = max(1, (distinct.size - 1) // 2)
            cand = distinct[first:-1]
            idx = np.unique(np.round(np.linspace(0, cand.size - 1, min(N_CUTS, cand.size))).astype(int))
            masks += [v <= c for c in cand[idx]]
    return [m for m in masks if m.sum() >= min_rows and (~m).any()]


def _ml_kappa(e: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    """Gaussian ML of ``(sigma, kappa)`` in ``e ~ N(0, sigma² + kappa² d²)`` (grid over kappa, sigma profiled)."""
    e2 = e * e
    far = d > 0
    base = float(np.sqrt(np.mean(e2[~far]))) if (~far).any() else float(np.sqrt(np.mean(e2)))
    base = max(base, 1e-12)
    if not far.any():
        return base, 0.0
    scale = float(np.sqrt(np.mean(e2))) / max(float(np.mean(d[far])), 1e-12)
    best = (np.inf, base, 0.0)
    for sig in base * np.geomspace(0.25, 4.0, 41):
        for kap in np.concatenate([[0.0], scale * np.geomspace(1e-3, 30.0, 121)]):
            s2 = sig**2 + (kap * d) ** 2
            nll = float(np.sum(np.log(s2) + e2 / s2))
            if nll < best[0]:
                best = (nll, float(sig), float(kap))
    return best[1], best[2]


def calibrate(
    law: Law,
    data: FitData,
    params: Mapping[str, Any],
    seeds: np.ndarray,
    *,
    size_input: str = "n_params",
    clusters: np.ndarray | None = None,
    rng: np.random.Generator,
    **solver: Any,
) -> Calibration | None:
    """Fit the out-of-sample error model of a fit (module docstring); ``None`` when no fold can be formed.

    ``seeds`` are internal starts (the point estimate first); ``clusters`` one integer label per row (the
    factorised size column: the groups of the K-fold; runs without it); ``solver`` is passed to
    :func:`mixlaw.fit.bootstrap.refit` (``loss``, ``delta``, ``max_iter``, ``ftol``, ``xtol``).
    """
    from mixlaw.fit.bootstrap import refit
    from mixlaw.fit.intervals import residual_sd

    axis = calibration_axis(law, data, size_input)
    masks = _masks(data, axis, clusters, min_rows=max(law.n_internal, 2), rng=rng)
    if not masks:
        return None
    W = np.stack(masks).astype(np.float64)
    fold_params, ok, _, _ = refit(law, data.x, data.y, W, np.asarray(seeds, dtype=np.float64), **solver)
    from mixlaw.fit.intervals import draw_predictions

    with torch.no_grad():
        pred = draw_predictions(law, fold_params[ok], data.x_np)  # (folds, n) fit space
    y = np.log(data.y) if law.fit_space == "log" else data.y
    errs, dists = [], []
    n_forward = 0
    v = data.x_np[axis] if axis is not None else None
    for p, m in zip(pred, W[ok].astype(bool), strict=True):
        held = ~m
        e = p[held] - y[held]
        if v is not None:
            d = _rel_distance(v[held], float(v[m].min()), float(v[m].max()))
        else:
            d = np.zeros(held.sum())
        good = np.isfinite(e)
        errs.append(e[good])
        dists.append(d[good])
        n_forward += int((d[good] > 0).any())
    if not errs or sum(len(e) for e in errs) == 0:
        return None
    e_all, d_all = np.concatenate(errs), np.concatenate(dists)
    sigma, kappa = _ml_kappa(e_all, d_all)
    last = _last_forward(errs, dists, W[ok].astype(bool), v)
    sd = residual_sd(law, data, params)
    ratio = float("nan") if last is None or not sd else last / sd
    notes = []
    if np.isfinite(ratio) and ratio > RELIABLE_RATIO:
        notes.append(
            f"the out-of-sample error at the largest fitted {axis} (refit without it) is {ratio:.1f}x the in-sample "
            f"residual: intervals for extrapolation in {axis} are unreliable"
        )
    scores = np.abs(e_all) / np.sqrt(sigma**2 + (kappa * d_all) ** 2)
    lo = float(v.min()) if v is not None else float("nan")
    hi = float(v.max()) if v is not None else float("nan")
    return Calibration(
        axis=axis,
        lo=lo,
        hi=hi,
        sigma=sigma,
        kappa=kappa,
        score_quantiles=[float(q) for q in np.quantile(scores, _PROBS)],
        n_scores=int(scores.size),
        n_folds=int(ok.sum()),
        n_forward=n_forward,
        forward_ratio=ratio,
        warnings=notes,
    )


def _last_forward(
    errs: list[np.ndarray], dists: list[np.ndarray], masks: np.ndarray, v: np.ndarray | None
) -> float | None:
    """RMS error of the forward fold that leaves out only the largest axis value (``None`` without one)."""
    if v is None:
        return None
    top = float(v.max())
    for e, d, m in zip(errs, dists, masks, strict=True):
        held = ~m
        if e.size and (d > 0).any() and np.all(v[held] == top) and np.all(v[m] < top):
            return float(np.sqrt(np.mean(e[d > 0] ** 2)))
    return None
