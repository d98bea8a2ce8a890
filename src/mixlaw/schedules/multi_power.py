"""The multi-power law's compressed LR history (Luo et al. 2025, arXiv:2503.12811), built from a schedule.

The law itself (and the derivation of the bins) is :class:`mixlaw.laws.multi_power.MultiPower`; this module is the
numpy side that turns per-step LRs into the ``mpl_*`` columns, so that :mod:`mixlaw.schedules` never imports a law.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from mixlaw.errors import InputError

__all__ = ["mpl_columns", "multi_power_features", "multi_power_exact", "DEFAULT_BINS", "DEFAULT_EXACT"]

DEFAULT_BINS = 48
DEFAULT_EXACT = 12
_LR_FLOOR = 1e-12  # η^(−γ) of a zero LR: the bracket saturates at 1 instead of producing inf·0


def mpl_columns(n_bins: int = DEFAULT_BINS) -> tuple[str, ...]:
    """The ``3·n_bins`` history columns, in the order the law reads them."""
    w = max(2, len(str(n_bins - 1)))
    return tuple(f"mpl_{kind}_{j:0{w}d}" for kind in ("dlr", "lr", "area") for j in range(n_bins))


def _edges(n_bins: int, n_exact: int, longest: int) -> np.ndarray:
    """Look-back bin edges ``e_0 = 0 < … < e_K`` (bin j holds ``e_j ≤ d < e_{j+1}``) covering ``longest``."""
    if n_bins < 2 or n_exact < 1 or n_exact >= n_bins:
        raise InputError(f"multi_power needs 1 <= n_exact < n_bins, got n_exact={n_exact}, n_bins={n_bins}")
    exact = np.arange(n_exact + 1, dtype=np.float64)
    rest = n_bins - n_exact
    top = max(float(longest), float(n_exact + rest))
    geo = np.geomspace(n_exact, top, rest + 1)[1:]
    edges = np.concatenate([exact, np.ceil(geo)])
    edges = np.maximum.accumulate(edges)
    for i in range(1, edges.size):  # strictly increasing
        if edges[i] <= edges[i - 1]:
            edges[i] = edges[i - 1] + 1
    edges[-1] = max(edges[-1], float(longest))
    return edges.astype(np.int64)


def _decrements(eta: np.ndarray, eta0: float | None, exclude_warmup: int) -> np.ndarray:
    e = eta.copy()
    first = float(eta[0]) if eta0 is None else float(eta0)
    if exclude_warmup:
        e[:exclude_warmup] = eta[exclude_warmup - 1]
        first = float(e[0])
    prev = np.concatenate([[first], e[:-1]])
    return prev - e


def multi_power_features(
    lr: np.ndarray | Sequence[float],
    steps: np.ndarray | Sequence[int],
    *,
    eta0: float | None = None,
    exclude_warmup: int = 0,
    n_bins: int = DEFAULT_BINS,
    n_exact: int | None = None,
    longest: int | None = None,
) -> dict[str, np.ndarray]:
    """History columns of the multi-power law for one run.

    Parameters
    ----------
    lr
        Per-step LRs ``η_1..η_T`` of the run (``Schedule.lrs()``).
    steps
        Logged steps (``1..T``) to build rows for.
    eta0
        LR before the first update (``Schedule.eta0``; default ``η_1``).
    exclude_warmup
        Number of leading warm-up steps whose LR changes are left out of the decrement sum (0, the default,
        keeps them, as the published fits do).
    n_bins, n_exact
        ``K`` bins, the first ``n_exact`` of one step each (default ``min(12, K // 4)``).
    longest
        Longest history the bins must cover (default ``T``); pass the longest run of a table so that every run
        uses the same bin edges.

    Returns
    -------
    dict
        ``mpl_columns(n_bins)`` → ``(n,)`` arrays, plus ``"mpl_s1"`` (S1 with the actual warm-up LRs).
    """
    eta = np.asarray(lr, dtype=np.float64).ravel()
    t = np.asarray(steps)
    T = eta.size
    if t.size and (np.any(t != np.round(t)) or t.min() < 1 or t.max() > T):
        raise InputError(f"multi_power rows need steps in 1..{T}, got {t.min()}..{t.max()}")
    t = t.astype(np.int64)
    d = _decrements(eta, eta0, exclude_warmup)  # d[k-1] = η_{k-1} − η_k for k = 1..T
    k_idx = np.arange(1, T + 1, dtype=np.float64)
    ad = np.abs(d)
    cum_d = np.concatenate([[0.0], np.cumsum(d)])  # cum_d[k] = Σ_{i≤k} d_i
    cum_ad = np.concatenate([[0.0], np.cumsum(ad)])
    cum_kad = np.concatenate([[0.0], np.cumsum(ad * k_idx)])
    s1 = np.concatenate([[0.0], np.cumsum(eta)])  # S1 with the actual (warm-up) LRs

    if n_exact is None:
        n_exact = min(DEFAULT_EXACT, max(1, n_bins // 4))
    edges = _edges(n_bins, n_exact, T if longest is None else max(int(longest), T))
    # bin j of row t covers k in (t − e_{j+1}, t − e_j]  →  cumulative index range (lo, hi]
    hi = np.clip(t[:, None] - edges[None, :-1], 0, T)  # (n, K)
    lo = np.clip(t[:, None] - edges[None, 1:], 0, T)
    dlr = cum_d[hi] - cum_d[lo]
    mass = cum_ad[hi] - cum_ad[lo]
    has = mass > 0
    centre = np.where(has, (cum_kad[hi] - cum_kad[lo]) / np.where(has, mass, 1.0), np.maximum(hi, 1))
    # LR and S_k(t) at the (fractional) centre k̄: S_k(t) = S1(t) − S1(k − 1)
    lr_c = np.interp(centre, k_idx, eta)
    area = s1[t][:, None] - np.interp(centre - 1.0, np.arange(T + 1, dtype=np.float64), s1)
    dlr = np.where(has, dlr, 0.0)
    lr_c = np.where(has, np.maximum(lr_c, _LR_FLOOR), 1.0)
    area = np.where(has, np.maximum(area, 0.0), 1.0)
    cols = mpl_columns(n_bins)
    out: dict[str, np.ndarray] = {"mpl_s1": s1[t]}
    K = n_bins
    for j in range(K):
        out[cols[j]] = dlr[:, j]
        out[cols[K + j]] = lr_c[:, j]
        out[cols[2 * K + j]] = area[:, j]
    return out


def multi_power_exact(
    lr: np.ndarray | Sequence[float],
    steps: np.ndarray | Sequence[int],
    params: Mapping[str, float],
    *,
    eta0: float | None = None,
    exclude_warmup: int = 0,
) -> np.ndarray:
    """Reference O(n·T) evaluation of the multi-power law (numpy), for tests and checks."""
    eta = np.asarray(lr, dtype=np.float64).ravel()
    t = np.asarray(steps, dtype=np.int64)
    d = _decrements(eta, eta0, exclude_warmup)
    s1 = np.concatenate([[0.0], np.cumsum(eta)])
    p = params
    out = np.empty(t.size)
    for i, ti in enumerate(t):
        k = np.arange(1, ti + 1)
        sk = s1[ti] - s1[k - 1]
        g = 1.0 - (p["C"] * np.maximum(eta[k - 1], _LR_FLOOR) ** (-p["gamma"]) * sk + 1.0) ** (-p["beta"])
        out[i] = p["L0"] + p["A"] * s1[ti] ** (-p["alpha"]) - p["B"] * np.sum(d[:ti] * g)
    return out
