"""Pure plot functions for the critical-mixture-ratio decision (``ax=None`` in, ``Axes`` out).

Every function draws on the given Axes (or a new figure) and returns it; none calls ``matplotlib.use`` or changes
global state. Token axes carry k/M/B tick labels as the data need (:func:`token_axis`); every title names the model
size(s).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mixlaw.laws import get_law

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from mixlaw.decide.cmr import CMRDecision, SizeCMR
    from mixlaw.decide.cpt import ScheduleCMR
    from mixlaw.schedules import Schedule

__all__ = [
    "plot_tradeoff_3d",
    "plot_general_increments",
    "plot_fit_residuals",
    "plot_ratio_law",
    "plot_cmr_vs_budget",
    "plot_cmr_vs_size",
    "plot_schedule_cmr",
    "plot_cpt_lr",
]

_B = 1.0  # token axes are drawn in tokens, labelled k/M/B by token_axis


def token_axis(ax: Axes, which: str = "x") -> None:
    """k/M/B tick labels on a token axis (linear or log)."""
    from matplotlib.ticker import FuncFormatter

    from mixlaw.fmt import fmt_tokens

    fmt = FuncFormatter(lambda v, _pos: fmt_tokens(v) if v > 0 else ("0" if v == 0 else fmt_tokens(v)))
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_formatter(fmt)
    if (ax.get_xscale() if which == "x" else ax.get_yscale()) == "log":
        from matplotlib.ticker import LogLocator

        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # a labelled tick every 1-2-5
        axis.set_major_formatter(fmt)
        axis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))


def _axes(ax: Axes | None, projection: str | None = None, figsize: tuple[float, float] = (6.0, 4.2)) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=figsize)
    return fig.add_subplot(1, 1, 1, projection=projection)


def _colors(n: int) -> list[Any]:
    import matplotlib as mpl

    cmap = mpl.colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.05, 0.9, max(n, 1))]


def _size_rows(increments: pd.DataFrame, size: Any) -> pd.DataFrame:
    if size is None:
        sizes = increments["size"].unique()
        size = sizes[0]
    return increments[increments["size"] == size]


def plot_tradeoff_3d(increments: pd.DataFrame, *, size: Any = None, ax: Axes | None = None) -> Axes:
    """3-D trade-off trajectories (ΔL_dom, tokens, ΔL_gen), one line per ratio (CMR paper, Fig. 1).

    ``increments`` is :attr:`CMRDecision.increments`; ``size`` selects one model size (default the first).
    ``ax`` must be a 3-D Axes when given.
    """
    ax = _axes(ax, projection="3d", figsize=(6.5, 5.0))
    d = _size_rows(increments, size)
    ratios = sorted(d["ratio"].unique())
    for color, r in zip(_colors(len(ratios)), ratios, strict=True):
        g = d[d["ratio"] == r].sort_values("tokens")
        ax.plot(g["dloss_domain"], g["tokens"] / _B, g["dloss_general"], color=color, marker="o", ms=2.5,
                label=f"R = {r:.3g}")  # fmt: skip
    ax.set_xlabel("ΔL domain")
    ax.set_ylabel("CPT tokens")
    token_axis(ax, "y")
    ax.set_zlabel("ΔL general")  # type: ignore[attr-defined]
    ax.set_title(f"Trade-off trajectories, size {_size_label(d['size'].iloc[0])}")
    ax.legend(fontsize=7, loc="upper left")
    return ax


def _curve(size_cmr: SizeCMR, ratio: float, which: str) -> tuple[Any, dict[str, float] | None]:
    entry = size_cmr.curves[ratio]
    name = "dloss_general" if which == "general" else "dloss_domain"
    law = get_law(name, token_unit=size_cmr.token_unit, pin_zero=bool(entry.get("pin_zero", False)))
    return law, entry[which]


def plot_general_increments(
    size_cmr: SizeCMR, increments: pd.DataFrame, *, epsilon: float | None = None, ax: Axes | None = None
) -> Axes:
    """ΔL_gen(T) per ratio: observed points, fitted Eq. 6 curves, ``T0`` marked, budget and ε lines."""
    ax = _axes(ax)
    d = increments[increments["size"] == size_cmr.n_params]
    ratios = sorted(size_cmr.curves)
    budget = size_cmr.budget_tokens
    t_hi = max(budget, float(d["tokens"].max()))
    rows = {r["ratio"]: r for r in size_cmr.ratios}
    dotted = False
    for color, r in zip(_colors(len(ratios)), ratios, strict=True):
        g = d[(d["ratio"] == r) & (d["tokens"] > 0)]
        ax.plot(g["tokens"] / _B, g["dloss_general"], "o", color=color, ms=3)
        law, params = _curve(size_cmr, r, "general")
        if params is None:
            continue
        t = np.linspace(float(g["tokens"].min()), t_hi, 200)
        y = np.asarray(law.evaluate({"tokens": t}, params), dtype=np.float64)
        off = early_opposite_sign(t, y, g["tokens"].to_numpy(dtype=np.float64), g["dloss_general"].to_numpy(np.float64))
        k = int(off.sum())  # the leading stretch drawn dotted, the rest solid (they share the boundary point)
        if k:
            ax.plot(t[: k + 1] / _B, y[: k + 1], ":", color=color, lw=1.0)
            dotted = True
        ax.plot(t[k:] / _B, y[k:], "-", color=color, lw=1.2, label=f"R = {r:.3g}")
        t0 = rows[r]["t0_tokens"]
        if t0 is not None and t0 <= t_hi:
            y0 = float(law.evaluate({"tokens": np.array([t0])}, params)[0])
            ax.plot([t0 / _B], [y0], marker="*", color=color, ms=11, mec="black", mew=0.5)
    ax.axvline(budget / _B, color="grey", ls="--", lw=1)
    ax.text(budget / _B, ax.get_ylim()[1], " budget", va="top", fontsize=7, color="grey")
    if epsilon is not None:
        ax.axhline(epsilon, color="firebrick", ls=":", lw=1)
        ax.text(ax.get_xlim()[0], epsilon, f" ε = {epsilon:g}", va="bottom", fontsize=7, color="firebrick")
    ax.axhline(0.0, color="black", lw=0.5)
    ax.set_xlabel("CPT tokens")
    token_axis(ax)
    ax.set_ylabel("ΔL general (nats/token)")
    ax.set_title(f"General-loss increment, size {_size_label(size_cmr.n_params)} (★ = T0)")
    if dotted:
        ax.plot([], [], ":", color="grey", label="dotted: fit on the wrong side of 0\n(early evaluations)")
    ax.legend(fontsize=7)
    return ax


def early_opposite_sign(t: np.ndarray, y: np.ndarray, t_obs: np.ndarray, y_obs: np.ndarray) -> np.ndarray:
    """Where a fitted increment curve is not a reading of the data: the leading stretch of ``t`` on which the curve
    ``y`` lies on the other side of zero from the observations (their mean per token count, interpolated linearly).

    Eq. 6's two power terms can cancel near the first evaluations and dip below zero where every observed increment
    is positive (a general loss that would *fall* early under pure domain data); the decision never reads the curve
    there (``T0`` is a peak after a rise, the verdicts read the budget), so the report draws that stretch dotted."""
    o = pd.DataFrame({"t": t_obs, "y": y_obs}).groupby("t")["y"].mean()
    if o.empty:
        return np.zeros(t.shape, dtype=bool)
    ref = np.interp(t, o.index.to_numpy(dtype=np.float64), o.to_numpy(dtype=np.float64))
    wrong = (np.sign(y) * np.sign(ref)) < 0
    first_right = int(np.argmin(wrong)) if not wrong.all() else t.size
    out = np.zeros(t.shape, dtype=bool)
    out[:first_right] = True
    return out


def plot_fit_residuals(size_cmr: SizeCMR, increments: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Residuals (observed − fitted) of the per-ratio ΔL_gen (●) and ΔL_dom (×) fits against tokens."""
    ax = _axes(ax)
    d = increments[(increments["size"] == size_cmr.n_params) & (increments["tokens"] > 0)]
    ratios = sorted(size_cmr.curves)
    for color, r in zip(_colors(len(ratios)), ratios, strict=True):
        g = d[d["ratio"] == r]
        t = g["tokens"].to_numpy(dtype=np.float64, copy=True)
        for which, marker in (("general", "o"), ("domain", "x")):
            law, params = _curve(size_cmr, r, which)
            if params is None:
                continue
            res = g[f"dloss_{which}"].to_numpy() - law.evaluate({"tokens": t}, params)
            ax.plot(t / _B, res, marker, color=color, ms=3.5, label=f"R = {r:.3g}" if which == "general" else None)
    ax.axhline(0.0, color="black", lw=0.5)
    ax.set_xlabel("CPT tokens")
    token_axis(ax)
    ax.set_ylabel("residual (nats/token)")
    ax.set_title(f"Increment-fit residuals, size {_size_label(size_cmr.n_params)} (● general, × domain)")
    ax.legend(fontsize=7)
    return ax


