"""Engine verbs: ``mixlaw laws``, ``fit``, ``predict``, ``validate`` (each a thin call into :mod:`mixlaw.api`)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from mixlaw.cli._common import (
    JsonOpt,
    LawFileOpt,
    LawOpt,
    LawOptionOpt,
    LevelOpt,
    MaxMemoryOpt,
    StoreOpt,
    TableArg,
    check_file,
    console,
    emit_json,
    progress_bar,
    verb,
)
from mixlaw.cli._fit import fit_options
from mixlaw.cli._laws import check_law_name
from mixlaw.cli._table import (
    AllowMissingOpt,
    DeriveOpt,
    DropOpt,
    EveryOpt,
    FinalOpt,
    MapOpt,
    MetaOpt,
    SetOpt,
    StepsOpt,
    WhereOpt,
    load,
    table_kw,
)

__all__ = ["laws_cmd", "fit_cmd", "predict_cmd", "validate_cmd"]

LossColumnOpt = Annotated[str, typer.Option("--loss-column", help="Target column.")]
MaxIterOpt = Annotated[
    int | None, typer.Option("--max-iter", help="Iteration cap per start (default: run while the fit improves).")
]
ResampleOpt = Annotated[
    str,
    typer.Option(
        "--resample",
        help="Bootstrap scheme: auto (runs for curves, residuals where every run is one row) | runs | rows | "
        "residuals | parametric | sizes | wild (few runs: reweight each run's residuals).",
    ),
]
IntervalOpt = Annotated[str, typer.Option("--interval", help="confidence (the law) or prediction (a new point).")]
MethodOpt = Annotated[
    str, typer.Option("--method", help="Interval method: auto (calibrated if the fit has it) | bootstrap | calibrated.")
]


def _table(table: Path | None, store: Path, options: dict[str, Any], *extra: Any) -> Any:
    """The verb's table with the shared table options (:mod:`mixlaw.cli._table`), then ``--drop-highest``.

    Reading needs pandas only: a missing file or a bad option is reported before the fitting engine loads."""
    df = load(table if table is not None else store, needed=[extra[1]] if extra else [], **options)
    if extra and extra[0]:
        from mixlaw import api

        return api.load_table(df, drop_highest=extra[0], target=extra[1])
    return df


def _schedule_note(df: Any, law: Any) -> None:
    """``LR schedule of 5 run(s) without one taken from the logged lr ...`` on stderr (beside the table's other
    notes) when the law reads LR areas (a schedule-derived input) and some run's schedule came from its ``lr``."""
    note = df.attrs.get("schedule_note")
    if note and any(d.source == "schedule" for d in law.derived_inputs()):
        typer.echo(note, err=True)


@verb
def laws_cmd(
    law_file: LawFileOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    long: Annotated[bool, typer.Option("--long", help="Inputs, options and citations too (a wide table).")] = False,
) -> None:
    """List the registered laws with formula and inputs."""
    import sys

    from rich.table import Table

    from mixlaw import api

    api.load_law_files(law_file)
    rows = api.list_laws()
    if as_json:
        return emit_json({"laws": rows})
    if not sys.stdout.isatty():  # a pipe or a script: one plain line per law, never wrapped
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            opts = _options_cell(r["options"]).replace("\n", "; ")
            extra = f"  inputs: {_short_list(r['inputs'])}" + (f"  options: {opts}" if opts != "—" else "")
            typer.echo(f"{r['name']:<{width}}  {r['formula']}" + (f"{extra}  ({r['citation']})" if long else extra))
        return
    if not long:  # a terminal: name and formula, the details with --long
        t = Table(title="mixlaw laws (--long: inputs, options, citations)", show_lines=False)
        t.add_column("name", no_wrap=True, overflow="ellipsis")
        t.add_column("formula", overflow="fold")
        for r in rows:
            t.add_row(r["name"], r["formula"])
        return console().print(t)
    t = Table(title="mixlaw laws", show_lines=False)
    for col in ("name", "formula", "inputs", "options (--law-option name=value)", "citation"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["name"], r["formula"], _short_list(r["inputs"]), _options_cell(r["options"]), r["citation"])
    console().print(t)


def _short_list(items: list[str], keep: int = 6) -> str:
    """A long derived-input list (multi-power's 145 history columns) as its first entries and a count."""
    if len(items) <= keep:
        return ", ".join(items)
    return ", ".join(items[:keep]) + f", … ({len(items)} columns)"


def _options_cell(options: list[dict[str, Any]]) -> str:
    """``name=default: help`` per option; a required option shows ``(required)`` instead of a default."""
    cells = []
    for o in options:
        value = "(required)" if o["required"] else repr(o["default"])
        choices = f" {{{', '.join(map(str, o['choices']))}}}" if o.get("choices") else ""
        cells.append(f"{o['name']}={value}{choices}: {o['help']}")
    return "\n".join(cells) or "—"


