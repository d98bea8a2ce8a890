"""Executing a sweep: parents before children, each run trained by exactly one process.

Several ``mixlaw probe run`` processes (or Ray tasks, or pool workers) may share one RunStore. Before training a
run a worker takes its *claim* (:meth:`mixlaw.runs.store.RunStore.claim`, one transaction) and keeps it alive
with heartbeats from a background thread (:class:`Lease`); a run claimed elsewhere is *waited for*, not trained
again, and its children start once the store says it finished. A worker that is killed stops sending
heartbeats: after the lease expires another worker takes the run over and resumes it from its checkpoint. A
worker that finds its claim gone (it was suspended past the lease and another took over) writes nothing more.
"""

from __future__ import annotations

import math
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mixlaw.errors import InputError, MixlawError
from mixlaw.probe.model import SIZES
from mixlaw.probe.train import RunConfig, train_run
from mixlaw.runs.claims import DEFAULT_LEASE_S, new_owner
from mixlaw.runs.store import RunStore

__all__ = ["ClaimLost", "Job", "Lease", "estimate_seconds", "run_sweep", "sweep_status"]

Result = tuple[str, str, str | None]  # (run_id, status, message)


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


class ClaimLost(MixlawError, RuntimeError):
    """This worker's claim on a run expired and another worker took the run over."""


class Lease:
    """Keeps a run claim alive from a daemon thread (its own store connection) until :meth:`stop`."""

    def __init__(self, store_path: str, run_id: str, owner: str, lease_s: float) -> None:
        self.store_path, self.run_id, self.owner, self.lease_s = store_path, run_id, owner, lease_s
        self._stop = threading.Event()
        self._lost = False
        self._thread = threading.Thread(target=self._beat, name=f"lease-{run_id}", daemon=True)

    def start(self) -> Lease:
        self._thread.start()
        return self

    def _beat(self) -> None:
        with RunStore(self.store_path) as store:
            while not self._stop.wait(self.lease_s / 3):
                try:
                    if not store.heartbeat(self.run_id, self.owner, lease_s=self.lease_s):
                        self._lost = True
                        return
                except InputError:  # store busy past the timeout: try again at the next beat
                    continue

    def check(self) -> None:
        """Raise :class:`ClaimLost` once the claim is gone (called before every chunk and store write)."""
        if self._lost:
            raise ClaimLost(f"run {self.run_id}: the claim of {self.owner} expired and another worker took it")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _log_line(log_path: str | None, text: str) -> None:
    if log_path:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {text}\n")


def _execute(config: RunConfig, store_path: str, log_path: str | None, lease_s: float = DEFAULT_LEASE_S) -> Result:
    """Worker entry point: claim one run, train it, release it; never raises.

    Returns ``(run_id, status, message)`` with status ``finished``, ``failed`` or ``busy`` (claimed by another
    worker: not trained here)."""
    rid = config.run_id
    owner = new_owner()
    store = RunStore(store_path)
    lease: Lease | None = None
    try:
        why = store.claim(rid, owner, lease_s=lease_s)
        if why == "finished":
            return rid, "finished", None
        if why is not None:
            return rid, "busy", why
        lease = Lease(store_path, rid, owner, lease_s).start()
        t0 = time.perf_counter()

        def progress(r: Mapping[str, Any]) -> None:
            losses = " ".join(f"{k[5:]}={v:.4f}" for k, v in r.items() if k.startswith("loss_"))
            _log_line(log_path, f"{rid} step {r['step']}/{r['total_steps']} {r['tokens_per_s']:,.0f} tok/s {losses}")

        status = train_run(config, store, progress=progress, guard=lease.check)
        _log_line(log_path, f"{rid} {status} in {time.perf_counter() - t0:.0f}s by {owner}")
        return rid, status, None
    except ClaimLost as e:
        _log_line(log_path, f"{rid} handed over: {e}")
        return rid, "busy", str(e)
    except Exception as e:  # a failed run must not take the sweep down; it is recorded and reported
        msg = f"{type(e).__name__}: {e}"
        try:  # only the claim holder marks a run failed, and never a finished one
            if store.holds(rid, owner) and store.has_run(rid) and store.run_status(rid) != "finished":
                store.set_status(rid, "failed", message=msg)
        except MixlawError:
            pass
        _log_line(log_path, f"{rid} FAILED {msg}\n{traceback.format_exc()}")
        return rid, "failed", msg
    finally:
        if lease is not None:
            lease.stop()
        try:
            store.release(rid, owner)
        except MixlawError:
            pass  # the lease expires on its own
        store.close()


