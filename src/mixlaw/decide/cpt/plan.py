"""CPT plans: the PT schedule, branch step, CPT schedule and replay ratio; plan files; areas and guards."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mixlaw.decide.cpt.fits import CptFits, LawFit
from mixlaw.errors import ExtrapolationWarning, InputError
from mixlaw.limits import MemoryLimit, memory
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

    def with_base_tokens(
        self, tokens: float, tokens_per_step: float, lr: float | None = None
    ) -> tuple[CptPlan, BaseTokens]:
        """The plan whose PT schedule is the base model's pre-training given by its token count
        (:class:`BaseTokens`: constant LR ``lr``, default the CPT schedule's peak, for ``tokens / tokens_per_step``
        steps), and that assumption. Refused where the plan already has a PT schedule (give one of the two)."""
        if self.pt is not None:
            raise InputError("the plan has a [pt] schedule and base tokens were given: give one of the two")
        base = BaseTokens(tokens, tokens_per_step, self.cpt.peak_lr if lr is None else lr, lr_given=lr is not None)
        return replace(self, pt=base.schedule, branch_step=None), base


@dataclass(frozen=True)
class BaseTokens:
    """The base model's pre-training given by its token count alone (Wang et al. 2025, Sec. 6, for a base whose
    schedule is not known): **constant LR** ``lr`` for ``steps = round(tokens / tokens_per_step)`` steps, no warm-up
    and no decay, so that the PT areas of the law are

    .. math:: S_1^{pt} = \\frac{N}{B} \\eta, \\qquad S_2^{pt} = 0,

    ``N`` the base's PT tokens, ``B`` the tokens per optimizer step and ``η`` the LR (by default the CPT schedule's
    peak). A base that was annealed had a larger ``S2_pt`` (lower loss at the branch): the assumption then
    over-predicts the base's loss; give the schedule itself (``[pt] schedule`` in the plan, or
    ``--law-option base_schedule=SPEC`` when fitting) where it is known. The same history as a fit option:
    :attr:`spec`."""

    tokens: float
    tokens_per_step: float
    lr: float
    lr_given: bool = True
    """Whether ``lr`` was given (else it is the CPT schedule's peak)."""

    def __post_init__(self) -> None:
        for name in ("tokens", "tokens_per_step", "lr"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v <= 0:
                raise InputError(f"base {name.replace('_', ' ')} must be a positive number, got {v!r}")
        if self.tokens < self.tokens_per_step:
            raise InputError(
                f"base tokens {self.tokens:g} are fewer than one step of {self.tokens_per_step:g} tokens: "
                "give the base's pre-training token count and the tokens per optimizer step"
            )

    @property
    def steps(self) -> int:
        return max(1, round(self.tokens / self.tokens_per_step))

    @property
    def spec(self) -> str:
        """The schedule spec of the assumed PT history (``--law-option base_schedule=`` takes it at fit time)."""
        return f"constant:peak={self.lr:.6g},steps={self.steps}"

    @property
    def schedule(self) -> Schedule:
        return Schedule.parse(self.spec)

    def describe(self) -> str:
        """One line: the assumption, its areas and the equivalent fit option."""
        lr = f"{self.lr:g}" + ("" if self.lr_given else " (the CPT schedule's peak)")
        return (
            f"base model's PT history from its token count: constant LR {lr} for {self.tokens:g} / "
            f"{self.tokens_per_step:g} tokens per step = {self.steps:,} steps, S1_pt = {self.steps * self.lr:.4g}, "
            f"S2_pt = 0 (no warm-up, no decay); as a fit option: --law-option base_schedule={self.spec}"
        )


def load_plan(path: str | Path, *, limit: MemoryLimit | None = None) -> CptPlan:
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
    from mixlaw.safeio import loads_toml, read_text

    p = Path(path)
    d = loads_toml(read_text(p, "plan TOML"), str(p))  # strict UTF-8, bounded size and nesting
    try:
        return plan_from_dict(d, base_dir=p.parent, limit=limit)
    except InputError as exc:
        raise exc if exc.file else InputError(str(exc), file=str(p)) from None


#: Memory of a plan per step (its LR arrays, areas and features, measured 70–100 bytes a step): the estimate that
#: bounds a plan before it is built (``--max-memory``).
PLAN_BYTES_PER_STEP = 100


def _plan_schema() -> Any:
    """The pydantic model of a plan TOML (built on first use: pydantic is not imported at CLI start)."""
    from typing import Annotated

    from pydantic import BaseModel, ConfigDict, Field

    unit = Annotated[float, Field(allow_inf_nan=False, ge=0.0, le=1.0)]
    step = Annotated[int, Field(ge=1, le=2**53)]
    sched = Annotated[str, Field(min_length=1, max_length=10_000)] | dict[str, Any]

    class Section(BaseModel):
        model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    class Pt(Section):
        schedule: sched | None = None
        loss_potential: unit | None = None
        branch_step: step | None = None

    class Cpt(Section):
        schedule: sched
        peak_lr: Annotated[float, Field(allow_inf_nan=False, gt=0.0)] | None = None
        replay_ratio: unit = 0.0

    class Areas(Section):
        decay: Annotated[float, Field(allow_inf_nan=False, gt=0.0, lt=1.0)] = DEFAULT_DECAY
        warmup: Literal["peak", "logged", "raw"] = "peak"
        split: Literal["time", "origin"] = "time"
        eval_every: step = 100
        n_params: Annotated[float, Field(allow_inf_nan=False, gt=0.0)] | None = None

    class Plan(Section):
        pt: Pt = Pt()
        cpt: Cpt
        areas: Areas = Areas()

    return Plan


def plan_from_dict(
    d: Mapping[str, Any], base_dir: str | Path | None = None, *, limit: MemoryLimit | None = None
) -> CptPlan:
    """Build a :class:`CptPlan` from the TOML layout of :func:`load_plan`.

    The document is validated first against the plan schema (strict types: a number is a TOML number, not a
    string or a boolean; finite; ratios in [0, 1]; steps integers ≥ 1; unknown sections and keys refused), and
    the plan's steps are bounded by ``limit`` (:func:`mixlaw.limits.memory`, :data:`PLAN_BYTES_PER_STEP`)
    before any LR array is built.
    """
    from pydantic import ValidationError

    from mixlaw.safeio import field_error

    if not isinstance(d, Mapping):
        raise InputError(f"expected a plan table, got {type(d).__name__}")
    unknown = sorted(set(d) - {"pt", "cpt", "areas"})
    if unknown:
        raise InputError(f"unknown plan section(s) {unknown}; expected [pt], [cpt], [areas]")
    if not isinstance(d.get("cpt"), Mapping) or "schedule" not in d["cpt"]:
        raise InputError("plan needs [cpt] schedule = '...'")
    try:
        m = _plan_schema().model_validate(dict(d))
    except ValidationError as exc:
        raise field_error(exc, None) from None

    def sched(v: Any, section: str) -> Schedule:
        try:
            if isinstance(v, str) and not v.strip().startswith("{"):
                out = Schedule.parse(v, base_dir=base_dir)
            else:
                out = as_schedule(v)
        except InputError as exc:
            raise InputError(f"[{section}] schedule: {exc}") from None
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise InputError(
                f"[{section}] schedule: expected a schedule spec or table, got {v!r:.80} ({exc})"
            ) from None
        return out

    pt = sched(m.pt.schedule, "pt") if m.pt.schedule is not None else None
    cpt = sched(m.cpt.schedule, "cpt")
    steps = (pt.total_steps if pt is not None else 0) + cpt.total_steps
    memory(steps * PLAN_BYTES_PER_STEP, f"a plan of {steps:,} steps", limit)
    plan = CptPlan(
        pt=pt,
        cpt=cpt,
        branch_step=m.pt.branch_step,
        replay_ratio=float(m.cpt.replay_ratio),
        eval_every=int(m.areas.eval_every),
        decay=float(m.areas.decay),
        warmup=m.areas.warmup,
        split=m.areas.split,
        n_params=None if m.areas.n_params is None else float(m.areas.n_params),
    )
    if m.cpt.peak_lr is not None:
        plan = plan.with_cpt_peak(float(m.cpt.peak_lr))
    if m.pt.loss_potential is not None:
        plan = plan.with_loss_potential(float(m.pt.loss_potential))
    return plan


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
