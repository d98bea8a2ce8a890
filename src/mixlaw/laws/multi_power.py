"""Multi-power law (Luo et al., "A Multi-Power Law for Loss Curve Prediction Across Learning Rate Schedules",
arXiv:2503.12811, ICLR 2025).

.. math::
    L(t) = L_0 + A\\,S_1(t)^{-\\alpha}
           - B \\sum_{k=1}^{t} (\\eta_{k-1} - \\eta_k)\\,
             \\bigl[1 - (C\\,\\eta_k^{-\\gamma} S_k(t) + 1)^{-\\beta}\\bigr],
    \\qquad S_k(t) = \\sum_{\\tau=k}^{t} \\eta_\\tau

``S1`` includes the warm-up LRs and the decrement sum runs over every step from ``η_0`` (the LR before the
first update, 0 for a warm-up from zero), so warm-up *increments* enter it with a negative sign — the
``"raw"`` warm-up convention of :mod:`mixlaw.schedules`. This is what the published parameters assume: with
the warm-up excluded they mispredict every MultiPowerLaw curve by ≈ +0.11 nats (``B·η_peak·[…] ≈ 364·3e-4``).

Inputs: how the LR history enters a pure vectorised law
-------------------------------------------------------
The loss-drop term needs the whole LR history of each point, and its parameters (``C, β, γ``) sit inside the
sum, so it cannot be reduced to fixed areas. Passing a padded ``(n, T)`` LR array would cost ``S·n·T`` per
evaluation (10⁸ and more for 72k-step curves) and break the ``(n,)`` input contract. Instead every row
carries a
**compressed history**: the decrements before the row's step are grouped into ``K`` bins of look-back distance
``d = t − k`` — one step each for the last ``n_exact`` steps (where the bracket changes fastest), then
geometrically wider bins up to the longest history — and each bin is represented by its summed decrement
``dlr_j = Σ (η_{k−1} − η_k)``, the LR ``lr_j`` and the area ``area_j = S_k(t)`` at its |decrement|-weighted
centre. The law is then ``… − B Σ_j dlr_j [1 − (C lr_j^(−γ) area_j + 1)^(−β)]``: exact for step changes and
for the last ``n_exact`` steps, a midpoint quadrature elsewhere (on the MultiPowerLaw curves the published
parameters give the same predictions as the exact sum to < 3e-4 nats with the defaults; see
``tests/test_cpt_laws.py``). The ``3·K`` columns are ``mpl_dlr_<j>``, ``mpl_lr_<j>``, ``mpl_area_<j>``
(``j = 00..K−1``), built by :func:`multi_power_features` (or
:func:`mixlaw.schedules.add_schedule_features` with ``multi_power_bins=K``).
Every input stays ``(n,)`` and ``predict`` is one broadcast over ``(S, n, K)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import Law, ParamSpec, Tensor, register
from mixlaw.laws.lr_annealing import safe_log

__all__ = [
    "MultiPower",
    "multi_power_features",
    "multi_power_exact",
    "mpl_columns",
    "PUBLISHED_MPL",
    "DEFAULT_BINS",
    "DEFAULT_EXACT",
]

DEFAULT_BINS = 48
DEFAULT_EXACT = 12
_LR_FLOOR = 1e-12  # η^(−γ) of a zero LR: the bracket saturates at 1 instead of producing inf·0

# Published "best parameters" (README of thu-yao-01-luo/MultiPowerLaw; laws.md §4.5).
PUBLISHED_MPL: dict[str, dict[str, float]] = {
    "25M": {
        "L0": 3.04045406,
        "A": 0.52468604,
        "alpha": 0.50786857,
        "B": 363.78751622,
        "C": 2.06560812,
        "beta": 0.58279013,
        "gamma": 0.64142257,
    },
    "100M": {
        "L0": 2.6514477,
        "A": 0.60115152,
        "alpha": 0.45295811,
        "B": 437.9464276,
        "C": 2.13245612,
        "beta": 0.59785199,
        "gamma": 0.65523644,
    },
    "400M": {
        "L0": 2.37474466,
        "A": 0.65421216,
        "alpha": 0.42878731,
        "B": 523.42464371,
        "C": 2.02462735,
        "beta": 0.59350493,
        "gamma": 0.63472457,
    },
}


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


@register
class MultiPower(Law):
    """Multi-power law of Luo et al. 2025 (arXiv:2503.12811) on compressed per-row LR histories.

    Option ``n_bins`` (default 48) sets the history width; the feature columns must be built with the same
    value. ``example_params`` are the published 25M parameters.
    """

    name = "multi_power"
    inputs = ("mpl_s1", *mpl_columns(DEFAULT_BINS))
    param_specs = (
        ParamSpec("L0", 0.0, np.inf, description="loss floor (nats/token)"),
        ParamSpec("A", 0.0, np.inf, description="forward-area coefficient"),
        ParamSpec("alpha", 0.0, np.inf, description="forward-area exponent"),
        ParamSpec("B", 0.0, np.inf, description="loss-drop amplitude (per unit LR decrement)"),
        ParamSpec("C", 0.0, np.inf, description="loss-drop rate"),
        ParamSpec("beta", 0.0, np.inf, description="loss-drop exponent"),
        ParamSpec("gamma", 0.0, np.inf, description="LR exponent of the loss-drop rate"),
    )
    example_params = dict(PUBLISHED_MPL["25M"])
    formula = "L = L0 + A*S1^(-alpha) - B*sum_k (eta_{k-1}-eta_k)*(1-(C*eta_k^(-gamma)*S_k(t)+1)^(-beta))"
    citation = "Luo et al. 2025, arXiv:2503.12811 (ICLR 2025)"

    def __init__(self, *, n_bins: int = DEFAULT_BINS) -> None:
        if not isinstance(n_bins, int) or n_bins < 2:
            raise InputError(f"multi_power n_bins must be an integer >= 2, got {n_bins!r}")
        self.options: dict[str, Any] = {"n_bins": n_bins}
        self.inputs = ("mpl_s1", *mpl_columns(n_bins))  # type: ignore[misc]

    def _history(self, x: Mapping[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        cols = mpl_columns(self.options["n_bins"])
        K = self.options["n_bins"]
        dlr = torch.stack([x[c] for c in cols[:K]], dim=-1)
        lr = torch.stack([x[c] for c in cols[K : 2 * K]], dim=-1)
        area = torch.stack([x[c] for c in cols[2 * K :]], dim=-1)
        return dlr, lr, area  # each (n, K)

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        dlr, lr, area = self._history(x)

        def expand(v: Tensor) -> Tensor:  # (S, 1) → (S, 1, 1); 0-d stays 0-d
            return v.unsqueeze(-1) if v.dim() > 0 else v

        C, beta, gamma = expand(p["C"]), expand(p["beta"]), expand(p["gamma"])
        # 1 − (C·η^(−γ)·S + 1)^(−β), with η^(−γ)·S computed as exp(log S − γ log η) for stability
        z = C * torch.exp(torch.log(area) - gamma * torch.log(lr))
        bracket = -torch.expm1(-beta * torch.log1p(z))
        drop = (dlr * bracket).sum(dim=-1)  # (S, n) or (n,)
        return p["L0"] + p["A"] * x["mpl_s1"] ** (-p["alpha"]) - p["B"] * drop

    def continued_asymptote(self, params: Mapping[str, float], limits: Mapping[str, float]) -> float:
        """Loss that training continued at the final LR > 0 converges to: every ``S_k(t) → ∞`` so each bracket
        → 1 and the loss drop telescopes to ``B·(η_peak − η_final)``: ``L_∞ = L0 − B·(η_peak − η_final)``
        (Luo et al. 2025).

        ``limits`` maps the law's inputs to their values in the limit of training continued forever at the
        final LR > 0: forward areas ``inf``, annealing areas at their limit (pending momentum decayed into
        them), plus ``lr`` (the final LR) and ``peak_lr``; ``replay_ratio`` and ``n_params`` as planned.
        """
        return params["L0"] - params["B"] * (limits["peak_lr"] - limits["lr"])

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return safe_log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "L0": np.array([2.0, 3.0]),
            "A": np.array([0.5]),
            "alpha": np.array([0.3, 0.6]),
            "B": np.array([100.0, 500.0]),
            "C": np.array([0.5, 3.0]),
            "beta": np.array([0.3, 0.7]),
            "gamma": np.array([0.4, 0.7]),
        }

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        from mixlaw.laws._examples import schedule_feature_rows

        rows = schedule_feature_rows(n, rng, cpt=False, multi_power_bins=int(self.options["n_bins"]), peak_lr=3e-4)
        return {c: rows[c].to_numpy() for c in self.inputs}
