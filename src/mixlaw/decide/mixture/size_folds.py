"""The size calibration of ``mix compare`` when the fold fits' standard errors are undefined: a Jacobian repair.

Why
---
:func:`mixlaw.fit.calibrate.calibrate` standardises each held-out error of a nested fit by that fit's delta-method
standard error (:func:`mixlaw.fit.calib_delta.delta_sd`), which is NaN for *every* row as soon as one entry of the
Jacobian is not finite. Reverse mode overflows where the law does not: CAMEL takes ``log K_i`` of ``K_i = exp(u)``,
and a fit that ends on the ridge ``K_i → 0``, ``α_i → ∞`` (a component kept alive by a huge exponent) has ``K_i``
subnormal, ``1/K_i = inf`` and an ``inf`` column although ``d log K_i / du = 1`` and every prediction is finite
(:func:`mixlaw.fit.steps.repair_jacobian`, the solver's own repair, says the same). Then no error is standardised,
the error model falls back to ``c = 1``, ``γ = 0`` (``n_scores = 0``) and the interval is not widened at all, however
large the nested fits' errors. On SlimPajama (camel k = 2 fitted on 122M-937M: ``K_1 = e^-735``, ``α_1 = 376``)
the standard errors of all 5 nested fits (warm-started at that point) were NaN; their raw errors are +2.1 % to
+3.0 % at 0.3-0.95 e-folds beyond their fitted sizes, 3-7 times their own residual standard deviation, and were
all dropped.

What
----
:func:`repaired_calibration` refits the same folds (:func:`mixlaw.fit.calibrate._masks` with the same generator,
the same solver settings), computes the delta-method standard error without the Jacobian columns that overflowed
(:func:`repaired_delta_sd`, which says why not finite differences), and fits the same error model
(:func:`mixlaw.fit.calibrate.error_model`). It is used only where the calibration standardised no error of a nested
fit beyond its fitted sizes, and the interval's method says so (``Jacobian-repaired``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

__all__ = ["repaired_calibration", "repaired_delta_sd"]


def repaired_delta_sd(law: Any, data: Any, flat: np.ndarray, fit: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(n,)`` delta-method standard error of a new observation (fit space) under the fit ``flat`` (natural,
    flattened) on the rows ``fit``: :func:`mixlaw.fit.calib_delta.delta_sd` with the Jacobian's columns that reverse
    mode did not get finite *dropped* (those parameters held at their values), where every prediction is finite.
    NaN where still undefined.

    Why not finite differences (:func:`mixlaw.fit.steps.repair_jacobian`, the solver's repair): the column
    overflows because the parameter is subnormal (CAMEL's ``K_i = e^-735``), where a float64 carries only 4-5
    digits, so a difference over the solver's step ``1e-6·|u|`` is accurate to a few per cent at best. On the ridge
    ``K_i → 0``, ``α_i → ∞`` the dropped direction is (nearly) that of ``α_i``'s column, so the span of the
    Jacobian, hence the lever, is (nearly) unchanged (exactly, for a uniform loading: the test). The columns are
    scaled to unit norm before the pseudo-inverse: the lever does not depend on their scale, but ``pinv``'s relative
    cut-off does (on the ridge ``α_i``'s column is ``α_i`` times larger, and the unscaled cut-off dropped the
    smallest direction of the test's fit, shrinking its held-out standard errors up to 3.5-fold)."""
    u0 = torch.as_tensor(law.to_internal(law.unflatten(flat)), dtype=torch.float64)
    xt = {k: torch.tensor(np.array(v, dtype=np.float64)) for k, v in data.x_np.items()}
    fn = law.log_predict if law.fit_space == "log" else law.predict
    n = data.n
    dof = int(fit.sum()) - u0.numel()
    if dof <= 0:
        return np.full(n, np.nan)

    def f(u: torch.Tensor) -> torch.Tensor:
        return fn(xt, law.to_natural(u[None, :])).reshape(-1)

    J = np.asarray(torch.autograd.functional.jacobian(f, u0, vectorize=True), dtype=np.float64).reshape(n, -1)
    with torch.no_grad():
        p = np.asarray(f(u0), dtype=np.float64)
    if not np.isfinite(p).all():
        return np.full(n, np.nan)
    J = J[:, np.isfinite(J).all(axis=0)]
    scale = np.linalg.norm(J[fit], axis=0)
    J = J[:, scale > 0] / scale[scale > 0]  # the lever is scale-free; pinv's rcond is not (α_i's column is α_i-fold)
    r = p[fit] - y[fit]
    s2 = float(np.sum(r * r) / dof)
    cov = np.linalg.pinv(J[fit].T @ J[fit], rcond=1e-12, hermitian=True)
    lever = np.einsum("ip,pq,iq->i", J, cov, J)
    return np.sqrt(s2 * (1.0 + np.maximum(lever, 0.0)))


