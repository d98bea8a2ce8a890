"""Fits that finish: the adaptive iteration limit and the re-polish of starts that stopped at the cap.

The solver (:func:`mixlaw.fit.solver.solve.solve`) stops a row when it converges, or when it *stalls* — its objective
fell
by less than ``stall_tol`` (relative) over ``stall_window`` iterations, or, for resamples and batch problems under
the adaptive limit, by less than :data:`ADAPTIVE_STALL_UNITS` of one noise unit (the mean loss per data point).
With ``max_iter=None`` (the default of :class:`~mixlaw.fit.Fitter`) the cap is :data:`AUTO_MAX_ITER`, so a row
keeps going exactly as long as its objective still falls measurably: flat E–α valleys (the OLMo-ladder Chinchilla
fits) are followed to their end instead of being cut at 300 iterations. An explicit ``max_iter`` stays a hard cap.

A row that still stops at the cap is *re-polished* (:func:`repolish`): solved again from where it stopped with
fresh Levenberg–Marquardt damping and a fresh budget, before it is reported or discarded. So is a point fit's
estimate that stalled, once (fresh damping and Moré scaling take it past a stall on a ridge).

The noise-scaled test looks back two windows, not one: a valley can be crawled slowly for a window before the
steps lengthen (a one-decade power law started far off: 0.012 units over iterations 5-35, then 2.26 units more by
convergence at 103); on 40 such fits one window stopped 6 rows more than 0.1 unit above their optimum (up to 2.26),
two windows none (at most 0.096), for 10 % fewer iterations than no test (``tests/test_fit_adaptive.py``).

A decision's fits get their limit from the :class:`mixlaw.options.SolverOptions` passed to them (``--max-iter``):
``None`` keeps this adaptive limit for every engine fit they make.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from mixlaw.fit.solver.settings import SolveSettings
from mixlaw.fit.solver.solve import STATUS_MAX_ITER, STATUS_STALLED, ResidualFn, SolveResult, solve

__all__ = [
    "ADAPTIVE_STALL_TOL",
    "ADAPTIVE_STALL_UNITS",
    "POINT_STALL_UNITS",
    "AUTO_MAX_ITER",
    "iteration_cap",
    "point_stall_units_for",
    "repolish",
    "stall_tol_for",
    "stall_units_for",
]

AUTO_MAX_ITER = 10_000
"""The generous cap behind ``max_iter=None``: rows stop on convergence or stall long before it."""

#: The relative stall test: a row whose objective fell by less than this (relative) over the solver's
#: 30-iteration window stops as ``stalled`` (the solver's own 1e-9, at every cap).
ADAPTIVE_STALL_TOL = 1e-9
HARD_STALL_TOL = 1e-9


def stall_tol_for(cap: int) -> float:
    """The stall tolerance for an iteration cap: :data:`ADAPTIVE_STALL_TOL` at the adaptive cap, else 1e-9."""
    return ADAPTIVE_STALL_TOL if cap >= AUTO_MAX_ITER else HARD_STALL_TOL


#: The noise-scaled stall test of the adaptive limit (``stall_units`` of :func:`mixlaw.fit.solver.solve.solve`): a row
# whose
#: objective fell by less than this fraction of one noise unit — the mean Huber loss per data point — over two of the
#: solver's 30-iteration windows (:data:`mixlaw.fit.solver.solve.UNITS_WINDOWS`: a curved valley can be crawled slowly
# for one
#: window before the steps lengthen) stops as ``stalled``: what it could still gain at that pace is far inside the
#: objective's noise. It applies to the many refits around a point estimate (bootstrap resamples, the problems of
#: :func:`~mixlaw.fit.fit_batch`), not to the point fit itself, which follows a flat valley to convergence (the OLMo-
#: ladder Chinchilla fits must report ``converged``). Measured: with it and no cap the cpt_replay CMR
#: on the shipped example loses 0 of 50 resamples per size (13-40 at the 300 cap). It does not shortcut genuinely slow
#: fits: the CAMEL k = 3 SlimPajama rows still fall by about one unit per window at iteration 200. It is not a
#: guarantee: on 100 CAMEL resamples 27 still stop more than 0.1 unit above their optimum (36 with one window), and the
#: 95 % band at 7B is 9 % narrower than with every resample converged (20 % with one window;
#: ``docs/design/adaptive-iterations.md``); on the OLMo ladder's ``dolma_books`` 9 of 200 run resamples, the band at
#: 3B-13B 0.95-1.006 of the converged one. They stop on plateaus (a switched-off component coming back after 100-300
#: flat iterations) that only a window of about 400 iterations would wait out, at 94 % of the cost of no test (2-4x
#: the CPU of the refits with the test).
ADAPTIVE_STALL_UNITS = 1e-2


def stall_units_for(cap: int) -> float | None:
    """The noise-scaled stall test for an iteration cap: :data:`ADAPTIVE_STALL_UNITS` at the adaptive cap, else off."""
    return ADAPTIVE_STALL_UNITS if cap >= AUTO_MAX_ITER else None


#: The noise-scaled stall test of a *point* fit under the adaptive limit (the resamples' fraction), for every start
#: but the lowest of its problem (``spare_best``), which runs on to convergence or the relative test. With the
#: geodesic step rule (:mod:`mixlaw.fit.solver.solve`) genuine valleys are followed in hundreds of iterations, so what
#: still runs into the thousands is a start whose parameters run off to infinity with vanishing gain: on the
#: ``cmr_law`` recovery test, rows with two parameters diverging to ∓3e4 at 1.5e-3 (best row 5.6e-10) ran 10,000
#: iterations under both step rules and now stop within 1,000. The README's ``mix optimize`` (1b) without the
#: decision cap: 25.7 s CPU (19.7 s on main, capped at 300 with 4 of 5 fits at ``max_iter``); the OLMo-ladder
#: folds of ``tests/test_logs_olmo.py`` still converge.
POINT_STALL_UNITS = 1e-2


def point_stall_units_for(cap: int) -> float | None:
    """The point fit's noise-scaled stall test: :data:`POINT_STALL_UNITS` at the adaptive cap, else off."""
    return POINT_STALL_UNITS if cap >= AUTO_MAX_ITER else None


