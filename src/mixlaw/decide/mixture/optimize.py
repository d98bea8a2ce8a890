"""Multi-start optimisation of a smooth objective over a constrained simplex, with a KKT check (laws.md §12.6).

:func:`optimize_mixture` minimises ``f(w)`` (a differentiable torch function of the ``(n,)`` weight vector) over the
feasible set of a :class:`~mixlaw.decide.mixture.constraints.MixtureConstraints`: starts are the uniform mixture,
the vertices pulled to the interior (``0.8 e_j + 0.2 / n``), Dirichlet(1) draws and the prior (when given), each
projected onto the box-cut simplex; each is refined by SLSQP (bounds, ``Σ w = 1``, the KL bound) with exact gradients,
and the best feasible end point is reported with its active constraints and the KKT conditions checked at it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from mixlaw.decide.mixture.constraints import MixtureConstraints, kl_divergence, project_box_simplex
from mixlaw.errors import InputError

__all__ = ["MixtureOptimum", "optimize_mixture", "start_points", "kkt_check", "newton_polish"]

Objective = Callable[[torch.Tensor], torch.Tensor]
_EPS = 1e-12


@dataclass
class MixtureOptimum:
    """The optimum of :func:`optimize_mixture`.

    Attributes
    ----------
    weights
        ``{domain: weight}`` (sums to 1, every constraint met).
    objective
        ``f(w)`` at the optimum (without a KL penalty); ``penalised``: with it.
    active
        The constraints active at the optimum, named as set (``cap code=0.3``, ``floor math=0.02``, ``fix …``).
    kkt
        ``{"stationarity": …, "min_multiplier": …, "ok": bool, …}`` (see :func:`kkt_check`).
    n_starts, n_feasible, n_distinct
        Starts run, starts ending feasible, distinct feasible end points (to 1e-4 in every weight).
    """

    domains: tuple[str, ...]
    weights: dict[str, float]
    objective: float
    penalised: float
    active: list[str]
    kkt: dict[str, Any]
    n_starts: int
    n_feasible: int
    n_distinct: int
    kl_to_prior: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def w(self) -> np.ndarray:
        return np.array([self.weights[d] for d in self.domains])

    def to_dict(self) -> dict[str, Any]:
        return {
            "domains": list(self.domains),
            "weights": dict(self.weights),
            "objective": self.objective,
            "penalised_objective": self.penalised,
            "active_constraints": list(self.active),
            "kkt": dict(self.kkt),
            "n_starts": self.n_starts,
            "n_feasible": self.n_feasible,
            "n_distinct": self.n_distinct,
            "kl_to_prior": self.kl_to_prior,
            **self.extra,
        }


def start_points(cons: MixtureConstraints, n_dirichlet: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform, interior-pulled vertices, Dirichlet(1) draws and the prior, projected onto the box-cut simplex."""
    n = cons.n
    lo, hi = cons.bounds()
    pts = [np.full(n, 1.0 / n)]
    pts += [0.8 * np.eye(n)[j] + 0.2 / n for j in range(n)]
    pts += list(rng.dirichlet(np.ones(n), size=n_dirichlet))
    q = cons.prior_vector()
    if q is not None:
        pts.append(q)
    return np.array([project_box_simplex(p, lo, hi) for p in pts])


def _penalised(f: Objective, cons: MixtureConstraints) -> Callable[[np.ndarray], tuple[float, np.ndarray, float]]:
    q = cons.prior_vector()
    kw = float(cons.kl_weight)
    qt = None if q is None else torch.as_tensor(q, dtype=torch.float64)

    def fun(w: np.ndarray) -> tuple[float, np.ndarray, float]:
        wt = torch.tensor(np.asarray(w, dtype=np.float64), requires_grad=True)
        val = f(wt)
        raw = float(val.detach())
        if kw and qt is not None:
            wc = wt.clamp_min(_EPS)
            val = val + kw * (wc * (torch.log(wc) - torch.log(qt))).sum()
        (g,) = torch.autograd.grad(val, wt)
        return float(val.detach()), g.numpy().astype(np.float64), raw

    return fun


