"""Profiled (separable) least squares, batched over many problems in one numpy solve.

Every law the CMR decision fits is *separable*: for fixed nonlinear parameters (the token or ratio exponents) its
prediction is linear in the rest (amplitudes and offsets). A law says so by two methods:

- ``profile_points() -> {name: array}``: the nonlinear parameters and a design of points (equal-length arrays)
  over their plausible range;
- ``linear_design(x, theta) -> (linear names, design)``: the columns multiplying the linear parameters, shape
  ``theta.shape + (n, m)``;
- optionally ``from_profile(params) -> params | None``: the law's own parameters from the profiled ones (e.g. a
  log amplitude from a linear amplitude; None when not representable).

Why profile: the two-power ΔL_gen law (CMR paper, Eq. 6) has long flat valleys in which amplitudes and offset
trade off almost exactly; solving them exactly for every exponent pair leaves a 2-D search over exponents only,
which is scanned on the law's design and then refined by a shrinking stencil per problem (compass search on the
profiled objective). A problem is ``converged`` when the stencil has shrunk below ``tol`` with the centre best,
``at bound`` when a nonlinear parameter sits on the edge of the law's declared range, ``failed`` when nothing
finite came out. Every resample of every ratio of a size is a row of the same arrays: one solve per size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixlaw.laws import Law
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = ["PROFILE_ROUNDS", "ProfiledFit", "is_separable", "fit_profiled"]

#: Rounds of the compass search per problem when the solver options set no cap (``SolverOptions.max_iter`` is
#: ``None``): the stencil halves whenever its centre stays best, so a problem reaches ``tol`` in a few dozen.
PROFILE_ROUNDS = 200


def is_separable(law: Law) -> bool:
    """Whether the law declares its separable form (``profile_points`` and ``linear_design``)."""
    return callable(getattr(law, "profile_points", None)) and callable(getattr(law, "linear_design", None))


@dataclass(frozen=True)
class ProfiledFit:
    """One parameter set per problem (``None`` where it failed), its status and its sum of squares."""

    params: list[dict[str, float] | None]
    status: np.ndarray  # (B,) "converged" | "at bound" | "failed"
    sse: np.ndarray  # (B,)

    def row(self, b: int) -> dict[str, float] | None:
        return self.params[b]


def _lstsq(
    design: np.ndarray, y: np.ndarray, w: np.ndarray | None, *, exact: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Batched weighted least squares: design (..., n, m), y (..., n) → coefficients (..., m) and SSE (...).

    Normal equations on unit-norm columns (a 2×2 or 3×3 solve per problem: fast), with the pseudo-inverse
    for the few problems whose equations are singular (collinear columns). ``exact=False`` gets the SSE from
    the normal equations (``y·y − b·c``: enough to rank candidates) instead of from the residuals."""
    if w is not None:
        sw = np.sqrt(w)
        design = design * sw[..., None]
        y = y * sw
    y = np.broadcast_to(y, design.shape[:-1])
    with np.errstate(all="ignore"):
        scale = np.sqrt(np.sum(design**2, axis=-2))  # (..., m)
        scale = np.where(scale > 0, scale, 1.0)
        d = design / scale[..., None, :]
        dt = np.swapaxes(d, -1, -2)
        a = dt @ d
        rhs = (dt @ y[..., None])[..., 0]
        m = a.shape[-1]
        a = a + 1e-13 * np.eye(m)
        try:
            c = np.linalg.solve(a, rhs[..., None])[..., 0]
        except np.linalg.LinAlgError:
            c = (np.linalg.pinv(d, rcond=1e-12) @ y[..., None])[..., 0]
        bad = ~np.all(np.isfinite(c), axis=-1)
        if bad.any():
            c[bad] = (np.linalg.pinv(d[bad], rcond=1e-12) @ y[bad][..., None])[..., 0]
        if exact:
            resid = (d @ c[..., None])[..., 0] - y
            sse = np.sum(resid**2, axis=-1)
        else:
            sse = np.sum(y**2, axis=-1) - np.sum(rhs * c, axis=-1)
        coef = c / scale
    return coef, np.where(np.isfinite(sse), sse, np.inf)


