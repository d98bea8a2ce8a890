"""Trainer logs: Hugging Face ``trainer_state.json`` (its ``log_history``) and the Lightning ``CSVLogger``'s
``metrics.csv`` -> raw frames with canonical metric names, one row per (run, step).

Both write train and eval metrics in separate records at the same step; rows are merged per step. The run is
named after the folder (``out/checkpoint-500/trainer_state.json`` -> ``out``; ``lightning_logs/version_3/
metrics.csv`` -> ``lightning_logs-version_3``), since the file names say nothing (:func:`default_run_id`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.io.names import _with_sources
from mixlaw.runs.io.rules import map_metric_names
from mixlaw.runs.io.text import _ROW, _check_record, _read_text
from mixlaw.runs.io.wandb_export import _merge_same_step

__all__ = ["default_run_id", "read_trainer_state", "looks_like_lightning", "lightning_frame"]

#: Hugging Face: ``loss`` is the training loss (``eval_loss`` the evaluation loss); run summaries are not metrics.
_HF_RULES: dict[str, str | None] = {"loss": "loss_train", "total_flos": None}
_HF_SUMMARY = re.compile(r"(_runtime|_samples_per_second|_steps_per_second)$")
_GENERIC_DIR = re.compile(r"^(checkpoint|ckpt)[-_]?\d+$|^version_\d+$|^logs?$|^csv$", flags=re.IGNORECASE)
_GENERIC_FILE = {"trainer_state", "metrics", "history", "log", "logs", "events"}


def default_run_id(path: Path) -> str:
    """A run id from a log's path: the file stem, or the folder for generic names (``metrics.csv``).

    ``out/checkpoint-500/trainer_state.json`` -> ``out``; ``exp/lightning_logs/version_3/metrics.csv`` ->
    ``lightning_logs-version_3``; ``runs/190M-1xC.csv`` -> ``190M-1xC``."""
    if path.stem.lower() not in _GENERIC_FILE:
        return path.stem
    parent = path.parent
    if parent.name and re.match(r"^(checkpoint|ckpt)[-_]?\d+$", parent.name, flags=re.IGNORECASE):
        parent = parent.parent
    if parent.name and re.match(r"^version_\d+$", parent.name) and parent.parent.name:
        return f"{parent.parent.name}-{parent.name}"
    return parent.resolve().name or path.stem


def read_trainer_state(path: Path, column_map: Mapping[str, str], drop: Sequence[str]) -> pd.DataFrame | None:
    """The ``log_history`` of a Hugging Face ``trainer_state.json`` as a raw frame; ``None`` for other JSON."""
    text = _read_text(path)
    if '"log_history"' not in text:
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None  # the ordinary JSON reader reports the error with its line
    if not isinstance(obj, dict) or not isinstance(obj.get("log_history"), list):
        return None
    records: list[dict[str, Any]] = []
    rows: list[int] = []
    for i, rec in enumerate(obj["log_history"], 1):
        rec = _check_record(rec, path.name, i)
        if any(_HF_SUMMARY.search(k) for k in rec) and not any(k.startswith("eval_") for k in rec):
            continue  # the end-of-training summary (train_runtime, train_loss averaged over the run, ...)
        records.append({k: v for k, v in rec.items() if not _HF_SUMMARY.search(k)})
        rows.append(i)
    if not records:
        raise InputError(f"expected logged steps in log_history, got none in {path.name}")
    names: list[str] = []
    for r in records:
        names += [k for k in r if k not in names]
    rules = {k: v for k, v in _HF_RULES.items() if k not in column_map.values()}
    mapping = map_metric_names(names, column_map, path.name, drop, rules=rules)
    return _frame(records, rows, mapping, path)


def looks_like_lightning(raw: pd.DataFrame, path: Path) -> bool:
    """A Lightning ``CSVLogger`` file: ``step`` (and ``epoch``) columns, ``train_*`` / ``val_*`` / ``lr-*``
    metrics, no ``run_id``."""
    cols = [c for c in raw.columns if c != _ROW]
    if "step" not in cols or "run_id" in cols:
        return False
    if path.name == "metrics.csv" and "epoch" in cols:
        return True
    return "epoch" in cols and any(re.match(r"^(train|val|valid|test)[_/]|^lr-", c) for c in cols)


def lightning_frame(raw: pd.DataFrame, path: Path, column_map: Mapping[str, str], drop: Sequence[str]) -> pd.DataFrame:
    """A Lightning ``metrics.csv`` (one row per logging call) -> one row per step with canonical names."""
    names = [c for c in raw.columns if c != _ROW]
    mapping = map_metric_names(names, column_map, path.name, drop)
    records = raw[names].to_dict("records")
    return _frame(records, [int(r) for r in raw[_ROW].to_numpy()], mapping, path)


def _frame(
    records: list[dict[str, Any]], rows: list[int], mapping: Mapping[str, str | None], path: Path
) -> pd.DataFrame:
    out_cols = list(dict.fromkeys(c for c in mapping.values() if c is not None))
    data: dict[str, list[Any]] = {c: [] for c in out_cols}
    for r in records:
        vals: dict[str, Any] = {}
        for f, c in mapping.items():
            if c is None:
                continue
            v = r.get(f)
            vals[c] = None if isinstance(v, str) and not v.strip() else v
        for c in out_cols:
            data[c].append(vals.get(c))
    df = pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in data.items()})
    df[_ROW] = np.asarray(rows, dtype=np.int64)
    if "run_id" not in df.columns:  # merge per step within the one run of the file (named by read_table)
        df.insert(0, "run_id", "")
        df = _merge_same_step(df, path.name).drop(columns=["run_id"])
    else:
        df = _merge_same_step(df, path.name)
    return _with_sources(df, mapping)
