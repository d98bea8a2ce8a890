"""``mixlaw mix``: multi-domain mixtures — ``compare`` mixture laws on held-out runs, ``optimize`` a mixture.

Thin verbs over :mod:`mixlaw.api.mixture`; only typer and the standard library are imported at module load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from mixlaw.cli._common import (
    DecisionMaxIterOpt,
    JsonOpt,
    LawOptionOpt,
    LevelOpt,
    MaxMemoryOpt,
    console,
    emit_json,
    verb,
)
from mixlaw.cli._pool import PoolOpt, PoolStatsOpt, pool_report, pool_target
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

__all__ = ["app"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Multi-domain mixtures: compare laws on held-out runs, optimise the mixture.",
)

RunsArg = Annotated[Path, typer.Argument(help="Runs table (CSV, JSONL, Parquet) or RunStore with w_<domain> columns.")]
DomainsOpt = Annotated[str, typer.Option("--domains", help="Mixture domains, comma-separated (columns w_<domain>).")]
SizeColOpt = Annotated[str, typer.Option("--size-column", help="Model-size column (camel's capacity M).")]
SeedOpt = Annotated[int, typer.Option("--random-state", help="Seed (folds, starts, bootstrap).")]
PairsOpt = Annotated[list[str] | None, typer.Option(help="domain=value (repeatable).")]


def _load(runs: Path, options: dict[str, Any], needed: list[str] | None = None) -> Any:
    # the shared table options (mixlaw.cli._table); empty target cells are kept: each target leaves out its own
    # missing rows (mixlaw.decide.mixture.checks.target_rows), as the SlimPajama table needs
    del needed
    return load(runs, **options)


def _domains(text: str) -> list[str]:
    return [d.strip() for d in text.split(",") if d.strip()]


def _pairs(items: list[str] | None, what: str) -> dict[str, float]:
    from mixlaw.cli._common import parse_weights  # the one NAME=VALUE syntax (repeated or comma-separated)

    return parse_weights(items, what)


def _console() -> Any:
    """The rich console, 120 columns wide when the output is not a terminal (files, pipes, tests)."""
    con = console()
    if not con.is_terminal:
        con.width = max(con.width, 120)
    return con


def _sizes(text: str | None) -> list[float] | None:
    from mixlaw.errors import InputError

    if not text:
        return None
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--sizes: expected comma-separated numbers, got {text!r}") from None


@app.command("compare")
@verb
def compare_cmd(
    runs: RunsArg,
    domains: DomainsOpt,
    target: Annotated[list[str], typer.Option("--target", help="Loss column to predict (repeatable).")],
    holdout: Annotated[
        str, typer.Option("--holdout", help="Test rows: a filter (n_params > 9.4e8) or mixtures:K (K-fold).")
    ],
    models: Annotated[
        str, typer.Option("--models", help="blind or any mixture law (camel, dml, …; camel:k=3 sets an option).")
    ] = "camel,dml,blind",
    size_column: SizeColOpt = "n_params",
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", help="Resamples of the training mixtures for the intervals (0 = none).")
    ] = 50,
    where: WhereOpt = None,
    maps: MapOpt = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    derive: DeriveOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    allow_missing: AllowMissingOpt = False,
    meta: MetaOpt = None,
    random_state: SeedOpt = 0,
    level: LevelOpt = 0.95,
    max_iter: DecisionMaxIterOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit each mixture law on the rows outside the holdout and score its predictions of the held-out rows."""
    df = _load(runs, table_kw(locals()), target)
    from mixlaw.api.mixture import compare
    from mixlaw.options import SolverOptions

    out = compare(
        df,
        domains=_domains(domains),
        targets=target,
        holdout=holdout,
        models=models,
        size_column=size_column,
        bootstrap=bootstrap,
        random_state=random_state,
        source=runs.name,
        solver=SolverOptions(max_iter=max_iter),
        level=level,
        progress=_stderr_progress("mix compare"),
    )
    if as_json:
        return emit_json(out)
    from rich.table import Table

    con = _console()
    for t in out["targets"]:
        tab = Table(title=f"{t['target']} — holdout {out['holdout']}")
        pi = f"in {100 * out['level']:g}% PI"
        for col in ("model", "params", "n_train", "n_test", "MAE", "MRE %", "bias %", "Spearman", pi):
            tab.add_column(col, justify="left" if col == "model" else "right")
        for m in t["models"]:
            cov = m["coverage"]
            levels = m.get("levels_comparable", True) or m["mae"] == m["mae"]
            nc = "not comparable"
            tab.add_row(
                m["model"] + ("" if m.get("levels_comparable", True) else " (rank transfer)"),
                str(m["n_parameters"]),
                str(m["n_train"]),
                str(m["n_test"]) if m["n_predicted"] == m["n_test"] else f"{m['n_predicted']}/{m['n_test']}",
                f"{m['mae']:.4g}" if levels else nc,
                f"{100 * m['mre']:.3g}" if levels else nc,
                f"{100 * m['bias']:+.3g}" if levels else nc,
                f"{m['spearman']:.3f}",
                "—" if cov != cov else f"{100 * cov:.0f} %",
            )
        con.print(tab)
        for m in t["models"]:  # size-blind models at another size: the assumption and the ranking, stated
            rt = m.get("rank_transfer")
            if rt:
                top = ", ".join(f"{r['run_id']} (observed #{r['observed_rank']})" for r in rt["ranking"][:3])
                con.print(f"{m['model']}: {rt['assumption']}; Spearman {m['spearman']:.3f}; predicted best: {top}")
            if m.get("blind_size_law"):
                con.print(f"{m['model']}: at sizes without training rows, {m['blind_size_law']}")
        for m in t["models"]:  # the released-pipeline surrogate says which protocol ran
            if str(m.get("interval_method", "")).startswith("dml_mlp"):
                con.print(f"{m['model']}: {m['interval_method']}")
        if out["bootstrap"]:  # every row has an interval or its reason: counted, never a silent gap
            for m in t["models"]:
                why = "; ".join(f"{g['n']}: {g['reason']}" for g in m["no_interval"])
                con.print(
                    f"{m['model']}: interval on {m['n_interval']} of {m['n_test']} rows" + (f" ({why})" if why else "")
                )
                if "calibrated" in m.get("interval_method", ""):  # the holdout extrapolates in size
                    con.print(f"{m['model']}: {m['interval_method']}")
        if t["n_missing"]:
            con.print(f"{t['target']}: {t['n_missing']} row(s) without a value left out for this target")


