"""The nested-fit masks and distances of the extrapolation calibration (:mod:`mixlaw.fit.evaluate.calibrate`, split
out of it).

Grouped K-fold over sizes (or runs, or rows), forward cuts along the calibration axis between size clusters, and the
within-run forward cuts of :mod:`mixlaw.fit.evaluate.calib_runs`; the log-distances beyond a fitted range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mixlaw.fit.evaluate.calib_axes import MIN_DISTINCT, AxisGrowth, axis_masks
from mixlaw.fit.problem.data import FitData

__all__ = ["WITHIN_FRACTIONS", "FoldErrors", "within_run_masks"]

#: Shares of every run's rows (along the axis) that the within-run forward cuts fit.
WITHIN_FRACTIONS = (0.5, 0.6, 0.7, 0.8, 0.9)
#: Rows per run (median) for within-run cuts: the kept part of every run must hold a curve, not a point.
WITHIN_MIN_ROWS = 8
#: Folds of the grouped K-fold and forward cuts at most.
N_GROUP_FOLDS = 10
N_CUTS = 8


@dataclass(frozen=True)
class FoldErrors:
    """Out-of-sample errors of the fold fits of one fit (:func:`fold_errors`): one entry per held-out row per fold."""

    e: np.ndarray
    """Signed error, prediction minus observation, in fit space."""
    d: np.ndarray
    """Relative log-distance beyond the fold's fitted range of the axis (0 inside)."""
    split: np.ndarray
    """Index of the fold (among the usable ones) the error comes from."""
    forward: np.ndarray
    """Whether the fold is a forward cut (fit on the axis up to a value, predict beyond)."""
    rows: np.ndarray
    """Row (of the fitted data) each error belongs to."""
    last: np.ndarray
    """Whether the fold leaves out exactly the largest size (cluster) along the axis."""
    span: np.ndarray
    """Log-span ``log(max / min)`` of the axis over the fold's fitted rows (``d · span`` is the distance in e-folds)."""
    sd: np.ndarray
    """The fold fit's own standard error of a new observation at the row (delta method, :func:`_delta_sd`)."""
    axis: str | None
    n_folds: int
    unit: str = "sizes"
    """What the K-fold leaves out: ``sizes``, ``runs`` or ``rows``."""
    groups: np.ndarray | None = None
    """The K-fold group (size cluster, run or row) of each error's row."""
    within: np.ndarray | None = None
    """Whether the fold is a forward cut within every run (fit each run's early part, predict its later part)."""
    d_run: np.ndarray | None = None
    """E-folds of the axis beyond the row's own run's fitted part (within-run cuts; 0 elsewhere)."""
    s2: np.ndarray | None = None
    """The fold fit's residual variance ``Σ r² / (n_fit − p)`` (fit space; NaN without residual dof)."""
    jack: np.ndarray | None = None
    """Grouped-jackknife variance of the K-fold fits' predictions at the error's row, ``(K − 1)/K · Σ_j (p_j −
    p̄)²`` over the ``K`` K-fold fits (fit space; :func:`mixlaw.fit.evaluate.calib_runs.fold_spread`)."""
    dists: np.ndarray | None = None
    """``(errors, A)`` distance of the row beyond the fold's fitted range along each of :attr:`axes` (e-folds for
    positive axes, :mod:`mixlaw.fit.evaluate.calib_axes`)."""
    axes: tuple[AxisGrowth, ...] = ()
    """The axes of the fit (:func:`mixlaw.fit.evaluate.calib_axes.fit_axes`), the primary first."""
    cut: np.ndarray | None = None
    """Name of the axis whose far end the error's fold holds out (``""`` for K-fold and within-run folds)."""
    fitted: np.ndarray | None = None
    """``(folds, n)`` the rows each fold fitted (row ``j`` for :attr:`split` ``j``; the identification check of
    :func:`mixlaw.fit.evaluate.calib_growth.accepts_full_fit`)."""


def within_run_masks(v: np.ndarray, groups: np.ndarray) -> list[np.ndarray]:
    """Fit masks of the within-run forward cuts: per run, the rows whose axis value ``v`` ranks within the first
    ``q`` of that run's rows, for each ``q`` of :data:`WITHIN_FRACTIONS` (none where runs are not curves)."""
    g = np.asarray(groups)
    runs, counts = np.unique(g, return_counts=True)
    if runs.size < 2 or float(np.median(counts)) < WITHIN_MIN_ROWS:
        return []
    rank = np.zeros(len(v))
    for r in runs:
        idx = np.flatnonzero(g == r)
        order = np.argsort(np.argsort(v[idx], kind="stable"), kind="stable")
        rank[idx] = (order + 1) / idx.size
    return [rank <= q for q in WITHIN_FRACTIONS]


