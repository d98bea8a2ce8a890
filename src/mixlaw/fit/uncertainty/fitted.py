"""What the uncertainty code reads of a fit, and the prediction primitives it shares.

The interval, calibration, extrapolation and identifiability modules take a fit through the :class:`Fitted`
protocol (which :class:`~mixlaw.fit.result.FitResult` satisfies) rather than the result class itself, so that the
result can use them — ``FitResult.predict(..., interval=0.95)`` — without an import cycle: the result sits above
them, this module below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd
import torch

from mixlaw.errors import InputError
from mixlaw.laws import Law

if TYPE_CHECKING:
    from mixlaw.fit.problem.data import FitData

__all__ = ["Fitted", "draw_predictions", "inputs_of", "residual_sd"]


class Fitted(Protocol):
    """The parts of a fit that intervals, calibration and extrapolation checks read (read-only)."""

    @property
    def law(self) -> Law: ...

    @property
    def params(self) -> dict[str, Any]: ...

    @property
    def input_map(self) -> dict[str, str]: ...

    @property
    def input_ranges(self) -> dict[str, list[float]]: ...

    @property
    def settings(self) -> dict[str, Any]: ...

    @property
    def n_points(self) -> int: ...

    @property
    def bootstrap_params(self) -> pd.DataFrame | None: ...

    @property
    def n_bootstrap(self) -> int: ...

    @property
    def n_failed_resamples(self) -> int: ...

    @property
    def residual_sd(self) -> float | None: ...

    @property
    def identifiability(self) -> dict[str, Any] | None: ...

    @property
    def calibration(self) -> dict[str, Any] | None: ...


def residual_sd(law: Law, data: FitData, params: Mapping[str, Any]) -> float | None:
    """``sqrt(Σ r² / (n − p))`` of the residuals in the law's fit space at ``params`` (``None`` when n ≤ p)."""
    pred = np.asarray(law.evaluate(data.x_np, params), dtype=np.float64).reshape(-1)
    with np.errstate(all="ignore"):
        r = np.log(pred) - np.log(data.y) if law.fit_space == "log" else pred - data.y
    dof = data.n - law.n_internal
    if dof <= 0 or not np.isfinite(r).all():
        return None
    return float(np.sqrt(np.sum(r * r) / dof))


def draw_predictions(law: Law, draws: np.ndarray, x: Mapping[str, np.ndarray]) -> np.ndarray:
    """``(B, m)`` predictions in the law's fit space for ``B`` flat natural parameter rows at ``m`` input rows."""
    if len(draws) == 0:
        return np.zeros((0, len(next(iter(x.values())))))
    U = np.stack([law.to_internal(law.unflatten(row)) for row in np.asarray(draws, dtype=np.float64)])
    xt = {k: torch.tensor(np.array(v, dtype=np.float64)) for k, v in x.items()}  # a copy: inputs may be read-only
    predict = law.log_predict if law.fit_space == "log" else law.predict
    with torch.no_grad():
        out = predict(xt, law.to_natural(torch.as_tensor(U)))
    return np.asarray(out, dtype=np.float64).reshape(len(U), -1)


def inputs_of(result: Fitted, data: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The law's inputs from a table or ``--at`` mapping (columns looked up through the fit's ``input_map``)."""
    law = result.law
    x: dict[str, np.ndarray] = {}
    for name in law.inputs:
        col = result.input_map.get(name, name)
        if col not in data and name in data:
            col = name
        if col not in data:
            raise InputError(f"expected input column '{col}' for law '{law.name}', got {sorted(data)}", column=col)
        x[name] = np.atleast_1d(np.asarray(data[col], dtype=np.float64))
    return x
