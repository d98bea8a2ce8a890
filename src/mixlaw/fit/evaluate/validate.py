"""Held-out extrapolation checks for any registered law.

A scaling law is only useful where it extrapolates, so every fit can be checked the way it will be used: fit on
the smaller (or earlier) runs, predict the rest, and report per-point relative errors and their mean (MRE).

- ``leave-largest-out``: hold out every row whose ``size_column`` equals its largest value.
- ``rollout``: hold out the rows whose ``order_column`` (default ``tokens``) lies beyond the given quantile of that
  column, i.e. fit on the earlier part of every curve and predict the later part.
- ``leave-group-out``: hold out one value of ``group_column`` at a time (e.g. one mixture) and predict it.

Two more ways to say what is held out, given instead of a scheme's default: ``holdout`` (a filter in the project's
safe expression grammar, :mod:`mixlaw.expr`, e.g. ``n_params > 5e9``) and ``largest`` (the rows of the ``K``
largest distinct values of ``size_column``). With ``bootstrap`` the fold fits carry bootstrap draws and every
held-out point gets an interval (``lo``/``hi`` at ``level``); ``coverage`` adds the share of held-out points inside
the 50/80/95 % intervals and their mean relative width (:mod:`mixlaw.fit.evaluate.coverage`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from mixlaw.errors import FitError, InputError
from mixlaw.fit.fitter import fit_law
from mixlaw.fit.result import FitResult
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions

Scheme = Literal["leave-largest-out", "rollout", "leave-group-out"]


def identifiability_columns(ident: Mapping[str, Any] | None) -> dict[str, Any]:
    """The identifiability verdict of a fold fit as fold-table columns (:mod:`mixlaw.fit.uncertainty.identify`):
    ``identified``
    (ok / weak / unidentifiable), ``rank`` (of ``n_parameters``), ``weakest`` direction, ``running_off`` and
    ``at_bounds`` (parameter names, ``;``-joined); empty for a fit without the check."""
    if not ident:
        return {}
    return {
        "identified": ident.get("status"),
        "rank": f"{ident.get('rank')}/{ident.get('n_parameters')}",
        "weakest": ident.get("weakest"),
        "running_off": ";".join(ident.get("running_off", [])),
        "at_bounds": ";".join(ident.get("at_bounds", [])),
    }


@dataclass(frozen=True)
class ValidationResult:
    """Per-point held-out predictions of one or more folds.

    ``points`` has columns ``fold``, ``row`` (index in the input table), ``observed``, ``predicted``, ``rel_error``
    (signed, (pred − obs)/obs) and the grouping columns present in the input. ``folds`` has one row per fold with
    its fitted parameters, status, ``n_fit``, ``n_held_out``, ``mre`` and ``max_abs_rel_error``.
    """

    scheme: str
    law: str
    target: str
    points: pd.DataFrame
    folds: pd.DataFrame
    coverage: dict[str, Any] | None = None
    """With ``coverage=True``: ``{"interval", "n", "mae", "mre", "levels": [{"level", "coverage",
    "mean_rel_width"}, ...]}`` over the held-out points (see :func:`mixlaw.fit.evaluate.coverage.coverage_summary`)."""
    level: float = 0.95
    interval: str = "prediction"
    resample: str | None = None
    """The bootstrap scheme of the fold fits (``None`` without a bootstrap: the points have no intervals)."""
    fits: tuple[FitResult, ...] = field(default=(), repr=False, compare=False)
    """The fold fits in fold order (not serialised): intervals of other methods from the same fits."""

    @property
    def warnings(self) -> list[str]:
        """The fold fits' calibration warnings (e.g. extrapolation in size is unreliable) and what their data do not
        pin down (:mod:`mixlaw.fit.uncertainty.identify`: a weak or unidentifiable fold, a parameter running off),
        each once."""
        seen = [w for f in self.fits for w in (f.calibration or {}).get("warnings", [])]
        for f in self.fits:
            ident = f.identifiability or {}
            if ident.get("status") in ("weak", "unidentifiable") and ident.get("reason"):
                seen.append(f"fold fit {ident['status']}: {ident['reason']}")
        return list(dict.fromkeys(seen))

    def interval_note(self) -> str:
        """One line: level, kind, method, scheme and the unusable resamples behind the held-out intervals."""
        has = "lo" in self.points and bool(np.isfinite(self.points["lo"].to_numpy(dtype=np.float64)).any())
        if not has:
            return "no intervals: validate with --bootstrap N for an interval on every held-out prediction"
        method = "+".join(sorted(set(self.points["method"].astype(str)))) if "method" in self.points else "bootstrap"
        nf = int(self.folds["n_failed"].sum()) if "n_failed" in self.folds else 0
        nr = int(self.folds["n_resamples"].sum()) if "n_resamples" in self.folds else 0
        note = (
            f"{100 * self.level:g}% {self.interval} intervals ({method}), resampling {self.resample or 'none'}, "
            f"{nf}/{nr} resamples unusable"
        )
        st = self.folds["interval_status"].astype(str) if "interval_status" in self.folds else pd.Series([], dtype=str)
        if st.str.startswith("weak").any():  # > 20 % of a fold's resamples unusable: its intervals are a selection
            note += f" (WEAK in {int(st.str.startswith('weak').sum())} of {len(st)} folds: > 20 % unusable)"
        if "method" in self.points and (self.points["method"].astype(str) == "calibrated").any():
            from mixlaw.fit.evaluate.calibrate import Calibration

            n_cal = int((self.points["method"].astype(str) == "calibrated").sum())
            cals = [Calibration.from_dict(f.calibration) for f in self.fits if f.calibration is not None]
            if cals:
                note += f"; {n_cal} of {len(self.points)} held-out points {cals[0].summary()}"
                note += f" (first of {len(cals)} folds)" if len(cals) > 1 else ""
        return note

    @property
    def mre(self) -> float:
        """Mean absolute relative error over every held-out point."""
        return float(np.mean(np.abs(self.points["rel_error"]))) if len(self.points) else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "law": self.law,
            "target": self.target,
            "mre": self.mre,
            "coverage": self.coverage,
            "level": self.level,
            "interval": self.interval,
            "resample": self.resample,
            "warnings": self.warnings,
            "folds": self.folds.to_dict(orient="records"),
            "points": self.points.to_dict(orient="records"),
        }


def _folds(
    table: pd.DataFrame,
    scheme: Scheme,
    size_column: str,
    order_column: str,
    group_column: str | None,
    quantile: float,
    holdout: str | None = None,
    largest: int | None = None,
) -> list[tuple[str, np.ndarray]]:
    """``(label, held_out_mask)`` per fold."""
    if holdout is not None and largest is not None:
        raise InputError("expected one of --holdout and --largest, got both", column="--holdout")
    if holdout is not None:
        from mixlaw.expr import filter_rows  # the safe grammar, never DataFrame.query

        held = table.index.isin(filter_rows(table, holdout, what="--holdout").index)
        return [(holdout, np.asarray(held, dtype=bool))]
    if largest is not None:
        if size_column not in table:
            raise InputError(f"expected a size column '{size_column}' for --largest", column=size_column)
        sizes = pd.to_numeric(table[size_column], errors="coerce").to_numpy()
        distinct = np.unique(sizes[np.isfinite(sizes)])
        if not 1 <= largest < distinct.size:
            raise InputError(
                f"expected 1 <= --largest < {distinct.size} (the distinct {size_column} values), got {largest}",
                column="--largest",
            )
        cut = distinct[-largest]
        return [(f"{size_column}>={cut:g} ({largest} largest)", sizes >= cut)]
    if scheme == "leave-largest-out":
        if size_column not in table:
            raise InputError(f"expected a size column '{size_column}' for leave-largest-out, got no such column",
                             column="size_column")  # fmt: skip
        sizes = pd.to_numeric(table[size_column], errors="coerce").to_numpy()
        largest = np.nanmax(sizes)
        return [(f"{size_column}={largest:g}", sizes == largest)]
    if scheme == "rollout":
        if order_column not in table:
            raise InputError(f"expected an order column '{order_column}' for rollout, got no such column",
                             column="order_column")  # fmt: skip
        if not 0 < quantile < 1:
            raise InputError(f"expected a rollout quantile in (0, 1), got {quantile}")
        order = pd.to_numeric(table[order_column], errors="coerce").to_numpy()
        cut = np.nanquantile(order, quantile)
        return [(f"{order_column}>{cut:g}", order > cut)]
    if scheme == "leave-group-out":
        if not group_column:
            raise InputError("expected a group column for leave-group-out, got none", column="group_column")
        if group_column not in table:
            raise InputError(f"expected a group column '{group_column}' for leave-group-out, got no such column",
                             column="group_column")  # fmt: skip
        values = table[group_column].to_numpy()
        return [(f"{group_column}={v}", values == v) for v in pd.unique(values)]
    raise InputError(f"expected scheme leave-largest-out, rollout or leave-group-out, got {scheme!r}")


def validate_law(
    law: str,
    table: pd.DataFrame,
    options: FitOptions | None = None,
    *,
    scheme: Scheme = "leave-largest-out",
    target: str = "loss",
    input_map: Mapping[str, str] | None = None,
    size_column: str = "n_params",
    order_column: str = "tokens",
    group_column: str | None = None,
    quantile: float = 0.75,
    law_options: Mapping[str, Any] | None = None,
    holdout: str | None = None,
    largest: int | None = None,
    level: float = 0.95,
    interval: str = "prediction",
    coverage: bool = False,
    method: str = "auto",
) -> ValidationResult:
    """Fit on the kept rows of every fold and predict the held-out rows.

    Parameters
    ----------
    law
        Registered law name.
    table
        The RunTable (or any table with the law's inputs and the target).
    scheme
        ``leave-largest-out`` (default), ``rollout`` or ``leave-group-out`` (see the module docstring).
    target, input_map
        As in :func:`mixlaw.fit.fit_law`.
    size_column, order_column, group_column, quantile
        Which column defines the held-out part of each scheme.
    law_options
        Options of the law (e.g. ``{"input": "n_params"}`` for ``power_law``).
    holdout, largest
        Hold out the rows matching this filter, or the rows of the ``largest`` largest sizes, instead of the
        scheme's own choice (one fold).
    level, interval, coverage
        With ``options.bootstrap.resamples > 0``: the ``level`` interval (``prediction`` or ``confidence``) of every
        held-out point (columns ``lo``, ``hi``); ``coverage`` also measures the 50/80/95 % intervals.
    method
        Prediction-interval method (:func:`mixlaw.fit.uncertainty.intervals.band`): ``auto`` (the
        extrapolation-calibrated
        interval: with resamples the fold fits carry their calibration), ``calibrated`` or ``bootstrap``;
        recorded per point (column ``method``) and in ``coverage``.
    options
        The :class:`mixlaw.options.FitOptions` of every fold's fit (:func:`mixlaw.fit.fit_law`). An unset
        ``bootstrap.calibrate`` becomes ``True`` where ``method`` needs the calibration; the ``"sizes"`` scheme
        clusters by ``size_column`` unless the options name another column.
    """
    from mixlaw.fit.evaluate.coverage import LEVELS, coverage_summary, point_intervals
    from mixlaw.fit.evaluate.extrapolation import extrapolation_of, texts

    law_obj = get_law(law, **dict(law_options or {}))
    table = table.reset_index(drop=True)
    points, folds, fits = [], [], []
    fit = FitOptions() if options is None else options
    bs = fit.bootstrap
    if bs.scheme == "sizes" and bs.size_column == BootstrapOptions().size_column:
        bs = bs.replace(size_column=size_column)  # the sizes bootstrap clusters by the same column
    if bs.calibrate is None and (method == "calibrated" or (method == "auto" and bs.resamples)):
        bs = bs.replace(calibrate=True)  # the held-out rows extrapolate: the default interval is calibrated
    fit = fit.replace(bootstrap=bs)
    if coverage and not bs.resamples:
        raise InputError("expected --bootstrap N (N > 0) with --coverage: intervals come from bootstrap draws")
    for label, held in _folds(table, scheme, size_column, order_column, group_column, quantile, holdout, largest):
        n_held, n_fit = int(held.sum()), int((~held).sum())
        if n_held == 0 or n_fit == 0:
            raise InputError(f"fold {label}: expected rows both to fit and to hold out, got {n_fit} and {n_held}")
        fit_rows = table[~held]
        try:
            res: FitResult = fit_law(law_obj, fit_rows, fit, target=target, input_map=input_map)
        except FitError as exc:
            folds.append(
                {
                    "fold": label,
                    "status": "failed",
                    "message": str(exc),
                    "n_fit": n_fit,
                    "n_held_out": n_held,
                    "mre": np.nan,
                    "max_abs_rel_error": np.nan,
                }
            )
            continue
        held_rows = table[held]
        pred = res.predict(held_rows)
        obs = pd.to_numeric(held_rows[target], errors="coerce").to_numpy(dtype=np.float64)
        rel = (pred - obs) / obs
        block = pd.DataFrame(
            {"fold": label, "row": held_rows.index.to_numpy(), "observed": obs, "predicted": pred, "rel_error": rel}
        )
        for col in (size_column, order_column, group_column, "run_id"):
            if col and col in held_rows and col not in block:
                block[col] = held_rows[col].to_numpy()
        block["extrapolation"] = texts(extrapolation_of(res, held_rows))  # "" inside the fitted ranges
        levels = sorted({level, *LEVELS}) if coverage else [level]
        block = point_intervals(block, res, held_rows, levels, interval, main=level, method=method)
        points.append(block)
        fits.append(res)
        folds.append(
            {
                "fold": label,
                "status": res.status.value,
                "n_fit": n_fit,
                "n_held_out": n_held,
                "mre": float(np.mean(np.abs(rel))),
                "max_abs_rel_error": float(np.max(np.abs(rel))),
                "n_failed": res.n_failed_resamples,
                "n_resamples": res.n_bootstrap,
                "interval_status": res.interval_status,
                **identifiability_columns(res.identifiability),
                **{f"param_{k}": v for k, v in res.flat_params().items()},
            }
        )
    pts = (
        pd.concat(points, ignore_index=True)
        if points
        else pd.DataFrame(columns=["fold", "row", "observed", "predicted", "rel_error"])
    )
    label = scheme if holdout is None and largest is None else ("holdout" if holdout is not None else "largest")
    cov = coverage_summary(pts, interval) if coverage else None
    ran = {str(f.settings["bootstrap_scheme"]) for f in fits if f.settings.get("bootstrap_scheme")}  # "auto" resolved
    resample = ("+".join(sorted(ran)) if ran else bs.scheme) if bs.resamples else None
    return ValidationResult(
        scheme=label, law=law_obj.name, target=target, points=pts, folds=pd.DataFrame(folds), coverage=cov,
        level=level, interval=interval, resample=resample, fits=tuple(fits),
    )  # fmt: skip
