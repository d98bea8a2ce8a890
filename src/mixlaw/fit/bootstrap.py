"""One bootstrap and one usable-row rule for the whole package.

The usable-row rule
-------------------
A solver row (one start of one problem, see :mod:`mixlaw.fit.solve`) is **usable** when its final state — that of
the row it was merged into, for a merged row — is ``converged`` or ``stalled`` (the objective stopped decreasing
measurably: final to the solver's precision, parameters not certified) and its objective is finite. Rows that ran
out of iterations (``max_iter``) or failed are not usable. The estimate of a problem is its usable row with the
lowest objective; a problem without a usable row has no estimate.

Everything uses this rule: :func:`best_rows` implements it, :class:`~mixlaw.fit.Fitter` picks its point estimate
with it, every bootstrap resample (:func:`refit`, :func:`bootstrap_law`) and every problem of
:func:`~mixlaw.fit.fit_batch` is judged by it, and a resample without an estimate is counted in ``n_failed`` the
same way everywhere. One documented exception: a point estimate is always returned — when no start of the main
fit is usable the fitter falls back to the unfinished (``max_iter``) start with the lowest objective, reports
status ``max_iter`` and warns; resamples have no such fallback.

Resampling schemes
------------------
How each scheme draws its resamples is :mod:`mixlaw.fit.resampling` (:func:`~mixlaw.fit.resampling.draw_resamples`).

- ``"auto"`` (the default of :class:`~mixlaw.fit.Fitter` and the CLI;
  :func:`~mixlaw.fit.resampling.resolve_scheme`): ``"runs"`` where some run has several rows (loss curves,
  schedules), ``"residuals"`` where every run is a single row (final checkpoints of a ladder, digitised points,
  one row per mixture). Those designs are *fixed*: the sizes, token
  counts and mixtures were chosen, not sampled. Drawing rows with replacement then changes the design itself —
  a resample of 20 ladder rows can hold one row of the smallest size and four of the largest — and the spread of
  its extrapolations describes designs nobody ran. The residual bootstrap keeps the design and resamples the noise
  (Davison & Hinkley 1997, §6.2.3-6.2.4: model-based resampling for a fixed design, case resampling for a random
  one). Where ``"runs"`` leaves more than :data:`LOST_MAX` of its resamples unusable (few runs: a draw of three
  runs holds all three with probability 2/9, and many draws cannot identify the law), ``"auto"`` draws the
  ``"wild"`` resamples below instead and uses them if fewer are unusable — the remedy of Cameron, Gelbach & Miller
  (2008) for few clusters — recording why (:attr:`BootstrapDraws.fallback`). The scheme that ran is what a result
  records.
- ``"runs"``: draw whole runs (the group column, default ``run_id``) with replacement; every run's points
  enter or leave together (evaluations along one run are not independent). Without a group column: rows.
- ``"rows"``: draw rows (evaluation points) with replacement.
- ``"residuals"``: keep the design, refit ``fitted + residuals`` with the residuals resampled with replacement
  *within* each run (for designs with one run per condition, where dropping runs leaves the law undetermined);
  where every run is a single row the residuals are pooled (:func:`~mixlaw.fit.resampling.resample_targets`).
- ``"parametric"``: keep the design, refit ``fitted + σ̂ z`` (``z`` standard normal, ``σ̂`` the residual standard
  deviation in the fit space, :func:`mixlaw.fit.intervals.residual_sd`): the law and Gaussian noise taken as true.
- ``"wild"``: the wild cluster bootstrap (:func:`~mixlaw.fit.resampling.wild_targets`): keep the design, refit
  ``fitted + v_g · r`` with each run's residual vector ``r`` multiplied by one random weight ``v_g`` (Webb's six
  points). For curves from few runs, where drawing runs whole leaves resamples that cannot identify the law (three
  MultiPowerLaw schedules: 19 of 40 ``runs`` resamples unusable at 25M, 0 of 40 ``wild``).
- ``"sizes"``: cluster bootstrap over model sizes — draw the distinct values of the size column (default
  ``n_params``) with replacement, every point of a size entering or leaving together. The scheme for extrapolating
  in size: it asks how much the fit moves when the set of sizes it saw changes, which is the uncertainty of a
  prediction at a larger size (the runs and rows schemes treat every point as independent information about it).

Every scheme's failed resamples are refitted once more (from the point estimate and from where their best start
stopped) before they are counted as unusable (``n_failed``); nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from mixlaw.errors import InputError
from mixlaw.fit.data import FitData, make_residuals, project_internal
from mixlaw.fit.refine import iteration_cap, stall_tol_for, stall_units_for
from mixlaw.fit.resampling import (
    LOST_MAX,
    SCHEME_CHOICES,
    SCHEMES,
    Scheme,
    draw_resamples,
    interval_status,
    resample_targets,
    resample_weights,
    resolve_scheme,
    wild_targets,
)
from mixlaw.fit.solve import STATUS_CONVERGED, STATUS_FAILED, STATUS_STALLED, SolveResult, objective_values, solve
from mixlaw.laws import Law, get_law

__all__ = [
    "SCHEMES",
    "LOST_MAX",
    "SCHEME_CHOICES",
    "USABLE",
    "BootstrapDraws",
    "Scheme",
    "best_rows",
    "bootstrap_law",
    "interval_status",
    "refit",
    "refit_resamples",
    "resample_targets",
    "resample_weights",
    "rescue",
    "resolve_scheme",
    "root_status",
    "usable",
    "wild_targets",
]

Loss = Literal["huber", "l2"]
USABLE: tuple[str, ...] = (STATUS_CONVERGED, STATUS_STALLED)
"""Final row states whose parameters count (see the module docstring)."""

#: Rows × points of one batched solve; larger bootstraps are solved in chunks of resamples.
CHUNK_CELLS = 200_000

#: The damping ladder of the resample refits (``ladder`` of :func:`mixlaw.fit.solve.solve`): ``"lazy"`` — the
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
    """Resamples whose rows cannot identify the law (:mod:`mixlaw.fit.resample_check`), counted in ``n_failed``."""
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`refit`, also returning ``(B, P)`` the internal end point of each problem's best finite row."""
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
    chunk = max(1, CHUNK_CELLS // max(1, n * k))
    for lo in range(0, B, chunk):
        hi = min(B, lo + chunk)
        nb = hi - lo
        Yc = torch.tensor(Y[lo:hi] if Y.ndim == 2 else Y)
        residuals = make_residuals(law, x, Yc)
        pid = np.repeat(np.arange(nb), k)
        sol = solve(
            residuals,
            np.ascontiguousarray(S[lo:hi]).reshape(nb * k, -1),
            pid,
            W_all[lo:hi],
            loss=loss,
            delta=d,
            max_iter=cap,
            ftol=ftol,
            xtol=xtol,
            stall_tol=stall_tol_for(cap),
            stall_units=stall_units_for(cap),
            ladder=RESAMPLE_LADDER,
        )
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
    **kw: Any,
) -> int:
    """Refit every problem of :func:`refit` that has no estimate, from two starts: ``centres[b]`` (the point estimate
    of a bootstrap, a problem's first start in :func:`~mixlaw.fit.fit_batch`) and ``ends[b]`` (where its best row
    stopped), with fresh damping and a fresh budget.

    No problem is dropped silently: ``state`` (``params, ok, status, objective`` as :func:`refit` returns them) is
    updated in place for the recovered ones; the status of those still unusable is their rescue's final status, and
    they stay counted as failed. Returns the number recovered.
    """
    out, ok, status, objective = state
    fail = np.flatnonzero(~ok)
    if fail.size == 0:
        return 0
    again = np.stack([np.asarray(centres)[fail], np.asarray(ends)[fail]], axis=1)
    Yf = targets[fail] if np.ndim(targets) == 2 else targets
    Wf = None if weights is None else weights[fail]
    o2, ok2, st2, obj2, _ = _refit(law, x, Yf, Wf, again, **kw)
    out[fail[ok2]], ok[fail[ok2]], objective[fail[ok2]] = o2[ok2], True, obj2[ok2]
    status[fail] = st2
    return int(ok2.sum())


