"""The CMR decision's inputs: its settings, statuses and small helpers, and the run table → increments
``ΔL(T) = L(T) − L(0)`` per CPT evaluation (with the reading relative to the R = 0 control)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.fit.uncertainty.resampling import LOST_MAX
from mixlaw.laws import Law, get_law
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

__all__ = ["CMRSettings", "Unmet", "resolve_columns", "prepare_increments", "relative_to_control", "has_control"]


STATUS_OK = "ok"
STATUS_WEAK = "weak"
STATUS_NO_FEASIBLE = "no feasible ratio"
STATUS_ALL_FEASIBLE = "all ratios feasible — CMR ≥ largest tried"
STATUS_NO_ROOT = "no root in budget"
STATUS_LAW_ABOVE_1 = "CMR law exceeds 1 at this budget"
STATUS_LAW_BELOW_0 = "CMR law below 0 at this budget"
#: ``tolerance_status`` of a boundary that the observations overruled (the pipeline calls such a decision weak).
STATUS_TOL_OVERRULED = "model-free crossing (the ratio law's boundary lies outside the observed bracket)"
MIN_RATIOS_CMR_LAW = 3  # the CMR law has three parameters

#: A decision is ``weak`` when a candidate ratio's ΔL_gen fit explains less than this share of the variance of
#: its own increments (the CMR paper's Table 3 reports R² ≥ 0.87 for every ΔL_gen fit).
R2_MIN = 0.9
#: ... or when more than this share of the bootstrap resamples gave no CMR (the share that makes any interval weak).
BOOT_LOST_MAX = LOST_MAX

DEFAULT_LAMBDAS: tuple[float, ...] = (100.0, 300.0, 1000.0, 3000.0, 7000.0, math.inf)
DEFAULT_EPSILONS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1)


class Unmet(StrEnum):
    """A criterion of the CMR paper's feasibility rule that a domain share fails (laws.md §6.4)."""

    TOLERANCE = "tolerance"
    """The general loss rises by more than ε at the budget: ``ΔL_gen(T_max) > ε``."""
    DOMAIN_GAIN = "domain_gain"
    """The domain loss does not improve: ``ΔL_dom(T_max) ≥ 0``."""
    TURN = "turn"
    """The turning point is not inside the budget: ``T0 > T_max`` (or none, or one the data contradict)."""


def unmet_criteria(
    dloss_general: float, dloss_domain: float | None, epsilon: float, turn_in_budget: bool | None
) -> list[Unmet]:
    """THE feasibility rule of a domain share (CMR paper, laws.md §6.4): feasible when the list is empty.

    A share is feasible at a budget ``T_max`` when ``ΔL_gen(T_max) ≤ ε``, ``ΔL_dom(T_max) < 0`` and its turning
    point ``T0 ≤ T_max``. ``dloss_domain=None`` or ``turn_in_budget=None``: that criterion is not judged (no domain
    law; increments relative to the control, where a turning point means the gap to it closing). A NaN increment
    fails its criterion. The per-ratio table (:func:`mixlaw.decide.cmr.decision.ratio_rows`) and the query of an
    unseen share (:meth:`mixlaw.decide.cmr.result.SizeCMR.assess_ratio`) both decide by this function and render
    their reasons from its codes.
    """
    out = []
    if not dloss_general <= epsilon:
        out.append(Unmet.TOLERANCE)
    if dloss_domain is not None and not dloss_domain < 0:
        out.append(Unmet.DOMAIN_GAIN)
    if turn_in_budget is False:
        out.append(Unmet.TURN)
    return out


def tolerance_reason(dloss_general: float, epsilon: float, note: str = "") -> str:
    """The text of :attr:`Unmet.TOLERANCE`."""
    return f"general loss rises {dloss_general:+.4f} > ε = {epsilon:g} at the budget{note}"


def domain_reason(dloss_domain: float) -> str:
    """The text of :attr:`Unmet.DOMAIN_GAIN`."""
    return f"domain loss does not improve ({dloss_domain:+.4f})"


