"""Prediction intervals calibrated on out-of-sample errors of the fit's own data ("extrapolation-calibrated").

Why
---
A bootstrap prediction interval (:mod:`mixlaw.fit.uncertainty.intervals`, method ``bootstrap``) adds the *in-sample*
residual
noise to the parameter spread of a resampling scheme. Both describe interpolation. A scaling law is used to
extrapolate, and a held-out larger model (or a later step) carries *extrapolation* error: the law's
misspecification and the lever arm of its exponents, which grow with how far the prediction reaches. The fitted
data can estimate that error themselves, by refitting on part of them and predicting the rest.

What
----
Nested validation inside the fitted rows only (the held-out points of a validation are never seen):

- **grouped K-fold** (``K = min(10, groups)``) over the model sizes (the distinct values of the size column) when
  there is one, else over runs: the error of a *new* size or run inside the range. Points of one size share that
  size's deviation from the law (digitised points along one curve, runs of one model), so they leave together;
- **forward cuts** along the calibration *axis* (the law's size input ``n_params`` when it has one, else its first
  strictly positive input — ``mpl_s1``, the LR area, for the multi-power law): fit on the sizes with axis ≤ a cut
  (cuts between sizes, at up to 8 of them from the median size up to the second largest), predict the larger ones.

Every fold fit is one problem of a single batched solve warm-started from the point estimate
(:func:`mixlaw.fit.solver.refits.refit`, at least :data:`FOLD_MIN_ITER` iterations, failed folds rescued once). A fold
repeating another (the cut below the largest size is the K-fold that leaves it out) is dropped.

Each held-out error ``e`` (fit space: log for log-space laws) of a fold fit is *standardised* by that fold fit's own
standard error of a new observation at the row, ``z = e / se`` — the delta method, ``se² = σ̂_j² (1 + gᵀ(JᵀJ)⁺g)``
with the fold's residual variance, ``J`` the Jacobian of its fitted rows and ``g`` that of the row
(:func:`_delta_sd`). ``se`` already grows with the lever arm of a fit on fewer, smaller sizes, so ``z`` measures
what the fold's own interval does not expect: misspecification of the law, and sizes that deviate together.
Its mean square is modelled as growing with the distance ``d`` (e-folds beyond the fold's fitted range of the
axis, ``log(axis / max fitted)``):

.. math:: E[z^2 \\mid d] = c^2 + \\gamma^2 d^2,

``c²`` (``inflation``) the mean ``z²`` of the K-fold rows inside their fold's range (a new size, ``c = 1`` without
such rows) and ``γ²`` (``growth``) the fold-level least-squares slope, through the origin, of ``M_j − c²`` on
``D_j`` over the folds with rows beyond their fitted range (``M_j`` the fold's mean ``z²``, ``D_j`` its mean
``d²``, both over its rows beyond its range; each fold counts once, as its rows share one fitted law), taken as
its expected value under a flat prior on ``γ² ≥ 0`` given its standard error (the mean of the truncated normal: a
slope near 0 that the few cuts cannot tell from a growth is not read as none;
:func:`mixlaw.fit.evaluate.calib_growth.error_model`). Folds with no residual
degrees of freedom cannot be standardised and are left out (``c = 1``, ``γ = 0`` when none is left).

The **extrapolation-calibrated interval** at inputs ``x`` is the base prediction interval — the bootstrap one of
:mod:`mixlaw.fit.uncertainty.intervals` (the full fit's parameter spread plus Student-t noise), or ``ŷ ± t σ̂``
without draws —
widened about its centre in fit space (the geometric mean of its ends for log-space laws) by

.. math:: f(x) = \\max\\left(1, \\sqrt{c^2 + \\gamma^2 d(x)^2}\right),

``d(x)`` the e-folds of the query beyond the full fit's range of the axis (0 inside). It is never narrower than the
base interval: the calibration adds the extrapolation error that the nested fits show and the base interval does
not carry. ``mixlaw.fit.uncertainty.intervals`` makes it the default (``method="auto"``) for predictions that
extrapolate.

Where the K-fold leaves out *runs that are curves* (many evaluations per run, no size clusters: schedules,
mixtures), a new run's own deviation from the law is not a ratio on the fit's standard error: the ratio ``c`` is
then 1 and :mod:`mixlaw.fit.evaluate.calib_runs` adds a new-run term in quadrature (leave-runs-out excess ``τ``,
growing by
``κ`` per e-fold beyond a typical run's end as forward cuts *within* every run show), Student-t with ``k`` runs;
``τ`` is jackknife-corrected to the full fit's new-run error (:func:`mixlaw.fit.evaluate.calib_runs.new_run_sd`).

The distance is in e-folds, not in fitted log-spans, because the standardisation has already divided out the lever
arm (a fit on a narrower span has a proportionally larger ``se``); what remains — the law bending away from the
data — grows with how far the prediction reaches. On the saved fits of ``benchmarks/coverage.py`` (Epoch,
N > 5e9 held out; intervals taken symmetric about ŷ in that offline comparison) e-folds put 88 % of the held-out
points inside the 95 % interval, fitted log-spans 71 %; the measured coverage of the shipped method is in
``docs/coverage.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch

from mixlaw.fit.evaluate.calib_axes import AxisGrowth, axis_distance, axis_values, fit_axes
from mixlaw.fit.evaluate.calib_delta import delta_sd as _delta_sd
from mixlaw.fit.evaluate.calib_folds import FoldErrors, _cluster_top, _log_distance, _masks, _rel_distance, _unit
from mixlaw.fit.evaluate.calib_full import full_residuals, leaves_a_parameter_unbounded, misfit_per_axis
from mixlaw.fit.evaluate.calib_growth import accepts_full_fit, axis_excess, error_model
from mixlaw.fit.problem.data import FitData
from mixlaw.laws import Law

__all__ = ["Calibration", "calibrate", "calibration_axis", "fold_errors"]

#: Iteration cap of the fold fits at least (one batched solve of at most 18 problems; a fit crawling along a flat
#: valley, as the Chinchilla law's E-alpha valley on the OLMo ladder, needs 1,000-3,000 iterations).
FOLD_MIN_ITER = 3000
#: A fit warns when the refit without its largest axis value misses it by more than this many in-sample residual
#: standard deviations (RMS): the law's error grows beyond the fitted range faster than its noise.
RELIABLE_RATIO = 2.0
AXIS_FIELDS = ("name", "kind", "lo", "hi", "growth", "n_cuts", "term", "misfit")


def calibration_axis(law: Law, data: FitData, size_input: str = "n_params") -> str | None:
    """The law input the extrapolation distance is measured along (``None`` when no input is strictly positive)."""
    if size_input in data.x_np and (data.x_np[size_input] > 0).all():
        return size_input
    for name in law.inputs:
        v = data.x_np[name]
        if (v > 0).all() and np.unique(v).size > 1:
            return name
    return None


@dataclass(frozen=True)
class Calibration:
    """The extrapolation calibration of one fit (module docstring): the base prediction interval is widened about
    the prediction by ``factor(d) = max(1, sqrt(inflation² + (growth · d)²))``, ``d`` the e-folds of the query
    beyond the fitted range of ``axis``."""

    axis: str | None
    lo: float
    hi: float
    inflation: float
    """Out-of-sample error of a new size inside the range over its predicted standard error (RMS of the scores)."""
    growth: float
    """Growth of that ratio per e-fold of extrapolation along ``axis``."""
    n_folds: int
    """Usable nested fits in all (K-fold and forward cuts)."""
    n_forward: int
    """Forward cuts among them (fit on the smaller sizes, predict the larger ones)."""
    n_growth: int
    """Nested fits with points beyond their fitted range (behind ``growth``)."""
    n_scores: int
    """Standardised out-of-sample errors behind the model (held-out rows summed over the nested fits)."""
    method: str = "calibrated"
    forward_ratio: float = float("nan")
    """RMS error at the largest fitted axis value when a refit leaves it out, over the in-sample residual sd."""
    warnings: list[str] = field(default_factory=list)
    """Notes for the user (e.g. ``forward_ratio`` above :data:`RELIABLE_RATIO`: extrapolation is unreliable)."""
    run_sd: float = 0.0
    """Between-run error ``τ`` (fit space) of a *new run*: the excess of the leave-runs-out errors over their folds'
    own standard errors (:mod:`mixlaw.fit.evaluate.calib_runs`); 0 when the folds are over sizes or runs are single
    rows."""
    run_dof: int = 0
    """Held-out runs behind ``run_sd`` (the Student-t degrees of freedom of its term)."""
    unit: str = "sizes"
    """What the K-fold leaves out: ``sizes`` (clusters of the size column), ``runs`` or ``rows``."""
    step_growth: float = 0.0
    """Growth ``κ`` (fit space, per e-fold of the axis) of the new-run term beyond the fitted range, from the
    forward cuts within every run (:mod:`mixlaw.fit.evaluate.calib_runs`)."""
    n_within: int = 0
    """Within-run forward cuts behind ``step_growth``."""
    run_top: float = float("nan")
    """Median over the fitted runs of each run's largest ``axis`` value: the step term's distance is measured
    beyond it (a new run has no fitted part of its own; it is compared with a typical fitted run)."""

    run_excess: float = 0.0
    """``τ̂`` before the jackknife correction: the leave-runs-out excess, the folds' own parameter error included."""
    fold_var: float = 0.0
    """Mean grouped-jackknife variance ``v̄_J`` of the leave-runs-out fits' predictions (fit space): the full fit's
    parameter error on a run (:mod:`mixlaw.fit.evaluate.calib_runs`, "Jackknife")."""
    axes: tuple[AxisGrowth, ...] = ()
    """Every axis of the fit with its fitted range and growth (:mod:`mixlaw.fit.evaluate.calib_axes`; the primary
    ``axis`` first). Empty for a calibration saved before axes existed: ``axis`` and ``growth`` alone."""

    def distances(self, x: Mapping[str, np.ndarray], m: int) -> np.ndarray:
        """``(m, A)`` distance of each row beyond the fitted range of each of :attr:`axes` (0 inside)."""
        if not self.axes:
            return self.distance(x, m)[:, None]
        return np.stack([a.distance(x, m) for a in self.axes], axis=1)

    def excess(self) -> np.ndarray:
        """``(A,)`` additive growth ``κ_a`` (fit space per unit of distance) of each of :attr:`axes` (0 for the
        primary axis, whose growth is the ratio :attr:`growth`)."""
        return np.array([a.growth if a.term == "additive" else 0.0 for a in self.axes])

    def factor_at(self, x: Mapping[str, np.ndarray], m: int) -> np.ndarray:
        """``(m,)`` widening of the base interval at the rows ``x``: :meth:`factor` at the primary axis's distance."""
        return self.factor(self.distance(x, m))

    def axis_half(self, level: float, x: Mapping[str, np.ndarray], m: int) -> np.ndarray:
        """``(m,)`` half-width (fit space) of the other axes' extrapolation term at ``level``:
        ``z_{(1+level)/2} · sqrt(Σ_a κ_a² d_a(x)²)`` (:func:`~mixlaw.fit.evaluate.calib_growth.axis_excess`; 0 inside
        every
        fitted range)."""
        if not self.axes:
            return np.zeros(m)
        from scipy.stats import norm

        d2 = (self.distances(x, m) * self.excess()) ** 2
        return float(norm.ppf((1 + level) / 2)) * np.sqrt(d2.sum(axis=1))

    def beyond(self, x: Mapping[str, np.ndarray], m: int) -> np.ndarray:
        """``(m,)`` whether each row lies beyond the fitted range of any axis."""
        return np.asarray((self.distances(x, m) > 0).any(axis=1), dtype=bool)

    def far_axes(self, x: Mapping[str, np.ndarray], m: int) -> list[str]:
        """The axes (names) along which any of the rows lies beyond the fitted range, farthest first."""
        d = self.distances(x, m)
        names = [a.name for a in self.axes] if self.axes else [str(self.axis)]
        reach = d.max(axis=0, initial=0.0)
        return [names[j] for j in np.argsort(-reach, kind="stable") if reach[j] > 0]

    def distance(self, x: Mapping[str, np.ndarray], m: int) -> np.ndarray:
        """``(m,)`` e-folds of each row's axis value outside ``[lo, hi]`` (0 inside)."""
        if self.axis is None or self.axis not in x:
            return np.zeros(m)
        v = np.asarray(x[self.axis], dtype=np.float64).reshape(-1)
        return _log_distance(v, self.lo, self.hi)

    def run_distance(self, x: Mapping[str, np.ndarray], m: int) -> np.ndarray:
        """``(m,)`` e-folds of each row's axis value beyond :attr:`run_top` (0 below; the step term's distance)."""
        if self.axis is None or self.axis not in x or not np.isfinite(self.run_top):
            return self.distance(x, m)
        v = np.asarray(x[self.axis], dtype=np.float64).reshape(-1)
        return _log_distance(v, 0.0, self.run_top)

    def factor(self, d: np.ndarray | float) -> np.ndarray:
        """``max(1, sqrt(inflation² + (growth · d)²))``: how much wider than the base interval at distance ``d``
        (the calibration only widens: the base interval already carries the full fit's parameter spread)."""
        f = np.sqrt(self.inflation**2 + (self.growth * np.asarray(d, dtype=np.float64)) ** 2)
        return np.maximum(f, 1.0)

    def run_half(self, level: float, d: np.ndarray | float = 0.0, carried: float = 0.0) -> np.ndarray:
        """Half-width (fit space) of the new-run term at ``level`` and distance ``d``:
        ``t_k((1 + level) / 2) · sqrt(max(0, τ² − carried) + κ² d²)`` (0 without one;
        :mod:`mixlaw.fit.evaluate.calib_runs`).

        ``carried``: the part of ``τ²`` the base interval already carries (the full fit's parameter error over
        runs, :attr:`fold_var`, when the base bootstrap resamples the same runs)."""
        dd = np.asarray(d, dtype=np.float64)
        if self.run_dof < 1 or (self.run_sd <= 0 and self.step_growth <= 0):
            return np.zeros_like(dd)
        from scipy.stats import t

        q = float(t.ppf((1 + level) / 2, self.run_dof))
        return q * np.sqrt(max(0.0, self.run_sd**2 - carried) + (self.step_growth * dd) ** 2)

    def summary(self) -> str:
        """One line for the output: what the interval is calibrated on."""
        line = (
            f"extrapolation-calibrated on {self.n_folds} nested fits ({self.n_forward} forward cuts along "
            f"{self.axis}): the bootstrap interval widened x{max(1.0, self.inflation):.2f} inside the range, the "
            f"out-of-sample/predicted error ratio growing {self.growth:.2f} per e-fold beyond it"
        )
        if self.run_dof > 0:
            line += (
                f", plus a new-run error {self.run_sd:.3g} (fit space; Student-t, {self.run_dof} dof) from "
                f"leave-runs-out fits over {self.run_dof} runs"
            )
            if self.n_within:
                line += (
                    f", growing {self.step_growth:.3g} per e-fold of {self.axis} beyond a typical run's end "
                    f"({self.run_top:.3g}; {self.n_within} forward cuts within every run)"
                )
        others = [a for a in self.axes if a.term == "additive" and a.n_cuts]
        if others:
            line += (
                "; an extrapolation error growing along the other axes "
                + ", ".join(f"{a.name} {a.growth:.3g} ({a.n_cuts} cuts)" for a in others)
                + " (fit space per e-fold beyond the range, in quadrature)"
            )
        return line

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibration:
        """From a fit JSON (a model saved before this one, without ``inflation``, reads as no widening)."""
        notes = [str(w) for w in d.get("warnings", [])]
        if "inflation" not in d:
            notes.append("calibration saved by an older mixlaw: refit for extrapolation-calibrated intervals")
        return cls(
            axis=None if d.get("axis") is None else str(d["axis"]),
            lo=float(d["lo"]),
            hi=float(d["hi"]),
            inflation=float(d.get("inflation", 1.0)),
            growth=float(d.get("growth", 0.0)),
            n_folds=int(d.get("n_folds", 0)),
            n_forward=int(d.get("n_forward", 0)),
            n_growth=int(d.get("n_growth", 0)),
            n_scores=int(d.get("n_scores", 0)),
            method=str(d.get("method", "calibrated")),
            forward_ratio=float(d.get("forward_ratio", float("nan"))),
            warnings=notes,
            run_sd=float(d.get("run_sd", 0.0)),
            run_dof=int(d.get("run_dof", 0)),
            unit=str(d.get("unit", "sizes")),
            step_growth=float(d.get("step_growth", 0.0)),
            n_within=int(d.get("n_within", 0)),
            run_top=float(d.get("run_top", float("nan"))),
            run_excess=float(d.get("run_excess", d.get("run_sd", 0.0))),
            fold_var=float(d.get("fold_var", 0.0)),
            axes=tuple(AxisGrowth(**{k: a[k] for k in AXIS_FIELDS if k in a}) for a in d.get("axes", ())),
        )


