"""Run verbs: ``mixlaw ingest`` and ``mixlaw runs`` (thin calls into :mod:`mixlaw.api`).

Plain functions with typer-annotated parameters, mounted by the root CLI (``python -m mixlaw.cli.runs`` runs a
stand-alone app with both). User errors print one line to stderr and exit 1 (:func:`mixlaw.cli._common.verb`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from mixlaw.cli._common import console, emit_json, verb
from mixlaw.cli._table import (
    DeriveOpt,
    DropOpt,
    EveryOpt,
    FinalOpt,
    MapOpt,
    SetOpt,
    StepsOpt,
    WhereOpt,
    table_options,
)

__all__ = ["ingest", "runs", "app"]

DEFAULT_STORE = "mixlaw.db"  # mixlaw.runs.store.DEFAULT_STORE, without importing pandas at start-up


@verb
def ingest(
    file: Annotated[
        list[Path],
        typer.Argument(
            help="Log files, directories or globs: CSV, TSV, JSONL, JSON, Parquet, TensorBoard, W&B, HF, Lightning."
        ),
    ],
    maps: MapOpt = None,
    store: Annotated[Path, typer.Option("--store", help="RunStore database.")] = Path(DEFAULT_STORE),
    meta: Annotated[
        Optional[Path],  # noqa: UP045 (typer needs Optional)
        typer.Option("--meta", help="CSV of run-level columns keyed by run_id or by a file-name glob in 'file'."),
    ] = None,
    lr_table: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--lr-table", help="Dense per-step LR table (run_id, step, lr) stored as each run's schedule."),
    ] = None,
    run_id: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--run-id", help="Run id for a file holding one run and no run_id column."),
    ] = None,
    run_id_pattern: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--run-id-pattern", help="REGEX on the file name: group run_id (or the first) is the run id."),
    ] = None,
    run_id_from_row: Annotated[
        bool,
        typer.Option("--run-id-from-row", help="Every row is its own run '<file stem>-<row>' at step 0."),
    ] = False,
    evalset_column: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--evalset-column", help="Long format: column naming each row's eval set; pivots to loss_<set>."),
    ] = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    where: WhereOpt = None,
    derive: DeriveOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    fmt: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--format", help="csv|tsv|jsonl|json|parquet|tensorboard|wandb-csv|wandb|hf-trainer|lightning."),
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
    """Validate a run log and add it to the RunStore (all or nothing).

    Several files, directories or globs: one transaction per file, a summary table per file; a file that fails is
    reported and the others still go in."""
    from mixlaw.api.runs import expand_sources, ingest_files
    from mixlaw.errors import InputError

    opts = table_options(maps=maps, set_=set_, drop=drop, where=where, derive=derive, final=final, every=every,
                         steps=steps)  # fmt: skip
    n_files = len(expand_sources(file))
    s = ingest_files(
        file, store, options=opts, meta=meta, run_id=run_id, run_id_pattern=run_id_pattern, replace=replace,
        allow_nan=allow_nan, allow_missing=allow_missing, lr_table=lr_table, keep_going=n_files > 1, fmt=fmt,
        run_id_from_row=run_id_from_row, evalset_column=evalset_column,
    )  # fmt: skip
    loss_cols = list(dict.fromkeys(c for r in s["files"] for c in r.get("loss_columns", ())))
    if json:
        one = s["files"][0] if n_files == 1 else {}
        emit_json({**one, **s, "loss_columns": loss_cols}, sort_keys=True)
    else:
        if n_files > 1:
            _print_ingest(s)
        source = file[0].name if n_files == 1 else f"{n_files - s['failed']} of {n_files} files"
        typer.echo(
            f"ingested {s['rows']:,} rows of {s['runs']:,} runs ({s['new_runs']} new) from {source} into {store}; "
            f"loss columns: {', '.join(loss_cols)}"
        )
    if s["failed"]:
        first = next(r for r in s["files"] if r["status"] != "ok")
        raise InputError(f"expected every file to ingest, got {s['failed']} failed (first {first['file']}: "
                         f"{first['status'][len('error: '):]})")  # fmt: skip


def wrap_path(path: str, width: int) -> str:
    """``path`` in lines of at most ``width`` characters, broken after a ``/`` (a name is cut only when it alone
    is wider): ``hf/cpt-legal-0.3/checkpoint-2000/`` then ``trainer_state.json``, never ``t`` + ``rainer_state``."""
    lines: list[str] = []
    line = ""
    for part in (p + "/" for p in path.split("/")):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        while len(part) > width:
            lines.append(part[:width])
            part = part[width:]
        line += part
    lines.append(line)
    return "\n".join(lines)[:-1]  # the last part's added "/"


def _print_ingest(s: dict[str, Any]) -> None:
    from rich import box
    from rich.table import Table

    con = console()
    nums = ("runs", "rows", "mapped", "skipped")
    cells = [[str(r[c]) for c in nums] + [str(r["status"])] for r in s["files"]]
    # the counts and a short status unbroken; the file gets the rest of the line, wrapped between folders
    fixed = sum(max(len(c), *(len(row[j]) for row in cells)) + 2 for j, c in enumerate(nums))
    status = min(max(len("status"), *(len(row[-1]) for row in cells)), 24) + 2
    width = max(con.width - fixed - status - 1, 16)
    t = Table(title=f"{len(s['files'])} files into {s['store']}", box=box.SIMPLE_HEAD, padding=(0, 1),
              pad_edge=False, collapse_padding=True)  # fmt: skip
    t.add_column("file", overflow="fold")
    for c in nums:
        t.add_column(c, justify="right", no_wrap=True)
    t.add_column("status", overflow="fold")
    for r, row in zip(s["files"], cells, strict=True):
        t.add_row(wrap_path(str(r["file"]), width), *row)
    con.print(t)


@verb
def runs(
    store: Annotated[Path, typer.Option("--store", help="RunStore database.")] = Path(DEFAULT_STORE),
    where: WhereOpt = None,
    export: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--export", help="Write the RunTable (rows filtered by --where) to .csv/.jsonl/.parquet."),
    ] = None,
    columns: Annotated[
        bool, typer.Option("--columns", help="List the store's columns: unit and how many runs carry each.")
    ] = False,
    json: Annotated[bool, typer.Option("--json", help="Print the run list as JSON.")] = False,
) -> None:
    """List the runs of a store (filter with --where), or export its RunTable.

    With --columns: the store's columns instead, with unit, level and how many runs carry each."""
    if not store.is_file():  # RunStore's message, before the engine's imports (a typo answers at once)
        from mixlaw.errors import InputError

        raise InputError(f"expected an existing store, got no such file in {store}")
    from mixlaw import api

    if export is not None:
        from mixlaw.safeio import check_output_path

        check_output_path(export, "--export")  # a directory or a missing parent: one line, the store untouched
        path, n = api.export_runs(store, export, where)
        typer.echo(f"exported {'' if n is None else f'{n} rows '}to {path}")
        return
    if columns:
        from mixlaw.api.runs import RUN_LEVEL_COLUMNS, RunStore, column_summary

        with RunStore(store, read_only=True) as st:
            frame = st.to_frame(where)
            meta_cols = [c for c in st.runs().columns if c in frame.columns]
        recs = column_summary(frame, run_level=[*RUN_LEVEL_COLUMNS, *meta_cols])
        if json:
            return emit_json(recs)
        return _print_columns(recs, str(store), int(frame["run_id"].nunique()))
    frame = api.list_runs(store, where)
    if json:
        return emit_json(frame.to_dict("records"))
    _print_runs(frame, str(store))