@app.command("optimize")
@verb
def optimize_cmd(
    runs: RunsArg,
    domains: DomainsOpt,
    law: Annotated[
        str,
        typer.Option(
            "--law",
            help="Mixture law (camel, dml, mixture_joint, regmix, ...), or auto (the default): of camel, "
            "mixture_additive and mixture_joint, the law with the lowest error at the largest fitted size when "
            "fitted below it, among the healthy fits; the table of candidates is printed.",
        ),
    ] = "auto",
    target: Annotated[
        list[str] | None, typer.Option("--target", help="Loss column a law is fitted to (repeatable; default loss).")
    ] = None,
    weights: Annotated[
        list[str] | None,
        typer.Option(
            "--weights", help="loss=weight (a --target) or benchmark=weight (an accuracy column); repeatable."
        ),
    ] = None,
    objective: Annotated[
        str | None,
        typer.Option("--objective", help="Benchmark preset: balanced, math, code or knowledge (laws.md §12.5)."),
    ] = None,
    target_size: Annotated[
        float | None, typer.Option("--target-size", help="Model size of the target (camel's M).")
    ] = None,
    size_column: SizeColOpt = "n_params",
    law_option: LawOptionOpt = None,
    cap: Annotated[list[str] | None, typer.Option("--cap", help="domain=max weight (repeatable).")] = None,
    floor: Annotated[list[str] | None, typer.Option("--floor", help="domain=min weight (repeatable).")] = None,
    fix: Annotated[list[str] | None, typer.Option("--fix", help="domain=fixed weight (repeatable).")] = None,
    max_epochs: Annotated[
        list[str] | None, typer.Option("--max-epochs", help="domain=E: at most E passes over its unique tokens.")
    ] = None,
    unique_tokens: Annotated[
        list[str] | None, typer.Option("--unique-tokens", help="domain=U unique tokens available.")
    ] = None,
    target_tokens: Annotated[
        float | None,
        typer.Option(
            "--target-tokens",
            help="Training tokens of the target run: the laws' token input and the repetition limits (default: the "
            "fitted runs' median tokens per parameter × --target-size).",
        ),
    ] = None,
    prior: Annotated[list[str] | None, typer.Option("--prior", help="domain=weight of the prior mixture.")] = None,
    kl_max: Annotated[float | None, typer.Option("--kl-max", help="Constraint KL(w || prior) <= this.")] = None,
    kl_weight: Annotated[float, typer.Option("--kl-weight", help="Penalty weight of KL(w || prior).")] = 0.0,
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap",
            help="Resamples of the mixtures (0 = none): intervals, and the paired regret and verdict of the "
            "evaluated mixtures. Default 20 (each refit starts from the point fit: ~15 % of the fits' time).",
        ),
    ] = 20,
    sizes: Annotated[
        str | None, typer.Option("--sizes", help="Also the optimum at these sizes, comma-separated (1e9,7e9).")
    ] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write a self-contained HTML report here.")] = None,
    holdout: Annotated[
        str, typer.Option("--holdout", help="Held-out runs for the report's predicted-vs-observed panel.")
    ] = "mixtures:5",
    evaluate: Annotated[
        list[str] | None,
        typer.Option(
            "--evaluate",
            help="Also predict this mixture: uniform, natural, or name:d=w,d=w,... (repeatable; with regret and a "
            "verdict). Default: uniform, and natural when the table has token counts per domain; none: neither.",
        ),
    ] = None,
    pool_stats: PoolStatsOpt = None,
    pool: PoolOpt = None,
    where: WhereOpt = None,
    maps: MapOpt = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    derive: DeriveOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    allow_missing: AllowMissingOpt = False,
    meta: MetaOpt = None,
    random_state: SeedOpt = 0,
    level: LevelOpt = 0.95,
    max_iter: DecisionMaxIterOpt = None,
    max_memory: MaxMemoryOpt = "4G",
    as_json: JsonOpt = False,
) -> None:
    """Fit a mixture law and find the mixture best for the goal (lowest weighted loss or highest weighted accuracy)."""
    from mixlaw import limits

    limits.count(bootstrap, "--bootstrap", lo=0, hi=limits.MAX_BOOTSTRAP)
    memory_limit = limits.MemoryLimit(limits.parse_size(max_memory))
    if report is not None:
        from mixlaw.safeio import check_output_path

        check_output_path(report, "--report")  # before the run: a directory or a missing one failed only after it
    df = _load(runs, table_kw(locals()), target or ["loss"])  # a missing file answers before the engine loads
    from mixlaw import api
    from mixlaw.api.mixture import compare, optimize
    from mixlaw.options import SolverOptions
    k = sum(str(c).startswith("w_") for c in df.columns)  # the mixture law's size: about (k + 2) per target
    limits.bootstrap(bootstrap, len(df) * len(target or ["loss"]), (k + 2) * (k + 1), memory_limit)  # before fits
    constraints = {
        "caps": _pairs(cap, "--cap"),
        "floors": _pairs(floor, "--floor"),
        "fixed": _pairs(fix, "--fix"),
        "max_epochs": _pairs(max_epochs, "--max-epochs") or None,
        "unique_tokens": _pairs(unique_tokens, "--unique-tokens"),
        "target_tokens": target_tokens,
        "prior": _pairs(prior, "--prior") or None,
        "kl_max": kl_max,
        "kl_weight": kl_weight,
    }
    out = optimize(
        df,
        law=law,
        domains=_domains(domains),
        target=target or ["loss"],
        weights=_pairs(weights, "--weights") or None,
        objective=objective,
        target_size=target_size,
        target_tokens=target_tokens,
        size_column=size_column,
        law_options={**api.parse_options(law_option), **pool_target(pool_stats, pool, law)},
        constraints=constraints,
        bootstrap=bootstrap,
        sizes=_sizes(sizes),
        candidates=_evaluate(evaluate, _domains(domains), df),
        random_state=random_state,
        source=runs.name,
        solver=SolverOptions(max_iter=max_iter),
        level=level,
        progress=_stderr_progress("mix optimize"),
    )
    if report is not None and out["law"] == "causalmix":
        out["report"] = pool_report(report, out, runs.name)
    elif report is not None:
        from mixlaw.report.mix_heldout import heldout_from_fits
        from mixlaw.report.mix_page import write_mix_report

        fast = heldout_from_fits(
            df, out, domains=_domains(domains), holdout=holdout, size_column=size_column, level=level,
            bootstrap=min(bootstrap, 50) if bootstrap else 20, random_state=random_state, max_iter=max_iter,
            progress=_stderr_progress("mix optimize --report"),
        )  # fmt: skip
        parts = [fast] if fast is not None else [  # fmt: skip
            compare(df, domains=_domains(domains), targets=ts, holdout=holdout, models=f"{models},blind",
                    size_column=size_column, bootstrap=min(bootstrap, 50) if bootstrap else 20,
                    random_state=random_state, source=runs.name, solver=SolverOptions(max_iter=max_iter),
                    level=level, progress=_stderr_progress("mix optimize --report"))
            for models, ts in _report_models(out).items()
        ]
        held = {**parts[0], "targets": [t for p in parts for t in p["targets"]]}
        out["report"] = str(write_mix_report(report, out, held, source=runs.name))
    if as_json:
        return emit_json(out)
    from mixlaw.report.mix_text import print_optimum

    print_optimum(out)


