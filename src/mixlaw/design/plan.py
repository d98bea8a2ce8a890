"""The logic behind ``mixlaw plan``: price the sizes, allocate the budget, optionally simulate, write a sweep spec.

:func:`plan` returns the allocation of the chosen strategy (and of the ones to compare), the simulator's scores
when asked, and the notes; :func:`sweep_toml` writes the allocation as a multi-domain probe sweep spec
(``[pt].mixtures`` and ``[pt].runs``, see :mod:`mixlaw.probe.sweep`) that ``mixlaw probe run`` executes as it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mixlaw import limits
from mixlaw.design.budget import CostFn, SizeSpec, parse_budget, resolve_sizes
from mixlaw.design.strategies import (
    Allocation,
    AllocationOptions,
    Strategy,
    allocate,
    parse_strategies,
    positions,
)
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = [
    "DEFAULT_ALLOCATION", "DEFAULT_SCHEDULE", "natural_prior", "parse_prior", "plan", "plan_to_dict", "sweep_toml",
]  # fmt: skip

#: How ``plan`` builds allocations unless told otherwise: every share of the mixture pool at least 1 %.
DEFAULT_ALLOCATION = AllocationOptions(mixture_floor=0.01)

#: PT schedule of the written spec: WSD with a cool-down to a tenth of the peak (as the shipped CMR bases).
DEFAULT_SCHEDULE: dict[str, Any] = {
    "kind": "wsd",
    "peak_lr": 3e-3,
    "warmup_fraction": 0.05,
    "decay_fraction": 0.2,
    "final_lr": 3e-4,
}


def natural_prior(data_dir: str | Path, domains: Sequence[str]) -> dict[str, float]:
    """The natural mixture: each domain's share of the prepared training tokens (``manifest.json``)."""
    from mixlaw.probe.corpora import load_manifest

    manifest = load_manifest(data_dir)
    have = manifest["corpora"]
    missing = [d for d in domains if d not in have]
    if missing:
        raise InputError(f"--domains {missing[0]}: not a corpus of {data_dir} ({', '.join(have)})")
    tok = {d: float(have[d]["tokens"]["train"]) for d in domains}
    total = math.fsum(tok.values())
    return {d: v / total for d, v in tok.items()}


def parse_prior(text: str | None, domains: Sequence[str], data_dir: str | Path | None) -> dict[str, float] | None:
    """``--prior``: ``natural`` (token shares of ``data_dir``), ``uniform``/none, or ``general=0.4,code=0.6``."""
    if text is None or text.strip() in ("", "uniform"):
        return None
    if text.strip() == "natural":
        if data_dir is None:
            raise InputError("--prior natural: needs --data-dir (the prepared corpora's token counts)")
        return natural_prior(data_dir, domains)
    out: dict[str, float] = {}
    for kv in text.split(","):
        k, eq, v = kv.partition("=")
        if not eq:
            raise InputError(f"--prior: expected natural, uniform or domain=weight,..., got {kv!r}")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise InputError(f"--prior {k.strip()}: expected a number, got {v!r}") from None
    total = math.fsum(out.values())
    if total <= 0:
        raise InputError(f"--prior: expected positive weights, got {text!r}")
    return {k: v / total for k, v in out.items()}


#: Estimated CPU seconds above which :func:`plan` tells ``announce`` what it is about to spend.
ANNOUNCE_SECONDS = 20.0


def expected_counts(
    strategy: Strategy, sizes: Sequence[SizeSpec], budget: float, floors: int = 1, caps: int | None = None
) -> np.ndarray:
    """An upper bound of the run counts per size (floats, sizes by parameters) that
    :func:`~mixlaw.design.strategies.solve_counts` will give, computed without integers.

    Its counts are ``n_s = min(cap, max(floor, ⌊λ p'_s⌋))`` at the largest ``λ`` whose runs fit the budget; since
    ``⌊x⌋ ≥ x − 1``, that ``λ`` is at most the root of ``Σ min(cap, max(floor, λ p'_s − 1)) c_s = budget``, found
    by bisection in floats. A budget of 1e40 FLOPs gives ~1e28 runs here, not an int64 wrap-around."""
    ordered = sorted(sizes, key=lambda s: s.n_params)
    c = np.array([s.cost for s in ordered], dtype=np.float64)
    p = np.asarray(strategy.profile(positions(ordered)), dtype=np.float64)
    pp = p if strategy.space == "count" else p / c
    pp = pp / pp.max() if pp.max() > 0 else pp
    cap = math.inf if caps is None else float(caps)
    f = float(floors)

    def spend(lam: float) -> float:
        return float((np.minimum(cap, np.maximum(f, lam * pp - 1.0)) * c).sum())

    hi = max((budget + float(c.sum())) / max(float((pp * c).sum()), 1e-300), 1.0)
    while spend(hi) <= budget and hi < 1e300 and np.any(hi * pp - 1.0 < cap):
        hi *= 2.0
    lo = 0.0
    for _ in range(200):  # float bisection: spend(lo) <= budget < spend(hi)
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if spend(mid) <= budget else (lo, mid)
        if hi - lo <= 1e-12 * hi:
            break
    return np.minimum(cap, np.maximum(f, np.floor(hi * pp)))


