"""The ``mixlaw cmr`` job behind the thin CLI verb: check the options, load the runs, decide, write the report,
print the answer (:func:`run_cmr_job`, :func:`emit_job`). Module-level imports stay light (typer, stdlib)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from mixlaw.errors import InputError, MixlawError
from mixlaw.limits import MemoryLimit

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CmrJob", "CmrJobOptions", "check_table", "emit_job", "load_table", "parse_lambda", "run_cmr_job"]

#: Parameters per resample refit of the CMR bootstrap's memory estimate (:func:`mixlaw.limits.bootstrap`): the
#: general and domain loss laws of one size (the joint CPT fit has at most 8).
CMR_PARAMETERS = 8


@dataclass
class CmrJob:
    """What one ``mixlaw cmr`` call decided: per-domain decisions, schedule-aware results, untrained-share queries."""

    decisions: dict[str, Any] = field(default_factory=dict)
    sched_results: list[Any] | None = None
    decision_error: str | None = None
    queries: list[dict[str, Any]] = field(default_factory=list)
    level: float = 0.95

    @property
    def single(self) -> Any:
        return next(iter(self.decisions.values())) if len(self.decisions) == 1 else None


def check_table(path: Path) -> None:
    """The runs table must exist: checked before the decision's libraries load (a typo answers at once)."""
    if not path.exists():
        raise InputError(f"no such file: {path}")


def load_table(
    path: Path,
    where: str | None = None,
    *,
    include_schedule: bool = False,
    options: Any = None,
    evals: tuple[str, ...] = (),
    base_eval: str | None = None,
) -> pd.DataFrame:
    """A RunTable from a CSV/JSONL/Parquet file or a RunStore (``.db``), filtered by a safe row filter.

    ``include_schedule`` adds each stored run's LR schedule (a ``schedule`` column) when reading a RunStore; a
    file keeps its own ``schedule`` column when it has one. ``evals`` (eval-set names, ``loss_`` optional) are
    the columns the decision needs: logging steps without them are left out (``attrs["notes"]`` says how
    many). ``base_eval`` (``general=2.31,legal=2.87``) adds the base checkpoint's losses as a ``phase = pt`` run."""
    check_table(path)
    if options is not None:  # the shared table options (mixlaw.runs.select): --map, --set, --drop, --final, ...
        from mixlaw.api.runs import load_runs

        frame = load_runs(path, options, include_schedule=include_schedule, allow_nan=True, needed=evals,
                          eval_names=True)  # fmt: skip
    elif path.suffix in (".db", ".sqlite", ".sqlite3"):
        from mixlaw.api.runs import RunStore

        with RunStore(str(path)) as store:
            frame = store.to_frame(include_schedule=include_schedule)
    else:
        from mixlaw.api.runs import read_table

        # NaN allowed here: a multi-domain export leaves cells of other domains empty; the columns the decision
        # reads are validated by it, with their row and column.
        frame = read_table(path, allow_nan=True)
    if where:
        from mixlaw.api.runs import filter_rows

        try:
            frame = filter_rows(frame, where)
        except Exception as exc:  # pandas raises many types for a bad expression
            raise InputError(f"--where {where!r} is not a valid filter: {exc}") from None
        if frame.empty:
            raise InputError(f"--where {where!r} leaves no rows")
    if base_eval is not None:
        from mixlaw.api.runs import add_base_eval

        frame = add_base_eval(frame, base_eval)
    return frame


def parse_lambda(text: str) -> float:
    if text.strip().lower() in ("inf", "infinity", "∞"):
        return math.inf
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"--lambda must be a positive number or 'inf', got {text!r}") from None
    if not v > 0:
        raise InputError(f"--lambda must be a positive number or 'inf', got {text!r}")
    return v


