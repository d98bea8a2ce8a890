"""Point fits of several targets in one batched solve: the polish request of a fit and the solve that serves many.

A point fit (:class:`mixlaw.fit.Fitter`) screens its starts and then polishes the best of them in one batched solve
(:func:`mixlaw.fit.solver.solve.solve`). Fits of one law to several targets over the same inputs (``mix optimize``'s
losses, one CAMEL law per validation loss) can polish together: every row of the solve is one start of one target,
its problem id the target, its residuals against that target's values. Rows of different problems never interact
in the solver (damping, stall tests, merging and the ``halt`` rule are per row or per problem), so each fit gets the
rows it would have got alone, up to the rounding of batched kernels of another size; the gain is the solver's
fixed cost per iteration (about 4 ms for the CAMEL law on 50 points, against 0.15 ms per active row), paid once for
all targets instead of once per target (:func:`mixlaw.fit.many.fit_many`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mixlaw.fit.problem.data import make_residuals
from mixlaw.fit.solver.settings import SolveSettings
from mixlaw.fit.solver.solve import SolveResult, solve

__all__ = ["PolishRequest", "solve_requests"]


@dataclass(frozen=True)
class PolishRequest:
    """One point fit's polish: ``U`` ``(S, P)`` internal starts of ``law`` on inputs ``x`` against targets ``y``
    (transformed to the fit space), point weights ``W`` ``(1, n)``, the :class:`SolveSettings` of the solve and its
    hooks (a progress ``callback``, the ``halt`` rule)."""

    law: Any
    x: Mapping[str, torch.Tensor]
    y: torch.Tensor
    U: np.ndarray
    W: torch.Tensor
    settings: SolveSettings = SolveSettings()
    callback: Callable[[int, int], None] | None = None
    halt: Callable[[np.ndarray], np.ndarray] | None = None

    def run(self) -> SolveResult:
        """This request alone."""
        pid = np.zeros(len(self.U), dtype=np.int64)
        return solve(make_residuals(self.law, self.x, self.y), self.U, pid, self.W, self.settings,
                     callback=self.callback, halt=self.halt)  # fmt: skip


def _same_inputs(a: PolishRequest, b: PolishRequest) -> bool:
    if a.law.name != b.law.name or dict(a.law.options) != dict(b.law.options) or a.x.keys() != b.x.keys():
        return False
    if a.y.shape != b.y.shape or a.W.shape != b.W.shape:
        return False
    if (a.halt is None) is not (b.halt is None) or a.settings != b.settings:  # the callback is per request
        return False
    return all(torch.equal(a.x[k], b.x[k]) for k in a.x)


def solve_requests(requests: Sequence[PolishRequest]) -> list[SolveResult]:
    """Serve every request, in one batched solve where they share the law (name and options), the inputs and the
    solver settings (else one solve each); per request the :class:`SolveResult` of its own rows. The laws being
    equal, the first request's ``halt`` rule serves all."""
    if len(requests) < 2 or not all(_same_inputs(requests[0], r) for r in requests[1:]):
        return [r.run() for r in requests]
    first = requests[0]
    sizes = [len(r.U) for r in requests]
    pid = np.repeat(np.arange(len(requests)), sizes)
    Y = torch.stack([r.y.reshape(-1) for r in requests])
    sol = solve(make_residuals(first.law, first.x, Y), np.concatenate([r.U for r in requests]), pid,
                torch.cat([r.W for r in requests]), first.settings, halt=first.halt)  # fmt: skip
    out = []
    lo = 0
    for n in sizes:
        sl = slice(lo, lo + n)
        merged = sol.merged_into[sl].copy()
        merged[merged >= 0] -= lo  # rows merge only within their problem
        out.append(SolveResult(
            x=sol.x[sl].copy(), f=sol.f[sl].copy(), grad_norm=sol.grad_norm[sl].copy(), n_iter=sol.n_iter[sl].copy(),
            status=sol.status[sl].copy(), merged_into=merged, total_iter=int(sol.n_iter[sl].max(initial=0)),
            halted=None if sol.halted is None else sol.halted[sl].copy(),
        ))  # fmt: skip
        lo += n
    return out