def _print_columns(recs: list[dict[str, Any]], title: str, n_runs: int) -> None:
    from rich.table import Table

    from mixlaw.api.runs import format_numbers

    t = Table(title=f"{len(recs)} columns of {n_runs} runs in {title}")
    for c in ("column", "unit", "level", "runs", "rows", "min", "max"):
        t.add_column(c, justify="right" if c in ("runs", "rows", "min", "max") else "left", overflow="fold")
    lo = format_numbers([r.get("min") for r in recs])
    hi = format_numbers([r.get("max") for r in recs])
    for r, a, b in zip(recs, lo, hi, strict=True):
        t.add_row(r["column"], r["unit"], r["level"], f"{r['runs']}/{n_runs}", str(r["rows"]), a, b)
    console().print(t)


def _print_runs(frame: Any, title: str) -> None:
    from rich import box
    from rich.table import Table

    from mixlaw.api.runs import format_numbers

    cols = ("run_id", "phase", "n_params", "mixture", "parent_run", "status", "n_evals", "last_step")
    heads = {"n_params": "size", "parent_run": "parent", "n_evals": "rows", "last_step": "last"}  # rows: logged steps
    wcols = [c for c in frame.columns if c.startswith("w_")]

    def val(v: Any) -> Any:
        v = v.item() if hasattr(v, "item") else v
        return None if v is None or (isinstance(v, float) and v != v) else v  # NaN → empty

    def text(v: Any) -> str:
        v = val(v)
        return "" if v is None else str(v)

    recs = frame.to_dict("records")
    nums = {c: format_numbers([r.get(c) for r in recs]) for c in ("n_params", "n_evals", "last_step")}
    rows = []
    for i, r in enumerate(recs):
        mix = " ".join(f"{c[2:]}={float(r[c]):.3g}" for c in wcols if val(r[c]) is not None and float(r[c]) > 0)
        rows.append([str(r["run_id"]), text(r["phase"]), nums["n_params"][i], mix, text(r["parent_run"]),
                     text(r["status"]), nums["n_evals"][i], nums["last_step"][i]])  # fmt: skip
    keep = [j for j, c in enumerate(cols) if c == "run_id" or any(row[j] for row in rows)]  # no empty columns
    # No vertical rules, ids and numbers unbroken, the mixture wrapped between domains: 80 columns readable.
    t = Table(title=f"{len(frame)} runs in {title}", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False,
              collapse_padding=True)
    widest = max((len(w) for row in rows for w in row[3].split()), default=0)  # one domain=share per line at least
    for j in keep:
        c = cols[j]
        t.add_column(heads.get(c, c), justify="right" if c in ("n_params", "n_evals", "last_step") else "left",
                     no_wrap=c != "mixture", overflow="ellipsis" if c != "mixture" else "fold",
                     min_width=widest if c == "mixture" else None)  # fmt: skip
    for row in rows:
        t.add_row(*(row[j] for j in keep))
    console().print(t)


app = typer.Typer(help="mixlaw runs: ingest logs into a RunStore and list them.", no_args_is_help=True)
app.command("ingest")(ingest)
app.command("runs")(runs)

if __name__ == "__main__":  # pragma: no cover
    app()