@dataclass(frozen=True)
class CmrJobOptions:
    """Every option of ``mixlaw cmr``, by name, checked once (the verb builds it; :func:`run_cmr_job` reads it).

    Groups: what to read (``table``, ``where``, ``base_eval``, the columns), the decision's settings (``epsilon``,
    ``lagrange`` — a number or ``inf`` —, ``budget_tokens``, ``ratio_law``, ``c_method``, ``pin_zero``, ``level``,
    ``max_iter``), its intervals (``bootstrap``, ``seed``, ``max_memory``), what else to compute
    (``relative_to_control``, ``validate``, ``query_ratio``), the schedule-aware CMR (``law``, ``schedule``,
    ``budget_steps``, ``tokens_per_step``, ``paper_decision``) and the output (``report``, ``as_json``)."""

    table: Path
    general_eval: str
    domain_eval: tuple[str, ...]
    ratio_column: str | None = None
    size_column: str | None = None
    where: str | None = None
    base_eval: str | None = None
    epsilon: float = 0.05
    lagrange: str = "inf"
    budget_tokens: float | None = None
    ratio_law: str = "auto"
    c_method: str = "fit"
    pin_zero: bool = False
    level: float = 0.95
    max_iter: int | None = None
    bootstrap: int = 0
    seed: int = 0
    max_memory: MemoryLimit | None = None
    relative_to_control: bool = False
    validate: bool = False
    query_ratio: tuple[float, ...] = ()
    law: str = "cmr"
    schedule: str | None = None
    budget_steps: int | None = None
    tokens_per_step: float | None = None
    paper_decision: bool = True
    report: Path | None = None
    as_json: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "domain_eval", tuple(self.domain_eval))
        object.__setattr__(self, "query_ratio", tuple(self.query_ratio or ()))
        if not 0 < self.level < 1:
            raise InputError(f"--level {self.level}: expected a number in (0, 1)")
        if self.c_method not in ("fit", "corr_grid"):
            raise InputError(f"--c-method must be 'fit' or 'corr_grid', got {self.c_method!r}")
        parse_lambda(self.lagrange)
        if self.law == "cmr" and (self.schedule is not None or self.budget_steps is not None
                                  or self.tokens_per_step is not None):  # fmt: skip
            raise InputError("--schedule, --budget-steps and --tokens-per-step need --law cpt_replay (schedule-aware)")
        if self.law != "cmr" and self.schedule is None:
            raise InputError(f"--law {self.law} needs --schedule SPEC (e.g. 'wsd:peak=3e-4,steps=150,decay=30')")
        if self.law != "cmr" and len(set(self.domain_eval)) > 1:
            raise InputError(f"--law {self.law} takes one --domain-eval")


