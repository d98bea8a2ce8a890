"""Resamples whose fit has run to where their rows cannot identify the law: refitted, or counted unusable and shown.

Why
---
A bootstrap that resamples whole units (runs, model sizes, rows) can draw a resample whose rows hold few distinct
units (with ``k`` units a draw holds a single one with probability ``k^(1−k)``: 1/9 for three runs), and its fit can
run off to a degenerate limit of the law where those rows no longer determine it. The multi-power law fitted on the
``constant_24000`` schedule alone is such a resample: at the point estimate its rows determine the law (weakly), but
its own fit ends where L0 and B only enter together, and on the held-out schedules of the MultiPowerLaw 100M case its
predictions were up to 0.8 (log loss) off the point fit's, which made the bootstrap interval 13 % wide on average
where the other resamples give 0.3 % (``docs/design/resample-check.md``). At 25M the fits without ``constant_24000``
run to ``B ≈ 1.7e14, β → 0``, where only ``B·β`` is determined. Such a draw's position along the undetermined
direction is arbitrary, not the data's. (The few-clusters failure of the pairs cluster bootstrap: Cameron, Gelbach &
Miller 2008, *Rev. Econ. Stat.* 90: 414.)

What
----
After the resamples are refitted, every usable resample whose rows are a proper subset of the fitted rows is checked
with the package's own identifiability test (:func:`mixlaw.fit.uncertainty.identify.assess`, the test every fit
reports), on the
rows it holds: it is flagged when it is ``unidentifiable`` at its *own* estimate but not at the point estimate (and
the full data are not ``unidentifiable``). A flagged resample is refitted once from the point estimate; an
identifiable refit with an objective no higher replaces it (counted in ``n_rescued``: the flagged fit was a
degenerate local optimum, e.g. a power law stopped at ``α = 0`` where only ``E + A`` is determined), otherwise it is
unusable: status ``unidentifiable``, counted in ``n_failed`` (the ``k/B resamples unusable`` beside every interval)
and in ``n_unidentifiable``.

Not flagged: a resample whose rows cannot determine the law *at the point estimate either* (two model sizes for the
three size parameters of the Chinchilla law, two mixtures for a three-parameter mixing law). No residual depends on
the undetermined direction anywhere near the point, so the solver does not move along it and the draw keeps the
starts' value there; its spread along that direction is understated, which the fit's own identifiability report
states (weak parameters). Resamples that keep every row (``residuals``, ``parametric``, a draw of every unit) are
not checked: their design is the fit's own. A *weakly* determined resample is kept: its spread is real.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mixlaw.fit.solver.refits import BootstrapDraws, Loss, point_centre, refit

if TYPE_CHECKING:
    from mixlaw.fit.problem.data import FitData
    from mixlaw.laws import Law

__all__ = ["STATUS_UNIDENTIFIABLE", "point_identified", "screen_unidentified", "unidentified"]

STATUS_UNIDENTIFIABLE = "unidentifiable"


def screen_unidentified(
    law: Law,
    data: FitData,
    weights: np.ndarray | None,
    draws: BootstrapDraws,
    params: Mapping[str, Any] | None,
    targets: np.ndarray | None = None,
    seeds: np.ndarray | None = None,
    *,
    loss: Loss = "huber",
    delta: float | None = None,
    max_iter: int | None = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
) -> BootstrapDraws:
    """``draws`` with the usable resamples that cannot identify the law (module docstring) refitted, or made
    unusable.

    ``weights`` are the ``(B, n)`` multiplicities the resamples were drawn with (``None``: every row kept, nothing
    to check); ``params`` the point estimate (``None``: not checked). A flagged resample is first refitted from the
    point estimate (``targets``, ``seeds``, solver keywords as :func:`~mixlaw.fit.solver.refits.refit` takes them; no
    refit without ``seeds``): a usable, identifiable refit with an objective no higher than the flagged fit's
    replaces it (the flagged fit was a degenerate local optimum, e.g. a power law at ``α = 0`` where only ``E + A``
    is determined) and counts as rescued; otherwise the resample is unusable, status ``unidentifiable``."""
    if weights is None or params is None or not draws.ok.any():
        return draws
    W = np.asarray(weights)
    if W.ndim != 2 or W.shape[0] != draws.ok.size:
        return draws
    point = law.flatten(params)
    if not point_identified(law, data, point):
        return draws  # the full data do not determine the law either: the fit itself says so
    names = list(law.flat_names)
    full = np.full((draws.ok.size, len(names)), np.nan)
    full[draws.ok] = draws.params[names].to_numpy(dtype=np.float64)
    seen: dict[bytes, bool] = {}  # resamples drawing the same multiset of units have the same rows and estimate
    for b in np.flatnonzero(draws.ok):
        key = W[b].tobytes() + full[b].tobytes()
        if key not in seen:
            seen[key] = unidentified(law, data, full[b], W[b] > 0, point)
    flagged = np.array([b for b in np.flatnonzero(draws.ok) if seen[W[b].tobytes() + full[b].tobytes()]], dtype=int)
    if flagged.size == 0:
        return draws
    ok, status, objective = draws.ok.copy(), draws.status.copy(), draws.objective.copy()
    fixed = np.zeros(flagged.size, dtype=bool)
    if seeds is not None:
        S = np.asarray(seeds, dtype=np.float64)
        centre = point_centre(law, data, params, S, loss=loss, delta=delta)
        Y = data.y if targets is None else np.asarray(targets)
        Yf = Y[flagged] if Y.ndim == 2 else Y
        p2, ok2, _, obj2 = refit(law, data.x, Yf, W[flagged], centre[None, :], loss=loss, delta=delta,
                                 max_iter=max_iter, ftol=ftol, xtol=xtol)  # fmt: skip
        for i, b in enumerate(flagged):
            good = ok2[i] and obj2[i] <= objective[b] * (1 + 1e-9) + 1e-300
            if good and not unidentified(law, data, p2[i], W[b] > 0, point):
                full[b], objective[b], fixed[i] = p2[i], obj2[i], True
    bad = flagged[~fixed]
    ok[bad], status[bad] = False, STATUS_UNIDENTIFIABLE
    return dataclasses.replace(
        draws, params=pd.DataFrame(full[ok], columns=names), ok=ok, status=status, objective=objective,
        n_rescued=draws.n_rescued + int(fixed.sum()), n_unidentifiable=int(bad.size),
    )  # fmt: skip


def point_identified(law: Law, data: FitData, flat: np.ndarray) -> bool:
    """Whether the full data determine the law at the flat natural parameters ``flat`` (not ``unidentifiable``)."""
    from mixlaw.fit.uncertainty.identify import assess

    u = law.to_internal(law.unflatten(np.asarray(flat, dtype=np.float64)))
    return bool(assess(law, data.x_np, data.y, u, at_bound=_at_bound(law, flat))["status"] != STATUS_UNIDENTIFIABLE)


def unidentified(law: Law, data: FitData, flat: np.ndarray, held: np.ndarray, point: np.ndarray | None = None) -> bool:
    """Whether the fit ``flat`` (flat natural parameters) on the rows ``held`` (bool mask) has run to where those rows
    cannot identify the law (:func:`mixlaw.fit.uncertainty.identify.assess` says ``unidentifiable`` at ``flat``)
    although they do
    at the point estimate ``point`` (module docstring; without ``point``: unidentifiable at ``flat``). ``False`` when
    every row is held."""
    if held.all():
        return False
    x = {k: np.asarray(v)[held] for k, v in data.x_np.items()}
    y = np.asarray(data.y)[held]
    if not _unidentifiable_at(law, x, y, flat):
        return False
    return point is None or not _unidentifiable_at(law, x, y, point)


def _unidentifiable_at(law: Law, x: Mapping[str, np.ndarray], y: np.ndarray, flat: np.ndarray) -> bool:
    from mixlaw.fit.uncertainty.identify import assess

    u = law.to_internal(law.unflatten(np.asarray(flat, dtype=np.float64)))
    return bool(assess(law, x, y, u, at_bound=_at_bound(law, flat))["status"] == STATUS_UNIDENTIFIABLE)


def _at_bound(law: Law, flat: np.ndarray) -> list[str]:
    """Parameters on a bound of their range (their zero derivative is the bound's doing; as ``assess_fit``)."""
    names = [n for n, v in zip(law.flat_names, flat, strict=True) if law.spec(n).at_bound(float(v))]
    return sorted({n.split("[")[0] for n in names})
