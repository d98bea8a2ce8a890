"""LR areas of the schedule-aware laws: forward area S1, annealing area S2 and their PT/CPT split (conventions in
:mod:`mixlaw.schedules`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mixlaw.errors import InputError
from mixlaw.schedules.schedule import DEFAULT_DECAY, Schedule, Split, WarmupConvention

__all__ = [
    "forward_area",
    "annealing_momentum",
    "annealing_area",
    "areas",
    "concat_lr",
    "cpt_areas",
    "Areas",
    "CptAreas",
]


def _recur(decay: float, x: np.ndarray) -> np.ndarray:
    """``m_i = decay * m_{i-1} + x_i`` with ``m_0 = 0`` (scipy's IIR filter, imported on first use)."""
    from scipy.signal import lfilter

    return np.asarray(lfilter([1.0], [1.0, -decay], x), dtype=np.float64)


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
    m = _recur(decay, prev - arr)
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
        s2 = np.concatenate([[0.0], np.cumsum(_recur(decay, d_eta) * weight)])
        s2_pt = np.where(in_pt, s2, s2[T_pt])
        s2_cpt = s2 - s2_pt
    else:
        mask = np.arange(1, T + 1) <= T_pt
        m_pt = _recur(decay, np.where(mask, d_eta, 0.0)) * weight
        m_cpt = _recur(decay, np.where(mask, 0.0, d_eta)) * weight
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