def _report_models(out: dict[str, Any]) -> dict[str, list[str]]:
    """The report's held-out comparison: each target with the law the decision kept for it (CAMEL with the number of
    components it was reduced to, ``camel:k=1``), targets of one law together; ``{models: [targets]}``."""
    groups: dict[str, list[str]] = {}
    for t in out["targets"]:
        k = (out.get("camel_k") or {}).get(t, {}).get("k")
        groups.setdefault(out["law"] if k is None else f"{out['law']}:k={k}", []).append(t)
    return groups


def _stderr_progress(verb: str) -> Any:
    """One line per stage on stderr when stdout is not a terminal (a log, a pipe, CI); ``None`` on a terminal."""
    import sys
    import time

    if sys.stdout.isatty():
        return None
    t0 = time.monotonic()

    def line(text: str) -> None:
        print(f"{verb} [{time.monotonic() - t0:5.0f} s]: {text}", file=sys.stderr, flush=True)

    return line


def _natural(df: Any, domains: list[str]) -> dict[str, float] | None:
    """The natural mixture: each domain's share of the tokens available (``pool_tokens_<d>`` or
    ``unique_tokens_<d>`` columns, their largest value); ``None`` when the table has no such counts."""
    for prefix in ("pool_tokens_", "unique_tokens_"):
        cols = [f"{prefix}{d}" for d in domains]
        if all(c in df.columns for c in cols):
            v = [float(df[c].max()) for c in cols]
            if all(x > 0 for x in v):
                return {d: x / sum(v) for d, x in zip(domains, v, strict=True)}
    return None


