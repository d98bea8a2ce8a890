"""Learning-rate schedules and the LR areas of the schedule-aware laws (one module for probe training and
laws).

Step convention
---------------
Steps are optimizer updates counted from 1. ``Schedule.lr(s)`` is the LR ``η_s`` applied at update ``s``
(``s = 1..total_steps``); a loss logged "at step s" is measured after ``s`` updates, so its forward area is
``S1(s) = Σ_{i=1..s} η_i``. ``lr(0) = η_0`` is the LR in force before the first update (the warm-up start,
or the peak when there is no warm-up); it is the reference of the first decrement of the annealing area.

Areas (Tissue et al., arXiv:2408.11029; Wang et al., arXiv:2505.07796)
--------------------------------------------------------------------
* forward area ``S1(s) = Σ_{i≤s} η_i`` (LR·steps, raw LR values);
* annealing momentum ``m_i = decay·m_{i−1} + (η_{i−1} − η_i)`` with ``m_0 = 0``; annealing area
  ``S2(s) = Σ_{i≤s} m_i`` (no ``(1 − decay)`` factor: the limit after a long tail is ``(η_0 − η_end)/(1 −
  decay)``, the form whose published C values are ≈ 0.3).

Every area function returns cumulative arrays of length ``T + 1`` indexed by step (index 0 is step 0, area
0), so ``s1[step]`` is the area at a logged step.

Warm-up convention (``warmup=``): ``"peak"`` (Tissue et al.: warm-up steps count at the peak LR in S1 and
add nothing to S2; the default), ``"logged"`` (Luo et al.'s multi-power law, arXiv:2503.12811: S1 sums the
actual warm-up LRs, the annealing sums start at the end of warm-up) or ``"raw"`` (every LR as logged; LR
increases give negative S2). Re-warm-up inside a continual pre-training schedule always uses the actual LRs
(laws.md §5.7 item 2).

PT/CPT split of S2 (``split=``): ``"time"`` (default): ``S2_pt = S2(T_pt)`` frozen, ``S2_cpt = S2(t) −
S2(T_pt)`` on the concatenated schedule; ``"origin"``: momentum of the PT decrements keeps accruing into
``S2_pt`` during CPT and ``S2_cpt`` only holds the momentum of decrements inside CPT. Both sum to the same
total (laws.md §5.7 item 3).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy.signal import lfilter

from mixlaw.errors import InputError

__all__ = [
    "Schedule",
    "Areas",
    "CptAreas",
    "KINDS",
    "DECAY_SHAPES",
    "forward_area",
    "annealing_momentum",
    "annealing_area",
    "areas",
    "cpt_areas",
    "concat_lr",
    "as_schedule",
    "add_schedule_features",
    "features_for_law",
    "needs_schedule_features",
    "SCHEDULE_FEATURES",
]

Kind = Literal["constant", "cosine", "wsd", "linear", "multistep", "rewarmup", "table"]
WarmupConvention = Literal["peak", "logged", "raw"]
Split = Literal["time", "origin"]

KINDS: tuple[str, ...] = ("constant", "cosine", "wsd", "linear", "multistep", "rewarmup", "table")
DECAY_SHAPES: tuple[str, ...] = ("linear", "cosine", "exp", "sqrt")
DEFAULT_DECAY = 0.999

# spec key -> dataclass field
_SPEC_KEYS: dict[str, str] = {
    "peak": "peak_lr",
    "peak_lr": "peak_lr",
    "steps": "total_steps",
    "total_steps": "total_steps",
    "warmup": "warmup_steps",
    "warmup_steps": "warmup_steps",
    "start": "start_lr",
    "start_lr": "start_lr",
    "final": "final_lr",
    "final_lr": "final_lr",
    "decay": "decay_steps",
    "decay_steps": "decay_steps",
    "shape": "decay_shape",
    "decay_shape": "decay_shape",
    "milestones": "milestones",
    "gamma": "gamma",
    "file": "file",
}


@dataclass(frozen=True)
class Schedule:
    """A learning-rate schedule over ``total_steps`` updates (steps counted from 1).

    Parameters
    ----------
    kind
        ``"constant"``: ``η = peak_lr``. ``"cosine"``: cosine from ``peak_lr`` to ``final_lr`` over the
        steps after warm-up. ``"wsd"``: warm-up, stable at ``peak_lr``, then the last ``decay_steps`` steps
        decay to ``final_lr`` with ``decay_shape``. ``"linear"``: linear decay from ``peak_lr`` to
        ``final_lr`` after warm-up. ``"multistep"``: ``η_s = peak_lr·gamma^#{m ∈ milestones: s ≥ m}`` (the
        LR logged at a milestone step is already the new one, as in the MultiPowerLaw logs).
        ``"rewarmup"``: re-warm-up from ``start_lr`` (e.g. the final LR of the parent run) to ``peak_lr``
        over ``warmup_steps``, then ``decay_shape`` decay to ``final_lr`` (the continual pre-training
        schedule). ``"table"``: the per-step LRs in ``lr_table``.
    peak_lr
        Peak LR (raw value, e.g. ``3e-4``).
    total_steps
        Number of updates.
    warmup_steps
        Linear warm-up from ``start_lr`` to ``peak_lr`` over steps ``1..warmup_steps``
        (``η_s = start_lr + (peak_lr − start_lr)·s/warmup_steps``), for every kind but ``"table"``.
    start_lr
        LR at step 0 when there is a warm-up (default 0).
    final_lr
        End LR of ``cosine``, ``wsd``, ``linear``, ``rewarmup``.
    decay_steps
        Length of the WSD decay phase.
    decay_shape
        ``"linear"`` (default), ``"cosine"``, ``"exp"`` (geometric interpolation; needs ``final_lr > 0``) or
        ``"sqrt"`` (``η = peak − (peak − final)·√p``) for ``wsd`` and ``rewarmup``.
    milestones, gamma
        For ``multistep``.
    lr_table
        Per-step LRs ``η_1..η_T`` for ``"table"``; ``lr_table[0]`` also serves as ``η_0``.
    file
        Provenance of a table read from a file (informational).
    lr0
        ``η_0`` of a ``"table"`` schedule when it was logged (step 0 of a dense LR table); default ``lr_table[0]``.
    """

    kind: Kind
    peak_lr: float
    total_steps: int
    warmup_steps: int = 0
    start_lr: float = 0.0
    final_lr: float = 0.0
    decay_steps: int = 0
    decay_shape: str = "linear"
    milestones: tuple[int, ...] = ()
    gamma: float = 0.1
    lr_table: tuple[float, ...] = field(default=(), repr=False)
    file: str | None = None
    lr0: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"unknown schedule kind '{self.kind}'; expected one of {', '.join(KINDS)}")
        for name in ("peak_lr", "start_lr", "final_lr", "gamma"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(float(v)) or float(v) < 0:
                raise InputError(f"schedule {name} must be a finite number >= 0, got {v!r}")
            object.__setattr__(self, name, float(v))
        for name in ("total_steps", "warmup_steps", "decay_steps"):
            v = getattr(self, name)
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InputError(f"schedule {name} must be an integer >= 0, got {v!r}")
            object.__setattr__(self, name, v)
        object.__setattr__(self, "milestones", tuple(int(m) for m in self.milestones))
        object.__setattr__(self, "lr_table", tuple(float(v) for v in self.lr_table))
        if self.lr0 is not None:
            if self.kind != "table":
                raise InputError("lr0 is only used by table schedules")
            if not isinstance(self.lr0, int | float) or not math.isfinite(float(self.lr0)) or self.lr0 < 0:
                raise InputError(f"schedule lr0 must be a finite number >= 0, got {self.lr0!r}")
            object.__setattr__(self, "lr0", float(self.lr0))
        if self.kind == "table":
            if len(self.lr_table) == 0:
                raise InputError("table schedule needs a non-empty lr table")
            arr = np.asarray(self.lr_table)
            if not np.all(np.isfinite(arr)) or np.any(arr < 0):
                bad = int(np.flatnonzero(~np.isfinite(arr) | (arr < 0))[0])
                raise InputError(f"lr table entry {bad + 1} is {arr[bad]!r}; expected a finite LR >= 0")
            object.__setattr__(self, "total_steps", len(self.lr_table))
            if self.warmup_steps > self.total_steps:
                raise InputError(f"warmup_steps {self.warmup_steps} > table length {self.total_steps}")
            return
        if self.total_steps < 1:
            raise InputError(f"schedule total_steps must be >= 1, got {self.total_steps}")
        if self.peak_lr <= 0:
            raise InputError(f"schedule peak_lr must be > 0, got {self.peak_lr}")
        if self.warmup_steps > self.total_steps:
            raise InputError(f"warmup_steps {self.warmup_steps} > total_steps {self.total_steps}")
        if self.decay_shape not in DECAY_SHAPES:
            raise InputError(f"unknown decay shape '{self.decay_shape}'; expected one of {', '.join(DECAY_SHAPES)}")
        if self.kind in ("cosine", "wsd", "linear", "rewarmup") and self.final_lr > self.peak_lr:
            raise InputError(f"final_lr {self.final_lr} > peak_lr {self.peak_lr}")
        if self.kind == "wsd":
            if self.decay_steps < 1:
                raise InputError("wsd schedule needs decay steps >= 1 (e.g. 'wsd:peak=3e-3,steps=4000,decay=800')")
            if self.warmup_steps + self.decay_steps > self.total_steps:
                raise InputError(
                    f"wsd warmup {self.warmup_steps} + decay {self.decay_steps} > total_steps {self.total_steps}"
                )
        if self.kind in ("wsd", "rewarmup") and self.decay_shape == "exp" and self.final_lr <= 0:
            raise InputError("exponential decay needs final_lr > 0")
        if self.kind == "multistep":
            if not self.milestones:
                raise InputError("multistep schedule needs milestones (e.g. 'milestones=8000/16000')")
            if list(self.milestones) != sorted(set(self.milestones)) or self.milestones[0] < 1:
                raise InputError(f"milestones must be increasing positive steps, got {list(self.milestones)}")

    # ------------------------------------------------------------------ construction
    @classmethod
    def parse(cls, spec: str, *, base_dir: str | Path | None = None) -> Schedule:
        """Build a schedule from a one-line spec ``"kind:key=value,..."``.

        Keys: ``peak``, ``steps``, ``warmup``, ``start``, ``final``, ``decay``, ``shape``, ``milestones``
        (``/``-separated, e.g. ``8000/16000``), ``gamma``, ``file`` (``table`` only: a CSV with an ``lr``
        column, one row per step, optional ``step`` column). Examples:
        ``"wsd:peak=3e-3,steps=4000,warmup=100,decay=800"``,
        ``"cosine:peak=3e-4,steps=24000,warmup=2160,final=3e-5"``, ``"constant:peak=3e-3,steps=2000"``,
        ``"table:file=lr.csv"``. Raises :class:`InputError` with a one-line message on a bad spec.
        """
        if not isinstance(spec, str) or not spec.strip():
            raise InputError(f"empty schedule spec {spec!r}; expected e.g. 'cosine:peak=3e-4,steps=24000'")
        text = spec.strip()
        kind, _, rest = text.partition(":")
        kind = kind.strip().lower()
        if kind not in KINDS:
            raise InputError(f"unknown schedule kind '{kind}' in spec '{spec}'; expected one of {', '.join(KINDS)}")
        kw: dict[str, Any] = {}
        for item in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, value = item.partition("=")
            key, value = key.strip().lower(), value.strip()
            if not eq or not value:
                raise InputError(f"bad item '{item}' in schedule spec '{spec}'; expected key=value")
            if key not in _SPEC_KEYS:
                raise InputError(
                    f"unknown key '{key}' in schedule spec '{spec}'; known keys: {', '.join(sorted(set(_SPEC_KEYS)))}"
                )
            name = _SPEC_KEYS[key]
            if name in kw:
                raise InputError(f"key '{key}' given twice in schedule spec '{spec}'")
            try:
                if name in ("total_steps", "warmup_steps", "decay_steps"):
                    f = float(value)
                    if not f.is_integer():
                        raise ValueError
                    kw[name] = int(f)
                elif name == "milestones":
                    kw[name] = tuple(int(float(v)) for v in re.split(r"[/;| ]+", value) if v)
                elif name in ("decay_shape", "file"):
                    kw[name] = value
                else:
                    kw[name] = float(value)
            except ValueError:
                raise InputError(f"bad value '{value}' for '{key}' in schedule spec '{spec}'") from None
        if kind == "table":
            if "file" not in kw:
                raise InputError(f"table schedule spec '{spec}' needs file=LR.csv")
            path = Path(kw["file"])
            if base_dir is not None and not path.is_absolute():
                path = Path(base_dir) / path
            lr = _read_lr_csv(path)
            return cls.from_lr(lr, warmup_steps=int(kw.get("warmup_steps", 0)), file=str(kw["file"]))
        for need, key in (("peak_lr", "peak"), ("total_steps", "steps")):
            if need not in kw:
                raise InputError(f"schedule spec '{spec}' lacks '{key}='")
        return cls(kind=kind, **kw)  # type: ignore[arg-type]

    @classmethod
    def from_lr(
        cls,
        lr: Sequence[float] | np.ndarray,
        *,
        warmup_steps: int = 0,
        file: str | None = None,
        lr0: float | None = None,
    ) -> Schedule:
        """A ``"table"`` schedule from logged per-step LRs ``η_1..η_T`` (one entry per update, in order);
        ``lr0`` is ``η_0`` when logged (default ``η_1``)."""
        arr = np.asarray(lr, dtype=np.float64).ravel()
        if arr.size == 0:
            raise InputError("empty lr table")
        if not np.all(np.isfinite(arr)):
            bad = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise InputError(f"lr table entry {bad + 1} is {arr[bad]!r}; expected a finite LR >= 0")
        return cls(
            kind="table",
            peak_lr=float(arr.max()),
            total_steps=int(arr.size),
            warmup_steps=warmup_steps,
            lr_table=tuple(arr.tolist()),
            file=file,
            lr0=lr0,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict; :meth:`from_dict` inverts it. Tables store their LRs under ``"lr"``."""
        d = asdict(self)
        d["milestones"] = list(self.milestones)
        table = d.pop("lr_table")
        if self.kind == "table":
            d["lr"] = list(table)
        if d.get("lr0") is None:
            d.pop("lr0", None)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schedule:
        """Inverse of :meth:`to_dict`; also accepts ``{"kind": "table", "lr": [...]}``."""
        if not isinstance(d, Mapping) or "kind" not in d:
            raise InputError(f"schedule dict needs a 'kind', got {d!r:.80}")
        d = dict(d)
        if d["kind"] == "table":
            lr = d.pop("lr", d.pop("lr_table", None))
            if lr is None:
                raise InputError("table schedule dict needs 'lr': [per-step LRs]")
            return cls.from_lr(
                lr, warmup_steps=int(d.get("warmup_steps", 0) or 0), file=d.get("file"), lr0=d.get("lr0")
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown schedule field(s) {unknown}")
        if "milestones" in d:
            d["milestones"] = tuple(d["milestones"])
        return cls(**d)

    def replace(self, **changes: Any) -> Schedule:
        """A copy with some fields changed (validated)."""
        d = asdict(self)
        d.update(changes)
        return Schedule(**d)

    def scaled(self, factor: float) -> Schedule:
        """The same shape with every LR multiplied by ``factor``."""
        if self.kind == "table":
            lr0 = None if self.lr0 is None else self.lr0 * factor
            return Schedule.from_lr(np.asarray(self.lr_table) * factor, warmup_steps=self.warmup_steps, lr0=lr0)
        return self.replace(
            peak_lr=self.peak_lr * factor, start_lr=self.start_lr * factor, final_lr=self.final_lr * factor
        )

    # ------------------------------------------------------------------ values
    def lr(self, steps: np.ndarray | Sequence[int] | int) -> np.ndarray:
        """LR applied at each step index (``0 ≤ step ≤ total_steps``; step 0 gives ``η_0``)."""
        s = np.asarray(steps)
        if s.size and (not np.all(np.isfinite(s)) or np.any(s != np.round(s))):
            raise InputError("schedule steps must be integers")
        s = s.astype(np.int64)
        if s.size and (s.min() < 0 or s.max() > self.total_steps):
            raise InputError(
                f"step {int(s.max() if s.max() > self.total_steps else s.min())} outside the schedule "
                f"(0..{self.total_steps})"
            )
        return self._lr(s)

    def lrs(self) -> np.ndarray:
        """``η_1..η_T`` as one array of length ``total_steps``."""
        return self._lr(np.arange(1, self.total_steps + 1))

    @property
    def eta0(self) -> float:
        """``η_0``: the LR in force before the first update."""
        return float(self._lr(np.array([0]))[0])

    def _lr(self, s: np.ndarray) -> np.ndarray:
        sf = s.astype(np.float64)
        peak, final, T, W = self.peak_lr, self.final_lr, self.total_steps, self.warmup_steps
        if self.kind == "table":
            table = np.asarray(self.lr_table)
            out_t = table[np.clip(s - 1, 0, T - 1)]
            if self.lr0 is not None:
                out_t = np.where(s == 0, self.lr0, out_t)
            return out_t
        out = np.full(sf.shape, peak)
        if self.kind == "constant":
            pass
        elif self.kind == "multistep":
            n_drops = np.searchsorted(np.asarray(self.milestones), s, side="right")
            out = peak * self.gamma ** n_drops.astype(np.float64)
        elif self.kind in ("cosine", "linear", "rewarmup"):
            span = max(T - W, 1)
            p = np.clip((sf - W) / span, 0.0, 1.0)
            shape = {"cosine": "cosine", "linear": "linear"}.get(self.kind, self.decay_shape)
            out = _decay(p, peak, final, shape)
        elif self.kind == "wsd":
            start = T - self.decay_steps
            p = np.clip((sf - start) / self.decay_steps, 0.0, 1.0)
            out = _decay(p, peak, final, self.decay_shape)
        if W > 0:
            warm = self.start_lr + (peak - self.start_lr) * sf / W
            out = np.where(s <= W, warm, out)
        return out

    # ------------------------------------------------------------------ text
    def spec(self) -> str:
        """A one-line spec that :meth:`parse` reads back (tables: a summary, not parseable)."""
        if self.kind == "table":
            return f"table:steps={self.total_steps},peak={self.peak_lr:g}" + (f",file={self.file}" if self.file else "")
        items = [f"peak={self.peak_lr:g}", f"steps={self.total_steps}"]
        if self.warmup_steps:
            items.append(f"warmup={self.warmup_steps}")
        if self.start_lr:
            items.append(f"start={self.start_lr:g}")
        if self.kind in ("cosine", "wsd", "linear", "rewarmup") and self.final_lr:
            items.append(f"final={self.final_lr:g}")
        if self.kind == "wsd":
            items.append(f"decay={self.decay_steps}")
        if self.kind in ("wsd", "rewarmup") and self.decay_shape != "linear":
            items.append(f"shape={self.decay_shape}")
        if self.kind == "multistep":
            items.append("milestones=" + "/".join(str(m) for m in self.milestones))
            items.append(f"gamma={self.gamma:g}")
        return f"{self.kind}:" + ",".join(items)

    def __str__(self) -> str:
        return self.spec()


def _decay(p: np.ndarray, peak: float, final: float, shape: str) -> np.ndarray:
    """LR at decay progress ``p ∈ [0, 1]`` (p = 0 → peak, p = 1 → final)."""
    if shape == "linear":
        return peak + (final - peak) * p
    if shape == "cosine":
        return final + (peak - final) * 0.5 * (1.0 + np.cos(np.pi * p))
    if shape == "exp":
        return peak * (final / peak) ** p
    if shape == "sqrt":
        return peak - (peak - final) * np.sqrt(p)
    raise InputError(f"unknown decay shape '{shape}'")


def _read_lr_csv(path: Path) -> np.ndarray:
    if not path.is_file():
        raise InputError(f"lr table file not found: {path}")
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or "lr" not in reader.fieldnames:
            raise InputError("expected a column 'lr'", file=str(path), row=1)
        rows = list(reader)
    lr = np.empty(len(rows))
    steps = []
    for i, row in enumerate(rows, start=2):
        try:
            lr[i - 2] = float(row["lr"])
        except (TypeError, ValueError):
            raise InputError(f"expected a number, got {row['lr']!r}", file=str(path), row=i, column="lr") from None
        if "step" in row and row["step"] not in (None, ""):
            steps.append(row["step"])
    if steps:
        st = np.asarray(steps, dtype=np.float64)
        first = st[0]
        if not np.array_equal(st, np.arange(first, first + len(st))):
            bad = int(np.flatnonzero(st != np.arange(first, first + len(st)))[0])
            raise InputError(
                f"expected consecutive steps (one row per step), got {st[bad]:g}",
                file=str(path),
                row=bad + 2,
                column="step",
            )
    return lr


# ---------------------------------------------------------------------- areas
def _as_lr(
    schedule_or_lr: Schedule | np.ndarray | Sequence[float], allow_empty: bool = False
) -> tuple[np.ndarray, float, int]:
    """``(η_1..η_T, η_0, warmup_steps)``."""
    if isinstance(schedule_or_lr, Schedule):
        s = schedule_or_lr
        return s.lrs(), s.eta0, s.warmup_steps
    arr = np.asarray(schedule_or_lr, dtype=np.float64).ravel()
    if (arr.size == 0 and not allow_empty) or not np.all(np.isfinite(arr)):
        raise InputError("lr array must be non-empty and finite")
    return arr, float(arr[0]) if arr.size else math.nan, 0


def forward_area(lr: np.ndarray | Sequence[float]) -> np.ndarray:
    """Cumulative forward area ``S1[s] = Σ_{i≤s} η_i`` for ``η_1..η_T``; length ``T + 1``, ``S1[0] = 0``."""
    arr = np.asarray(lr, dtype=np.float64).ravel()
    return np.concatenate([[0.0], np.cumsum(arr)])


def annealing_momentum(
    lr: np.ndarray | Sequence[float], decay: float = DEFAULT_DECAY, eta0: float | None = None
) -> np.ndarray:
    """Annealing momentum ``m_i = decay·m_{i−1} + (η_{i−1} − η_i)``, ``m_0 = 0``; length ``T + 1``.

    ``eta0`` is the LR before the first update (default ``η_1``, so no spurious first decrement).
    """
    if not 0.0 <= decay < 1.0:
        raise InputError(f"decay must be in [0, 1), got {decay}")
    arr = np.asarray(lr, dtype=np.float64).ravel()
    prev = np.concatenate([[arr[0] if eta0 is None else eta0], arr[:-1]])
    m = lfilter([1.0], [1.0, -decay], prev - arr)
    return np.concatenate([[0.0], m])


def annealing_area(
    lr: np.ndarray | Sequence[float],
    decay: float = DEFAULT_DECAY,
    eta0: float | None = None,
    lr_weight_exponent: float = 0.0,
) -> np.ndarray:
    """Cumulative annealing area ``S2[s] = Σ_{i≤s} m_i · η_i^ϵ`` (ϵ = ``lr_weight_exponent``, 0 = the plain
    law).

    The ϵ > 0 variant (arXiv:2505.07796 Eq. 9) stops S2 growing once the LR is ≈ 0.
    """
    m = annealing_momentum(lr, decay, eta0)
    if lr_weight_exponent:
        arr = np.asarray(lr, dtype=np.float64).ravel()
        m = m * np.concatenate([[0.0], np.maximum(arr, 0.0) ** lr_weight_exponent])
    return np.cumsum(m)


@dataclass(frozen=True)
class Areas:
    """Cumulative areas of one schedule; every array has length ``T + 1`` and is indexed by step."""

    step: np.ndarray
    lr: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    decay: float
    warmup: str

    def at(self, steps: np.ndarray | Sequence[int]) -> dict[str, np.ndarray]:
        """``{"s1", "s2", "lr"}`` at the given logged steps."""
        idx = _check_steps(steps, len(self.s1) - 1)
        return {"s1": self.s1[idx], "s2": self.s2[idx], "lr": self.lr[idx]}


def _check_steps(steps: np.ndarray | Sequence[int], last: int) -> np.ndarray:
    idx = np.asarray(steps)
    if idx.size and (np.any(idx != np.round(idx)) or idx.min() < 0 or idx.max() > last):
        raise InputError(f"steps must be integers in 0..{last}, got range {idx.min()}..{idx.max()}")
    return idx.astype(np.int64)


def _warmup_views(lr: np.ndarray, eta0: float, warmup_steps: int, warmup: str) -> tuple[np.ndarray, np.ndarray, float]:
    """(LRs for S1, LRs for S2, η_0 for S2) under a warm-up convention; the peak is the LR ending the
    warm-up."""
    if warmup not in ("peak", "logged", "raw"):
        raise InputError(f"warmup convention must be 'peak', 'logged' or 'raw', got '{warmup}'")
    if warmup == "raw" or warmup_steps == 0:
        return lr, lr, eta0
    if warmup_steps > lr.size:
        raise InputError(f"warmup_steps {warmup_steps} > schedule length {lr.size}")
    peak = float(lr[warmup_steps - 1])
    lr_s2 = lr.copy()
    lr_s2[:warmup_steps] = peak
    lr_s1 = lr_s2 if warmup == "peak" else lr
    return lr_s1, lr_s2, peak


def areas(
    schedule_or_lr: Schedule | np.ndarray | Sequence[float],
    decay: float = DEFAULT_DECAY,
    warmup: WarmupConvention = "peak",
    warmup_steps: int | None = None,
    lr_weight_exponent: float = 0.0,
) -> Areas:
    """S1 and S2 of one schedule at every step (arrays of length ``T + 1``).

    Parameters
    ----------
    schedule_or_lr
        A :class:`Schedule` or the per-step LRs ``η_1..η_T``.
    decay
        Annealing-momentum decay λ (0.999 in the papers).
    warmup
        Warm-up convention (module docstring).
    warmup_steps
        Overrides the schedule's warm-up length (needed for logged LR arrays).
    lr_weight_exponent
        ϵ of the LR-weighted annealing area (0 = plain law).
    """
    lr, eta0, w = _as_lr(schedule_or_lr)
    if warmup_steps is not None:
        w = int(warmup_steps)
    lr_s1, lr_s2, eta0_s2 = _warmup_views(lr, eta0, w, warmup)
    return Areas(
        step=np.arange(lr.size + 1),
        lr=np.concatenate([[eta0], lr]),
        s1=forward_area(lr_s1),
        s2=annealing_area(lr_s2, decay, eta0_s2, lr_weight_exponent),
        decay=decay,
        warmup=warmup,
    )


def concat_lr(pt: Schedule | np.ndarray, cpt: Schedule | np.ndarray) -> np.ndarray:
    """``η_1..η_{T_pt+T_cpt}`` of a PT schedule followed by a CPT schedule."""
    a = pt.lrs() if isinstance(pt, Schedule) else np.asarray(pt, dtype=np.float64).ravel()
    b = cpt.lrs() if isinstance(cpt, Schedule) else np.asarray(cpt, dtype=np.float64).ravel()
    return np.concatenate([a, b])


@dataclass(frozen=True)
class CptAreas:
    """PT/CPT areas at every step of a concatenated PT + CPT schedule (arrays of length ``T_pt + T_cpt + 1``).

    ``step`` counts from the start of PT; ``cpt_step = max(step − T_pt, 0)``. On PT steps ``s1_cpt = s2_cpt
    = 0``.
    """

    step: np.ndarray
    cpt_step: np.ndarray
    lr: np.ndarray
    s1_pt: np.ndarray
    s1_cpt: np.ndarray
    s2_pt: np.ndarray
    s2_cpt: np.ndarray
    pt_steps: int
    decay: float
    warmup: str
    split: str

    @property
    def s1(self) -> np.ndarray:
        return self.s1_pt + self.s1_cpt

    @property
    def s2(self) -> np.ndarray:
        return self.s2_pt + self.s2_cpt

    def columns(self, idx: np.ndarray | slice | None = None) -> dict[str, np.ndarray]:
        """Canonical feature columns (``s1_pt, s1_cpt, s2_pt, s2_cpt, s1, s2, lr, step, cpt_step``)."""
        sl = slice(None) if idx is None else idx
        return {
            "step": self.step[sl],
            "cpt_step": self.cpt_step[sl],
            "lr": self.lr[sl],
            "s1_pt": self.s1_pt[sl],
            "s1_cpt": self.s1_cpt[sl],
            "s2_pt": self.s2_pt[sl],
            "s2_cpt": self.s2_cpt[sl],
            "s1": self.s1[sl],
            "s2": self.s2[sl],
        }


def cpt_areas(
    pt: Schedule | np.ndarray,
    cpt: Schedule | np.ndarray | None,
    decay: float = DEFAULT_DECAY,
    warmup: WarmupConvention = "peak",
    split: Split = "time",
    pt_warmup_steps: int | None = None,
    pt_eta0: float | None = None,
    lr_weight_exponent: float = 0.0,
) -> CptAreas:
    """S1/S2 of a PT schedule followed by a CPT schedule, split into PT and CPT parts.

    The warm-up convention applies to the PT warm-up only; a CPT re-warm-up always uses the actual LRs, so
    an LR increase gives a negative ``s2_cpt`` (the modelled re-warm-up bump). The first CPT decrement is
    taken from the PT final LR. ``split`` is ``"time"`` (default) or ``"origin"`` (module docstring).
    """
    if split not in ("time", "origin"):
        raise InputError(f"S2 split must be 'time' or 'origin', got '{split}'")
    lr_pt, eta0, w = _as_lr(pt, allow_empty=True)
    if pt_warmup_steps is not None:
        w = int(pt_warmup_steps)
    if pt_eta0 is not None:
        eta0 = float(pt_eta0)
    lr_cpt = np.zeros(0) if cpt is None else concat_lr(np.zeros(0), cpt)
    T_pt, T = lr_pt.size, lr_pt.size + lr_cpt.size
    if T == 0:
        raise InputError("empty PT and CPT schedules")
    if math.isnan(eta0):  # no PT (black-box base model): η_0 of the CPT schedule
        eta0 = float(cpt.eta0) if isinstance(cpt, Schedule) else float(lr_cpt[0])
    pt_s1, pt_s2, eta0_s2 = _warmup_views(lr_pt, eta0, w, warmup)
    lr_s1 = np.concatenate([pt_s1, lr_cpt])
    lr_s2 = np.concatenate([pt_s2, lr_cpt])
    s1 = forward_area(lr_s1)
    prev = np.concatenate([[eta0_s2], lr_s2[:-1]])
    d_eta = prev - lr_s2
    weight = np.maximum(lr_s2, 0.0) ** lr_weight_exponent if lr_weight_exponent else np.ones(T)
    step = np.arange(T + 1)
    in_pt = step <= T_pt
    s1_pt = np.where(in_pt, s1, s1[T_pt])
    s1_cpt = s1 - s1_pt
    if not 0.0 <= decay < 1.0:
        raise InputError(f"decay must be in [0, 1), got {decay}")
    if split == "time":
        s2 = np.concatenate([[0.0], np.cumsum(lfilter([1.0], [1.0, -decay], d_eta) * weight)])
        s2_pt = np.where(in_pt, s2, s2[T_pt])
        s2_cpt = s2 - s2_pt
    else:
        mask = np.arange(1, T + 1) <= T_pt
        m_pt = lfilter([1.0], [1.0, -decay], np.where(mask, d_eta, 0.0)) * weight
        m_cpt = lfilter([1.0], [1.0, -decay], np.where(mask, 0.0, d_eta)) * weight
        s2_pt = np.concatenate([[0.0], np.cumsum(m_pt)])
        s2_cpt = np.concatenate([[0.0], np.cumsum(m_cpt)])
    return CptAreas(
        step=step,
        cpt_step=np.maximum(step - T_pt, 0),
        lr=np.concatenate([[eta0], lr_pt, lr_cpt]),
        s1_pt=s1_pt,
        s1_cpt=s1_cpt,
        s2_pt=s2_pt,
        s2_cpt=s2_cpt,
        pt_steps=T_pt,
        decay=decay,
        warmup=warmup,
        split=split,
    )


# ---------------------------------------------------------------------- RunTable features
def as_schedule(obj: Schedule | Mapping[str, Any] | str | Sequence[float] | np.ndarray) -> Schedule:
    """A :class:`Schedule` from a schedule, a dict (:meth:`Schedule.to_dict` or ``{"kind": "table", "lr":
    …}``), a JSON string of such a dict, a one-line spec, or a per-step LR array."""
    if isinstance(obj, Schedule):
        return obj
    if isinstance(obj, Mapping):
        return Schedule.from_dict(obj)
    if isinstance(obj, str):
        text = obj.strip()
        if text.startswith("{"):
            import json

            try:
                return Schedule.from_dict(json.loads(text))
            except json.JSONDecodeError as exc:
                raise InputError(f"schedule is not valid JSON: {exc.msg}") from None
        return Schedule.parse(text)
    return Schedule.from_lr(np.asarray(obj, dtype=np.float64))


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
        raise InputError(f"no schedule for run '{run_id}'", column="schedule")
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
) -> Any:
    """Add the canonical LR-area columns to a RunTable, from each run's schedule.

    Columns added: ``s1, s2`` (total areas), ``s1_pt, s1_cpt, s2_pt, s2_cpt`` (PT/CPT split), ``cpt_step``,
    and with ``replay_column`` the ``replay_ratio`` (= that column, e.g. ``w_general``: the replay share of
    D_pt data in the CPT mix); with ``multi_power_bins=K`` also the multi-power history columns (``mpl_s1``
    and :func:`mixlaw.laws.multi_power.mpl_columns`). A run without ``parent_run`` is a PT run (CPT areas
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
    if "parent_run" in table.columns:
        for rid, val in table.groupby(table["run_id"].astype(str))["parent_run"].first().items():
            ok = isinstance(val, str) and val != ""
            parents[str(rid)] = val if ok else None
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
        from mixlaw.laws.multi_power import mpl_columns, multi_power_features

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
        for c in ("s1", "s2", "s1_pt", "s1_cpt", "s2_pt", "s2_cpt", "cpt_step"):
            new[c][pos] = cols[c]
        if multi_power_bins is not None:
            if hist_step.min() < 1:
                raise InputError(f"run '{rid}': multi-power features need steps >= 1", column="step")
            f = multi_power_features(lr, hist_step, eta0=eta0, n_bins=multi_power_bins, longest=longest)
            for c, v in f.items():
                mpl[c][pos] = v
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

    For the CLI's ``mixlaw fit TABLE --law lr_annealing|multi_power|cpt|…``: schedules come from ``schedules`` or
    the table's ``schedule`` column; ``kwargs`` go to :func:`add_schedule_features` (the multi-power bin count is
    taken from the law's ``n_bins`` option).
    """
    inputs = tuple(getattr(law, "inputs", ()))
    wanted = [c for c in inputs if c in SCHEDULE_FEATURES or c.startswith("mpl_")]
    if all(c in table.columns for c in wanted):
        return table
    if any(c.startswith("mpl_") for c in inputs):
        kwargs.setdefault("multi_power_bins", int(getattr(law, "options", {}).get("n_bins", 48)))
    return add_schedule_features(table, schedules, **kwargs)
