"""From a raw frame to RunTable columns: ``--map`` renames, ``--drop``/``--set``, eval-set pivoting, and the rules
that turn logged metric names (W&B, TensorBoard) into canonical columns."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.io.rules import (  # re-exported: the rules lived here before
    _GENERIC_PARTS,
    _canonical_columns,
    _sanitize,
    canonical_metric_name,
    closest_hint,
)
from mixlaw.runs.io.text import _ROW

_REEXPORTED = (_GENERIC_PARTS, _canonical_columns, _sanitize, canonical_metric_name)


def _with_sources(df: pd.DataFrame, mapping: Mapping[str, str | None]) -> pd.DataFrame:
    """Record on ``df.attrs`` what each column was logged as (``column_sources``) and every raw name
    (``raw_names``), for hints in "not found" errors and for ``--drop`` of a raw name."""
    df.attrs["column_sources"] = {c: f for f, c in mapping.items() if c is not None}
    df.attrs["raw_names"] = list(mapping)
    return df


def _to_runtable(
    raw: pd.DataFrame,
    name: str,
    *,
    column_map: Mapping[str, str],
    run_id: str | None,
    run_id_from_row: bool,
    evalset_column: str | None,
    set_values: Mapping[str, Any],
    drop: list[str],
    stem: str,
    already_mapped: bool,
) -> pd.DataFrame:
    df = raw
    if not already_mapped:
        df = _apply_map(df, column_map, name)
    for c in drop:
        if c not in df.columns:
            hint = closest_hint(c, [x for x in df.columns if x != _ROW], raw.attrs.get("column_sources"))
            raise InputError(f"expected a column to drop, got unknown {c!r}{hint} in {name}")
    df = df.drop(columns=drop)
    if evalset_column is not None:
        df = _pivot_evalsets(df, evalset_column, name)
    for k, v in set_values.items():
        if k in df.columns:
            raise InputError(f"expected --set to add a new column, got existing column {k!r} in {name}")
        df[k] = pd.Series([v] * len(df), index=df.index, dtype=object)
    if run_id is not None and run_id_from_row:
        raise InputError("expected either --run-id or --run-id-from-row, got both")
    if run_id is not None:
        if "run_id" in df.columns:
            raise InputError(f"expected no run_id column with --run-id, got one in {name}:1:run_id")
        df["run_id"] = run_id
    elif run_id_from_row:
        if "run_id" in df.columns:
            raise InputError(f"expected no run_id column with --run-id-from-row, got one in {name}:1:run_id")
        df["run_id"] = [f"{stem}-{i}" for i in range(1, len(df) + 1)]
    cols = ["run_id"] + [c for c in df.columns if c != "run_id"] if "run_id" in df.columns else list(df.columns)
    return df[cols]


def _apply_map(df: pd.DataFrame, column_map: Mapping[str, str], name: str) -> pd.DataFrame:
    if not column_map:
        return df
    rename: dict[str, str] = {}
    for canon, foreign in column_map.items():
        if foreign not in df.columns:
            visible = [c for c in df.columns if c != _ROW]
            hint = closest_hint(foreign, visible) or f"; columns: {visible[:20]}"
            raise InputError(
                f"expected column {foreign!r} (from --map {canon}={foreign}), got no such column{hint} in {name}"
            )
        if foreign in rename:
            raise InputError(f"expected each foreign column mapped once, got {foreign!r} twice in {name}")
        rename[foreign] = canon
    targets = set(rename.values())
    clash = [c for c in df.columns if c in targets and c not in rename]
    if clash:
        raise InputError(
            f"expected one column named {clash[0]!r}, got the file's own and the mapped "
            f"{column_map[clash[0]]!r} (add --drop {clash[0]}) in {name}"
        )
    return df.rename(columns=rename)


def _pivot_evalsets(df: pd.DataFrame, col: str, name: str) -> pd.DataFrame:
    if col not in df.columns:
        raise InputError(f"expected the eval-set column {col!r}, got columns {list(df.columns)[:20]} in {name}")
    if "loss" not in df.columns:
        raise InputError(f"expected a 'loss' column holding the value of each eval set, got none in {name}")
    if "run_id" not in df.columns:
        raise InputError(f"expected a 'run_id' column to pivot eval sets, got none in {name}")
    sets = df[col].astype(object)
    for i, v in enumerate(sets.to_numpy()):
        if v is None or (isinstance(v, float) and math.isnan(v)) or not str(v).strip():
            raise InputError(f"expected an eval-set name, got an empty cell in {name}:{int(df[_ROW].iloc[i])}:{col}")
    names = ["loss_" + re.sub(r"[^A-Za-z0-9_.+\-]", "_", str(v).strip()) for v in sets.to_numpy()]
    keys = ["run_id"] + (["step"] if "step" in df.columns else [])
    other = [c for c in df.columns if c not in keys and c not in (col, "loss", _ROW)]
    clash = sorted(set(names) & set(df.columns))
    if clash:
        raise InputError(f"expected new loss columns from {col!r}, got existing {clash[0]!r} in {name}")
    out_rows: list[dict[str, Any]] = []
    index: dict[tuple[Any, ...], int] = {}
    key_vals = df[keys].astype(object).to_numpy()
    other_vals = df[other].astype(object).to_numpy()
    loss_vals = df["loss"].to_numpy()
    row_vals = df[_ROW].to_numpy()
    for i in range(len(df)):
        k = tuple(_norm_key(v) for v in key_vals[i])
        j = index.get(k)
        if j is None:
            index[k] = len(out_rows)
            rec = dict(zip(keys, key_vals[i], strict=True))
            rec.update(zip(other, other_vals[i], strict=True))
            rec[_ROW] = int(row_vals[i])
            out_rows.append(rec)
            j = index[k]
        rec = out_rows[j]
        for c, v in zip(other, other_vals[i], strict=True):
            if rec[c] is not v and not _same_cell(rec[c], v):
                raise InputError(
                    f"expected {c!r} constant within ({', '.join(map(str, k))}) across eval sets, got "
                    f"{rec[c]!r} and {v!r} in {name}:{int(row_vals[i])}:{c}"
                )
        nm = names[i]
        if nm in rec:
            raise InputError(
                f"expected one row per (run_id, step, {col}), got a second {nm[5:]!r} for "
                f"({', '.join(map(str, k))}) in {name}:{int(row_vals[i])}:{col}"
            )
        rec[nm] = loss_vals[i]
    loss_cols = sorted({n for n in names})
    cols = keys + other + loss_cols + [_ROW]
    return pd.DataFrame({c: pd.Series([r.get(c) for r in out_rows], dtype=object) for c in cols})


def _norm_key(v: Any) -> Any:
    if isinstance(v, str):
        return v.strip()
    return v


def _same_cell(a: Any, b: Any) -> bool:
    def empty(x: Any) -> bool:
        return x is None or (isinstance(x, float) and math.isnan(x)) or (isinstance(x, str) and not x.strip())

    if empty(a) and empty(b):
        return True
    if isinstance(a, str) and isinstance(b, str):
        return a.strip() == b.strip()
    return bool(a == b)