def check_args(
    epsilon: float, lagrange_mult: float, budget_tokens: float | None, bootstrap: int, level: float = 0.95
) -> None:
    """One-line errors for impossible settings."""
    if not 0 < level < 1:
        raise InputError(f"--level {level}: expected a number in (0, 1)")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise InputError(f"epsilon must be a finite number ≥ 0, got {epsilon}")
    if not lagrange_mult > 0:
        raise InputError(f"lagrange_mult must be > 0 or inf, got {lagrange_mult}")
    if budget_tokens is not None and not budget_tokens > 0:
        raise InputError(f"budget_tokens must be > 0, got {budget_tokens}")
    if bootstrap < 0:
        raise InputError(f"bootstrap must be ≥ 0, got {bootstrap}")


@dataclass(frozen=True)
class CMRSettings:
    """How one size's CMR is decided: the settings every stage of the per-size pipeline reads.

    :func:`mixlaw.decide.cmr.critical_mixture_ratio` builds one from its arguments (their meaning is documented
    there) and hands the same object to every size, to the other reading and to the held-out checks.

    Parameters
    ----------
    epsilon
        Tolerated rise of the general loss at the budget (nats/token), ``>= 0``.
    lagrange_mult
        λ of the stationarity condition (``inf``: ``T0`` at the peak of ``ΔL_gen``), ``> 0``.
    budget_tokens, token_unit
        CPT budget in tokens and tokens per ``T`` unit (``None``: from the runs, and ``budget / 100``).
    ratio_law, c_method
        The ratio law (or ``"auto"``) and how ``ratio_exp`` finds its offset (``"fit"`` or ``"corr_grid"``).
    pin_zero
        Pin ``ΔL(0) = 0`` in the increment laws.
    fit_loss
        ``"l2"`` (exact profiled least squares) or ``"huber"`` (engine fits).
    level
        Coverage of the bootstrap intervals, in (0, 1).
    t0_search_factor
        How far beyond the budget (× the budget) ``T0`` is searched.
    batched
        Fit all resamples of a size in one solve per law (``False``: one by one, the reference).
    solver
        Iteration caps of every fit (:class:`~mixlaw.options.SolverOptions`).
    """

    epsilon: float = 0.05
    lagrange_mult: float = math.inf
    budget_tokens: float | None = None
    token_unit: float | None = None
    ratio_law: str = "auto"
    c_method: str = "fit"
    pin_zero: bool = False
    fit_loss: str = "l2"
    level: float = 0.95
    t0_search_factor: float = 10.0
    batched: bool = True
    solver: SolverOptions = DEFAULT_SOLVER

    def __post_init__(self) -> None:
        check_args(self.epsilon, self.lagrange_mult, self.budget_tokens, 0, self.level)
        if self.c_method not in ("fit", "corr_grid"):
            raise InputError(f"c_method must be 'fit' or 'corr_grid', got {self.c_method!r}")


#: The paper's settings (ε = 0.05, λ = ∞, the budget and token unit from the runs, the ratio law by noise units).
DEFAULT_SETTINGS = CMRSettings()


@lru_cache(maxsize=256)
def _law_cached(name: str, options: tuple[tuple[str, Any], ...]) -> Law:
    return get_law(name, **dict(options))


def law_of(name: str, **options: Any) -> Law:
    """``get_law`` from the registry, memoised per (name, options): the decision asks for the same few laws
    thousands of times, and a registry lookup scans the law modules."""
    return _law_cached(name, tuple(sorted(options.items())))


def status_too_few(k: int = MIN_RATIOS_CMR_LAW) -> str:
    """Status when the CMR law cannot be fitted."""
    return f"too few ratios to fit (need ≥ {k})"


