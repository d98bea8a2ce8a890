"""The step rule's pieces for :func:`mixlaw.fit.solver.solve.solve`: the loss, damped steps, the damping ladder,
geodesic
acceleration, trial objectives, and the finite-difference repair of Jacobian entries that reverse mode overflowed.

Split out of :mod:`mixlaw.fit.solver.solve` (the 500-line limit); :mod:`mixlaw.fit.solver.solve` re-exports ``rho``,
``ResidualFn`` and ``LADDER``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

ResidualFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``residuals(U, pid) -> R`` with ``U`` internal parameters of shape (K, P) — or (K, n, P), one copy per point,
when the solver asks for the Jacobian — ``pid`` (K,) problem ids, and ``R`` (K, n)."""


def rho(r: torch.Tensor, loss: str, delta: float) -> torch.Tensor:
    """Pointwise loss: Huber_δ(r) = r²/2 if |r| ≤ δ else δ(|r| − δ/2); or r²/2 for ``loss="l2"``."""
    if loss == "l2":
        return 0.5 * r * r
    a = r.abs()
    return torch.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def _damped_step(A: torch.Tensor, g: torch.Tensor, mu: torch.Tensor, max_step: float) -> torch.Tensor:
    """Solve ``(A + μ·diag(A)) p = −g`` per row (Marquardt scaling, floored), then cap ``‖p‖∞`` at ``max_step``."""
    diag = A.diagonal(dim1=-2, dim2=-1)
    scale = torch.clamp(diag, min=1e-12 * torch.clamp(diag.amax(-1, keepdim=True), min=1e-300))
    step, info = torch.linalg.solve_ex(A + mu[:, None, None] * torch.diag_embed(scale), -g.unsqueeze(-1))
    step = step.squeeze(-1)
    bad = (info != 0) | ~torch.isfinite(step).all(-1)
    step = torch.where(bad[:, None], -g / (scale * (1.0 + mu[:, None])), step)
    big = step.abs().amax(-1, keepdim=True)
    return step * torch.clamp(max_step / torch.clamp(big, min=1e-300), max=1.0)


#: The damping ladder of the new step rule: every iteration tries the current μ times each factor (for each of the
#: two curvature models, with Moré's scaling) and keeps the best trial point. Forward residual evaluations cost
#: about 1 % of the Jacobian on the CAMEL fit, so five trial points per model are nearly free.
LADDER = (1e-1, 1.0, 1e1, 1e3, 1e6)


def _ladder_steps(
    mats: list[torch.Tensor],
    g: torch.Tensor,
    mu: torch.Tensor,
    scalings: list[tuple[torch.Tensor, tuple[float, ...]]],
    max_step: float,
) -> tuple[torch.Tensor, torch.Tensor, list[tuple[torch.Tensor, torch.Tensor, int]]]:
    """Damped steps ``(A + μ_c·D) p = −g`` for every model ``A``, scaling ``D`` and rung ``μ_c = μ·factor``, capped.

    The scaling used is Moré's (the running max of diag(Jᵀ Ω J), floored at 1e-12 of its largest entry): a
    coordinate whose Jacobian column has died (a mixture logit or a log-amplitude run towards −∞, an infimum at
    infinity) keeps the damping of the scale it once had, so its near-singular Gauss–Newton component — about
    1e10 on the CAMEL fit — no longer dominates ``‖p‖∞`` and makes the cap shrink every other coordinate's step
    to nothing (the crawl measured on main). Returns steps ``(k, C, P)``, their damping ``(k, C)`` and per
    block the LU factors of the damped matrices and the block's model (for the geodesic acceleration).
    """
    out, mus, blocks = [], [], []
    for m, M in enumerate(mats):
        for D, factors in scalings:
            lad = torch.tensor(factors, dtype=torch.float64)
            scale = torch.clamp(D, min=1e-12 * torch.clamp(D.amax(-1, keepdim=True), min=1e-300))
            mu_c = mu[:, None] * lad[None, :]  # (k, L)
            lhs = M[:, None] + mu_c[:, :, None, None] * torch.diag_embed(scale)[:, None]  # (k, L, P, P)
            LU, piv, info = torch.linalg.lu_factor_ex(lhs)
            st = torch.linalg.lu_solve(LU, piv, -g[:, None, :, None].expand(-1, lad.numel(), -1, -1)).squeeze(-1)
            bad = (info != 0) | ~torch.isfinite(st).all(-1)
            st = torch.where(bad[..., None], -g[:, None, :] / (scale[:, None, :] * (1.0 + mu_c[..., None])), st)
            out.append(_cap(st, max_step))
            mus.append(mu_c)
            blocks.append((LU, piv, m))
    return torch.cat(out, 1), torch.cat(mus, 1), blocks


