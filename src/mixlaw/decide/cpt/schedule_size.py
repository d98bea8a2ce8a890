"""Schedule-aware CMR (``mixlaw cmr --law cpt_replay --schedule SPEC``): the CMR under a CPT LR schedule from a
replay law fitted on the general loss (arXiv:2505.07796, Eq. 8), beside the constant-LR decision."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mixlaw.decide.cmr.common import BOOT_LOST_MAX
from mixlaw.errors import BoundaryWarning, ConvergenceWarning, InputError
from mixlaw.options import DEFAULT_SOLVER, BootstrapOptions, FitOptions, SolverOptions
from mixlaw.schedules import Schedule

if TYPE_CHECKING:
    from mixlaw.decide.cpt import ScheduleCMR
    from mixlaw.fit import FitResult

__all__ = ["SizeScheduleCMR", "schedule_cmr_by_size", "infer_tokens_per_step", "resolve_schedule_law"]


def resolve_schedule_law(name: str) -> str:
    """A schedule-aware CPT law from the registry, validated by its spec (it reads the CPT LR area ``s1_cpt``)."""
    from mixlaw.laws import get_law, law_names

    def is_sched(n: str) -> bool:
        try:
            return "s1_cpt" in get_law(n).inputs
        except Exception:  # a law that needs options is not a default schedule law
            return False

    if name not in law_names() or not is_sched(name):
        ok = [n for n in law_names() if is_sched(n)]
        raise InputError(f"--law must be cmr or a schedule-aware CPT law ({', '.join(ok)}), got {name!r}")
    return name


@dataclass
class SizeScheduleCMR:
    """The schedule-aware CMR of one model size: the ``cpt_replay`` fit of the general loss and
    :func:`mixlaw.decide.cpt.schedule_aware_cmr` under the user's CPT schedule."""

    n_params: Any
    schedule: Schedule
    budget_steps: int | None
    budget_tokens: float | None
    tokens_per_step: float | None
    pt_run: str | None
    pt_schedule: str | None
    branch_step: int | None
    n_runs: int
    n_points: int
    trained_shares: list[float]
    result: ScheduleCMR | None = None
    fit: FitResult | None = None
    status: str = "ok"
    notes: list[str] = field(default_factory=list)

    @property
    def cmr(self) -> float | None:
        return None if self.result is None else self.result.cmr

    @property
    def ci(self) -> tuple[float, float] | None:
        return None if self.result is None else self.result.interval

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        fit = None
        if self.fit is not None:
            fit = {
                "law": self.fit.law_name,
                "target": self.fit.target,
                "params": dict(self.fit.params),
                "status": self.fit.status.value,
                "objective": self.fit.objective,
                "n_points": self.fit.n_points,
                "metrics": dict(self.fit.metrics),
                "n_bootstrap": self.fit.n_bootstrap,
                "n_failed_resamples": self.fit.n_failed_resamples,
                "bootstrap_unit": self.fit.bootstrap_unit,
            }
        return {
            "n_params": _size_value(self.n_params),
            "budget_steps": self.budget_steps,
            "budget_tokens": self.budget_tokens,
            "tokens_per_step": self.tokens_per_step,
            "schedule": self.schedule.spec(),
            "epsilon": None if r is None else r.epsilon,
            "cmr": self.cmr,
            "ci": None if self.ci is None else list(self.ci),
            "constant_lr_cmr": None if r is None else r.constant_lr_cmr,
            "constant_lr_ci": None if r is None or r.constant_lr_interval is None else list(r.constant_lr_interval),
            "status": self.status,
            "n_boot": 0 if r is None else r.n_boot,
            "n_boot_without_cmr": 0 if r is None else r.n_boot_none,
            "pt_run": self.pt_run,
            "pt_schedule": self.pt_schedule,
            "branch_step": self.branch_step,
            "n_runs": self.n_runs,
            "n_points": self.n_points,
            "trained_shares": self.trained_shares,
            "fit": fit,
            "notes": list(self.notes),
        }


def _size_value(v: Any) -> Any:
    import numbers

    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return v


def _has_parent(col: pd.Series) -> np.ndarray:
    return np.array([isinstance(v, str) and v != "" for v in col], dtype=bool)