def plot_ratio_law(size_cmr: SizeCMR, *, epsilon: float | None = None, ax: Axes | None = None) -> Axes:
    """General loss at the budget vs domain share: values per ratio, the ratio law, tolerance and boundary."""
    ax = _axes(ax)
    fit = size_cmr.ratio_law_general
    pts = [(r["ratio"], r["observed_dloss_general_at_budget"] if r["observed_dloss_general_at_budget"] is not None
            else r["dloss_general_at_budget"]) for r in size_cmr.ratios]  # fmt: skip
    pts = [(a, b) for a, b in pts if b is not None]
    if pts:
        ax.plot([p[0] for p in pts], [size_cmr.reference_general + p[1] for p in pts], "o", color="black",
                label="at the budget")  # fmt: skip
    if fit is not None:
        lo = min(p[0] for p in pts) if pts else 0.01
        r = np.linspace(max(lo * 0.5, 1e-3), 1.0, 200)
        ax.plot(r, fit.predict(r), "-", color="tab:blue", label=f"{fit.law} ({fit.method})")
    ax.axhline(size_cmr.reference_general, color="grey", lw=0.8, label="before CPT")
    if epsilon is not None:
        ax.axhline(size_cmr.reference_general + epsilon, color="firebrick", ls=":", lw=1, label="+ ε")
    if size_cmr.tolerance_boundary is not None:
        ax.axvline(size_cmr.tolerance_boundary, color="firebrick", ls="--", lw=1, label="tolerance boundary")
    if size_cmr.model_free_crossing is not None and size_cmr.model_free_status == "ok":
        ax.axvline(size_cmr.model_free_crossing, color="grey", ls=":", lw=1, label="model-free crossing")
    ax.set_xlabel("domain share R")
    ax.set_ylabel("general loss at the budget")
    ax.set_title(f"Ratio law at the budget, size {_size_label(size_cmr.n_params)}")
    ax.legend(fontsize=7)
    return ax