def _bound_allocations(
    strategies: Sequence[Strategy],
    sizes: Sequence[SizeSpec],
    budget: float,
    n_domains: int,
    opts: AllocationOptions,
    limit: limits.MemoryLimit | None,
) -> float:
    """Refuse (:func:`mixlaw.limits.plan`) an allocation too large to build, before it is built; its CPU seconds."""
    seconds = 0.0
    for strat in strategies:
        floors = opts.floors if isinstance(opts.floors, int) else max(opts.floors)  # per-size: bounded by the largest
        caps = opts.caps if opts.caps is None or isinstance(opts.caps, int) else (
            None if None in opts.caps else max(c for c in opts.caps if c is not None))  # fmt: skip
        n = expected_counts(strat, sizes, budget, floors, caps)
        mm = opts.max_mixtures
        take = np.minimum(n, float(mm)) if mm is not None else n
        if opts.sharing == "independent":  # one pool per size, each matched against those before it
            distinct = float(take.sum())
            pairs = float(sum(t * float(take[:i].sum() + take.max()) for i, t in enumerate(take)))
        else:
            distinct, pairs = float(take.max()), 0.0
        _, sec = limits.plan(float(n.sum()), distinct, n_domains, strat.label, limit, independent=pairs)
        seconds += sec
    return seconds


