"""``mixlaw`` command line: a thin typer layer over :mod:`mixlaw.api` and the sub-apps of each area.

User errors exit 1 with one line on stderr and no traceback; ``--json`` prints one JSON object for machines.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from mixlaw import api
from mixlaw.errors import MixlawError

app = typer.Typer(
    name="mixlaw",
    help="Scaling laws for data mixtures and continual pre-training: fit probe runs, decide mixtures, with intervals.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err = Console(stderr=True)
out = Console()


@contextmanager
def user_errors() -> Iterator[list[warnings.WarningMessage]]:
    """Turn mixlaw errors into one stderr line + exit 1; collect warnings to print them as one line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield caught
        except MixlawError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        except OSError as exc:
            typer.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
            raise typer.Exit(1) from None
        finally:
            for w in caught:
                typer.echo(f"warning: {w.category.__name__}: {w.message}", err=True)


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, Path):
        return str(v)
    raise TypeError(type(v).__name__)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def emit_json(obj: Any) -> None:
    typer.echo(json.dumps(_clean(obj), default=_json_default))


def _coerce(v: str) -> Any:
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as prog:
        tasks: dict[str, Any] = {}

        def cb(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = prog.add_task(stage, total=total)
            prog.update(tasks[stage], completed=done, total=total)

        yield cb


TableArg = Annotated[
    Path | None,
    typer.Argument(
        help="Table file (CSV, JSONL, Parquet, TensorBoard dir, W&B export) or RunStore (*.db); default: the --store."
    ),
]
StoreOpt = Annotated[Path, typer.Option("--store", help="RunStore used when TABLE is omitted.")]
WhereOpt = Annotated[str | None, typer.Option("--where", help="Row filter, pandas query syntax.")]
MapOpt = Annotated[list[str] | None, typer.Option("--map", help="canonical=foreign column rename (repeatable).")]
DeriveOpt = Annotated[
    list[str] | None, typer.Option("--derive", help="column=expression computed with DataFrame.eval (repeatable).")
]


def _load(
    table: Path | None,
    store: Path,
    where: str | None,
    maps: list[str] | None,
    derive: list[str] | None,
    drop_highest: int = 0,
    target: str | None = None,
) -> Any:
    source = table if table is not None else store
    return api.load_table(
        source,
        where=where,
        column_map=api.parse_assignments(maps, "--map canonical=foreign"),
        derive=api.parse_assignments(derive, "--derive column=expression"),
        drop_highest=drop_highest,
        target=target,
    )


@app.command("laws")
def laws_cmd(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the registered laws with formula and inputs."""
    with user_errors():
        rows = api.list_laws()
        if as_json:
            emit_json({"laws": rows})
            return
        t = Table(title="mixlaw laws", show_lines=False)
        for col in ("name", "formula", "inputs", "citation"):
            t.add_column(col, overflow="fold")
        for r in rows:
            t.add_row(r["name"], r["formula"], ", ".join(r["inputs"]), r["citation"])
        out.print(t)


@app.command("fit")
def fit_cmd(
    table: TableArg = None,
    law: Annotated[str, typer.Option("--law", help="Registered law (see `mixlaw laws`).")] = "chinchilla",
    store: StoreOpt = Path("mixlaw.db"),
    where: WhereOpt = None,
    loss_column: Annotated[str, typer.Option("--loss-column", help="Target column.")] = "loss",
    n_starts: Annotated[int, typer.Option("--n-starts", help="Seeded random starts added to the law's grid.")] = 0,
    n_polish: Annotated[int, typer.Option("--n-polish", help="Best screened starts optimised to convergence.")] = 32,
    strategy: Annotated[
        str, typer.Option("--strategy", help="screen (grid + polish) or full (optimise all).")
    ] = "screen",
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples over runs (0 = none).")] = 0,
    random_state: Annotated[int | None, typer.Option("--random-state", help="Seed.")] = None,
    loss: Annotated[str, typer.Option("--loss", help="huber or l2.")] = "huber",
    delta: Annotated[float | None, typer.Option("--delta", help="Huber delta (default: the law's).")] = None,
    law_option: Annotated[list[str] | None, typer.Option("--law-option", help="Law option key=value.")] = None,
    maps: MapOpt = None,
    derive: DeriveOpt = None,
    drop_highest: Annotated[int, typer.Option("--drop-highest", help="Drop the K highest-target rows.")] = 0,
    out_path: Annotated[Path | None, typer.Option("--out", help="Write the fit as JSON here.")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write an HTML fit report here.")] = None,
    validate: Annotated[
        str | None, typer.Option("--validate", help="With --report: add held-out errors of this scheme.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Fit a registered law robustly (Huber on log residuals, batched multi-start) with optional bootstrap."""
    with user_errors():
        df = _load(table, store, where, maps, derive, drop_highest, loss_column)
        options = {k: _coerce(v) for k, v in api.parse_assignments(law_option, "--law-option key=value").items()}
        with _progress(not as_json and sys.stderr.isatty()) as progress:
            res = api.fit(
                df,
                law,
                target=loss_column,
                law_options=options,
                source=str(table or store),
                n_random_starts=n_starts,
                n_polish=n_polish,
                strategy=strategy,
                bootstrap=bootstrap,
                random_state=random_state,
                loss=loss,
                delta=delta,
                progress=progress,
            )
        if out_path is not None:
            out_path.write_text(res.to_json(indent=1))
        if validate is not None and report is None:
            raise api.InputError("expected --report PATH with --validate SCHEME")
        rep = api.fit_report(res, df, report, validate=validate) if report is not None else None
        if as_json:
            d = res.to_dict()
            d.pop("starts", None)
            if "bootstrap" in d:
                d["bootstrap"].pop("params", None)
            emit_json(d if rep is None else {**d, "report": rep})
        else:
            out.print(res.report())
            if out_path is not None:
                out.print(f"saved {out_path}")
            if rep is not None:
                out.print(f"report {rep['report']}")


@app.command("predict")
def predict_cmd(
    fit_json: Annotated[Path, typer.Argument(help="A fit saved with `mixlaw fit --out`.")],
    at: Annotated[str | None, typer.Option("--at", help="name=value[,name=value...]")] = None,
    table: Annotated[Path | None, typer.Option("--table", help="Table file or RunStore to predict.")] = None,
    where: WhereOpt = None,
    maps: MapOpt = None,
    derive: DeriveOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Predict with a saved fit at one point or at every row of a table (with per-run MAE / MRE)."""
    with user_errors():
        res = api.load_fit(fit_json)
        if at is not None:
            point = {k: float(v) for k, v in api.parse_assignments(at.split(","), "--at name=value").items()}
            result = api.predict(res, at=point)
        elif table is not None:
            df = _load(table, table, where, maps, derive)
            result = api.predict(res, table=df)
        else:
            raise api.InputError("expected --at name=value[,...] or --table TABLE")
        if as_json:
            emit_json(result)
        elif "predicted" in result:
            out.print(f"{res.law_name} {result['at']} → {result['predicted']:.6g}")
        else:
            t = Table(title=f"{res.law_name}: predicted vs observed {res.target}")
            for col in ("run_id", "mae", "mre"):
                t.add_column(col)
            for r in result.get("per_run", []):
                t.add_row(str(r["run_id"]), f"{r['mae']:.4g}", f"{100 * r['mre']:.3f} %")
            out.print(t)
            if "mae" in result:
                out.print(
                    f"overall MAE {result['mae']:.4g}, MRE {100 * result['mre']:.3f} % over {len(result['rows'])} rows"
                )


@app.command("validate")
def validate_cmd(
    table: TableArg = None,
    law: Annotated[str, typer.Option("--law", help="Registered law.")] = "chinchilla",
    scheme: Annotated[str, typer.Option("--scheme", help="leave-largest-out | rollout | leave-group-out")] = (
        "leave-largest-out"
    ),
    store: StoreOpt = Path("mixlaw.db"),
    where: WhereOpt = None,
    loss_column: Annotated[str, typer.Option("--loss-column", help="Target column.")] = "loss",
    size_column: Annotated[str, typer.Option("--size-column")] = "n_params",
    order_column: Annotated[str, typer.Option("--order-column", help="Rollout axis.")] = "tokens",
    group_column: Annotated[str | None, typer.Option("--group-column", help="leave-group-out key.")] = None,
    quantile: Annotated[float, typer.Option("--quantile", help="Rollout: fit below this quantile.")] = 0.75,
    law_option: Annotated[list[str] | None, typer.Option("--law-option", help="Law option key=value.")] = None,
    maps: MapOpt = None,
    derive: DeriveOpt = None,
    drop_highest: Annotated[int, typer.Option("--drop-highest")] = 0,
    random_state: Annotated[int | None, typer.Option("--random-state")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Fit on the smaller / earlier runs and report the held-out relative errors (per point and MRE)."""
    with user_errors():
        df = _load(table, store, where, maps, derive, drop_highest, loss_column)
        options = {k: _coerce(v) for k, v in api.parse_assignments(law_option, "--law-option key=value").items()}
        res = api.validate(
            df,
            law,
            scheme=scheme,
            target=loss_column,
            size_column=size_column,
            order_column=order_column,
            group_column=group_column,
            quantile=quantile,
            law_options=options,
            random_state=random_state,
        )
        if as_json:
            emit_json(res.to_dict())
            return
        t = Table(title=f"{law}: {scheme} validation of {loss_column}")
        for col in ("fold", "status", "n_fit", "n_held_out", "MRE", "max |rel err|"):
            t.add_column(col)
        for r in res.folds.to_dict(orient="records"):
            t.add_row(
                str(r["fold"]),
                str(r["status"]),
                str(r["n_fit"]),
                str(r["n_held_out"]),
                f"{100 * r['mre']:.3f} %",
                f"{100 * r['max_abs_rel_error']:.3f} %",
            )
        out.print(t)
        out.print(f"held-out MRE {100 * res.mre:.3f} % over {len(res.points)} points")


def _mount() -> None:
    """Attach the verbs of the other areas (each lives beside the code it drives)."""
    from mixlaw.runs import cli as runs_cli

    app.command("ingest")(runs_cli.ingest)
    app.command("runs")(runs_cli.runs)
    try:
        from mixlaw.decide import cmr_cli
    except ImportError:  # pragma: no cover - during development only
        cmr_cli = None  # type: ignore[assignment]
    if cmr_cli is not None and hasattr(cmr_cli, "cmr"):
        app.command("cmr")(cmr_cli.cmr)
    from mixlaw.decide import cpt_cli

    app.add_typer(cpt_cli.app, name="cpt")
    from mixlaw.probe import cli as probe_cli

    app.add_typer(probe_cli.app, name="probe")
    app.add_typer(probe_cli.corpora_app, name="corpora")


_mount()


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
