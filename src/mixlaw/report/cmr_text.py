"""Terminal and JSON output of ``mixlaw cmr`` (rich tables; imported by the verb only when it prints)."""

from __future__ import annotations

import json
import math
from typing import Any

import typer

from mixlaw.decide.cpt.schedule_size import SizeScheduleCMR
from mixlaw.decide.cpt.schedule_size import _size_value as size_value
from mixlaw.fmt import fmt_size, fmt_tokens

__all__ = ["print_decision", "print_schedule", "emit_schedule", "json_default"]


def domain_notes(sizes: Any) -> list[str]:
    """Notes of one domain, one line per kind of issue (notes that differ only in their numbers are one kind):
    ``"(12k, 25k) text"`` when the sizes say the same, else ``"(12k, 25k) 12k: text; 25k: text"``."""
    import re

    kinds: dict[str, list[tuple[str, str]]] = {}
    for s in sizes:
        for n in s.notes:
            kinds.setdefault(re.sub(r"[-+]?\d[\d.,e+-]*", "#", n), []).append((fmt_size(s.n_params), n))
    out = []
    for items in kinds.values():
        who = ", ".join(dict.fromkeys(w for w, _ in items))
        texts = list(dict.fromkeys(t for _, t in items))
        out.append(f"({who}) {texts[0]}" if len(texts) == 1 else f"({who}) " + "; ".join(f"{w}: {t}" for w, t in items))
    return out


def status_text(s: Any) -> str:
    """The status with its reasons when weak."""
    return s.status + (f" ({'; '.join(s.weak_reasons)})" if s.weak_reasons else "")


#: Narrower than this (a terminal), the CMR table is printed one row per field and the per-ratio reasons below
#: their table, so that no number is cut to ``…`` (80 columns readable).
WIDE = 120