def repaired_calibration(
    law: Any, data: Any, cal: Any, seeds: np.ndarray, *, size_input: str, clusters: np.ndarray, seed: int, **solver: Any
) -> Any:
    """The calibration ``cal`` of :func:`mixlaw.fit.calibrate.calibrate` redone with Jacobian-repaired standard
    errors (module docstring), or ``None`` when that does not standardise more held-out errors than ``cal`` did."""
    from mixlaw.fit.bootstrap import refit, rescue
    from mixlaw.fit.calibrate import FOLD_MIN_ITER, FoldErrors, _masks, _rel_distance, calibration_axis, error_model
    from mixlaw.fit.intervals import draw_predictions

    axis = calibration_axis(law, data, size_input)
    masks, kinds = _masks(data, axis, clusters, max(law.n_internal, 2), np.random.default_rng([seed, 2]))
    if not masks or axis is None:
        return None
    W = np.stack(masks).astype(np.float64)
    S = np.asarray(seeds, dtype=np.float64)
    if solver.get("max_iter") is not None:
        solver = {**solver, "max_iter": max(int(solver["max_iter"]), FOLD_MIN_ITER)}
    state = refit(law, data.x, data.y, W, S, **solver)
    params, ok = state[0], state[1]
    if not ok.all():
        centres = np.broadcast_to(S[0], (len(W), S.shape[-1]))
        rescue(law, data.x, data.y, W, centres, centres, state, **solver)
    if not ok.any():
        return None
    with torch.no_grad():
        pred = draw_predictions(law, params[ok], data.x_np)
    y = np.log(data.y) if law.fit_space == "log" else data.y
    v = data.x_np[axis]
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("e", "d", "split", "forward", "rows", "span", "sd")}
    for j, (i, p) in enumerate(zip(np.flatnonzero(ok), pred, strict=True)):
        m = W[i].astype(bool)
        held = np.flatnonzero(~m)
        e = p[held] - y[held]
        good = np.isfinite(e)
        cols["e"].append(e[good])
        cols["d"].append(_rel_distance(v[held], float(v[m].min()), float(v[m].max()))[good])
        cols["split"].append(np.full(int(good.sum()), j))
        cols["forward"].append(np.full(int(good.sum()), kinds[i] != "kfold"))
        cols["rows"].append(held[good])
        cols["span"].append(np.full(int(good.sum()), float(np.log(v[m].max() / v[m].min()))))
        cols["sd"].append(repaired_delta_sd(law, data, params[i], m, y)[held[good]])
    out = {k: np.concatenate(c) for k, c in cols.items()}
    n_scores = int(np.isfinite(out["e"] / out["sd"]).sum())
    if n_scores <= cal.n_scores:
        return None
    fe = FoldErrors(
        e=out["e"], d=out["d"], split=out["split"].astype(np.int64), forward=out["forward"].astype(bool),
        rows=out["rows"].astype(np.int64), last=np.zeros(out["e"].size, dtype=bool), span=out["span"], sd=out["sd"],
        axis=axis, n_folds=int(ok.sum()),
    )  # fmt: skip
    inflation, growth, n_growth = error_model(fe)
    return replace(
        cal, inflation=inflation, growth=growth, n_growth=n_growth, n_scores=n_scores,
        method="calibrated (Jacobian repaired)",
    )  # fmt: skip
