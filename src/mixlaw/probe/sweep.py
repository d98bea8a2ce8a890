"""Sweeps: a TOML spec → the list of runs → executed locally (sequentially or in a process pool) or on Ray.

Spec (every key but ``[pt].sizes`` has a default)::

    [sweep]
    name = "cmr_probe"
    data_dir = "/work/probe_work/data"      # relative paths are relative to the spec file
    work_dir = "/work/probe_work/runs"      # checkpoints
    seed = 0
    block_size = 256
    batch_size = 8
    threads = 1                              # per run
    compile = true
    bf16 = true
    eval_tokens = 32768                      # per eval set

    [pt]
    sizes = ["50k", "100k", "200k", "450k"]
    tokens_per_param = 40                    # or: tokens = 2e6, or tokens = {"50k" = 2e6, ...}
    mixture = {general = 1.0}
    schedule = {kind = "wsd", peak_lr = 3e-3, warmup_fraction = 0.05, decay_fraction = 0.2, final_lr = 3e-4}
    evals = 10                               # evaluations along the run
    save_at_lr_fractions = []                # extra "loss potential" checkpoints

    [cpt]
    domains = ["legal", "code"]
    ratios = [0, 0.125, 0.25, 0.5, 0.75, 1]   # domain share R of the CPT mixture
    replay = "general"                          # the corpus that fills 1 - R
    tokens = 1e6                                # CPT length (or tokens_per_param)
    schedules = [{kind = "constant", peak_lr = 3e-4, warmup_fraction = 0.02, start_lr = 3e-4}]
    parent = "final"                            # or "lrfrac0.1": start from a loss-potential checkpoint
    evals = 16
    eval_log_points = 6

A schedule table holds :class:`mixlaw.schedules.Schedule` fields except ``total_steps`` (from the token budget);
``warmup_fraction`` / ``decay_fraction`` are shares of the run's steps. Run ids are
``<name>-<size>-pt`` and ``<name>-<size>-cpt-<domain>-r<R>[-s<k>]``.
"""

from __future__ import annotations

import math
import time
import tomllib
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mixlaw.errors import InputError
from mixlaw.probe.model import GPT, SIZES, gpt_config
from mixlaw.probe.train import RunConfig, checkpoint_path, train_run
from mixlaw.runs.store import RunStore
from mixlaw.schedules import Schedule

__all__ = ["Job", "SweepSpec", "load_spec", "plan", "run_sweep", "sweep_status"]