def plot_cmr_vs_budget(sizes: Sequence[SizeCMR], *, tokens: np.ndarray | None = None, ax: Axes | None = None) -> Axes:
    """CMR law ``R_CMR(T)`` per size (clipped to [0, 1]) with its bootstrap band, the points ``(T0(R_j), R_j)``,
    the tolerance boundary at the budget (▬) and the reported CMR (◆)."""
    ax = _axes(ax)
    fitted = [s for s in sizes if s.cmr_law is not None]
    if tokens is None:
        hi = max((s.budget_tokens for s in sizes), default=1.0) * 2.5
        tokens = np.geomspace(hi / 25, hi, 200)
    for color, s in zip(_colors(len(sizes)), sizes, strict=True):
        pts = [(r["t0_tokens"], r["ratio"]) for r in s.ratios if r["t0_status"] in ("root", "observed peak")]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", color=color, ms=4)
        if s in fitted:
            ax.plot(tokens, s.cmr_at(tokens), "-", color=color, label=f"{_size_label(s.n_params)}")
            band = s.cmr_at_band(tokens)
            if band is not None:
                ax.fill_between(tokens, band[0], band[1], color=color, alpha=0.2, lw=0)
        if s.tolerance_boundary is not None:
            ax.plot([s.budget_tokens], [s.tolerance_boundary], marker="_", color=color, ms=16, mew=2.5)
        if s.cmr is not None:
            ax.plot([s.budget_tokens], [s.cmr], marker="D", color=color, mec="black", ms=6)
    ax.set_xscale("log")
    ax.set_ylim(-0.03, 1.03)  # shares are shares: the law is drawn clipped to [0, 1]
    ax.set_xlabel("CPT token budget")
    token_axis(ax)
    ax.set_ylabel("critical mixture ratio")
    names = ", ".join(_size_label(s.n_params) for s in sizes)
    ax.set_title(f"CMR vs token budget, sizes {names}\n(◆ CMR at the budget, ▬ tolerance boundary)", fontsize=9)
    if fitted:
        ax.legend(fontsize=7)
    return ax


