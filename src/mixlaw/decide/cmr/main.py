"""Entry points: :func:`critical_mixture_ratio` (one domain) and :func:`critical_mixture_ratio_by_domain`, and the
held-out checks of a decision (:func:`validate_decision`, ``mixlaw cmr --validate``):

1. **Each interior ratio in turn** (per size; not the smallest or largest candidate ratio, not the R = 0 control):
   the ratio laws are refitted without it and predict its end-of-budget general and domain increments. Reported:
   the absolute errors (MAE over all held-out points), whether the observation lies inside the 95 % band (the
   refit's bootstrap over resampled end-of-budget values plus the held-out run's own residual noise), and how far
   the size's CMR moves when the whole decision is rerun without that ratio.
2. **The largest model size**: the CMR-vs-size trend of the other sizes predicts its CMR, and a per-ratio trend
   ``ΔL_gen(budget) = a + b log10 N`` of the other sizes predicts its end-of-budget increments (band: ±1.96 × the
   trend's residual standard deviation, widened by the held-out run's noise).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.cmr.common import (
    DEFAULT_EPSILONS,
    DEFAULT_LAMBDAS,
    DEFAULT_SETTINGS,
    CMRSettings,
    check_args,
    has_control,
    input_ok,
    is_number,
    law_of,
    prepare_increments,
    resolve_columns,
    size_json,
)
from mixlaw.decide.cmr.common import relative_to_control as _relative
from mixlaw.decide.cmr.curves import curve_laws, fit_size
from mixlaw.decide.cmr.decision import budget_values, ratio_rows
from mixlaw.decide.cmr.feasibility import fit_ratio_law_batch, resolve_ratio_law
from mixlaw.decide.cmr.pipeline import cmr_size_trend, decide_size, trend_exclusion
from mixlaw.decide.cmr.result import CMRDecision, SizeCMR
from mixlaw.errors import FitError, InputError

__all__ = [
    "CMRRequest",
    "critical_mixture_ratio",
    "critical_mixture_ratio_by_domain",
    "decide_request",
    "validate_decision",
]


def critical_mixture_ratio(
    table: pd.DataFrame,
    *,
    general_eval: str,
    domain_eval: str,
    settings: CMRSettings = DEFAULT_SETTINGS,
    ratio_column: str | None = None,
    size_column: str | None = None,
    bootstrap: int = 0,
    sensitivity_lambdas: Sequence[float] = DEFAULT_LAMBDAS,
    sensitivity_epsilons: Sequence[float] = DEFAULT_EPSILONS,
    relative_to_control: bool = False,
    control_reading: bool = True,
    validate: bool = False,
    random_state: int | np.random.Generator | None = None,
    progress: Callable[[Any, int], None] | None = None,
) -> CMRDecision:
    """Critical mixture ratio per model size, with bootstrap intervals and a λ × ε sensitivity table.

    Parameters
    ----------
    table
        A RunTable: one row per (run, evaluation) with ``tokens``, the two loss columns, the ratio column and,
        optionally, ``run_id``, ``step``, ``phase``, ``parent_run`` and a size column.
    general_eval, domain_eval
        Loss columns (``loss_`` prefix optional).
    settings
        How each size is decided (:class:`~mixlaw.decide.cmr.common.CMRSettings`, frozen and validated): the
        tolerance ``epsilon`` (nats/token; default 0.05 as in the paper), ``lagrange_mult`` λ of the stationarity
        condition (``inf``: ``T0`` at the peak of ``ΔL_gen``), the CPT budget ``budget_tokens`` (default the median
        final token count of the size's runs) and ``token_unit`` (default ``budget / 100``), the ``ratio_law``
        (``ratio_power``/``power``, ``ratio_exp``/``exp`` or ``"auto"``: the one closest to the end-of-budget
        observations in noise units) and ``c_method``, ``pin_zero`` (pin ``ΔL(0) = 0``; default the paper's free
        offsets, fitted on ``T > 0``), ``fit_loss`` (``"l2"``: exact profiled least squares; ``"huber"``: engine
        fits), the interval ``level``, ``t0_search_factor``, ``batched`` (all resamples of a size in one solve per
        law; ``False`` fits them one by one, the reference) and ``solver`` (iteration caps of every fit).
    ratio_column
        Domain share of the CPT mix; default ``w_<domain>`` (then ``ratio``).
    size_column
        Default ``n_params`` when present, else one size.
    bootstrap
        Number of residual-bootstrap resamples (0: no intervals); every resample's refits are batched per size.
    sensitivity_lambdas, sensitivity_epsilons
        The grid of the λ × ε sensitivity table.
    relative_to_control
        Increments relative to the R = 0 control run of each size (``ΔL − ΔL_control``): the effect of the domain
        share, without the continued learning that general replay alone brings to an under-trained base.
    control_reading
        When a control exists, also decide on the other reading (relative when ``relative_to_control`` is False,
        absolute otherwise) and keep it per size in ``SizeCMR.control_reading``.
    validate
        Held-out checks (:func:`mixlaw.decide.cmr.main.validate_decision`) in ``CMRDecision.validation``.
    random_state
        Seed or generator of the bootstrap.
    progress
        Called as ``progress(size, n_resamples_done)`` after each size.
    """
    if not isinstance(table, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(table).__name__}")
    request = CMRRequest(
        general_eval=general_eval, domain_eval=domain_eval, settings=settings, ratio_column=ratio_column,
        size_column=size_column, bootstrap=bootstrap, sensitivity_lambdas=tuple(sensitivity_lambdas),
        sensitivity_epsilons=tuple(sensitivity_epsilons), relative_to_control=relative_to_control,
        control_reading=control_reading, validate=validate,
    )  # fmt: skip
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    return decide_request(table, request, rng, progress)


@dataclass(frozen=True)
class CMRRequest:
    """One domain's CMR decision — the keyword arguments of :func:`critical_mixture_ratio` but the generator and
    the progress callback — validated once. It is what crosses to a worker process when
    :func:`critical_mixture_ratio_by_domain` decides several domains side by side. :attr:`settings` is the part
    every stage of a size's pipeline reads (:class:`CMRSettings`); the other fields say which columns to read, how
    many resamples to draw and which extra tables to compute."""

    general_eval: str
    domain_eval: str
    settings: CMRSettings = DEFAULT_SETTINGS
    ratio_column: str | None = None
    size_column: str | None = None
    bootstrap: int = 0
    sensitivity_lambdas: tuple[float, ...] = DEFAULT_LAMBDAS
    sensitivity_epsilons: tuple[float, ...] = DEFAULT_EPSILONS
    relative_to_control: bool = False
    control_reading: bool = True
    validate: bool = False

    def __post_init__(self) -> None:
        check_args(self.settings.epsilon, self.settings.lagrange_mult, self.settings.budget_tokens, self.bootstrap,
                   self.settings.level)  # fmt: skip
        if self.settings.ratio_law != "auto":
            resolve_ratio_law(self.settings.ratio_law)
        object.__setattr__(self, "sensitivity_lambdas", tuple(float(v) for v in self.sensitivity_lambdas))
        object.__setattr__(self, "sensitivity_epsilons", tuple(float(v) for v in self.sensitivity_epsilons))



def decide_request(
    table: pd.DataFrame,
    request: CMRRequest,
    rng: np.random.Generator,
    progress: Callable[[Any, int], None] | None = None,
) -> CMRDecision:
    """:func:`critical_mixture_ratio` of a validated :class:`CMRRequest` with the generator ``rng``."""
    if not isinstance(table, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame, got {type(table).__name__}")
    r, settings = request, request.settings
    epsilon, lagrange_mult, budget_tokens, level = (
        settings.epsilon, settings.lagrange_mult, settings.budget_tokens, settings.level)  # fmt: skip
    bootstrap, relative_to_control = r.bootstrap, r.relative_to_control
    cols = resolve_columns(table, r.general_eval, r.domain_eval, r.ratio_column, r.size_column)
    inc_abs = prepare_increments(table, cols)
    inc = _relative(inc_abs) if relative_to_control else inc_abs
    other = None
    if r.control_reading and has_control(inc_abs):
        other = inc_abs if relative_to_control else relative_to_control_safe(inc_abs)
    sizes: list[SizeCMR] = []
    sens_rows: list[dict[str, Any]] = []
    boot_by_size: dict[Any, np.ndarray] = {}
    for size in sorted(inc["size"].unique(), key=lambda v: (str(type(v)), v)):
        s, sens, boot, _ = decide_size(inc, size, settings, bootstrap=bootstrap, rng=rng,
                                       sensitivity_lambdas=r.sensitivity_lambdas,
                                       sensitivity_epsilons=r.sensitivity_epsilons)  # fmt: skip
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
        lagrange_mult, "budget_tokens": budget_tokens, "ratio_law": settings.ratio_law, "c_method": settings.c_method,
        "pin_zero": settings.pin_zero, "fit_loss": settings.fit_loss, "bootstrap": bootstrap,
        "bootstrap_unit": "residuals within each run (shared index for general/domain)", "level": level,
        "t0_search_factor": settings.t0_search_factor, "relative_to_control": relative_to_control,
        "increments": (
            "relative to the R = 0 control" if relative_to_control else "absolute (from each run's T = 0)"
        ),
    }  # fmt: skip
    dec = CMRDecision(sizes=sizes, settings=recorded, increments=inc, sensitivity=pd.DataFrame(sens_rows),
                      trend=cmr_size_trend(sizes, boot_by_size, level=level))  # fmt: skip
    if r.validate:
        dec = replace(dec, validation=validate_decision(dec, inc, settings, bootstrap=bootstrap, rng=rng))
    return dec


def relative_to_control_safe(inc: pd.DataFrame) -> pd.DataFrame | None:
    try:
        return _relative(inc)
    except InputError:
        return None


def _with_reading(s: SizeCMR, o: SizeCMR, label: str) -> SizeCMR:
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

    ``workers`` processes decide domains side by side (default: one per domain, at most the CPU count). Each domain
    gets its own generator, seeded from ``random_state``, so the answer does not depend on the number of workers.
    The other keywords are those of :func:`critical_mixture_ratio`; they are checked here, once, into one frozen
    :class:`CMRRequest` per domain (an unknown keyword or a bad value is a one-line error before any worker starts),
    and that request is what a worker receives.
    """
    if not domain_evals:
        raise InputError("give at least one domain eval")
    import os

    seed = kwargs.pop("random_state", None)
    progress = kwargs.pop("progress", None)
    try:
        base = CMRRequest(general_eval=general_eval, domain_eval=domain_evals[0], **kwargs)
    except TypeError as exc:  # an unknown keyword
        msg = str(exc).replace("CMRRequest.__init__() ", "")
        raise InputError(f"critical_mixture_ratio_by_domain: {msg}") from None
    if base.ratio_column is not None and len(domain_evals) > 1:
        raise InputError("--ratio-column applies to one domain; several domains use w_<domain> each")
    ss = seed.bit_generator.seed_seq if isinstance(seed, np.random.Generator) else np.random.SeedSequence(seed)
    seeds = ss.spawn(len(domain_evals))  # type: ignore[union-attr,attr-defined]
    n = max(1, min(len(domain_evals), workers or (os.cpu_count() or 1)))
    jobs = [(table, replace(base, domain_eval=d), seeds[i]) for i, d in enumerate(domain_evals)]
    if n == 1 or not _can_fork():
        out = [_one_domain(*j, progress=progress) for j in jobs]  # type: ignore[misc]
    else:
        out = _in_processes(jobs, n, progress)
    return dict(zip(domain_evals, out, strict=True))


def _one_domain(table: pd.DataFrame, request: CMRRequest, seed: np.random.SeedSequence,
                progress: Callable[[str, Any, int], None] | None = None) -> CMRDecision:  # fmt: skip
    domain = request.domain_eval
    cb = None if progress is None else (lambda size, k: progress(domain, size, k))
    return decide_request(table, request, np.random.default_rng(seed), cb)


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


def _held_out_ratios(dec: CMRDecision, inc: pd.DataFrame, n_boot: int, rng: np.random.Generator,
                     st: CMRSettings) -> dict[str, Any]:  # fmt: skip
    rows_out: list[dict[str, Any]] = []
    B = max(n_boot, 200)
    for s in dec.sizes:
        if s.ratio_law_general is None or s.ratio_law_domain is None:
            continue
        sf = fit_size(inc, s.n_params, st.budget_tokens, st.token_unit, st.pin_zero, st.fit_loss, solver=st.solver)
        rows = ratio_rows(sf, epsilon=st.epsilon, lagrange_mult=st.lagrange_mult,
                          t0_search_factor=st.t0_search_factor)  # fmt: skip
        r, g, d = budget_values(sf, rows)
        law, dlaw = s.ratio_law_general.law, s.ratio_law_domain.law
        keep = input_ok(law_of(law), {"ratio": r}) & input_ok(law_of(dlaw), {"ratio": r})
        r, g, d = r[keep], g[keep], d[keep]
        cand = sorted(x for x in r if x > 0)
        interior = cand[1:-1]
        if r.size < 4 or not interior:
            continue
        resid = {}
        for c in sf.curves:
            if c.gen_params is None or c.dom_params is None:
                continue
            dl, gl = curve_laws(sf.token_unit, sf.pin_zero, sf.laws)
            rg = c.obs_gen - gl.evaluate({"tokens": c.tokens}, c.gen_params)
            rd = c.obs_dom - dl.evaluate({"tokens": c.tokens}, c.dom_params)
            resid[c.ratio] = (rg, rd)
        for rj in interior:
            j = int(np.flatnonzero(r == rj)[0])
            W = np.ones((B + 1, r.size))
            W[:, j] = 0.0
            eg = np.stack([rng.choice(resid[x][0], size=B) if x in resid else np.zeros(B) for x in r], axis=1)
            ed = np.stack([rng.choice(resid[x][1], size=B) if x in resid else np.zeros(B) for x in r], axis=1)
            G = np.vstack([g[None], g[None] + eg])
            D = np.vstack([d[None], d[None] + ed])
            fg = fit_ratio_law_batch(r, G, law=law, weights=W, c_method=st.c_method, fit_loss=st.fit_loss,
                                     solver=st.solver)  # fmt: skip
            fd = fit_ratio_law_batch(r, D, law=dlaw, weights=W, c_method=st.c_method, fit_loss=st.fit_loss,
                                     solver=st.solver)  # fmt: skip
            if fg[0] is None or fd[0] is None:
                continue
            pg, pdm = float(fg[0].predict(rj)), float(fd[0].predict(rj))
            bg = np.array([float(f.predict(rj)) for f in fg[1:] if f is not None]) + rng.choice(resid[rj][0], size=B)[
                : sum(f is not None for f in fg[1:])]  # fmt: skip
            bd = np.array([float(f.predict(rj)) for f in fd[1:] if f is not None]) + rng.choice(resid[rj][1], size=B)[
                : sum(f is not None for f in fd[1:])]  # fmt: skip
            lo_g, hi_g = np.quantile(bg, [0.025, 0.975]) if bg.size else (pg, pg)
            lo_d, hi_d = np.quantile(bd, [0.025, 0.975]) if bd.size else (pdm, pdm)
            runs = set().union(*[set(c.run_ids) for c in sf.curves if c.ratio == rj])
            try:
                without, _, _, _ = decide_size(inc[~inc["run_id"].isin(runs)], s.n_params, st, bootstrap=0, rng=rng,
                                               sensitivity_lambdas=(), sensitivity_epsilons=())  # fmt: skip
                cmr_wo = without.cmr
            except (FitError, InputError):
                cmr_wo = None
            rows_out.append({
                "n_params": size_json(s.n_params), "ratio": float(rj),
                "observed_dloss_general": float(g[j] - sf.ref_general), "predicted_dloss_general": pg - sf.ref_general,
                "band_general": [float(lo_g) - sf.ref_general, float(hi_g) - sf.ref_general],
                "inside_general": bool(lo_g <= g[j] <= hi_g),
                "observed_dloss_domain": float(d[j] - sf.ref_domain), "predicted_dloss_domain": pdm - sf.ref_domain,
                "band_domain": [float(lo_d) - sf.ref_domain, float(hi_d) - sf.ref_domain],
                "inside_domain": bool(lo_d <= d[j] <= hi_d),
                "cmr": s.cmr, "cmr_without": cmr_wo,
                "cmr_shift": None if cmr_wo is None or s.cmr is None else float(cmr_wo - s.cmr),
            })  # fmt: skip
    if not rows_out:
        return {"n_points": 0, "rows": []}
    eg_ = [abs(x["predicted_dloss_general"] - x["observed_dloss_general"]) for x in rows_out]
    ed_ = [abs(x["predicted_dloss_domain"] - x["observed_dloss_domain"]) for x in rows_out]
    ins = [x["inside_general"] for x in rows_out] + [x["inside_domain"] for x in rows_out]
    shifts = [abs(x["cmr_shift"]) for x in rows_out if x["cmr_shift"] is not None]
    return {"n_points": len(rows_out), "mae_general": float(np.mean(eg_)), "mae_domain": float(np.mean(ed_)),
            "coverage": float(np.mean(ins)), "max_cmr_shift": float(max(shifts)) if shifts else 0.0,
            "rows": rows_out}  # fmt: skip


def _held_out_size(dec: CMRDecision) -> dict[str, Any] | None:
    sizes = [s for s in dec.sizes if is_number(s.n_params)]
    if len(sizes) < 3:
        return None
    last = max(sizes, key=lambda s: float(s.n_params))
    rest = [s for s in sizes if s is not last]
    # Only sizes with a comparable CMR feed the trend (pipeline.trend_exclusion). When fewer than two of the
    # other sizes have one, the tolerance-only reading (defined wherever the observations bracket ε) is trended
    # and compared instead, and ``reading`` says so.
    reading = "headline"
    tr = cmr_size_trend(rest)
    if tr is None:
        reading = "tolerance"
        tr = cmr_size_trend(rest, reading=reading)
    raw = None if tr is None else float(tr["a"] + tr["b"] * math.log10(float(last.n_params)))
    pred = None if raw is None else min(max(raw, 0.0), 1.0)  # a share is a share: the trend's value is clipped
    why_last = trend_exclusion(last, reading)
    value = last.cmr if reading == "headline" else last.tolerance_boundary
    actual = value if why_last is None else None  # a fallback CMR is not what the trend predicts
    out: dict[str, Any] = {"n_params": size_json(last.n_params), "predicted": pred, "predicted_raw": raw,
                           "clipped": raw is not None and raw != pred,
                           "n_trend_sizes": 0 if tr is None else tr["n_sizes"],
                           "trend_sizes": [] if tr is None else tr["sizes"],
                           "trend_left_out": [{"n_params": size_json(s.n_params), "reason": w} for s in rest
                                              if (w := trend_exclusion(s, reading)) is not None],
                           "reading": "CMR" if reading == "headline" else "tolerance boundary (tolerance-only)",
                           "held_out_not_comparable": why_last, "actual": actual,
                           "shift": None if pred is None or actual is None else float(actual - pred)}  # fmt: skip
    rows, inside, err = [], [], []
    for row in last.ratios:
        obs = row["observed_dloss_general_at_budget"]
        pts = [(float(s.n_params), r["observed_dloss_general_at_budget"]) for s in rest for r in s.ratios
               if r["ratio"] == row["ratio"] and r["observed_dloss_general_at_budget"] is not None]  # fmt: skip
        if obs is None or len(pts) < 3:
            continue
        x = np.log10([p[0] for p in pts])
        y = np.array([p[1] for p in pts])
        b, a = np.polyfit(x, y, 1)
        sd = float(np.std(y - (a + b * x), ddof=2)) if len(pts) > 2 else 0.0
        pr = float(a + b * math.log10(float(last.n_params)))
        half = 1.96 * sd
        ok = bool(abs(obs - pr) <= half)
        rows.append({"ratio": row["ratio"], "observed_dloss_general": obs, "predicted_dloss_general": pr,
                     "band_general": [pr - half, pr + half], "inside_general": ok})  # fmt: skip
        inside.append(abs(obs - pr) <= half)
        err.append(abs(obs - pr))
    out.update(rows=rows, mae_general=float(np.mean(err)) if err else None,
               coverage=float(np.mean(inside)) if inside else None)  # fmt: skip
    return out


def validate_decision(
    dec: CMRDecision, inc: pd.DataFrame, settings: CMRSettings, *, bootstrap: int, rng: np.random.Generator
) -> dict[str, Any]:
    """Held-out checks of ``dec`` (see the module docstring) under the decision's ``settings``."""
    return {
        "held_out_ratios": _held_out_ratios(dec, inc, bootstrap, rng, settings),
        "held_out_size": _held_out_size(dec),
    }
