"""What a fit says about itself: fit-quality metrics, the data fingerprint, the status message and the warnings."""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from mixlaw.errors import BoundaryWarning, ConvergenceWarning, IdentifiabilityWarning
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.result import FitResult, FitStatus
from mixlaw.fit.solver.solve import rho
from mixlaw.laws import Law

__all__ = ["MAX_BOUND_LISTED", "fingerprint", "metrics", "status_message", "warn_about", "worst_parameter"]

#: Parameters at a bound named in a fit's one boundary warning at most (the rest are counted).
MAX_BOUND_LISTED = 5


def internal_owner(law: Law) -> list[str]:
    """The parameter name of every internal coordinate."""
    return [s.name for s in law.param_specs for _ in range(s.n_internal)]


def worst_parameter(law: Law, residuals: Any, u: np.ndarray, W: torch.Tensor, loss: str, delta: float) -> str:
    """The parameter that is still moving most at ``u`` (running off to infinity, or the largest gradient)."""
    owner = internal_owner(law)
    for i, name in enumerate(owner):
        if abs(u[i]) > 50:
            return name
    U = torch.tensor(u[None, :], dtype=torch.float64, requires_grad=True)
    f = (W * rho(residuals(U, torch.zeros(1, dtype=torch.long)), loss, delta)).sum()
    (g,) = torch.autograd.grad(f, U)
    return owner[int(torch.argmax(g.abs().reshape(-1)))]


def status_message(
    law: Law, status: FitStatus, residuals: Any, u: np.ndarray, W: torch.Tensor, loss: str, delta: float, max_iter: int
) -> str:
    if status is FitStatus.CONVERGED:
        return "the best start converged"
    worst = worst_parameter(law, residuals, u, W, loss, delta)
    if status is FitStatus.STALLED:
        return (
            "the best start stalled in a flat valley (the objective stopped decreasing measurably); parameter "
            f"'{worst}' is poorly determined by these data — read it with its bootstrap interval, fix it, or add "
            "data that constrain it"
        )
    return (
        f"the best start did not converge in {max_iter} iterations; parameter '{worst}' is still "
        f"moving — raise max_iter, add starts near the expected values, or check that '{worst}' is "
        "identifiable from these data"
    )


def warn_about(law: Law, res: FitResult, stacklevel: int = 4) -> None:
    """The fit's warnings: not converged, parameters at a bound (one warning naming them all), many failed
    resamples."""
    if res.status is not FitStatus.CONVERGED:
        kind = IdentifiabilityWarning if res.status is FitStatus.UNIDENTIFIABLE else ConvergenceWarning
        warnings.warn(f"law '{law.name}': {res.message}", kind, stacklevel=stacklevel)
    flat = res.flat_params()
    at = res.at_bounds()
    if len(at) == 1:
        name = at[0]
        warnings.warn(
            f"law '{law.name}': parameter '{name}' = {flat[name]:.6g} sits at its bound "
            f"{law.spec(name).bounds_text()}; the optimum may lie outside — check the data or the law",
            BoundaryWarning,
            stacklevel=stacklevel,
        )
    elif at:  # one warning per fit, not one per parameter (a 3-component CAMEL fit had 4 lines per target)
        shown = [f"'{n}' = {flat[n]:.3g} {law.spec(n).bounds_text()}" for n in at[:MAX_BOUND_LISTED]]
        more = f" and {len(at) - MAX_BOUND_LISTED} more" if len(at) > MAX_BOUND_LISTED else ""
        warnings.warn(
            f"law '{law.name}': {len(at)} parameters sit at a bound of their range: {', '.join(shown)}{more}; the "
            "optimum may lie outside — check the data or the law",
            BoundaryWarning,
            stacklevel=stacklevel,
        )
    if res.n_bootstrap and res.n_failed_resamples > 0.1 * res.n_bootstrap:
        warnings.warn(
            f"law '{law.name}': {res.n_failed_resamples} of {res.n_bootstrap} bootstrap resamples failed to "
            "converge or cannot identify the law; the intervals describe the usable ones only",
            ConvergenceWarning,
            stacklevel=stacklevel,
        )


def predict_numpy(law: Law, data: FitData, params: Mapping[str, Any]) -> np.ndarray:
    return np.asarray(law.evaluate(data.x_np, params), dtype=np.float64).reshape(-1)


def metrics(y: np.ndarray, pred: np.ndarray, fit_space: str) -> dict[str, float]:
    """``r2``, ``mse``, ``mae``, ``mre`` (mean relative error) and, in log space, ``rmse_log``."""
    resid = pred - y
    ss_res = float(np.sum(resid**2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    out = {
        "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
        "mse": float(np.mean(resid**2)),
        "mae": float(np.mean(np.abs(resid))),
    }
    if np.all(y != 0):
        out["mre"] = float(np.mean(np.abs(resid) / np.abs(y)))
    if fit_space == "log" and np.all(pred > 0):
        out["rmse_log"] = float(np.sqrt(np.mean((np.log(pred) - np.log(y)) ** 2)))
    return out


def fingerprint(law: Law, data: FitData, loss: str, delta: float) -> str:
    """SHA-256 of the law, its options, the loss settings and the fitted data."""
    h = hashlib.sha256()
    h.update(json.dumps([law.name, dict(law.options), loss, delta, data.target], sort_keys=True, default=str).encode())
    for name in sorted(data.x_np):
        h.update(name.encode())
        h.update(np.ascontiguousarray(data.x_np[name]).tobytes())
    h.update(np.ascontiguousarray(data.y).tobytes())
    if data.groups is not None:
        h.update(np.ascontiguousarray(data.groups).tobytes())
    return h.hexdigest()