def fold_errors(
    law: Law,
    data: FitData,
    seeds: np.ndarray,
    *,
    size_input: str = "n_params",
    clusters: np.ndarray | None = None,
    rng: np.random.Generator,
    loss: Literal["huber", "l2"] = "huber",
    delta: float | None = None,
    max_iter: int | None = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
) -> FoldErrors | None:
    """Refit the law on the grouped K-fold and forward-cut masks (module docstring) and predict what each left out.

    ``None`` when no fold can be formed or none is usable. The solver keywords are
    :func:`mixlaw.fit.solver.refits.refit`'s; an explicit ``max_iter`` is raised to :data:`FOLD_MIN_ITER`."""
    from mixlaw.fit.evaluate.calib_runs import run_distance
    from mixlaw.fit.solver.refits import refit, rescue
    from mixlaw.fit.uncertainty.fitted import draw_predictions

    axis = calibration_axis(law, data, size_input)
    axes = fit_axes(tuple(law.inputs), data.x_np, axis)
    values = [np.asarray(axis_values(a.name, data.x_np)) for a in axes]
    extra = [(a, v) for a, v in zip(axes, values, strict=True) if a.name != axis]
    masks, kinds = _masks(data, axis, clusters, min_rows=max(law.n_internal, 2), rng=rng, extra=extra)
    if not masks:
        return None
    W = np.stack(masks).astype(np.float64)
    S = np.asarray(seeds, dtype=np.float64)
    if max_iter is not None:  # a few fold fits: let them finish (a flat valley needs thousands)
        max_iter = max(int(max_iter), FOLD_MIN_ITER)
    solver: dict[str, Any] = dict(loss=loss, delta=delta, max_iter=max_iter, ftol=ftol, xtol=xtol)
    state = refit(law, data.x, data.y, W, S, **solver)
    fold_params, ok = state[0], state[1]
    if not ok.all():  # a fold fit crawling along a flat valley gets a fresh budget from the point estimate
        centres = np.broadcast_to(S[0], (len(W), S.shape[-1]))
        rescue(law, data.x, data.y, W, centres, centres, state, **solver)
    if not ok.any():
        return None
    with torch.no_grad():
        pred = draw_predictions(law, fold_params[ok], data.x_np)  # (folds, n) fit space
    y = np.log(data.y) if law.fit_space == "log" else data.y
    kf = np.array([kinds[i] == "kfold" for i in np.flatnonzero(ok)], dtype=bool)
    jack_row = np.full(data.n, np.nan)
    if kf.sum() >= 2:  # the grouped (delete-a-group) jackknife variance of the K-fold fits at every row
        pk = pred[kf]
        jack_row = (kf.sum() - 1) / kf.sum() * np.sum((pk - pk.mean(axis=0)) ** 2, axis=0)
    v = data.x_np[axis] if axis is not None else None
    ctop = None if v is None else _cluster_top(v, clusters)
    top = None if ctop is None else float(ctop.max())
    unit, groups = _unit(data, clusters)
    keys = ("e", "d", "split", "forward", "rows", "last", "span", "sd", "within", "d_run", "s2", "jack", "dists", "cut")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for j, (i, p) in enumerate(zip(np.flatnonzero(ok), pred, strict=True)):
        m = W[i].astype(bool)
        held = np.flatnonzero(~m)
        e = p[held] - y[held]
        d = np.zeros(held.size) if v is None else _rel_distance(v[held], float(v[m].min()), float(v[m].max()))
        good = np.isfinite(e)
        fwd = kinds[i] != "kfold"
        inside_runs = kinds[i] == "within"
        d_run = run_distance(v, groups, m, held) if inside_runs and v is not None else np.zeros(held.size)
        is_last = bool(ctop is not None and np.all(ctop[held] == top) and np.all(ctop[m] < top))
        k = int(good.sum())
        parts["e"].append(e[good])
        parts["d"].append(d[good])
        parts["split"].append(np.full(k, j))
        parts["forward"].append(np.full(k, fwd))
        parts["within"].append(np.full(k, inside_runs))
        parts["d_run"].append(d_run[good])
        dof = int(m.sum()) - law.n_internal
        s2 = float(np.sum((p[m] - y[m]) ** 2) / dof) if dof > 0 else float("nan")
        parts["s2"].append(np.full(k, s2))
        parts["rows"].append(held[good])
        parts["jack"].append(jack_row[held[good]])
        parts["last"].append(np.full(k, is_last))
        span = 0.0 if v is None else float(np.log(v[m].max() / v[m].min()))
        parts["span"].append(np.full(k, span))
        parts["sd"].append(_delta_sd(law, data, fold_params[i], m, y)[held[good]])
        da = [axis_distance(a.kind, w[held], float(w[m].min()), float(w[m].max()))
              for a, w in zip(axes, values, strict=True)]  # fmt: skip
        parts["dists"].append(np.stack(da, axis=1)[good] if da else np.zeros((k, 0)))
        name = "" if not fwd or inside_runs else (axis or "") if kinds[i] == "forward" else kinds[i].split(":", 1)[1]
        parts["cut"].append(np.full(k, name, dtype=object))
    out = {k: np.concatenate(vs) for k, vs in parts.items()}
    if out["e"].size == 0:
        return None
    return FoldErrors(
        e=out["e"], d=out["d"], split=out["split"].astype(np.int64), forward=out["forward"].astype(bool),
        rows=out["rows"].astype(np.int64), last=out["last"].astype(bool), span=out["span"], sd=out["sd"],
        axis=axis, n_folds=int(ok.sum()), unit=unit, groups=groups[out["rows"].astype(np.int64)],
        within=out["within"].astype(bool), d_run=out["d_run"], s2=out["s2"], jack=out["jack"],
        dists=out["dists"], axes=tuple(axes), cut=out["cut"], fitted=W[ok].astype(bool),
    )  # fmt: skip