def _evaluate(items: list[str] | None, domains: list[str], df: Any = None) -> dict[str, dict[str, float]]:
    """``--evaluate`` values: ``uniform``, ``natural`` or ``name:d=w,d=w,...`` (one line naming a bad one).

    Without ``--evaluate``: uniform, and natural when the table has token counts per domain (``none``: neither).
    """
    out: dict[str, dict[str, float]] = {}
    if items is None:
        items = ["uniform"] + (["natural"] if df is not None and _natural(df, domains) else [])
    for item in items:
        if item.strip() == "none":
            continue
        if item.strip() == "natural":
            nat = _natural(df, domains) if df is not None else None
            if nat is None:
                from mixlaw.errors import InputError

                raise InputError("--evaluate natural: the table has no pool_tokens_<domain> or unique_tokens_<domain>")
            out["natural"] = nat
            continue
        name, sep, body = item.partition(":")
        name = name.strip()
        if not sep and name == "uniform":
            out[name] = dict.fromkeys(domains, 1.0 / len(domains))
            continue
        if not sep or not name or not body.strip():
            from mixlaw.errors import InputError

            raise InputError(f"--evaluate {item!r}: expected 'uniform' or name:domain=weight,domain=weight,...")
        out[name] = _pairs([p for p in body.split(",") if p.strip()], f"--evaluate {name}")
    return out


