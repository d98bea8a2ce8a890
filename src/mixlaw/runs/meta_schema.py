"""The schema of a ``--meta`` table's cells: every value checked before it is joined to a run.

:func:`mixlaw.runs.meta.read_meta` reads the CSV (strict UTF-8, unique column names, one key column) and parses
each cell into a number or text; :func:`check_row` then holds the values to the rules of the RunTable columns they
fill (:mod:`mixlaw.runs.values`), so a meta value can never put into the store what a run file could not:

- every number is finite (``nan``, ``inf`` refused — an empty cell is the way to say "unknown");
- the numeric columns (``n_params``, ``tokens``, ``lr``, ``compute_flops``, ``seed``, ``step``, losses and
  ``w_<domain>`` weights) hold numbers, not text;
- ``n_params``, ``tokens``, ``lr``, ``compute_flops``, ``step`` and weights are ≥ 0, losses > 0;
- ``seed`` and ``step`` are integers of at most 2^53 (exact in float64);
- a text cell is at most :data:`MAX_CELL` characters.

Each failure is one :class:`~mixlaw.errors.InputError` line naming the file, the line and the column.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mixlaw.errors import InputError
from mixlaw.runs.values import _INTEGER_COLUMNS, _NONNEG_COLUMNS, MAX_TABLE_INT, is_loss_column, is_weight_column

__all__ = ["MAX_CELL", "NUMERIC_COLUMNS", "check_row"]

MAX_CELL = 100_000
"""Longest text cell of a meta table (a JSON schedule of a few thousand steps fits)."""
NUMERIC_COLUMNS = frozenset({*_NONNEG_COLUMNS, *_INTEGER_COLUMNS})
"""Columns that hold numbers (besides losses and ``w_<domain>`` weights)."""


def _numeric(column: str) -> bool:
    return column in NUMERIC_COLUMNS or is_loss_column(column) or is_weight_column(column)


def check_row(values: Mapping[str, Any], source: str, line: int) -> dict[str, Any]:
    """The parsed cells of one meta row (``{column: number or text}``), checked; raises one line per failure."""
    out: dict[str, Any] = {}
    for col, v in values.items():
        where = f"{source}:{line}:{col}"
        if isinstance(v, str):
            if _numeric(col) and col != "schedule":
                raise InputError(f"expected a number for '{col}', got {v[:40]!r} in {where}")
            if len(v) > MAX_CELL:
                raise InputError(f"expected a cell of at most {MAX_CELL:,} characters, got {len(v):,} in {where}")
            out[col] = v
            continue
        x = float(v)
        if not math.isfinite(x):
            raise InputError(f"expected a finite number (or an empty cell), got {v} in {where}")
        if col in _INTEGER_COLUMNS and (not x.is_integer() or abs(x) > MAX_TABLE_INT):
            raise InputError(f"expected an integer of at most {MAX_TABLE_INT:,} for '{col}', got {v} in {where}")
        if is_loss_column(col) and not x > 0:
            raise InputError(f"expected a positive loss, got {v} in {where}")
        if (col in _NONNEG_COLUMNS or is_weight_column(col)) and x < 0:
            raise InputError(f"expected a non-negative '{col}', got {v} in {where}")
        out[col] = v
    return out