def plot_cmr_vs_size(decisions: CMRDecision | Mapping[str, CMRDecision], *, ax: Axes | None = None) -> Axes:
    """CMR vs model size with intervals and the fitted ``a + b·log10 N`` trend; several domains side by side.

    Pass one :class:`CMRDecision` or a mapping ``{domain label: CMRDecision}``.
    """
    ax = _axes(ax)
    items = decisions.items() if isinstance(decisions, Mapping) else [("CMR", decisions)]
    items = list(items)
    for color, (label, dec) in zip(_colors(len(items)) if len(items) > 1 else ["tab:blue"], items, strict=True):
        pts = [s for s in dec.sizes if s.cmr is not None and _numeric(s.n_params)]
        if not pts:
            continue
        n = np.array([float(s.n_params) for s in pts])
        y = np.array([s.cmr for s in pts])
        lo = np.array([s.ci[0] if s.ci else c for s, c in zip(pts, y, strict=True)])
        hi = np.array([s.ci[1] if s.ci else c for s, c in zip(pts, y, strict=True)])
        # a percentile interval need not contain the point estimate (few resamples): clip the bar lengths
        yerr = [np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)]
        ax.errorbar(n, y, yerr=yerr, fmt="o", color=color, capsize=3, label=label)
        from mixlaw.decide.cmr.pipeline import trend_exclusion

        out_tr = np.array([trend_exclusion(s) is not None for s in pts])
        if dec.trend is not None and out_tr.any():  # hollow: shown, but not part of the trend line
            ax.plot(n[out_tr], y[out_tr], "o", color="white", ms=5, label=f"{label}: not in the trend")
        bound = np.array([s.status.startswith("all ratios feasible") for s in pts])
        if bound.any():  # a lower bound: every tried ratio was feasible
            ax.plot(n[bound], y[bound], "^", color=color, ms=10, mfc="none", label=f"{label}: lower bound")
        tr = dec.trend
        if tr is not None:
            grid = np.geomspace(min(tr["sizes"]), max(tr["sizes"]), 50) if tr.get("sizes") else np.geomspace(
                n.min(), n.max(), 50)  # fmt: skip
            ax.plot(grid, tr["a"] + tr["b"] * np.log10(grid), "-", color=color, lw=1)
            if tr.get("band"):
                b = tr["band"]
                ax.fill_between(b["n_params"], b["lo"], b["hi"], color=color, alpha=0.15, lw=0)
    ax.set_xscale("log")
    ax.set_xlabel("model size (parameters)")
    token_axis(ax)
    ax.set_ylabel("critical mixture ratio")
    allsizes = {s.n_params for _, d in items for s in d.sizes}
    ordered = sorted(allsizes, key=lambda v: (0, float(v), "") if _numeric(v) else (1, 0.0, str(v)))
    ax.set_title("CMR vs model size (sizes " + ", ".join(_size_label(v) for v in ordered) + ")", fontsize=9)
    ax.legend(fontsize=7)
    return ax


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and float(v) > 0


