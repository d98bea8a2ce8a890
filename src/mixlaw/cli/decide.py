"""``mixlaw decide NAME TABLE``: run any registered decision; ``mixlaw decisions``: list them.

Every decision on the contract (:mod:`mixlaw.decide.contract`) — built in, from an installed package's
``mixlaw.decisions`` entry point, or from ``--decision-file`` — gets this verb, ``--json`` and ``--report`` with no
other change. A thin layer over :func:`mixlaw.api.decide`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from mixlaw.cli._common import DeriveOpt, JsonOpt, MapOpt, WhereOpt, emit_json, progress_bar, verb
from mixlaw.cli._table import AllowMissingOpt, DropOpt, EveryOpt, FinalOpt, MetaOpt, SetOpt, StepsOpt, load

__all__ = ["decide_cmd", "decisions_cmd"]

DecisionFileOpt = Annotated[
    list[Path] | None,
    typer.Option("--decision-file", help="Python file defining and registering a Decision (runs its code).",
                 show_default=False),
]  # fmt: skip


@verb
def decide_cmd(
    name: Annotated[str, typer.Argument(help="Registered decision (see `mixlaw decisions`).")],
    table: Annotated[Path | None, typer.Argument(help="Run table (CSV, JSONL, Parquet, …) or RunStore (*.db).")] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="Decision option key=value (repeatable).")
    ] = None,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Resamples behind every interval (0: none).")] = 0,
    level: Annotated[float, typer.Option("--level", help="Interval level.")] = 0.95,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the resampling.")] = 0,
    max_iter: Annotated[int | None, typer.Option("--max-iter", help="Iteration cap of every fit.")] = None,
    maps: MapOpt = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    where: WhereOpt = None,
    derive: DeriveOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    allow_missing: AllowMissingOpt = False,
    meta: MetaOpt = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write an HTML report here.")] = None,
    decision_file: DecisionFileOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Run a registered decision on a run table (`mixlaw decisions`).

    It prints the answers with their intervals, the status and the reasons behind it."""
    from mixlaw import api
    from mixlaw.options import IntervalOptions, SolverOptions

    intervals = IntervalOptions(level=level, resamples=bootstrap, seed=seed)  # validated before any work
    solver = SolverOptions(max_iter=max_iter)
    if report is not None:
        from mixlaw.safeio import check_output_path

        check_output_path(report, "--report")  # a directory or a missing parent: one line before any work
    api.load_decision_files(decision_file)
    opts = api.parse_assignments(option, "--option key=value")
    frame = None
    if table is not None:
        frame = load(table, maps=maps, set_=set_, drop=drop, where=where, derive=derive, final=final, every=every,
                     steps=steps, allow_missing=allow_missing, meta=meta)  # fmt: skip
    with _progress(bootstrap) as progress:
        result = api.decide(frame, name, opts, intervals=intervals, solver=solver, progress=progress)
    if report is not None:
        api.decision_report(result, report)
    if json_out:
        emit_json(result.to_dict())
        return
    from mixlaw.report.decision_page import decision_text

    typer.echo(decision_text(result))
    if report is not None:
        typer.echo(f"report: {report}")


@contextmanager
def _progress(total: int) -> Iterator[Callable[[str, int, int], None] | None]:
    """A bar on a terminal; off a terminal (CI, a log file) a line on stderr at every tenth of the resamples."""
    if total <= 0:
        yield None
        return
    if sys.stderr.isatty():
        with progress_bar(True) as bar:
            yield bar
        return
    step = max(1, total // 10)

    def line(stage: str, done: int, n: int) -> None:
        if done % step == 0 or done == n:
            typer.echo(f"decide: {done}/{n} {stage}", err=True)

    yield line


@verb
def decisions_cmd(decision_file: DecisionFileOpt = None, json_out: JsonOpt = False) -> None:
    """List the registered decisions and their options."""
    from mixlaw import api

    api.load_decision_files(decision_file)
    rows = api.list_decisions()
    if json_out:
        emit_json({"decisions": rows})
        return
    for r in rows:
        typer.echo(f"{r['name']}: {r['summary']}")
        opts = ", ".join(f"{o['name']}={o['default']!r}" for o in r["options"])
        typer.echo(f"    options: {opts or 'none'}")