def infer_tokens_per_step(rows: pd.DataFrame) -> float | None:
    """Tokens per optimiser step from the ``tokens``/``step`` columns (median of the per-run slopes between
    consecutive evaluations, so token counts that continue the parent's count work too); ``None`` when the
    table cannot tell."""
    if "tokens" not in rows.columns or "step" not in rows.columns:
        return None
    slopes = []
    for _, g in rows.groupby(rows["run_id"].astype(str)):
        g = g.sort_values("step")
        ds = np.diff(pd.to_numeric(g["step"], errors="coerce").to_numpy(dtype=np.float64))
        dt = np.diff(pd.to_numeric(g["tokens"], errors="coerce").to_numpy(dtype=np.float64))
        ok = np.isfinite(ds) & np.isfinite(dt) & (ds > 0) & (dt > 0)
        slopes.extend((dt[ok] / ds[ok]).tolist())
    return float(np.median(slopes)) if slopes else None


def schedule_cmr_by_size(
    table: pd.DataFrame,
    schedule: Schedule | str,
    *,
    general_eval: str,
    domain_eval: str,
    ratio_column: str | None = None,
    size_column: str | None = None,
    epsilon: float = 0.05,
    budget_steps: int | None = None,
    budget_tokens: float | None = None,
    tokens_per_step: float | None = None,
    bootstrap: int = 0,
    random_state: int | None = 0,
    level: float = 0.95,
    law: str = "cpt_replay",
    solver: SolverOptions = DEFAULT_SOLVER,
) -> list[SizeScheduleCMR]:
    """CMR under a CPT LR schedule per model size, from a ``cpt_replay`` fit of the general loss.

    The RunTable needs each run's schedule (``schedule`` column: a RunStore read with
    ``to_frame(include_schedule=True)``, or a file with that column), PT runs and CPT runs linked by
    ``parent_run``, and the domain share of each CPT mix (``ratio_column``, default ``w_<domain>``). The law's
    replay share is ``1 − domain share`` (PT rows: 1). Per size, the LR areas of every evaluation are computed
    from the schedules through the one feature path (:func:`mixlaw.fit.problem.features.add_features`), rows with zero
    forward area are left out, ``cpt_replay`` is fitted on the general loss through :func:`mixlaw.fit.fit_law`
    (``bootstrap`` resamples of runs), and :func:`mixlaw.decide.cpt.schedule_aware_cmr` gives the largest domain
    share whose predicted general-loss rise at the budget stays ≤ ``epsilon``, with its bootstrap interval and
    the constant-LR CMR of the same fit beside it.

    The budget is ``budget_steps``, else ``budget_tokens / tokens_per_step``, else the schedule's length;
    ``tokens_per_step`` defaults to the table's tokens per step (CPT runs).

    ``solver``: iteration caps of every fit the decision makes, the point fit and its resample refits
    (:class:`~mixlaw.options.SolverOptions`, ``--max-iter``); default: the engine's adaptive limit.
    """
    if not 0 < level < 1:
        raise InputError(f"--level {level}: expected a number in (0, 1)")
    from mixlaw.decide.cmr import resolve_columns
    from mixlaw.decide.cpt import schedule_aware_cmr
    from mixlaw.errors import FitError
    from mixlaw.fit import fit_law
    from mixlaw.fit.problem.features import add_features
    from mixlaw.laws import get_law
    from mixlaw.schedules import as_schedule

    sched = schedule if isinstance(schedule, Schedule) else Schedule.parse(schedule)
    if "schedule" not in table.columns:
        raise InputError(
            "--law cpt_replay needs each run's LR schedule: give a RunStore .db (schedules are stored per run) "
            "or a table with a 'schedule' column",
            column="schedule",
        )
    if "parent_run" not in table.columns or not _has_parent(table["parent_run"]).any():
        raise InputError("--law cpt_replay needs CPT runs linked to their PT run by 'parent_run'", column="parent_run")
    if budget_steps is not None and budget_steps < 1:
        raise InputError(f"--budget-steps must be >= 1, got {budget_steps}")
    if tokens_per_step is not None and not tokens_per_step > 0:
        raise InputError(f"--tokens-per-step must be > 0, got {tokens_per_step}")
    if budget_tokens is not None and not budget_tokens > 0:
        raise InputError(f"--budget-tokens must be > 0, got {budget_tokens}")
    cols = resolve_columns(table, general_eval, domain_eval, ratio_column, size_column)
    frame = table.reset_index(drop=True).copy()
    cpt_row = _has_parent(frame["parent_run"])
    dname = cols.domain[len("loss_") :] if cols.domain.startswith("loss_") else cols.domain
    if "domain" in frame.columns:  # a CPT run tagged with another domain is not a run of this one
        tag = frame["domain"]
        keep = ~cpt_row | tag.isna() | (tag.astype(str) == "") | (tag.astype(str) == dname)
        frame, cpt_row = frame[keep].reset_index(drop=True), cpt_row[keep.to_numpy()]
    share = pd.to_numeric(frame[cols.ratio], errors="coerce").to_numpy(dtype=np.float64)
    share = np.where(~cpt_row & ~np.isfinite(share), 0.0, share)  # PT rows: general data only
    bad = np.flatnonzero(~np.isfinite(share) | (share < 0) | (share > 1))
    if bad.size:
        raise InputError(
            f"expected a domain share in [0, 1] for run '{frame['run_id'].iloc[bad[0]]}', got {share[bad[0]]!r}",
            column=cols.ratio,
        )
    frame["replay_ratio"] = 1.0 - share  # the law's replay share r_pt; its LR areas come from the feature path
    frame = add_features(frame, get_law(law), drop_undefined=False)
    y = pd.to_numeric(frame[cols.general], errors="coerce").to_numpy(dtype=np.float64)
    usable = (frame["s1_pt"].to_numpy() + frame["s1_cpt"].to_numpy() > 0) & np.isfinite(y)
    sizes: list[tuple[Any, np.ndarray]]
    if cols.size is None:
        sizes = [(None, np.ones(len(frame), dtype=bool))]
    else:
        sv = frame[cols.size]
        sizes = [(v, (sv == v).to_numpy()) for v in sorted(sv.dropna().unique())]
    run_sched = frame.groupby(frame["run_id"].astype(str))["schedule"].first()
    all_runs = set(table["run_id"].astype(str))
    out: list[SizeScheduleCMR] = []
    for k, (size, mask) in enumerate(sizes):
        rows = frame[mask & usable]
        cpt_mask = _has_parent(rows["parent_run"])
        cpt_rows = rows[cpt_mask]
        if cpt_rows.empty:  # e.g. a PT run whose CPT runs have not started: said, not dropped silently
            out.append(
                SizeScheduleCMR(
                    n_params=size,
                    schedule=sched,
                    budget_steps=None,
                    budget_tokens=None,
                    tokens_per_step=tokens_per_step,
                    pt_run=None,
                    pt_schedule=None,
                    branch_step=None,
                    n_runs=int(rows["run_id"].nunique()),
                    n_points=len(rows),
                    trained_shares=[],
                    status="no CPT runs with usable evaluations",
                )
            )
            continue
        notes: list[str] = []
        parents = cpt_rows.groupby(cpt_rows["run_id"].astype(str))["parent_run"].first()
        pt_run = str(parents.value_counts().index[0])
        if parents.nunique() > 1:
            notes.append(f"CPT runs branch from {parents.nunique()} PT runs; the plan starts from '{pt_run}'")
        if pt_run not in all_runs or pt_run not in run_sched.index or run_sched[pt_run] is None:
            raise InputError(f"PT run '{pt_run}' (parent_run of the CPT runs) is not in the table with a schedule")
        pt_sched = as_schedule(run_sched[pt_run])
        branch = None
        if "parent_step" in cpt_rows.columns:
            ps = pd.to_numeric(cpt_rows["parent_step"], errors="coerce").dropna()
            branch = int(ps.mode().iloc[0]) if len(ps) else None
        tps = tokens_per_step if tokens_per_step is not None else infer_tokens_per_step(cpt_rows)
        if budget_steps is not None:
            steps = int(budget_steps)
        elif budget_tokens is not None:
            if tps is None:
                raise InputError("--budget-tokens needs --tokens-per-step (the table has no tokens/step to infer it)")
            steps = int(round(budget_tokens / tps))
        else:
            steps = sched.total_steps
        tokens = float(steps * tps) if tps is not None else budget_tokens
        shares = sorted({round(1.0 - float(v), 6) for v in cpt_rows["replay_ratio"]})
        entry = SizeScheduleCMR(
            n_params=size,
            schedule=sched,
            budget_steps=steps,
            budget_tokens=tokens,
            tokens_per_step=tps,
            pt_run=pt_run,
            pt_schedule=pt_sched.spec(),
            branch_step=branch,
            n_runs=int(rows["run_id"].nunique()),
            n_points=len(rows),
            trained_shares=shares,
            notes=notes,
        )
        out.append(entry)
        if len(shares) < 2:
            notes.append(f"one trained domain share ({shares[0]:g}): the replay dependence is not determined")
        cpt_specs = {as_schedule(v).spec() for v in cpt_rows.groupby("run_id")["schedule"].first().dropna()}
        if len(cpt_specs) == 1 and sched.spec() not in cpt_specs:
            notes.append(
                f"every CPT run uses one schedule ({next(iter(cpt_specs))}): the CPT annealing term is fitted "
                "without CPT schedule variation, so the CMR under another schedule leans on the law's form"
            )
        longest = int(cpt_rows["cpt_step"].max())
        if steps > longest:
            notes.append(f"budget {steps} steps is beyond the longest CPT run ({longest} steps): extrapolated")
        if "lr" in rows.columns:
            max_lr = float(pd.to_numeric(rows["lr"], errors="coerce").max())
            if np.isfinite(max_lr) and max_lr > 0 and sched.peak_lr > 1.05 * max_lr:
                notes.append(
                    f"schedule peak LR {sched.peak_lr:.3g} exceeds the largest logged LR {max_lr:.3g}: "
                    "peak-LR extrapolation"
                )
        try:  # fit warnings (convergence, bounds, failed resamples) become notes of this size
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                warnings.simplefilter("always", BoundaryWarning)
                fit = fit_law(
                    law,
                    rows,
                    FitOptions(
                        solver=solver,
                        bootstrap=BootstrapOptions(resamples=bootstrap),
                        seed=None if random_state is None else random_state + k,
                    ),
                    target=cols.general,
                )
        except FitError as exc:
            entry.status = f"fit failed: {exc}"
            continue
        for w in caught:
            if issubclass(w.category, (ConvergenceWarning, BoundaryWarning)):
                notes.append(str(w.message))
            else:  # not ours to swallow
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        entry.fit = fit
        if fit.status.value != "converged":
            notes.append(f"{law} fit status: {fit.status.value}")
        res = schedule_aware_cmr(
            fit,
            sched,
            epsilon,
            budget_steps=steps,
            pt_schedule=pt_sched,
            branch_step=branch,
            n_params=None if size is None else float(size),
            level=level,
        )
        entry.result = res
        entry.status = res.status
        weak = []  # the same rules as the constant-LR decision (mixlaw.decide.cmr.pipeline._weak)
        if fit.status.value != "converged":
            weak.append(f"{law} fit {fit.status.value}")
        if fit.n_bootstrap and fit.n_failed_resamples > BOOT_LOST_MAX * fit.n_bootstrap:
            weak.append(f"{fit.n_failed_resamples} of {fit.n_bootstrap} bootstrap resamples unusable "
                        f"(> {BOOT_LOST_MAX:.0%})")  # fmt: skip
        if res.n_boot and res.n_boot_none > BOOT_LOST_MAX * res.n_boot:
            weak.append(f"{res.n_boot_none} of {res.n_boot} bootstrap fits give no CMR (> {BOOT_LOST_MAX:.0%})")
        if weak and res.status == "ok":
            entry.status = f"weak ({'; '.join(weak)})"
        if res.cmr is not None and shares and res.cmr > max(shares) + 1e-9:
            notes.append(f"CMR {res.cmr:.3f} is above the largest trained share {max(shares):g}: extrapolated")
        if res.n_boot_none:
            notes.append(f"{res.n_boot_none} of {res.n_boot} bootstrap fits have no feasible share")
    if all(r.pt_run is None for r in out):
        raise InputError("no model size has CPT runs with usable evaluations for --law cpt_replay")
    return out