def _order(jobs: Sequence[Job]) -> list[Job]:
    # PTs first (they gate everything), largest first; then CPTs, largest model first (longest runs early)
    def key(j: Job) -> tuple[int, int]:
        return (0 if j.depends_on is None else 1, -list(SIZES).index(j.config.size))

    return sorted(jobs, key=key)


class _Scheduler:
    """Which jobs may start, which wait on a run another worker trains, and what became of each."""

    def __init__(self, jobs: Sequence[Job], store_path: str, on_event: Callable[[str, str, str | None], None] | None):
        self.store_path, self.on_event = store_path, on_event
        self.ids = {j.run_id for j in jobs}
        self.results: dict[str, str] = {}
        self.waiting: dict[str, tuple[Job, float]] = {}  # run_id -> (job, since when)
        with RunStore(store_path) as store:
            store.reap()  # a worker killed between storing "finished" and releasing leaves its claim behind
            finished = {j.run_id for j in jobs if store.run_status(j.run_id) == "finished"}
        self.results.update(dict.fromkeys(finished, "finished"))
        self.pending = [j for j in _order(jobs) if j.run_id not in finished]

    def ready(self, j: Job) -> bool | None:
        """True: can start; False: wait; None: its parent failed."""
        parent = j.depends_on
        if parent is None or self.results.get(parent) == "finished":
            return True
        if self.results.get(parent) in ("failed", "skipped"):
            return None
        if parent not in self.ids:  # external parent: its checkpoint must exist
            return Path(str(j.config.parent_checkpoint)).exists() or None
        return False

    def done(self, rid: str, status: str, msg: str | None) -> None:
        self.results[rid] = status
        if self.on_event is not None:
            self.on_event(rid, status, msg)

    def finish(self, job: Job, result: Result) -> None:
        rid, status, msg = result
        if status == "busy":
            self.waiting[rid] = (job, time.time())
        else:
            self.done(rid, status, msg)

    def poll(self) -> None:
        """Settle runs trained elsewhere: finished or failed there, or back to pending if nobody holds them."""
        if not self.waiting:
            return
        with RunStore(self.store_path) as store:
            live = {c["run_id"] for c in store.claims() if not c["expired"]}
            for rid, (job, since) in list(self.waiting.items()):
                info = store.status_info(rid)
                if info is not None and info[0] == "finished":
                    del self.waiting[rid]
                    self.done(rid, "finished", "trained by another worker")
                elif rid in live:
                    continue
                elif info is not None and info[0] == "failed" and info[2] >= since:
                    del self.waiting[rid]
                    self.done(rid, "failed", f"failed in another worker: {info[1]}")
                else:  # its worker is gone and the lease expired: take the run over (it resumes)
                    del self.waiting[rid]
                    self.pending.insert(0, job)

    def launch(self, running: dict[Any, Job], cap: int, submit: Callable[[Job], Any]) -> None:
        """Start every ready job until ``cap`` run at once; skip jobs whose parent failed."""
        for j in list(self.pending):
            if len(running) >= cap:
                break
            r = self.ready(j)
            if r is None:
                self.pending.remove(j)
                self.done(j.run_id, "skipped", f"parent {j.depends_on} did not finish")
            elif r:
                self.pending.remove(j)
                running[submit(j)] = j


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
    lease_s: float = DEFAULT_LEASE_S,
    poll_s: float = 2.0,
) -> dict[str, str]:
    """Execute jobs, parents before children, skipping finished runs and resuming interrupted ones.

    Parameters
    ----------
    jobs
        From :func:`mixlaw.probe.sweep.plan`.
    store_path
        SQLite RunStore path (each worker opens its own connection). Other sweeps may use it at the same time:
        a run is trained by the worker holding its claim, and waited for by the others.
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
    lease_s
        Life of a run claim without heartbeats (they come every ``lease_s / 3``): how long a killed worker's
        runs stay blocked before another worker takes them over.
    poll_s
        How often runs trained by other workers are checked.

    Returns
    -------
    dict
        run_id -> ``"finished"`` (here or by another worker), ``"failed"`` or ``"skipped"`` (parent failed).
    """
    store_path = str(store_path)
    log = str(log_path) if log_path is not None else None
    sched = _Scheduler(jobs, store_path, on_event)
    if ray_address is not None:
        submit, wait, cap = _ray_executor(store_path, log, lease_s, workers, ray_address)
        _drive(sched, cap, submit, wait, on_tick, tick_s, poll_s)
        return sched.results
    if workers <= 1:
        results: dict[Any, Result] = {}

        def run_now(j: Job) -> int:
            results[len(results)] = _execute(j.config, store_path, log, lease_s)
            return len(results) - 1

        def collect(running: dict[Any, Job], timeout: float) -> list[tuple[Any, Result]]:
            return [(h, results.pop(h)) for h in list(running)]

        _drive(sched, 1, run_now, collect, None, tick_s, poll_s)
        return sched.results

    import multiprocessing as mp
    import os
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
    from concurrent.futures import wait as fwait

    from mixlaw.probe.orphans import exit_with_parent

    with ProcessPoolExecutor(
        max_workers=workers, mp_context=mp.get_context("spawn"), initializer=exit_with_parent,
        initargs=(os.getpid(),),
    ) as pool:  # fmt: skip  (workers end when the sweep process dies: no orphans)

        def submit(j: Job) -> Future[Result]:
            return pool.submit(_execute, j.config, store_path, log, lease_s)

        def collect_pool(running: dict[Any, Job], timeout: float) -> list[tuple[Any, Result]]:
            finished, _ = fwait(list(running), timeout=timeout, return_when=FIRST_COMPLETED)
            return [(f, f.result()) for f in finished]

        _drive(sched, workers, submit, collect_pool, on_tick, tick_s, poll_s)
    return sched.results