@dataclass(frozen=True)
class Job:
    """One run of a sweep and the run it depends on (its CPT parent)."""

    config: RunConfig
    depends_on: str | None = None

    @property
    def run_id(self) -> str:
        return self.config.run_id

    @property
    def tokens(self) -> int:
        return self.config.get_schedule().total_steps * self.config.block_size * self.config.batch_size


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec (see the module docstring)."""

    raw: Mapping[str, Any]
    path: Path | None = None

    def section(self, name: str) -> Mapping[str, Any]:
        sec = self.raw.get(name, {})
        if not isinstance(sec, Mapping):
            raise InputError(f"expected a table [{name}]", file=str(self.path) if self.path else None)
        return sec


def load_spec(path: str | Path, *, data_dir: str | Path | None = None, work_dir: str | Path | None = None) -> SweepSpec:
    """Read a TOML sweep spec; ``data_dir`` / ``work_dir`` override ``[sweep]`` (absolute paths)."""
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise InputError("sweep spec not found", file=str(p)) from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"invalid TOML: {e}", file=str(p)) from None
    sweep = dict(raw.get("sweep", {}))
    if data_dir is not None:
        sweep["data_dir"] = str(Path(data_dir).resolve())
    if work_dir is not None:
        sweep["work_dir"] = str(Path(work_dir).resolve())
    raw["sweep"] = sweep
    return SweepSpec(raw, p)


def _schedule(table: Mapping[str, Any], steps: int, where: str) -> Schedule:
    if isinstance(table, str):
        table = {"spec": table}
    d = dict(table)
    if "spec" in d:
        spec = str(d.pop("spec"))
        spec = spec + ("," if ":" in spec else ":") + f"steps={steps}"
        return Schedule.parse(spec)
    wf = d.pop("warmup_fraction", None)
    df = d.pop("decay_fraction", None)
    if wf is not None:
        d["warmup_steps"] = max(1, int(round(float(wf) * steps))) if float(wf) > 0 else 0
    if df is not None:
        d["decay_steps"] = max(1, int(round(float(df) * steps)))
    d["total_steps"] = steps
    try:
        return Schedule(**d)
    except TypeError as e:
        raise InputError(f"bad schedule table in {where}: {e}") from None


def _tokens(sec: Mapping[str, Any], size: str, n_params: int, where: str) -> int:
    if "tokens" in sec:
        t = sec["tokens"]
        if isinstance(t, Mapping):
            if size not in t:
                raise InputError(f"[{where}].tokens has no entry for size {size!r}")
            t = t[size]
        return int(float(t))
    if "tokens_per_param" in sec:
        return int(float(sec["tokens_per_param"]) * n_params)
    raise InputError(f"[{where}] needs tokens or tokens_per_param")


def _ratio_tag(r: float) -> str:
    return f"{r:.4g}"


def plan(spec: SweepSpec) -> list[Job]:
    """Expand a spec into jobs: PT per size; CPT per size × domain × ratio × schedule."""
    sw, pt, cpt = spec.section("sweep"), spec.section("pt"), spec.section("cpt")
    base_dir = spec.path.parent if spec.path is not None else Path.cwd()

    def path_of(key: str, default: str) -> str:
        p = Path(str(sw.get(key, default)))
        return str(p if p.is_absolute() else (base_dir / p).resolve())

    name = str(sw.get("name", "sweep"))
    data_dir, work_dir = path_of("data_dir", "data"), path_of("work_dir", "runs")
    common: dict[str, Any] = {
        "data_dir": data_dir,
        "work_dir": work_dir,
        "seed": int(sw.get("seed", 0)),
        "block_size": int(sw.get("block_size", 256)),
        "batch_size": int(sw.get("batch_size", 8)),
        "threads": int(sw.get("threads", 1)),
        "compile": bool(sw.get("compile", False)),
        "bf16": bool(sw.get("bf16", False)),
        "eval_tokens": int(sw.get("eval_tokens", 16384)),
        "device": str(sw.get("device", "cpu")),
    }
    if "eval_sets" in sw:
        common["eval_sets"] = tuple(sw["eval_sets"])
    tps = common["block_size"] * common["batch_size"]
    sizes = pt.get("sizes")
    if not sizes:
        raise InputError("[pt].sizes is required", file=str(spec.path) if spec.path else None)
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        raise InputError(f"unknown sizes {bad}; expected some of {list(SIZES)}")
    jobs: list[Job] = []
    for size in sizes:
        n_params = GPT(gpt_config(size, vocab_size=8, block_size=8)).n_params  # independent of the vocabulary
        pt_steps = max(1, _tokens(pt, size, n_params, "pt") // tps)
        pt_id = f"{name}-{size}-pt"
        sched = _schedule(pt.get("schedule", {"kind": "constant", "peak_lr": 3e-3}), pt_steps, "[pt].schedule")
        jobs.append(
            Job(
                RunConfig(
                    run_id=pt_id,
                    size=size,
                    mixture=dict(pt.get("mixture", {"general": 1.0})),
                    schedule=sched.to_dict(),
                    phase="pt",
                    eval_every=max(1, pt_steps // int(pt.get("evals", 10))),
                    eval_log_points=int(pt.get("eval_log_points", 0)),
                    save_at_lr_fractions=tuple(float(f) for f in pt.get("save_at_lr_fractions", ())),
                    meta={"sweep": name, "domain": "none", "ratio": 0.0},
                    **common,
                )
            )
        )
        if not cpt:
            continue
        replay = str(cpt.get("replay", "general"))
        parent_ck = str(checkpoint_path(work_dir, pt_id, str(cpt.get("parent", "final"))))
        scheds = cpt.get("schedules", [cpt.get("schedule", {"kind": "constant", "peak_lr": 3e-4})])
        cpt_steps = max(1, _tokens(cpt, size, n_params, "cpt") // tps)
        for domain in cpt.get("domains", []):
            for r in cpt.get("ratios", [0.5]):
                r = float(r)
                if not 0.0 <= r <= 1.0:
                    raise InputError(f"[cpt].ratios must lie in [0, 1], got {r}")
                mixture = {replay: 1.0 - r, str(domain): r}
                for k, st in enumerate(scheds):
                    sid = f"{name}-{size}-cpt-{domain}-r{_ratio_tag(r)}" + (f"-s{k}" if len(scheds) > 1 else "")
                    jobs.append(
                        Job(
                            RunConfig(
                                run_id=sid,
                                size=size,
                                mixture=mixture,
                                schedule=_schedule(st, cpt_steps, "[cpt].schedules").to_dict(),
                                phase="cpt",
                                parent_run=pt_id,
                                parent_checkpoint=parent_ck,
                                eval_every=max(1, cpt_steps // int(cpt.get("evals", 16))),
                                eval_log_points=int(cpt.get("eval_log_points", 0)),
                                meta={"sweep": name, "domain": str(domain), "ratio": r, "schedule_index": k},
                                **common,
                            ),
                            depends_on=pt_id,
                        )
                    )
    ids = [j.run_id for j in jobs]
    if len(set(ids)) != len(ids):
        raise InputError("the spec expands to duplicate run ids (repeated sizes, domains or ratios?)")
    return jobs


# ---------------------------------------------------------------------------------------------------------------
# Execution
# ---------------------------------------------------------------------------------------------------------------


def _log_line(log_path: str | None, text: str) -> None:
    if log_path:
        with open(log_path, "a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {text}\n")


def _execute(config: RunConfig, store_path: str, log_path: str | None) -> tuple[str, str, str | None]:
    """Worker entry point: run one job against the store at ``store_path``; never raises."""
    store = RunStore(store_path)
    try:
        t0 = time.perf_counter()

        def progress(r: Mapping[str, Any]) -> None:
            losses = " ".join(f"{k[5:]}={v:.4f}" for k, v in r.items() if k.startswith("loss_"))
            _log_line(
                log_path,
                f"{r['run_id']} step {r['step']}/{r['total_steps']} {r['tokens_per_s']:,.0f} tok/s {losses}",
            )

        status = train_run(config, store, progress=progress)
        _log_line(log_path, f"{config.run_id} {status} in {time.perf_counter() - t0:.0f}s")
        return config.run_id, status, None
    except Exception as e:  # a failed run must not take the sweep down; it is recorded and reported
        msg = f"{type(e).__name__}: {e}"
        try:
            if store.has_run(config.run_id):
                store.set_status(config.run_id, "failed", message=msg)
        finally:
            _log_line(log_path, f"{config.run_id} FAILED {msg}\n{traceback.format_exc()}")
        return config.run_id, "failed", msg
    finally:
        store.close()


def _order(jobs: Sequence[Job]) -> list[Job]:
    # PTs first (they gate everything), largest first; then CPTs, largest model first (longest runs early)
    def key(j: Job) -> tuple[int, int]:
        return (0 if j.depends_on is None else 1, -list(SIZES).index(j.config.size))

    return sorted(jobs, key=key)


def run_sweep(
    jobs: Sequence[Job],
    store_path: str | Path,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    log_path: str | Path | None = None,
    on_event: Callable[[str, str, str | None], None] | None = None,
    on_tick: Callable[[], None] | None = None,
    tick_s: float = 5.0,
) -> dict[str, str]:
    """Execute jobs, parents before children, skipping finished runs and resuming interrupted ones.

    Parameters
    ----------
    jobs
        From :func:`plan`.
    store_path
        SQLite RunStore path (each worker opens its own connection).
    workers
        1 = sequential in this process; N > 1 = a pool of N processes (``spawn`` context, so no state leaks
        from the parent); with ``ray_address`` the number of concurrent Ray tasks.
    ray_address
        Run on a Ray cluster (``"auto"``, ``"ray://host:10001"``, or ``"local"`` for a fresh local instance).
        Needs the optional extra ``mixlaw[ray]``.
    log_path
        Append one line per evaluation chunk and per finished run.
    on_event
        Called with ``(run_id, status, message)`` when a job ends (for progress displays).
    on_tick, tick_s
        Called about every ``tick_s`` seconds while parallel jobs run (e.g. to poll the store for progress).

    Returns
    -------
    dict
        run_id -> ``"finished"``, ``"failed"`` or ``"skipped"`` (parent failed).
    """
    store_path = str(store_path)
    log = str(log_path) if log_path is not None else None
    ordered = _order(jobs)
    results: dict[str, str] = {}
    with RunStore(store_path) as store:
        for j in ordered:
            if store.run_status(j.run_id) == "finished":
                results[j.run_id] = "finished"
    pending = [j for j in ordered if j.run_id not in results]

    def ready(j: Job) -> bool | None:
        """True: can start; False: wait; None: parent failed."""
        if j.depends_on is None or results.get(j.depends_on) == "finished":
            return True
        if results.get(j.depends_on) in ("failed", "skipped"):
            return None
        if j.depends_on not in {p.run_id for p in jobs}:  # external parent: its checkpoint must exist
            return Path(str(j.config.parent_checkpoint)).exists() or None
        return False

    def done(rid: str, status: str, msg: str | None) -> None:
        results[rid] = status
        if on_event is not None:
            on_event(rid, status, msg)

    if ray_address is not None:
        _run_ray(pending, store_path, log, workers, ray_address, ready, done, on_tick, tick_s)
        return results
    if workers <= 1:
        while pending:
            nxt = next((j for j in pending if ready(j) is not False), None)
            if nxt is None:  # pragma: no cover - cannot happen with a parent-first order
                raise InputError("sweep has jobs whose parents are not in the sweep")
            pending.remove(nxt)
            if ready(nxt) is None:
                done(nxt.run_id, "skipped", f"parent {nxt.depends_on} did not finish")
                continue
            done(*_execute(nxt.config, store_path, log))
        return results

    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    running: dict[Future[tuple[str, str, str | None]], str] = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        while pending or running:
            _launch_ready(
                pending, running, workers, ready, done, lambda j: pool.submit(_execute, j.config, store_path, log)
            )
            if not running:
                if pending:
                    raise InputError("sweep has jobs whose parents are not in the sweep")
                break
            finished, _ = wait(list(running), timeout=tick_s, return_when=FIRST_COMPLETED)
            if on_tick is not None:
                on_tick()
            for f in finished:
                running.pop(f)
                done(*f.result())
    return results


def _launch_ready(
    pending: list[Job],
    running: dict[Any, str],
    cap: int,
    ready: Callable[[Job], bool | None],
    done: Callable[[str, str, str | None], None],
    submit: Callable[[Job], Any],
) -> None:
    """Start every ready job (parent finished) until ``cap`` run at once; skip jobs whose parent failed.

    Shared by the process-pool and the Ray executors: only how a job is submitted differs between them.
    """
    for j in list(pending):
        if len(running) >= cap:
            break
        r = ready(j)
        if r is None:
            pending.remove(j)
            done(j.run_id, "skipped", f"parent {j.depends_on} did not finish")
        elif r:
            pending.remove(j)
            running[submit(j)] = j.run_id


def _run_ray(
    pending: list[Job],
    store_path: str,
    log: str | None,
    workers: int,
    address: str,
    ready: Callable[[Job], bool | None],
    done: Callable[[str, str, str | None], None],
    on_tick: Callable[[], None] | None,
    tick_s: float,
) -> None:
    try:
        import ray
    except ImportError:
        raise InputError("Ray sweeps need the optional extra: pip install 'mixlaw[ray]'") from None
    if not ray.is_initialized():
        if address == "local":
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    remote = ray.remote(num_cpus=1)(_execute)
    running: dict[Any, str] = {}
    cap = max(1, workers)
    while pending or running:
        _launch_ready(
            pending,
            running,
            cap,
            ready,
            done,
            lambda j: remote.options(num_cpus=j.config.threads).remote(j.config, store_path, log),
        )
        if not running:
            if pending:
                raise InputError("sweep has jobs whose parents are not in the sweep")
            break
        finished, _ = ray.wait(list(running), num_returns=1, timeout=tick_s)
        if on_tick is not None:
            on_tick()
        for ref in finished:
            running.pop(ref)
            done(*ray.get(ref))


def sweep_status(jobs: Sequence[Job], store_path: str | Path) -> list[dict[str, Any]]:
    """One dict per job: run_id, phase, size, status (``pending`` if not in the store), last_step, total_steps."""
    out: list[dict[str, Any]] = []
    with RunStore(str(store_path)) as store:
        for j in jobs:
            total = j.config.get_schedule().total_steps
            out.append(
                {
                    "run_id": j.run_id,
                    "phase": j.config.phase,
                    "size": j.config.size,
                    "status": store.run_status(j.run_id) or "pending",
                    "last_step": store.last_step(j.run_id),
                    "total_steps": total,
                    "tokens": j.tokens,
                }
            )
    return out


def estimate_seconds(jobs: Sequence[Job], tokens_per_s: Mapping[str, float]) -> float:
    """Worker-seconds for ``jobs`` given a training throughput per size (evaluations not counted)."""
    return math.fsum(j.tokens / tokens_per_s[j.config.size] for j in jobs)
