"""Entry points: :func:`critical_mixture_ratio` (one domain) and :func:`critical_mixture_ratio_by_domain`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.cmr.common import DEFAULT_EPSILONS, DEFAULT_LAMBDAS, CMRSettings, check_args
from mixlaw.decide.cmr.data import has_control, prepare_increments, resolve_columns
from mixlaw.decide.cmr.data import relative_to_control as _relative
from mixlaw.decide.cmr.pipeline import cmr_size_trend, decide_size
from mixlaw.decide.cmr.ratio import resolve_ratio_law
from mixlaw.decide.cmr.result import CMRDecision, SizeCMR
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = ["critical_mixture_ratio", "critical_mixture_ratio_by_domain"]


def critical_mixture_ratio(
    table: pd.DataFrame,
    *,
    general_eval: str,
    domain_eval: str,
    ratio_column: str | None = None,
    size_column: str | None = None,
    epsilon: float = 0.05,
    lagrange_mult: float = math.inf,
    budget_tokens: float | None = None,
    token_unit: float | None = None,
    ratio_law: str = "auto",
    c_method: str = "fit",
    pin_zero: bool = False,
    fit_loss: str = "l2",
    bootstrap: int = 0,
    level: float = 0.95,
    t0_search_factor: float = 10.0,
    sensitivity_lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    sensitivity_epsilons: Sequence[float] = DEFAULT_EPSILONS,
    random_state: int | np.random.Generator | None = None,
    relative_to_control: bool = False,
    control_reading: bool = True,
    validate: bool = False,
    progress: Callable[[Any, int], None] | None = None,
    batched: bool = True,
    solver: SolverOptions = DEFAULT_SOLVER,
) -> CMRDecision:
    """Critical mixture ratio per model size, with bootstrap intervals and a λ × ε sensitivity table.

    Parameters
    ----------
    table
        A RunTable: one row per (run, evaluation) with ``tokens``, the two loss columns, the ratio column and,
        optionally, ``run_id``, ``step``, ``phase``, ``parent_run`` and a size column.
    general_eval, domain_eval
        Loss columns (``loss_`` prefix optional).
    ratio_column
        Domain share of the CPT mix; default ``w_<domain>`` (then ``ratio``).
    size_column
        Default ``n_params`` when present, else one size.
    epsilon
        Tolerated rise of the general loss at the budget (nats/token; default 0.05 as in the paper).
    lagrange_mult
        λ of the stationarity condition; ``inf`` (default) puts ``T0`` at the peak of ``ΔL_gen``.
    budget_tokens
        CPT budget ``T_max`` in tokens; default the median final token count of the size's runs.
    token_unit
        Tokens per ``T`` unit of the token-axis laws; default ``budget / 100``.
    ratio_law, c_method
        A registered ratio law (``ratio_power``/``power``, ``ratio_exp``/``exp``) or ``"auto"`` (default): the
        one whose fit of the end-of-budget general loss is closest to the observations in noise units.
    pin_zero
        Pin ``ΔL(0) = 0`` in the increment laws (default False: the paper's free offsets, fitted on ``T > 0``).
    fit_loss
        ``"l2"`` (default; exact profiled least squares) or ``"huber"`` (engine fits).
    bootstrap
        Number of residual-bootstrap resamples (0: no intervals); every resample's refits are batched per size.
    relative_to_control
        Increments relative to the R = 0 control run of each size (``ΔL − ΔL_control``): the effect of the domain
        share, without the continued learning that general replay alone brings to an under-trained base.
    control_reading
        When a control exists, also decide on the other reading (relative when ``relative_to_control`` is False,
        absolute otherwise) and keep it per size in ``SizeCMR.control_reading``.
    validate
        Held-out checks (:func:`mixlaw.decide.cmr.validate.validate_decision`) in ``CMRDecision.validation``.
    progress
        Called as ``progress(size, n_resamples_done)`` after each size.
    batched
        Fit all resamples of a size in one solve per law (default); ``False`` fits them one by one (same answers:
        the reference the batching is tested against).
    solver
        Iteration caps of every fit the decision makes — curves, resample refits, ratio and CMR laws
        (:class:`~mixlaw.options.SolverOptions`, ``--max-iter``); default: each fit's own limit.
    """
    if not isinstance(table, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(table).__name__}")
    check_args(epsilon, lagrange_mult, budget_tokens, bootstrap, level)
    if ratio_law != "auto":
        resolve_ratio_law(ratio_law)
    if c_method not in ("fit", "corr_grid"):
        raise InputError(f"c_method must be 'fit' or 'corr_grid', got {c_method!r}")
    cols = resolve_columns(table, general_eval, domain_eval, ratio_column, size_column)
    inc_abs = prepare_increments(table, cols)
    inc = _relative(inc_abs) if relative_to_control else inc_abs
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    settings = CMRSettings(
        epsilon=epsilon, lagrange_mult=lagrange_mult, budget_tokens=budget_tokens, token_unit=token_unit,
        ratio_law=ratio_law, c_method=c_method, pin_zero=pin_zero, fit_loss=fit_loss, level=level,
        t0_search_factor=t0_search_factor, batched=batched, solver=solver,
    )  # fmt: skip
    other = None
    if control_reading and has_control(inc_abs):
        other = inc_abs if relative_to_control else relative_to_control_safe(inc_abs)
    sizes: list[SizeCMR] = []
    sens_rows: list[dict[str, Any]] = []
    boot_by_size: dict[Any, np.ndarray] = {}
    for size in sorted(inc["size"].unique(), key=lambda v: (str(type(v)), v)):
        s, sens, boot, _ = decide_size(inc, size, settings, bootstrap=bootstrap, rng=rng,
                                       sensitivity_lambdas=sensitivity_lambdas,
                                       sensitivity_epsilons=sensitivity_epsilons)  # fmt: skip
        if other is not None and (other["size"] == size).any():
            o, _, _, _ = decide_size(other, size, settings, bootstrap=bootstrap, rng=rng, sensitivity_lambdas=(),
                                     sensitivity_epsilons=())  # fmt: skip
            s = _with_reading(s, o, "relative to the R = 0 control" if not relative_to_control else "absolute")
        sizes.append(s)
        sens_rows += sens
        if boot is not None:
            boot_by_size[size] = boot
        if progress is not None:
            progress(size, bootstrap)
    recorded = {
        "general_eval": cols.general, "domain_eval": cols.domain, "ratio_column": cols.ratio,
        "size_column": cols.size, "epsilon": epsilon, "lagrange_mult": "inf" if math.isinf(lagrange_mult) else
        lagrange_mult, "budget_tokens": budget_tokens, "ratio_law": ratio_law, "c_method": c_method,
        "pin_zero": pin_zero, "fit_loss": fit_loss, "bootstrap": bootstrap,
        "bootstrap_unit": "residuals within each run (shared index for general/domain)", "level": level,
        "t0_search_factor": t0_search_factor, "relative_to_control": relative_to_control,
        "increments": (
            "relative to the R = 0 control" if relative_to_control else "absolute (from each run's T = 0)"
        ),
    }  # fmt: skip
    dec = CMRDecision(sizes=sizes, settings=recorded, increments=inc, sensitivity=pd.DataFrame(sens_rows),
                      trend=cmr_size_trend(sizes, boot_by_size, level=level))  # fmt: skip
    if validate:
        from dataclasses import replace

        from mixlaw.decide.cmr.validate import validate_decision

        dec = replace(dec, validation=validate_decision(dec, inc, settings, bootstrap=bootstrap, rng=rng))
    return dec


def relative_to_control_safe(inc: pd.DataFrame) -> pd.DataFrame | None:
    try:
        return _relative(inc)
    except InputError:
        return None


def _with_reading(s: SizeCMR, o: SizeCMR, label: str) -> SizeCMR:
    from dataclasses import replace

    reading = {"reading": label, "cmr": o.cmr, "ci": list(o.ci) if o.ci else None, "status": o.status,
               "cmr_source": o.cmr_source, "tolerance_boundary": o.tolerance_boundary,
               "model_free_crossing": o.model_free_crossing, "weak_reasons": list(o.weak_reasons)}  # fmt: skip
    return replace(s, control_reading=reading)


def critical_mixture_ratio_by_domain(
    table: pd.DataFrame, *, general_eval: str, domain_evals: Sequence[str], workers: int | None = None, **kwargs: Any
) -> dict[str, CMRDecision]:
    """:func:`critical_mixture_ratio` for several domains side by side (``{domain eval: decision}``).

    Each domain uses its own ratio column (``w_<domain>``) and, when the table tags runs with a ``domain``
    column, only its own CPT runs. The paper's finding to look for: a domain closer to the general data allows a
    higher CMR.

    ``workers`` threads decide domains side by side (default: one per domain, at most the CPU count; the heavy
    parts are numpy/torch kernels that release the GIL). Each domain gets its own generator, seeded from
    ``random_state``, so the answer does not depend on the number of workers.
    """
    if not domain_evals:
        raise InputError("give at least one domain eval")
    if kwargs.get("ratio_column") is not None and len(domain_evals) > 1:
        raise InputError("--ratio-column applies to one domain; several domains use w_<domain> each")
    import os

    seed = kwargs.pop("random_state", None)
    ss = seed.bit_generator.seed_seq if isinstance(seed, np.random.Generator) else np.random.SeedSequence(seed)
    seeds = ss.spawn(len(domain_evals))  # type: ignore[union-attr,attr-defined]
    n = max(1, min(len(domain_evals), workers or (os.cpu_count() or 1)))
    progress = kwargs.pop("progress", None)
    jobs = [(table, general_eval, d, seeds[i], kwargs) for i, d in enumerate(domain_evals)]
    if n == 1 or not _can_fork():
        out = [_one_domain(*j, progress=progress) for j in jobs]  # type: ignore[misc]
    else:
        out = _in_processes(jobs, n, progress)
    return dict(zip(domain_evals, out, strict=True))


def _one_domain(table: pd.DataFrame, general_eval: str, domain: str, seed: Any, kwargs: dict[str, Any],
                progress: Callable[[str, Any, int], None] | None = None) -> CMRDecision:  # fmt: skip
    cb = None if progress is None else (lambda size, k: progress(domain, size, k))
    return critical_mixture_ratio(table, general_eval=general_eval, domain_eval=domain,
                                  random_state=np.random.default_rng(seed), progress=cb, **kwargs)  # fmt: skip


def _can_fork() -> bool:
    import multiprocessing as mp

    return "fork" in mp.get_all_start_methods()


def _child(args: tuple[Any, ...]) -> CMRDecision:
    *job, queue = args
    cb = None if queue is None else (lambda d, size, k: queue.put((d, size, k)))
    return _one_domain(*job, progress=cb)  # type: ignore[misc]


def _in_processes(jobs: list[tuple[Any, ...]], n: int, progress: Callable[[str, Any, int], None] | None
                  ) -> list[CMRDecision]:  # fmt: skip
    """One forked worker process per domain (the decision is Python-bound: threads would share one core).
    Progress messages come back through a queue and are reported from this process."""
    import multiprocessing as mp
    import threading
    import warnings

    ctx = mp.get_context("fork")
    manager = ctx.Manager() if progress is not None else None
    manager_q = manager.Queue() if manager is not None else None
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set() or (manager_q is not None and not manager_q.empty()):
            try:
                d, size, k = manager_q.get(timeout=0.1)  # type: ignore[union-attr]
            except Exception:  # queue.Empty
                continue
            progress(d, size, k)  # type: ignore[misc]

    t = threading.Thread(target=drain, daemon=True) if progress is not None else None
    with warnings.catch_warnings():
        # Python ≥ 3.12 warns about fork() in a process with threads (torch may hold idle pool threads); the
        # workers only compute and return, and our own progress thread starts after the fork.
        warnings.simplefilter("ignore", DeprecationWarning)
        pool = ctx.Pool(n)
    try:
        if t is not None:
            t.start()
        out = pool.map(_child, [(*j, manager_q) for j in jobs])
    finally:
        pool.close()
        pool.join()
        stop.set()
        if t is not None and t.is_alive():
            t.join()
        if manager is not None:
            manager.shutdown()
    return out
