"""The solver's edge rule (issue 10 item 7, point 5): a row whose derivatives overflow where its objective is finite.

Such a row cannot take another step. If its objective fell from its start and its point is finite it stops as
``stalled`` with its objective (usable; a point fit re-polishes a stalled estimate), whatever the iteration; a row
that never descended fails. Before, the same row failed in its first 30 iterations and stalled from the 31st.
"""

from __future__ import annotations

import numpy as np
import torch

from mixlaw.fit.solver.settings import SolveSettings
from mixlaw.fit.solver.solve import solve


class _Steep(torch.autograd.Function):
    """Identity whose derivative is 1e200 below ``u = 8`` (so ``JᵀJ`` overflows there; the residual stays finite)."""

    @staticmethod
    def forward(ctx, u):  # type: ignore[no-untyped-def, override]
        ctx.save_for_backward(u)
        return u.clone()

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def, override]
        (u,) = ctx.saved_tensors
        return torch.where(u < 8.0, g * 1e200, g)


def _residuals(U: torch.Tensor, pid: torch.Tensor) -> torch.Tensor:
    u = U[..., 0]
    v = _Steep.apply(u[:, None].expand(-1, 2) if U.dim() == 2 else u)
    return torch.stack([v[..., 0] - 5.0, 0.5 * (v[..., 1] - 3.0)], -1)  # optimum u = 4.6, below 8


def test_a_row_that_descended_into_overflowing_derivatives_stops_stalled_not_failed() -> None:
    W = torch.ones(1, 2, dtype=torch.float64)
    U0 = np.array([[10.0], [12.0], [6.0]])  # two start above 8 and step below it; one starts below it
    sol = solve(_residuals, U0, np.zeros(3, dtype=np.int64), W, SolveSettings(loss="l2", merge_tol=None, max_iter=100))
    f0 = 0.5 * ((U0[:, 0] - 5.0) ** 2 + 0.25 * (U0[:, 0] - 3.0) ** 2)
    # The first two step below 8 (10 -> 6 at the step cap of 4; 12 -> 8 -> 4.6, the optimum), then their
    # derivatives overflow: well inside the first 30 iterations, where the rule of before failed them.
    assert list(sol.status[:2]) == ["stalled", "stalled"]
    assert (sol.n_iter[:2] <= 3).all()
    np.testing.assert_allclose(sol.x[:2, 0], [6.0, 4.6], atol=1e-3)
    np.testing.assert_allclose(sol.f[:2], [1.625, 0.4], rtol=1e-3)  # finite, and below the start's 18.6 and 34.6
    assert (sol.f[:2] < f0[:2]).all()
    # The third never had finite derivatives, never descended: it fails (a resample would be rescued).
    assert sol.status[2] == "failed" and not np.isfinite(sol.f[2])
