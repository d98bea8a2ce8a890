"""Nested size cuts of a mixture law: refit on the smaller (larger) sizes, predict the larger (smaller) ones.

The evidence behind :func:`mixlaw.decide.mixture.intervals.size_widening`. For the fitted sizes
:math:`s_1 < \\dots < s_K` (``K >= 3``) every cut :math:`c \\in \\{s_2, \\dots, s_{K-1}\\}` gives two nested fits:
*upward* (fit the runs at sizes :math:`\\le c`, predict every run above) and *downward* (fit :math:`\\ge c`, predict
below). Each refit is warm-started at the full fit and all of them run in one batched solve
(:func:`mixlaw.fit.solver.refits.refit`). A held-out row's distance is its e-folds beyond the fold's fitted range,
the largest over the law's non-mixture inputs (size, and tokens where the law reads them), so that a fold and a
query are measured alike when tokens grow with size.

A cut keeps two fitted sizes: the engine's size calibration
(:func:`mixlaw.fit.evaluate.calibrate.fold_errors`) keeps at least three, which leaves no nested fit at all when a
mixture table has three sizes (the shipped probes; SlimPajama cut at 680M). A cut is left out, with its reason,
where one of the law's non-mixture inputs that varies over the full fit's rows takes a single value over the cut's
fitted rows (``mixture_additive`` fitted on SlimPajama's 122M and 310M runs, both trained on 20B tokens): its term in
that input is then not determined at all, and the cut's error measures that, not the full fit's extrapolation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SizeFolds", "size_folds"]


@dataclass(frozen=True)
class SizeFolds:
    """Held-out errors of the nested size cuts (one entry per held-out row per cut)."""

    e: np.ndarray
    """Prediction minus observation, fit space (log units for the log-space laws)."""
    d: np.ndarray
    """E-folds beyond the cut's fitted range (the largest over the law's non-mixture inputs)."""
    fold: np.ndarray
    """Index of the cut (into :attr:`cuts`)."""
    up: np.ndarray
    """Whether the row lies above the cut's fitted sizes (an upward cut)."""
    s2: np.ndarray
    """The cut's residual variance over its fitted rows, ``Σ r² / (n − p)`` (fit space; NaN without dof)."""
    cuts: tuple[str, ...]
    """What each cut fitted and predicted, e.g. ``fit 1.22e+08-6.8e+08 -> 9.37e+08``."""
    n_sizes: tuple[int, ...]
    """Sizes each cut fitted (the full fit's count less those it predicts)."""
    dropped: tuple[str, ...]
    """Cuts left out, each with its reason."""


def _label(fit: np.ndarray, held: np.ndarray) -> str:
    return f"fit {fit.min():.3g}-{fit.max():.3g} -> {','.join(f'{v:.3g}' for v in np.unique(held))}"


def size_folds(
    law: Any, data: Any, params: Any, size_column: str, *, loss: Any, delta: float | None, max_iter: int | None
) -> SizeFolds | None:
    """The nested size cuts of the fit ``params`` of ``law`` on ``data`` (:class:`~mixlaw.fit.problem.data.FitData`;
    module docstring); ``None`` with fewer than three fitted sizes or no usable cut."""
    import torch

    from mixlaw.fit.solver.refits import refit, rescue
    from mixlaw.fit.uncertainty.fitted import draw_predictions

    if size_column not in data.x_np:
        return None
    v = np.asarray(data.x_np[size_column], dtype=np.float64)
    sizes = np.unique(v)
    if sizes.size < 3:
        return None
    scale = [str(c) for c in law.inputs if not str(c).startswith("w_") and c in data.x_np]
    xs = {c: np.asarray(data.x_np[c], dtype=np.float64) for c in scale}
    varies = [c for c in scale if np.unique(xs[c]).size > 1]
    masks: list[np.ndarray] = []
    labels: list[str] = []
    counts: list[int] = []
    dropped: list[str] = []
    for c in sizes[1:-1]:
        for fit in (v <= c, v >= c):
            label = _label(v[fit], v[~fit])
            flat = [name for name in varies if np.unique(xs[name][fit]).size < 2]
            if flat:
                dropped.append(f"{label}: {flat[0]} takes one value over its fitted runs")
            elif fit.sum() <= law.n_internal:
                dropped.append(f"{label}: {int(fit.sum())} rows for {law.n_internal} parameters")
            else:
                masks.append(fit)
                labels.append(label)
                counts.append(int(np.unique(v[fit]).size))
    if not masks:
        return None
    W = np.stack(masks).astype(np.float64)
    S = np.asarray(law.to_internal(params), dtype=np.float64)[None, :]
    kw: dict[str, Any] = {"loss": loss, "delta": delta, "max_iter": max_iter}
    state = refit(law, data.x, data.y, W, S, **kw)
    fold_params, ok = state[0], state[1]
    if not ok.all():
        centres = np.broadcast_to(S[0], (len(W), S.shape[-1]))
        rescue(law, data.x, data.y, W, centres, centres, state, **kw)
    if not ok.any():
        return None
    with torch.no_grad():
        pred = draw_predictions(law, fold_params[ok], data.x_np)
    y = np.log(data.y) if law.fit_space == "log" else np.asarray(data.y, dtype=np.float64)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("e", "d", "fold", "up", "s2")}
    for j, (i, p) in enumerate(zip(np.flatnonzero(ok), pred, strict=True)):
        m = W[i].astype(bool)
        held = np.flatnonzero(~m)
        e = p[held] - y[held]
        with np.errstate(all="ignore"):
            dist = np.zeros(held.size)
            for name in scale:
                w = xs[name]
                lo, hi = float(w[m].min()), float(w[m].max())
                dist = np.maximum(dist, np.maximum(np.log(w[held] / hi), np.log(lo / w[held])))
        good = np.isfinite(e)
        dof = int(m.sum()) - law.n_internal
        s2 = float(np.sum((p[m] - y[m]) ** 2) / dof) if dof > 0 else float("nan")
        parts["e"].append(e[good])
        parts["d"].append(np.maximum(np.nan_to_num(dist[good]), 0.0))
        parts["fold"].append(np.full(int(good.sum()), j))
        parts["up"].append(v[held][good] > v[m].max())
        parts["s2"].append(np.full(int(good.sum()), s2))
    kept = tuple(labels[i] for i in np.flatnonzero(ok))
    n_kept = tuple(counts[i] for i in np.flatnonzero(ok))
    failed = tuple(f"{labels[i]}: the refit has no estimate" for i in np.flatnonzero(~ok))
    out = {k: np.concatenate(vs) for k, vs in parts.items()}
    return SizeFolds(e=out["e"], d=out["d"], fold=out["fold"].astype(np.int64), up=out["up"].astype(bool),
                     s2=out["s2"], cuts=kept, n_sizes=n_kept, dropped=tuple(dropped) + failed)  # fmt: skip
