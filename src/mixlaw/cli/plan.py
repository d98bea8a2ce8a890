"""``mixlaw plan``: which probe runs to buy for a compute budget (a thin layer over :mod:`mixlaw.design.plan`).

Heavy modules (numpy, torch, the fitting engine) are imported inside the verb, so ``mixlaw --help`` stays fast.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from mixlaw.cli._common import JsonOpt, MaxMemoryOpt, console, emit_json, verb

__all__ = ["plan_cmd"]


def _fmt(x: float) -> str:
    for unit, scale in (("e", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


MAX_SIMULATE = 10_000
"""Most paired simulation replicates (each is a batch of fits; 10,000 takes hours on a laptop)."""
MAX_RUNS = 10_000_000
"""Largest run count, context length, batch or eval size the planner takes."""


@verb
def plan_cmd(
    sizes: Annotated[str, typer.Option("--sizes", help="Fitting sizes: probe sizes or counts (25k,50k,...,400k).")],
    target_size: Annotated[str, typer.Option("--target-size", help="Size the law must predict (e.g. 1.6m).")],
    budget: Annotated[str, typer.Option("--budget", help="FLOPs (3e15), GPU-hours (12gpu-h@4e14) or 2.0x-target.")],
    domains: Annotated[str, typer.Option("--domains", help="Mixture domains (corpora), comma-separated.")],
    strategy: Annotated[str, typer.Option("--strategy", help="Strategy[:shape=v,space=compute].")] = "hourglass",
    compare: Annotated[str | None, typer.Option("--compare", help="Strategies to compare, comma-separated.")] = None,
    simulate: Annotated[int, typer.Option("--simulate", help="Paired simulation replicates (0: none).")] = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Write the probe sweep spec (TOML) here.")] = None,
    tokens_per_param: Annotated[float, typer.Option("--tokens-per-param", help="Training tokens per parameter.")] = 20,
    flops_per_s: Annotated[float | None, typer.Option("--flops-per-s", help="FLOP/s of a GPU-hour budget.")] = None,
    floor_runs: Annotated[int, typer.Option("--floor-runs", help="Fewest runs per size.")] = 1,
    cap_runs: Annotated[int | None, typer.Option("--cap-runs", help="Most runs per size.")] = None,
    prior: Annotated[str | None, typer.Option("--prior", help="natural, uniform or domain=weight,...")] = None,
    mixture_floor: Annotated[float, typer.Option("--mixture-floor", help="Least weight of every domain.")] = 0.01,
    mixtures: Annotated[
        str, typer.Option("--mixtures", help="'nested' (shared prefixes) or 'independent'.")
    ] = "nested",
    max_mixtures: Annotated[int | None, typer.Option("--max-mixtures", help="Most distinct mixtures.")] = None,
    k: Annotated[int, typer.Option("--k", help="CAMEL components (warning threshold, simulator).")] = 2,
    noise: Annotated[float, typer.Option("--noise", help="Relative loss noise of the simulator.")] = 0.01,
    seed: Annotated[int, typer.Option("--seed", help="Seed of mixtures, random shapes and the simulator.")] = 0,
    name: Annotated[str, typer.Option("--name", help="Sweep name (run id prefix).")] = "plan",
    data_dir: Annotated[str, typer.Option("--data-dir", help="[sweep].data_dir of the spec.")] = "data",
    work_dir: Annotated[str, typer.Option("--work-dir", help="[sweep].work_dir of the spec.")] = "runs",
    block_size: Annotated[int, typer.Option("--block-size", help="Context length of the runs.")] = 256,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Sequences per step.")] = 8,
    eval_tokens: Annotated[int, typer.Option("--eval-tokens", help="Tokens per eval set.")] = 16384,
    cost_runs: Annotated[
        Path | None, typer.Option("--cost-runs", help="Earlier runs (table or RunStore) with a measured cost column.")
    ] = None,
    cost_column: Annotated[
        str | None, typer.Option("--cost-column", help="Their cost column (e.g. gpu_seconds): replaces 6·N·D.")
    ] = None,
    max_iter: Annotated[
        int | None, typer.Option("--max-iter", help="Iteration cap of each simulated fit (default 200).")
    ] = None,
    max_memory: MaxMemoryOpt = "4G",
    json_out: JsonOpt = False,
) -> None:
    """Which probe runs to buy for a compute budget: allocate, simulate, write a sweep.

    Prints the runs and compute share per size and the distinct mixtures; --compare adds other strategies,
    --simulate R scores them on R paired simulations of a CAMEL law; --out writes a probe sweep spec.
    The allocation (runs × mixtures) and the simulation (replicates × runs × fits) are estimated first: above
    --max-memory, or a planning time limit, the command stops with the estimate before any work.
    """
    from mixlaw import limits
    from mixlaw.api.design import AllocationOptions, parse_prior, plan, sweep_toml
    from mixlaw.options import SolverOptions

    limits.count(simulate, "--simulate", lo=0, hi=MAX_SIMULATE)  # 100,000 replicates ran away
    limits.count(floor_runs, "--floor-runs", hi=MAX_RUNS)  # 2^63 was a traceback
    for v, opt in ((cap_runs, "--cap-runs"), (max_mixtures, "--max-mixtures"), (max_iter, "--max-iter")):
        if v is not None:
            limits.count(v, opt, hi=MAX_RUNS)
    sizes_ = ((k, "--k"), (block_size, "--block-size"), (batch_size, "--batch-size"), (eval_tokens, "--eval-tokens"))
    for v, opt in sizes_:
        limits.count(v, opt, hi=MAX_RUNS)
    limits.positive(tokens_per_param, "--tokens-per-param", hi=1e6)
    memory_limit = limits.MemoryLimit(limits.parse_size(max_memory))
    if flops_per_s is not None:
        limits.positive(flops_per_s, "--flops-per-s")
    if out is not None:
        from mixlaw.safeio import check_output_path

        check_output_path(out, "--out")
    doms = [d.strip() for d in domains.split(",") if d.strip()]
    cost, cost_unit = None, "FLOPs"
    from mixlaw.errors import InputError

    if (cost_runs is None) != (cost_column is None):
        raise InputError("--cost-runs and --cost-column go together: the runs table and its measured cost column")
    if cost_runs is not None and cost_column is not None:
        from mixlaw.api.design import measured_cost
        from mixlaw.cli._table import load

        table = load(cost_runs, needed=[cost_column, "n_params", "tokens"], include_schedule=False)
        cost, cost_unit = measured_cost(table, cost_column, source=str(cost_runs)), cost_column
    data_for_prior = data_dir if Path(data_dir, "manifest.json").exists() or prior == "natural" else None
    res = plan(
        sizes=[s for s in sizes.split(",") if s.strip()],
        target_size=target_size,
        budget=budget,
        domains=doms,
        strategy=strategy,
        compare=compare,
        simulate=simulate,
        tokens_per_param=tokens_per_param,
        flops_per_s=flops_per_s,
        allocation=AllocationOptions(floors=floor_runs, caps=cap_runs, prior=parse_prior(prior, doms, data_for_prior),
                                     mixture_floor=mixture_floor, sharing=mixtures, max_mixtures=max_mixtures,  # type: ignore[arg-type]
                                     seed=seed, k=k),  # fmt: skip
        noise=noise,
        cost=cost,
        cost_unit=cost_unit,
        solver=SolverOptions(max_iter=max_iter),
        limit=memory_limit,
        announce=lambda line: typer.echo(f"plan: {line}", err=True),
        progress=_stage_lines("plan") if simulate and not sys.stdout.isatty() else None,
    )
    alloc = res["allocation"]
    if out is not None:
        cmd = "mixlaw plan " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if len(sys.argv) > 2 else "mixlaw plan"
        header = [
            f"written by: {cmd}",
            f"strategy {alloc.strategy.label}: {alloc.n_runs} runs, "
            f"{alloc.distinct_mixtures} distinct mixtures, {alloc.spent / alloc.budget:.1%} of "
            f"{res['budget'].describe()}",
            "run it: mixlaw probe run THIS.toml --store plan.db --workers 2",
        ]
        from mixlaw.safeio import atomic_write_text

        atomic_write_text(
            out,
            sweep_toml(
                alloc,
                name=name,
                data_dir=data_dir,
                work_dir=work_dir,
                seed=seed,
                tokens_per_param=tokens_per_param,
                block_size=block_size,
                batch_size=batch_size,
                eval_tokens=eval_tokens,
                header=header,
            ),
            encoding="utf-8",
        )
    if json_out:
        emit_json(_as_json(res, out))
        return
    _print(res, out)
    for note in res["notes"]:
        typer.echo(f"warning: {note}", err=True)


def _as_json(res: dict[str, Any], out: Path | None) -> dict[str, Any]:
    from mixlaw.api.design import plan_to_dict

    return {**plan_to_dict(res), "spec": None if out is None else str(out)}


def _print(res: dict[str, Any], out: Path | None) -> None:
    from rich.table import Table

    con = console()
    if not con.is_terminal:
        con.width = 140  # a pipe or a file: do not squeeze the tables to 80 columns
    a, t, b = res["allocation"], res["target"], res["budget"]
    tab = Table(
        "size",
        "probe model",
        "N",
        "tokens",
        "runs",
        "compute",
        "share",
        "mixtures",
        title=f"{a.strategy.label} ({a.strategy.space} space): budget {b.describe()}",
    )
    for r in a.rows():
        tab.add_row(
            r["size"],
            str(r["probe_size"]),
            _fmt(r["n_params"]),
            _fmt(r["tokens"]),
            str(r["runs"]),
            _fmt(r["compute"]),
            f"{r['compute_share']:.1%}",
            str(r["distinct_mixtures"]),
        )
    con.print(tab)
    typer.echo(
        f"{a.n_runs} runs, {a.distinct_mixtures} distinct mixtures; spent {_fmt(a.spent)} {b.cost_unit} "
        f"({a.spent / a.budget:.1%}), left {_fmt(a.leftover)}; target {t.label} run = {_fmt(t.cost)} {b.cost_unit}"
    )
    if res["compare"]:
        cmp = Table("strategy", *(s.label for s in a.sizes), "runs", "mixtures", "budget used", title="compared")
        for x in [a, *res["compare"]]:
            cmp.add_row(
                x.strategy.label,
                *(str(n) for n in x.counts),
                str(x.n_runs),
                str(x.distinct_mixtures),
                f"{x.spent / x.budget:.1%}",
            )
        con.print(cmp)
    sim = res["simulation"]
    if sim is not None:
        title = (
            f"simulated at {t.label}: {sim.replicates} paired replicates, noise {sim.noise:.1%}, "
            f"{sim.seconds:.0f} s; mean ± s.e., Δ = paired difference to {sim.strategies[0]}"
        )
        st = Table(
            "strategy", "runs", "mixtures", "RMSE", "ΔRMSE", "regret", "Δregret", "Spearman", "failed", title=title
        )

        def pm(r: dict[str, Any], key: str, sign: str = "") -> str:
            return f"{r[key]:{sign}.4f}±{r[key + '_se']:.4f}"

        for r in sim.summary():
            st.add_row(
                r["strategy"],
                str(r["runs"]),
                str(r["distinct_mixtures"]),
                pm(r, "rmse"),
                pm(r, "rmse_diff", "+"),
                pm(r, "regret"),
                pm(r, "regret_diff", "+"),
                f"{r['spearman']:.3f}",
                str(r["n_failed"]),
            )
        con.print(st)
    if out is not None:
        typer.echo(f"spec written to {out}: mixlaw probe run {out} --store plan.db")


def _stage_lines(verb: str) -> Any:
    """One ``<verb> [  12 s]: <stage>`` line on stderr per stage (stdout is not a terminal)."""
    import time

    t0 = time.monotonic()
    return lambda text: print(f"{verb} [{time.monotonic() - t0:5.0f} s]: {text}", file=sys.stderr, flush=True)
