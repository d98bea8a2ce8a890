"""How bootstrap resamples are drawn: the schemes, their targets and multiplicities (refitting and judging them is
:mod:`mixlaw.fit.uncertainty.bootstrap`, whose docstring describes every scheme), and when an interval built from them
is weak.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mixlaw.errors import InputError
from mixlaw.fit.uncertainty.from_draws import LOST_MAX, interval_health

if TYPE_CHECKING:
    from mixlaw.fit.problem.data import FitData
    from mixlaw.laws import Law

__all__ = [
    "LOST_MAX",
    "SCHEMES",
    "SCHEME_CHOICES",
    "WEBB",
    "Scheme",
    "draw_resamples",
    "interval_status",
    "resample_targets",
    "resample_weights",
    "resolve_scheme",
    "single_row_runs",
    "wild_targets",
]

Scheme = Literal["auto", "runs", "rows", "residuals", "parametric", "sizes", "wild"]
SCHEMES: tuple[str, ...] = ("runs", "rows", "residuals", "parametric", "sizes", "wild")
"""The resampling schemes that run (``"auto"`` resolves to one of them, :func:`resolve_scheme`)."""
SCHEME_CHOICES: tuple[str, ...] = ("auto", *SCHEMES)
"""What a user may ask for."""


def interval_status(n_failed: int, n_resamples: int) -> str:
    """``"ok"``, ``"weak: …"`` (more than :data:`LOST_MAX` of the resamples unusable) or ``"none"`` (no bootstrap)."""
    health = interval_health(n_failed, n_resamples)
    if health == "none":
        return "none"
    if health == "weak":
        return (
            f"weak: {n_failed} of {n_resamples} resamples unusable (> {LOST_MAX:.0%}); the intervals describe the "
            f"{n_resamples - n_failed} usable ones"
        )
    return "ok"


#: Webb's six-point weights (Webb, *Canadian Journal of Economics*, 2023): mean 0, variance 1, and with few runs more
#: distinct resamples than Rademacher signs (6^k against 2^k: 216 against 8 for three runs).
WEBB = np.array([-math.sqrt(1.5), -1.0, -math.sqrt(0.5), math.sqrt(0.5), 1.0, math.sqrt(1.5)])


def wild_targets(
    fitted: np.ndarray, residuals: np.ndarray, groups: np.ndarray | None, B: int, rng: np.random.Generator
) -> np.ndarray:
    """``(B, n)`` targets of the wild cluster bootstrap: ``fitted + v_g · residuals``, one weight ``v_g`` from
    :data:`WEBB` per run and resample (every row its own run when ``groups`` is ``None``).

    The design is kept (every run, every row), a run's residuals keep their shape along the run and move together,
    so no resample loses a run and none can run off to where its rows cannot identify the law — the failure of
    resampling few clusters whole (Cameron, Gelbach & Miller 2008, *Rev. Econ. Stat.* 90: 414, who recommend the
    wild cluster bootstrap there)."""
    n = len(fitted)
    g = np.arange(n) if groups is None else np.asarray(groups)
    v = rng.choice(WEBB, size=(B, int(g.max()) + 1 if n else 0))[:, g]
    return fitted[None, :] + v * residuals[None, :]


def single_row_runs(groups: np.ndarray | None, n: int) -> bool:
    """Whether no run holds two rows (``groups`` ``None``: every row is its own run)."""
    return groups is None or np.unique(np.asarray(groups)).size == n


def resolve_scheme(scheme: str, data: FitData, *, has_params: bool = True) -> str:
    """The scheme that runs for ``scheme`` on ``data``: ``"auto"`` is ``"runs"`` where some run has several rows,
    else ``"residuals"`` (pooled: a fixed design, :mod:`mixlaw.fit.uncertainty.bootstrap`); ``"runs"`` without the point
    estimate."""
    if scheme != "auto":
        return scheme
    return "residuals" if has_params and data.n > 1 and single_row_runs(data.groups, data.n) else "runs"


def resample_weights(groups: np.ndarray | None, n: int, B: int, rng: np.random.Generator) -> np.ndarray:
    """``(B, n)`` multiplicities of a bootstrap over groups (runs), or over rows when ``groups`` is ``None``."""
    g = np.arange(n) if groups is None else np.asarray(groups)
    G = int(g.max()) + 1
    draws = rng.integers(0, G, size=(B, G))
    counts = np.stack([np.bincount(d, minlength=G) for d in draws]) if B else np.zeros((0, G), dtype=np.int64)
    return counts[:, g].astype(np.float64)


def resample_targets(
    fitted: np.ndarray,
    residuals: np.ndarray,
    groups: np.ndarray | None,
    B: int,
    rng: np.random.Generator,
    n_params: int = 0,
) -> np.ndarray:
    """``(B, n)`` targets ``fitted + residuals`` with the residuals resampled with replacement within each group.

    Where no group holds two rows (``groups`` is ``None``, or every run is one row: final checkpoints of a ladder,
    digitised points) a within-group draw would return every row its own residual and the bootstrap would have no
    spread at all; the residuals are then pooled — the classical fixed-design residual bootstrap (Davison & Hinkley
    1997, Algorithm 6.1): centred, scaled by ``sqrt(n / (n − p))`` (``p = n_params``) so that their variance is the
    unbiased residual variance, and drawn from all rows.
    """
    n = len(fitted)
    g = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups)
    if n > 1 and single_row_runs(groups, n):  # singleton groups: pool (docstring)
        g = np.zeros(n, dtype=np.int64)
        scale = math.sqrt(n / (n - n_params)) if n > n_params else 1.0
        residuals = (residuals - residuals.mean()) * scale
    idx = np.empty((B, n), dtype=np.int64)
    for grp in np.unique(g):
        rows = np.flatnonzero(g == grp)
        idx[:, rows] = rows[rng.integers(0, rows.size, size=(B, rows.size))]
    return fitted[None, :] + residuals[idx]


def draw_resamples(
    law: Law,
    data: FitData,
    scheme: str,
    n: int,
    rng: np.random.Generator,
    *,
    params: Mapping[str, Any] | None = None,
    clusters: np.ndarray | None = None,
    cluster_unit: str = "n_params",
) -> tuple[np.ndarray, np.ndarray | None, str]:
    """``(Y, W, unit)`` of ``n`` resamples under a resolved ``scheme`` (:func:`resolve_scheme`): targets (``(n_rows,)``
    shared, or ``(n, n_rows)``), point multiplicities (``(n, n_rows)``, ``None`` when every row is kept) and what was
    resampled. ``params`` (the point estimate) is needed by ``residuals``, ``parametric`` and ``wild``."""
    Y: np.ndarray
    W: np.ndarray | None
    if scheme == "parametric" and params is not None:
        from mixlaw.fit.uncertainty.fitted import residual_sd

        fitted = np.asarray(law.evaluate(data.x_np, params), dtype=np.float64).reshape(-1)
        sd = residual_sd(law, data, params) or 0.0
        z = sd * rng.standard_normal((n, data.n))
        Y = fitted[None, :] * np.exp(z) if law.fit_space == "log" else fitted[None, :] + z
        W = None
        unit = "gaussian noise"
    elif scheme == "wild" and params is not None:
        fitted = np.asarray(law.evaluate(data.x_np, params), dtype=np.float64).reshape(-1)
        if law.fit_space == "log":
            Y = np.exp(wild_targets(np.log(fitted), np.log(data.y) - np.log(fitted), data.groups, n, rng))
        else:
            Y = wild_targets(fitted, data.y - fitted, data.groups, n, rng)
        W = None
        unit = data.group_unit
    elif scheme == "sizes":
        if clusters is None:
            raise InputError(f"expected a size column '{cluster_unit}' for --resample sizes", column=cluster_unit)
        W = resample_weights(np.asarray(clusters), data.n, n, rng)
        Y = data.y
        unit = cluster_unit
    elif scheme == "residuals" and params is not None:
        fitted = np.asarray(law.evaluate(data.x_np, params), dtype=np.float64).reshape(-1)
        if law.fit_space == "log":  # resample multiplicative residuals: log y = log ŷ + r
            r = np.log(data.y) - np.log(fitted)
            Y = np.exp(resample_targets(np.log(fitted), r, data.groups, n, rng, law.n_internal))
        else:
            Y = resample_targets(fitted, data.y - fitted, data.groups, n, rng, law.n_internal)
        W = None
        pooled = single_row_runs(data.groups, data.n)
        unit = "residuals (pooled)" if pooled else f"residuals within {data.group_unit}"
    else:
        groups = data.groups if scheme == "runs" else None
        W = resample_weights(groups, data.n, n, rng)
        Y = data.y
        unit = data.group_unit if scheme == "runs" else "row"
    return Y, W, unit