def bootstrap_law(
    law: Law | str,
    data: FitData,
    seeds: np.ndarray,
    *,
    n: int,
    rng: np.random.Generator,
    scheme: Scheme = "runs",
    params: Mapping[str, Any] | None = None,
    loss: Loss = "huber",
    delta: float | None = None,
    max_iter: int | None = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    progress: Callable[[int, int], None] | None = None,
    clusters: np.ndarray | None = None,
    cluster_unit: str = "n_params",
) -> BootstrapDraws:
    """Bootstrap one fit: ``n`` resamples under ``scheme``, each refitted from ``seeds`` (internal starts).

    This is the one bootstrap of the package: :class:`~mixlaw.fit.Fitter` calls it, and a decision that needs
    intervals on a fitted law calls it (or :func:`refit` for its own resampling of targets). ``params`` (the
    point estimate, natural units) is needed by the ``"residuals"`` and ``"parametric"`` schemes; ``clusters``
    (one integer label per row, e.g. the factorised model size) by ``"sizes"``.
    """
    law_obj = get_law(law)
    if scheme not in SCHEME_CHOICES:
        raise InputError(f"expected bootstrap scheme {', '.join(SCHEME_CHOICES)}, got {scheme!r}")
    asked = scheme
    scheme = resolve_scheme(scheme, data, has_params=params is not None)  # type: ignore[assignment]
    if n < 0:
        raise InputError(f"expected a non-negative number of resamples, got {n}")
    if scheme in ("residuals", "parametric", "wild") and params is None:
        raise InputError(f"the {scheme} bootstrap needs the point estimate (params)")
    solver: dict[str, Any] = dict(loss=loss, delta=delta, max_iter=max_iter, ftol=ftol, xtol=xtol)
    draws = _draw_and_refit(law_obj, data, scheme, n, rng, seeds, params, clusters, cluster_unit, progress, solver)
    if asked == "auto" and scheme == "runs" and params is not None and interval_status(draws.n_failed, n) != "ok":
        # Too few runs for the runs bootstrap (module docstring, "auto"): the wild cluster bootstrap keeps them all.
        wild = _draw_and_refit(law_obj, data, "wild", n, rng, seeds, params, None, cluster_unit, progress, solver)
        if wild.n_failed < draws.n_failed:
            why = (
                f"the runs bootstrap left {draws.n_failed} of {n} resamples unusable (> {LOST_MAX:.0%}): "
                f"the wild cluster bootstrap, which keeps every run, was used"
            )
            return dataclasses.replace(wild, fallback=why)
    return draws


