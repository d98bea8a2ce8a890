"""What the full fit says about its own rows, for the calibration (:mod:`mixlaw.fit.evaluate.calibrate`): its
residuals, how far they trend along each extrapolation axis, and whether it leaves a parameter unbounded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mixlaw.fit.evaluate.calib_axes import AxisGrowth, axis_values
from mixlaw.fit.evaluate.calib_growth import misfit_share
from mixlaw.fit.problem.data import FitData
from mixlaw.laws import Law

__all__ = ["full_residuals", "leaves_a_parameter_unbounded", "misfit_per_axis"]


def full_residuals(law: Law, data: FitData, params: Mapping[str, Any]) -> np.ndarray:
    """The full fit's residuals at every fitted row, in fit space (prediction minus observation)."""
    pred = np.asarray(law.evaluate(data.x_np, params), dtype=np.float64).reshape(-1)
    with np.errstate(all="ignore"):
        return np.log(pred) - np.log(data.y) if law.fit_space == "log" else pred - data.y


def leaves_a_parameter_unbounded(law: Law, data: FitData, params: Mapping[str, Any], sd: float | None) -> bool:
    """Whether the full fit has a parameter its data do not bound, which its intervals carry
    (:func:`mixlaw.fit.uncertainty.profile.loose_parameters`)."""
    from mixlaw.fit.uncertainty.profile import loose_parameters

    return bool(loose_parameters(law, data.x_np, data.y, params, sd)["running_off"])


def misfit_per_axis(r: np.ndarray, data: FitData, axes: tuple[AxisGrowth, ...]) -> list[float]:
    """Per axis, the share of the full fit's residuals ``r`` that trend along it (:func:`calib_growth.misfit_share`)."""
    out = []
    for a in axes:
        v = axis_values(a.name, data.x_np)
        out.append(1.0 if v is None else misfit_share(r, v, a.kind)[0])
    return out