#: SLSQP's absolute stopping tolerance on the objective; the Newton polish (:func:`newton_polish`) finishes an
#: interior optimum. It was 1e-15, below the rounding of an objective of order 1 (2e-16 × f), so on 20 domains most
#: starts ran to the 500-iteration cap or a failed line search (CAMEL, ``benchmarks/mixture_domains.py``: 172,185
#: objective evaluations, 131 s of CPU); at 1e-12 every start converges (765 evaluations, 1.4 s) and the optimum
#: moves by 4.5e-14 in any weight.
SLSQP_FTOL = 1e-12


def _solve_one(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray, float]], w0: np.ndarray, cons: MixtureConstraints
) -> np.ndarray:
    from scipy.optimize import minimize

    lo, hi = cons.bounds()
    constraints: list[dict[str, Any]] = [
        {"type": "eq", "fun": lambda w: np.sum(w) - 1.0, "jac": lambda w: np.ones_like(w)}
    ]
    q = cons.prior_vector()
    if cons.kl_max is not None and q is not None:
        kmax = float(cons.kl_max)

        def kl_c(w: np.ndarray) -> float:
            wc = np.maximum(w, _EPS)
            return kmax - float(np.sum(wc * (np.log(wc) - np.log(q))))

        def kl_j(w: np.ndarray) -> np.ndarray:
            wc = np.maximum(w, _EPS)
            return -(np.log(wc) - np.log(q) + 1.0)

        constraints.append({"type": "ineq", "fun": kl_c, "jac": kl_j})
    free = lo < hi
    if not free.any():
        return w0
    res = minimize(
        lambda w: fun(w)[:2],
        w0,
        jac=True,
        method="SLSQP",
        bounds=list(zip(lo, hi, strict=True)),
        constraints=constraints,
        options={"maxiter": 500, "ftol": SLSQP_FTOL},
    )
    w = np.clip(np.asarray(res.x, dtype=np.float64), lo, hi)
    return project_box_simplex(w, lo, hi) if abs(w.sum() - 1.0) > 1e-12 else w


def newton_polish(f: Objective, w: np.ndarray, cons: MixtureConstraints, steps: int = 8) -> np.ndarray:
    """A few Newton steps on the free coordinates of ``w`` along ``Σ w = 1`` (exact torch Hessian).

    SLSQP stops once the objective no longer changes by ``ftol``, which at a flat interior optimum leaves the
    reduced gradient at ~1e-6 of its scale; a Newton step on the reduced problem removes that. A step is taken only
    when the reduced Hessian is positive definite, the step stays strictly inside the bounds and the objective does
    not rise; with a KL term (bound or penalty) ``w`` is returned unchanged.
    """
    if cons.kl_max is not None or cons.kl_weight:
        return w
    lo, hi = cons.bounds()
    w = np.asarray(w, dtype=np.float64).copy()
    for _ in range(steps):
        free = (w > lo + 1e-7) & (w < hi - 1e-7)
        m = int(free.sum())
        if m < 2:
            return w
        idx = np.flatnonzero(free)
        z = np.zeros((len(w), m - 1))  # tangent basis of {v : v_free sums to 0, v_bound = 0}
        z[idx[0], :] = -1.0
        z[idx[1:], np.arange(m - 1)] = 1.0
        wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
        val = f(wt)
        (g,) = torch.autograd.grad(val, wt, create_graph=True)
        h = torch.stack([torch.autograd.grad(g[i], wt, retain_graph=True)[0] for i in range(len(w))])
        gz = z.T @ g.detach().numpy()
        hz = z.T @ h.detach().numpy() @ z
        try:
            np.linalg.cholesky(hz)
        except np.linalg.LinAlgError:
            return w
        step = z @ np.linalg.solve(hz, -gz)
        new = w + step
        if np.any(new[free] <= lo[free]) or np.any(new[free] >= hi[free]):
            return w
        with torch.no_grad():
            if float(f(torch.as_tensor(new))) > float(val.detach()) + 1e-15 * max(1.0, abs(float(val.detach()))):
                return w
        if np.max(np.abs(step)) < 1e-15:
            return new
        w = new
    return w