def _cap(st: torch.Tensor, max_step: float) -> torch.Tensor:
    big = st.abs().amax(-1, keepdim=True)
    return st * torch.clamp(max_step / torch.clamp(big, min=1e-300), max=1.0)


#: Geodesic acceleration (Transtrum & Sethna 2012, arXiv:1201.5885): finite-difference step ``h`` for the second
#: directional derivative of the residuals, and the largest accepted ``2‖a‖/‖v‖``.
GEODESIC_H = 0.1
GEODESIC_ALPHA = 0.75


def _geodesic(
    residuals: ResidualFn,
    Ua: torch.Tensor,
    pa: torch.Tensor,
    r: torch.Tensor,
    J: torch.Tensor,
    v: torch.Tensor,
    blocks: list[tuple[torch.Tensor, torch.Tensor, int]],
    weights: list[torch.Tensor],
    max_step: float,
) -> torch.Tensor:
    """Geodesically accelerated steps ``v + a/2`` for every candidate velocity ``v`` ``(k, C, P)``.

    ``r_vv ≈ (2/h)·((r(u + h v) − r(u))/h − J v)`` (one extra forward residual evaluation per candidate), and
    ``a = −(Jᵀ Ω J + μ D)⁻¹ Jᵀ Ω r_vv`` with the candidate's own model and damping; where ``2‖a‖/‖v‖`` exceeds
    :data:`GEODESIC_ALPHA` (the second-order correction is not small) the candidate stays ``v``. Following the
    curvature of the model manifold is what lets a step go along a narrow curved valley instead of across it.
    Accelerating every rung, not only the best velocity, matters: on the flat power-law valley of
    ``tests/test_solve_steps.py`` the best-rung-only variant took 208 iterations where this one takes 67.
    """
    k, C, P = v.shape
    h = GEODESIC_H
    rh = residuals((Ua[:, None, :] + h * v).reshape(-1, P), pa.repeat_interleave(C)).reshape(k, C, -1)
    rvv = (2.0 / h) * ((rh - r[:, None, :]) / h - torch.einsum("knp,kcp->kcn", J, v))
    acc, at = [], 0
    for LU, piv, m in blocks:
        L = LU.shape[1]
        rhs = torch.einsum("kn,kcn,knp->kcp", weights[m], rvv[:, at : at + L], J)
        acc.append(torch.linalg.lu_solve(LU, piv, -rhs.unsqueeze(-1)).squeeze(-1))
        at += L
    a = torch.cat(acc, 1)
    ratio = 2.0 * a.norm(dim=-1) / torch.clamp(v.norm(dim=-1), min=1e-300)
    ok = torch.isfinite(a).all(-1) & (ratio <= GEODESIC_ALPHA)
    return torch.where(ok[..., None], _cap(v + 0.5 * a, max_step), v)


#: The lazy ladder (``solve(..., ladder="lazy")``, used by resample refits): the rungs tried first, and the rungs
#: tried only by the rows that none of the first rungs (nor their accelerations, nor the old rule's steps) improved.
LADDER_FIRST = (1e-1, 1.0, 1e1)
LADDER_REST = (1e3, 1e6)