def iteration_cap(max_iter: int | None) -> int:
    """``max_iter`` as a hard cap; ``None`` → :data:`AUTO_MAX_ITER` (run while the objective still falls)."""
    return AUTO_MAX_ITER if max_iter is None else int(max_iter)


def repolish(
    sol: SolveResult,
    residuals: ResidualFn,
    pid: np.ndarray,
    W: torch.Tensor,
    settings: SolveSettings,
    *,
    limit: int = 8,
) -> SolveResult:
    """Solve again, from where they stopped, the (at most ``limit`` lowest-objective) rows that stopped at
    ``max_iter`` and each problem's best row if it *stalled*.

    ``settings`` are the solve's (its loss, Huber threshold, cap and tolerances are kept; the re-polish runs with
    the point fit's stall tests, no merging and the other defaults of :class:`SolveSettings`).

    Only rows that could matter are re-polished: per problem, the capped rows whose objective is below that
    problem's best finished (converged/stalled) row, and that best row when it stalled. The re-polished rows replace
    the old ones where they did not fail; nothing else changes.
    """
    st = sol.status
    capped = np.flatnonzero((st == STATUS_MAX_ITER) & np.isfinite(sol.f))
    finished = np.isin(st, ("converged", "stalled")) & np.isfinite(sol.f)
    best_done = np.full(int(pid.max()) + 1, np.inf)
    np.minimum.at(best_done, pid[finished], sol.f[finished])
    capped = capped[sol.f[capped] < best_done[pid[capped]]]
    capped = capped[np.argsort(sol.f[capped], kind="stable")[:limit]]
    # A problem's estimate that *stalled* (a ridge or valley followed until the relative test stopped it) goes on
    # once from where it stopped with fresh damping and a fresh Moré scaling (the running max of diag JᵀΩJ it had
    # built up keeps the dying coordinates' damping high): on benchmarks/solver_iters.py's cpt_replay CMR fit the
    # stalled estimate ended 2.6e-8 (relative) above the old rule's; re-polished, 202 more iterations, it is 6.5e-8
    # below. Problems whose best row is an unfinished (max_iter) row are left to the capped re-polish above.
    halted = sol.halted if sol.halted is not None else np.zeros(len(st), dtype=bool)  # settled: left where they are
    stalled = np.flatnonzero((st == STATUS_STALLED) & finished & (sol.merged_into < 0) & ~halted)
    stalled = stalled[sol.f[stalled] <= best_done[pid[stalled]]]
    stalled = stalled[np.unique(pid[stalled], return_index=True)[1]]  # one per problem
    rows = np.concatenate([capped, stalled])
    if rows.size == 0:
        return sol
    capped = rows
    max_iter = settings.max_iter
    again = solve(residuals, sol.x[capped], pid[capped], W, SolveSettings(
        loss="l2" if settings.loss == "l2" else "huber", delta=settings.delta, max_iter=max_iter,
        ftol=settings.ftol, xtol=settings.xtol, merge_tol=None, stall_tol=stall_tol_for(max_iter),
        stall_units=point_stall_units_for(max_iter), spare_best=True,
    ))  # fmt: skip
    x, f, g, n_iter, status = sol.x.copy(), sol.f.copy(), sol.grad_norm.copy(), sol.n_iter.copy(), st.copy()
    keep = again.f <= sol.f[capped]  # a row whose re-polish failed keeps what it had
    capped = capped[keep]
    x[capped], f[capped], g[capped], status[capped] = (
        again.x[keep],
        again.f[keep],
        again.grad_norm[keep],
        again.status[keep],
    )
    n_iter[capped] += again.n_iter[keep]
    for k in np.flatnonzero(np.isin(sol.merged_into, capped)):  # merged rows follow the row they joined
        x[k], f[k], g[k] = x[sol.merged_into[k]], f[sol.merged_into[k]], g[sol.merged_into[k]]
    return replace(sol, x=x, f=f, grad_norm=g, n_iter=n_iter, status=status)
