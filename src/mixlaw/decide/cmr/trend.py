"""CMR vs model size: the least-squares line ``CMR = a + b·log10 N`` through the sizes whose CMR is comparable.

A size feeds the line only when its CMR is the decision's full reading (:func:`trend_exclusion`); the sizes used
and those left out (with the reason) are part of the result, and :func:`trend_summary` says it in one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixlaw.decide.cmr.common import STATUS_ALL_FEASIBLE, STATUS_OK, is_number, size_json
from mixlaw.decide.cmr.decision import STATUS_TOL_OVERRULED
from mixlaw.decide.cmr.result import Bracket, Reading, SizeCMR

__all__ = ["cmr_size_trend", "trend_exclusion", "trend_summary"]


def trend_exclusion(s: SizeCMR, reading: str = "headline") -> str | None:
    """Why a size does not feed the CMR-vs-size trend (None: it does).

    The trend compares like with like: only sizes whose CMR is the decision's full reading (CMR law or binding
    tolerance boundary of a ratio law that agrees with the observations) feed it; a lower bound (every ratio
    feasible), a fallback (too few ratios for the CMR law, the model-free crossing overruling the ratio law) or
    no CMR does not. ``reading="tolerance"``: the tolerance-only reading (the tolerance boundary), which every
    size whose observations bracket ε has."""
    if not is_number(s.n_params):
        return "size is not a number"
    if reading == "tolerance":
        if s.model_free_status != STATUS_OK or s.tolerance_boundary is None:
            return "observations at the budget do not bracket ε"
        return None
    if s.cmr is None and s.reading is Reading.BRACKET:
        return f"CMR only bracketed by the trained ratios ({Bracket(*s.bracket).text()})"
    if s.cmr is None:
        return "no CMR"
    if s.outcome == STATUS_ALL_FEASIBLE:
        return "CMR is a lower bound (every ratio feasible)"
    if s.outcome.startswith("too few"):
        return "too few ratios for the CMR law"
    if s.tolerance_status == STATUS_TOL_OVERRULED:
        return "fell back to the model-free crossing"
    return None


def cmr_size_trend(
    sizes: Sequence[SizeCMR], boot: dict[Any, np.ndarray] | None = None, *, level: float = 0.95,
    reading: str = "headline",
) -> dict[str, Any] | None:  # fmt: skip
    """CMR vs model size: least-squares line ``CMR = a + b · log10(N)`` with a bootstrap band.

    Only sizes that :func:`trend_exclusion` accepts feed the line (``sizes``; the others are listed in
    ``left_out`` with the reason). The band refits the line on paired resamples (resample ``i`` of every size);
    needs ≥ 2 sizes.
    """
    use = [s for s in sizes if trend_exclusion(s, reading) is None]
    val = (lambda s: s.tolerance_boundary) if reading == "tolerance" else (lambda s: s.cmr)
    pts = [(float(s.n_params), float(val(s))) for s in use]
    if len(pts) < 2:
        return None
    x = np.log10([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    b, a = np.polyfit(x, y, 1)
    left = [{"n_params": size_json(s.n_params), "reason": why} for s in sizes
            if (why := trend_exclusion(s, reading)) is not None]  # fmt: skip
    out: dict[str, Any] = {"form": "cmr = a + b*log10(n_params)", "a": float(a), "b": float(b), "reading": reading,
                           "n_sizes": len(pts), "sizes": [size_json(s.n_params) for s in use], "left_out": left,
                           "band": None}  # fmt: skip
    if boot and reading == "headline":
        keys = [s.n_params for s in use]
        if all(k in boot for k in keys):
            m = min(len(boot[k]) for k in keys)
            if m >= 10:
                grid = np.linspace(x.min(), x.max(), 50)
                preds = []
                for i in range(m):
                    bb, ab = np.polyfit(x, np.array([boot[k][i] for k in keys]), 1)
                    preds.append(ab + bb * grid)
                q = (1 - level) / 2
                arr = np.array(preds)
                out["band"] = {"n_params": (10**grid).tolist(), "lo": np.quantile(arr, q, axis=0).tolist(),
                               "hi": np.quantile(arr, 1 - q, axis=0).tolist()}  # fmt: skip
    return out


def trend_summary(sizes: Sequence[SizeCMR], trend: dict[str, Any] | None) -> str:
    """One line: the size trend and which sizes fed it (or why there is none)."""
    from mixlaw.fmt import fmt_size

    left = [(s, why) for s in sizes if (why := trend_exclusion(s)) is not None]
    gone = "; ".join(f"{fmt_size(s.n_params)} ({why})" for s, why in left)
    if trend is None:
        n_ok = len(sizes) - len(left)
        return (f"no size trend: {n_ok} size(s) with a comparable CMR (need ≥ 2)"
                + (f"; left out: {gone}" if gone else ""))  # fmt: skip
    used = ", ".join(fmt_size(v) for v in trend.get("sizes", []))
    return (f"size trend CMR = {trend['a']:.4f} + {trend['b']:.4f}·log10(N) from {trend['n_sizes']} sizes ({used})"
            + (f"; left out: {gone}" if gone else ""))  # fmt: skip
