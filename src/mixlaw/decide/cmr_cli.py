"""``mixlaw cmr``: the critical mixture ratio of continual pre-training runs, with intervals and a report.

Mount in the main CLI with ``app.command("cmr")(cmr_cli.cmr)`` (``cmr`` is an alias of :func:`cmr_command`;
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

import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mixlaw.errors import InputError, MixlawError

if TYPE_CHECKING:
    import pandas as pd

app = typer.Typer(help="Critical mixture ratio of CPT runs (CMR scaling law).", add_completion=False)

_LAZY = {  # re-exported names that live in heavier modules (imported on first use: `mixlaw --help` stays fast)
    "SizeScheduleCMR": "mixlaw.decide.cmr.schedule",
    "schedule_cmr_by_size": "mixlaw.decide.cmr.schedule",
    "infer_tokens_per_step": "mixlaw.decide.cmr.schedule",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}".replace("\n", " "), err=True)
    raise typer.Exit(1)


def load_table(path: Path, where: str | None = None, *, include_schedule: bool = False) -> pd.DataFrame:
    """A RunTable from a CSV/JSONL/Parquet file or a RunStore (``.db``), filtered by a safe row filter.

    ``include_schedule`` adds each stored run's LR schedule (a ``schedule`` column) when reading a RunStore; a
    file keeps its own ``schedule`` column when it has one."""
    if not path.exists():
        raise InputError(f"no such file: {path}")
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        from mixlaw.runs.store import RunStore

        with RunStore(str(path)) as store:
            frame = store.to_frame(include_schedule=include_schedule)
    else:
        from mixlaw.runs.io import read_table

        # NaN allowed here: a multi-domain export leaves cells of other domains empty; the columns the decision
        # reads are validated by it, with their row and column.
        frame = read_table(path, allow_nan=True)
    if where:
        from mixlaw.expr import filter_rows

        try:
            frame = filter_rows(frame, where)
        except Exception as exc:  # pandas raises many types for a bad expression
            raise InputError(f"--where {where!r} is not a valid filter: {exc}") from None
        if frame.empty:
            raise InputError(f"--where {where!r} leaves no rows")
    return frame


def _parse_lambda(text: str) -> float:
    if text.strip().lower() in ("inf", "infinity", "∞"):
        return math.inf
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"--lambda must be a positive number or 'inf', got {text!r}") from None
    if not v > 0:
        raise InputError(f"--lambda must be a positive number or 'inf', got {text!r}")
    return v


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
        from mixlaw.report.fmt import fmt_size

        if self.bar is not None:
            self.bar.update(self.task, advance=max(n, 1), description=f"CMR {domain} {fmt_size(size)}")
        elif not self.quiet:
            typer.echo(f"cmr: {domain} size {fmt_size(size)} done ({n} resamples, "
                       f"{time.perf_counter() - self.t0:.1f} s)", err=True)  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


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
) -> None:
    """Largest domain share of the CPT mix that keeps the general loss within tolerance, per model size."""
    from mixlaw.decide.cmr import critical_mixture_ratio_by_domain
    from mixlaw.decide.cmr.output import emit_schedule, json_default, print_decision
    from mixlaw.decide.cmr.schedule import resolve_schedule_law, schedule_cmr_by_size
    from mixlaw.schedules import Schedule

    sched_results: list[Any] | None = None
    decision_error: str | None = None
    progress: _Progress | None = None
    try:
        if law != "cmr":
            law = resolve_schedule_law(law)
        if law == "cmr" and (schedule is not None or budget_steps is not None or tokens_per_step is not None):
            raise InputError("--schedule, --budget-steps and --tokens-per-step need --law cpt_replay (schedule-aware)")
        if law != "cmr" and schedule is None:
            raise InputError(f"--law {law} needs --schedule SPEC (e.g. 'wsd:peak=3e-4,steps=150,decay=30')")
        if law != "cmr" and len(set(domain_eval)) > 1:
            raise InputError(f"--law {law} takes one --domain-eval")
        if ratio_law != "auto":
            from mixlaw.decide.cmr import resolve_ratio_law

            resolve_ratio_law(ratio_law)
        if c_method not in ("fit", "corr_grid"):
            raise InputError(f"--c-method must be 'fit' or 'corr_grid', got {c_method!r}")
        lam = _parse_lambda(lagrange)
        sched = None if schedule is None else Schedule.parse(schedule)
        frame = load_table(table, where, include_schedule=sched is not None)
        dec_budget = budget_tokens
        if sched is not None:
            sched_results = schedule_cmr_by_size(
                frame, sched, general_eval=general_eval, domain_eval=domain_eval[0], ratio_column=ratio_column,
                size_column=size_column, epsilon=epsilon, budget_steps=budget_steps, budget_tokens=budget_tokens,
                tokens_per_step=tokens_per_step, bootstrap=bootstrap, random_state=seed, law=law,
            )  # fmt: skip
            budgets = {r.budget_tokens for r in sched_results}
            if dec_budget is None and len(budgets) == 1 and None not in budgets:
                dec_budget = budgets.pop()  # the constant-LR decision at the same budget, side by side
        domains = list(dict.fromkeys(domain_eval))
        scol = size_column or ("n_params" if "n_params" in frame.columns else None)
        n_sizes = int(frame[scol].nunique()) if scol is not None else 1
        progress = _Progress(len(domains) * n_sizes * max(bootstrap, 1), quiet=as_json or sched is not None)

        def run_decision() -> dict[str, Any]:  # domains side by side in worker processes (both cores)
            return critical_mixture_ratio_by_domain(
                frame.drop(columns=["schedule"], errors="ignore"), general_eval=general_eval, domain_evals=domains,
                ratio_column=ratio_column, size_column=size_column, epsilon=epsilon, lagrange_mult=lam,
                budget_tokens=dec_budget, ratio_law=ratio_law, c_method=c_method, pin_zero=pin_zero,
                bootstrap=bootstrap, random_state=seed, relative_to_control=relative_to_control,
                validate=validate, progress=progress,
            )  # fmt: skip

        decisions: dict[str, Any] = {}
        if sched_results is None:
            decisions = run_decision()
        elif not paper_decision:
            decision_error = "not run (--no-paper-decision)"
        else:
            try:  # the CMR paper's decision when the data allow it; the schedule-aware answer stands alone
                decisions = run_decision()
            except MixlawError as exc:
                decision_error = str(exc).replace("\n", " ")
        progress.close()
        single = next(iter(decisions.values())) if len(decisions) == 1 else None
        if report is not None:
            from mixlaw.report.html import cmr_report, schedule_cmr_report

            if sched_results is not None:
                page = schedule_cmr_report(
                    sched_results, decision=single, decision_error=decision_error,
                    title=f"Critical mixture ratio under {sched.spec() if sched else ''} — {table.name}",
                    source=str(table),
                )  # fmt: skip
            else:
                page = cmr_report(single if single is not None else decisions,
                                  title=f"Critical mixture ratio — {table.name}", source=str(table))  # fmt: skip
            report.write_text(page)
    except MixlawError as exc:
        if progress is not None:
            progress.close()
        _fail(str(exc))
        return
    except OSError as exc:
        _fail(f"{exc.__class__.__name__}: {exc}")
        return
    queries = [s.assess_ratio(q, epsilon) | {"domain": d} for d, dec in decisions.items() for s in dec.sizes
               for q in query_ratio or []]  # fmt: skip
    if sched_results is not None:
        emit_schedule(sched_results, single, decision_error, queries, epsilon, as_json)
        if report is not None and not as_json:
            typer.echo(f"report written to {report}")
        return
    if as_json:
        if single is not None:
            obj = single.to_dict()
        else:
            obj = {"domains": {d: dec.to_dict() for d, dec in decisions.items()}}
            keys = ("n_params", "budget_tokens", "cmr", "ci", "status")
            obj["comparison"] = [{"domain": d, **{k: c[k] for k in keys}} for d, o in obj["domains"].items()
                                 for c in o["cmr"]]  # fmt: skip
        if queries:
            obj["queries"] = queries
        typer.echo(json.dumps(obj, default=json_default, allow_nan=False))
        return
    from mixlaw.report.fmt import fmt_size

    for d, dec in decisions.items():
        if single is None:
            typer.echo(f"\n== domain {d}")
        print_decision(dec, d)
    for q in queries:
        t0 = f"{q['t0_tokens']:.4g}" if q["t0_tokens"] is not None else "—"
        typer.echo(f"R = {q['ratio']:g} ({q['domain']}, size {fmt_size(q['n_params'])}): T0 = {t0} tokens, "
                   f"{'feasible' if q['feasible'] else 'not feasible'} — {q['reason']}"
                   + (" [extrapolated]" if q["extrapolated"] else ""))  # fmt: skip
    if report is not None:
        typer.echo(f"report written to {report}")


app.command("cmr")(cmr_command)

#: The name the main CLI mounts (``app.command("cmr")(cmr_cli.cmr)``).
cmr = cmr_command