def kkt_check(
    grad: np.ndarray, w: np.ndarray, cons: MixtureConstraints, tol: float = 1e-6, value: float | None = None
) -> dict[str, Any]:
    """The KKT conditions of ``min f`` over the feasible set at ``w``, from the objective's gradient ``grad``.

    Free coordinates (strictly inside their bounds) must share one value of ``g_d + ν ∂KL/∂w_d`` (``λ``, the
    multiplier of ``Σ w = 1``; ``ν >= 0`` that of an active KL bound, fitted by least squares); a coordinate at its
    lower bound needs a non-negative multiplier ``g_d + ν k_d − λ``, one at its upper bound a non-positive one.
    ``stationarity`` (max deviation over free coordinates) and ``min_multiplier`` are relative to
    ``max(max |g|, |f|)`` (``value``: the objective ``f`` at ``w``): the first-order change of the objective over a
    unit move on the simplex, relative to the objective. (Relative to ``max |g|`` alone, an interior optimum whose
    gradient is itself ~0 — a domain the law does not read, a flat optimum — read as 50 % off stationarity.)
    ``ok`` when stationarity <= ``tol`` and min_multiplier >= −``tol``.
    """
    lo, hi = cons.bounds()
    g = np.asarray(grad, dtype=np.float64)
    scale = max(float(np.max(np.abs(g))), abs(float(value)) if value is not None else 0.0, 1e-12)
    at_lo = (w <= lo + 1e-7) & (lo < hi)
    at_hi = (w >= hi - 1e-7) & (lo < hi) & ~at_lo
    free = (lo < hi) & ~at_lo & ~at_hi
    q = cons.prior_vector()
    kl_active = False
    k = np.zeros_like(g)
    if cons.kl_max is not None and q is not None:
        kl_active = kl_divergence(w, q) >= float(cons.kl_max) - 1e-7
        k = np.log(np.maximum(w, _EPS)) - np.log(q) + 1.0
    nu = 0.0
    if free.any():
        if kl_active and free.sum() >= 2:
            a = np.column_stack([np.ones(free.sum()), k[free]])
            sol, *_ = np.linalg.lstsq(a, g[free], rcond=None)
            nu = max(0.0, -float(sol[1]))
        lam = float(np.mean(g[free] + nu * k[free]))
        station = float(np.max(np.abs(g[free] + nu * k[free] - lam))) / scale
    else:
        # Every coordinate on a bound: choose λ to make the multipliers as feasible as possible.
        # (Without adding ±inf: with every weight fixed there is no coordinate on a bound, and inf − inf warns.)
        r = g + nu * k
        if at_lo.any() and at_hi.any():
            lam = float(0.5 * (np.min(r[at_lo]) + np.max(r[at_hi])))
        else:
            lam = float(np.min(r[at_lo])) if at_lo.any() else float(np.max(r[at_hi])) if at_hi.any() else 0.0
        station = 0.0
    r = g + nu * k - lam
    mults = np.concatenate([r[at_lo], -r[at_hi]])
    min_mult = float(mults.min()) / scale if mults.size else 0.0
    ok = bool(station <= tol and min_mult >= -tol)
    return {
        "stationarity": station,
        "min_multiplier": min_mult,
        "lambda_sum": lam,
        "nu_kl": nu,
        "n_free": int(free.sum()),
        "ok": ok,
    }


