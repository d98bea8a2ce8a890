"""CPT plans: the PT schedule, branch step, CPT schedule and replay ratio; plan files; areas and guards."""

from __future__ import annotations

import tomllib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mixlaw.decide.cpt.fits import CptFits, LawFit
from mixlaw.errors import ExtrapolationWarning, InputError
from mixlaw.schedules import DEFAULT_DECAY, CptAreas, Schedule, as_schedule, cpt_areas

NEAR_ZERO_FRAC = 1e-3  # an LR below 0.1 % of the peak counts as "≈ 0" for the guard
LR_TOL = 1.05  # 5 % above the largest fitted LR is still "inside" the fitted range
#: Inputs a plan provides (:func:`_features`); a law needing anything else cannot be evaluated on a plan.
PLAN_INPUTS = ("s1_pt", "s1_cpt", "s2_pt", "s2_cpt", "s1", "s2", "lr", "step", "cpt_step", "replay_ratio", "n_params")


@dataclass(frozen=True)
class CptPlan:
    """A continual pre-training plan.

    Attributes
    ----------
    pt
        PT schedule (ignored in black-box mode).
    cpt
        CPT schedule.
    branch_step
        PT step the CPT starts from (default: the end of ``pt``) — the starting checkpoint.
    replay_ratio
        Replay share ``r_pt`` of D_pt data in the CPT mix (laws with a ``replay_ratio`` input).
    eval_every
        Step spacing of the predicted trajectory (the last step is always included).
    decay, warmup, split
        Area conventions (:mod:`mixlaw.schedules`).
    n_params
        Non-embedding parameters (laws with an ``n_params`` input).
    """

    pt: Schedule | None
    cpt: Schedule
    branch_step: int | None = None
    replay_ratio: float = 0.0
    eval_every: int = 100
    decay: float = DEFAULT_DECAY
    warmup: Literal["peak", "logged", "raw"] = "peak"
    split: Literal["time", "origin"] = "time"
    n_params: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.replay_ratio <= 1.0:
            raise InputError(f"replay_ratio must be in [0, 1], got {self.replay_ratio}")
        if self.eval_every < 1:
            raise InputError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.pt is not None and self.branch_step is not None:
            if not 0 < self.branch_step <= self.pt.total_steps:
                raise InputError(f"branch_step {self.branch_step} outside the PT schedule (1..{self.pt.total_steps})")

    @property
    def pt_steps(self) -> int:
        if self.pt is None:
            return 0
        return self.pt.total_steps if self.branch_step is None else int(self.branch_step)

    def with_loss_potential(self, lp: float) -> CptPlan:
        """The plan with the PT schedule annealed to ``lp·peak`` (loss potential ``lp``; 1 = not annealed).

        A CPT schedule with a warm-up re-warms from that final PT LR (its ``start_lr`` is set to it)."""
        if self.pt is None:
            raise InputError("loss potential needs a PT schedule")
        if not 0.0 <= lp <= 1.0:
            raise InputError(f"loss potential must be in [0, 1], got {lp}")
        if self.pt.kind not in ("wsd", "cosine", "linear"):
            raise InputError(f"loss potential needs a decaying PT schedule (wsd/cosine/linear), got '{self.pt.kind}'")
        final = lp * self.pt.peak_lr
        cpt = self.cpt
        if cpt.kind != "table" and cpt.warmup_steps > 0:  # the re-warm-up starts where PT stopped
            cpt = cpt.replace(start_lr=min(final, cpt.peak_lr))
        return replace(self, pt=self.pt.replace(final_lr=final), cpt=cpt)

    def with_cpt_peak(self, peak: float) -> CptPlan:
        """The plan with the CPT schedule scaled to peak LR ``peak`` (same shape, same final/peak ratio)."""
        if peak <= 0:
            raise InputError(f"CPT peak LR must be > 0, got {peak}")
        return replace(self, cpt=self.cpt.scaled(peak / self.cpt.peak_lr))

    def with_replay(self, r: float) -> CptPlan:
        return replace(self, replay_ratio=float(r))