def _size_label(v: Any) -> str:
    if _numeric(v):
        x = float(v)
        for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
            if x >= scale:
                return f"{x / scale:.3g}{unit}"
        return f"{x:g}"
    return str(v)


def plot_schedule_cmr(result: ScheduleCMR, *, ax: Axes | None = None, title: str | None = None) -> Axes:
    """Predicted general-loss rise at the budget vs domain share, under the CPT schedule and under a constant LR
    at its peak, with bootstrap bands, ε and both CMRs marked (:func:`mixlaw.decide.cpt.schedule_aware_cmr`)."""
    ax = _axes(ax)
    grid = np.asarray(result.grid)
    curves = [("schedule", result.schedule, result.rise, result.rise_band, result.cmr, "tab:blue", "-")]
    if result.constant_rise is not None:
        curves.append(
            ("constant LR", "constant LR at the peak", result.constant_rise, result.constant_rise_band,
             result.constant_lr_cmr, "tab:orange", "--")
        )  # fmt: skip
    for _, label, rise, band, cmr, color, ls in curves:
        ax.plot(grid, rise, ls, color=color, label=label)
        if band is not None:
            ax.fill_between(grid, band[0], band[1], color=color, alpha=0.18, lw=0)
        if cmr is not None:
            ax.axvline(cmr, color=color, ls=":", lw=1.2)
            ax.plot([cmr], [result.epsilon], "D", color=color, mec="black", ms=6)
    ax.axhline(result.epsilon, color="firebrick", lw=1, label=f"ε = {result.epsilon:g}")
    ax.axhline(0.0, color="0.6", lw=0.6)
    ax.set_xlim(0.0, 1.0)
    pts = np.concatenate([np.asarray(c[2], dtype=np.float64) for c in curves] + [np.array([0.0, result.epsilon])])
    pts = pts[np.isfinite(pts)]
    span = float(pts.max() - pts.min()) or 1.0
    ax.set_ylim(float(pts.min()) - 0.25 * span, float(pts.max()) + 0.25 * span)  # wide bands stay readable
    ax.set_xlabel("domain share of the CPT mix (1 − replay ratio)")
    ax.set_ylabel("general-loss rise at the budget")
    ax.set_title(title or f"General-loss rise after {result.budget_steps} CPT steps (◆ = CMR)")
    ax.legend(fontsize=7)
    return ax


def plot_cpt_lr(schedule: Schedule, budget_steps: int, *, ax: Axes | None = None) -> Axes:
    """The CPT LR over the budget (the schedule truncated or held at its final LR) beside the constant LR at
    its peak — the two schedules compared by :func:`plot_schedule_cmr`."""
    ax = _axes(ax)
    lr = schedule.lrs()  # η_1..η_T
    if budget_steps <= lr.size:
        lr = lr[:budget_steps]
    else:
        lr = np.concatenate([lr, np.full(budget_steps - lr.size, lr[-1])])
    steps = np.arange(1, lr.size + 1)
    ax.plot(steps, lr, "-", color="tab:blue", label=schedule.spec())
    ax.plot(steps, np.full(lr.size, schedule.peak_lr), "--", color="tab:orange", label="constant LR at the peak")
    ax.set_xlabel("CPT step")
    ax.set_ylabel("learning rate")
    ax.set_title("CPT learning-rate schedules compared")
    ax.legend(fontsize=7)
    return ax