def calibrate(
    law: Law,
    data: FitData,
    params: Mapping[str, Any],
    seeds: np.ndarray,
    *,
    size_input: str = "n_params",
    clusters: np.ndarray | None = None,
    rng: np.random.Generator,
    folds: FoldErrors | None = None,
    loss: Literal["huber", "l2"] = "huber",
    delta: float | None = None,
    max_iter: int | None = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
) -> Calibration | None:
    """Fit the out-of-sample error model of a fit (module docstring); ``None`` when no fold can be formed.

    ``seeds`` are internal starts (the point estimate first); ``clusters`` one integer label per row (the
    factorised size column: the groups of the K-fold; runs without it); ``loss``, ``delta``, ``max_iter``, ``ftol``
    and ``xtol`` are passed to :func:`fold_errors` for the refits.
    ``folds``: the fold errors of :func:`fold_errors` when the caller already has them (not refitted).
    """
    from mixlaw.fit.uncertainty.fitted import residual_sd

    fe = folds or fold_errors(law, data, seeds, size_input=size_input, clusters=clusters, rng=rng, loss=loss,
                              delta=delta, max_iter=max_iter, ftol=ftol, xtol=xtol)  # fmt: skip
    if fe is None:
        return None
    axis = fe.axis
    sd = residual_sd(law, data, params)
    from mixlaw.fit.evaluate.calib_runs import fold_spread, new_run_sd, run_excess, run_top, step_growth

    run_sd, run_dof = run_excess(fe)
    raw, fold_var = run_sd, (fold_spread(fe) if run_dof > 0 else 0.0)
    if run_dof > 0:  # a fold fit has one group fewer: its parameter error exceeds the full fit's
        run_sd = new_run_sd(raw, fold_var, int(np.unique(fe.split[~fe.forward]).size))
    kappa, n_within = step_growth(fe) if run_dof > 0 else (0.0, 0)
    inflation, growth, n_growth = error_model(fe, forward_only=run_dof > 0)
    r = full_residuals(law, data, params)
    # where the full fit leaves a parameter unbounded (its interval carries it), a cut whose rows accept the full fit
    # counts its miss up to its own linearised parameter error (docs/design/extrapolation-axes.md)
    accepts = accepts_full_fit(fe, r, law.n_internal) if leaves_a_parameter_unbounded(law, data, params, sd) else None
    k_axes, _ = axis_excess(fe, accepts=accepts)
    w = misfit_per_axis(r, data, fe.axes)  # an axis's growth counts as far as the fit misfits along it
    cuts = fe.cut if fe.cut is not None else np.full(fe.e.size, "", dtype=object)
    axes = tuple(
        replace(a, growth=growth if a.name == axis else float(k_axes[k] * np.sqrt(w[k])),
                term="ratio" if a.name == axis else "additive",
                n_cuts=int(np.unique(fe.split[cuts == a.name]).size), misfit=1.0 if a.name == axis else w[k])
        for k, a in enumerate(fe.axes)
    )  # fmt: skip
    if run_dof > 0:  # a new run's excess is carried by the additive new-run term, not by a ratio on the bootstrap
        inflation = 1.0
    last = float(np.sqrt(np.mean(fe.e[fe.last] ** 2))) if fe.last.any() else None
    ratio = float("nan") if last is None or not sd else last / sd
    notes = []
    if np.isfinite(ratio) and ratio > RELIABLE_RATIO:
        notes.append(
            f"the out-of-sample error at the largest fitted {axis} (refit without it) is {ratio:.1f}x the in-sample "
            f"residual: bootstrap intervals for extrapolation in {axis} are unreliable (the calibrated interval widens "
            f"them by what the nested fits show)"
        )
    v = data.x_np[axis] if axis is not None else None
    lo = float(v.min()) if v is not None else float("nan")
    hi = float(v.max()) if v is not None else float("nan")
    return Calibration(
        axis=axis,
        lo=lo,
        hi=hi,
        inflation=inflation,
        growth=growth,
        n_folds=fe.n_folds,
        n_forward=int(
            np.unique(
                fe.split[
                    fe.forward & ~(fe.within if fe.within is not None else False) & ((cuts == axis) | (cuts == ""))
                ]
            ).size
        ),  # fmt: skip
        n_growth=n_growth,
        n_scores=int(np.isfinite(fe.e / fe.sd).sum()),
        forward_ratio=ratio,
        warnings=notes,
        run_sd=run_sd,
        run_dof=run_dof,
        unit=fe.unit,
        step_growth=kappa,
        n_within=n_within,
        run_top=run_top(v, data.groups) if n_within else float("nan"),
        run_excess=raw,
        fold_var=fold_var,
        axes=axes,
    )