def rung_candidates(
    args: tuple[Any, ...],
    factors: tuple[float, ...],
    finite: torch.Tensor,
    max_step: float,
    loss: str,
    delta: float,
    mu_old: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The new rule's candidates for rungs ``μ·factors``: the damped steps of every model, their geodesic
    accelerations, and (with ``mu_old``) the old rule's two steps; returns steps ``(k, C, P)``, their damping
    ``(k, C)`` and the objective at every trial point ``(k, C)`` (in this order: steps, accelerations, old).
    ``args`` is ``(residuals, U, pid, W, r, J, models, IRLS weights per model, g, μ, Moré scaling D)`` of the rows.
    """
    residuals, Ua, pa, Wa, r, J, mats, wts, g, mu, D = args
    zero = torch.zeros((), dtype=Ua.dtype)
    steps, mu_c, lus = _ladder_steps(mats, g, mu, [(D, factors)], max_step)
    steps = torch.where(finite[:, None, None], steps, zero)
    f_try = _trial_objectives(residuals, Ua, pa, Wa, steps, loss, delta)
    geo = torch.where(finite[:, None, None], _geodesic(residuals, Ua, pa, r, J, steps, lus, wts, max_step), zero)
    more, mus = [geo], [mu_c]
    if mu_old is not None:
        # The old rule's own steps, at its own damping, stay candidates: where the fit runs along a ridge to
        # infinity whose Jacobian columns decay as it is followed (two cpt_replay parameters running to ∓20 with
        # their sum fixed), Moré's damping holds the ladder back and the old steps go further.
        old = torch.stack([_damped_step(M, g, mu_old, max_step) for M in mats], 1)
        more.append(torch.where(finite[:, None, None], old, zero))
        mus.append(mu[:, None].expand(-1, len(mats)))
    extra = torch.cat(more, 1)
    f_extra = _trial_objectives(residuals, Ua, pa, Wa, extra, loss, delta)  # one call for the rest
    return torch.cat([steps, extra], 1), torch.cat([mu_c, *mus], 1), torch.cat([f_try, f_extra], 1)


def _trial_objectives(
    residuals: ResidualFn,
    Ua: torch.Tensor,
    pa: torch.Tensor,
    Wa: torch.Tensor,
    steps: torch.Tensor,
    loss: str,
    delta: float,
) -> torch.Tensor:
    """Objective ``(k, C)`` at every trial point ``Ua + steps`` (``inf`` where not finite), in one call."""
    k, C, P = steps.shape
    r = residuals((Ua[:, None, :] + steps).reshape(-1, P), pa.repeat_interleave(C))
    f = (Wa.repeat_interleave(C, 0) * rho(r, loss, delta)).sum(-1)
    return torch.where(torch.isfinite(f), f, torch.full_like(f, np.inf)).reshape(k, C)


def split_jacobian(
    residuals: ResidualFn, U: torch.Tensor, pid: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Residuals ``(K, n)`` and their Jacobian ``(K, n, P)`` by the chain rule through the natural parameters, or
    ``None`` where the residual function does not expose its two stages (``residuals.split``).

    ``J = (∂r/∂θ)(∂θ/∂u)``: the map ``u → θ`` (exp, softmax, the bounds' clamp) is differentiated once per row, by
    one reverse pass over ``F`` copies of the row (``F`` = the number of natural entries), and the law once per
    point, by one reverse pass over ``n`` copies of the *natural* parameters. The one-pass Jacobian of
    :func:`mixlaw.fit.solver.solve._residuals_and_jacobian` runs the map over ``n`` copies instead, which on the CAMEL
    k = 3 fit (28 internal coordinates, softmax blocks, 200 points) costs most of the pass. The product is formed
    per natural entry over the internal coordinates it depends on (its nonzero columns of ``∂θ/∂u``), so an entry
    that overflowed in either factor (reverse mode at a subnormal ``K``, see :func:`repair_jacobian`) spoils only
    the columns it feeds, as in the one-pass Jacobian, and the repair replaces them.
    """
    split = getattr(residuals, "split", None)
    if split is None:
        return None
    natural, from_natural = split
    K, P = U.shape
    with torch.no_grad():
        nat = natural(U)
    shapes = {k: tuple(v.shape) for k, v in nat.items()}
    if any(len(s) < 2 or s[:2] != (K, 1) for s in shapes.values()):
        return None
    F = sum(int(np.prod(s[2:])) for s in shapes.values())
    if F >= n and getattr(residuals, "natural_grad", None) is None:  # the one-pass Jacobian is no dearer
        return None
    closed = getattr(residuals, "natural_jacobian", None)  # ∂θ/∂u in closed form (mixlaw.fit.problem.data)
    dT: torch.Tensor | None
    if closed is not None:
        dT = closed(U.detach())
    else:
        Ue = U.detach().unsqueeze(1).expand(-1, F, -1).clone().requires_grad_(True)
        with torch.enable_grad():
            ne = natural(Ue)  # (K, F) scalars, (K, F, m) vectors: row copy f of entry f
            flat = torch.cat([v.reshape(K, F, -1) for v in ne.values()], 2)
            (dT,) = torch.autograd.grad(flat.diagonal(dim1=1, dim2=2).sum(), Ue, allow_unused=True)
    analytic = getattr(residuals, "natural_grad", None)  # the law's own derivatives: no per-point copies
    gs: Sequence[torch.Tensor | None]
    if analytic is not None:
        r, gd = analytic(nat, pid)
        gs = [gd[k] for k in nat]
    else:
        pe = {k: v.detach().expand(K, n, *v.shape[2:]).clone().requires_grad_(True) for k, v in nat.items()}
        with torch.enable_grad():
            r = from_natural(pe, pid)
            gs = torch.autograd.grad(r.sum(), list(pe.values()), allow_unused=True)
    if dT is None:
        dT = torch.zeros_like(Ue)  # (K, F, P)
    parts: list[tuple[int, int, torch.Tensor]] = []  # (first column, end column, block (K, n, end − first))
    f0 = 0
    for g, v in zip(gs, nat.values(), strict=True):
        m = int(np.prod(v.shape[2:]))
        blk = dT[:, f0 : f0 + m, :]  # (K, m, P): where this entry's internal coordinates are
        f0 += m
        cols = torch.nonzero((blk != 0).any(0).any(0), as_tuple=True)[0]
        if g is None or cols.numel() == 0:
            continue
        c0, c1 = int(cols[0]), int(cols[-1]) + 1
        gr, bc = g.reshape(K, n, m), blk[:, :, c0:c1]
        if m == 1 and c1 - c0 == 1:  # a scalar through its own coordinate: a product, as reverse mode forms it
            parts.append((c0, c1, gr * bc[:, :, 0, None]))
        else:
            parts.append((c0, c1, torch.bmm(gr, bc)))
    ends = [(a, b) for a, b, _ in parts]
    if (
        ends
        and ends[0][0] == 0
        and ends[-1][1] == P
        and all(b == a2 for (_, b), (a2, _) in zip(ends, ends[1:], strict=False))
    ):
        J = torch.cat([blk for _, _, blk in parts], 2)  # disjoint blocks in order, covering every column
    else:
        J = torch.zeros(K, n, P, dtype=U.dtype)
        for a, b, blk in parts:
            J[:, :, a:b] += blk
    return r.detach(), J


#: Relative step of the finite-difference repair (:func:`repair_jacobian`): ``h = FD_STEP · max(1, |u_j|)``.
FD_STEP = 1e-6


def repair_jacobian(
    residuals: ResidualFn, Ua: torch.Tensor, pa: torch.Tensor, r: torch.Tensor, J: torch.Tensor
) -> torch.Tensor:
    """``J`` with its non-finite entries replaced by finite differences where the residuals themselves are finite.

    Reverse mode can overflow where the function does not: a law that takes ``log`` of a log-mapped parameter
    (CAMEL's ``log K_i`` of ``K_i = exp(u)``) differentiates ``log`` at ``exp(u)``; once ``u`` < −709 that is a
    subnormal number, ``1/K`` overflows to ``inf`` and the column of ``u`` is ``inf`` although ``d log K / du = 1``
    and every residual is finite. The CAMEL k = 3 SlimPajama point fit ends there (one component's ``K`` at
    ``exp(−716.6)``, with ``α`` = 366 carrying it), so every bootstrap resample seeded at it failed on its first
    iteration. Each such column of each row is replaced by a central difference (one-sided, or 0, where a side is
    not finite) of the residuals with step ``FD_STEP·max(1, |u_j|)``; entries reverse mode got finite are kept.
    """
    if bool(torch.isfinite(J.sum())):  # every entry finite (a sum that overflowed takes the full check below)
        return J
    bad = ~torch.isfinite(J)
    col_bad = bad.any(1) & torch.isfinite(r).all(-1)[:, None]  # (k, P)
    if not bool(col_bad.any()):
        return J
    kk, jj = torch.nonzero(col_bad, as_tuple=True)
    m = kk.numel()
    h = FD_STEP * torch.clamp(Ua[kk, jj].abs(), min=1.0)
    at = torch.arange(m)
    up, down = Ua[kk].clone(), Ua[kk].clone()
    up[at, jj] += h
    down[at, jj] -= h
    with torch.no_grad():
        rr = residuals(torch.cat([up, down]), torch.cat([pa[kk], pa[kk]]))
    rp, rm, r0 = rr[:m], rr[m:], r[kk]
    hh = h[:, None]
    col = torch.where(torch.isfinite(rp) & torch.isfinite(rm), (rp - rm) / (2 * hh), (rp - r0) / hh)
    col = torch.where(torch.isfinite(col), col, (r0 - rm) / hh)
    col = torch.where(torch.isfinite(col), col, torch.zeros_like(col))
    J = J.clone()
    J[kk, :, jj] = torch.where(bad[kk, :, jj], col, J[kk, :, jj])
    return J
