"""Batched robust Gauss–Newton solver: many independent small fits in one vectorised float64 solve.

Every row of ``U`` (shape ``(K, P)``) is one independent minimisation problem: one start of one data set, or one
start of one bootstrap resample. Row ``k`` belongs to problem ``pid[k]`` whose per-point weights are
``W[pid[k]]`` (1 for an ordinary fit, the resampling multiplicities for a bootstrap resample). Its objective is

.. math:: f_k(u) = \\sum_i W_{p(k), i} \\, \\rho(r_i(u)),

with ``ρ`` the Huber function (or ``r²/2``) and ``r_i`` the residual of point ``i`` (``log L̂ − log L`` for log-space
laws). The residual Jacobian comes from reverse-mode automatic differentiation (:func:`_residuals_and_jacobian`), or
from a law's own analytic derivatives where it declares them (``log_predict_grad``: CAMEL), equal to 1e-10.

The step is iteratively-reweighted Gauss–Newton with Levenberg–Marquardt damping. With IRLS weights
``ω_i = ψ(r_i)/r_i = min(1, δ/|r_i|)`` the quadratic ``Σ ω_i r_i²/2`` majorises the Huber sum at the current point
(Huber 1981, §7.8), and its Gauss–Newton model ``(Jᵀ Ω J + μ diag) p = −Jᵀ ψ(r)`` uses curvature from every point,
including those in the linear (L1) zone where the exact Hessian of the loss vanishes; that is what makes small-δ
Huber fits (δ = 1e-3) converge in tens of iterations instead of hundreds. Beside it, the Gauss–Newton model with
the loss's own curvature (1 inside δ, 0 outside) is tried; each row takes the best trial point and only if it
does not raise the objective, so every row decreases its objective monotonically.

The step rule is built for *sloppy* fits (the CAMEL k = 3 SlimPajama fit: 28 parameters, Hessian condition
~1e11), where the rule of before (one μ per step, Marquardt scaling, μ ÷5 / ×10, the ∞-norm cap) crawled: dead
Jacobian columns (log C and mixture logits run to −28) had Gauss–Newton components of up to 1e10, so the cap shrank
every live coordinate's step to nothing. Now:

- **Moré scaling**: the damping is ``μ·D`` with ``D`` the running maximum of diag(Jᵀ Ω J) per row, so a dead
  coordinate keeps the damping of the scale it once had (Moré 1978);
- **a damping ladder**: every iteration solves for μ·:data:`LADDER` at once and evaluates every trial point
  (forward residual evaluations cost about 1 % of a Jacobian on the CAMEL fit); μ then continues from the rung
  that won, ÷3 on accept and ×2 past the top rung on reject (delayed gratification, Transtrum & Sethna 2012);
- **geodesic acceleration** (Transtrum & Sethna 2012, arXiv:1201.5885) for every rung: the second directional
  derivative of the residuals from one extra forward evaluation, ``a = −(Jᵀ Ω J + μ D)⁻¹ Jᵀ Ω r_vv``, the step
  ``v + a/2`` tried where ``2‖a‖/‖v‖ ≤ 0.75``: steps that follow a curved valley instead of crossing it.

Measured (``benchmarks/solver_iters.py``): the CAMEL fit finishes at 1.283113e-3, below scipy's 1.283164e-3 (the
old rule: private ``_rule``). The Jacobian goes by the chain rule through the natural parameters
(:func:`~mixlaw.fit.solver.steps.split_jacobian`); resample refits use the *lazy* ladder (:func:`_lazy_candidates`).
Converged rows leave the active set; rows of one problem at the same point (``merge_tol``) are merged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from mixlaw.fit.solver.halt import Halter
from mixlaw.fit.solver.pools import trim_heap
from mixlaw.fit.solver.settings import DEFAULT_SETTINGS, SolveSettings
from mixlaw.fit.solver.steps import (
    LADDER,
    LADDER_FIRST,
    LADDER_REST,
    ResidualFn,
    _damped_step,
    _ladder_steps,
    _trial_objectives,
    repair_jacobian,
    rho,
    rung_candidates,
    split_jacobian,
)

__all__ = ["LADDER", "ResidualFn", "SolveResult", "SolveSettings", "objective_values", "rho", "solve"]

STATUS_CONVERGED = "converged"
STATUS_MAX_ITER = "max_iter"
STATUS_FAILED = "failed"
STATUS_MERGED = "merged"
STATUS_STALLED = "stalled"
#: Windows (of ``stall_window`` iterations) over which the noise-scaled stall test of :func:`solve` measures the fall.
UNITS_WINDOWS = 2

#: The step rule (private, for ``benchmarks/solver_iters.py`` only): ``"new"`` — the damping ladder with Moré
#: scaling and geodesic acceleration; ``"ladder"`` — the ladder without the acceleration; ``"old"`` — the rule of
#: before (two candidate steps at one μ, Marquardt scaling from the current diagonal, μ ÷5 / ×10).
_RULE: Literal["new", "old", "ladder"] = "new"
#: The Jacobian by the chain rule through the natural parameters (:func:`~mixlaw.fit.solver.steps.split_jacobian`) where
#: the residual function exposes its stages; ``False`` (private, for benchmarks): the one-pass Jacobian everywhere.
_TWO_STAGE = True


def _psi_and_weight(r: torch.Tensor, loss: str, delta: float) -> tuple[torch.Tensor, torch.Tensor]:
    if loss == "l2":
        return r, torch.ones_like(r)
    a = r.abs()
    w = torch.where(a <= delta, torch.ones_like(r), delta / torch.clamp(a, min=delta))
    return w * r, w


@dataclass(frozen=True)
class SolveResult:
    """Per-row outcome of :func:`solve` (all arrays have a leading dimension K)."""

    x: np.ndarray  # (K, P) internal parameters at the end
    f: np.ndarray  # (K,) objective at the end (inf when failed)
    grad_norm: np.ndarray  # (K,) max-abs gradient at the end
    n_iter: np.ndarray  # (K,) iterations taken by the row
    status: np.ndarray  # (K,) object array of status strings
    merged_into: np.ndarray  # (K,) index of the survivor row for merged rows, else -1
    total_iter: int
    halted: np.ndarray | None = None  # (K,) rows stopped by the ``halt`` rule (mixlaw.fit.solver.halt)


def objective_values(
    residuals: ResidualFn,
    U: np.ndarray | torch.Tensor,
    pid: np.ndarray | torch.Tensor,
    W: torch.Tensor,
    *,
    loss: str = "huber",
    delta: float = 1e-3,
) -> np.ndarray:
    """Objective of every row at ``U`` (non-finite residuals give ``inf``)."""
    Ut = torch.tensor(np.asarray(U, dtype=np.float64)) if not isinstance(U, torch.Tensor) else U  # a copy: U may be
    pt = torch.tensor(np.asarray(pid, dtype=np.int64)) if not isinstance(pid, torch.Tensor) else pid  # read-only
    with torch.no_grad():
        r = residuals(Ut, pt)
        f = (W[pt] * rho(r, loss, delta)).sum(-1)
    f = torch.where(torch.isfinite(f), f, torch.full_like(f, np.inf))
    return f.numpy()


def _residuals_and_jacobian(
    residuals: ResidualFn, U: torch.Tensor, pid: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Residuals ``(K, n)`` and their Jacobian ``(K, n, P)`` in ONE reverse-mode pass.

    Every point gets its own copy of its row's parameters (``U`` expanded to ``(K, n, P)``); residual ``(k, i)``
    then depends on copy ``(k, i)`` only, so the gradient of ``Σ r`` with respect to the copies *is* the Jacobian.
    This is much cheaper than ``P`` forward-mode passes (forward AD of scalar–tensor ops takes slow
    decomposition paths in PyTorch) or ``n`` reverse passes. Entries that reverse mode overflowed where the
    residuals are finite are finite differences instead (:func:`~mixlaw.fit.solver.steps.repair_jacobian`).
    """
    two = split_jacobian(residuals, U.detach(), pid, n) if _TWO_STAGE else None
    if two is not None:
        return two[0], repair_jacobian(residuals, U.detach(), pid, two[0], two[1])
    Ue = U.detach().unsqueeze(1).expand(-1, n, -1).clone().requires_grad_(True)
    with torch.enable_grad():
        r = residuals(Ue, pid)
        (J,) = torch.autograd.grad(r.sum(), Ue, allow_unused=True)
    if J is None:  # residuals do not depend on the parameters at all
        J = torch.zeros_like(Ue)
    # A law with its own autograd-free value (camel): the residuals as the trial points get them, bit for bit.
    r = residuals(U.detach(), pid) if hasattr(residuals, "natural_grad") else r.detach()
    return r, repair_jacobian(residuals, U.detach(), pid, r, J)  # reverse mode's overflows where r is finite


