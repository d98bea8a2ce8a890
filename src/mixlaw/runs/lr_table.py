"""Per-run LR schedules from a dense table of ``run_id, step, lr`` (``mixlaw ingest --lr-table``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.run_ids import UNTYPED, compare, of_table

__all__ = ["read_lr_table"]


def read_lr_table(
    path: str | Path,
    table: pd.DataFrame | None = None,
    *,
    spellings: Mapping[str, str] | None = None,
    source: str = "the run table",
) -> dict[str, dict[str, Any]]:
    """Per-run LR schedules from a dense table with columns ``run_id, step, lr`` (one row per step).

    Steps of each run must be consecutive, starting at 0 or 1, and reach the run's last evaluated step in
    ``table``. The schedule stored is ``{"kind": "table", "lr": [lr_1, ..., lr_T]}`` (``lr[i]`` is the LR of
    update ``i + 1``, the :mod:`mixlaw.schedules` convention) plus ``"lr0"`` when step 0 is given.

    ``spellings``: the ``{run_id: spelling}`` of ``table`` as its file (``source``) wrote them
    (:mod:`mixlaw.runs.run_ids`; default ``table.attrs``); a run the LR table writes differently (``1`` and
    ``"1"``, ``"a"`` and ``"a "``) is refused, naming both files.
    """
    from mixlaw.runs.io import _read_csv
    from mixlaw.runs.schema import validate_table

    path = Path(path)
    raw = _read_csv(path)
    rows = raw.pop("__mixlaw_row__").to_numpy()
    missing = [c for c in ("run_id", "step", "lr") if c not in raw.columns]
    if missing:
        raise InputError(f"expected columns run_id, step, lr, got {list(raw.columns)} in {path.name}:1:{missing[0]}")
    df = validate_table(raw[["run_id", "step", "lr"]], path.name, rows=rows, require_loss=False)
    row_of = dict(zip(zip(df["run_id"], df["step"], strict=True), rows, strict=True))
    last_steps: dict[str, int] = {}
    if table is not None:
        last_steps = {str(k): int(v) for k, v in table.groupby("run_id")["step"].max().items()}
        unknown = sorted(set(df["run_id"]) - set(last_steps))
        if unknown:
            raise InputError(f"expected runs of the ingested file, got unknown run {unknown[0]!r} in {path.name}")
        mine = spellings if spellings is not None else of_table(table)
        df.attrs[UNTYPED] = True  # a CSV: its ids are text of no type
        compare(mine, source, of_table(df), path.name, sorted(set(df["run_id"])))
    out: dict[str, dict[str, Any]] = {}
    for rid, g in df.sort_values(["run_id", "step"]).groupby("run_id", sort=False):
        steps = g["step"].to_numpy()
        lr = g["lr"].to_numpy()
        start = int(steps[0])
        if start not in (0, 1):
            raise InputError(
                f"expected the LR table of run {rid!r} to start at step 0 or 1, got {start} "
                f"in {path.name}:{row_of[(rid, start)]}:step"
            )
        gaps = np.flatnonzero(np.diff(steps) != 1)
        if len(gaps):
            s = int(steps[gaps[0] + 1])
            raise InputError(
                f"expected one LR per step for run {rid!r}, got a gap after step {int(steps[gaps[0]])} "
                f"in {path.name}:{row_of[(rid, s)]}:step"
            )
        last = int(steps[-1])
        need = last_steps.get(str(rid))
        if need is not None and need > last:
            raise InputError(
                f"expected LRs up to the last evaluated step {need} of run {rid!r}, got up to {last} "
                f"in {path.name}:{row_of[(rid, last)]}:step"
            )
        sched: dict[str, Any] = {"kind": "table", "lr": [float(x) for x in (lr[1:] if start == 0 else lr)]}
        if start == 0:
            sched["lr0"] = float(lr[0])
        if not sched["lr"]:
            raise InputError(f"expected LRs for steps >= 1 of run {rid!r}, got only step 0 in {path.name}")
        out[str(rid)] = sched
    return out