def evaluate(law: Law, x: Mapping[str, Any], params: Mapping[str, float]) -> np.ndarray:
    """The law's prediction at ``x``: through its separable form in numpy when it declares one (the decision
    evaluates thousands of small curves; same values as ``law.evaluate``, which is used otherwise, on writable
    float64 copies since pandas may hand out read-only views)."""
    xx = {k: np.array(v, dtype=np.float64, copy=True) for k, v in x.items()}
    design = getattr(law, "linear_design", None)
    if callable(design) and getattr(law, "from_profile", None) is None:
        pts = law.profile_points()  # type: ignore[attr-defined]
        names, cols = design(xx, {k: np.asarray(float(params[k])) for k in pts})
        out = np.asarray(cols @ np.array([float(params[k]) for k in names]), dtype=np.float64)
        return out.reshape(np.broadcast_shapes(*(v.shape for v in xx.values())))
    return law.evaluate(xx, params)


def r2_mse(y: np.ndarray, yhat: np.ndarray) -> tuple[float, float]:
    """Coefficient of determination and mean squared error of a fit."""
    resid = y - yhat
    mse = float(np.mean(resid**2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else float("nan")
    return r2, mse


def size_json(size: Any) -> Any:
    """A model size as a JSON-friendly value (ints stay ints)."""
    if isinstance(size, (int, np.integer)):
        return int(size)
    if isinstance(size, (float, np.floating)):
        return int(size) if float(size).is_integer() else float(size)
    return size


def num(v: float | None) -> float | None:
    """A finite float or None."""
    return None if v is None or not math.isfinite(v) else float(v)


def is_number(v: Any) -> bool:
    """A positive finite number (a numeric model size)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)) and float(v) > 0


def input_ok(law: Law, x: Mapping[str, Any]) -> np.ndarray:
    """Where ``law`` is defined on inputs ``x`` (its own ``input_ok`` method; everywhere when it has none)."""
    fn = getattr(law, "input_ok", None)
    n = np.asarray(next(iter(x.values()))).shape
    return np.asarray(fn(x), dtype=bool) if callable(fn) else np.ones(n, dtype=bool)


@dataclass(frozen=True)
class _Columns:
    general: str
    domain: str
    ratio: str
    size: str | None


def _resolve_loss_column(table: pd.DataFrame, name: str, what: str) -> str:
    for cand in (name, f"loss_{name}"):
        if cand in table.columns:
            return cand
    from mixlaw.runs.io.rules import closest_hint

    known = [c for c in table.columns if str(c).startswith("loss_")]
    hint = closest_hint(name, map(str, table.columns), table.attrs.get("column_sources"))
    raise InputError(f"{what} eval column '{name}' not found; loss columns: {', '.join(known) or 'none'}{hint}")


def resolve_columns(
    table: pd.DataFrame,
    general_eval: str,
    domain_eval: str,
    ratio_column: str | None = None,
    size_column: str | None = None,
) -> _Columns:
    """Resolve the user's column names (``loss_`` prefix optional; ratio defaults to ``w_<domain>``)."""
    gen = _resolve_loss_column(table, general_eval, "general")
    dom = _resolve_loss_column(table, domain_eval, "domain")
    if gen == dom:
        raise InputError(f"general and domain eval are the same column '{gen}'")
    if ratio_column is None:
        dname = dom[len("loss_") :] if dom.startswith("loss_") else dom
        for cand in (f"w_{dname}", "ratio"):
            if cand in table.columns:
                ratio_column = cand
                break
        else:
            ws = [c for c in table.columns if str(c).startswith("w_")]
            raise InputError(
                f"no ratio column w_{dname} for domain eval '{dom}'; pass --ratio-column (mixture columns: "
                f"{', '.join(ws) or 'none'})"
            )
    elif ratio_column not in table.columns:
        raise InputError(f"ratio column '{ratio_column}' not found", column=ratio_column)
    if size_column is None:
        has = "n_params" in table.columns and bool(pd.to_numeric(table["n_params"], errors="coerce").notna().any())
        size_column = "n_params" if has else None  # a store lists n_params even when no run records it
    elif size_column not in table.columns:
        raise InputError(f"size column '{size_column}' not found", column=size_column)
    return _Columns(gen, dom, ratio_column, size_column)


def prepare_increments(table: pd.DataFrame, cols: _Columns) -> pd.DataFrame:
    """CPT rows with their increments from the ``T = 0`` reference.

    Returns one row per CPT evaluation with columns ``size, run_id, ratio, tokens, loss_general, loss_domain,
    dloss_general, dloss_domain, ref_general, ref_domain`` (``tokens`` counted from the reference).
    """
    if "tokens" not in table.columns:
        raise InputError(
            "expected a 'tokens' column (tokens seen at each step), got none: give tokens_per_step (or batch_size "
            "and seq_len) in a --meta table, or --derive tokens=step*TOKENS_PER_STEP"
        )
    df = table.copy()
    if "run_id" not in df.columns:
        df["run_id"] = [
            f"{s}|{r}" for s, r in zip(df[cols.size] if cols.size else [""] * len(df), df[cols.ratio], strict=True)
        ]
    df["_size"] = df[cols.size] if cols.size else "all"
    is_pt = df["phase"].astype(str).eq("pt") if "phase" in df.columns else pd.Series(False, index=df.index)
    # A table holding CPT runs for several domains tags each run with its domain (probe runs: ``domain``):
    # keep the runs of this domain only (a run of another domain has w_<this domain> = 0, not a ratio-0 run).
    dname = cols.domain[len("loss_") :] if cols.domain.startswith("loss_") else cols.domain
    if "domain" in df.columns:
        this = df["domain"].astype(str).eq(dname)
        if (this & ~is_pt).any():
            df, is_pt = df[this | is_pt], is_pt[this | is_pt]
    for c in (cols.general, cols.domain, "tokens"):
        bad = ~np.isfinite(pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64))
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise InputError(_empty_cell_message(df, pos, c, int(bad.sum())))
    pt = df[is_pt]
    cpt = df[~is_pt]
    if cpt.empty:
        raise InputError(
            "expected continual pre-training runs, got every row with phase = pt (a run without parent_run counts "
            "as pt): give phase=cpt and parent_run in a --meta table, or --set phase=cpt"
        )
    out = []
    for run_id, run in cpt.groupby("run_id", sort=False):
        run = run.sort_values("tokens")
        ratios = pd.to_numeric(run[cols.ratio], errors="coerce").to_numpy(dtype=np.float64)
        ratios_pos = (
            ratios[run["tokens"].to_numpy(dtype=np.float64, copy=True) > run["tokens"].min()]
            if len(run) > 1
            else ratios
        )
        if not np.all(np.isfinite(ratios_pos)):
            raise InputError(f"run '{run_id}' has a missing ratio", column=cols.ratio)
        if np.ptp(ratios_pos) > 1e-9:
            raise InputError(f"run '{run_id}' changes its ratio during CPT", column=cols.ratio)
        ratio = float(ratios_pos[-1])
        if not 0.0 <= ratio <= 1.0:
            raise InputError(f"run '{run_id}': ratio must be in [0, 1], got {ratio}", column=cols.ratio)
        size = run["_size"].iloc[0]
        first = run.iloc[0]
        step0 = ("step" in run.columns and first["step"] == 0) or first["tokens"] == 0
        if step0 and len(run) > 1:
            ref_gen, ref_dom, t_ref = (
                float(first[cols.general]),
                float(first[cols.domain]),
                float(first["tokens"]),
            )
        else:
            parent = None
            if "parent_run" in run.columns and isinstance(first["parent_run"], str):
                par = df[df["run_id"] == first["parent_run"]]
                if not par.empty:
                    parent = par.sort_values("tokens").iloc[-1]
            if parent is None:
                same = pt[pt["_size"] == size]
                if same["run_id"].nunique() == 1:
                    parent = same.sort_values("tokens").iloc[-1]
            if parent is None:
                raise InputError(
                    f"expected a T = 0 reference for run '{run_id}', got no step-0 evaluation, no parent_run in the "
                    f"table and no single phase=pt run of its size: give the base checkpoint's losses with "
                    f"--base-eval {_base_hint(cols)}, or as a --meta row (run_id, phase=pt, {cols.general}, "
                    f"{cols.domain})"
                )
            ref_gen, ref_dom = float(parent[cols.general]), float(parent[cols.domain])
            t_par = float(parent["tokens"])
            t_ref = t_par if float(first["tokens"]) > t_par > 0 else 0.0
        out.append(
            pd.DataFrame(
                {
                    "size": size,
                    "run_id": run_id,
                    "ratio": ratio,
                    "tokens": run["tokens"].to_numpy(dtype=np.float64) - t_ref,
                    "loss_general": run[cols.general].to_numpy(dtype=np.float64),
                    "loss_domain": run[cols.domain].to_numpy(dtype=np.float64),
                    "ref_general": ref_gen,
                    "ref_domain": ref_dom,
                }
            )
        )
    if not out:
        raise InputError("expected continual pre-training runs with evaluations, got none after selecting rows")
    inc = pd.concat(out, ignore_index=True)
    inc["dloss_general"] = inc["loss_general"] - inc["ref_general"]
    inc["dloss_domain"] = inc["loss_domain"] - inc["ref_domain"]
    return inc


def _empty_cell_message(df: pd.DataFrame, pos: int, column: str, n_bad: int) -> str:
    """``expected a value of 'tokens' at run 'a' step 100, got an empty cell (3 rows) ...``: plain words, no repr."""
    raw = df[column].iloc[pos]
    v = pd.to_numeric(pd.Series([raw]), errors="coerce").iloc[0]
    got = "an empty cell" if pd.isna(v) else f"{float(v):g}"
    rid = df["run_id"].iloc[pos] if "run_id" in df.columns else "?"
    step = df["step"].iloc[pos] if "step" in df.columns else None
    at = f"run '{rid}'" + ("" if step is None or pd.isna(step) else f" step {int(step)}")
    more = f" (and {n_bad - 1} more rows)" if n_bad > 1 else ""
    fix = {
        "tokens": "; give tokens_per_step (or batch_size and seq_len) in a --meta table, or --derive "
        "tokens=step*TOKENS_PER_STEP",
    }.get(column, "; leave such rows out with --where, or --allow-missing")
    return f"expected a value of '{column}' at {at}, got {got}{more}{fix}"


def _base_hint(cols: _Columns) -> str:
    def short(c: str) -> str:
        return c[len("loss_") :] if c.startswith("loss_") else c

    return f"{short(cols.general)}=LOSS,{short(cols.domain)}=LOSS"


def has_control(inc: pd.DataFrame) -> bool:
    """Whether every model size has an R = 0 (general data only) control run."""
    return bool(inc.groupby("size")["ratio"].apply(lambda r: bool((r == 0).any())).all())


def relative_to_control(inc: pd.DataFrame) -> pd.DataFrame:
    """Increments relative to the R = 0 control of the same size: ``ΔL − ΔL_control`` at the same tokens.

    The control's increments are interpolated linearly in log tokens (its evaluations sit at the same steps in a
    sweep). What remains is the effect of the domain share itself, not the continued learning (or forgetting)
    that general replay alone causes. The control rows are dropped (their relative increment is zero by
    construction); ``dloss_*_abs`` keep the absolute increments.
    """
    if not has_control(inc):
        missing = sorted(map(str, set(inc["size"]) - set(inc.loc[inc["ratio"] == 0, "size"])))
        raise InputError(
            f"--relative-to-control needs an R = 0 control run for every size; missing for {', '.join(missing)}"
        )
    parts = []
    for _size, d in inc.groupby("size", sort=False):
        ctrl = d[d["ratio"] == 0].groupby("tokens", as_index=False)[["dloss_general", "dloss_domain"]].mean()
        ctrl = ctrl.sort_values("tokens")
        tc = np.log1p(ctrl["tokens"].to_numpy(dtype=np.float64))
        out = d[d["ratio"] != 0].copy()
        tt = np.log1p(out["tokens"].to_numpy(dtype=np.float64))
        for c in ("dloss_general", "dloss_domain"):
            out[f"{c}_abs"] = out[c]
            out[c] = out[c] - np.interp(tt, tc, ctrl[c].to_numpy(dtype=np.float64))
        parts.append(out)
    return pd.concat(parts, ignore_index=True)
