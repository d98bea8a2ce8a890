"""Batched refits judged by the usable-row rule: the solver-level half of the one bootstrap.

:func:`refit` solves many problems over the same inputs (bootstrap resamples, validation folds, calibration folds,
a batch of fits) in chunked batched solves and keeps, per problem, its usable row with the lowest objective (the
usable-row rule of :mod:`mixlaw.fit.uncertainty.bootstrap`); :func:`rescue` refits the problems left without an
estimate once
more from the point estimate and from where they stopped. :mod:`mixlaw.fit.uncertainty.bootstrap` draws the resamples
and
:mod:`mixlaw.fit.uncertainty.resample_check` screens them; both use this module, which uses neither.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from mixlaw.errors import InputError
from mixlaw.fit.problem.data import FitData, make_residuals, project_internal
from mixlaw.fit.solver.refine import iteration_cap, stall_tol_for, stall_units_for
from mixlaw.fit.solver.settings import SolveSettings
from mixlaw.fit.solver.solve import (
    STATUS_CONVERGED,
    STATUS_FAILED,
    STATUS_STALLED,
    SolveResult,
    objective_values,
    solve,
)
from mixlaw.laws import Law

__all__ = [
    "USABLE",
    "BootstrapDraws",
    "Loss",
    "best_rows",
    "point_centre",
    "internal_starts",
    "refit",
    "rescue",
    "root_status",
    "usable",
]

Loss = Literal["huber", "l2"]
USABLE: tuple[str, ...] = (STATUS_CONVERGED, STATUS_STALLED)
"""Final row states whose parameters count (see the module docstring)."""

#: Rows × points of one batched solve; larger bootstraps are solved in chunks of resamples.
CHUNK_CELLS = 200_000

#: The damping ladder of the resample refits (``ladder`` of :func:`mixlaw.fit.solver.solve.solve`): ``"lazy"`` — the
#: lower rungs first, the upper ones only for the rows they did not improve. A resample starts at the point
#: estimate, near its own optimum, where the lower rungs win nearly every step (88 % of the accepted steps of the
#: full ladder on the CAMEL k = 3 SlimPajama bootstrap); measured in ``benchmarks/mixture_fit.py``'s docstring.
RESAMPLE_LADDER: Literal["full", "lazy"] = "lazy"


@dataclass(frozen=True)
class BootstrapDraws:
    """Outcome of one bootstrap: one natural-unit row per resample, canonical form.

    ``params`` has the law's flat columns (``law.flat_names``) and one row per resample that has an estimate
    (``ok``); ``status`` is the final status of each resample's best row (``failed`` when no row was finite).
    """

    params: pd.DataFrame
    ok: np.ndarray
    status: np.ndarray
    objective: np.ndarray
    scheme: str
    unit: str
    n_rescued: int = 0
    """Resamples that failed from the seeds and were recovered by the rescue refit."""
    n_unidentifiable: int = 0
    """Resamples whose rows cannot identify the law (:mod:`mixlaw.fit.uncertainty.resample_check`), counted in
    ``n_failed``."""
    fallback: str = ""
    """Why ``"auto"`` ran another scheme than the one it resolved to (empty when it did not; :func:`bootstrap_law`)."""

    @property
    def n_failed(self) -> int:
        return int((~self.ok).sum())


def root_status(sol: SolveResult) -> np.ndarray:
    """Per-row final status, with merged rows given the status of the row they were merged into."""
    st = sol.status.copy()
    m = sol.merged_into >= 0
    st[m] = sol.status[sol.merged_into[m]]
    return st


def usable(sol: SolveResult) -> np.ndarray:
    """``(K,)`` bool: the rows that count (root status ``converged``/``stalled`` and a finite objective)."""
    return np.isin(root_status(sol), USABLE) & np.isfinite(sol.f)


def best_rows(sol: SolveResult, pid: np.ndarray, n_problems: int) -> tuple[np.ndarray, np.ndarray]:
    """``(best, ok)``: per problem, the index of its lowest-objective usable row (``-1`` and ``ok=False`` if none)."""
    ok_row = usable(sol)
    f = np.where(ok_row, sol.f, np.inf)
    order = np.lexsort((f, pid))  # by problem, then objective
    best = np.full(n_problems, -1, dtype=np.int64)
    first = np.ones(len(order), dtype=bool)
    first[1:] = pid[order][1:] != pid[order][:-1]
    for idx in order[first]:
        best[pid[idx]] = idx
    ok = best >= 0
    ok[ok] = ok_row[best[ok]]
    best[~ok] = -1
    return best, ok


def refit(
    law: Law,
    x: Mapping[str, torch.Tensor],
    targets: np.ndarray,
    weights: np.ndarray | None,
    seeds: np.ndarray,
    *,
    loss: Loss = "huber",
    delta: float | None = None,
    max_iter: int | None = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Solve ``B`` problems over the same inputs in batched solves and judge them by the usable-row rule.

    Parameters
    ----------
    law, x
        The law and its input tensors (``(n,)`` each).
    targets
        ``(n,)`` (shared by every problem) or ``(B, n)`` targets.
    weights
        ``(B, n)`` point multiplicities, or ``None`` (all 1).
    seeds
        Internal starts: ``(k, P)`` shared by every problem, or ``(B, k, P)``.

    Returns
    -------
    params, ok, status, objective
        ``(B, len(flat_names))`` canonical natural entries (NaN without an estimate), ``(B,)`` bool, ``(B,)``
        final status of the best row, ``(B,)`` objective (``inf`` without an estimate).
    """
    params, ok, status, objective, _ = _refit(
        law, x, targets, weights, seeds, loss=loss, delta=delta, max_iter=max_iter, ftol=ftol, xtol=xtol,
        progress=progress,
    )  # fmt: skip
    return params, ok, status, objective


