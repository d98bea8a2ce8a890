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
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import pandas as pd
import typer

from mixlaw.errors import BoundaryWarning, ConvergenceWarning, InputError, MixlawError
from mixlaw.schedules import Schedule

if TYPE_CHECKING:
    from mixlaw.decide.cpt import ScheduleCMR
    from mixlaw.fit import FitResult

app = typer.Typer(help="Critical mixture ratio of CPT runs (CMR scaling law).", add_completion=False)


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}".replace("\n", " "), err=True)
    raise typer.Exit(1)


def load_table(path: Path, where: str | None = None, *, include_schedule: bool = False) -> pd.DataFrame:
    """A RunTable from a CSV/JSONL/Parquet file or a RunStore (``.db``), filtered by a pandas query.

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


def _fmt_tokens(v: float | None) -> str:
    from mixlaw.report.html import _tok  # one formatter for the table and the report

    return _tok(v)


def _fmt_size(v: Any) -> str:
    import numbers

    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return _fmt_tokens(float(v))
    return str(v)


def _print_rich(decision: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the reasons into 80 columns
        console = Console(width=160)
    s0 = decision.settings
    lam = s0["lagrange_mult"]
    t = Table(
        title=f"Critical mixture ratio — domain share of the CPT mix (ε = {s0['epsilon']:g}, λ = {lam}, "
        f"ratio law {s0['ratio_law']})"
    )
    for col in ("model size", "budget (tokens)", "CMR", "95% CI", "from", "tolerance boundary", "status"):
        t.add_column(col)
    for s in decision.sizes:
        ci = f"[{s.ci[0]:.3f}, {s.ci[1]:.3f}]" if s.ci else "—"
        tb = f"{s.tolerance_boundary:.3f}" if s.tolerance_boundary is not None else s.tolerance_status
        style = "green" if s.status == "ok" else "yellow"
        t.add_row(
            _fmt_size(s.n_params),
            _fmt_tokens(s.budget_tokens),
            f"{s.cmr:.3f}" if s.cmr is not None else "—",
            ci,
            s.cmr_source,
            tb,
            f"[{style}]{s.status}[/{style}]",
        )
    console.print(t)
    r = Table(title="Per ratio (T0: turning point of the general loss; feasible needs T0 ≤ budget and ΔL_gen ≤ ε)")
    for col in ("size", "ratio", "T0 (tokens)", "ΔL_gen @budget", "ΔL_dom @budget", "R² gen/dom", "feasible", "reason"):
        r.add_column(col)
    for s in decision.sizes:
        for row in s.ratios:
            g, d = row["dloss_general_at_budget"], row["dloss_domain_at_budget"]
            r2 = "/".join(f"{v:.3f}" if v is not None else "—" for v in (row["r2_general"], row["r2_domain"]))
            r.add_row(
                _fmt_size(s.n_params),
                f"{row['ratio']:.4g}",
                _fmt_tokens(row["t0_tokens"]),
                f"{g:+.4f}" if g is not None else "—",
                f"{d:+.4f}" if d is not None else "—",
                r2,
                "[green]yes[/green]" if row["feasible"] else "[red]no[/red]",
                row["reason"],
            )
    console.print(r)
    for s in decision.sizes:
        for note in s.notes[:8]:
            console.print(f"[dim]note ({_fmt_size(s.n_params)}): {note}[/dim]")
        if len(s.notes) > 8:
            console.print(f"[dim]… {len(s.notes) - 8} more notes (see --json or --report)[/dim]")


# ---------------------------------------------------------------------- schedule-aware CMR (--law cpt_replay)
LAWS = ("cmr", "cpt_replay")


@dataclass
class SizeScheduleCMR:
    """The schedule-aware CMR of one model size: the ``cpt_replay`` fit of the general loss and
    :func:`mixlaw.decide.cpt.schedule_aware_cmr` under the user's CPT schedule."""

    n_params: Any
    schedule: Schedule
    budget_steps: int | None
    budget_tokens: float | None
    tokens_per_step: float | None
    pt_run: str | None
    pt_schedule: str | None
    branch_step: int | None
    n_runs: int
    n_points: int
    trained_shares: list[float]
    result: ScheduleCMR | None = None
    fit: FitResult | None = None
    status: str = "ok"
    notes: list[str] = field(default_factory=list)

    @property
    def cmr(self) -> float | None:
        return None if self.result is None else self.result.cmr

    @property
    def ci(self) -> tuple[float, float] | None:
        return None if self.result is None else self.result.interval

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        fit = None
        if self.fit is not None:
            fit = {
                "law": self.fit.law_name,
                "target": self.fit.target,
                "params": dict(self.fit.params),
                "status": self.fit.status.value,
                "objective": self.fit.objective,
                "n_points": self.fit.n_points,
                "metrics": dict(self.fit.metrics),
                "n_bootstrap": self.fit.n_bootstrap,
                "n_failed_resamples": self.fit.n_failed_resamples,
                "bootstrap_unit": self.fit.bootstrap_unit,
            }
        return {
            "n_params": _size_value(self.n_params),
            "budget_steps": self.budget_steps,
            "budget_tokens": self.budget_tokens,
            "tokens_per_step": self.tokens_per_step,
            "schedule": self.schedule.spec(),
            "epsilon": None if r is None else r.epsilon,
            "cmr": self.cmr,
            "ci": None if self.ci is None else list(self.ci),
            "constant_lr_cmr": None if r is None else r.constant_lr_cmr,
            "constant_lr_ci": None if r is None or r.constant_lr_interval is None else list(r.constant_lr_interval),
            "status": self.status,
            "n_boot": 0 if r is None else r.n_boot,
            "n_boot_without_cmr": 0 if r is None else r.n_boot_none,
            "pt_run": self.pt_run,
            "pt_schedule": self.pt_schedule,
            "branch_step": self.branch_step,
            "n_runs": self.n_runs,
            "n_points": self.n_points,
            "trained_shares": self.trained_shares,
            "fit": fit,
            "notes": list(self.notes),
        }


