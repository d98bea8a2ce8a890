"""Continual pre-training decisions from fitted schedule-aware laws (Wang et al., arXiv:2505.07796; laws.md
§5).

What it answers, for a **plan** (PT schedule, branch step / loss potential, CPT schedule, CPT peak LR,
replay ratio):

* :func:`predict_plan` — the predicted loss trajectory of every fitted eval set (D_pt, D_cpt, OOD
  combinations and the weighted composite) over the whole PT + CPT run, with bootstrap interval bands when
  the fits carry bootstrap parameters;
* :func:`optimize` — the best loss potential, CPT peak LR or replay ratio for weights ``(w_pt, w_cpt)`` on the
  signed objective ``w_pt·L_pt + w_cpt·L_cpt`` at the final CPT step (laws.md §5.7 item 1), searched
  **inside a schedule family** (a 1-D grid over one hyper-parameter, never a free per-step schedule,
  laws.md §4.4 item 3);
* :func:`critical_point` and :func:`turning_length` — the PT step whose CPT curve converges back to its start,
  and the CPT steps until the D_pt loss (or the composite) returns to its start (``inf`` with a reason when it
  does not within the horizon, and the asymptotic class reported separately, laws.md §5.5);
* :func:`schedule_aware_cmr` — the critical mixture ratio under the user's CPT schedule from a fitted
  replay law;
* :func:`identifiability` — which parameter directions the data do not determine (B, E, β in particular).

Guards (laws.md §4.4): an :class:`~mixlaw.errors.ExtrapolationWarning` when a plan's peak LR exceeds the
LRs the fit saw, and when a plan keeps stepping after its LR is ≈ 0 (the annealing area keeps growing
there, so the law keeps lowering the loss although nothing is being learned).

Fits enter as :class:`LawFit` (law + natural-unit parameters + optional bootstrap parameters); anything with
``law``, ``params`` and ``bootstrap_params`` attributes (the engine's ``FitResult``) converts through
:meth:`LawFit.from_any`. A :class:`CptFits` bundle maps eval-set names to fits and names the D_pt and D_cpt
sets.
"""

from __future__ import annotations

import json
import math
import tomllib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from mixlaw.errors import ExtrapolationWarning, InputError
from mixlaw.laws import Law, get_law
from mixlaw.schedules import DEFAULT_DECAY, CptAreas, Schedule, as_schedule, cpt_areas

__all__ = [
    "LawFit",
    "CptFits",
    "CptPlan",
    "predict_plan",
    "plan_areas",
    "optimize",
    "OptimizeResult",
    "optimum_vs_weight",
    "critical_point",
    "CriticalPoint",
    "critical_s1_constant",
    "turning_length",
    "TurningLength",
    "schedule_aware_cmr",
    "ScheduleCMR",
    "identifiability",
    "load_fits",
    "load_plan",
]

NEAR_ZERO_FRAC = 1e-3  # an LR below 0.1 % of the peak counts as "≈ 0" for the guard
LR_TOL = 1.05  # 5 % above the largest fitted LR is still "inside" the fitted range
_W_GRID = tuple(float(w) for w in np.linspace(0.0, 1.0, 11))


# ---------------------------------------------------------------------- fits
@dataclass(frozen=True)
class LawFit:
    """A fitted law ready for prediction.

    Attributes
    ----------
    law
        The registered law (with its options).
    params
        Natural-unit parameters.
    bootstrap
        ``(B, P)`` natural-unit parameters of successful bootstrap resamples (columns in ``law.param_names``
        order), or ``None``.
    target
        Name of the fitted eval column (e.g. ``loss_general``).
    max_lr
        Largest LR in the fitted data (peak-LR extrapolation guard); ``None`` when unknown.
    """

    law: Law
    params: dict[str, float]
    bootstrap: np.ndarray | None = None
    target: str = "loss"
    max_lr: float | None = None
    record: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_any(cls, obj: Any, *, target: str | None = None, max_lr: float | None = None) -> LawFit:
        """From a :class:`LawFit`, an engine ``FitResult`` (``law``, ``params``, ``bootstrap_params``) or a
        dict ``{"law": name, "options": {...}, "params": {...}, "bootstrap_params": [[...]] | {name: [...]},
        "target": ..., "max_lr": ...}``."""
        if isinstance(obj, LawFit):
            return obj
        if isinstance(obj, Mapping):
            if "law" not in obj or "params" not in obj:
                raise InputError("a fit needs 'law' and 'params'")
            law = get_law(obj["law"], **dict(obj.get("options") or {}))
            params = {k: float(v) for k, v in obj["params"].items()}
            boot = _boot_array(law, obj.get("bootstrap_params"))
            return cls(
                law=law,
                params=_check_params(law, params),
                bootstrap=boot,
                target=str(target or obj.get("target") or "loss"),
                max_lr=_num_or_none(obj.get("max_lr", max_lr)),
            )
        if hasattr(obj, "law") and hasattr(obj, "params"):
            law = obj.law if isinstance(obj.law, Law) else get_law(obj.law)
            boot = _boot_array(law, getattr(obj, "bootstrap_params", None))
            meta = getattr(obj, "meta", None) or {}
            to_dict = getattr(obj, "to_dict", None)
            return cls(
                law=law,
                params=_check_params(law, {k: float(v) for k, v in dict(obj.params).items()}),
                bootstrap=boot,
                target=str(target or getattr(obj, "target", None) or "loss"),
                max_lr=_num_or_none(max_lr if max_lr is not None else meta.get("max_lr")),
                record=to_dict() if callable(to_dict) else None,
            )
        raise InputError(f"cannot read a fit from {type(obj).__name__}")

    def to_dict(self) -> dict[str, Any]:
        if self.record is not None:  # keep the engine's full record (schema, starts, metrics, bootstrap)
            return {**self.record, "max_lr": self.max_lr}
        d: dict[str, Any] = {
            "law": self.law.name,
            "options": dict(self.law.options),
            "params": dict(self.params),
            "target": self.target,
            "max_lr": self.max_lr,
        }
        if self.bootstrap is not None:
            d["bootstrap_params"] = self.bootstrap.tolist()
        return d

    def param_sets(self) -> np.ndarray:
        """``(1 + B, P)``: the point estimate then the bootstrap sets."""
        point = np.array([[self.params[n] for n in self.law.param_names]])
        return point if self.bootstrap is None else np.vstack([point, self.bootstrap])

    def evaluate(self, x: Mapping[str, np.ndarray], sets: np.ndarray | None = None) -> np.ndarray:
        """``(S, n)`` predictions for parameter sets ``sets`` (default: point + bootstrap)."""
        ps = self.param_sets() if sets is None else np.atleast_2d(sets)
        missing = [c for c in self.law.inputs if c not in x]
        if missing:
            raise InputError(f"law '{self.law.name}' needs inputs {missing}")
        xt = {k: torch.from_numpy(np.array(x[k], dtype=np.float64)) for k in self.law.inputs}
        pt = {n: torch.as_tensor(ps[:, i : i + 1]) for i, n in enumerate(self.law.param_names)}
        with torch.no_grad():
            return self.law.predict(xt, pt).numpy()


