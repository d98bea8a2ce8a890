"""Predictions of a saved fit with their intervals (``mixlaw predict``), at one point or at every row of a table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.fit.evaluate.extrapolation import extrapolation_of
from mixlaw.fit.result import FitResult
from mixlaw.fit.uncertainty.intervals import Interval, Method, band, inputs_of

__all__ = ["predict_point", "predict_rows"]


def _interval_info(result: FitResult, b: Any, level: float, interval: str) -> dict[str, Any]:
    info: dict[str, Any] = {"level": level, "interval": interval}
    if b is None:
        info["note"] = "no bootstrap draws in this fit: refit with --bootstrap N for intervals"
    info["n_resamples"], info["n_failed"] = result.n_bootstrap, result.n_failed_resamples
    info["interval_status"] = result.interval_status  # weak when > 20 % of the resamples are unusable
    info["scheme"] = result.settings.get("bootstrap_scheme")
    if result.settings.get("bootstrap_fallback"):
        info["scheme_note"] = f"auto: {result.settings['bootstrap_fallback']}"
    info["method"] = None if b is None else b.method
    if b is not None and b.calibration is not None:  # say so when an interval is extrapolation-calibrated
        info["calibration"] = b.calibration
        info["n_calibrated"] = int(np.sum(b.calibrated)) if b.calibrated is not None else None
    info["warnings"] = list((result.calibration or {}).get("warnings", []))  # e.g. extrapolation is unreliable
    if b is not None and b.note:  # loose parameters carried, the law's output range (mixlaw.fit.uncertainty.profile)
        info["interval_note"] = b.note
    ident = result.identifiability or {}
    if ident:  # what the fitted data do not pin down (mixlaw.fit.uncertainty.identify), beside every prediction
        keep = ("status", "reason", "rank", "n_parameters", "weakest", "running_off", "at_bounds", "profile")
        info["identifiability"] = {k: ident[k] for k in keep if k in ident}
        if ident.get("status") in ("weak", "unidentifiable") and ident.get("reason"):
            info["warnings"].append(f"fit {ident['status']}: {ident['reason']}")
    return info


def _confidence_note(
    result: FitResult, x: Mapping[str, np.ndarray], level: float, interval: str, method: str, with_band: bool = True
) -> tuple[str | None, Any]:
    """Where a *confidence* interval is asked for at rows that extrapolate beyond the fitted range of a calibrated
    fit: a note that it is the parameter spread only, and the extrapolation-calibrated prediction band beside it.

    The calibration (:mod:`mixlaw.fit.evaluate.calibrate`) measures how far the law misses beyond its fitted range —
    an error
    of the curve itself, not noise — and only the prediction interval carries it: on Epoch's N > 5e9 the bootstrap
    interval alone covers 59 % of the held-out points, the calibrated one 94 % (``docs/coverage.md``). ``with_band``:
    also compute that band (a point prediction prints it; a table only says which rows the note concerns)."""
    if interval != "confidence" or method != "auto" or not result.calibration:
        return None, None
    from mixlaw.fit.evaluate.calibrate import Calibration

    cal = Calibration.from_dict(result.calibration)
    m = len(next(iter(x.values()))) if x else 0
    far = cal.beyond(x, m)
    if m == 0 or not far.any() or result.bootstrap_params is None:
        return None, None
    pb = band(result, x, level=level, kind="prediction", method="auto") if with_band else None
    if with_band and pb is None:
        return None, None
    rows = "this prediction extrapolates" if m == 1 else f"{int(far.sum())} of {m} rows extrapolate"
    along = "/".join(cal.far_axes(x, m)) or cal.axis
    return (
        f"note: {rows} beyond the fitted {along} range; a confidence interval is the parameter spread only and "
        "leaves out the extrapolation error the nested fits measure there (--interval prediction: the "
        "extrapolation-calibrated interval of a new observation)",
        pb,
    )


def predict_point(
    result: FitResult,
    at: Mapping[str, float],
    *,
    level: float = 0.95,
    interval: str = "confidence",
    method: str = "auto",
) -> dict[str, Any]:
    """``{"law", "at", "predicted", "lo", "hi", "level", "interval", "n_resamples", "n_failed", ...}``."""
    missing = [n for n in result.law.inputs if result.input_map.get(n, n) not in at and n not in at]
    if missing:
        raise InputError(f"expected values for inputs {missing} in --at", column="--at")
    data = {k: np.array([float(v)]) for k, v in at.items()}
    bad = [k for k, v in data.items() if not np.isfinite(v[0])]
    if bad:
        raise InputError(f"expected finite values in --at, got {bad[0]}={at[bad[0]]}", column="--at")
    with np.errstate(all="ignore"):
        value = float(result.predict(data)[0])
    if not np.isfinite(value):
        raise InputError(f"law '{result.law_name}' is not defined at {dict(at)} (it gives {value})", column="--at")
    b = band(result, inputs_of(result, data), level=level, kind=cast(Interval, interval), method=cast(Method, method))
    out: dict[str, Any] = {"law": result.law_name, "at": dict(at), "predicted": value}
    out["lo"], out["hi"] = (None, None) if b is None else (float(b.lo[0]), float(b.hi[0]))
    out["extrapolation"] = extrapolation_of(result, data)[0]  # None inside the fitted ranges
    note, pb = _confidence_note(result, inputs_of(result, data), level, interval, method)
    if note is not None:
        out["confidence_note"] = note
        out["prediction_lo"], out["prediction_hi"] = float(pb.lo[0]), float(pb.hi[0])
    return {**out, **_interval_info(result, b, level, interval)}


def predict_rows(
    result: FitResult,
    table: pd.DataFrame,
    *,
    level: float = 0.95,
    interval: str = "confidence",
    method: str = "auto",
) -> dict[str, Any]:
    """Every row of a featured ``table``: ``rows`` (run_id, step, predicted, lo, hi, observed), per-run MAE/MRE."""
    pred = result.predict(table)
    b = band(result, inputs_of(result, table), level=level, kind=cast(Interval, interval), method=cast(Method, method))
    rows = pd.DataFrame({"predicted": pred})
    rows["lo"] = np.nan if b is None else b.lo
    rows["hi"] = np.nan if b is None else b.hi
    rows["run_id"] = table["run_id"].to_numpy() if "run_id" in table else "all"
    rows["step"] = table["step"].to_numpy() if "step" in table else 0
    observed = table[result.target].to_numpy(dtype=np.float64) if result.target in table else None
    rows["observed"] = observed if observed is not None else np.nan
    out: dict[str, Any] = {"law": result.law_name, "target": result.target}
    recs = rows[["run_id", "step", "predicted", "lo", "hi", "observed"]].to_dict(orient="records")
    out["rows"] = [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()} for r in recs]
    for rec, extra in zip(out["rows"], extrapolation_of(result, table), strict=True):
        rec["extrapolation"] = extra  # how far outside the fitted range of each input (None inside)
    out.update(_interval_info(result, b, level, interval))
    note, _ = _confidence_note(result, inputs_of(result, table), level, interval, method, with_band=False)
    if note is not None:
        out["confidence_note"] = note
    if observed is not None:
        err = rows["predicted"] - rows["observed"]
        per = rows.assign(abs_err=err.abs(), rel_err=(err / rows["observed"]).abs()).groupby("run_id")
        out["per_run"] = [
            {"run_id": rid, "mae": float(g["abs_err"].mean()), "mre": float(g["rel_err"].mean())} for rid, g in per
        ]
        out["mae"] = float(err.abs().mean())
        out["mre"] = float((err / rows["observed"]).abs().mean())
        if b is not None:
            out["coverage"] = float(((rows["lo"] <= rows["observed"]) & (rows["observed"] <= rows["hi"])).mean())
    return out