def plan(
    *,
    sizes: Sequence[str],
    target_size: str,
    budget: str,
    domains: Sequence[str],
    strategy: str = "hourglass",
    compare: str | None = None,
    simulate: int = 0,
    tokens_per_param: float = 20.0,
    flops_per_s: float | None = None,
    allocation: AllocationOptions = DEFAULT_ALLOCATION,
    noise: float = 0.01,
    cost: CostFn | None = None,
    cost_unit: str = "FLOPs",
    solver: SolverOptions = DEFAULT_SOLVER,
    limit: limits.MemoryLimit | None = None,
    announce: Callable[[str], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Allocate ``budget`` over ``sizes`` with ``strategy`` (and each ``compare`` strategy); simulate if asked.

    ``allocation`` says how each allocation is built (:class:`~mixlaw.design.strategies.AllocationOptions`; its
    ``seed`` and ``k`` are also the simulation's).

    ``solver`` caps the iterations of every fit of the simulation (:class:`~mixlaw.options.SolverOptions`,
    ``--max-iter``; default the simulator's :data:`~mixlaw.design.simulate.SIM_MAX_ITER`).

    Every step is estimated before it runs: the allocations (runs × distinct mixtures, :func:`mixlaw.limits.plan`)
    and the simulation (replicates × runs × fits, :func:`mixlaw.limits.simulation`); above ``limit``
    (``--max-memory``, default 4 GiB) or the planning time limit it stops with one line naming the option, before
    any work. ``announce`` receives a one-line estimate of a step expected to take over
    :data:`ANNOUNCE_SECONDS`.

    Returns ``{"sizes", "target", "budget", "allocation" (the chosen one), "compare": [allocations],
    "simulation": SimResult | None, "notes"}``; allocations are :class:`Allocation` objects.
    """
    doms = [d.strip() for d in domains if d.strip()]
    if len(doms) < 2 or len(set(doms)) != len(doms):
        raise InputError(f"--domains: expected at least two distinct domains, got {','.join(doms) or 'none'}")
    size_specs, notes = resolve_sizes(sizes, tokens_per_param=tokens_per_param, cost=cost)
    probe = [s.probe_size for s in size_specs]
    if len(set(probe)) != len(probe):
        raise InputError(f"--sizes: two sizes map to the same probe model ({probe}); give distinct sizes")
    (tgt,), tnotes = resolve_sizes([target_size], tokens_per_param=tokens_per_param, cost=cost)
    if tgt.n_params <= max(s.n_params for s in size_specs):
        raise InputError(f"--target-size {target_size}: expected a size larger than every fitting size")
    b = parse_budget(budget, target_cost=tgt.cost, flops_per_s=flops_per_s, cost_unit=cost_unit)
    main = Strategy.parse(strategy)
    others = [s for s in parse_strategies(compare) if s.label != main.label] if compare else []
    opts, k = allocation, allocation.k
    seconds = _bound_allocations([main, *others], size_specs, b.flops, len(doms), opts, limit)
    if announce is not None and seconds > ANNOUNCE_SECONDS:
        announce(f"allocating {1 + len(others)} strateg{'y' if not others else 'ies'}: about {seconds:,.0f} CPU s")
    chosen = allocate(main, size_specs, b.flops, doms, opts)
    compared = [allocate(s, size_specs, b.flops, doms, opts) for s in others]
    sim = None
    if simulate:
        from mixlaw.design.simulate import SIM_MAX_ITER
        from mixlaw.design.simulate import simulate as run_sim
        from mixlaw.laws import get_law

        fit_law = get_law("camel", domains=tuple(doms), k=k, size="n_params", size_unit=float(tgt.n_params))
        runs = [a.n_runs for a in (chosen, *compared)]
        nbytes, sec = limits.simulation(simulate, runs, len(fit_law.start_design()), fit_law.n_internal, k, limit)
        if announce is not None and sec > ANNOUNCE_SECONDS:
            announce(f"simulating --simulate {simulate:,}: {limits.describe(nbytes, sec)}")

        sim = run_sim(
            [main, *others],
            size_specs,
            tgt,
            b.flops,
            doms,
            replicates=simulate,
            noise=noise,
            k=k,
            seed=opts.seed,
            allocation=opts,
            max_iter=solver.cap(SIM_MAX_ITER),
            progress=progress,
        )
    return {
        "sizes": size_specs,
        "target": tgt,
        "budget": b,
        "domains": doms,
        "tokens_per_param": tokens_per_param,
        "allocation": chosen,
        "compare": compared,
        "simulation": sim,
        "notes": [*notes, *(n.replace("size", "target size", 1) for n in tnotes), *chosen.notes],
    }


def plan_to_dict(res: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-ready form of a :func:`plan` result (what ``mixlaw plan --json`` prints, less the spec path)."""
    t, b = res["target"], res["budget"]
    return {
        "target": {"size": t.label, "probe_size": t.probe_size, "n_params": t.n_params, "tokens": t.tokens,
                   "cost": t.cost},
        "budget": {"flops": b.flops, "text": b.text, "unit": b.unit, "cost_unit": b.cost_unit},
        "domains": res["domains"],
        "allocation": res["allocation"].to_dict(),
        "compare": [a.to_dict() for a in res["compare"]],
        "simulation": None if res["simulation"] is None else res["simulation"].to_dict(),
        "notes": res["notes"],
    }  # fmt: skip


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(float(v)) if isinstance(v, float) else str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise InputError(f"cannot write {type(v).__name__} to a sweep spec")


def _toml_key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _weights(w: Sequence[float], domains: Sequence[str]) -> dict[str, float]:
    """Weights rounded to 1e-6 that sum to exactly 1 (the largest takes the rounding)."""
    units = [int(round(float(x) * 1_000_000)) for x in w]
    big = max(range(len(units)), key=lambda i: units[i])
    units[big] += 1_000_000 - sum(units)
    return {d: u / 1_000_000 for d, u in zip(domains, units, strict=True)}


def sweep_toml(
    alloc: Allocation,
    *,
    name: str = "plan",
    data_dir: str = "data",
    work_dir: str = "runs",
    tokens_per_param: float = 20.0,
    block_size: int = 256,
    batch_size: int = 8,
    eval_tokens: int = 16384,
    evals: int = 10,
    seed: int = 0,
    device: str = "auto",
    schedule: Mapping[str, Any] | None = None,
    header: Sequence[str] = (),
) -> str:
    """The allocation as a multi-domain probe sweep spec (TOML text) that ``mixlaw probe run`` executes."""
    sizes: list[SizeSpec] = list(alloc.sizes)
    if any(s.probe_size is None for s in sizes):
        raise InputError("every fitting size needs a probe model to write a sweep spec")
    used = [(s, ids) for s, ids in zip(sizes, alloc.mixture_ids, strict=True) if ids]
    sweep = {
        "name": name,
        "data_dir": data_dir,
        "work_dir": work_dir,
        "seed": seed,
        "block_size": block_size,
        "batch_size": batch_size,
        "threads": 1,
        "device": device,
        "eval_tokens": eval_tokens,
        "eval_sets": list(alloc.domains),
    }
    pt: dict[str, Any] = {
        "sizes": [s.probe_size for s, _ in used],
        "tokens_per_param": float(tokens_per_param),
        "schedule": dict(schedule or DEFAULT_SCHEDULE),
        "evals": evals,
    }
    lines = [f"# {h}" for h in header]
    lines += ["[sweep]", *(f"{k} = {_toml_value(v)}" for k, v in sweep.items()), "", "[pt]"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in pt.items()]
    lines += ["", "[pt.mixtures]"]
    lines += [f"m{i:03d} = {_toml_value(_weights(w, alloc.domains))}" for i, w in enumerate(alloc.pool)]
    lines += ["", "[pt.runs]  # the mixtures each size trains from scratch; a repeated name is a seed replicate"]
    lines += [f"{_toml_key(str(s.probe_size))} = {_toml_value([f'm{i:03d}' for i in ids])}" for s, ids in used]
    return "\n".join(lines) + "\n"
