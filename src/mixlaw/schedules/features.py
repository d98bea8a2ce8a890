"""RunTable features from each run's stored schedule: the LR-area columns and the multi-power history."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from mixlaw.errors import InputError
from mixlaw.schedules.areas import cpt_areas
from mixlaw.schedules.multi_power import mpl_columns, multi_power_features
from mixlaw.schedules.schedule import DEFAULT_DECAY, Schedule, Split, WarmupConvention, as_schedule

__all__ = ["add_schedule_features", "features_for_law", "needs_schedule_features", "SCHEDULE_FEATURES"]


#: Run id of the base model's PT schedule given for CPT runs without a parent (``orphans=<schedule>``).
BASE_RUN = "<base model>"


def _run_history(
    run_id: str,
    schedules: Mapping[str, Schedule],
    parents: Mapping[str, str | None],
    branch_steps: Mapping[str, int],
    seen: tuple[str, ...] = (),
) -> tuple[np.ndarray, float, int, int]:
    """``(η of ancestors up to the branch + own η, η_0 of the root, root warm-up, n ancestor steps)``."""
    if run_id in seen:
        raise InputError(f"parent_run cycle through run '{run_id}'")
    if run_id not in schedules:
        raise InputError(
            f"no schedule for run '{run_id}'"
            + (f" (run '{seen[-1]}' continues it: its LR history counts)" if seen else "")
            + ": give a schedule spec (e.g. cosine:peak=3e-4,steps=20000,warmup=500) in its --meta row, "
            "or log its lr",
            column="schedule",
        )
    own = schedules[run_id]
    parent = parents.get(run_id)
    if parent is None:
        return own.lrs(), own.eta0, own.warmup_steps, 0
    p_lr, eta0, w, _ = _run_history(parent, schedules, parents, branch_steps, (*seen, run_id))
    branch = int(branch_steps.get(run_id, p_lr.size))
    if not 0 < branch <= p_lr.size:
        raise InputError(
            f"run '{run_id}' branches from step {branch} of '{parent}', which has {p_lr.size} steps",
            column="parent_run",
        )
    return np.concatenate([p_lr[:branch], own.lrs()]), eta0, w, branch


def add_schedule_features(
    table: Any,
    schedules: Mapping[str, Any] | None = None,
    *,
    decay: float = DEFAULT_DECAY,
    warmup: WarmupConvention = "peak",
    split: Split = "time",
    steps_from: Literal["run", "root"] = "run",
    branch_steps: Mapping[str, int] | None = None,
    replay_column: str | None = None,
    lr_weight_exponent: float = 0.0,
    multi_power_bins: int | None = None,
    orphans: Any = "refuse",
) -> Any:
    """Add the canonical LR-area columns to a RunTable, from each run's schedule.

    Columns added: ``s1, s2`` (total areas), ``s1_pt, s1_cpt, s2_pt, s2_cpt`` (PT/CPT split), ``cpt_step``,
    and with ``replay_column`` the ``replay_ratio`` (= that column, e.g. ``w_general``: the replay share of
    D_pt data in the CPT mix); with ``multi_power_bins=K`` also the multi-power history columns (``mpl_s1``
    and :func:`mixlaw.schedules.multi_power.mpl_columns`). A run without ``parent_run`` is a PT run (CPT areas
    are 0). A run with a parent is a CPT run whose history is the parent's schedule up to the branch step,
    then its own.

    Parameters
    ----------
    table
        RunTable (pandas DataFrame) with ``run_id`` and ``step``; ``parent_run`` optional.
    schedules
        ``run_id → schedule`` (a :class:`Schedule`, dict, JSON string, spec or LR array). Default: the table's
        ``schedule`` column (one value per run).
    decay, warmup, split, lr_weight_exponent
        See :func:`cpt_areas`.
    steps_from
        ``"run"`` (default): a run's ``step`` counts its own updates (a CPT run starts again at 0);
        ``"root"``: steps of CPT runs count from the start of pre-training.
    branch_steps
        ``run_id → parent step`` a CPT run started from (default: the table's ``parent_step`` column when present,
        else the end of the parent's schedule).
    replay_column
        Mixture column whose value is the replay share ``r_pt``.
    multi_power_bins
        Also build the multi-power law's compressed-history columns with this many bins.
    orphans
        CPT runs (``phase = cpt``) without ``parent_run``, whose PT history is unknown: ``"refuse"`` (default: one
        line naming the run), ``"blackbox"`` (the run's own schedule is all CPT, ``s1_pt = s2_pt = 0``: for the
        black-box CPT law, which fits ``S1_pt`` as a free parameter; Wang et al. 2025, Sec. 6) or the base model's
        PT schedule (a :class:`Schedule` or spec) that every such run continues from its end.
    """
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        raise InputError(f"expected a pandas DataFrame RunTable, got {type(table).__name__}")
    for col in ("run_id", "step"):
        if col not in table.columns:
            raise InputError(f"RunTable lacks column '{col}'", column=col)
    runs = list(dict.fromkeys(table["run_id"].astype(str)))
    sched: dict[str, Schedule] = {}
    if schedules is not None:
        sched = {str(k): as_schedule(v) for k, v in schedules.items()}
    elif "schedule" in table.columns:
        for rid, val in table.groupby(table["run_id"].astype(str))["schedule"].first().items():
            if val is None or (isinstance(val, float) and math.isnan(val)):
                continue
            sched[str(rid)] = as_schedule(val)
    else:
        raise InputError("no schedules given and the RunTable has no 'schedule' column", column="schedule")
    parents: dict[str, str | None] = {}
    blackbox_runs: set[str] = set()
    if "parent_run" in table.columns:
        for rid, val in table.groupby(table["run_id"].astype(str))["parent_run"].first().items():
            ok = isinstance(val, str) and val != ""
            parents[str(rid)] = val if ok else None
    if "phase" in table.columns:  # a CPT run with no parent has no PT history here: not a PT run (all-zero CPT areas)
        ph = table.groupby(table["run_id"].astype(str))["phase"].first()
        orphan_ids = [str(r) for r, v in ph.items() if str(v).lower() == "cpt" and parents.get(str(r)) is None]
        if orphan_ids and not (isinstance(orphans, str) and orphans == "refuse"):
            if isinstance(orphans, str) and orphans == "blackbox":
                blackbox_runs = set(orphan_ids)
            else:  # the base model's PT schedule, given by the user: every orphan continues from its end
                sched[BASE_RUN] = as_schedule(orphans)
                parents.update({r: BASE_RUN for r in orphan_ids})
            orphan_ids = []
        if orphan_ids:
            orphans_ = orphan_ids
            raise InputError(
                f"run '{orphans_[0]}' is phase=cpt but has no parent_run, so its pre-training history is unknown "
                f"({len(orphans_)} such run(s)): give each CPT run its parent_run (the PT run, with its schedule), "
                "or the base model's PT schedule as a phase=pt row or as --law-option base_schedule=SPEC, or fit "
                "S1_pt as a free parameter (--law-option base=blackbox); treating it as pre-training would fit "
                "the CPT law on all-zero CPT areas",
                column="parent_run",
            )
    if branch_steps is None and "parent_step" in table.columns:  # PT step each CPT run started from
        ps = table.groupby(table["run_id"].astype(str))["parent_step"].first()
        branch_steps = {str(k): int(v) for k, v in ps.items() if v is not None and not pd.isna(v)}
    branch = {str(k): int(v) for k, v in (branch_steps or {}).items()}

    out = table.copy()
    n = len(out)
    new: dict[str, np.ndarray] = {
        c: np.full(n, np.nan) for c in ("s1", "s2", "s1_pt", "s1_cpt", "s2_pt", "s2_cpt", "cpt_step")
    }
    histories = {rid: _run_history(rid, sched, parents, branch) for rid in runs}
    mpl: dict[str, np.ndarray] = {}
    if multi_power_bins is not None:
        longest = max(h[0].size for h in histories.values())
        mpl = {c: np.full(n, np.nan) for c in ("mpl_s1", *mpl_columns(multi_power_bins))}
    run_ids = out["run_id"].astype(str).to_numpy()
    steps_all = out["step"].to_numpy()
    for rid in runs:
        lr, eta0, w, n_anc = histories[rid]
        pos = np.flatnonzero(run_ids == rid)
        st = np.asarray(steps_all[pos], dtype=np.float64)
        if np.any(~np.isfinite(st)) or np.any(st != np.round(st)):
            raise InputError(f"run '{rid}' has non-integer steps", column="step")
        hist_step = st.astype(np.int64) + (n_anc if steps_from == "run" else 0)
        if hist_step.min() < 0 or hist_step.max() > lr.size:
            bad = int(hist_step.max() if hist_step.max() > lr.size else hist_step.min())
            raise InputError(
                f"run '{rid}': step {bad - (n_anc if steps_from == 'run' else 0)} is outside its schedule "
                f"({lr.size - n_anc} steps)",
                column="step",
            )
        a = cpt_areas(
            lr[:n_anc] if n_anc else lr,
            lr[n_anc:] if n_anc else None,
            decay=decay,
            warmup=warmup,
            split=split,
            pt_warmup_steps=min(w, n_anc if n_anc else lr.size),
            pt_eta0=eta0,
            lr_weight_exponent=lr_weight_exponent,
        )
        cols = a.columns(hist_step)
        if rid in blackbox_runs:  # no PT history: the run's own areas are CPT areas (S1_pt is the law's parameter)
            cols = {**cols, "s1_cpt": cols["s1"], "s2_cpt": cols["s2"], "s1_pt": np.zeros_like(cols["s1"]),
                    "s2_pt": np.zeros_like(cols["s2"]), "cpt_step": hist_step}  # fmt: skip
        for c in ("s1", "s2", "s1_pt", "s1_cpt", "s2_pt", "s2_cpt", "cpt_step"):
            new[c][pos] = cols[c]
        if multi_power_bins is not None:
            # Before the first update there is no history: mpl_s1 = 0 (the law is undefined there) and the
            # history columns stay NaN, so that a fit or prediction leaves such rows out.
            has = hist_step >= 1
            f = multi_power_features(lr, hist_step[has], eta0=eta0, n_bins=multi_power_bins, longest=longest)
            mpl["mpl_s1"][pos[~has]] = 0.0
            for c, v in f.items():
                mpl[c][pos[has]] = v
    new["cpt_step"] = new["cpt_step"].astype(np.int64)
    added = pd.DataFrame({**new, **mpl}, index=out.index)
    out = pd.concat([out.drop(columns=[c for c in added.columns if c in out.columns]), added], axis=1)
    if replay_column is not None:
        if replay_column not in out.columns:
            raise InputError(f"replay column '{replay_column}' not in the RunTable", column=replay_column)
        r = pd.to_numeric(out[replay_column], errors="coerce").to_numpy(dtype=np.float64)
        if np.any(~np.isfinite(r)) or np.any((r < 0) | (r > 1)):
            bad = int(np.flatnonzero(~np.isfinite(r) | (r < 0) | (r > 1))[0])
            raise InputError(f"expected a replay share in [0, 1], got {r[bad]!r}", row=bad + 1, column=replay_column)
        out["replay_ratio"] = r
    return out


SCHEDULE_FEATURES: tuple[str, ...] = ("s1", "s2", "s1_pt", "s1_cpt", "s2_pt", "s2_cpt", "cpt_step", "mpl_s1")


def needs_schedule_features(inputs: Sequence[str]) -> bool:
    """True when a law with these inputs reads LR-area columns that :func:`add_schedule_features` builds."""
    return any(c in SCHEDULE_FEATURES or c.startswith("mpl_") for c in inputs)


def features_for_law(table: Any, law: Any, schedules: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """Add the schedule features a law needs (no-op for laws without LR-area inputs, or when present).

    Schedules come from ``schedules`` or the table's ``schedule`` column; ``kwargs`` go to
    :func:`add_schedule_features`, with the builder options the law declares in ``derived_inputs()`` (e.g. the
    multi-power bin count) as defaults. The engine's path for every law and every feature source is
    :func:`mixlaw.fit.problem.features.add_features`; this stays for scripts that have schedules outside the table.
    """
    inputs = tuple(getattr(law, "inputs", ()))
    wanted = [c for c in inputs if c in SCHEDULE_FEATURES or c.startswith("mpl_")]
    if all(c in table.columns for c in wanted):
        return table
    # The law's own declaration (Law.derived_inputs) says which builder options it needs, e.g. the bin count.
    for need in getattr(law, "derived_inputs", lambda: ())():
        if need.source == "schedule":
            for k, v in (need.options or {}).items():
                kwargs.setdefault(k, v)
    return add_schedule_features(table, schedules, **kwargs)