def _num_or_none(v: Any) -> float | None:
    return None if v is None else float(v)


def _check_params(law: Law, params: dict[str, float]) -> dict[str, float]:
    missing = [n for n in law.param_names if n not in params]
    if missing:
        raise InputError(f"fit of law '{law.name}' lacks parameters {missing}")
    return {n: float(params[n]) for n in law.param_names}


def _boot_array(law: Law, boot: Any) -> np.ndarray | None:
    if boot is None:
        return None
    if isinstance(boot, pd.DataFrame):
        if boot.empty:
            return None
        return boot[list(law.param_names)].to_numpy(dtype=np.float64)
    if isinstance(boot, Mapping):
        return np.column_stack([np.asarray(boot[n], dtype=np.float64) for n in law.param_names])
    arr = np.asarray(boot, dtype=np.float64)
    if arr.size == 0:
        return None
    if arr.ndim != 2 or arr.shape[1] != len(law.param_names):
        raise InputError(f"bootstrap parameters must be (B, {len(law.param_names)}), got {arr.shape}")
    return arr


@dataclass(frozen=True)
class CptFits:
    """Fitted laws per eval set: ``fits[name]``; ``pt_set`` / ``cpt_set`` name the D_pt and D_cpt sets.

    ``ood`` maps an OOD eval-set name to an ``ood_combination`` fit (inputs ``loss_pt``, ``loss_cpt``),
    predicted from the D_pt and D_cpt predictions.
    """

    fits: dict[str, LawFit]
    pt_set: str
    cpt_set: str | None = None
    ood: dict[str, LawFit] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pt_set not in self.fits:
            raise InputError(f"pt_set '{self.pt_set}' has no fit; fitted sets: {sorted(self.fits)}")
        if self.cpt_set is not None and self.cpt_set not in self.fits:
            raise InputError(f"cpt_set '{self.cpt_set}' has no fit; fitted sets: {sorted(self.fits)}")
        if self.ood and self.cpt_set is None:
            raise InputError("OOD combinations need both a pt_set and a cpt_set")

    @property
    def blackbox(self) -> bool:
        return all(f.law.options.get("base") == "blackbox" for f in self.fits.values())

    @property
    def max_lr(self) -> float | None:
        vals = [f.max_lr for f in self.fits.values() if f.max_lr is not None]
        return max(vals) if vals else None

    def save(self, path: str | Path) -> None:
        """Write the bundle as JSON (the ``FIT.json`` the ``mixlaw cpt`` verbs read)."""
        Path(path).write_text(json.dumps(self.to_dict(), allow_nan=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "cpt_fits",
            "pt_set": self.pt_set,
            "cpt_set": self.cpt_set,
            "fits": {k: v.to_dict() for k, v in self.fits.items()},
            "ood": {k: v.to_dict() for k, v in self.ood.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CptFits:
        if "fits" not in d or "pt_set" not in d:
            raise InputError("a CPT fit bundle needs 'fits' and 'pt_set'")
        top = _num_or_none(d.get("max_lr"))
        return cls(
            fits={k: _load_one(v, k, top) for k, v in d["fits"].items()},
            pt_set=str(d["pt_set"]),
            cpt_set=None if d.get("cpt_set") is None else str(d["cpt_set"]),
            ood={k: _load_one(v, k, top) for k, v in (d.get("ood") or {}).items()},
        )

    @classmethod
    def from_results(
        cls,
        results: Mapping[str, Any],
        *,
        pt_set: str,
        cpt_set: str | None = None,
        ood: Mapping[str, Any] | None = None,
        max_lr: float | None = None,
    ) -> CptFits:
        """Bundle engine ``FitResult`` objects (or :class:`LawFit`) keyed by eval set; ``max_lr`` = the
        largest LR in the fitted runs (enables the peak-LR extrapolation guard)."""
        return cls(
            fits={k: _load_one(v, k, max_lr) for k, v in results.items()},
            pt_set=pt_set,
            cpt_set=cpt_set,
            ood={k: _load_one(v, k, max_lr) for k, v in (ood or {}).items()},
        )


def _load_one(obj: Any, target: str, max_lr: float | None = None) -> LawFit:
    """One fit from a FitResult, its JSON dict (``"schema"`` key), or the plain dict of
    :meth:`LawFit.to_dict`."""
    if isinstance(obj, Mapping) and "schema" in obj:
        from mixlaw.fit import FitResult

        rec = dict(obj)
        lf = LawFit.from_any(FitResult.from_dict(rec), target=target, max_lr=_num_or_none(obj.get("max_lr", max_lr)))
        return replace(lf, record=rec)
    if isinstance(obj, Mapping):
        return LawFit.from_any({**dict(obj), "max_lr": obj.get("max_lr", max_lr)}, target=target)
    return LawFit.from_any(obj, target=target, max_lr=max_lr)


def load_fits(path: str | Path) -> CptFits:
    """Read ``FIT.json``: a CPT bundle (:meth:`CptFits.to_dict`) or a single fit (then it is the D_pt set)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"fit file not found: {p}")
    try:
        d = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", file=str(p), row=exc.lineno) from None
    if isinstance(d, Mapping) and "fits" in d:
        return CptFits.from_dict(d)
    one = _load_one(d, str(d.get("target", "loss")) if isinstance(d, Mapping) else "loss")
    return CptFits(fits={one.target: one}, pt_set=one.target)


# ---------------------------------------------------------------------- plans
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
    if any(c.startswith("mpl_") for c in fit.law.inputs):
        raise InputError("multi_power fits predict single-phase runs; use lr_annealing/cpt laws for CPT plans")


def predict_plan(
    fits: CptFits,
    plan: CptPlan,
    *,
    weights: tuple[float, float] | None = None,
    level: float = 0.9,
    steps: np.ndarray | None = None,
) -> pd.DataFrame:
    """Predicted trajectories of every fitted eval set for a plan.

    Returns one row per predicted step with ``step`` (from the start of PT), ``cpt_step``, ``lr``, the areas,
    ``pred_<set>`` for each fitted set and each OOD combination, ``lo_<set>``/``hi_<set>`` (bootstrap
    percentile band at ``level``, when the fits carry bootstrap parameters) and with ``weights = (w_pt,
    w_cpt)`` the composite ``pred_composite = w_pt·L_pt + w_cpt·L_cpt``. ``df.attrs["warnings"]`` lists the
    guard messages.
    """
    areas = plan_areas(plan)
    T = areas.step.size - 1
    if steps is None:
        e, Tp = plan.eval_every, plan.pt_steps
        # every e steps of PT, then every e CPT steps counted from the branch (so CPT curves align across plans)
        idx = np.unique(np.concatenate([np.arange(e, Tp, e), Tp + np.arange(0, T - Tp + 1, e), [T]])).astype(np.int64)
        idx = idx[idx >= 1]
    else:
        idx = np.asarray(steps, dtype=np.int64)
    msgs = _guards(fits, plan, areas)
    x = _features(plan, areas, idx)
    out = pd.DataFrame({k: x[k] for k in ("step", "cpt_step", "lr", "s1_pt", "s1_cpt", "s2_pt", "s2_cpt")})
    preds: dict[str, np.ndarray] = {}
    for name, f in fits.fits.items():
        _law_needs(f, plan)
        preds[name] = f.evaluate(x)
    for name, f in fits.ood.items():
        if fits.cpt_set is None:  # CptFits refuses OOD sets without a CPT set; kept as a clear error
            raise InputError("an OOD combination needs fits for both the D_pt and the D_cpt set")
        preds[name] = _ood_eval(f, preds[fits.pt_set], preds[fits.cpt_set])
    if weights is not None:
        if fits.cpt_set is None:
            raise InputError("a composite needs fits for both the D_pt and the D_cpt set")
        w_pt, w_cpt = _check_weights(weights)
        preds["composite"] = w_pt * preds[fits.pt_set] + w_cpt * preds[fits.cpt_set]
    q = (1 - level) / 2
    for name, p in preds.items():
        out[f"pred_{name}"] = p[0]
        if p.shape[0] > 2:
            out[f"lo_{name}"] = np.quantile(p[1:], q, axis=0)
            out[f"hi_{name}"] = np.quantile(p[1:], 1 - q, axis=0)
    out.attrs["warnings"] = msgs
    return out


def _ood_eval(f: LawFit, l_pt: np.ndarray, l_cpt: np.ndarray) -> np.ndarray:
    """OOD predictions row-matched with the (S, n) D_pt / D_cpt predictions (bootstrap sets paired by
    index)."""
    sets = f.param_sets()
    S = max(l_pt.shape[0], 1)
    ps = sets[np.arange(S) % sets.shape[0]]
    names = f.law.param_names
    c = {n: ps[:, i : i + 1] for i, n in enumerate(names)}
    return c["ood_coef_pt"] * l_pt + c["ood_coef_cpt"] * l_cpt


def _check_weights(weights: Sequence[float]) -> tuple[float, float]:
    if len(weights) != 2:
        raise InputError(f"weights must be two numbers W_PT,W_CPT, got {list(weights)}")
    w_pt, w_cpt = (float(w) for w in weights)
    if w_pt < 0 or w_cpt < 0 or not math.isclose(w_pt + w_cpt, 1.0, abs_tol=1e-6):
        raise InputError(f"weights must be non-negative and sum to 1, got {w_pt},{w_cpt}")
    return w_pt, w_cpt


# ---------------------------------------------------------------------- optimisation
@dataclass(frozen=True)
class OptimizeResult:
    """Outcome of :func:`optimize`: the grid, objective per grid value, the best value and its interval."""

    over: str
    weights: tuple[float, float]
    grid: np.ndarray
    objective: np.ndarray  # (n_grid,) point-estimate objective
    best: float
    best_objective: float
    interval: tuple[float, float] | None  # bootstrap percentile interval of the argmin
    at_edge: bool
    final_losses: dict[str, np.ndarray]  # set -> (n_grid,) final predicted loss
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "over": self.over,
            "weights": list(self.weights),
            "best": self.best,
            "best_objective": self.best_objective,
            "interval": None if self.interval is None else list(self.interval),
            "at_edge": self.at_edge,
            "grid": self.grid.tolist(),
            "objective": self.objective.tolist(),
            "final_losses": {k: v.tolist() for k, v in self.final_losses.items()},
            "warnings": self.warnings,
        }


def _default_grid(over: str, plan: CptPlan, fits: CptFits) -> np.ndarray:
    if over == "replay":
        return np.linspace(0.0, 1.0, 41)
    if over == "loss_potential":
        return np.linspace(0.0, 1.0, 21)
    top = fits.max_lr if fits.max_lr is not None else plan.cpt.peak_lr
    return np.geomspace(top / 16, top, 25)


def _plan_at(plan: CptPlan, over: str, v: float) -> CptPlan:
    if over == "replay":
        return plan.with_replay(v)
    if over == "loss_potential":
        return plan.with_loss_potential(v)
    if over == "peak_lr":
        return plan.with_cpt_peak(v)
    raise InputError(f"--over must be replay, peak_lr or loss_potential, got '{over}'")


def _final_losses(fits: CptFits, plan: CptPlan) -> dict[str, np.ndarray]:
    areas = plan_areas(plan)
    T = areas.step.size - 1
    x = _features(plan, areas, np.array([T]))
    return {name: f.evaluate(x)[:, 0] for name, f in fits.fits.items()}


def optimize(
    fits: CptFits,
    plan: CptPlan,
    over: Literal["replay", "peak_lr", "loss_potential"],
    weights: tuple[float, float],
    *,
    grid: Sequence[float] | np.ndarray | None = None,
    level: float = 0.9,
) -> OptimizeResult:
    """Best value of one schedule-family hyper-parameter for ``weights = (w_pt, w_cpt)``.

    Objective: ``w_pt·L_pt + w_cpt·L_cpt`` at the final CPT step (the signed form of the paper's Eq. 5,
    laws.md §5.7 item 1). ``over``: ``"replay"`` (replay share ``r_pt`` of the CPT mix; needs a replay law),
    ``"peak_lr"`` (CPT schedule rescaled to each peak) or ``"loss_potential"`` (PT annealed to ``lp·peak``).
    The best grid value is reported with the bootstrap percentile interval of the per-resample argmin.
    """
    w_pt, w_cpt = _check_weights(weights)
    if fits.cpt_set is None:
        raise InputError("optimisation needs fits for both the D_pt and the D_cpt set")
    if over == "replay" and not all("replay_ratio" in f.law.inputs for f in fits.fits.values()):
        raise InputError("--over replay needs replay-aware fits (law cpt_replay) for every eval set")
    g = np.asarray(_default_grid(over, plan, fits) if grid is None else grid, dtype=np.float64)
    if g.ndim != 1 or g.size < 2:
        raise InputError("the optimisation grid needs at least two values")
    msgs: list[str] = []
    finals: dict[str, list[np.ndarray]] = {n: [] for n in fits.fits}
    for v in g:
        p = _plan_at(plan, over, float(v))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ExtrapolationWarning)
            _guards(fits, p, plan_areas(p))
        for c in caught:
            m = str(c.message)
            if not any(m[:12] == old[:12] for old in msgs):  # one message per guard kind
                msgs.append(m)
        for n, arr in _final_losses(fits, p).items():
            finals[n].append(arr)
    F = {n: np.stack(v, axis=1) for n, v in finals.items()}  # (S, n_grid)
    obj = w_pt * F[fits.pt_set] + w_cpt * F[fits.cpt_set]
    k = int(np.argmin(obj[0]))
    interval = None
    if obj.shape[0] > 2:
        boots = g[np.argmin(obj[1:], axis=1)]
        q = (1 - level) / 2
        interval = (float(np.quantile(boots, q)), float(np.quantile(boots, 1 - q)))
    for m in msgs:
        warnings.warn(m, ExtrapolationWarning, stacklevel=2)
    return OptimizeResult(
        over=over,
        weights=(w_pt, w_cpt),
        grid=g,
        objective=obj[0],
        best=float(g[k]),
        best_objective=float(obj[0, k]),
        interval=interval,
        at_edge=k in (0, g.size - 1),
        final_losses={n: v[0] for n, v in F.items()},
        warnings=msgs,
    )


def optimum_vs_weight(
    fits: CptFits,
    plan: CptPlan,
    over: Literal["replay", "peak_lr", "loss_potential"],
    w_pt_grid: Sequence[float] | np.ndarray = _W_GRID,
    *,
    grid: Sequence[float] | np.ndarray | None = None,
) -> pd.DataFrame:
    """Best value of ``over`` for each D_pt weight ``w_pt`` (``w_cpt = 1 − w_pt``): columns w_pt, best, lo,
    hi."""
    rows = []
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always", ExtrapolationWarning)
        for w in w_pt_grid:
            r = optimize(fits, plan, over, (float(w), 1.0 - float(w)), grid=grid)
            lo, hi = r.interval if r.interval is not None else (math.nan, math.nan)
            rows.append({"w_pt": float(w), "best": r.best, "lo": lo, "hi": hi, "at_edge": r.at_edge})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- critical point / turning length
def critical_s1_constant(params: Mapping[str, float]) -> float:
    """``S1_pt* = (A/B)^(1/α)``: the critical PT forward area at constant PT and CPT LR (laws.md §5.5).

    Only defined for ``B > 0`` (a forgetting set); raises :class:`InputError` otherwise.
    """
    A, B, alpha = float(params["A"]), float(params["B"]), float(params["alpha"])
    if B <= 0:
        raise InputError(f"no critical point: the shift amplitude B = {B:.4g} is not positive (the set improves)")
    return (A / B) ** (1.0 / alpha)


@dataclass(frozen=True)
class CriticalPoint:
    """PT branch step at which the asymptote of continued CPT equals the starting loss."""

    step: float | None  # PT step (None when there is no crossing in the PT schedule)
    s1_pt: float | None
    reason: str
    branch_steps: np.ndarray  # scanned PT steps
    l_init: np.ndarray  # loss at the branch
    l_asymptote: np.ndarray  # asymptote of continued CPT from that branch


def _composite_eval(
    fits: CptFits, x: Mapping[str, np.ndarray], weights: tuple[float, float] | None, set_name: str | None
) -> np.ndarray:
    if weights is None:
        f = fits.fits[set_name or fits.pt_set]
        return f.evaluate(x, f.param_sets()[:1])[0]
    if fits.cpt_set is None:
        raise InputError("a composite needs fits for both the D_pt and the D_cpt set")
    w_pt, w_cpt = _check_weights(weights)
    a = fits.fits[fits.pt_set]
    b = fits.fits[fits.cpt_set]
    return w_pt * a.evaluate(x, a.param_sets()[:1])[0] + w_cpt * b.evaluate(x, b.param_sets()[:1])[0]


def _asymptote(fits: CptFits, plan: CptPlan, weights: tuple[float, float] | None, set_name: str | None) -> float:
    """``L_∞`` of continued CPT at the CPT schedule's final LR: the A-term vanishes, the shift saturates,
    S2 at its limit."""

    def one(f: LawFit) -> float:
        p = f.params
        areas = plan_areas(plan)
        final = float(areas.lr[-1])
        # S2 limit: momentum still pending decays into the area: S2(∞) = S2(T) + decay·m_T/(1 − decay)
        m_T = (areas.s2[-1] - areas.s2[-2]) if areas.s2.size > 1 else 0.0
        pending = plan.decay * m_T / (1.0 - plan.decay)
        s2_pt, s2_cpt = float(areas.s2_pt[-1]), float(areas.s2_cpt[-1])
        if plan.split == "time":
            s2_cpt += pending
        else:
            s2_cpt += pending  # approximation: pending momentum attributed to CPT (exact when PT momentum ≈ 0)
        if final <= 0:
            raise InputError("the asymptote of continued CPT needs a final CPT LR > 0 (the curve stops at LR 0)")
        n = f.law.name
        B = p.get("B", 0.0)
        if n == "cpt_replay":
            r_cpt = 1.0 - plan.replay_ratio
            xt = torch.as_tensor(np.array([r_cpt]))
            from mixlaw.laws.cpt_replay import replay_factor

            if f.law.options.get("form") == "normalised":
                fac = float(replay_factor(xt, torch.tensor(p["a2"], dtype=torch.float64))[0])
                ann = math.exp(p["a1"] * r_cpt)
            elif f.law.options.get("side") == "pt":
                fac, ann = -math.expm1(-p["a2"] * r_cpt), math.exp(p["a1"] * plan.replay_ratio)
            else:
                fac, ann = math.expm1(p["a2"] * r_cpt), math.exp(p["a1"] * r_cpt)
            return p["L0"] + B * fac - p["C1"] * s2_pt - p["C2"] * ann * s2_cpt
        if n == "cpt_size":
            nn = float(plan.n_params or 0) / 1e6
            return (
                p["L0"]
                + B
                + p["F"] * nn ** (-p["gamma3"])
                - p["C1"] * s2_pt * nn ** p["gamma1"]
                - p["C2"] * s2_cpt * nn ** p["gamma2"]
            )
        if n == "cpt":
            if f.law.options.get("base") == "blackbox":
                return p["L0"] + B - p["C2"] * (s2_cpt + s2_pt)
            return p["L0"] + B - p["C1"] * s2_pt - p["C2"] * s2_cpt
        raise InputError(f"critical point needs a CPT law (cpt, cpt_size, cpt_replay), got '{n}'")

    if weights is None:
        return one(fits.fits[set_name or fits.pt_set])
    w_pt, w_cpt = _check_weights(weights)
    if fits.cpt_set is None:
        raise InputError("a composite needs fits for both the D_pt and the D_cpt set")
    return w_pt * one(fits.fits[fits.pt_set]) + w_cpt * one(fits.fits[fits.cpt_set])


def critical_point(
    fits: CptFits,
    plan: CptPlan,
    *,
    weights: tuple[float, float] | None = None,
    set_name: str | None = None,
    n_scan: int = 200,
) -> CriticalPoint:
    """Critical point over branch steps of the plan's PT schedule (laws.md §5.5).

    For each candidate branch step ``b`` the starting loss ``L_init(b)`` (PT curve at ``b``) is compared
    with the asymptote ``L_∞(b)`` of CPT continued at the CPT schedule's final LR. Branches with ``L_init >
    L_∞`` are pre-critical (CPT eventually brings the loss below its start); the critical point is the
    first crossing. With ``weights`` the composite ``w_pt·L_pt + w_cpt·L_cpt`` is analysed instead of the
    D_pt loss.
    """
    if plan.pt is None:
        raise InputError("the critical point needs a PT schedule (not available in black-box mode)")
    pt_sched: Schedule = plan.pt
    note = ""
    if plan.cpt.lrs()[-1] <= 0:
        plan = replace(plan, cpt=Schedule(kind="constant", peak_lr=plan.cpt.peak_lr, total_steps=plan.cpt.total_steps))
        note = f" (CPT continued at a constant {plan.cpt.peak_lr:g}: the planned schedule ends at LR 0)"
    T = pt_sched.total_steps
    b = np.unique(np.linspace(1, T, n_scan).round().astype(np.int64))
    l_init = np.empty(b.size)
    l_inf = np.empty(b.size)
    for i, bi in enumerate(b):
        p = replace(plan, branch_step=int(bi))
        areas = plan_areas(p)
        x = _features(p, areas, np.array([int(bi)]))
        l_init[i] = _composite_eval(fits, x, weights, set_name)[0]
        l_inf[i] = _asymptote(fits, p, weights, set_name)
    diff = l_init - l_inf  # > 0: pre-critical
    s1_all = plan_areas(replace(plan, branch_step=T)).s1_pt
    if np.all(diff > 0):
        return CriticalPoint(
            None,
            None,
            "every branch step is pre-critical (no crossing within the PT schedule)" + note,
            b,
            l_init,
            l_inf,
        )
    if np.all(diff <= 0):
        return CriticalPoint(
            None,
            None,
            "every branch step is post-critical (the start is already below the asymptote of continued CPT)" + note,
            b,
            l_init,
            l_inf,
        )
    j = (
        int(np.flatnonzero((diff[:-1] > 0) & (diff[1:] <= 0))[0])
        if np.any((diff[:-1] > 0) & (diff[1:] <= 0))
        else int(np.flatnonzero(np.sign(diff[:-1]) != np.sign(diff[1:]))[0])
    )
    lo, hi = int(b[j]), int(b[j + 1])

    # refine on integer steps by bisection
    def d_at(step: int) -> float:
        p = replace(plan, branch_step=step)
        x = _features(p, plan_areas(p), np.array([step]))
        return float(_composite_eval(fits, x, weights, set_name)[0] - _asymptote(fits, p, weights, set_name))

    d_lo = d_at(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        dm = d_at(mid)
        if (dm > 0) == (d_lo > 0):
            lo, d_lo = mid, dm
        else:
            hi = mid
    d_hi = d_at(hi)
    frac = d_lo / (d_lo - d_hi) if d_lo != d_hi else 0.0
    step = lo + frac
    s1 = float(np.interp(step, np.arange(s1_all.size), s1_all))
    return CriticalPoint(step, s1, "ok" + note, b, l_init, l_inf)


@dataclass(frozen=True)
class TurningLength:
    """CPT steps until the curve returns to its start, and the asymptotic class (reported separately)."""

    steps: float  # math.inf when it does not return within the horizon
    reason: str
    peak_step: int
    peak_rise: float
    l_init: float
    asymptote: float | None
    asymptotic_class: str  # "pre-critical" (asymptote below start), "post-critical", or "unknown"
    horizon: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": None if math.isinf(self.steps) else self.steps,
            "infinite": math.isinf(self.steps),
            "reason": self.reason,
            "peak_step": self.peak_step,
            "peak_rise": self.peak_rise,
            "l_init": self.l_init,
            "asymptote": self.asymptote,
            "asymptotic_class": self.asymptotic_class,
            "horizon": self.horizon,
        }


def turning_length(
    fits: CptFits,
    plan: CptPlan,
    *,
    weights: tuple[float, float] | None = None,
    set_name: str | None = None,
    horizon: int | None = None,
) -> TurningLength:
    """Smallest CPT step after the peak at which the D_pt loss (or the composite) is back at its start.

    The CPT schedule is continued at its final LR up to ``horizon`` CPT steps (default: the longer of the
    schedule and 1,000,000 steps when the final LR is > 0; the schedule itself when it ends at LR 0). The
    root is searched on every step. ``inf`` with a reason when the curve does not return within the
    horizon; the asymptotic class compares the asymptote of continued CPT with the start, and is **not**
    inferred from the root search (a post-critical curve can dip below its start transiently, laws.md §5.5).
    """
    final = float(plan.cpt.lrs()[-1])
    if horizon is None:
        horizon = plan.cpt.total_steps if final <= 0 else max(plan.cpt.total_steps, 1_000_000)
    horizon = int(horizon)
    if horizon > plan.cpt.total_steps:
        ext = np.concatenate([plan.cpt.lrs(), np.full(horizon - plan.cpt.total_steps, final)])
        long_plan = replace(plan, cpt=Schedule.from_lr(ext))
    else:
        long_plan = replace(plan, cpt=Schedule.from_lr(plan.cpt.lrs()[:horizon]))
    areas = plan_areas(long_plan)
    T_pt = long_plan.pt_steps
    idx = np.arange(T_pt, T_pt + horizon + 1)
    x = _features(long_plan, areas, idx)
    y = _composite_eval(fits, x, weights, set_name)
    l_init = float(y[0])
    rise = y - l_init
    k_peak = int(np.argmax(rise))
    asym: float | None
    try:
        asym = _asymptote(fits, long_plan, weights, set_name) if final > 0 else None
    except InputError:
        asym = None
    cls = "unknown" if asym is None else ("pre-critical" if asym < l_init else "post-critical")
    if rise[k_peak] <= 0:
        return TurningLength(0.0, "never above its start", 0, 0.0, l_init, asym, cls, horizon)
    after = np.flatnonzero(rise[k_peak:] <= 0)
    if after.size == 0:
        why = (
            f"post-critical: asymptote {asym:.4f} ≥ start {l_init:.4f}"
            if cls == "post-critical"
            else f"does not return within the horizon of {horizon} CPT steps"
        )
        return TurningLength(math.inf, why, k_peak, float(rise[k_peak]), l_init, asym, cls, horizon)
    k = k_peak + int(after[0])  # the first CPT step at or below the start
    return TurningLength(float(k), "ok", k_peak, float(rise[k_peak]), l_init, asym, cls, horizon)


# ---------------------------------------------------------------------- schedule-aware CMR
@dataclass(frozen=True)
class ScheduleCMR:
    """CMR under a CPT schedule: the largest domain share whose predicted general-loss rise at the budget
    is ≤ ε."""

    cmr: float | None
    status: str
    interval: tuple[float, float] | None
    n_boot: int
    n_boot_none: int
    epsilon: float
    budget_steps: int
    schedule: str
    grid: np.ndarray
    rise: np.ndarray  # (n_grid,) predicted general-loss rise at the budget (point estimate)
    constant_lr_cmr: float | None = None
    #: Bootstrap percentile band ``(2, n_grid)`` of ``rise`` (``None`` without bootstrap sets).
    rise_band: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: The same under a constant LR at the schedule's peak (``None`` without ``constant_reference``).
    constant_rise: np.ndarray | None = field(default=None, repr=False, compare=False)
    constant_rise_band: np.ndarray | None = field(default=None, repr=False, compare=False)
    constant_lr_interval: tuple[float, float] | None = None
    constant_lr_n_boot_none: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "cmr": self.cmr,
            "status": self.status,
            "interval": None if self.interval is None else list(self.interval),
            "n_boot": self.n_boot,
            "n_boot_without_cmr": self.n_boot_none,
            "epsilon": self.epsilon,
            "budget_steps": self.budget_steps,
            "schedule": self.schedule,
            "constant_lr_cmr": self.constant_lr_cmr,
            "constant_lr_interval": None if self.constant_lr_interval is None else list(self.constant_lr_interval),
            "constant_lr_n_boot_without_cmr": self.constant_lr_n_boot_none,
        }


def _cmr_from_rise(grid: np.ndarray, rise: np.ndarray, eps: float) -> float | None:
    """Largest domain share on the grid with rise ≤ ε, refined linearly to the crossing."""
    ok = rise <= eps
    if not ok.any():
        return None
    j = int(np.flatnonzero(ok)[-1])
    if j == grid.size - 1:
        return float(grid[-1])
    r0, r1 = rise[j], rise[j + 1]
    frac = (eps - r0) / (r1 - r0) if r1 != r0 else 0.0
    return float(grid[j] + frac * (grid[j + 1] - grid[j]))


def schedule_aware_cmr(
    fit_result: Any,
    schedule: Schedule | str,
    epsilon: float,
    *,
    budget_steps: int | None = None,
    budget_tokens: float | None = None,
    tokens_per_step: float | None = None,
    pt_schedule: Schedule | str | None = None,
    branch_step: int | None = None,
    decay: float = DEFAULT_DECAY,
    warmup: Literal["peak", "logged", "raw"] = "peak",
    split: Literal["time", "origin"] = "time",
    n_params: float | None = None,
    level: float = 0.95,
    n_grid: int = 201,
    constant_reference: bool = True,
) -> ScheduleCMR:
    """Critical mixture ratio under a CPT LR schedule, from a fitted replay law of the **general** (D_pt)
    loss.

    The domain share of the CPT mix is ``r_cpt = 1 − replay_ratio``. For each share on a grid the general-loss
    rise at the budget, ``L_pt(T_budget; r) − L_pt(0)``, is predicted with the law under the given schedule
    (truncated or extended at its final LR to the budget); the CMR is the largest share with rise ≤
    ``epsilon`` (interpolated to the crossing). The interval is the bootstrap percentile interval over the
    fit's bootstrap parameter sets (resamples without a feasible share are counted, not dropped silently).
    With ``constant_reference`` the same computation under a constant LR at the schedule's peak is returned
    beside it (``constant_lr_cmr``, its interval and rise curve), the setting of the CMR paper. ``epsilon``
    may be 0 (no rise at all tolerated; the rise can be negative).
    """
    fit = LawFit.from_any(fit_result)
    if "replay_ratio" not in fit.law.inputs:
        raise InputError(f"schedule-aware CMR needs a replay law (cpt_replay), got '{fit.law.name}'")
    if not epsilon >= 0:
        raise InputError(f"epsilon must be >= 0, got {epsilon}")
    sched = schedule if isinstance(schedule, Schedule) else Schedule.parse(schedule)
    if budget_steps is None:
        if budget_tokens is None or tokens_per_step is None:
            raise InputError("give budget_steps, or budget_tokens with tokens_per_step")
        budget_steps = int(round(budget_tokens / tokens_per_step))
    if budget_steps < 1:
        raise InputError(f"budget must be at least one step, got {budget_steps}")
    pt = (
        None
        if pt_schedule is None
        else (pt_schedule if isinstance(pt_schedule, Schedule) else Schedule.parse(pt_schedule))
    )
    if pt is None and fit.law.options.get("base") != "blackbox" and any(c in fit.law.inputs for c in ("s1_pt",)):
        raise InputError("schedule-aware CMR needs the PT schedule (pt_schedule) for the s1_pt/s2_pt areas")

    def cpt_to_budget(s: Schedule) -> Schedule:
        lr = s.lrs()
        if budget_steps <= lr.size:
            return Schedule.from_lr(lr[:budget_steps])
        return Schedule.from_lr(np.concatenate([lr, np.full(budget_steps - lr.size, lr[-1])]))

    grid = np.linspace(0.0, 1.0, n_grid)

    def rises(s: Schedule) -> np.ndarray:
        plan = CptPlan(
            pt=pt,
            cpt=cpt_to_budget(s),
            branch_step=branch_step,
            decay=decay,
            warmup=warmup,
            split=split,
            n_params=n_params,
        )
        areas = plan_areas(plan)
        t0, t1 = plan.pt_steps, areas.step.size - 1
        out = []
        for r_cpt in grid:
            x = _features(replace(plan, replay_ratio=float(1.0 - r_cpt)), areas, np.array([t0, t1]))
            y = fit.evaluate(x)  # (S, 2)
            out.append(y[:, 1] - y[:, 0])
        return np.stack(out, axis=1)  # (S, n_grid)

    q = (1 - level) / 2

    def summarise(R: np.ndarray) -> tuple[float | None, tuple[float, float] | None, int, np.ndarray | None]:
        cmr = _cmr_from_rise(grid, R[0], epsilon)
        interval, n_none, band = None, 0, None
        if R.shape[0] > 2:
            vals = [_cmr_from_rise(grid, r, epsilon) for r in R[1:]]
            n_none = sum(v is None for v in vals)
            num = np.array([v for v in vals if v is not None])
            if num.size >= 2:
                interval = (float(np.quantile(num, q)), float(np.quantile(num, 1 - q)))
            band = np.quantile(R[1:], [q, 1 - q], axis=0)
        return cmr, interval, n_none, band

    R = rises(sched)
    cmr, interval, n_none, band = summarise(R)
    status = (
        "ok" if cmr is not None else "no feasible share: the general loss rises by more than epsilon at every share"
    )
    if cmr is not None and cmr >= 1.0:
        status = "all shares feasible: CMR = 1 (pure domain data stays within epsilon)"
    const, c_interval, c_none, c_rise, c_band = None, None, 0, None, None
    if constant_reference:
        c = Schedule(kind="constant", peak_lr=sched.peak_lr, total_steps=budget_steps)
        Rc = rises(c)
        const, c_interval, c_none, c_band = summarise(Rc)
        c_rise = Rc[0]
    return ScheduleCMR(
        cmr=cmr,
        status=status,
        interval=interval,
        n_boot=max(R.shape[0] - 1, 0),
        n_boot_none=n_none,
        epsilon=float(epsilon),
        budget_steps=int(budget_steps),
        schedule=sched.spec(),
        grid=grid,
        rise=R[0],
        constant_lr_cmr=const,
        rise_band=band,
        constant_rise=c_rise,
        constant_rise_band=c_band,
        constant_lr_interval=c_interval,
        constant_lr_n_boot_none=c_none,
    )


# ---------------------------------------------------------------------- identifiability
def identifiability(
    fit: Any,
    table: pd.DataFrame,
    *,
    input_map: Mapping[str, str] | None = None,
    cond_limit: float = 1e8,
    share_limit: float = 0.1,
    near_optimal: float = 1.0,
    spread_factor: float = 3.0,
) -> dict[str, Any]:
    """Flag parameter directions the data do not determine (laws.md §5.7 item 5).

    Computes the Jacobian of the (log-)predictions on the table's rows with respect to the internal
    (unconstrained) parameters at the fitted values, scales its columns to unit norm and takes its SVD.
    Directions with singular value below ``s_max/√cond_limit`` are near-null; every parameter carrying more
    than ``share_limit`` of such a direction is flagged. This local test misses distant optima, so with the
    engine's per-start table (``FitResult.starts``) every parameter whose values among the converged starts
    within ``(1 + near_optimal)×`` the best objective span more than ``spread_factor`` (ratio for positive
    parameters) is flagged as multi-modal. With bootstrap parameters, the relative spread (IQR/|median|) per
    parameter is reported too (> 1 is flagged). Returns ``{"flagged": [...], "condition": κ,
    "null_directions": [...], "multimodal": {...}, "spread": {...}, "message": str}``.
    """
    lf = LawFit.from_any(fit)
    law = lf.law
    imap = dict(input_map or {})
    cols = {c: imap.get(c, c) for c in law.inputs}
    missing = [v for v in cols.values() if v not in table.columns]
    if missing:
        raise InputError(f"identifiability needs columns {missing}")
    x = {c: torch.from_numpy(np.array(table[v], dtype=np.float64)) for c, v in cols.items()}
    u0 = torch.as_tensor(law.to_internal(lf.params)).reshape(1, -1)

    def f(u: torch.Tensor) -> torch.Tensor:
        p = law.to_natural(u.reshape(1, -1))
        y = law.log_predict(x, p) if law.fit_space == "log" else law.predict(x, p)
        return y.reshape(-1)

    J = torch.autograd.functional.jacobian(f, u0.reshape(-1)).numpy()  # (n, P)
    norms = np.linalg.norm(J, axis=0)
    flagged: list[str] = [n for n, v in zip(law.param_names, norms, strict=True) if v == 0]
    Js = J / np.where(norms > 0, norms, 1.0)
    _, s, vt = np.linalg.svd(Js, full_matrices=False)
    cond = float(s[0] / s[-1]) if s[-1] > 0 else math.inf
    null_dirs = []
    for i, si in enumerate(s):
        if si == 0 or s[0] / si > math.sqrt(cond_limit):
            comp = vt[i] ** 2
            names = [law.param_names[j] for j in np.argsort(-comp) if comp[j] > share_limit]
            null_dirs.append(names)
            flagged.extend(n for n in names if n not in flagged)
    multimodal: dict[str, float] = {}
    starts = getattr(fit, "starts", None)
    if starts is None and isinstance(fit, Mapping):
        starts = fit.get("starts")
    if starts is None and isinstance(fit, LawFit) and fit.record is not None:
        starts = fit.record.get("starts")
    if starts is not None:
        st = pd.DataFrame(starts)
        if {"objective", "status"} <= set(st.columns) and set(law.param_names) <= set(st.columns):
            ok = st[st["status"] == "converged"]
            if len(ok):
                best = float(ok["objective"].min())
                near = ok[ok["objective"] <= best + max(abs(best), 1e-300) * near_optimal]
                for n in law.param_names:
                    v = near[n].to_numpy(dtype=np.float64)
                    lo, hi = float(np.min(v)), float(np.max(v))
                    pos = law.spec(n).lower >= 0 and lo > 0
                    ratio = hi / lo if pos else (hi - lo) / max(abs(float(lf.params[n])), 1e-12) + 1.0
                    if ratio > spread_factor:
                        multimodal[n] = ratio
                        if n not in flagged:
                            flagged.append(n)
    spread: dict[str, float] = {}
    if lf.bootstrap is not None and lf.bootstrap.shape[0] >= 5:
        for j, n in enumerate(law.param_names):
            b = lf.bootstrap[:, j]
            med = float(np.median(b))
            iqr = float(np.quantile(b, 0.75) - np.quantile(b, 0.25))
            spread[n] = iqr / abs(med) if med != 0 else math.inf
            if spread[n] > 1.0 and n not in flagged:
                flagged.append(n)
    msg = (
        "all parameters identifiable on these data"
        if not flagged
        else f"not identifiable on these data (interpret only jointly): {', '.join(flagged)}"
    )
    return {
        "flagged": flagged,
        "condition": cond,
        "null_directions": null_dirs,
        "multimodal": multimodal,
        "spread": spread,
        "message": msg,
    }
