"""CLI verbs for runs: ``mixlaw ingest`` and ``mixlaw runs``.

Plain functions with typer-annotated parameters; the top-level CLI mounts them with
``app.command("ingest")(ingest)`` and ``app.command("runs")(runs)``. ``app`` here is a stand-alone typer app
with both verbs (``python -m mixlaw.runs.cli``). User errors print one line to stderr and exit 1.
"""

from __future__ import annotations

import json as _json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Optional

import numpy as np
import pandas as pd
import typer

from mixlaw.errors import InputError, MixlawError
from mixlaw.runs.io import _read_csv, parse_column_map, read_table
from mixlaw.runs.schema import validate_table
from mixlaw.runs.store import DEFAULT_STORE, RunStore

__all__ = ["ingest", "runs", "app", "read_lr_table"]


@contextmanager
def _user_errors() -> Iterator[None]:
    try:
        yield
    except MixlawError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
        raise typer.Exit(1) from None


def _parse_set(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or ():
        if "=" not in item:
            raise InputError(f"expected --set column=value, got {item!r}")
        k, v = (p.strip() for p in item.split("=", 1))
        v = v.strip("'\"")
        if not k:
            raise InputError(f"expected --set column=value with a column name, got {item!r}")
        val: Any = v
        try:
            f = float(v)
            val = int(f) if f.is_integer() and "." not in v and "e" not in v.lower() else f
        except ValueError:
            pass
        out[k] = val
    return out


def read_lr_table(path: Path, table: pd.DataFrame | None = None) -> dict[str, dict[str, Any]]:
    """Per-run LR schedules from a dense table with columns ``run_id, step, lr`` (one row per step).

    Steps of each run must be consecutive, starting at 0 or 1, and reach the run's last evaluated step in
    ``table``. The schedule stored is ``{"kind": "table", "lr": [lr_1, ..., lr_T]}`` (``lr[i]`` is the LR of
    update ``i + 1``, the :mod:`mixlaw.schedules` convention) plus ``"lr0"`` when step 0 is given.
    """
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


def ingest(
    file: Annotated[Path, typer.Argument(help="CSV, TSV, JSONL, JSON, Parquet, TensorBoard file/dir or W&B CSV.")],
    map: Annotated[
        Optional[list[str]],  # noqa: UP045 (typer needs Optional)
        typer.Option("--map", help="canonical=foreign column rename, e.g. n_params='Model Size' (repeatable)."),
    ] = None,
    store: Annotated[Path, typer.Option("--store", help="RunStore database.")] = Path(DEFAULT_STORE),
    lr_table: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--lr-table", help="Dense per-step LR table (run_id, step, lr) stored as each run's schedule."),
    ] = None,
    run_id: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--run-id", help="Run id for a file holding one run and no run_id column."),
    ] = None,
    run_id_from_row: Annotated[
        bool,
        typer.Option("--run-id-from-row", help="Every row is its own run '<file stem>-<row>' at step 0."),
    ] = False,
    evalset_column: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--evalset-column", help="Long format: column naming each row's eval set; pivots to loss_<set>."),
    ] = None,
    set_: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--set", help="Add a constant column, e.g. --set n_params=18915328 (repeatable)."),
    ] = None,
    drop: Annotated[
        Optional[list[str]],  # noqa: UP045
        typer.Option("--drop", help="Drop a column after mapping (repeatable)."),
    ] = None,
    fmt: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--format", help="csv|tsv|jsonl|json|parquet|tensorboard|wandb-csv|wandb (default: detect)."),
    ] = None,
    allow_nan: Annotated[bool, typer.Option("--allow-nan", help="Accept NaN/inf and empty cells.")] = False,
    allow_missing: Annotated[
        bool, typer.Option("--allow-missing", help="Accept empty cells in numeric columns (sparse logs).")
    ] = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite conflicting run metadata and already-stored steps.")
    ] = False,
    json: Annotated[bool, typer.Option("--json", help="Print a JSON summary.")] = False,
) -> None:
    """Validate a run log and add it to the RunStore (all or nothing)."""
    with _user_errors():
        table = read_table(
            file,
            column_map=parse_column_map(map),
            fmt=fmt,
            run_id=run_id,
            run_id_from_row=run_id_from_row,
            evalset_column=evalset_column,
            set_values=_parse_set(set_),
            drop=drop,
            allow_nan=allow_nan,
            allow_missing=True if allow_missing else None,
        )
        schedules = read_lr_table(lr_table, table) if lr_table is not None else None
        with RunStore(store) as st:
            summary = st.ingest_table(
                table, file.name, replace=replace, validated=True, schedules=schedules, allow_nan=allow_nan
            )
    loss_cols = [c for c in table.columns if c == "loss" or c.startswith("loss_")]
    if json:
        typer.echo(
            _json.dumps({"file": str(file), "store": str(store), **summary, "loss_columns": loss_cols}, sort_keys=True)
        )
    else:
        typer.echo(
            f"ingested {summary['rows']} rows of {summary['runs']} runs ({summary['new_runs']} new) "
            f"from {file.name} into {store}; loss columns: {', '.join(loss_cols)}"
        )


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def runs(
    store: Annotated[Path, typer.Option("--store", help="RunStore database.")] = Path(DEFAULT_STORE),
    where: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--where", help="pandas-query filter, e.g. \"phase == 'cpt' and n_params > 1e8\"."),
    ] = None,
    export: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--export", help="Write the RunTable (rows filtered by --where) to .csv/.jsonl/.parquet."),
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="Print the run list as JSON.")] = False,
) -> None:
    """List the runs of a store (filter with --where), or export its RunTable."""
    with _user_errors():
        if not store.exists():
            raise InputError(f"expected an existing store, got no such file in {store}")
        with RunStore(store) as st:
            if export is not None:
                path = st.export(export, where)
                n = len(pd.read_csv(path)) if path.suffix.lower() == ".csv" else None
                typer.echo(f"exported {'' if n is None else f'{n} rows '}to {path}")
                return
            frame = st.runs(where)
    if json:
        recs = [{k: _jsonable(v) for k, v in r.items()} for r in frame.to_dict("records")]
        typer.echo(_json.dumps(recs, sort_keys=False))
        return
    _print_runs(frame, str(store))


def _print_runs(frame: pd.DataFrame, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{len(frame)} runs in {title}")
    for c in ("run_id", "phase", "n_params", "mixture", "parent_run", "status", "n_evals", "last_step"):
        t.add_column(c, justify="right" if c in ("n_params", "n_evals", "last_step") else "left", overflow="fold")
    wcols = [c for c in frame.columns if c.startswith("w_")]

    def fmt(v: Any, f: Callable[[Any], str] = str) -> str:
        v = _jsonable(v)
        return "" if v is None else f(v)

    for r in frame.to_dict("records"):
        mix = " ".join(f"{c[2:]}={float(r[c]):.3g}" for c in wcols if _jsonable(r[c]) is not None and float(r[c]) > 0)
        t.add_row(
            str(r["run_id"]),
            fmt(r["phase"]),
            fmt(r["n_params"], lambda v: f"{float(v):.4g}"),
            mix,
            fmt(r["parent_run"]),
            fmt(r["status"]),
            fmt(r["n_evals"]),
            fmt(r["last_step"], lambda v: str(int(v))),
        )
    Console().print(t)


app = typer.Typer(help="mixlaw runs: ingest logs into a RunStore and list them.", no_args_is_help=True)
app.command("ingest")(ingest)
app.command("runs")(runs)

if __name__ == "__main__":  # pragma: no cover
    app()