def _log_distance(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``log(v / hi)`` above the range, ``log(lo / v)`` below it, 0 inside (and for non-positive values)."""
    with np.errstate(all="ignore"):
        d = np.maximum(np.log(v / hi), np.log(lo / v))
    return np.where(np.isfinite(d), np.maximum(d, 0.0), 0.0)


def _rel_distance(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Log-distance of ``v`` outside ``[lo, hi]`` in units of ``log(hi / lo)`` (0 inside; 0 for a zero span)."""
    span = math.log(hi / lo) if hi > lo > 0 else 0.0
    if span <= 0:
        return np.zeros(len(v))
    with np.errstate(all="ignore"):
        d = np.maximum(np.log(v / hi), np.log(lo / v)) / span
    return np.where(np.isfinite(d), np.maximum(d, 0.0), 0.0)


def _cluster_top(v: np.ndarray, clusters: np.ndarray | None) -> np.ndarray:
    """Every row's axis value replaced by its cluster's largest (``v`` itself without clusters)."""
    if clusters is None:
        return v
    _, inv = np.unique(np.asarray(clusters), return_inverse=True)
    per = np.full(int(inv.max()) + 1, -np.inf)
    np.maximum.at(per, inv, v)
    return per[inv]


def _masks(
    data: FitData, axis: str | None, clusters: np.ndarray | None, min_rows: int, rng: np.random.Generator,
    extra: Sequence[tuple[AxisGrowth, np.ndarray]] = (),
) -> tuple[list[np.ndarray], list[str]]:  # fmt: skip
    """Boolean *fit* masks: grouped K-fold, then forward cuts along ``axis`` (see the module docstring), then the
    forward cuts within every run (:func:`within_run_masks`, where the K-fold is over runs
    that are curves), and each mask's kind (``kfold``, ``forward``, ``within``).

    Forward cuts fall between clusters (sizes): a cluster's axis value is its largest, so a cut never splits the
    points of one model size. The forward masks are in increasing cut order (the last leaves out the largest)."""
    unit, groups = _unit(data, clusters)
    uniq = np.unique(groups)
    kfold: list[np.ndarray] = []
    if uniq.size >= 3:
        k = min(N_GROUP_FOLDS, uniq.size)
        fold_of = rng.permutation(uniq.size) % k
        lookup = dict(zip(uniq.tolist(), fold_of.tolist(), strict=True))
        g_fold = np.array([lookup[g] for g in groups.tolist()])
        kfold = [g_fold != f for f in range(k)]
    forward: list[np.ndarray] = []
    if axis is not None:
        v = data.x_np[axis]
        top = _cluster_top(v, clusters)
        distinct = np.unique(top)
        if distinct.size >= 3:
            first = max(1, (distinct.size - 1) // 2)
            cand = distinct[first:-1]
            idx = np.unique(np.round(np.linspace(0, cand.size - 1, min(N_CUTS, cand.size))).astype(int))
            forward = [top <= c for c in cand[idx]]
    within = within_run_masks(data.x_np[axis], groups) if axis is not None and unit == "runs" else []
    axis_cuts: list[np.ndarray] = []
    axis_kinds: list[str] = []
    for ax, values in extra:
        got = axis_masks(ax, values)
        axis_cuts += got
        axis_kinds += [f"forward:{ax.name}"] * len(got)
    kinds = ["kfold"] * len(kfold) + ["forward"] * len(forward) + ["within"] * len(within) + axis_kinds
    masks: list[np.ndarray] = []
    kept: list[str] = []
    need = min(MIN_DISTINCT, uniq.size) if unit == "sizes" else 0
    for kind, m in zip(kinds, kfold + forward + within + axis_cuts, strict=True):
        if m.sum() < min_rows or not (~m).any() or any(np.array_equal(m, o) for o in masks):
            continue  # too few rows to fit, nothing to predict, or a cut that repeats a fold (the largest size)
        if kind in ("kfold", "forward") and np.unique(groups[m]).size < need:
            continue  # fewer sizes than a power law in size needs: its error is the undetermined size term
        masks.append(m)
        kept.append(kind)
    return masks, kept


def _unit(data: FitData, clusters: np.ndarray | None) -> tuple[str, np.ndarray]:
    """What the K-fold leaves out, and the group of every row."""
    if clusters is not None:
        return "sizes", np.asarray(clusters)
    if data.groups is not None:
        return "runs", np.asarray(data.groups)
    return "rows", np.arange(data.n)
