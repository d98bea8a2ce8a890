"""What a store holds, for people: each column with its unit and how many runs carry it (``mixlaw runs --columns``),
and numbers formatted one way per column (``mixlaw runs``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["unit_of", "column_summary", "format_numbers", "mixture_groups", "blank_cells"]

#: What an empty cell of a text column reads as once a reader has been through it.
BLANK_TEXT = frozenset(("", "nan", "None", "<NA>"))

_UNITS = {
    "run_id": "id",
    "step": "optimiser step",
    "tokens": "tokens",
    "lr": "learning rate",
    "n_params": "parameters (non-embedding)",
    "n_params_total": "parameters (all)",
    "phase": "pt | cpt",
    "parent_run": "run id",
    "seed": "integer",
    "schedule": "JSON",
    "compute_flops": "FLOP",
}


def unit_of(column: str) -> str:
    """The unit (or kind) of a RunTable column, from its name; ``""`` for a pass-through column."""
    if column in _UNITS:
        return _UNITS[column]
    if column == "loss" or column.startswith("loss_"):
        return "nats/token"
    if column.startswith("w_"):
        return "mixture weight"
    if column.startswith("unique_tokens_"):
        return "unique tokens"
    if column.startswith("tokens_"):
        return "tokens"
    return ""


def column_summary(frame: pd.DataFrame, run_level: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One record per column of a RunTable: ``column``, ``unit``, ``runs`` (runs with at least one value),
    ``rows`` (rows with a value), ``level`` (``run`` for run metadata, ``step`` for evaluations), ``min``/``max``
    for numbers."""
    n_runs = int(frame["run_id"].nunique()) if "run_id" in frame else 0
    out: list[dict[str, Any]] = []
    for c in frame.columns:
        if c == "run_id":
            out.append({"column": c, "unit": "id", "runs": n_runs, "rows": len(frame), "level": "run"})
            continue
        s = frame[c]
        has = s.notna().to_numpy()
        if s.dtype == object:
            has &= s.map(lambda v: not (isinstance(v, str) and not v.strip())).to_numpy(dtype=bool)
        rec: dict[str, Any] = {
            "column": str(c),
            "unit": unit_of(str(c)),
            "runs": int(frame.loc[has, "run_id"].nunique()) if "run_id" in frame else 0,
            "rows": int(has.sum()),
            "level": "run" if c in run_level else "step",
        }
        if pd.api.types.is_numeric_dtype(s.dtype) and has.any():
            v = s.to_numpy(dtype=float)[has]
            rec["min"], rec["max"] = float(np.min(v)), float(np.max(v))
        out.append(rec)
    return out


_SUFFIX = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def _human(v: float, digits: int) -> str:
    a = abs(v)
    for scale, suf in _SUFFIX:
        if a >= scale:
            return f"{v / scale:.{digits}g}{suf}"
    return f"{v:.{digits}g}"


def format_numbers(values: Sequence[Any], *, digits: int = 4) -> list[str]:
    """Numbers of one column in one notation; empty cells stay empty.

    Integers below 100,000 print as they are (``3312``, ``13150``); larger or mixed magnitudes print with one
    suffix rule for the whole column (``190.4M``, ``1.279B``, ``3.312k``); fractions print with ``digits``
    significant digits, in scientific notation for the whole column when it spans more than 4 decades."""
    nums: list[float | None] = []
    for v in values:
        v = v.item() if hasattr(v, "item") else v
        if v is None or isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(float(v)):
            nums.append(None)
        else:
            nums.append(float(v))
    present = [x for x in nums if x is not None]
    if not present:
        return ["" for _ in nums]
    ints = all(x == round(x) for x in present)
    big = max(abs(x) for x in present)
    if ints and big < 1e5:
        return ["" if x is None else str(int(x)) for x in nums]
    if ints or min(abs(x) for x in present) >= 1:
        return ["" if x is None else _human(x, digits) for x in nums]
    small = min((abs(x) for x in present if x != 0), default=1.0)
    sci = big / small > 1e4 or big < 1e-3
    fmt = f"{{:.{digits - 1}e}}" if sci else f"{{:.{digits}g}}"
    return ["" if x is None else fmt.format(x) for x in nums]


def mixture_groups(table: pd.DataFrame, domains: Sequence[str]) -> np.ndarray:
    """One integer label per distinct mixture (weights rounded to 1e-9): the unit of leave-mixtures-out."""
    key = table[[f"w_{d}" for d in domains]].round(9).astype(str).agg("|".join, axis=1)
    return np.asarray(pd.factorize(key)[0], dtype=np.int64)


def blank_cells(s: pd.Series) -> np.ndarray:
    """Which cells of ``s`` are empty: missing, or text that strips to ``""``, ``"nan"``, ``"None"`` or ``"<NA>"``.

    Judged once per distinct value (``pd.factorize``), never by converting the column to strings: a column whose
    rows share a long value (a run's per-step LR table, repeated on each of its thousands of rows) would otherwise be
    copied once per row — gigabytes, and a minute of allocation, on a few thousand logged steps.
    """
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    blank_u = np.fromiter((str(u).strip() in BLANK_TEXT for u in uniques), dtype=bool, count=len(uniques))
    out = codes < 0
    out[~out] = blank_u[codes[~out]]
    return out
