"""Run verbs: ``mixlaw ingest`` and ``mixlaw runs`` (thin calls into :mod:`mixlaw.api`).

Plain functions with typer-annotated parameters, mounted by the root CLI (``python -m mixlaw.cli.runs`` runs a
stand-alone app with both). User errors print one line to stderr and exit 1 (:func:`mixlaw.cli._common.verb`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from mixlaw.cli._common import console, emit_json, verb

__all__ = ["ingest", "runs", "app"]

DEFAULT_STORE = "mixlaw.db"  # mixlaw.runs.store.DEFAULT_STORE, without importing pandas at start-up


def __getattr__(name: str) -> Any:
    if name == "read_lr_table":  # moved to mixlaw.api; kept importable from here
        from mixlaw.api import read_lr_table

        return read_lr_table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@verb
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
    from mixlaw import api

    s = api.ingest(
        file,
        store,
        column_map=map,
        lr_table=lr_table,
        set_values=api.parse_set(set_),
        allow_nan=allow_nan,
        allow_missing=allow_missing,
        replace=replace,
        fmt=fmt,
        run_id=run_id,
        run_id_from_row=run_id_from_row,
        evalset_column=evalset_column,
        drop=drop,
    )
    if json:
        return emit_json(s, sort_keys=True)
    typer.echo(
        f"ingested {s['rows']} rows of {s['runs']} runs ({s['new_runs']} new) "
        f"from {file.name} into {store}; loss columns: {', '.join(s['loss_columns'])}"
    )


@verb
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
    from mixlaw import api

    if export is not None:
        path, n = api.export_runs(store, export, where)
        typer.echo(f"exported {'' if n is None else f'{n} rows '}to {path}")
        return
    frame = api.list_runs(store, where)
    if json:
        return emit_json(frame.to_dict("records"))
    _print_runs(frame, str(store))


def _print_runs(frame: Any, title: str) -> None:
    from rich.table import Table

    t = Table(title=f"{len(frame)} runs in {title}")
    for c in ("run_id", "phase", "n_params", "mixture", "parent_run", "status", "n_evals", "last_step"):
        t.add_column(c, justify="right" if c in ("n_params", "n_evals", "last_step") else "left", overflow="fold")
    wcols = [c for c in frame.columns if c.startswith("w_")]

    def val(v: Any) -> Any:
        v = v.item() if hasattr(v, "item") else v
        return None if v is None or (isinstance(v, float) and v != v) else v  # NaN → empty

    def fmt(v: Any, f: Any = str) -> str:
        v = val(v)
        return "" if v is None else f(v)

    for r in frame.to_dict("records"):
        mix = " ".join(f"{c[2:]}={float(r[c]):.3g}" for c in wcols if val(r[c]) is not None and float(r[c]) > 0)
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
    console().print(t)


app = typer.Typer(help="mixlaw runs: ingest logs into a RunStore and list them.", no_args_is_help=True)
app.command("ingest")(ingest)
app.command("runs")(runs)

if __name__ == "__main__":  # pragma: no cover
    app()
