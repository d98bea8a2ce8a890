"""Ingest helpers of the :class:`~mixlaw.runs.store.RunStore`: run metadata inferred from a validated
RunTable (columns that must be constant within a run)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.schema import RUN_LEVEL_COLUMNS, Mixture, RunMeta, is_weight_column

__all__ = ["infer_run_metas", "iter_chunks"]


def infer_run_metas(table: pd.DataFrame, source: str) -> dict[str, RunMeta]:
    """Per-run metadata from the columns that must be constant within a run."""
    run_cols = [
        c
        for c in table.columns
        if c in RUN_LEVEL_COLUMNS or is_weight_column(c) or c.startswith("unique_tokens_") or table[c].dtype == object
    ]
    run_cols = [c for c in run_cols if c != "run_id"]
    rids = table["run_id"].to_numpy()
    user_rows = table.attrs.get("rows")
    if user_rows is None or len(user_rows) != len(table):
        user_rows = np.arange(1, len(table) + 1)
    metas: dict[str, RunMeta] = {}
    # positions of each run's rows, in order of first appearance
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rids):
        groups.setdefault(str(r), []).append(i)
    cols = {c: table[c].to_numpy() for c in run_cols}
    for rid, idx in groups.items():
        vals: dict[str, Any] = {}
        for c in run_cols:
            arr = cols[c][idx]
            first = _first_present(arr)
            for k, v in enumerate(arr):
                if not _same(v, first):
                    raise InputError(
                        f"expected one value of {c!r} per run, got {_fmt_val(first)} and {_fmt_val(v)} "
                        f"for run {rid!r} in {source}:{int(user_rows[idx[k]])}:{c}"
                    )
            vals[c] = first
        mixture = None
        wcols = {c[2:]: vals[c] for c in vals if is_weight_column(c) and vals[c] is not None}
        if wcols:
            try:
                mixture = Mixture(wcols, atol=1e-6)
            except InputError as exc:
                raise InputError(f"{exc} for run {rid!r} in {source}") from None
        meta = {c: _py(vals[c]) for c in vals if c.startswith("unique_tokens_") and vals[c] is not None}
        meta.update(
            {
                c: vals[c]
                for c in vals
                if c not in RUN_LEVEL_COLUMNS
                and not is_weight_column(c)
                and not c.startswith("unique_tokens_")
                and vals[c] is not None
            }
        )
        parent = vals.get("parent_run")
        phase = vals.get("phase") or ("cpt" if parent else "pt")
        try:
            metas[rid] = RunMeta(
                run_id=rid,
                phase=phase,
                n_params=_py(vals.get("n_params")),
                n_params_total=_py(vals.get("n_params_total")),
                mixture=mixture,
                parent_run=parent,
                seed=_py(vals.get("seed")),
                schedule=None if vals.get("schedule") is None else json.loads(vals["schedule"]),
                meta=meta,
            )
        except InputError as exc:
            raise InputError(f"{exc} in {source}:{int(user_rows[idx[0]])}") from None
    return metas


def _first_present(arr: np.ndarray) -> Any:
    for v in arr:
        if not _missing(v):
            return v
    return None


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float | np.floating) and math.isnan(v))


def _same(v: Any, ref: Any) -> bool:
    if _missing(v):
        return True  # an empty cell does not contradict the run's value
    return bool(v == ref)


def _fmt_val(v: Any) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    return repr(v)


def _py(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isfinite(v) and v == round(v) and abs(v) < 2**63:
        return int(v)
    return v


def iter_chunks(df: pd.DataFrame, size: int) -> Iterable[pd.DataFrame]:
    """Split a frame into chunks of ``size`` rows (helper for streaming writers)."""
    for start in range(0, len(df), size):
        yield df.iloc[start : start + size]