def optimize_mixture(
    f: Objective,
    cons: MixtureConstraints,
    *,
    n_dirichlet: int = 48,
    random_state: int | None = 0,
    starts: np.ndarray | None = None,
    polish: bool = True,
) -> MixtureOptimum:
    """Minimise ``f(w)`` over the feasible mixtures of ``cons`` (multi-start SLSQP; see the module docstring).

    Parameters
    ----------
    f
        Differentiable ``(n,)`` float64 tensor → 0-d tensor (minimised; negate an accuracy to maximise it).
    cons
        The constraints (already checked for box feasibility).
    n_dirichlet
        Dirichlet(1) starts besides the uniform mixture, the pulled vertices and the prior.
    random_state
        Seed of the Dirichlet starts.
    starts
        ``(S, n)`` mixtures to start from instead of the default set (projected onto the feasible box), e.g. the
        point optimum and the uniform mixture when re-optimising a bootstrap refit.
    polish
        Finish the best end with :func:`newton_polish` (default). ``False`` (the bootstrap's re-optimisations, which
        feed percentile bands): SLSQP's end, within ~1e-6 of the polished weights, for 8 fewer exact Hessians.

    Raises
    ------
    InputError
        When no start ends feasible (only possible with a KL bound that the box cannot meet), naming the bound.
    """
    rng = np.random.default_rng(random_state)
    fun = _penalised(f, cons)
    if starts is None:
        starts = start_points(cons, n_dirichlet, rng)
    else:
        lo, hi = cons.bounds()
        starts = np.array([project_box_simplex(np.asarray(p, dtype=np.float64), lo, hi) for p in starts])
    from mixlaw.fit.solver.pools import threads

    ends, vals = [], []
    with threads(1):  # SLSQP's small dense solves: a multi-threaded BLAS only spins (D = 20: 16.5 s → 1.2 s CPU)
        for w0 in starts:
            w = _solve_one(fun, w0, cons)
            v = fun(w)[0]
            if not cons.violations(w) and np.isfinite(v):
                ends.append(w)
                vals.append(v)
    if not ends:
        q = cons.prior_vector()
        if cons.kl_max is not None and q is not None:
            kl_min = _min_kl(cons)
            raise InputError(
                f"infeasible constraints: --kl-max {cons.kl_max:g} cannot be met inside the floors/caps/fixed "
                f"weights (the smallest KL(w || prior) there is {kl_min:.4g})"
            )
        raise InputError("no feasible mixture found: the objective is not finite at any start")
    order = np.argsort(vals, kind="stable")
    best = ends[int(order[0])]
    distinct: list[np.ndarray] = []
    for i in order:
        if all(np.max(np.abs(ends[i] - e)) > 1e-4 for e in distinct):
            distinct.append(ends[i])
    best = newton_polish(f, best, cons) if polish else best
    value, grad, raw = fun(best)
    q = cons.prior_vector()
    return MixtureOptimum(
        domains=cons.domains,
        weights={d: float(x) for d, x in zip(cons.domains, best, strict=True)},
        objective=raw,
        penalised=value,
        active=cons.active(best),
        kkt=kkt_check(grad, best, cons, value=value),
        n_starts=len(starts),
        n_feasible=len(ends),
        n_distinct=len(distinct),
        kl_to_prior=None if q is None else kl_divergence(best, q),
    )


def _min_kl(cons: MixtureConstraints) -> float:
    q = cons.prior_vector()
    if q is None:
        raise InputError("expected a --prior mixture for the KL constraint")
    qt = torch.as_tensor(q, dtype=torch.float64)
    lo, hi = cons.bounds()
    box_lo_hi = MixtureConstraints(
        cons.domains,
        floors={d: float(x) for d, x in zip(cons.domains, lo, strict=True)},
        caps={d: float(x) for d, x in zip(cons.domains, hi, strict=True)},
    )

    def kl(w: torch.Tensor) -> torch.Tensor:
        wc = w.clamp_min(_EPS)
        return (wc * (torch.log(wc) - torch.log(qt))).sum()

    fun = _penalised(kl, box_lo_hi)
    best = min(fun(_solve_one(fun, w0, box_lo_hi))[0] for w0 in start_points(box_lo_hi, 4, np.random.default_rng(0)))
    return float(best)