def run_cmr_job(
    o: CmrJobOptions, *, make_progress: Callable[[int, bool], Any], table_options: Any = None
) -> CmrJob:
    """Load the runs, run the decision(s) and write the report, as ``o`` says (:class:`CmrJobOptions`;
    ``o.max_memory`` bounds the bootstrap before any fitting; ``table_options``: the shared table options).

    ``make_progress(total, quiet)`` builds the progress display (callable with a count, and ``close()``)."""
    from mixlaw.api.cmr import (
        CMRSettings,
        Schedule,
        critical_mixture_ratio_by_domain,
        resolve_schedule_law,
        schedule_cmr_by_size,
    )
    from mixlaw.options import SolverOptions

    sched_results: list[Any] | None = None
    decision_error: str | None = None
    progress: Any = None
    try:
        law = o.law if o.law == "cmr" else resolve_schedule_law(o.law)
        if o.ratio_law != "auto":
            from mixlaw.api.cmr import resolve_ratio_law

            resolve_ratio_law(o.ratio_law)
        lam = parse_lambda(o.lagrange)
        solver = SolverOptions(max_iter=o.max_iter)
        sched = None if o.schedule is None else Schedule.parse(o.schedule)
        frame = load_table(o.table, o.where, include_schedule=sched is not None, options=table_options,
                           evals=(o.general_eval, *o.domain_eval), base_eval=o.base_eval)  # fmt: skip
        for note in (*frame.attrs.get("notes", ()), *filter(None, [frame.attrs.get("schedule_note")])):
            typer.echo(f"cmr: {note}", err=True)
        from mixlaw import limits

        # Every size's resamples refit the general and domain trajectories: bounded before any fitting.
        limits.bootstrap(o.bootstrap, len(frame) * (1 + len(set(o.domain_eval))), CMR_PARAMETERS, o.max_memory)
        dec_budget = o.budget_tokens
        if sched is not None:
            sched_results = schedule_cmr_by_size(
                frame, sched, general_eval=o.general_eval, domain_eval=o.domain_eval[0],
                ratio_column=o.ratio_column, size_column=o.size_column, epsilon=o.epsilon,
                budget_steps=o.budget_steps, budget_tokens=o.budget_tokens, tokens_per_step=o.tokens_per_step,
                bootstrap=o.bootstrap, random_state=o.seed, law=law, solver=solver, level=o.level,
            )  # fmt: skip
            budgets = {r.budget_tokens for r in sched_results}
            if dec_budget is None and len(budgets) == 1 and None not in budgets:
                dec_budget = budgets.pop()  # the constant-LR decision at the same budget, side by side
        domains = list(dict.fromkeys(o.domain_eval))
        scol = o.size_column or ("n_params" if "n_params" in frame.columns else None)
        if scol is not None and scol not in frame.columns:
            raise InputError(f"expected --size-column to name a column of the table, got {scol!r}; columns: "
                             f"{', '.join(map(str, list(frame.columns)[:20]))}")  # fmt: skip
        n_sizes = int(frame[scol].nunique()) if scol is not None else 1
        progress = make_progress(len(domains) * n_sizes * max(o.bootstrap, 1), o.as_json or sched is not None)

        def run_decision() -> dict[str, Any]:  # domains side by side in worker processes (both cores)
            settings = CMRSettings(epsilon=o.epsilon, lagrange_mult=lam, budget_tokens=dec_budget,
                                   ratio_law=o.ratio_law, c_method=o.c_method, pin_zero=o.pin_zero, solver=solver,
                                   level=o.level)  # fmt: skip
            return critical_mixture_ratio_by_domain(
                frame.drop(columns=["schedule"], errors="ignore"), general_eval=o.general_eval, domain_evals=domains,
                settings=settings, ratio_column=o.ratio_column, size_column=o.size_column, bootstrap=o.bootstrap,
                random_state=o.seed, relative_to_control=o.relative_to_control, validate=o.validate,
                progress=progress,
            )  # fmt: skip

        decisions: dict[str, Any] = {}
        if sched_results is None:
            decisions = run_decision()
        elif not o.paper_decision:
            decision_error = "not run (--no-paper-decision)"
        else:
            try:  # the CMR paper's decision when the data allow it; the schedule-aware answer stands alone
                decisions = run_decision()
            except MixlawError as exc:
                decision_error = str(exc).replace("\n", " ")
        single = next(iter(decisions.values())) if len(decisions) == 1 else None
        if o.report is not None:
            from mixlaw.report.cmr_page import cmr_report
            from mixlaw.report.cmr_schedule_page import schedule_cmr_report

            if sched_results is not None:
                page = schedule_cmr_report(
                    sched_results, decision=single, decision_error=decision_error,
                    title=f"Critical mixture ratio under {sched.spec() if sched else ''} — {o.table.name}",
                    source=str(o.table),
                )  # fmt: skip
            else:
                page = cmr_report(single if single is not None else decisions,
                                  title=f"Critical mixture ratio — {o.table.name}", source=str(o.table))  # fmt: skip
            from mixlaw.safeio import atomic_write_text

            atomic_write_text(o.report, page)  # temp file + rename: never half a page
    finally:
        if progress is not None:
            progress.close()
    queries = [s.assess_ratio(q, o.epsilon) | {"domain": d} for d, dec in decisions.items() for s in dec.sizes
               for q in o.query_ratio or []]  # fmt: skip
    return CmrJob(decisions=decisions, sched_results=sched_results, decision_error=decision_error, queries=queries,
                  level=o.level)  # fmt: skip


def emit_job(job: CmrJob, *, epsilon: float, as_json: bool, report: Path | None) -> None:
    """Print a job's answer: the tables (or one JSON object) and where the report went."""
    import json

    from mixlaw.report.cmr_text import emit_schedule, json_default, print_decision

    decisions, sched_results, single, queries = job.decisions, job.sched_results, job.single, job.queries
    decision_error = job.decision_error
    if sched_results is not None:
        emit_schedule(sched_results, single, decision_error, queries, epsilon, as_json, level=job.level)
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
    from mixlaw.fmt import fmt_size

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
