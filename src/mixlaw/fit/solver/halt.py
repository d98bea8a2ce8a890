"""Stopping a problem early once its outcome is settled: the ``halt`` rule of :func:`mixlaw.fit.solver.solve.solve`.

Some fits are run only to learn *what kind* of optimum they reach, not where exactly it lies. CAMEL's candidate
fits with ``k > 1`` (:func:`mixlaw.decide.mixture.law_fits.camel_reduce`) are the case: a fit whose components run
to the exponential limit (``alpha_i → ∞``, ``K_i → 0``; :mod:`mixlaw.decide.mixture.camel_k`) is refused and refitted
with fewer components, and following that limit to where ``K_i`` underflows took 750-950 iterations per loss on the
shipped probes while every start had been in the limit since iteration ~250.

A ``halt`` callable maps the internal points of the active rows ``(m, P)`` to ``(m,)`` bools, "this row's outcome
is settled". A problem is halted when, on :data:`HALT_CHECKS` consecutive checks :data:`HALT_EVERY` iterations apart,
every one of its active rows is settled and its lowest-objective live row is one of them: its rows could only go
on lowering their objective along a settled path, so the problem's estimate (its lowest row at the end) would be
settled too. Halted rows stop as ``stalled`` and are marked (``SolveResult.halted``), so the re-polish
(:func:`mixlaw.fit.solver.refine.repolish`) leaves them where they are. A problem whose best row is a finished,
unsettled row is never halted. The rule assumes that a settled row stays settled (the exponential limit is not
left once ``alpha_i`` is past the limit on every start for 20 iterations); on the shipped probes and the SlimPajama
fits no row left it (``tests/test_camel_halt.py`` checks the halted and the full fits' verdicts agree).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["HALT_CHECKS", "HALT_EVERY", "Halter"]

#: Iterations between two checks of the ``halt`` rule.
HALT_EVERY = 10
#: Consecutive checks on which a problem must be settled before it is halted.
HALT_CHECKS = 3
#: First iteration at which rows far behind their problem's best are screened out (module docstring).
SCREEN_FROM = 30
#: Relative objective gap above a problem's lowest live row beyond which an active row is screened out.
SCREEN_GAP = 0.1


class Halter:
    """The state of the ``halt`` rule over one solve (module docstring): a streak of settled checks per problem."""

    def __init__(self, settled: Callable[[np.ndarray], np.ndarray], pid: np.ndarray) -> None:
        self.settled = settled
        self.pid = np.asarray(pid, dtype=np.int64)
        self.streak = np.zeros(int(self.pid.max()) + 1 if self.pid.size else 0, dtype=np.int64)

    def stop(self, it: int, rows: np.ndarray, x: np.ndarray, f: np.ndarray, live: np.ndarray) -> np.ndarray:
        """``(len(rows),)`` bool: the still-active ``rows`` (internal points ``x``) to halt at iteration ``it``.

        ``f``: every row's current objective; ``live``: every row that can still be a problem's estimate (not
        failed, finite objective)."""
        out = np.zeros(len(rows), dtype=bool)
        if it % HALT_EVERY or len(rows) == 0:
            return out
        ok = np.asarray(self.settled(x), dtype=bool)
        pr = self.pid[rows]
        best = np.full(len(self.streak), -1, dtype=np.int64)
        cand = np.flatnonzero(live & np.isfinite(f))
        order = cand[np.lexsort((f[cand], self.pid[cand]))]
        first = np.ones(len(order), dtype=bool)
        first[1:] = self.pid[order][1:] != self.pid[order][:-1]
        best[self.pid[order[first]]] = order[first]
        f_best = np.where(best[pr] >= 0, f[np.maximum(best[pr], 0)], np.inf)
        far = (it >= SCREEN_FROM) & (f[rows] > (1.0 + SCREEN_GAP) * f_best)  # screened out (module docstring)
        out[far] = True
        for p in np.unique(pr):
            mine = (pr == p) & ~far
            if not mine.any():
                continue
            if ok[mine].all() and best[p] in set(rows[mine].tolist()):
                self.streak[p] += 1
            else:
                self.streak[p] = 0
            if self.streak[p] >= HALT_CHECKS:
                out[mine] = True
        return out
