"""Weights & Biases: history and panel CSV exports, and run histories through the W&B public API."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.io.names import _canonical_columns, _with_sources
from mixlaw.runs.io.text import _ROW
from mixlaw.runs.schema import validate_table

_WANDB_PANEL_RE = re.compile(r"^(?P<run>.+?) - (?P<metric>.+?)(?P<agg>__MIN|__MAX)?$")
_RUN_NAME_COLUMNS = ("run_id", "Name", "name", "run", "run_name", "Run", "display_name", "ID", "id")


def _looks_like_wandb(raw: pd.DataFrame) -> bool:
    cols = [c for c in raw.columns if c != _ROW]
    if "_step" in cols:
        return True
    return "Step" in cols and any(_WANDB_PANEL_RE.match(c) for c in cols if c != "Step")


def _wandb_csv_to_long(
    raw: pd.DataFrame, path: Path, column_map: Mapping[str, str], drop: Sequence[str] = ()
) -> pd.DataFrame:
    """W&B exports -> one row per (run, step) with canonical metric names.

    Two layouts are understood:

    - run history (``run.history()`` / ``scan_history`` saved as CSV, or the "Export" of a run's history):
      a ``_step`` column, metric columns like ``eval/code/loss``; the run is named by a ``Name`` / ``name`` /
      ``run`` / ``run_id`` column if present, else by the file stem;
    - a panel export ("Download CSV" of a line plot): ``Step`` and ``"<run name> - <metric>"`` columns (the
      ``__MIN`` / ``__MAX`` band columns are ignored).
    """
    name = path.name
    cols = [c for c in raw.columns if c != _ROW]
    if "Step" in cols and "_step" not in cols and any(_WANDB_PANEL_RE.match(c) for c in cols if c != "Step"):
        recs: dict[tuple[str, str], dict[str, Any]] = {}
        metrics: list[str] = []
        for c in cols:
            if c == "Step":
                continue
            m = _WANDB_PANEL_RE.match(c)
            if m is None:
                raise InputError(f"expected '<run> - <metric>' columns in a W&B panel export, got {c!r} in {name}:1")
            if m.group("agg"):
                continue
            if m.group("metric") not in metrics:
                metrics.append(m.group("metric"))
        mapping = _canonical_columns(metrics, column_map, name, drop)
        steps = raw["Step"].to_numpy()
        rows = raw[_ROW].to_numpy()
        for c in cols:
            m = _WANDB_PANEL_RE.match(c)
            if c == "Step" or m is None or m.group("agg"):
                continue
            canon = mapping[m.group("metric")]
            if canon is None or canon == "step":
                continue
            for i, v in enumerate(raw[c].to_numpy()):
                if not isinstance(v, str) or not v.strip():
                    continue
                key = (m.group("run"), str(steps[i]).strip())
                rec = recs.setdefault(key, {"run_id": key[0], "step": key[1], _ROW: int(rows[i])})
                rec[canon] = v
        if not recs:
            raise InputError(f"expected values in the W&B panel export, got only empty cells in {name}")
        out_cols = ["run_id", "step"] + sorted({k for r in recs.values() for k in r} - {"run_id", "step", _ROW})
        out = pd.DataFrame({c: pd.Series([r.get(c) for r in recs.values()], dtype=object) for c in out_cols})
        out[_ROW] = [r[_ROW] for r in recs.values()]
        return _with_sources(out, mapping)
    # history export
    run_col = next((c for c in _RUN_NAME_COLUMNS if c in cols and c not in column_map.values()), None)
    explicit_run = column_map.get("run_id")
    metric_cols = [c for c in cols if c != run_col and c != explicit_run]
    mapping = _canonical_columns(metric_cols, {k: v for k, v in column_map.items() if k != "run_id"}, name, drop)
    data: dict[str, Any] = {}
    if explicit_run is not None:
        if explicit_run not in cols:
            raise InputError(f"expected column {explicit_run!r} (from --map run_id=...), got {cols[:20]} in {name}")
        data["run_id"] = raw[explicit_run]
    elif run_col is not None:
        data["run_id"] = raw[run_col]
    for f, canon in mapping.items():
        if canon is not None:
            data[canon] = raw[f]
    out = pd.DataFrame(data)
    out[_ROW] = raw[_ROW].to_numpy()
    return _with_sources(out, mapping)


# ---------------------------------------------------------------------------------------------- W&B API


def read_wandb(
    path: str,
    *,
    column_map: Mapping[str, str] | None = None,
    keys: Sequence[str] | None = None,
    run_name: str = "name",
    allow_nan: bool = False,
) -> pd.DataFrame:
    """Read run histories through the W&B public API (optional extra ``wandb``; needs network and a login).

    Parameters
    ----------
    path
        ``entity/project`` (every run) or ``entity/project/run_id`` (one run).
    column_map, keys
        ``{canonical: metric}`` overrides, and the metric names to fetch (default: all).
    run_name
        ``"name"`` (display name, must be unique) or ``"id"`` for the RunTable's ``run_id``.
    """
    raw = _wandb_api_frame(path, column_map=column_map or {}, keys=keys, run_name=run_name)
    rows = raw.pop(_ROW).to_numpy()
    return validate_table(raw, f"wandb://{path}", allow_nan=allow_nan, allow_missing=True, rows=rows)


def _wandb_api_frame(
    path: str, *, column_map: Mapping[str, str], keys: Sequence[str] | None = None, run_name: str = "name"
) -> pd.DataFrame:
    try:
        import wandb
    except ImportError:
        raise InputError(
            f"expected the wandb package for the W&B API (pip install mixlaw[wandb]), got it not installed "
            f"in wandb://{path}"
        ) from None
    label = f"wandb://{path}"
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) not in (2, 3):
        raise InputError(f"expected wandb://entity/project[/run_id], got {label!r}")
    if run_name not in ("name", "id"):
        raise InputError(f"expected run_name 'name' or 'id', got {run_name!r}")
    try:
        api = wandb.Api()
        runs = [api.run("/".join(parts))] if len(parts) == 3 else list(api.runs("/".join(parts)))
    except Exception as exc:  # network / auth / not found: wandb raises many types
        raise InputError(f"expected a reachable W&B project, got '{exc}' in {label}") from None
    recs: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for run in runs:
        rid = str(getattr(run, run_name))
        if rid in seen:
            raise InputError(f"expected unique run names, got {rid!r} twice (use run_name='id') in {label}")
        seen[rid] = rid
        try:
            history = run.scan_history(keys=list(keys) if keys else None)
            for row in history:
                # a logged metric named run_id is kept as metric_run_id; it never renames the run
                rec = {("metric_run_id" if k == "run_id" else k): v for k, v in dict(row).items()}
                rec["run_id"] = rid
                recs.append(rec)
        except Exception as exc:
            raise InputError(f"expected the history of run {rid!r}, got '{exc}' in {label}") from None
    if not recs:
        raise InputError(f"expected logged history, got none in {label}")
    metric_names: list[str] = []
    for r in recs:
        metric_names += [k for k in r if k != "run_id" and k not in metric_names]
    mapping = _canonical_columns(metric_names, column_map, label)
    data: dict[str, list[Any]] = {"run_id": [r["run_id"] for r in recs]}
    for f, canon in mapping.items():
        if canon is not None:
            data[canon] = [r.get(f) for r in recs]
    df = pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in data.items()})
    df[_ROW] = np.arange(1, len(df) + 1)
    return _with_sources(_merge_same_step(df, label), mapping)


def _merge_same_step(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Merge rows logged separately at the same (run, step) (W&B logs train and eval metrics in calls)."""
    if "step" not in df.columns:
        return df
    groups: dict[tuple[Any, Any], dict[str, Any]] = {}
    cols = [c for c in df.columns if c not in ("run_id", "step")]
    for rec in df.to_dict("records"):
        key = (rec["run_id"], rec["step"])
        g = groups.get(key)
        if g is None:
            groups[key] = dict(rec)
            continue
        for c in cols:
            if c == _ROW:
                continue
            v = rec[c]
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            if g.get(c) is not None and not (isinstance(g[c], float) and math.isnan(g[c])) and g[c] != v:
                raise InputError(
                    f"expected one value per (run, step), got {g[c]!r} and {v!r} in {name}:{rec[_ROW]}:{c}"
                )
            g[c] = v
    out = pd.DataFrame({c: pd.Series([g.get(c) for g in groups.values()], dtype=object) for c in df.columns})
    out[_ROW] = out[_ROW].astype(np.int64)
    return out
