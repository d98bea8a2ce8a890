"""The :class:`Schedule` value: parse, build and evaluate a learning-rate schedule (step convention in
:mod:`mixlaw.schedules`)."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mixlaw.errors import InputError

__all__ = ["Schedule", "as_schedule", "KINDS", "DECAY_SHAPES", "DEFAULT_DECAY"]

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