def load_plan(path: str | Path) -> CptPlan:
    """Read a plan TOML::

    [pt]
    schedule = "wsd:peak=2e-4,steps=40000,decay=8000"
    loss_potential = 0.5        # optional: PT annealed to 50 % of its peak
    branch_step = 30000         # optional: start CPT from this PT step
    [cpt]
    schedule = "cosine:peak=2e-4,steps=10000,warmup=500"
    peak_lr = 1e-4              # optional: rescales the CPT schedule
    replay_ratio = 0.25         # optional
    [areas]                     # optional
    decay = 0.999
    warmup = "peak"
    split = "time"
    eval_every = 100
    n_params = 106e6            # optional (size-aware laws)
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"plan file not found: {p}")
    try:
        d = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", file=str(p)) from None
    try:
        return plan_from_dict(d, base_dir=p.parent)
    except InputError as exc:
        raise InputError(str(exc), file=str(p)) from None


def plan_from_dict(d: Mapping[str, Any], base_dir: str | Path | None = None) -> CptPlan:
    """Build a :class:`CptPlan` from the TOML layout of :func:`load_plan`."""
    known = {"pt", "cpt", "areas"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise InputError(f"unknown plan section(s) {unknown}; expected [pt], [cpt], [areas]")
    if "cpt" not in d or "schedule" not in d["cpt"]:
        raise InputError("plan needs [cpt] schedule = '...'")

    def sched(v: Any) -> Schedule:
        if isinstance(v, str) and not v.strip().startswith("{"):
            return Schedule.parse(v, base_dir=base_dir)
        return as_schedule(v)

    pt_d, cpt_d, ar = dict(d.get("pt", {})), dict(d["cpt"]), dict(d.get("areas", {}))
    _no_extra(pt_d, {"schedule", "loss_potential", "branch_step"}, "pt")
    _no_extra(cpt_d, {"schedule", "peak_lr", "replay_ratio"}, "cpt")
    _no_extra(ar, {"decay", "warmup", "split", "eval_every", "n_params"}, "areas")
    plan = CptPlan(
        pt=sched(pt_d["schedule"]) if "schedule" in pt_d else None,
        cpt=sched(cpt_d["schedule"]),
        branch_step=None if pt_d.get("branch_step") is None else int(pt_d["branch_step"]),
        replay_ratio=float(cpt_d.get("replay_ratio", 0.0)),
        eval_every=int(ar.get("eval_every", 100)),
        decay=float(ar.get("decay", DEFAULT_DECAY)),
        warmup=str(ar.get("warmup", "peak")),  # type: ignore[arg-type]
        split=str(ar.get("split", "time")),  # type: ignore[arg-type]
        n_params=None if ar.get("n_params") is None else float(ar["n_params"]),
    )
    if "peak_lr" in cpt_d:
        plan = plan.with_cpt_peak(float(cpt_d["peak_lr"]))
    if "loss_potential" in pt_d:
        plan = plan.with_loss_potential(float(pt_d["loss_potential"]))
    return plan


def _no_extra(d: Mapping[str, Any], allowed: set[str], section: str) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise InputError(f"unknown key(s) {extra} in [{section}]; allowed: {sorted(allowed)}")


def plan_areas(plan: CptPlan) -> CptAreas:
    """Areas of the whole plan at every step (PT truncated at the branch step, then CPT)."""
    cpt_lr = plan.cpt.lrs()
    if plan.pt is None:  # black-box: only the CPT schedule, re-warming from its own start LR
        return cpt_areas(np.zeros(0), cpt_lr, decay=plan.decay, split=plan.split, pt_eta0=plan.cpt.eta0)
    pt_lr = plan.pt.lrs()[: plan.pt_steps]
    return cpt_areas(
        pt_lr,
        cpt_lr,
        decay=plan.decay,
        warmup=plan.warmup,
        split=plan.split,
        pt_warmup_steps=min(plan.pt.warmup_steps, plan.pt_steps),
        pt_eta0=plan.pt.eta0,
    )


def _features(plan: CptPlan, areas: CptAreas, idx: np.ndarray) -> dict[str, np.ndarray]:
    x = areas.columns(idx)
    x["replay_ratio"] = np.full(idx.size, plan.replay_ratio)
    if plan.n_params is not None:
        x["n_params"] = np.full(idx.size, float(plan.n_params))
    return x


def _guards(fits: CptFits, plan: CptPlan, areas: CptAreas) -> list[str]:
    """Extrapolation guards of laws.md §4.4; returns the messages (also issued as warnings)."""
    msgs = []
    max_lr = fits.max_lr
    peak = float(np.max(areas.lr))
    if max_lr is not None and peak > LR_TOL * max_lr:
        msgs.append(
            f"plan peak LR {peak:.3g} exceeds the largest fitted LR {max_lr:.3g}: the law always predicts "
            "lower loss for a scaled-up schedule, so peak-LR extrapolation is not trustworthy"
        )
    lr = areas.lr[1:]
    ref = max(peak, 1e-300)
    # flat stretches at LR ≈ 0 (a decay *to* 0 is fine; staying there is what the law mispredicts)
    flat_zero = (lr <= NEAR_ZERO_FRAC * ref) & (np.abs(np.diff(areas.lr)) <= 1e-9 * ref)
    limit = 0.1 / (1.0 - plan.decay)
    if int(flat_zero.sum()) > limit:
        first = int(np.flatnonzero(flat_zero)[0]) + 1
        msgs.append(
            f"plan stays at LR ≈ 0 for {int(flat_zero.sum())} steps (from step {first}): the annealing area "
            "keeps growing there, so the predicted loss keeps falling although little is learned"
        )
    for m in msgs:
        warnings.warn(m, ExtrapolationWarning, stacklevel=3)
    return msgs


def _law_needs(fit: LawFit, plan: CptPlan) -> None:
    if "replay_ratio" in fit.law.inputs and plan.replay_ratio is None:
        raise InputError(f"law '{fit.law.name}' needs a replay ratio in the plan")
    if "n_params" in fit.law.inputs and plan.n_params is None:
        raise InputError(f"law '{fit.law.name}' needs n_params in the plan ([areas] n_params = ...)")
    missing = [c for c in fit.law.inputs if c not in PLAN_INPUTS]
    if missing:
        shown = missing[:3] + (["…"] if len(missing) > 3 else [])
        raise InputError(
            f"law '{fit.law.name}' needs inputs {shown} that a PT + CPT plan does not provide (a plan gives "
            f"{', '.join(PLAN_INPUTS)}); use lr_annealing or a cpt law for CPT plans"
        )
