"""Coverage measured, not assumed: intervals of held-out points and the share of them that the intervals contain.

:func:`point_intervals` adds ``lo``/``hi`` (at the main level) and ``lo_<pct>``/``hi_<pct>`` per level to the
held-out points of one validation fold, from that fold's bootstrap draws
(:func:`mixlaw.fit.uncertainty.intervals.band`).
:func:`coverage_summary` reports, over every held-out point, the share with ``lo ≤ observed ≤ hi`` at each of the
50/80/95 % levels and the mean relative width ``(hi − lo) / predicted``, beside the mean absolute error. A
well-calibrated 95 % prediction interval contains about 95 % of new observations; one that contains all of them is
probably too wide, one that contains few is overconfident.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from mixlaw.fit.uncertainty.intervals import Interval, Method, band, inputs_of

if TYPE_CHECKING:
    from mixlaw.fit.result import FitResult

__all__ = ["LEVELS", "coverage_summary", "point_intervals"]

LEVELS: tuple[float, ...] = (0.5, 0.8, 0.95)


def _tag(level: float) -> str:
    return f"{100 * level:g}"


def point_intervals(
    block: pd.DataFrame,
    result: FitResult,
    held_rows: pd.DataFrame,
    levels: Sequence[float],
    interval: str,
    *,
    main: float,
    method: str = "auto",
) -> pd.DataFrame:
    """``block`` with ``lo``/``hi`` at ``main`` and ``lo_<pct>``/``hi_<pct>`` at every level (NaN without draws)."""
    out = block.copy()
    x = inputs_of(result, held_rows)
    for level in levels:
        b = band(result, x, level=level, kind=cast(Interval, interval), method=cast(Method, method))
        if b is None:
            out["method"] = "none"
        elif b.calibrated is not None:  # per row, as the band says
            out["method"] = np.where(b.calibrated, "calibrated", "bootstrap")
        else:
            out["method"] = b.method
        lo = np.full(len(out), np.nan) if b is None else b.lo
        hi = np.full(len(out), np.nan) if b is None else b.hi
        out[f"lo_{_tag(level)}"], out[f"hi_{_tag(level)}"] = lo, hi
        if level == main:
            out["lo"], out["hi"] = lo, hi
    return out


def coverage_summary(points: pd.DataFrame, interval: str) -> dict[str, Any]:
    """Share of held-out points inside the 50/80/95 % intervals, mean relative width, MAE and MRE."""
    obs = points["observed"].to_numpy(dtype=np.float64) if len(points) else np.zeros(0)
    pred = points["predicted"].to_numpy(dtype=np.float64) if len(points) else np.zeros(0)
    levels = []
    for level in LEVELS:
        lo_col, hi_col = f"lo_{_tag(level)}", f"hi_{_tag(level)}"
        if lo_col not in points:
            continue
        lo, hi = points[lo_col].to_numpy(dtype=np.float64), points[hi_col].to_numpy(dtype=np.float64)
        has = np.isfinite(lo) & np.isfinite(hi)
        inside = (lo <= obs) & (obs <= hi)
        levels.append(
            {
                "level": level,
                "coverage": float(inside[has].mean()) if has.any() else float("nan"),
                "mean_rel_width": float(np.mean((hi - lo)[has] / np.abs(pred[has]))) if has.any() else float("nan"),
                "n_with_interval": int(has.sum()),
            }
        )
    err = pred - obs
    methods = sorted(set(points["method"].astype(str))) if "method" in points and len(points) else []
    return {
        "interval": interval,
        "method": "+".join(methods) or None,
        "n": int(len(points)),
        "mae": float(np.mean(np.abs(err))) if len(err) else float("nan"),
        "mre": float(np.mean(np.abs(err / obs))) if len(err) else float("nan"),
        "levels": levels,
    }