def _size_value(v: Any) -> Any:
    import numbers

    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return v


def _has_parent(col: pd.Series) -> np.ndarray:
    return np.array([isinstance(v, str) and v != "" for v in col], dtype=bool)


def infer_tokens_per_step(rows: pd.DataFrame) -> float | None:
    """Tokens per optimiser step from the ``tokens``/``step`` columns (median of the per-run slopes between
    consecutive evaluations, so token counts that continue the parent's count work too); ``None`` when the
    table cannot tell."""
    if "tokens" not in rows.columns or "step" not in rows.columns:
        return None
    slopes = []
    for _, g in rows.groupby(rows["run_id"].astype(str)):
        g = g.sort_values("step")
        ds = np.diff(pd.to_numeric(g["step"], errors="coerce").to_numpy(dtype=np.float64))
        dt = np.diff(pd.to_numeric(g["tokens"], errors="coerce").to_numpy(dtype=np.float64))
        ok = np.isfinite(ds) & np.isfinite(dt) & (ds > 0) & (dt > 0)
        slopes.extend((dt[ok] / ds[ok]).tolist())
    return float(np.median(slopes)) if slopes else None


def schedule_cmr_by_size(
    table: pd.DataFrame,
    schedule: Schedule | str,
    *,
    general_eval: str,
    domain_eval: str,
    ratio_column: str | None = None,
    size_column: str | None = None,
    epsilon: float = 0.05,
    budget_steps: int | None = None,
    budget_tokens: float | None = None,
    tokens_per_step: float | None = None,
    bootstrap: int = 0,
    random_state: int | None = 0,
    level: float = 0.95,
) -> list[SizeScheduleCMR]:
    """CMR under a CPT LR schedule per model size, from a ``cpt_replay`` fit of the general loss.

    The RunTable needs each run's schedule (``schedule`` column: a RunStore read with
    ``to_frame(include_schedule=True)``, or a file with that column), PT runs and CPT runs linked by
    ``parent_run``, and the domain share of each CPT mix (``ratio_column``, default ``w_<domain>``). The law's
    replay share is ``1 − domain share`` (PT rows: 1). Per size, the LR areas of every evaluation are computed
    from the schedules (:func:`mixlaw.schedules.add_schedule_features`), rows with zero forward area are left
    out, ``cpt_replay`` is fitted on the general loss through :func:`mixlaw.fit.fit_law` (``bootstrap``
    resamples of runs), and :func:`mixlaw.decide.cpt.schedule_aware_cmr` gives the largest domain share whose
    predicted general-loss rise at the budget stays ≤ ``epsilon``, with its bootstrap interval and the
    constant-LR CMR of the same fit beside it.

    The budget is ``budget_steps``, else ``budget_tokens / tokens_per_step``, else the schedule's length;
    ``tokens_per_step`` defaults to the table's tokens per step (CPT runs).
    """
    from mixlaw.decide.cmr import resolve_columns
    from mixlaw.decide.cpt import schedule_aware_cmr
    from mixlaw.errors import FitError
    from mixlaw.fit import fit_law
    from mixlaw.schedules import add_schedule_features, as_schedule

    sched = schedule if isinstance(schedule, Schedule) else Schedule.parse(schedule)
    if "schedule" not in table.columns:
        raise InputError(
            "--law cpt_replay needs each run's LR schedule: give a RunStore .db (schedules are stored per run) "
            "or a table with a 'schedule' column",
            column="schedule",
        )
    if "parent_run" not in table.columns or not _has_parent(table["parent_run"]).any():
        raise InputError("--law cpt_replay needs CPT runs linked to their PT run by 'parent_run'", column="parent_run")
    if budget_steps is not None and budget_steps < 1:
        raise InputError(f"--budget-steps must be >= 1, got {budget_steps}")
    if tokens_per_step is not None and not tokens_per_step > 0:
        raise InputError(f"--tokens-per-step must be > 0, got {tokens_per_step}")
    if budget_tokens is not None and not budget_tokens > 0:
        raise InputError(f"--budget-tokens must be > 0, got {budget_tokens}")
    cols = resolve_columns(table, general_eval, domain_eval, ratio_column, size_column)
    frame = table.reset_index(drop=True).copy()
    cpt_row = _has_parent(frame["parent_run"])
    dname = cols.domain[len("loss_") :] if cols.domain.startswith("loss_") else cols.domain
    if "domain" in frame.columns:  # a CPT run tagged with another domain is not a run of this one
        tag = frame["domain"]
        keep = ~cpt_row | tag.isna() | (tag.astype(str) == "") | (tag.astype(str) == dname)
        frame, cpt_row = frame[keep].reset_index(drop=True), cpt_row[keep.to_numpy()]
    share = pd.to_numeric(frame[cols.ratio], errors="coerce").to_numpy(dtype=np.float64)
    share = np.where(~cpt_row & ~np.isfinite(share), 0.0, share)  # PT rows: general data only
    bad = np.flatnonzero(~np.isfinite(share) | (share < 0) | (share > 1))
    if bad.size:
        raise InputError(
            f"expected a domain share in [0, 1] for run '{frame['run_id'].iloc[bad[0]]}', got {share[bad[0]]!r}",
            column=cols.ratio,
        )
    frame["_replay"] = 1.0 - share
    frame = add_schedule_features(frame, replay_column="_replay")
    y = pd.to_numeric(frame[cols.general], errors="coerce").to_numpy(dtype=np.float64)
    usable = (frame["s1_pt"].to_numpy() + frame["s1_cpt"].to_numpy() > 0) & np.isfinite(y)
    sizes: list[tuple[Any, np.ndarray]]
    if cols.size is None:
        sizes = [(None, np.ones(len(frame), dtype=bool))]
    else:
        sv = frame[cols.size]
        sizes = [(v, (sv == v).to_numpy()) for v in sorted(sv.dropna().unique())]
    run_sched = frame.groupby(frame["run_id"].astype(str))["schedule"].first()
    all_runs = set(table["run_id"].astype(str))
    out: list[SizeScheduleCMR] = []
    for k, (size, mask) in enumerate(sizes):
        rows = frame[mask & usable]
        cpt_mask = _has_parent(rows["parent_run"])
        cpt_rows = rows[cpt_mask]
        if cpt_rows.empty:  # e.g. a PT run whose CPT runs have not started: said, not dropped silently
            out.append(
                SizeScheduleCMR(
                    n_params=size,
                    schedule=sched,
                    budget_steps=None,
                    budget_tokens=None,
                    tokens_per_step=tokens_per_step,
                    pt_run=None,
                    pt_schedule=None,
                    branch_step=None,
                    n_runs=int(rows["run_id"].nunique()),
                    n_points=len(rows),
                    trained_shares=[],
                    status="no CPT runs with usable evaluations",
                )
            )
            continue
        notes: list[str] = []
        parents = cpt_rows.groupby(cpt_rows["run_id"].astype(str))["parent_run"].first()
        pt_run = str(parents.value_counts().index[0])
        if parents.nunique() > 1:
            notes.append(f"CPT runs branch from {parents.nunique()} PT runs; the plan starts from '{pt_run}'")
        if pt_run not in all_runs or pt_run not in run_sched.index or run_sched[pt_run] is None:
            raise InputError(f"PT run '{pt_run}' (parent_run of the CPT runs) is not in the table with a schedule")
        pt_sched = as_schedule(run_sched[pt_run])
        branch = None
        if "parent_step" in cpt_rows.columns:
            ps = pd.to_numeric(cpt_rows["parent_step"], errors="coerce").dropna()
            branch = int(ps.mode().iloc[0]) if len(ps) else None
        tps = tokens_per_step if tokens_per_step is not None else infer_tokens_per_step(cpt_rows)
        if budget_steps is not None:
            steps = int(budget_steps)
        elif budget_tokens is not None:
            if tps is None:
                raise InputError("--budget-tokens needs --tokens-per-step (the table has no tokens/step to infer it)")
            steps = int(round(budget_tokens / tps))
        else:
            steps = sched.total_steps
        tokens = float(steps * tps) if tps is not None else budget_tokens
        shares = sorted({round(1.0 - float(v), 6) for v in cpt_rows["_replay"]})
        entry = SizeScheduleCMR(
            n_params=size,
            schedule=sched,
            budget_steps=steps,
            budget_tokens=tokens,
            tokens_per_step=tps,
            pt_run=pt_run,
            pt_schedule=pt_sched.spec(),
            branch_step=branch,
            n_runs=int(rows["run_id"].nunique()),
            n_points=len(rows),
            trained_shares=shares,
            notes=notes,
        )
        out.append(entry)
        if len(shares) < 2:
            notes.append(f"one trained domain share ({shares[0]:g}): the replay dependence is not determined")
        cpt_specs = {as_schedule(v).spec() for v in cpt_rows.groupby("run_id")["schedule"].first().dropna()}
        if len(cpt_specs) == 1 and sched.spec() not in cpt_specs:
            notes.append(
                f"every CPT run uses one schedule ({next(iter(cpt_specs))}): the CPT annealing term is fitted "
                "without CPT schedule variation, so the CMR under another schedule leans on the law's form"
            )
        longest = int(cpt_rows["cpt_step"].max())
        if steps > longest:
            notes.append(f"budget {steps} steps is beyond the longest CPT run ({longest} steps): extrapolated")
        if "lr" in rows.columns:
            max_lr = float(pd.to_numeric(rows["lr"], errors="coerce").max())
            if np.isfinite(max_lr) and max_lr > 0 and sched.peak_lr > 1.05 * max_lr:
                notes.append(
                    f"schedule peak LR {sched.peak_lr:.3g} exceeds the largest logged LR {max_lr:.3g}: "
                    "peak-LR extrapolation"
                )
        try:  # fit warnings (convergence, bounds, failed resamples) become notes of this size
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                warnings.simplefilter("always", BoundaryWarning)
                fit = fit_law(
                    "cpt_replay",
                    rows,
                    target=cols.general,
                    bootstrap=bootstrap,
                    random_state=None if random_state is None else random_state + k,
                )
        except FitError as exc:
            entry.status = f"fit failed: {exc}"
            continue
        for w in caught:
            if issubclass(w.category, (ConvergenceWarning, BoundaryWarning)):
                notes.append(str(w.message))
            else:  # not ours to swallow
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        entry.fit = fit
        if fit.status.value != "converged":
            notes.append(f"cpt_replay fit status: {fit.status.value}")
        res = schedule_aware_cmr(
            fit,
            sched,
            epsilon,
            budget_steps=steps,
            pt_schedule=pt_sched,
            branch_step=branch,
            n_params=None if size is None else float(size),
            level=level,
        )
        entry.result = res
        entry.status = res.status
        if res.cmr is not None and shares and res.cmr > max(shares) + 1e-9:
            notes.append(f"CMR {res.cmr:.3f} is above the largest trained share {max(shares):g}: extrapolated")
        if res.n_boot_none:
            notes.append(f"{res.n_boot_none} of {res.n_boot} bootstrap fits have no feasible share")
    if all(r.pt_run is None for r in out):
        raise InputError("no model size has CPT runs with usable evaluations for --law cpt_replay")
    return out