def fit_profiled(
    law: Law,
    x: Mapping[str, np.ndarray],
    Y: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    tol: float = 5e-4,
    solver: SolverOptions = DEFAULT_SOLVER,
    chunk: int = 2_000_000,
) -> ProfiledFit:
    """Least squares of ``law`` for every row of ``Y`` (shape ``(B, n)``) on inputs ``x`` (``(n,)`` or ``(B, n)``).

    ``weights`` (``(B, n)``, 0 or 1 typically) leave points out of a problem (held-out ratios, CMR-law points of
    ratios without a turning point). ``solver``: an explicit ``max_iter`` caps the rounds of the compass search
    (default :data:`PROFILE_ROUNDS`). Returns :class:`ProfiledFit`.
    """
    Y = np.atleast_2d(np.asarray(Y, dtype=np.float64))
    B, n = Y.shape
    xb = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), (B, n)) for k, v in x.items()}
    shared = all(np.asarray(v).ndim == 1 for v in x.values()) and weights is None
    sep: Any = law  # a separable law (see is_separable): profile_points / linear_design are its own methods
    pts = {k: np.asarray(v, dtype=np.float64) for k, v in sep.profile_points().items()}
    names = list(pts)
    G = len(next(iter(pts.values())))
    lo = np.array([pts[k].min() for k in names])
    hi = np.array([pts[k].max() for k in names])
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    # 1. scan the law's design of nonlinear points
    best_sse = np.full(B, np.inf)
    best_i = np.zeros(B, dtype=np.int64)
    if shared:
        x1 = {k: np.asarray(v, dtype=np.float64) for k, v in x.items()}
        lin_names, design = sep.linear_design(x1, pts)  # (G, n, m)
        with np.errstate(all="ignore"):
            pinv = np.linalg.pinv(design, rcond=1e-12)  # (G, m, n)
        m = design.shape[-1]
        step = max(1, chunk // max(1, B * n * m))
        for g0 in range(0, G, step):
            d, p = design[g0 : g0 + step], pinv[g0 : g0 + step]
            with np.errstate(all="ignore"):
                coef = p @ Y.T  # (g, m, B): one BLAS call per chunk
                resid = d @ coef - Y.T[None]  # (g, n, B)
            sse = np.sum(resid**2, axis=1)
            sse = np.where(np.isfinite(sse), sse, np.inf)
            i = np.argmin(sse, axis=0)
            v = sse[i, np.arange(B)]
            better = v < best_sse
            best_sse[better], best_i[better] = v[better], g0 + i[better]
    else:
        step = max(1, chunk // max(1, B * n * 4))
        for g0 in range(0, G, step):
            th = {k: pts[k][g0 : g0 + step, None] for k in names}  # (g, 1) against x (B, n)
            lin_names, design = sep.linear_design({k: v[None] for k, v in xb.items()}, th)
            design = np.broadcast_to(design, (design.shape[0], B, n, design.shape[-1]))
            _, sse = _lstsq(design, np.broadcast_to(Y, design.shape[:-1]), None if w is None else w[None])
            i = np.argmin(sse, axis=0)
            v = sse[i, np.arange(B)]
            better = v < best_sse
            best_sse[better], best_i[better] = v[better], g0 + i[better]
    theta = np.stack([pts[k][best_i] for k in names], axis=1)  # (B, k)
    # 2. compass search per problem on the profiled objective, stencil halving when the centre stays best
    k = len(names)
    spacing = np.array([np.median(np.diff(np.unique(pts[nm]))) if np.unique(pts[nm]).size > 1 else 0.1
                        for nm in names])  # fmt: skip
    h = np.tile(spacing / 2, (B, 1))
    offs = np.array(np.meshgrid(*([[-1.0, 0.0, 1.0]] * k), indexing="ij")).reshape(k, -1).T  # (L, k)
    centre = int(np.flatnonzero(np.all(offs == 0, axis=1))[0])
    cur = best_sse.copy()
    done = np.zeros(B, dtype=bool)
    for _ in range(solver.cap(PROFILE_ROUNDS)):  # an explicit --max-iter caps this search too
        act = np.flatnonzero(~done & np.isfinite(cur))
        if act.size == 0:
            break
        cand = np.clip(theta[None, act] + offs[:, None, :] * h[None, act], lo, hi)  # (L, a, k)
        th = {nm: cand[..., j] for j, nm in enumerate(names)}
        _, design = sep.linear_design({kk: v[None, act] for kk, v in xb.items()}, th)
        _, sse = _lstsq(design, Y[act], None if w is None else w[None, act], exact=False)
        j = np.argmin(sse, axis=0)
        j = np.where(sse[centre] <= sse[j, np.arange(act.size)], centre, j)
        theta[act] = cand[j, np.arange(act.size)]
        cur[act] = sse[j, np.arange(act.size)]
        shrink = j == centre
        h[act[shrink]] /= 2.0
        done[act] = np.all(h[act] < tol, axis=1)
    # 3. final linear parameters at the refined exponents
    th = {nm: theta[:, j] for j, nm in enumerate(names)}
    lin_names, design = sep.linear_design(xb, th)
    coef, sse = _lstsq(design, Y, w)
    params: list[dict[str, float] | None] = []
    status = np.empty(B, dtype=object)
    for b in range(B):
        vals = np.concatenate([theta[b], coef[b]])
        if not (np.all(np.isfinite(vals)) and np.isfinite(sse[b])):
            params.append(None)
            status[b] = "failed"
            continue
        pb = {nm: float(theta[b, j]) for j, nm in enumerate(names)} | {
            nm: float(coef[b, j]) for j, nm in enumerate(lin_names)
        }
        conv = getattr(law, "from_profile", None)
        q = conv(pb) if callable(conv) else pb  # e.g. a log amplitude from a linear one (None: not representable)
        if q is None:
            params.append(None)
            status[b] = "failed"
            continue
        params.append(law.canonical({nm: float(q[nm]) for nm in law.param_names}))
        edge = bool(np.any(theta[b] - lo <= 1e-9) or np.any(hi - theta[b] <= 1e-9))
        status[b] = "at bound" if edge else ("converged" if done[b] else "not converged")
    return ProfiledFit(params, status.astype(str), sse)