def _drive(
    sched: _Scheduler,
    cap: int,
    submit: Callable[[Job], Any],
    collect: Callable[[dict[Any, Job], float], list[tuple[Any, Result]]],
    on_tick: Callable[[], None] | None,
    tick_s: float,
    poll_s: float,
) -> None:
    """The one dispatch loop of every executor: only how a job is submitted and collected differs."""
    running: dict[Any, Job] = {}
    while sched.pending or running or sched.waiting:
        sched.launch(running, cap, submit)
        if running:
            for handle, result in collect(running, min(tick_s, poll_s) if sched.waiting else tick_s):
                sched.finish(running.pop(handle), result)
            if on_tick is not None:
                on_tick()
        elif sched.waiting:
            time.sleep(poll_s)  # nothing to start here: runs (or their parents) are trained elsewhere
        elif sched.pending:
            raise InputError("sweep has jobs whose parents are not in the sweep")
        sched.poll()


def _ray_executor(
    store_path: str, log: str | None, lease_s: float, workers: int, address: str
) -> tuple[Callable[[Job], Any], Callable[[dict[Any, Job], float], list[tuple[Any, Result]]], int]:
    try:
        import ray
    except ImportError:
        raise InputError("Ray sweeps need the optional extra: pip install 'mixlaw[ray]'") from None
    if not ray.is_initialized():
        if address == "local":
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    remote: Any = ray.remote(num_cpus=1)(_execute)

    def submit(j: Job) -> Any:
        return remote.options(num_cpus=j.config.threads).remote(j.config, store_path, log, lease_s)

    def collect(running: dict[Any, Job], timeout: float) -> list[tuple[Any, Result]]:
        finished, _ = ray.wait(list(running), num_returns=1, timeout=timeout)
        return [(ref, ray.get(ref)) for ref in finished]

    return submit, collect, max(1, workers)


def sweep_status(jobs: Sequence[Job], store_path: str | Path) -> list[dict[str, Any]]:
    """One dict per job: run_id, phase, size, status (``pending`` if not in the store), last_step, total_steps."""
    out: list[dict[str, Any]] = []
    missing = str(store_path) != ":memory:" and not Path(store_path).exists()  # reading never creates a store
    with RunStore(":memory:" if missing else str(store_path)) as store:
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