def _print_schedule_rich(results: list[SizeScheduleCMR], decision: Any, epsilon: float) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    sched = results[0].schedule.spec()
    t = Table(title=f"Schedule-aware CMR — domain share of the CPT mix under {sched} (ε = {epsilon:g}, cpt_replay)")
    for col in ("model size", "budget (steps)", "budget (tokens)", "CMR", "95% CI", "constant LR (law)",
                "95% CI ", "CMR paper (data)", "status"):  # fmt: skip
        t.add_column(col)
    paper = {}
    if decision is not None:
        paper = {_size_value(s.n_params): s for s in decision.sizes}
    for r in results:
        res = r.result
        c = res.constant_lr_cmr if res is not None else None
        civ = res.constant_lr_interval if res is not None else None
        ps = paper.get(_size_value(r.n_params))
        style = "green" if r.status == "ok" else "yellow"
        t.add_row(
            _fmt_size(r.n_params) if r.n_params is not None else "—",
            str(r.budget_steps),
            _fmt_tokens(r.budget_tokens),
            f"{r.cmr:.3f}" if r.cmr is not None else "—",
            f"[{r.ci[0]:.3f}, {r.ci[1]:.3f}]" if r.ci else "—",
            f"{c:.3f}" if c is not None else "—",
            f"[{civ[0]:.3f}, {civ[1]:.3f}]" if civ else "—",
            f"{ps.cmr:.3f}" if ps is not None and ps.cmr is not None else "—",
            f"[{style}]{r.status}[/{style}]",
        )
    console.print(t)
    for r in results:
        for note in r.notes:
            console.print(f"[dim]note ({_fmt_size(r.n_params)}): {note}[/dim]")


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
    ratio_law: Annotated[str, typer.Option("--ratio-law", help="power | exp")] = "power",
    c_method: Annotated[str, typer.Option("--c-method", help="exp law floor: fit | corr_grid")] = "fit",
    pin_zero: Annotated[bool, typer.Option("--pin-zero", help="Force ΔL(0) = 0 in the increment laws")] = False,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Residual-bootstrap resamples (0: none)")] = 0,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed")] = 0,
    report: Annotated[Path | None, typer.Option("--report", help="Write a self-contained HTML report")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    where: Annotated[str | None, typer.Option("--where", help="pandas query applied to the rows")] = None,
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
) -> None:
    """Largest domain share of the CPT mix that keeps the general loss within tolerance, per model size."""
    from mixlaw.decide.cmr import critical_mixture_ratio_by_domain

    sched_results: list[SizeScheduleCMR] | None = None
    decision_error: str | None = None
    try:
        if law not in LAWS:
            raise InputError(f"--law must be one of {', '.join(LAWS)}, got {law!r}")
        if law == "cmr" and (schedule is not None or budget_steps is not None or tokens_per_step is not None):
            raise InputError("--schedule, --budget-steps and --tokens-per-step need --law cpt_replay")
        if law == "cpt_replay" and schedule is None:
            raise InputError("--law cpt_replay needs --schedule SPEC (e.g. 'wsd:peak=3e-4,steps=150,decay=30')")
        if law == "cpt_replay" and len(set(domain_eval)) > 1:
            raise InputError("--law cpt_replay takes one --domain-eval")
        if ratio_law not in ("power", "exp"):
            raise InputError(f"--ratio-law must be 'power' or 'exp', got {ratio_law!r}")
        if c_method not in ("fit", "corr_grid"):
            raise InputError(f"--c-method must be 'fit' or 'corr_grid', got {c_method!r}")
        lam = _parse_lambda(lagrange)
        sched = None if schedule is None else Schedule.parse(schedule)
        frame = load_table(table, where, include_schedule=sched is not None)
        dec_budget = budget_tokens
        if sched is not None:
            sched_results = schedule_cmr_by_size(
                frame,
                sched,
                general_eval=general_eval,
                domain_eval=domain_eval[0],
                ratio_column=ratio_column,
                size_column=size_column,
                epsilon=epsilon,
                budget_steps=budget_steps,
                budget_tokens=budget_tokens,
                tokens_per_step=tokens_per_step,
                bootstrap=bootstrap,
                random_state=seed,
            )
            budgets = {r.budget_tokens for r in sched_results}
            if dec_budget is None and len(budgets) == 1 and None not in budgets:
                dec_budget = budgets.pop()  # the constant-LR decision at the same budget, side by side

        def run_decision() -> dict[str, Any]:
            return critical_mixture_ratio_by_domain(
                frame.drop(columns=["schedule"], errors="ignore"),
                general_eval=general_eval,
                domain_evals=list(dict.fromkeys(domain_eval)),
                ratio_column=ratio_column,
                size_column=size_column,
                epsilon=epsilon,
                lagrange_mult=lam,
                budget_tokens=dec_budget,
                ratio_law=ratio_law,  # type: ignore[arg-type]
                c_method=c_method,  # type: ignore[arg-type]
                pin_zero=pin_zero,
                bootstrap=bootstrap,
                random_state=seed,
            )

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
        single = next(iter(decisions.values())) if len(decisions) == 1 else None
        if report is not None:
            from mixlaw.report.html import cmr_report, schedule_cmr_report

            if sched_results is not None:
                page = schedule_cmr_report(
                    sched_results,
                    decision=single,
                    decision_error=decision_error,
                    title=f"Critical mixture ratio under {sched.spec() if sched else ''} — {table.name}",
                    source=str(table),
                )
            else:
                page = cmr_report(
                    single if single is not None else decisions,
                    title=f"Critical mixture ratio — {table.name}",
                    source=str(table),
                )
            report.write_text(page)
    except MixlawError as exc:
        _fail(str(exc))
        return
    except OSError as exc:
        _fail(f"{exc.__class__.__name__}: {exc}")
        return
    queries = [
        s.assess_ratio(q, epsilon) | {"domain": d}
        for d, dec in decisions.items()
        for s in dec.sizes
        for q in query_ratio or []
    ]
    if sched_results is not None:
        _emit_schedule(sched_results, single, decision_error, queries, epsilon, as_json)
        if report is not None and not as_json:
            typer.echo(f"report written to {report}")
        return
    if as_json:
        if single is not None:
            obj = single.to_dict()
            if queries:
                obj["queries"] = queries
        else:
            obj = {"domains": {d: dec.to_dict() for d, dec in decisions.items()}}
            obj["comparison"] = [
                {"domain": d, **{k: c[k] for k in ("n_params", "budget_tokens", "cmr", "ci", "status")}}
                for d, o in obj["domains"].items()
                for c in o["cmr"]
            ]
            if queries:
                obj["queries"] = queries
        typer.echo(json.dumps(obj, default=_json_default, allow_nan=False))
    else:
        for d, dec in decisions.items():
            if single is None:
                typer.echo(f"\n== domain {d}")
            _print_rich(dec)
        for q in queries:
            t0 = f"{q['t0_tokens']:.4g}" if q["t0_tokens"] is not None else "—"
            typer.echo(
                f"R = {q['ratio']:g} ({q['domain']}, size {_fmt_size(q['n_params'])}): T0 = {t0} tokens, "
                f"{'feasible' if q['feasible'] else 'not feasible'} — {q['reason']}"
                + (" [extrapolated]" if q["extrapolated"] else "")
            )
        if report is not None:
            typer.echo(f"report written to {report}")