def _refit(
    law: Law,
    x: Mapping[str, torch.Tensor],
    targets: np.ndarray,
    weights: np.ndarray | None,
    seeds: np.ndarray,
    *,
    loss: Loss = "huber",
    delta: float | None = None,
    max_iter: int | None = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    progress: Callable[[int, int], None] | None = None,
    stall_units: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`refit`, also returning ``(B, P)`` the internal end point of each problem's best finite row.

    ``stall_units``: the noise-scaled stall test's fraction of a noise unit (default: the adaptive limit's,
    :func:`~mixlaw.fit.solver.refine.stall_units_for`), for refits whose use tolerates a coarser end."""
    Y = np.asarray(targets, dtype=np.float64)
    n = Y.shape[-1]
    B = Y.shape[0] if Y.ndim == 2 else (weights.shape[0] if weights is not None else 1)
    S = np.asarray(seeds, dtype=np.float64)
    S = np.broadcast_to(S, (B, *S.shape)) if S.ndim == 2 else S
    k = S.shape[1]
    d = float(delta if delta is not None else law.default_delta)
    W_all = torch.ones(B, n, dtype=torch.float64) if weights is None else torch.tensor(weights)
    params = np.full((B, len(law.flat_names)), np.nan)
    ok = np.zeros(B, dtype=bool)
    status = np.array([STATUS_FAILED] * B, dtype=object)
    objective = np.full(B, np.inf)
    ends = S[:, 0, :].copy()
    cap = iteration_cap(max_iter)
    settings = SolveSettings(
        loss=loss, delta=d, max_iter=cap, ftol=ftol, xtol=xtol, stall_tol=stall_tol_for(cap),
        stall_units=stall_units_for(cap) if stall_units is None else stall_units, ladder=RESAMPLE_LADDER,
    )  # fmt: skip
    chunk = max(1, CHUNK_CELLS // max(1, n * k))
    for lo in range(0, B, chunk):
        hi = min(B, lo + chunk)
        nb = hi - lo
        Yc = torch.tensor(Y[lo:hi] if Y.ndim == 2 else Y)
        residuals = make_residuals(law, x, Yc)
        pid = np.repeat(np.arange(nb), k)
        sol = solve(residuals, np.ascontiguousarray(S[lo:hi]).reshape(nb * k, -1), pid, W_all[lo:hi], settings)
        best, good = best_rows(sol, pid, nb)
        st = root_status(sol)
        for i in range(nb):
            rows = np.flatnonzero(pid == i)
            j = best[i] if good[i] else rows[np.argmin(np.where(np.isfinite(sol.f[rows]), sol.f[rows], np.inf))]
            status[lo + i] = st[j] if np.isfinite(sol.f[j]) else STATUS_FAILED
            if np.isfinite(sol.f[j]):
                ends[lo + i] = sol.x[j]
            if good[i]:
                params[lo + i] = law.flatten(law.natural(project_internal(law, sol.x[j])))
                objective[lo + i] = sol.f[j]
        ok[lo:hi] = good
        if progress is not None:
            progress(hi, B)
    return params, ok, status, objective, ends


def rescue(
    law: Law,
    x: Mapping[str, torch.Tensor],
    targets: np.ndarray,
    weights: np.ndarray | None,
    centres: np.ndarray,
    ends: np.ndarray,
    state: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    *,
    loss: Loss = "huber",
    delta: float | None = None,
    max_iter: int | None = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    stall_units: float | None = None,
) -> int:
    """Refit every problem of :func:`refit` that has no estimate, from two starts: ``centres[b]`` (the point estimate
    of a bootstrap, a problem's first start in :func:`~mixlaw.fit.fit_batch`) and ``ends[b]`` (where its best row
    stopped), with fresh damping and a fresh budget.

    No problem is dropped silently: ``state`` (``params, ok, status, objective`` as :func:`refit` returns them) is
    updated in place for the recovered ones; the status of those still unusable is their rescue's final status, and
    they stay counted as failed. Returns the number recovered. The solver arguments are :func:`refit`'s
    (``stall_units`` as in its private twin ``_refit``).
    """
    out, ok, status, objective = state
    fail = np.flatnonzero(~ok)
    if fail.size == 0:
        return 0
    again = np.stack([np.asarray(centres)[fail], np.asarray(ends)[fail]], axis=1)
    Yf = targets[fail] if np.ndim(targets) == 2 else targets
    Wf = None if weights is None else weights[fail]
    o2, ok2, st2, obj2, _ = _refit(law, x, Yf, Wf, again, loss=loss, delta=delta, max_iter=max_iter, ftol=ftol,
                                   xtol=xtol, stall_units=stall_units)  # fmt: skip
    out[fail[ok2]], ok[fail[ok2]], objective[fail[ok2]] = o2[ok2], True, obj2[ok2]
    status[fail] = st2
    return int(ok2.sum())


def point_centre(
    law: Law, data: FitData, params: Mapping[str, Any] | None, seeds: np.ndarray, *, loss: Loss, delta: float | None
) -> np.ndarray:
    """The point estimate in internal coordinates, as the rescue's first start: ``seeds[0]`` or ``to_internal(params)``,
    whichever has the lower objective on the data.

    ``to_internal`` is not always the inverse of the fit's own coordinates: a log-mapped parameter run below
    ``exp(−690)`` is floored at 1e-300 (the CAMEL k = 3 SlimPajama point fit has ``K_0 = exp(−716.6)``, carried by
    ``α_0`` = 366, and ``to_internal`` moved its objective from 1.28e-3 to 4.3); the fitter's seeds are its exact
    internal end point.
    """
    if params is None:
        return seeds[0]
    mapped = law.to_internal(params)
    if seeds.shape[0] == 0:
        return mapped
    d = float(delta if delta is not None else law.default_delta)
    W = torch.ones(1, data.n, dtype=torch.float64)
    both = np.stack([seeds[0], mapped])
    pid = np.zeros(2, dtype=np.int64)
    f = objective_values(make_residuals(law, data.x, data.y_t), both, pid, W, loss=loss, delta=d)
    return seeds[0] if f[0] <= f[1] else mapped


def internal_starts(law: Law, starts: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Natural-unit start dicts → ``(k, n_internal)`` internal array (``InputError`` for incomplete starts)."""
    rows = []
    for s in starts:
        missing = [p for p in law.param_names if p not in s]
        if missing:
            raise InputError(f"expected a start with every parameter of law '{law.name}', got one missing {missing}")
        rows.append(law.to_internal(s))
    return np.array(rows, dtype=np.float64).reshape(len(rows), law.n_internal)