@app.command("nested")
@verb
def nested_cmd(
    runs: RunsArg,
    domains: DomainsOpt,
    target_size: Annotated[float, typer.Option("--target-size", help="Model size N* of the target.")],
    target_step: Annotated[float, typer.Option("--target-step", help="Training step S* of the target.")],
    target: Annotated[str, typer.Option("--target", help="Loss column.")] = "loss",
    max_fit_step: Annotated[
        float | None, typer.Option("--max-fit-step", help="Fit checkpoints up to this step (default: < S*).")
    ] = None,
    step_column: Annotated[str, typer.Option("--step-column", help="Step (or token) column.")] = "step",
    size_column: SizeColOpt = "n_params",
    law: Annotated[
        str, typer.Option("--law", help="Mixture law of the last stage (of the mixture alone; dml_mlp: the MLPs).")
    ] = "dml",
    law_option: LawOptionOpt = None,
    tie_size_exponent: Annotated[
        bool, typer.Option("--tie-size-exponent", help="One size-law exponent for every mixture (the paper's).")
    ] = False,
    where: WhereOpt = None,
    maps: MapOpt = None,
    set_: SetOpt = None,
    drop: DropOpt = None,
    derive: DeriveOpt = None,
    final: FinalOpt = False,
    every: EveryOpt = None,
    steps: StepsOpt = None,
    allow_missing: AllowMissingOpt = False,
    meta: MetaOpt = None,
    random_state: SeedOpt = 0,
    max_iter: DecisionMaxIterOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Data Mixing Laws' nested pipeline: step law → size law → mixture law at a target (size, step)."""
    df = _load(runs, table_kw(locals()))
    from mixlaw import api
    from mixlaw.api.mixture import nested
    from mixlaw.options import SolverOptions
    out = nested(
        df,
        domains=_domains(domains),
        target_size=target_size,
        target_step=target_step,
        target=target,
        max_fit_step=max_fit_step,
        step_column=step_column,
        size_column=size_column,
        mixture_law=law,
        law_options=api.parse_options(law_option),
        random_state=random_state,
        source=runs.name,
        solver=SolverOptions(max_iter=max_iter),
        tie_size_exponent=tie_size_exponent,
    )
    if as_json:
        return emit_json(out)
    con = _console()
    con.print(
        f"{out['n_step_fits']} step-law fits (steps <= {out['max_fit_step']:g}) → {out['n_size_fits']} size-law fits "
        f"→ {law} at N = {target_size:g}, S = {target_step:g} ({out['n_skipped_curves']} curves skipped)"
    )
    con.print(f"mixture law: {out['mixture_law']['estimator']}")
    if out["mixture_law"]["params"] is not None:
        con.print(f"{law} parameters: {out['mixture_law']['params']} ({out['mixture_law']['status']})")
    v = out["validation"]
    if v:
        con.print(
            f"held-out runs at the target: {v['n']}, MAE {v['mae']:.4g}, MRE {100 * v['mre']:.3g} %, "
            f"bias {100 * v['bias']:+.3g} %"
        )
