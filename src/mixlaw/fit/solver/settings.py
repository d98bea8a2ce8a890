"""The tolerances and rules of one batched solve (:func:`mixlaw.fit.solver.solve.solve`), as one frozen group.

Internal: the engine builds a :class:`SolveSettings` from a fit's :class:`mixlaw.options.FitOptions` (loss, Huber
threshold, iteration cap, tolerances) and its own rules for the kind of solve (point fit, re-polish, resample
refits). The hooks of a solve (progress callback, history, trace, the ``halt`` rule) stay arguments of the call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_SETTINGS", "SolveSettings"]


@dataclass(frozen=True)
class SolveSettings:
    """How one batched solve runs; equal settings can share one solve (:mod:`mixlaw.fit.solver.multi`).

    Parameters
    ----------
    loss, delta
        ``"huber"`` with threshold ``delta`` (in residual units), or ``"l2"``.
    max_iter
        Iteration cap per row.
    ftol, xtol
        A row converges when an accepted step changes ``f`` by at most ``ftol·f`` and moves every internal
        parameter by at most ``xtol·(1 + |u|)``, or when its damping saturates (no representable descent left).
    merge_tol
        Max-abs distance in internal space under which two active rows of the same problem merge; ``None`` off.
    mu0
        Initial Levenberg–Marquardt damping, relative to the diagonal of ``Jᵀ Ω J``.
    max_step
        Cap on the max-abs change of the internal parameters in one step (a trust region in parameter space:
        it keeps a step from jumping to where ``exp`` overflows).
    stall_window, stall_tol
        A row whose objective fell by less than ``stall_tol`` (relative) over ``stall_window`` iterations stops
        with status ``stalled``: a flat valley, where further iterations buy nothing measurable in the objective.
    stall_units
        When given, a row also stalls when its objective fell by less than ``stall_units`` *noise units* over the
        last :data:`~mixlaw.fit.solver.solve.UNITS_WINDOWS` windows (60 iterations by default), the unit being the
        row's mean loss per data point, ``f / Σ_i W_i`` (one unit of the Huber loss per point: the scale on which the
        data can tell two parameter sets apart). This is the test of the adaptive iteration limit
        (:mod:`mixlaw.fit.solver.refine`): a row crawling along a valley by less than that is stopped, since what it
        still gains is negligible against the noise of the objective.
    spare_best
        With ``stall_units``: the row with the lowest objective of its problem (the estimate, for a point fit) is
        exempt from the noise-scaled test and runs on to convergence, the relative test or the cap; only the other
        starts, which cannot become the estimate at the pace they still gain, are stopped early.
    ladder
        ``"full"``: every iteration tries every rung of :data:`~mixlaw.fit.solver.steps.LADDER`. ``"lazy"`` (the
        resample refits, which start at the point estimate, near their own optimum): the rungs
        :data:`~mixlaw.fit.solver.steps.LADDER_FIRST` first, with their accelerations and the old rule's steps, and
        the rungs :data:`~mixlaw.fit.solver.steps.LADDER_REST` only for the rows none of those improved.
    rule
        The step rule (private, for ``benchmarks/solver_iters.py`` and the step tests): ``None`` (default) is the
        module's ``_RULE`` (``"new"``); ``"ladder"``, ``"old"``: see :mod:`mixlaw.fit.solver.solve`.
    """

    loss: Literal["huber", "l2"] = "huber"
    delta: float = 1e-3
    max_iter: int = 300
    ftol: float = 1e-11
    xtol: float = 1e-9
    merge_tol: float | None = 1e-8
    mu0: float = 1e-4
    max_step: float = 4.0
    stall_window: int = 30
    stall_tol: float = 1e-9
    stall_units: float | None = None
    spare_best: bool = False
    ladder: Literal["full", "lazy"] = "full"
    rule: Literal["new", "old", "ladder"] | None = None


#: The settings of a solve given none.
DEFAULT_SETTINGS = SolveSettings()
