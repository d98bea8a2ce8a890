"""How far a prediction lies outside the fitted range of each input.

A fit records ``input_ranges`` — ``{input: [min, max]}`` of the rows it was fitted on. A prediction at a value
``v`` above the largest fitted ``hi`` extrapolates by the factor ``v / hi`` (both positive: the scale on which
scaling laws extrapolate, "×70 in n_params beyond the largest fitted (1.3e+09)"), or by the difference
``v − hi`` when the range includes zero or negative values, or when the input is a share of a mixture (the law's
``w_<domain>`` inputs and ``ratio``: a share of 0 is 0.011 below the smallest fitted 0.011, not "×1e+20" below
it); below the smallest fitted ``lo`` by ``lo / v`` (respectively ``lo − v``). A value within a relative ``1e-9``
of the range counts as inside. Each row of a prediction gets ``None`` (inside on every input) or ``{"text",
"inputs"}``: one line naming the inputs, largest factor first, and per input ``input``, ``column``, ``side``
(``above`` / ``below``), ``limit``, ``value``, ``factor`` (``None`` on an additive scale) and ``distance``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["RTOL", "extrapolation", "extrapolation_of", "texts"]

RTOL = 1e-9
SHOWN = 3
"""Inputs named in the text of one row (laws with many derived inputs list the farthest and count the rest)."""


def is_share(name: str) -> bool:
    """Whether a law input is a share of a mixture (``w_<domain>``, ``ratio``): measured by difference."""
    return name.startswith("w_") or name == "ratio"


def _scale(
    lo: float, hi: float, v: np.ndarray, above: np.ndarray, share: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Distance beyond the range and the multiplicative factor (NaN where the scale is additive)."""
    limit = np.where(above, hi, lo)
    dist = np.where(above, v - hi, lo - v)
    ratio_ok = (lo > 0) & (v > 0) & (not share)  # zero or negatives in the range, or a share: by difference
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        factor = np.where(above, v / limit, limit / v)
    return dist, np.where(ratio_ok, factor, np.nan)


def extrapolation(
    ranges: Mapping[str, Any], x: Mapping[str, Any], columns: Mapping[str, str] | None = None
) -> list[dict[str, Any] | None]:
    """Per row of ``x`` (``{input: values}``), how far it lies outside ``ranges`` (see the module docstring).

    Inputs missing from ``ranges`` (fits saved before ranges existed) or from ``x`` are not checked.
    """
    cols = dict(columns or {})
    n = max((np.atleast_1d(np.asarray(v)).size for v in x.values()), default=0)
    per_row: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    for name, rng in ranges.items():
        if name not in x or rng is None or len(rng) != 2:
            continue
        lo, hi = float(rng[0]), float(rng[1])
        v = np.broadcast_to(np.atleast_1d(np.asarray(x[name], dtype=np.float64)), (n,))
        tol_hi, tol_lo = RTOL * max(abs(hi), 1e-300), RTOL * max(abs(lo), 1e-300)
        above, below = v > hi + tol_hi, v < lo - tol_lo
        out = np.flatnonzero(above | below)
        if out.size == 0:
            continue
        dist, factor = _scale(lo, hi, v[out], above[out], share=is_share(name))
        for k, i in enumerate(out):
            f = float(factor[k])
            per_row[int(i)].append(
                {
                    "input": name,
                    "column": cols.get(name, name),
                    "side": "above" if above[i] else "below",
                    "limit": hi if above[i] else lo,
                    "value": float(v[i]),
                    "factor": None if np.isnan(f) else f,
                    "distance": float(dist[k]),
                }
            )
    return [None if not items else {"text": _text(items), "inputs": items} for items in per_row]


def _text(items: list[dict[str, Any]]) -> str:
    def key(e: dict[str, Any]) -> float:
        return float(e["factor"]) if e["factor"] is not None else 1.0 + abs(float(e["distance"]))

    ordered = sorted(items, key=key, reverse=True)
    parts = []
    for e in ordered[:SHOWN]:
        where = "beyond the largest" if e["side"] == "above" else "below the smallest"
        sign = "+" if e["side"] == "above" else "−"  # an additive distance: up beyond the top, down below the bottom
        amount = f"×{e['factor']:.3g}" if e["factor"] is not None else f"{sign}{abs(e['distance']):.3g}"
        parts.append(f"{amount} in {e['column']} {where} fitted ({e['limit']:.3g})")
    if len(ordered) > SHOWN:
        parts.append(f"and {len(ordered) - SHOWN} more inputs")
    return ", ".join(parts)


def extrapolation_of(result: Any, data: Mapping[str, Any]) -> list[dict[str, Any] | None]:
    """:func:`extrapolation` of a :class:`~mixlaw.fit.result.FitResult` at the rows of ``data`` (a table or an
    ``--at`` mapping; inputs looked up through the fit's ``input_map``)."""
    from mixlaw.fit.uncertainty.fitted import inputs_of

    return extrapolation(result.input_ranges, inputs_of(result, data), result.input_map)


def texts(entries: list[dict[str, Any] | None]) -> list[str]:
    """The one-line text of each entry (``""`` inside the fitted range)."""
    return ["" if e is None else str(e["text"]) for e in entries]
