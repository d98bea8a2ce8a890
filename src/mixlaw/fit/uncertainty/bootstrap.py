"""One bootstrap and one usable-row rule for the whole package.

The usable-row rule
-------------------
A solver row (one start of one problem, see :mod:`mixlaw.fit.solver.solve`) is **usable** when its final state — that of
the row it was merged into, for a merged row — is ``converged`` or ``stalled`` (the objective stopped decreasing
measurably: final to the solver's precision, parameters not certified) and its objective is finite. Rows that ran
out of iterations (``max_iter``) or failed are not usable. The estimate of a problem is its usable row with the
lowest objective; a problem without a usable row has no estimate.

Everything uses this rule: :func:`best_rows` implements it, :class:`~mixlaw.fit.Fitter` picks its point estimate
with it, every bootstrap resample (:func:`refit`, :func:`bootstrap_law`) and every problem of
:func:`~mixlaw.fit.fit_batch` is judged by it, and a resample without an estimate is counted in ``n_failed`` the
same way everywhere. One documented exception: a point estimate is always returned — when no start of the main
fit is usable the fitter falls back to the unfinished (``max_iter``) start with the lowest objective, reports
status ``max_iter`` and warns; resamples have no such fallback.

Resampling schemes
------------------
How each scheme draws its resamples is :mod:`mixlaw.fit.uncertainty.resampling`
(:func:`~mixlaw.fit.uncertainty.resampling.draw_resamples`).

- ``"auto"`` (the default of :class:`~mixlaw.fit.Fitter` and the CLI;
  :func:`~mixlaw.fit.uncertainty.resampling.resolve_scheme`): ``"runs"`` where some run has several rows (loss curves,
  schedules), ``"residuals"`` where every run is a single row (final checkpoints of a ladder, digitised points,
  one row per mixture). Those designs are *fixed*: the sizes, token
  counts and mixtures were chosen, not sampled. Drawing rows with replacement then changes the design itself —
  a resample of 20 ladder rows can hold one row of the smallest size and four of the largest — and the spread of
  its extrapolations describes designs nobody ran. The residual bootstrap keeps the design and resamples the noise
  (Davison & Hinkley 1997, §6.2.3-6.2.4: model-based resampling for a fixed design, case resampling for a random
  one). Where ``"runs"`` leaves more than :data:`LOST_MAX` of its resamples unusable (few runs: a draw of three
  runs holds all three with probability 2/9, and many draws cannot identify the law), ``"auto"`` draws the
  ``"wild"`` resamples below instead and uses them if fewer are unusable — the remedy of Cameron, Gelbach & Miller
  (2008) for few clusters — recording why (:attr:`BootstrapDraws.fallback`). The scheme that ran is what a result
  records.
- ``"runs"``: draw whole runs (the group column, default ``run_id``) with replacement; every run's points
  enter or leave together (evaluations along one run are not independent). Without a group column: rows.
- ``"rows"``: draw rows (evaluation points) with replacement.
- ``"residuals"``: keep the design, refit ``fitted + residuals`` with the residuals resampled with replacement
  *within* each run (for designs with one run per condition, where dropping runs leaves the law undetermined);
  where every run is a single row the residuals are pooled
  (:func:`~mixlaw.fit.uncertainty.resampling.resample_targets`).
- ``"parametric"``: keep the design, refit ``fitted + σ̂ z`` (``z`` standard normal, ``σ̂`` the residual standard
  deviation in the fit space, :func:`mixlaw.fit.uncertainty.fitted.residual_sd`): the law and Gaussian noise taken as
  true.
- ``"wild"``: the wild cluster bootstrap (:func:`~mixlaw.fit.uncertainty.resampling.wild_targets`): keep the design,
  refit
  ``fitted + v_g · r`` with each run's residual vector ``r`` multiplied by one random weight ``v_g`` (Webb's six
  points). For curves from few runs, where drawing runs whole leaves resamples that cannot identify the law (three
  MultiPowerLaw schedules: 19 of 40 ``runs`` resamples unusable at 25M, 0 of 40 ``wild``).
- ``"sizes"``: cluster bootstrap over model sizes — draw the distinct values of the size column (default
  ``n_params``) with replacement, every point of a size entering or leaving together. The scheme for extrapolating
  in size: it asks how much the fit moves when the set of sizes it saw changes, which is the uncertainty of a
  prediction at a larger size (the runs and rows schemes treat every point as independent information about it).

Every scheme's failed resamples are refitted once more (from the point estimate and from where their best start
stopped) before they are counted as unusable (``n_failed``); nothing is dropped silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.solver.refits import USABLE, BootstrapDraws, Loss, _refit, point_centre, rescue
from mixlaw.fit.uncertainty.resample_check import screen_unidentified
from mixlaw.fit.uncertainty.resampling import (
    LOST_MAX,
    SCHEME_CHOICES,
    SCHEMES,
    Scheme,
    draw_resamples,
    interval_status,
    resample_targets,
    resample_weights,
    resolve_scheme,
    wild_targets,
)
from mixlaw.laws import Law, get_law

__all__ = [
    "SCHEMES",
    "LOST_MAX",
    "SCHEME_CHOICES",
    "USABLE",
    "BootstrapDraws",
    "Scheme",
    "bootstrap_law",
    "interval_status",
    "refit_resamples",
    "resample_targets",
    "resample_weights",
    "resolve_scheme",
    "wild_targets",
]

def bootstrap_law(
    law: Law | str,
    data: FitData,
    seeds: np.ndarray,
    *,
    n: int,
    rng: np.random.Generator,
    scheme: Scheme = "runs",
    params: Mapping[str, Any] | None = None,
    loss: Loss = "huber",
    delta: float | None = None,
    max_iter: int | None = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    progress: Callable[[int, int], None] | None = None,
    clusters: np.ndarray | None = None,
    cluster_unit: str = "n_params",
) -> BootstrapDraws:
    """Bootstrap one fit: ``n`` resamples under ``scheme``, each refitted from ``seeds`` (internal starts).

    This is the one bootstrap of the package: :class:`~mixlaw.fit.Fitter` calls it, and a decision that needs
    intervals on a fitted law calls it (or :func:`refit` for its own resampling of targets). ``params`` (the
    point estimate, natural units) is needed by the ``"residuals"`` and ``"parametric"`` schemes; ``clusters``
    (one integer label per row, e.g. the factorised model size) by ``"sizes"``.
    """
    law_obj = get_law(law)
    if scheme not in SCHEME_CHOICES:
        raise InputError(f"expected bootstrap scheme {', '.join(SCHEME_CHOICES)}, got {scheme!r}")
    asked = scheme
    scheme = resolve_scheme(scheme, data, has_params=params is not None)  # type: ignore[assignment]
    if n < 0:
        raise InputError(f"expected a non-negative number of resamples, got {n}")
    if scheme in ("residuals", "parametric", "wild") and params is None:
        raise InputError(f"the {scheme} bootstrap needs the point estimate (params)")
    solver: dict[str, Any] = dict(loss=loss, delta=delta, max_iter=max_iter, ftol=ftol, xtol=xtol)
    draws = _draw_and_refit(law_obj, data, scheme, n, rng, seeds, params, clusters, cluster_unit, progress, solver)
    if asked == "auto" and scheme == "runs" and params is not None and interval_status(draws.n_failed, n) != "ok":
        # Too few runs for the runs bootstrap (module docstring, "auto"): the wild cluster bootstrap keeps them all.
        wild = _draw_and_refit(law_obj, data, "wild", n, rng, seeds, params, None, cluster_unit, progress, solver)
        if wild.n_failed < draws.n_failed:
            why = (
                f"the runs bootstrap left {draws.n_failed} of {n} resamples unusable (> {LOST_MAX:.0%}): "
                f"the wild cluster bootstrap, which keeps every run, was used"
            )
            return dataclasses.replace(wild, fallback=why)
    return draws


def _draw_and_refit(
    law: Law,
    data: FitData,
    scheme: str,
    n: int,
    rng: np.random.Generator,
    seeds: np.ndarray,
    params: Mapping[str, Any] | None,
    clusters: np.ndarray | None,
    cluster_unit: str,
    progress: Callable[[int, int], None] | None,
    solver: dict[str, Any],
) -> BootstrapDraws:
    """Draw ``n`` resamples under a resolved ``scheme``, refit them and screen them (:func:`bootstrap_law`)."""
    Y, W, unit = draw_resamples(law, data, scheme, n, rng, params=params, clusters=clusters, cluster_unit=cluster_unit)
    draws = refit_resamples(
        law, data, Y, W, seeds, params=params, scheme=scheme, unit=unit, progress=progress, **solver
    )
    return screen_unidentified(law, data, W, draws, params, Y, seeds, **solver)  # refitted, or counted


def refit_resamples(
    law: Law,
    data: FitData,
    targets: np.ndarray,
    weights: np.ndarray | None,
    seeds: np.ndarray,
    *,
    params: Mapping[str, Any] | None = None,
    scheme: str = "runs",
    unit: str = "run",
    loss: Loss = "huber",
    delta: float | None = None,
    max_iter: int | None = None,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    progress: Callable[[int, int], None] | None = None,
) -> BootstrapDraws:
    """Refit resamples the caller drew (``targets`` ``(n,)`` or ``(B, n)``, ``weights`` ``(B, n)`` multiplicities)
    in one batched solve from ``seeds``, rescue the failed ones from the point estimate, and judge them by the
    usable-row rule: the tail of :func:`bootstrap_law`, for decisions that draw their own resamples (the same
    mixtures for every law of ``mix optimize``). ``params`` is the point estimate (natural units; the rescue starts
    from it or from ``seeds[0]``, whichever fits the data better).
    """
    seeds = np.asarray(seeds, dtype=np.float64)
    kw: dict[str, Any] = dict(loss=loss, delta=delta, max_iter=max_iter, ftol=ftol, xtol=xtol)
    out, ok, status, objective, ends = _refit(law, data.x, targets, weights, seeds, progress=progress, **kw)
    centre = point_centre(law, data, params, seeds, loss=loss, delta=delta)
    state = (out, ok, status, objective)  # failed resamples: refitted, never dropped silently (see rescue)
    n_rescued = rescue(law, data.x, targets, weights, np.broadcast_to(centre, ends.shape), ends, state, **kw)
    return BootstrapDraws(
        params=pd.DataFrame(out[ok], columns=list(law.flat_names)),
        ok=ok,
        status=status,
        objective=objective,
        scheme=scheme,
        unit=unit,
        n_rescued=n_rescued,
    )