def solve(
    residuals: ResidualFn,
    U0: np.ndarray,
    pid: np.ndarray,
    W: torch.Tensor,
    settings: SolveSettings = DEFAULT_SETTINGS,
    *,
    callback: Callable[[int, int], None] | None = None,
    history: list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None,
    trace: list[dict[str, np.ndarray]] | None = None,
    halt: Callable[[np.ndarray], np.ndarray] | None = None,
) -> SolveResult:
    """Minimise ``K`` independent robust least-squares problems at once.

    Parameters
    ----------
    residuals
        Vectorised residual function, see :data:`ResidualFn`. Plain differentiable torch ops.
    U0
        ``(K, P)`` internal starting points.
    pid
        ``(K,)`` problem id of every row: an index into ``W``.
    W
        ``(n_problems, n)`` non-negative point weights per problem.
    settings
        The loss, the tolerances and the rules of the solve (:class:`~mixlaw.fit.solver.settings.SolveSettings`:
        iteration cap, ``ftol``/``xtol``, merging, damping, the stall tests, the damping ladder).
    callback
        ``callback(iteration, n_active)`` after each iteration (for progress bars).
    history, trace
        Lists for diagnosis, appended per iteration: ``(rows, f, grad_norm)`` (the active rows, their objective
        after, max-abs gradient before); a dict ``rows, f, accept, mu, winner, step, x``.
    halt
        ``halt(x) -> settled`` on the internal points of active rows: a problem whose active rows are all settled
        (and hold its lowest objective) for a while stops as ``stalled``, marked in ``halted``
        (:mod:`mixlaw.fit.solver.halt`); ``None`` (default): off.
    """
    loss, delta, max_iter, ftol, xtol = settings.loss, settings.delta, settings.max_iter, settings.ftol, settings.xtol
    merge_tol, mu0, max_step, ladder = settings.merge_tol, settings.mu0, settings.max_step, settings.ladder
    stall_window, stall_tol, stall_units = settings.stall_window, settings.stall_tol, settings.stall_units
    spare_best, _rule = settings.spare_best, settings.rule or _RULE
    # A private, writable copy: torch warns about (and must never write through) a read-only view such as the
    # broadcast of one shared start list over every problem.
    U = torch.from_numpy(np.array(U0, dtype=np.float64, copy=True))
    K, P = U.shape
    pid_np = np.array(pid, dtype=np.int64, copy=True)
    pid_t = torch.from_numpy(pid_np)
    rows = np.arange(K)
    f_out = np.concatenate(
        [objective_values(residuals, U[c], pid_t[c], W, loss=loss, delta=delta)
         for c in _row_chunks(rows, int(W.shape[1]), _n_candidates(loss, ladder))] or [np.zeros(0)]
    )  # fmt: skip  (chunked like the iterations: K × n cells at once was the largest block of a long fit)
    g_out = np.full(K, np.inf)
    n_iter = np.zeros(K, dtype=np.int64)
    status = np.array([STATUS_MAX_ITER] * K, dtype=object)
    merged_into = np.full(K, -1, dtype=np.int64)
    mu = torch.full((K,), mu0, dtype=torch.float64)
    units_window = UNITS_WINDOWS * stall_window  # the noise-scaled test looks further back (docstring)
    f_ring = np.full((K, units_window if stall_units is not None else stall_window), np.inf)
    D_run = torch.zeros((K, P), dtype=torch.float64)  # Moré scaling: running max of diag(Jᵀ Ω J) per row
    mu_old = torch.full((K,), mu0, dtype=torch.float64)  # the damping of the old rule's candidate steps

    halter, halted = (Halter(halt, pid_np) if halt is not None else None), np.zeros(K, dtype=bool)
    fell = np.zeros(K, dtype=bool)  # the row has taken a step that lowered its objective (the edge rule below)
    bad = ~np.isfinite(f_out)
    status[bad] = STATUS_FAILED
    active = np.flatnonzero(~bad)

    def _iterate(ia: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """One iteration's candidates for rows ``ia``: objective, gradient, finiteness, the winning step, its
        damping, the largest damping tried, the winner's index and its objective (``D_run`` updated in place)."""
        Ua, pa = U[ia], pid_t[ia]
        Wa = W[pa]
        with torch.no_grad():
            r, J = _residuals_and_jacobian(residuals, Ua, pa, W.shape[1])
            psi, omega = _psi_and_weight(r, loss, delta)
            f = (Wa * rho(r, loss, delta)).sum(-1)
            g = torch.einsum("kn,knp->kp", Wa * psi, J)
            Jt = J.transpose(1, 2)
            A = torch.bmm(Jt * (Wa * omega).unsqueeze(1), J)
            finite = torch.isfinite(f) & torch.isfinite(g).all(-1) & torch.isfinite(A).flatten(1).all(-1)
            A = torch.where(finite[:, None, None], A, torch.eye(P, dtype=torch.float64))
            g = torch.where(finite[:, None], g, torch.zeros_like(g))
            # Two candidate steps, both damped by the same μ: the IRLS (majoriser) step, robust far from the
            # optimum, and the Gauss–Newton step with the loss's own curvature ρ'' (1 inside δ, 0 outside),
            # which converges fast once the set of points inside δ has settled. The better one is taken.
            if loss == "l2":
                A2 = A
            else:
                inside = (r.abs() <= delta).to(r.dtype)
                A2 = torch.bmm(Jt * (Wa * inside).unsqueeze(1), J)
                A2 = torch.where(finite[:, None, None], A2, torch.eye(P, dtype=torch.float64))
            mua = mu[ia]
            mats = [A] if loss == "l2" else [A, A2]
            if _rule == "old":
                steps = torch.stack([_damped_step(M, g, mua, max_step) for M in mats], 1)  # (k, C, P)
                mu_c = mua[:, None].expand(-1, len(mats))
            else:
                diag = torch.where(finite[:, None], A.diagonal(dim1=-2, dim2=-1), torch.zeros_like(g))
                D_run[ia] = torch.maximum(D_run[ia], diag)
            if _rule == "new":  # the ladder, the geodesic acceleration of every rung, the old rule's steps
                wts = [Wa * omega] if loss == "l2" else [Wa * omega, Wa * inside]
                args = (residuals, Ua, pa, Wa, r, J, mats, wts, g, mua, D_run[ia])
                if ladder == "lazy":
                    steps, mu_c, f_try = _lazy_candidates(args, f, finite, max_step, loss, delta, mu_old[ia])
                else:
                    steps, mu_c, f_try = rung_candidates(
                        args, LADDER, finite, max_step, loss, delta, mu_old=mu_old[ia]
                    )  # fmt: skip
            else:
                if _rule == "ladder":
                    steps, mu_c, _ = _ladder_steps(mats, g, mua, [(D_run[ia], LADDER)], max_step)
                steps = torch.where(finite[:, None, None], steps, torch.zeros_like(steps))
                f_try = _trial_objectives(residuals, Ua, pa, Wa, steps, loss, delta)
            best_f, winner = f_try.min(-1)  # the first of equal candidates wins
            step = steps.gather(1, winner[:, None, None].expand(-1, 1, P)).squeeze(1)
            mu_win = mu_c.gather(1, winner[:, None]).squeeze(1)
            f_new = best_f
        return f, g, finite, step, mu_win, mu_c.amax(-1), winner, f_new

    n_points, n_cand = int(W.shape[1]), _n_candidates(loss, ladder)
    W_sum = W.sum(-1)
    it = 0
    for it in range(1, max_iter + 1):
        if active.size == 0:
            break
        # One iteration of every active row, in chunks of rows: a row's trial points cost candidates × points
        # cells, so at 250,000 points one row's trials are the chunk (memory linear in the points, never
        # rows × candidates × points at once). The rows are independent problems: a chunk changes no step beyond the
        # rounding of a batched kernel of another size (tests/test_memory_linear.py).
        parts = []
        for c in _row_chunks(active, n_points, n_cand):
            parts.append(_iterate(torch.as_tensor(c)))
            if n_points * n_cand >= TRIM_CELLS:
                trim_heap()  # the chunk's freed tensors back to the OS: resident memory follows the live set
        f, g, finite, step, mu_win, mu_hi, winner, f_new = (torch.cat(x) for x in zip(*parts, strict=True))
        ia = torch.as_tensor(active)
        Ua, pa, mua = U[ia], pid_t[ia], mu[ia]
        accept = finite & (f_new <= f)
        U[ia] = torch.where(accept[:, None], Ua + step, Ua)
        f_cur = torch.where(accept, f_new, f)
        if _rule == "old":
            mu[ia] = torch.where(accept, torch.clamp(mua / 5.0, min=1e-15), torch.clamp(mua * 10.0, max=1e15))
        else:  # delayed gratification (Transtrum & Sethna 2012): from the μ that won, a little less next time
            mu[ia] = torch.where(
                accept, torch.clamp(mu_win / 3.0, min=1e-15), torch.clamp(mu_hi * 2.0, max=1e15)
            )
            mo = mu_old[ia]
            mu_old[ia] = torch.where(accept, torch.clamp(mo / 5.0, min=1e-15), torch.clamp(mo * 10.0, max=1e15))

        acc = accept.numpy()
        fell[active] |= acc & (f_new < f).numpy()
        f_np = f_cur.numpy()
        f_out[active] = f_np
        g_out[active] = g.abs().amax(-1).numpy()
        n_iter[active] += 1
        if history is not None:
            history.append((active.copy(), f_np.copy(), g_out[active].copy()))
        if trace is not None:
            trace.append(
                dict(rows=active.copy(), f=f_np.copy(), accept=acc.copy(), mu=mua.numpy().copy(),
                     winner=winner.numpy().copy(), step=step.numpy().copy(), x=U[ia].numpy().copy())
            )  # fmt: skip
        dec = (f - f_cur).numpy()
        small_dec = dec <= ftol * np.maximum(np.abs(f_np), 1e-300)
        small_step = (step.abs() <= xtol * (1.0 + Ua.abs())).all(-1).numpy()
        saturated = (mu[ia].numpy() >= 1e15) & ~acc
        finite_np = finite.numpy()
        # A row whose objective is finite but whose derivatives overflowed (a parameter run to the edge of the
        # representable range, e.g. a mixture weight underflowing to 0 after thousands of accepted steps) cannot
        # take another step. If its objective fell from the start and its point is finite, it stops as stalled
        # with its last objective (the point fit re-polishes a stalled estimate, see mixlaw.fit.solver.refine), at any
        # iteration; a row that never descended fails (a resample is then rescued). Before the chain-rule Jacobian this
        # took more than stall_window iterations, so the same row failed at iteration 30 and stalled at 31.
        # (Whether it fell is counted from accepted steps, not by comparing f with the start's objective: the two
        # are computed by different code paths and can differ in the last bit at the same point.)
        edge = ~finite_np & np.isfinite(f.numpy()) & fell[active] & torch.isfinite(Ua).all(-1).numpy()
        failed = ~finite_np & ~edge
        done = ((acc & small_dec & small_step) | saturated) & finite_np  # an edge row is never converged
        # Stalled: a row creeping along a flat valley (an exponent running off while its amplitude goes to 0, two
        # terms trading places) whose objective fell by less than stall_tol (relative) over the last stall_window
        # iterations. It stops with its own status — its objective is final to that precision, its parameters are
        # not certified — instead of burning the iteration budget.
        ring = f_ring.shape[1]
        slot = it % ring
        old = f_ring[active, (it - stall_window) % ring]  # the objective stall_window iterations ago
        tol_f = stall_tol * np.maximum(np.abs(f_np), 1e-300)
        stalled = (n_iter[active] > stall_window) & (old - f_np <= tol_f)
        if stall_units is not None:  # over UNITS_WINDOWS windows: a valley crawled slowly before it speeds up
            tol_u = stall_units * np.abs(f_np) / np.maximum(W_sum[pa].numpy(), 1e-300)
            if spare_best:  # the lowest row of each problem is the estimate: it stops on the relative test only
                best = np.full(W.shape[0], np.inf)
                live = status != STATUS_FAILED
                np.minimum.at(best, pid_np[live], f_out[live])
                tol_u = np.where(f_np <= best[pid_np[active]], 0.0, tol_u)
            older = f_ring[active, slot]  # units_window iterations ago
            stalled |= (n_iter[active] > units_window) & (older - f_np <= tol_u)
        stalled = (stalled | edge) & ~done & ~failed
        if halter is not None:  # the problems whose outcome is settled (mixlaw.fit.solver.halt)
            go = ~(done | failed | stalled)
            live = status != STATUS_FAILED
            live[active[failed]] = False
            stop = halter.stop(it, active[go], U[torch.as_tensor(active[go])].numpy(), f_out, live)
            halted[active[go][stop]] = True
            stalled[np.flatnonzero(go)[stop]] = True
        f_ring[active, slot] = f_np
        status[active[done & ~failed]] = STATUS_CONVERGED
        status[active[stalled]] = STATUS_STALLED
        status[active[failed]] = STATUS_FAILED
        f_out[active[failed]] = np.inf
        active = active[~(done | failed | stalled)]

        if merge_tol is not None and active.size > 1:
            active = _merge(U, pid_t, active, merge_tol, status, merged_into)
        if callback is not None:
            callback(it, int(active.size))

    for k in np.flatnonzero(merged_into >= 0):
        root = int(merged_into[k])
        while merged_into[root] >= 0:
            root = int(merged_into[root])
        merged_into[k] = root
        U[k] = U[root]
        f_out[k], g_out[k] = f_out[root], g_out[root]
    return SolveResult(
        x=U.numpy().copy(),
        f=f_out,
        grad_norm=g_out,
        n_iter=n_iter,
        status=status,
        merged_into=merged_into,
        total_iter=it,
        halted=halted,
    )


#: Cells (rows × trial points × data points) of one chunk of an iteration of :func:`solve`: above it the active
#: rows are processed in chunks (:func:`_row_chunks`), so the memory of a fit is linear in its data points. At
#: 4.5e6 cells (36 MB per float64 tensor) a 32-start fit is one chunk up to 6,400 points; the 240-point Epoch fit
#: and every bootstrap chunk (:data:`mixlaw.fit.uncertainty.bootstrap.CHUNK_CELLS` × 22 trial points) stay one chunk.
ITER_CELLS = 4_500_000
#: Trial cells of one row (candidates × data points) from which :func:`solve` hands the freed heap back to the OS
#: after every row chunk (:func:`mixlaw.fit.solver.pools.trim_heap`; about 23,000 points and more): without it the
#: resident set of a 100,000-row fit reached 1,410 MB while its live tensors stayed under ~550 MB.
TRIM_CELLS = 500_000


def _n_candidates(loss: str, ladder: str) -> int:
    """Trial points per row and iteration (the full ladder's: an upper bound of the lazy ladder's)."""
    models = 1 if loss == "l2" else 2
    return 2 * len(LADDER) * models + models


def _row_chunks(active: np.ndarray, n_points: int, n_cand: int) -> list[np.ndarray]:
    """``active`` in consecutive chunks of at most :data:`ITER_CELLS` ``/ (n_cand · n_points)`` rows (≥ 1)."""
    per = max(1, ITER_CELLS // max(1, n_cand * n_points))
    if active.size <= per:
        return [active]
    return [active[i : i + per] for i in range(0, active.size, per)]


def _lazy_candidates(
    args: tuple[Any, ...],
    f: torch.Tensor,
    finite: torch.Tensor,
    max_step: float,
    loss: str,
    delta: float,
    mu_old: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The lazy ladder: :data:`LADDER_FIRST` (with accelerations and the old steps) for every row, then
    :data:`LADDER_REST` for the rows whose best first candidate does not lower the objective; the candidates not
    evaluated have an infinite objective. A row the first rungs improve takes their best step; a row they do not
    improve sees every candidate of the full ladder, so its rejection (and the ×2 past the top rung) is the same."""
    steps, mu_c, f_try = rung_candidates(args, LADDER_FIRST, finite, max_step, loss, delta, mu_old=mu_old)
    need = torch.nonzero(finite & ~(f_try.amin(-1) <= f), as_tuple=True)[0]
    k, _, P = steps.shape
    C2 = 2 * len(LADDER_REST) * len(args[6])  # steps and accelerations per model, for each rest rung
    s2 = torch.zeros(k, C2, P, dtype=steps.dtype)
    m2 = args[9][:, None] * max(LADDER_REST)  # rows not evaluated: the top rung's damping
    m2 = m2.expand(-1, C2).clone()
    f2 = torch.full((k, C2), np.inf, dtype=f_try.dtype)
    if need.numel():
        sub = (args[0], *(a[need] if isinstance(a, torch.Tensor) else [m[need] for m in a] for a in args[1:]))
        s2s, m2s, f2s = rung_candidates(sub, LADDER_REST, finite[need], max_step, loss, delta)
        s2[need], m2[need], f2[need] = s2s, m2s, f2s
    return torch.cat([steps, s2], 1), torch.cat([mu_c, m2], 1), torch.cat([f_try, f2], 1)


def _merge(
    U: torch.Tensor,
    pid: torch.Tensor,
    active: np.ndarray,
    tol: float,
    status: np.ndarray,
    merged_into: np.ndarray,
) -> np.ndarray:
    """Drop active rows that coincide (max-abs distance ≤ tol) with another active row of the same problem."""
    ia = torch.as_tensor(active)
    Ua = U[ia].numpy()
    rows = np.concatenate([pid[ia].numpy()[:, None].astype(np.float64), np.round(Ua / tol)], axis=1)
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    survivor = first[inverse.reshape(-1)]
    dup = (survivor != np.arange(active.size)) & (np.abs(Ua - Ua[survivor]).max(axis=1) <= tol)
    if not dup.any():
        return active
    status[active[dup]] = STATUS_MERGED
    merged_into[active[dup]] = active[survivor[dup]]
    return active[~dup]