@verb
def fit_cmd(
    law: LawOpt,
    table: TableArg = None,
    store: StoreOpt = Path("mixlaw.db"),
    where: WhereOpt = None,
    loss_column: LossColumnOpt = "loss",
    n_starts: Annotated[int, typer.Option("--n-starts", help="Seeded random starts added to the law's grid.")] = 0,
    n_polish: Annotated[int, typer.Option("--n-polish", help="Best screened starts optimised to convergence.")] = 32,
    strategy: Annotated[
        str, typer.Option("--strategy", help="screen (grid + polish) or full (optimise all).")
    ] = "screen",
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap resamples (0 = none).")] = 0,
    max_memory: MaxMemoryOpt = "4G",
    resample: ResampleOpt = "auto",
    max_iter: MaxIterOpt = None,
    random_state: Annotated[int | None, typer.Option("--random-state", help="Seed.")] = None,
    loss: Annotated[str, typer.Option("--loss", help="huber or l2.")] = "huber",
    delta: Annotated[float | None, typer.Option("--delta", help="Huber delta (default: the law's).")] = None,
    law_option: LawOptionOpt = None,
    law_file: LawFileOpt = None,
    maps: MapOpt = None,
    derive: DeriveOpt = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    allow_missing: AllowMissingOpt = False,
    meta: MetaOpt = None,
    drop_highest: Annotated[int, typer.Option("--drop-highest", help="Drop the K highest-target rows.")] = 0,
    out_path: Annotated[Path | None, typer.Option("--out", help="Write the fit as JSON here.")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write an HTML fit report here.")] = None,
    validate: Annotated[
        str | None, typer.Option("--validate", help="With --report: add held-out errors of this scheme.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit a registered law robustly (Huber on log residuals, batched multi-start) with optional bootstrap."""
    from mixlaw import limits

    limits.count(bootstrap, "--bootstrap", lo=0, hi=limits.MAX_BOOTSTRAP)
    memory_limit = limits.MemoryLimit(limits.parse_size(max_memory))  # before any work
    check_law_name(law, law_file)  # a typo is a one-line error before the engine loads
    from mixlaw.errors import InputError
    from mixlaw.safeio import atomic_write_text, check_output_path

    if validate is not None and report is None:
        raise InputError("expected --report PATH with --validate SCHEME")
    for path, option in ((out_path, "--out"), (report, "--report")):
        if path is not None:
            check_output_path(path, option)  # before the run, not after it
    df = _table(table, store, table_kw(locals()), drop_highest, loss_column)
    from mixlaw import api

    api.load_law_files(law_file)
    options = fit_options(
        loss=loss, delta=delta, n_starts=n_starts, n_polish=n_polish, strategy=strategy, bootstrap=bootstrap,
        resample=resample, max_iter=max_iter, random_state=random_state,
    )  # fmt: skip
    with progress_bar(not as_json and sys.stderr.isatty(), lines="fit") as progress:
        res = api.fit(
            df,
            law,
            options,
            target=loss_column,
            law_options=api.parse_options(law_option),
            source=str(table or store),
            progress=progress,
            memory_limit=memory_limit,  # the bootstrap's bound, checked before the point fit
        )
    _schedule_note(df, res.law)
    if out_path is not None:
        atomic_write_text(out_path, res.to_json(indent=1))  # a full disk leaves the previous fit whole
    rep = api.fit_report(res, df, report, validate=validate) if report is not None else None
    if as_json:
        summary = api.fit_summary(res)
        return emit_json(summary if rep is None else {**summary, "report": rep})
    console().print(res.report())
    if out_path is not None:
        console().print(f"saved {out_path}")
    if rep is not None:
        console().print(f"report {rep['report']}")


@verb
def predict_cmd(
    fit_json: Annotated[Path, typer.Argument(help="A fit saved with `mixlaw fit --out`.")],
    at: Annotated[str | None, typer.Option("--at", help="name=value[,name=value...]")] = None,
    table: Annotated[Path | None, typer.Option("--table", help="Table file or RunStore to predict.")] = None,
    where: WhereOpt = None,
    maps: MapOpt = None,
    derive: DeriveOpt = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    allow_missing: AllowMissingOpt = False,
    meta: MetaOpt = None,
    law_file: LawFileOpt = None,
    level: LevelOpt = 0.95,
    interval: IntervalOpt = "confidence",
    method: MethodOpt = "auto",
    as_json: JsonOpt = False,
) -> None:
    """Predict with a saved fit at one point or at every row of a table (with per-run MAE / MRE).

    Each prediction has its ``--level`` interval from the fit's bootstrap draws (``--interval prediction`` adds
    the residual noise)."""
    check_file(fit_json, "fit JSON")
    from mixlaw import api, limits

    limits.level(level)
    api.load_law_files(law_file)
    if at is not None:
        table_only = {"--where": where, "--map": maps, "--derive": derive, "--set": set_, "--drop": drop,
                      "--final": final, "--every": every, "--steps": steps, "--allow-missing": allow_missing}
        given = [k for k, v in table_only.items() if v]  # they act on a --table; with --at they did nothing
        if given:
            raise api.InputError(f"expected {', '.join(given)} only with --table (they filter or change a table's "
                                 "rows), got them with --at")  # fmt: skip
    res = api.load_fit(fit_json)
    if at is not None:
        point = {k: float(v) for k, v in api.parse_assignments(at.split(","), "--at name=value").items()}
        result = api.predict(res, at=point, level=level, interval=interval, method=method)
    elif table is not None:
        df = _table(table, table, table_kw(locals()))
        result = api.predict(res, table=df, level=level, interval=interval, method=method)
    else:
        raise api.InputError("expected --at name=value[,...] or --table TABLE")
    if as_json:
        return emit_json(result)
    _print_prediction(res, result)


def _print_prediction(res: Any, result: dict[str, Any]) -> None:
    from rich.table import Table

    pct = f"{100 * result['level']:g}% {result['interval']}"
    tail = f" ({result['n_failed']}/{result['n_resamples']} resamples unusable)" if result["n_resamples"] else ""
    if result.get("interval_status", "ok").startswith("weak"):
        tail += " — WEAK: the intervals rest on the usable resamples only"
    if "predicted" in result:
        iv = "" if result["lo"] is None else f"   {pct} [{result['lo']:.6g}, {result['hi']:.6g}]{tail}"
        console().print(f"{res.law_name} {result['at']} → {result['predicted']:.6g}{iv}")
        if result.get("extrapolation"):
            console().print(f"extrapolates: {result['extrapolation']['text']}")
        if result.get("confidence_note"):
            lv = f"{100 * result['level']:g}%"
            console().print(
                f"{result['confidence_note']}: {lv} prediction [{result['prediction_lo']:.6g}, "
                f"{result['prediction_hi']:.6g}]"
            )
        if "note" in result:
            console().print(result["note"])
        if result.get("calibration"):
            console().print(f"interval {result['calibration']}")
        if result.get("interval_note"):
            console().print(f"interval {result['interval_note']}")
        for w in result.get("warnings", []):
            console().print(f"warning: {w}")
        return
    t = Table(title=f"{res.law_name}: predicted {res.target} with {pct} intervals{tail}")
    extra = any(r.get("extrapolation") for r in result["rows"])
    for col in ("run_id", "step", "predicted", "lo", "hi", "observed", *(["extrapolation"] if extra else [])):
        t.add_column(col)
    for r in result["rows"]:
        cells = [r["predicted"], r["lo"], r["hi"], r["observed"]]
        ex = [(r["extrapolation"] or {}).get("text", "")] if extra else []
        t.add_row(str(r["run_id"]), str(r["step"]), *("—" if v is None else f"{v:.6g}" for v in cells), *ex)
    console().print(t)
    if "note" in result:
        console().print(result["note"])
    if result.get("confidence_note"):
        console().print(result["confidence_note"])
    if result.get("calibration"):
        console().print(f"{result.get('n_calibrated')} of {len(result['rows'])} intervals {result['calibration']}")
    if result.get("interval_note"):
        console().print(result["interval_note"])
    for w in result.get("warnings", []):
        console().print(f"warning: {w}")
    if result.get("per_run"):
        t = Table(title=f"{res.law_name}: predicted vs observed {res.target}")
        for col in ("run_id", "mae", "mre"):
            t.add_column(col)
        for r in result["per_run"]:
            t.add_row(str(r["run_id"]), f"{r['mae']:.4g}", f"{100 * r['mre']:.3f} %")
        console().print(t)
    if "mae" in result:
        n = len(result["rows"])
        console().print(f"overall MAE {result['mae']:.4g}, MRE {100 * result['mre']:.3f} % over {n} rows")


@verb
def validate_cmd(
    law: LawOpt,
    table: TableArg = None,
    scheme: Annotated[str, typer.Option("--scheme", help="leave-largest-out | rollout | leave-group-out")] = (
        "leave-largest-out"
    ),
    store: StoreOpt = Path("mixlaw.db"),
    where: WhereOpt = None,
    loss_column: LossColumnOpt = "loss",
    size_column: Annotated[str, typer.Option("--size-column")] = "n_params",
    order_column: Annotated[str, typer.Option("--order-column", help="Rollout axis.")] = "tokens",
    group_column: Annotated[str | None, typer.Option("--group-column", help="leave-group-out key.")] = None,
    quantile: Annotated[float, typer.Option("--quantile", help="Rollout: fit below this quantile.")] = 0.75,
    law_option: LawOptionOpt = None,
    law_file: LawFileOpt = None,
    maps: MapOpt = None,
    derive: DeriveOpt = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    allow_missing: AllowMissingOpt = False,
    meta: MetaOpt = None,
    drop_highest: Annotated[int, typer.Option("--drop-highest")] = 0,
    random_state: Annotated[int | None, typer.Option("--random-state")] = None,
    holdout: Annotated[str | None, typer.Option("--holdout", help="Hold out the rows matching this filter.")] = None,
    largest: Annotated[int | None, typer.Option("--largest", help="Hold out the K largest sizes.")] = None,
    loss: Annotated[str, typer.Option("--loss", help="huber or l2.")] = "huber",
    max_iter: MaxIterOpt = None,
    bootstrap: Annotated[
        int | None, typer.Option("--bootstrap", help="Resamples per fold for intervals (default 200 with --coverage).")
    ] = None,
    resample: ResampleOpt = "auto",
    level: LevelOpt = 0.95,
    interval: IntervalOpt = "prediction",
    method: MethodOpt = "auto",
    coverage: Annotated[
        bool, typer.Option("--coverage", help="Share of held-out points inside 50/80/95% intervals.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Fit on the smaller / earlier runs and report the held-out relative errors (per point and MRE).

    With ``--bootstrap`` every held-out point gets an interval; ``--coverage`` measures how many fall inside."""
    check_law_name(law, law_file)
    df = _table(table, store, table_kw(locals()), drop_highest, loss_column)
    from mixlaw import api

    api.load_law_files(law_file)
    options = fit_options(loss=loss, bootstrap=(200 if coverage else 0) if bootstrap is None else bootstrap,
                          resample=resample, max_iter=max_iter, random_state=random_state)  # fmt: skip
    res = api.validate(
        df,
        law,
        options,
        scheme=scheme,
        target=loss_column,
        size_column=size_column,
        order_column=order_column,
        group_column=group_column,
        quantile=quantile,
        law_options=api.parse_options(law_option),
        holdout=holdout,
        largest=largest,
        level=level,
        interval=interval,
        coverage=coverage,
        method=method,
    )
    _schedule_note(df, api.build_law(law, api.parse_options(law_option)))
    if as_json:
        return emit_json(res.to_dict())
    _print_validation(res, f"{law}: {res.scheme} validation of {loss_column}")


def _print_validation(res: Any, title: str) -> None:
    from rich.table import Table

    t = Table(title=title)
    for col in ("fold", "status", "n_fit", "n_held_out", "MRE", "max |rel err|"):
        t.add_column(col)
    for r in res.folds.to_dict(orient="records"):
        mre, worst = f"{100 * r['mre']:.3f} %", f"{100 * r['max_abs_rel_error']:.3f} %"
        t.add_row(str(r["fold"]), str(r["status"]), str(r["n_fit"]), str(r["n_held_out"]), mre, worst)
    console().print(t)
    console().print(f"held-out MRE {100 * res.mre:.3f} % over {len(res.points)} points")
    console().print(res.interval_note())
    for w in res.warnings:
        console().print(f"warning: {w}")
    far = [str(e) for e in res.points.get("extrapolation", []) if isinstance(e, str) and e]
    if far:
        console().print(f"{len(far)} of {len(res.points)} held-out points extrapolate (e.g. {far[-1]})")
    if res.coverage is not None:
        c = res.coverage
        cells = ", ".join(
            f"{100 * lv['level']:g}%: {100 * lv['coverage']:.0f}% inside (mean width {100 * lv['mean_rel_width']:.2f}%)"
            for lv in c["levels"]
        )
        console().print(
            f"coverage of {c['interval']} intervals over {c['n']} held-out points: {cells}; MAE {c['mae']:.4g}"
        )
    if "lo" in res.points and len(res.points) <= 40:
        pct = f"{100 * res.level:g}% {res.interval}"
        recs = res.points.to_dict(orient="records")
        for r in recs:
            lo, hi = r.get("lo"), r.get("hi")
            band = (
                f" {pct} \\[{lo:.5g}, {hi:.5g}] ({r.get('method') or 'bootstrap'}, {res.resample})"
                if lo is not None and math.isfinite(float(lo))
                else ""
            )
            console().print(
                f"  {r['fold']}: observed {r['observed']:.5g}, predicted {r['predicted']:.5g}{band}"
                + (f"  extrapolates {r['extrapolation']}" if r.get("extrapolation") else "")
            )