def print_decision(decision: Any, domain: str | None = None, *, console: Any = None) -> None:
    """The CMR table (with both readings when a control exists), the per-ratio table and the notes.

    Piped or captured, the tables are 160 columns wide (nothing squeezed); on a terminal narrower than
    :data:`WIDE` columns the CMR table is transposed (fields down, sizes across) and the per-ratio reasons follow
    their table as lines, so every number is printed whole."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # piped or captured: do not squeeze the reasons into 80 columns
            console = Console(width=160)
    narrow = console.width < WIDE
    s0 = decision.settings
    lam = s0["lagrange_mult"]
    for s in decision.sizes:
        console.print(s.sentence(domain or s0["domain_eval"]), soft_wrap=True, highlight=False)  # one line: greps
    title = (f"Critical mixture ratio — domain share of the CPT mix (ε = {s0['epsilon']:g}, λ = {lam}, "
             f"ratio law {s0['ratio_law']}; increments {s0['increments']})")  # fmt: skip
    other = next((s.control_reading["reading"] for s in decision.sizes if s.control_reading), None)
    pct = f"{100 * s0.get('level', 0.95):g}%"
    cols = ["model size", "budget (tokens)", "CMR (max feasible share)", f"{pct} CI", "from",
            "tolerance boundary (largest share within ε)", "model-free crossing"]  # fmt: skip
    cols += [f"CMR {other}"] if other else []
    rows = []
    for s in decision.sizes:
        ci = f"[{s.ci[0]:.3f}, {s.ci[1]:.3f}]" if s.ci else "—"
        if s.n_bootstrap:  # unusable resamples beside every interval
            ci += f"\n{s.n_bootstrap_failed}/{s.n_bootstrap} unusable"
        tb = f"{s.tolerance_boundary:.3f}" if s.tolerance_boundary is not None else s.tolerance_status
        mf = f"{s.model_free_crossing:.3f}" if s.model_free_crossing is not None else "—"
        style = "green" if s.status == "ok" else "yellow"
        head = f"{s.cmr:.3f}" if s.cmr is not None else s.answer().removeprefix("CMR ")
        cells = [fmt_size(s.n_params), fmt_tokens(s.budget_tokens), head,
                 ci, s.cmr_source, tb, mf]  # fmt: skip
        if other:
            cr = s.control_reading or {}
            v, civ = cr.get("cmr"), cr.get("ci")
            cells.append("—" if v is None else f"{v:.3f}" + (f" [{civ[0]:.3f}, {civ[1]:.3f}]" if civ else "")
                         + ("" if cr.get("status") == "ok" else f" ({cr.get('status')})"))  # fmt: skip
        rows.append([*cells, f"[{style}]{status_text(s)}[/{style}]"])
    if narrow:
        t = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)  # fields down, sizes across
        t.add_column(cols[0], max_width=26)
        for r in rows:
            t.add_column(r[0], justify="left")
        for j, col in enumerate([*cols[1:], "status"], start=1):
            t.add_row(col, *(r[j] for r in rows))
    else:
        t = Table(title=title)
        for col in [*cols, "status"]:
            t.add_column(col)
        for r in rows:
            t.add_row(*r)
    console.print(t)
    per = "Per ratio (T0: turning point of the general loss; feasible needs T0 ≤ budget and ΔL_gen ≤ ε)"
    if narrow:
        pr = Table(title=per, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    else:
        pr = Table(title=per)
    heads = ["size", "ratio", "T0 (tokens)", "ΔL_gen @budget", "observed", "ΔL_dom @budget", "R² gen/dom", "feasible"]
    for col in heads:  # narrow: numbers whole, headers on two lines
        pr.add_column(col.replace(" ", "\n") if narrow else col, no_wrap=narrow)
    if not narrow:
        pr.add_column("reason")
    reasons = []
    for s in decision.sizes:
        for row in s.ratios:
            g, d = row["dloss_general_at_budget"], row["dloss_domain_at_budget"]
            o = row["observed_dloss_general_at_budget"]
            r2 = "/".join(f"{v:.3f}" if v is not None else "—" for v in (row["r2_general"], row["r2_domain"]))
            cells = [fmt_size(s.n_params), f"{row['ratio']:.4g}", fmt_tokens(row["t0_tokens"]),
                     f"{g:+.4f}" if g is not None else "—", f"{o:+.4f}" if o is not None else "—",
                     f"{d:+.4f}" if d is not None else "—", r2,
                     "[green]yes[/green]" if row["feasible"] else "[red]no[/red]"]  # fmt: skip
            pr.add_row(*cells, *([] if narrow else [row["reason"]]))
            if narrow and row["reason"] != "feasible":
                reasons.append(f"{fmt_size(s.n_params)} ratio {row['ratio']:.4g}: {row['reason']}")
    console.print(pr)
    for line in reasons:
        console.print(line, highlight=False)
    for n in domain_notes(decision.sizes):
        console.print(f"[dim]note {n}[/dim]")
    if len(decision.sizes) > 1:
        from mixlaw.decide.cmr.pipeline import trend_summary

        console.print(trend_summary(decision.sizes, decision.trend))
    v = decision.validation
    if v:
        console.print(validation_text(v))


def validation_text(v: dict[str, Any]) -> str:
    """One paragraph summarising the held-out checks."""
    parts = []
    ho = v.get("held_out_ratios")
    if ho and ho.get("n_points"):
        parts.append(f"held-out interior ratios: MAE ΔL_gen {ho['mae_general']:.4f}, ΔL_dom {ho['mae_domain']:.4f} "
                     f"nats over {ho['n_points']} runs; {100 * ho['coverage']:.0f}% inside the 95% band; CMR moves "
                     f"by up to {ho['max_cmr_shift']:.3f}")  # fmt: skip
    hs = v.get("held_out_size")
    if hs and hs.get("predicted") is not None:
        clip = f" (trend value {hs['predicted_raw']:.3f}, clipped to a share)" if hs.get("clipped") else ""
        act = "—" if hs["actual"] is None else f"{hs['actual']:.3f}"
        moves = "" if hs["shift"] is None else f" (moves {hs['shift']:+.3f})"
        used = ", ".join(fmt_size(v) for v in hs.get("trend_sizes", []))
        nc = f" (its own CMR is not comparable: {hs['held_out_not_comparable']})" if hs.get(
            "held_out_not_comparable") else ""  # fmt: skip
        what = hs.get("reading", "CMR")
        parts.append(f"largest size {fmt_size(hs['n_params'])} held out: the trend of {hs.get('n_trend_sizes', '?')} "
                     f"sizes ({used}) predicts its {what} {hs['predicted']:.3f}{clip} vs {act} fitted"
                     f"{moves}{nc}")  # fmt: skip
    elif hs:
        left = "; ".join(f"{fmt_size(x['n_params'])} ({x['reason']})" for x in hs.get("trend_left_out", []))
        parts.append(f"largest size {fmt_size(hs['n_params'])} held out: no trend of the other sizes "
                     f"(need ≥ 2 with a comparable CMR{'; left out: ' + left if left else ''})")  # fmt: skip
    return "validation: " + ("; ".join(parts) if parts else "not enough sizes or interior ratios")


def print_schedule(results: list[SizeScheduleCMR], decision: Any, epsilon: float, level: float = 0.95) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    sched = results[0].schedule.spec()
    t = Table(title=f"Schedule-aware CMR — domain share of the CPT mix under {sched} (ε = {epsilon:g}, cpt_replay)")
    pct = f"{100 * level:g}%"
    for col in ("model size", "budget (steps)", "budget (tokens)", "CMR", f"{pct} CI", "constant LR (law)",
                f"{pct} CI ", "CMR paper (data)", "status"):  # fmt: skip
        t.add_column(col)
    paper = {}
    if decision is not None:
        paper = {size_value(s.n_params): s for s in decision.sizes}
    for r in results:
        res = r.result
        c = res.constant_lr_cmr if res is not None else None
        civ = res.constant_lr_interval if res is not None else None
        ps = paper.get(size_value(r.n_params))
        style = "green" if r.status == "ok" else "yellow"
        lost = ""  # the fit's unusable resamples beside the intervals it draws
        if r.fit is not None and r.fit.n_bootstrap:
            lost = f"\n{r.fit.n_failed_resamples}/{r.fit.n_bootstrap} unusable"
        t.add_row(
            fmt_size(r.n_params) if r.n_params is not None else "—",
            str(r.budget_steps),
            fmt_tokens(r.budget_tokens),
            f"{r.cmr:.3f}" if r.cmr is not None else "—",
            f"[{r.ci[0]:.3f}, {r.ci[1]:.3f}]{lost}" if r.ci else "—",
            f"{c:.3f}" if c is not None else "—",
            f"[{civ[0]:.3f}, {civ[1]:.3f}]{lost}" if civ else "—",
            f"{ps.cmr:.3f}" if ps is not None and ps.cmr is not None else "—",
            f"[{style}]{r.status}[/{style}]",
        )
    console.print(t)
    for r in results:
        for note in r.notes:
            console.print(f"[dim]note ({fmt_size(r.n_params)}): {note}[/dim]")


def emit_schedule(
    results: list[SizeScheduleCMR],
    decision: Any,
    decision_error: str | None,
    queries: list[dict[str, Any]],
    epsilon: float,
    as_json: bool,
    level: float = 0.95,
) -> None:
    """Output of ``--law cpt_replay``: the schedule-aware CMR per size beside the constant-LR decision."""
    paper = {} if decision is None else {size_value(s.n_params): s for s in decision.sizes}
    if as_json:
        obj: dict[str, Any] = decision.to_dict() if decision is not None else {"cmr": []}
        rows = []
        for r in results:
            d = r.to_dict()
            ps = paper.get(size_value(r.n_params))
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
        typer.echo(json.dumps(obj, default=json_default, allow_nan=False))
        return
    print_schedule(results, decision, epsilon, level=level)
    if decision is not None:
        typer.echo("\nConstant-LR decision (CMR paper) on the same runs:")
        print_decision(decision)
    else:
        typer.echo(f"constant-LR decision (CMR paper) not available: {decision_error}")
    for q in queries:
        t0 = f"{q['t0_tokens']:.4g}" if q["t0_tokens"] is not None else "—"
        typer.echo(
            f"R = {q['ratio']:g} (size {fmt_size(q['n_params'])}): T0 = {t0} tokens, "
            f"{'feasible' if q['feasible'] else 'not feasible'} — {q['reason']}"
        )


def json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o) if math.isfinite(float(o)) else None
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