def _emit_schedule(
    results: list[SizeScheduleCMR],
    decision: Any,
    decision_error: str | None,
    queries: list[dict[str, Any]],
    epsilon: float,
    as_json: bool,
) -> None:
    """Output of ``--law cpt_replay``: the schedule-aware CMR per size beside the constant-LR decision."""
    paper = {} if decision is None else {_size_value(s.n_params): s for s in decision.sizes}
    if as_json:
        obj: dict[str, Any] = decision.to_dict() if decision is not None else {"cmr": []}
        rows = []
        for r in results:
            d = r.to_dict()
            ps = paper.get(_size_value(r.n_params))
            d["cmr_paper"] = (
                None
                if ps is None
                else {"cmr": ps.cmr, "ci": None if ps.ci is None else list(ps.ci), "status": ps.status}
            )
            rows.append(d)
        obj["schedule_cmr"] = rows
        obj["law"] = "cpt_replay"
        obj["constant_lr_decision"] = (
            {"status": "ok"}
            if decision_error is None
            else {"status": "skipped" if decision_error.startswith("not run") else "failed", "error": decision_error}
        )
        if queries:
            obj["queries"] = queries
        typer.echo(json.dumps(obj, default=_json_default, allow_nan=False))
        return
    _print_schedule_rich(results, decision, epsilon)
    if decision is not None:
        typer.echo("\nConstant-LR decision (CMR paper) on the same runs:")
        _print_rich(decision)
    else:
        typer.echo(f"constant-LR decision (CMR paper) not available: {decision_error}")
    for q in queries:
        t0 = f"{q['t0_tokens']:.4g}" if q["t0_tokens"] is not None else "—"
        typer.echo(
            f"R = {q['ratio']:g} (size {_fmt_size(q['n_params'])}): T0 = {t0} tokens, "
            f"{'feasible' if q['feasible'] else 'not feasible'} — {q['reason']}"
        )


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o) if math.isfinite(float(o)) else None
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


app.command("cmr")(cmr_command)

#: The name the main CLI mounts (``app.command("cmr")(cmr_cli.cmr)``).
cmr = cmr_command
