"""``mixlaw cmr``: the critical mixture ratio of continual pre-training runs, with intervals and a report.

Mount in the main CLI with ``app.command("cmr")(cmr.cmr)`` (``cmr`` is an alias of :func:`cmr_command`;
``app`` is a one-command Typer for tests). Forwards to :func:`mixlaw.decide.cmr.critical_mixture_ratio`; user
errors print one line on stderr and exit 1.

Example (the shipped Data Mixing Laws CPT runs)::

    mixlaw cmr examples/mixinglaws_ct/runs.csv --general-eval general --domain-eval python \\
        --bootstrap 50 --report cmr.html

``--law cpt_replay --schedule SPEC`` (a RunStore or a table with a ``schedule`` column, PT and CPT runs linked by
``parent_run``) fits the replay law (arXiv:2505.07796, Eq. 8) on the general loss per size and gives the CMR under
that CPT schedule (:func:`schedule_cmr_by_size`), beside the constant-LR CMR of the same fit and the CMR paper's
decision on the runs::

    mixlaw cmr mixlaw.db --general-eval general --domain-eval code --law cpt_replay \\
        --schedule "wsd:peak=3e-4,steps=150,warmup=5,decay=30" --bootstrap 50 --json
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mixlaw.cli._common import DecisionMaxIterOpt, LevelOpt, MaxMemoryOpt, verb
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
)

app = typer.Typer(help="Critical mixture ratio of CPT runs (CMR scaling law).", add_completion=False)

class _Progress:
    """Sizes × resamples: a rich bar on a terminal, else one line per finished size on stderr."""

    def __init__(self, total: int | None, quiet: bool) -> None:
        self.t0 = time.perf_counter()
        self.bar: Any = None
        self.quiet = quiet
        if not quiet and sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), transient=True)  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task("CMR (sizes × resamples)", total=total)

    def __call__(self, domain: str, size: Any, n: int) -> None:
        from mixlaw.fmt import fmt_size

        if self.bar is not None:
            self.bar.update(self.task, advance=max(n, 1), description=f"CMR {domain} {fmt_size(size)}")
        elif not self.quiet:
            typer.echo(f"cmr: {domain} size {fmt_size(size)} done ({n} resamples, "
                       f"{time.perf_counter() - self.t0:.1f} s)", err=True)  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@verb
def cmr_command(
    table: Annotated[Path, typer.Argument(help="Runs: CSV/JSONL/Parquet RunTable or a RunStore .db")],
    general_eval: Annotated[str, typer.Option("--general-eval", help="General loss column (loss_ optional)")],
    domain_eval: Annotated[
        list[str],
        typer.Option("--domain-eval", help="Domain loss column (loss_ optional); repeat for domains side by side"),
    ],
    ratio_column: Annotated[
        str | None, typer.Option("--ratio-column", help="Domain share column (default w_<domain>)")
    ] = None,
    size_column: Annotated[str | None, typer.Option("--size-column", help="Model size column")] = None,
    epsilon: Annotated[float, typer.Option("--epsilon", help="Tolerated general-loss rise (nats/token)")] = 0.05,
    lagrange: Annotated[str, typer.Option("--lambda", help="Lagrange multiplier λ, or 'inf' (peak)")] = "inf",
    budget_tokens: Annotated[
        float | None,
        typer.Option("--budget-tokens", help="CPT budget in tokens (default: the runs' median final tokens)"),
    ] = None,
    ratio_law: Annotated[
        str,
        typer.Option("--ratio-law", help="auto (best fit at the budget) | power | exp | a registered ratio law"),
    ] = "auto",
    c_method: Annotated[str, typer.Option("--c-method", help="exp law floor: fit | corr_grid")] = "fit",
    pin_zero: Annotated[bool, typer.Option("--pin-zero", help="Force ΔL(0) = 0 in the increment laws")] = False,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Residual-bootstrap resamples (0: none)")] = 0,
    max_memory: MaxMemoryOpt = "4G",
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed")] = 0,
    report: Annotated[Path | None, typer.Option("--report", help="Write a self-contained HTML report")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    where: Annotated[
        str | None, typer.Option("--where", help="Row filter (columns, literals, comparisons, and/or, log/exp, ...)")
    ] = None,
    query_ratio: Annotated[
        list[float] | None,
        typer.Option("--query-ratio", help="Assess an untrained domain share (ratio law + inverse CMR law); repeat"),
    ] = None,
    law: Annotated[
        str,
        typer.Option(
            "--law",
            help="cmr: the CMR paper's constant-LR decision (default); cpt_replay: the CMR under --schedule from a "
            "fitted replay law, beside the constant-LR CMR",
        ),
    ] = "cmr",
    schedule: Annotated[
        str | None,
        typer.Option("--schedule", help="CPT LR schedule spec for --law cpt_replay, e.g. wsd:peak=3e-4,steps=150"),
    ] = None,
    budget_steps: Annotated[
        int | None,
        typer.Option("--budget-steps", help="CPT budget in steps for --law cpt_replay (default: the schedule's)"),
    ] = None,
    tokens_per_step: Annotated[
        float | None,
        typer.Option("--tokens-per-step", help="Tokens per CPT step (default: inferred from tokens/step)"),
    ] = None,
    paper_decision: Annotated[
        bool,
        typer.Option(
            "--paper-decision/--no-paper-decision",
            help="With --law cpt_replay: also run the CMR paper's constant-LR decision on the runs (side by side)",
        ),
    ] = True,
    relative_to_control: Annotated[
        bool,
        typer.Option("--relative-to-control", help="Increments relative to the R = 0 control run of each size"),
    ] = False,
    validate: Annotated[
        bool,
        typer.Option("--validate", help="Held-out checks: refit without the largest size and each interior ratio"),
    ] = False,
    level: LevelOpt = 0.95,
    max_iter: DecisionMaxIterOpt = None,
    maps: MapOpt = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    derive: DeriveOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    allow_missing: AllowMissingOpt = False,
    meta: MetaOpt = None,
    base_eval: Annotated[
        str | None,
        typer.Option(
            "--base-eval",
            help="The base checkpoint's losses (T = 0) when the CPT logs have no step-0 eval: general=2.31,legal=2.87",
        ),
    ] = None,
) -> None:
    """Largest domain share of the CPT mix that keeps the general loss within tolerance, per model size."""
    from mixlaw.cli._table import table_options
    from mixlaw.cli.cmr_job import CmrJobOptions, check_table, emit_job, run_cmr_job

    check_table(table)  # before the decision's libraries load
    from mixlaw import limits
    from mixlaw.safeio import check_output_path

    limits.level(level)
    limits.count(bootstrap, "--bootstrap", lo=0, hi=limits.MAX_BOOTSTRAP)  # 1e8 was an OOM kill at 17.8 GB
    if report is not None:
        check_output_path(report, "--report")
    options = CmrJobOptions(
        table=table, general_eval=general_eval, domain_eval=tuple(domain_eval), ratio_column=ratio_column,
        size_column=size_column, where=where, base_eval=base_eval, epsilon=epsilon, lagrange=lagrange,
        budget_tokens=budget_tokens, ratio_law=ratio_law, c_method=c_method, pin_zero=pin_zero, level=level,
        max_iter=max_iter, bootstrap=bootstrap, seed=seed, max_memory=limits.MemoryLimit(limits.parse_size(max_memory)),
        relative_to_control=relative_to_control, validate=validate, query_ratio=tuple(query_ratio or ()), law=law,
        schedule=schedule, budget_steps=budget_steps, tokens_per_step=tokens_per_step, paper_decision=paper_decision,
        report=report, as_json=as_json,
    )  # fmt: skip
    shared = table_options(meta=meta, maps=maps, set_=set_, drop=drop, derive=derive, final=final, every=every,
                           steps=steps, allow_missing=allow_missing)  # fmt: skip
    job = run_cmr_job(options, table_options=shared, make_progress=lambda total, quiet: _Progress(total, quiet=quiet))
    emit_job(job, epsilon=epsilon, as_json=as_json, report=report)


app.command("cmr")(cmr_command)

#: The name the main CLI mounts (``app.command("cmr")(cmr.cmr)``).
cmr = cmr_command
