"""The data of one fit: inputs and target validated and converted to float64 tensors, and the residual function."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import torch

from mixlaw.errors import InputError, row_of
from mixlaw.laws import Law, get_law

__all__ = [
    "FitData",
    "internal_box",
    "make_residuals",
    "natural_jacobian",
    "numeric_column",
    "prepare_data",
    "project_internal",
]

Residuals = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class FitData:
    """Inputs and target of one fit, validated and converted to float64 tensors."""

    def __init__(
        self,
        law: Law,
        table: pd.DataFrame | Mapping[str, Any],
        *,
        target: str = "loss",
        input_map: Mapping[str, str] | None = None,
        group_column: str | None = "run_id",
        source: str = "table",
    ) -> None:
        from mixlaw.fit.problem.features import add_features  # the one feature path: derived inputs for every fit

        input_map = dict(input_map or {})
        df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(dict(table))
        df = add_features(df, law, input_map=input_map)
        self.input_map = {name: input_map.get(name, name) for name in law.inputs}
        self.x_np: dict[str, np.ndarray] = {}
        for name, col in self.input_map.items():
            self.x_np[name] = numeric_column(df, col, source, what=f"input '{name}' of law '{law.name}'")
        self.y = numeric_column(df, target, source, what="the target")
        if law.fit_space == "log":
            bad = np.flatnonzero(self.y <= 0)
            if bad.size:
                raise InputError(
                    f"expected a positive target for log-space law '{law.name}', got {self.y[bad[0]]:g}",
                    file=source,
                    row=row_of(df, int(bad[0])),
                    column=target,
                )
        if len(self.y) == 0:
            raise InputError(f"expected at least one row to fit, got none in {source}")
        self.target = target
        self.n = len(self.y)
        self.x = {k: torch.tensor(v) for k, v in self.x_np.items()}
        self.y_t = torch.tensor(self.y)
        self.log_y = torch.log(self.y_t) if law.fit_space == "log" else None
        if group_column is not None and group_column in df.columns:
            self.groups: np.ndarray | None = pd.factorize(df[group_column])[0]
            self.group_unit = group_column
        else:
            self.groups = None
            self.group_unit = "row"

    def ranges(self) -> dict[str, list[float]]:
        return {k: [float(np.min(v)), float(np.max(v))] for k, v in self.x_np.items()}

    def frame(self, law: Law) -> pd.DataFrame:
        """The fitted rows as the law sees them: canonical input names and the target under ``law.target``."""
        df = pd.DataFrame(self.x_np)
        df[law.target] = self.y
        return df


def numeric_column(df: pd.DataFrame, col: str, source: str, what: str) -> np.ndarray:
    """``df[col]`` as finite float64 values (``InputError`` naming file, row and column otherwise)."""
    if col not in df.columns:
        from mixlaw.runs.io.rules import closest_hint

        hint = closest_hint(col, map(str, df.columns), df.attrs.get("column_sources"))
        raise InputError(
            f"expected column '{col}' ({what}), got columns {list(df.columns)[:12]}{hint}", file=source, column=col
        )
    values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise InputError(f"expected a finite number, got {_cell_text(df, col, int(bad[0]))}", file=source,
                         row=row_of(df, int(bad[0])), column=col)  # fmt: skip
    return values


def _cell_text(df: pd.DataFrame, col: str, i: int) -> str:
    """A bad cell in words: ``an empty cell at run 'a' step 120``, ``'abc' at run 'a' step 120`` (never a numpy
    repr such as ``np.float64(nan)``); the run and step when the table has them."""
    raw = df[col].iloc[i]
    raw = raw.item() if isinstance(raw, np.generic) else raw
    empty = raw is None or (isinstance(raw, float) and np.isnan(raw)) or (isinstance(raw, str) and not raw.strip())
    text = "an empty cell" if empty else repr(raw)
    if "run_id" in df.columns and "step" in df.columns:
        step = df["step"].iloc[i]
        step = step.item() if isinstance(step, np.generic) else step
        text += f" at run {str(df['run_id'].iloc[i])!r} step {step:g}" if isinstance(step, int | float) else ""
    return text


def prepare_data(
    law: Law | str,
    table: pd.DataFrame | Mapping[str, Any],
    *,
    target: str = "loss",
    input_map: Mapping[str, str] | None = None,
    group_column: str | None = "run_id",
    source: str = "table",
) -> FitData:
    """Validate and convert the data of one fit (see :class:`FitData`)."""
    return FitData(get_law(law), table, target=target, input_map=input_map, group_column=group_column, source=source)


def internal_box(law: Law) -> tuple[np.ndarray, np.ndarray] | None:
    """``(lower, upper)`` per internal coordinate for the parameters mapped with ``transform="identity"`` that
    declare a finite bound (``-inf``/``inf`` elsewhere), or ``None`` when there is none. Every other transform
    keeps its parameter inside its bounds by construction."""
    lo: list[float] = []
    hi: list[float] = []
    for s in law.param_specs:
        boxed = s.kind == "identity" and (np.isfinite(s.lower) or np.isfinite(s.upper))
        lo += [s.lower if boxed else -np.inf] * s.n_internal
        hi += [s.upper if boxed else np.inf] * s.n_internal
    if np.all(np.isinf(lo)) and np.all(np.isinf(hi)):
        return None
    return np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)


def project_internal(law: Law, U: np.ndarray) -> np.ndarray:
    """``U`` (``(..., P)`` internal values) with the identity-mapped parameters clipped to their declared bounds:
    what the fit reports (the objective is flat beyond a bound, so a solver row may have wandered past it)."""
    box = internal_box(law)
    return np.array(U, dtype=np.float64) if box is None else np.clip(U, box[0], box[1])  # always a new array


def make_residuals(law: Law, x: Mapping[str, torch.Tensor], targets: torch.Tensor) -> Residuals:
    """``residuals(U, pid)`` in the law's fit space against ``targets`` (``(n,)``, or ``(B, n)``: one per problem).

    Log-space laws compare ``log_predict`` with ``log targets``; raw-space laws compare ``predict`` with the
    targets. With ``(B, n)`` targets, row ``k`` of ``U`` is compared with the targets of its problem ``pid[k]``.
    """
    y = torch.log(targets) if law.fit_space == "log" else targets
    per_problem = y.dim() == 2 and y.shape[0] > 1
    y_one = y.reshape(-1) if not per_problem else y
    predict = law.log_predict if law.fit_space == "log" else law.predict
    box = internal_box(law)

    def natural(U: torch.Tensor) -> dict[str, torch.Tensor]:
        if box is not None:  # identity-mapped parameters are held to their declared bounds (flat beyond them)
            U = torch.maximum(torch.minimum(U, torch.from_numpy(box[1])), torch.from_numpy(box[0]))
        return law.to_natural(U)

    def from_natural(p: Mapping[str, torch.Tensor], pid: torch.Tensor) -> torch.Tensor:
        return predict(x, p) - (y[pid] if per_problem else y_one)

    def residuals(U: torch.Tensor, pid: torch.Tensor) -> torch.Tensor:
        return from_natural(natural(U), pid)

    residuals.split = (natural, from_natural)  # type: ignore[attr-defined]  # the solver's two-stage Jacobian
    grad = getattr(law, "log_predict_grad", None) if law.fit_space == "log" else None
    if grad is not None:  # the law's analytic derivatives in its natural parameters (camel)

        def natural_grad(p: Mapping[str, torch.Tensor], pid: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
            value, grads = grad(x, p)
            return value - (y[pid] if per_problem else y_one), grads

        residuals.natural_grad = natural_grad  # type: ignore[attr-defined]  # used by split_jacobian
        dT = natural_jacobian(law)
        if dT is not None:
            residuals.natural_jacobian = dT  # type: ignore[attr-defined]
    return residuals


def natural_jacobian(law: Law) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """``dT(U)``: the Jacobian ``∂θ/∂u`` ``(K, F, P)`` of the internal → natural map of ``U`` ``(K, P)`` in closed
    form (``exp`` for log-mapped parameters, ``s_i(δ_ij − s_j)`` for a simplex's softmax, ...), or ``None`` for a
    law with box-clamped parameters (their autograd derivative is kept). The same entries as reverse mode through
    :meth:`~mixlaw.laws.Law.to_natural`, without its ``F`` copies of every row and its backward pass."""
    if internal_box(law) is not None:
        return None
    specs = law.param_specs
    F, P = sum(s.size for s in specs), sum(s.n_internal for s in specs)

    def dT(U: torch.Tensor) -> torch.Tensor:
        K = U.shape[0]
        out = torch.zeros(K, F, P, dtype=U.dtype)
        f = c = 0
        for s in specs:
            m, u = s.size, U[:, c : c + s.n_internal]
            if s.simplex:
                p = torch.softmax(torch.cat([u, torch.zeros_like(u[:, :1])], 1), 1)  # (K, m)
                blk = -p[:, :, None] * p[:, None, : m - 1]
                j = torch.arange(m - 1)
                blk[:, j, j] += p[:, : m - 1]
                out[:, f : f + m, c : c + m - 1] = blk
            else:
                if s.kind == "log":
                    d = torch.exp(u)
                elif s.kind == "neglog":
                    d = -torch.exp(u)
                elif s.kind == "identity":
                    d = torch.ones_like(u)
                else:  # lower + (upper - lower) * sigmoid(u)
                    sg = torch.sigmoid(u)
                    d = (s.upper - s.lower) * (sg * (1 - sg))
                j = torch.arange(m)
                out[:, f + j, c + j] = d
            f, c = f + m, c + s.n_internal
        return out

    return dT