def _draw_and_refit(
    law: Law,
    data: FitData,
    scheme: str,
    n: int,
    rng: np.random.Generator,
    seeds: np.ndarray,
    params: Mapping[str, Any] | None,
    clusters: np.ndarray | None,
    cluster_unit: str,
    progress: Callable[[int, int], None] | None,
    solver: dict[str, Any],
) -> BootstrapDraws:
    """Draw ``n`` resamples under a resolved ``scheme``, refit them and screen them (:func:`bootstrap_law`)."""
    from mixlaw.fit.resample_check import screen_unidentified

    Y, W, unit = draw_resamples(law, data, scheme, n, rng, params=params, clusters=clusters, cluster_unit=cluster_unit)
    draws = refit_resamples(
        law, data, Y, W, seeds, params=params, scheme=scheme, unit=unit, progress=progress, **solver
    )
    return screen_unidentified(law, data, W, draws, params, Y, seeds, **solver)  # refitted, or counted


def refit_resamples(
    law: Law,
    data: FitData,
    targets: np.ndarray,
    weights: np.ndarray | None,
    seeds: np.ndarray,
    *,
    params: Mapping[str, Any] | None = None,
    scheme: str = "runs",
    unit: str = "run",
    loss: Loss = "huber",
    delta: float | None = None,
    max_iter: int | None = None,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    progress: Callable[[int, int], None] | None = None,
) -> BootstrapDraws:
    """Refit resamples the caller drew (``targets`` ``(n,)`` or ``(B, n)``, ``weights`` ``(B, n)`` multiplicities)
    in one batched solve from ``seeds``, rescue the failed ones from the point estimate, and judge them by the
    usable-row rule: the tail of :func:`bootstrap_law`, for decisions that draw their own resamples (the same
    mixtures for every law of ``mix optimize``). ``params`` is the point estimate (natural units; the rescue starts
    from it or from ``seeds[0]``, whichever fits the data better).
    """
    seeds = np.asarray(seeds, dtype=np.float64)
    kw: dict[str, Any] = dict(loss=loss, delta=delta, max_iter=max_iter, ftol=ftol, xtol=xtol)
    out, ok, status, objective, ends = _refit(law, data.x, targets, weights, seeds, progress=progress, **kw)
    centre = _centre(law, data, params, seeds, loss=loss, delta=delta)
    state = (out, ok, status, objective)  # failed resamples: refitted, never dropped silently (see rescue)
    n_rescued = rescue(law, data.x, targets, weights, np.broadcast_to(centre, ends.shape), ends, state, **kw)
    return BootstrapDraws(
        params=pd.DataFrame(out[ok], columns=list(law.flat_names)),
        ok=ok,
        status=status,
        objective=objective,
        scheme=scheme,
        unit=unit,
        n_rescued=n_rescued,
    )


def _centre(
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
