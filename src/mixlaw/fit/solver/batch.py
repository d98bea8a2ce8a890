"""Many fits of one law over one design in one batched solve (residual and parametric bootstraps, ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.solver.pools import threads
from mixlaw.fit.solver.refits import USABLE, _refit, internal_starts, rescue
from mixlaw.laws import Law, get_law

__all__ = ["BatchFit", "fit_batch", "threads"]


@dataclass(frozen=True)
class BatchFit:
    """Result of :func:`fit_batch`: one parameter set per target row (``NaN`` where the problem has no estimate).

    ``status`` is the final state of each problem's best row; only ``converged`` and ``stalled`` problems have
    parameters (the usable-row rule of :mod:`mixlaw.fit.uncertainty.bootstrap`). ``params`` has the flat natural
    columns.
    """

    law_name: str
    params: pd.DataFrame  # (B, F), canonical form
    objective: np.ndarray  # (B,)
    status: np.ndarray  # (B,) "converged" | "stalled" | "max_iter" | "failed"
    law: Law | None = field(default=None, repr=False, compare=False)
    n_rescued: int = 0
    """Problems without an estimate from their starts that the rescue refit recovered (they count as ok)."""

    @property
    def ok(self) -> np.ndarray:
        """``(B,)`` bool: the problems with an estimate."""
        return np.isin(self.status, USABLE)

    @property
    def n_failed(self) -> int:
        return int((~self.ok).sum())

    def row(self, b: int) -> dict[str, Any] | None:
        """Parameters of problem ``b`` (floats, lists for vector parameters), or ``None`` if it has no estimate."""
        if self.status[b] not in USABLE:
            return None
        if self.law is None:
            return {str(k): float(v) for k, v in self.params.iloc[b].items()}
        return self.law.unflatten(self.params.iloc[b].to_numpy(dtype=np.float64))


def fit_batch(
    law: Law | str,
    table: pd.DataFrame | Mapping[str, Any],
    targets: np.ndarray,
    *,
    starts: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]],
    input_map: Mapping[str, str] | None = None,
    loss: Literal["huber", "l2"] = "huber",
    delta: float | None = None,
    max_iter: int | None = None,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    n_threads: int | None = 1,
) -> BatchFit:
    """Fit one law to many target vectors over the same inputs in ONE batched solve.

    The building block of residual and parametric bootstraps (and of any "same design, many responses"
    problem): row ``b`` of ``targets`` (shape ``(B, n)``) is fitted from its own starts, every start of every
    problem is a row of the same vectorised solve (see :func:`mixlaw.fit.solver.solve.solve`). Problems are judged by
    the usable-row rule of :mod:`mixlaw.fit.uncertainty.bootstrap` (:func:`~mixlaw.fit.solver.refits.refit` does the
    work), and a
    problem without an estimate is refitted from its first start and from where its best row stopped
    (:func:`~mixlaw.fit.solver.refits.rescue`, as every bootstrap resample) before it is counted in ``n_failed``.

    Parameters
    ----------
    law
        Law name or instance.
    table
        The inputs (the law's input columns); ``n`` rows.
    targets
        ``(B, n)`` target values, one problem per row.
    starts
        Natural-unit starts: one list of dicts shared by every problem, or ``B`` lists (one per problem; each of
        the same length ``k``).
    loss, delta, max_iter, ftol, xtol, n_threads
        As in :class:`~mixlaw.fit.Fitter` (``max_iter=None``: the adaptive limit of :mod:`mixlaw.fit.solver.refine`).
    """
    law_obj = get_law(law)
    Y = np.atleast_2d(np.asarray(targets, dtype=np.float64))
    if not np.isfinite(Y).all():
        raise InputError("expected finite targets in every resample")
    df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(dict(table))
    if Y.shape[1] != len(df):
        raise InputError(f"expected targets with {len(df)} columns (one per row), got {Y.shape[1]}")
    if law_obj.fit_space == "log" and (Y <= 0).any():
        raise InputError(f"expected positive targets for log-space law '{law_obj.name}'")
    data = FitData(law_obj, df.assign(_target=Y[0]), target="_target", input_map=input_map, group_column=None)
    B = Y.shape[0]
    per_problem = len(starts) > 0 and not isinstance(starts[0], Mapping)
    rows: list[Sequence[Mapping[str, Any]]] = []
    for s in starts if per_problem else [starts]:
        if isinstance(s, Mapping):  # a flat list mixing dicts and lists
            raise InputError("expected one list of start dicts, or one list of start dicts per problem")
        rows.append(list(cast(Sequence[Mapping[str, Any]], s)))
    rows = rows if per_problem else rows * B
    if len(rows) != B:
        raise InputError(f"expected {B} start lists (one per problem), got {len(rows)}")
    k = len(rows[0])
    if k == 0 or any(len(r) != k for r in rows):
        raise InputError("expected the same, non-zero number of starts for every problem")
    seeds = np.stack([internal_starts(law_obj, r) for r in rows]) if per_problem else internal_starts(law_obj, rows[0])
    kw: dict[str, Any] = dict(loss=loss, delta=delta, max_iter=max_iter, ftol=ftol, xtol=xtol)
    with threads(n_threads):
        params, ok, status, objective, ends = _refit(law_obj, data.x, Y, None, seeds, **kw)
        first = seeds[:, 0, :] if per_problem else np.broadcast_to(seeds[0], ends.shape)
        n_rescued = rescue(law_obj, data.x, Y, None, first, ends, (params, ok, status, objective), **kw)
    return BatchFit(
        law_name=law_obj.name,
        params=pd.DataFrame(params, columns=list(law_obj.flat_names)),
        objective=objective,
        status=status,
        law=law_obj,
        n_rescued=n_rescued,
    )
