"""The delta-method standard error of a new observation under a nested fit (:mod:`mixlaw.fit.evaluate.calibrate`)."""

from __future__ import annotations

import numpy as np
import torch

from mixlaw.fit.problem.data import FitData
from mixlaw.laws import Law

__all__ = ["delta_sd"]


def delta_sd(law: Law, data: FitData, flat: np.ndarray, fit: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(n,)`` standard error of a new observation at every row under the fit ``flat`` (natural, flattened) on the
    rows ``fit``, in fit space: ``sqrt(σ̂² (1 + g(x)ᵀ (JᵀJ)⁺ g(x)))`` with ``J`` the Jacobian of the fit-space
    predictions of the fitted rows in the law's internal parameters, ``g(x)`` that of the row, and ``σ̂²`` the fold's
    residual variance ``Σ r² / (n_fit − p)`` (the classical regression prediction error, linearised). NaN where
    undefined (no residual degrees of freedom, a non-finite prediction).

    Reverse mode can overflow where the law does not: a law that takes ``log`` of a log-mapped parameter (CAMEL's
    ``log K_i`` of ``K_i = exp(u)``) has an ``inf`` column once ``K_i`` is subnormal (a fit on the ridge
    ``K_i → 0``, ``α_i → ∞``), although every prediction is finite. Such columns are *dropped* (those parameters
    held at their values) rather than differenced as the solver does
    (:func:`mixlaw.fit.solver.steps.repair_jacobian`): a
    subnormal parameter carries 4-5 digits, and on that ridge the dropped direction is (nearly) that of ``α_i``'s
    column, so the Jacobian's span, hence the lever, is (nearly) unchanged. Before, one such column made the
    standard error NaN on every row, so a calibration standardised none of its nested fits' errors and widened
    nothing (camel on SlimPajama: 0 of 280). The columns are scaled to unit norm before the pseudo-inverse: the
    lever does not depend on their scale, but ``pinv``'s relative cut-off does."""
    u0 = torch.as_tensor(law.to_internal(law.unflatten(flat)), dtype=torch.float64)
    xt = {k: torch.tensor(np.array(v, dtype=np.float64)) for k, v in data.x_np.items()}
    fn = law.log_predict if law.fit_space == "log" else law.predict

    def f(u: torch.Tensor) -> torch.Tensor:
        return fn(xt, law.to_natural(u[None, :])).reshape(-1)

    n = data.n
    nan = np.full(n, np.nan)
    dof = int(fit.sum()) - u0.numel()
    if dof <= 0:
        return nan
    J = np.asarray(torch.autograd.functional.jacobian(f, u0, vectorize=True), dtype=np.float64).reshape(n, -1)
    with torch.no_grad():
        p = np.asarray(f(u0), dtype=np.float64)
    if not np.isfinite(p).all():
        return nan
    r = p[fit] - y[fit]
    J = J[:, np.isfinite(J).all(axis=0)]  # overflowed columns (docstring)
    scale = np.linalg.norm(J[fit], axis=0)
    J = J[:, scale > 0] / scale[scale > 0]  # unit columns: pinv's relative cut-off is not scale-free
    s2 = float(np.sum(r * r) / dof)
    cov = np.linalg.pinv(J[fit].T @ J[fit], rcond=1e-12, hermitian=True)
    lever = np.einsum("ip,pq,iq->i", J, cov, J)
    return np.sqrt(s2 * (1.0 + np.maximum(lever, 0.0)))
