"""``mixlaw cmr``: the critical mixture ratio of continual pre-training runs, with intervals and a report.

Mount in the main CLI with ``app.command("cmr")(cmr_cli.cmr)`` (``cmr`` is an alias of :func:`cmr_command`;
``app`` is a one-command Typer for tests). Forwards to :func:`mixlaw.decide.cmr.critical_mixture_ratio`; user
errors print one line on stderr and exit 1.

Example (the shipped Data Mixing Laws CPT runs)::

    mixlaw cmr examples/mixinglaws_ct/runs.csv --general-eval general --domain-eval python \\
        --bootstrap 50 --report cmr.html
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from mixlaw.errors import InputError, MixlawError

app = typer.Typer(help="Critical mixture ratio of CPT runs (CMR scaling law).", add_completion=False)


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}".replace("\n", " "), err=True)
    raise typer.Exit(1)


def load_table(path: Path, where: str | None = None) -> pd.DataFrame:
    """A RunTable from a CSV/JSONL/Parquet file or a RunStore (``.db``), filtered by a pandas query."""
    if not path.exists():
        raise InputError(f"no such file: {path}")
    if path.suffix in (".db", ".sqlite", ".sqlite3"):
        from mixlaw.runs.store import RunStore

        frame = RunStore(str(path)).to_frame()
    else:
        from mixlaw.runs.io import read_table

        # NaN allowed here: a multi-domain export leaves cells of other domains empty; the columns the decision
        # reads are validated by it, with their row and column.
        frame = read_table(path, allow_nan=True)
    if where:
        try:
            frame = frame.query(where)
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
    if v is None:
        return "—"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.3g}"


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
) -> None:
    """Largest domain share of the CPT mix that keeps the general loss within tolerance, per model size."""
    from mixlaw.decide.cmr import critical_mixture_ratio_by_domain

    try:
        if ratio_law not in ("power", "exp"):
            raise InputError(f"--ratio-law must be 'power' or 'exp', got {ratio_law!r}")
        if c_method not in ("fit", "corr_grid"):
            raise InputError(f"--c-method must be 'fit' or 'corr_grid', got {c_method!r}")
        frame = load_table(table, where)
        decisions = critical_mixture_ratio_by_domain(
            frame,
            general_eval=general_eval,
            domain_evals=list(dict.fromkeys(domain_eval)),
            ratio_column=ratio_column,
            size_column=size_column,
            epsilon=epsilon,
            lagrange_mult=_parse_lambda(lagrange),
            budget_tokens=budget_tokens,
            ratio_law=ratio_law,  # type: ignore[arg-type]
            c_method=c_method,  # type: ignore[arg-type]
            pin_zero=pin_zero,
            bootstrap=bootstrap,
            random_state=seed,
        )
        single = next(iter(decisions.values())) if len(decisions) == 1 else None
        if report is not None:
            from mixlaw.report.html import cmr_report

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
