"""A report for any fit: observed vs fitted over the law's natural axis, residuals, parameters, starts, held-out.

:func:`write_fit_report` writes one self-contained HTML file (inline CSS, PNG figures embedded as base64, nothing
fetched); :func:`fit_sections` returns the same content as :class:`mixlaw.report.html.Section` objects so other
reports (CMR, CPT) can include a fit's sections, and the pieces (:func:`plot_fit`, :func:`plot_residuals`,
:func:`param_table`, :func:`starts_summary`) are usable on their own: ``plot_fit(result, table, ax)`` draws a
fit on any Axes (the engine does not import the report, so a ``FitResult`` has no plot method).

The **natural axis** of a fit is chosen from its data, not from the law's name:

* curves (several rows per run and a ``tokens`` or ``step`` column): loss against that column, one line per run
  through the law's predictions at the run's rows (schedule-aware laws, whose inputs are derived per step);
* one point per run (e.g. Chinchilla's ``n_params, tokens``): the law's ``tokens`` input (else the input with the
  widest range) on the x axis, the other inputs binned into at most six groups (e.g. model sizes), and the law
  evaluated on a dense grid of x at each group's median of the other inputs.

Matplotlib is imported inside the functions; nothing here selects a backend or changes global state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError

if TYPE_CHECKING:
    from mixlaw.fit.evaluate.validate import ValidationResult
    from mixlaw.fit.result import FitResult
    from mixlaw.report.html import Section

__all__ = [
    "NaturalAxis",
    "natural_axis",
    "plot_fit",
    "plot_residuals",
    "param_table",
    "parameter_rows",
    "starts_summary",
    "fit_sections",
    "fit_report_html",
    "write_fit_report",
]

CURVE_AXES = ("tokens", "step")  # columns a curve is drawn against, in order of preference
MAX_GROUPS = 6  # one-point-per-run fits: at most this many curves
MAX_LINES = 12  # curve fits: runs beyond this are drawn without a legend entry


@dataclass(frozen=True)
class NaturalAxis:
    """How a fit is drawn: ``x`` (a table column), ``mode`` (``"curves"``: a line per ``group`` through the rows;
    ``"grid"``: the law on a dense grid of the input ``x_input`` per group of the other inputs), ``group`` (a
    column, or ``None``), ``log_x``."""

    x: str
    mode: str
    group: str | None
    log_x: bool
    x_input: str | None = None


def _input_columns(result: FitResult) -> dict[str, str]:
    return {n: result.input_map.get(n, n) for n in result.law.inputs}


def natural_axis(result: FitResult, table: pd.DataFrame | None) -> NaturalAxis:
    """The axis a fit is best read along (see the module docstring)."""
    cols = _input_columns(result)
    if table is not None and "run_id" in table and len(table) >= 3 * max(table["run_id"].nunique(), 1):
        for c in CURVE_AXES:
            v = pd.to_numeric(table[c], errors="coerce").to_numpy(dtype=np.float64) if c in table else np.array([])
            if v.size and np.isfinite(v).all():
                return NaturalAxis(c, "curves", "run_id", bool(np.all(v > 0) and np.nanmax(v) > 20 * np.nanmin(v)))
    ranges = {n: result.input_ranges.get(n, [math.nan, math.nan]) for n in cols}
    if table is not None:
        ranges = {n: [float(table[c].min()), float(table[c].max())] for n, c in cols.items() if c in table}
    if not ranges:
        raise InputError(f"expected the inputs of law '{result.law_name}' in the table, got none of {list(cols)}")

    def width(n: str) -> float:
        lo, hi = ranges[n]
        return math.log(hi / lo) if lo > 0 and hi > 0 else (hi - lo) / max(abs(hi), 1e-300)

    x_in = "tokens" if "tokens" in ranges else max(ranges, key=width)
    lo, _ = ranges[x_in]
    others = [n for n in ranges if n != x_in]
    return NaturalAxis(cols[x_in], "grid", cols[others[0]] if others else None, lo > 0 and width(x_in) > 3, x_in)


def _groups(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Integer group per value (≤ :data:`MAX_GROUPS`, quantile bins when there are more distinct values)."""
    uniq = np.unique(values)
    if uniq.size <= MAX_GROUPS:
        return np.searchsorted(uniq, values), [f"{u:.3g}" for u in uniq]
    edges = np.unique(np.quantile(values, np.linspace(0, 1, MAX_GROUPS + 1)))
    idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, edges.size - 2)
    return idx, [f"{edges[i]:.3g}–{edges[i + 1]:.3g}" for i in range(edges.size - 1)]


def _axes(ax: Any, size: tuple[float, float] = (6.4, 4.4)) -> Any:
    if ax is not None:
        return ax
    from matplotlib.figure import Figure

    return Figure(figsize=size).subplots()


def _observed(result: FitResult, table: pd.DataFrame) -> np.ndarray:
    if result.target not in table:
        raise InputError(f"expected the fitted target column '{result.target}' in the table", column=result.target)
    return pd.to_numeric(table[result.target], errors="coerce").to_numpy(dtype=np.float64)


def plot_fit(result: FitResult, table: pd.DataFrame | None = None, ax: Any = None, *, title: str | None = None) -> Any:
    """Observed target (dots) and the fitted law (lines) over the fit's natural axis; returns the Axes.

    Without ``table`` only the fitted curve over the fitted input ranges is drawn (other inputs at the
    geometric middle of their range)."""
    import matplotlib as mpl

    ax = _axes(ax)
    axis = natural_axis(result, table)
    cmap = mpl.colormaps["viridis"]
    if axis.mode == "curves" and table is not None:
        runs = list(dict.fromkeys(table["run_id"].astype(str)))
        pred = result.predict(table)
        y = _observed(result, table)
        rid = table["run_id"].astype(str).to_numpy()
        xv = table[axis.x].to_numpy(dtype=np.float64)
        for i, r in enumerate(runs):
            m = rid == r
            order = np.argsort(xv[m])
            color = cmap(i / max(len(runs) - 1, 1))
            label = r if i < MAX_LINES else None
            ax.plot(xv[m][order], y[m][order], ".", ms=2.5, alpha=0.45, color=color)
            ax.plot(xv[m][order], pred[m][order], "-", lw=1.2, color=color, label=label)
    else:
        _plot_grid(result, table, axis, ax, cmap)
    if axis.log_x:
        ax.set_xscale("log")
    ax.set_xlabel(axis.x)
    ax.set_ylabel(result.target)
    r2 = result.metrics.get("r2")
    ax.set_title(title or f"{result.law_name} fit of {result.target}" + (f" (R² {r2:.4f})" if r2 is not None else ""))
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, title=axis.group, title_fontsize=7)
    return ax


def _plot_grid(result: FitResult, table: pd.DataFrame | None, axis: NaturalAxis, ax: Any, cmap: Any) -> None:
    law = result.law
    cols = _input_columns(result)
    x_in = axis.x_input or axis.x
    if table is not None:
        data = {n: table[c].to_numpy(dtype=np.float64) for n, c in cols.items()}
    else:
        data = {n: np.array(result.input_ranges[n], dtype=np.float64) for n in cols}
    lo, hi = float(np.min(data[x_in])), float(np.max(data[x_in]))
    grid = np.geomspace(lo, hi, 200) if axis.log_x else np.linspace(lo, hi, 200)
    others = [n for n in cols if n != x_in]
    if others and table is not None:
        gidx, labels = _groups(data[others[0]])
    else:
        gidx, labels = np.zeros(data[x_in].size, dtype=np.int64), [""]
    y = _observed(result, table) if table is not None else None
    for g, label in enumerate(labels):
        m = gidx == g
        if not m.any():
            continue
        color = cmap(g / max(len(labels) - 1, 1))
        x = {n: np.full(grid.size, _middle(data[n][m])) for n in others}
        x[x_in] = grid
        ax.plot(grid, law.evaluate(x, result.params), "-", lw=1.3, color=color, label=label or None)
        if y is not None:
            ax.plot(data[x_in][m], y[m], "o", ms=3, alpha=0.6, color=color)


def _middle(v: np.ndarray) -> float:
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan
    return float(np.exp(np.median(np.log(v)))) if np.all(v > 0) else float(np.median(v))


def _residuals(result: FitResult, table: pd.DataFrame) -> np.ndarray:
    pred, y = result.predict(table), _observed(result, table)
    if result.fit_space == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(pred) - np.log(y)
    return pred - y


def plot_residuals(result: FitResult, table: pd.DataFrame, axes: Sequence[Any] | None = None) -> Any:
    """Residuals in the fit's space against the natural axis, and predicted vs observed; returns the Figure."""
    from matplotlib.figure import Figure

    if axes is None:
        fig = Figure(figsize=(11, 3.8))
        axes = fig.subplots(1, 2)
    ax1, ax2 = axes
    axis = natural_axis(result, table)
    res = _residuals(result, table)
    x = table[axis.x].to_numpy(dtype=np.float64)
    ax1.axhline(0.0, color="0.5", lw=0.8)
    ax1.plot(x, res, ".", ms=3, alpha=0.6)
    if axis.log_x:
        ax1.set_xscale("log")
    ax1.set_xlabel(axis.x)
    ax1.set_ylabel("log(pred) − log(obs)" if result.fit_space == "log" else "pred − obs")
    ax1.set_title("Residuals")
    y, pred = _observed(result, table), result.predict(table)
    ax2.plot(y, pred, ".", ms=3, alpha=0.6)
    lims = [float(np.nanmin([y.min(), pred.min()])), float(np.nanmax([y.max(), pred.max()]))]
    ax2.plot(lims, lims, "-", color="0.5", lw=0.8)
    ax2.set_xlabel(f"observed {result.target}")
    ax2.set_ylabel(f"predicted {result.target}")
    ax2.set_title("Predicted vs observed")
    return ax1.figure


def param_table(result: FitResult, level: float = 0.95) -> pd.DataFrame:
    """One row per parameter: value, bootstrap interval at ``level`` (when bootstrapped), declared bounds, whether
    the value sits on a bound, and the law's description."""
    law, boot = result.law, result.bootstrap_params
    draws = None if boot is None or boot.empty else boot[list(law.param_names)].to_numpy(dtype=np.float64)
    return parameter_rows(law, result.params, draws, level)


def parameter_rows(
    law: Any, params: Mapping[str, float], bootstrap: np.ndarray | None, level: float = 0.95
) -> pd.DataFrame:
    """:func:`param_table` for any law, parameters and ``(B, P)`` bootstrap draws (columns in
    ``law.param_names`` order) — e.g. the fits of a CPT bundle."""
    q = [(1 - level) / 2, (1 + level) / 2]
    rows = []
    for j, n in enumerate(law.param_names):
        spec, v = law.spec(n), float(params[n])
        lo, hi = (math.nan, math.nan)
        if bootstrap is not None and len(bootstrap) >= 2:
            lo, hi = (float(t) for t in np.quantile(bootstrap[:, j], q))
        rows.append(
            {
                "parameter": n,
                "value": v,
                f"{level:.0%} lo": lo,
                f"{level:.0%} hi": hi,
                "bounds": f"[{spec.lower:g}, {spec.upper:g}]",
                "at bound": bool(spec.at_bound(v)),
                "meaning": spec.description,
            }
        )
    return pd.DataFrame(rows)


def starts_summary(result: FitResult, top: int = 5) -> tuple[dict[str, Any], pd.DataFrame]:
    """Counts of the start table by status, the best objective, how many converged starts reach it (within
    0.1 %), and the ``top`` best starts (objective, status, iterations, final parameters)."""
    st = result.starts
    counts = st["status"].value_counts().to_dict() if "status" in st else {}
    summary: dict[str, Any] = {"starts": len(st), **{f"{k}": int(v) for k, v in counts.items()}}
    if "objective" in st and len(st):
        obj = pd.to_numeric(st["objective"], errors="coerce")
        best = float(obj.min())
        summary["best objective"] = best
        conv = obj[st.get("status", pd.Series(index=st.index, dtype=str)) == "converged"]
        summary["converged at the best (±0.1 %)"] = int((conv <= best + 1e-3 * abs(best) + 1e-300).sum())
        cols = [c for c in ("objective", "status", "n_iter", *result.params) if c in st]
        best_rows = st.assign(_o=obj).sort_values("_o", kind="stable").head(top)[cols]
    else:
        best_rows = pd.DataFrame()
    return summary, best_rows


def _headline(result: FitResult) -> str:
    from mixlaw.report.html import esc

    m = result.metrics
    qual = ", ".join(f"{k} {v:.4g}" for k, v in m.items() if k in ("r2", "mae", "mre"))
    bounds = result.at_bounds()
    warn = f"; <b class='warn'>at a bound: {esc(', '.join(bounds))}</b>" if bounds else ""
    cls = "ok" if result.status.value == "converged" else "warn"
    return (
        f"<p><b>{esc(result.law_name)}</b> fitted to <b>{esc(result.target)}</b> on {result.n_points} points: "
        f"status <span class='{cls}'>{esc(result.status.value)}</span> ({esc(result.message)}); {esc(qual)}{warn}.</p>"
        f"<p><small>{esc(result.law.formula)} — {esc(result.law.citation)}</small></p>"
    )


def fit_sections(
    result: FitResult,
    table: pd.DataFrame,
    validation: ValidationResult | None = None,
    *,
    title: str | None = None,
) -> list[Section]:
    """The report's sections: the fit (headline, fitted curves, residuals), parameters, starts and, with a
    validation result, the held-out errors."""
    from matplotlib.figure import Figure

    from mixlaw.report.html import Section, esc, figure_html, table_html

    name = title or f"{result.law_name} fit of {result.target}"
    fig = Figure(figsize=(7.2, 4.8))
    plot_fit(result, table, fig.subplots())
    figs = figure_html(fig, alt="observed and fitted") + figure_html(plot_residuals(result, table), alt="residuals")
    out = [Section(name, _headline(result) + f"<div class='figs'>{figs}</div>")]
    level = 0.95
    params = param_table(result, level)
    scheme = result.settings.get("bootstrap_scheme") or "runs"
    note = (
        f"<p>Intervals: {100 * level:g}% bootstrap percentile over {result.n_bootstrap} resamples of "
        f"{esc(result.bootstrap_unit)} (scheme {esc(scheme)}), {result.n_failed_resamples} of "
        f"{result.n_bootstrap} resamples unusable after refitting"
        + ("" if result.interval_status == "ok" else f" — <b>intervals {esc(result.interval_status)}</b>")
        + (f"; auto: {esc(result.settings['bootstrap_fallback'])}" if result.settings.get("bootstrap_fallback") else "")
        + ".</p>"
        if result.n_bootstrap
        else "<p>No bootstrap: run with <code>--bootstrap N</code> for intervals.</p>"
    )
    if result.identifiability:  # which parameters the data pin down, as the CLI's `identify` line
        from mixlaw.fit.uncertainty.identify import identify_summary

        note += f"<p>Identifiability: {esc(identify_summary(result.identifiability))}.</p>"
    out.append(Section("Parameters", table_html(params) + note))
    summary, best = starts_summary(result)
    start_html = table_html([summary])
    if len(best):
        start_html += f"<details><summary>best {len(best)} starts</summary>{table_html(best)}</details>"
    out.append(Section("Starts", start_html))
    if validation is not None:
        out.append(_validation_section(result, table, validation))
    return out


def _validation_section(result: FitResult, table: pd.DataFrame, validation: ValidationResult) -> Section:
    from matplotlib.figure import Figure

    from mixlaw.report.html import Section, esc, figure_html, table_html

    pts = validation.points
    head = (
        f"<p><b>{esc(validation.scheme)}</b>: held-out mean |relative error| "
        f"<b>{100 * validation.mre:.3f} %</b> over {len(pts)} points in {len(validation.folds)} fold(s).</p>"
    )
    head += f"<p>Intervals: {esc(validation.interval_note())}.</p>"
    folds = validation.folds
    cols = [
        c
        for c in ("fold", "status", "n_fit", "n_held_out", "mre", "max_abs_rel_error", "n_failed", "n_resamples")
        if c in folds
    ]
    body = head + table_html(folds[cols])
    if len(pts) and "lo" in pts:
        show = pts[[c for c in ("fold", "run_id", "observed", "predicted", "lo", "hi", "method") if c in pts]].copy()
        show.insert(show.columns.get_loc("lo"), "level", f"{100 * validation.level:g}% {validation.interval}")
        show["scheme"] = validation.resample
        body += (
            f"<details><summary>every held-out prediction with its interval ({len(show)})</summary>"
            f"{table_html(show.head(400))}</details>"
        )
    if len(pts):
        fig = Figure(figsize=(6.4, 4.0))
        ax = fig.subplots()
        axis = natural_axis(result, table)
        x = table[axis.x].to_numpy(dtype=np.float64)[pts["row"].to_numpy(dtype=np.int64)]
        for fold, g in pts.assign(_x=x).groupby("fold", sort=False):
            ax.plot(g["_x"], 100 * g["rel_error"], "o", ms=3, label=str(fold))
        ax.axhline(0.0, color="0.5", lw=0.8)
        if axis.log_x:
            ax.set_xscale("log")
        ax.set_xlabel(axis.x)
        ax.set_ylabel("held-out (pred − obs)/obs, %")
        ax.set_title("Held-out errors")
        ax.legend(fontsize=7)
        body += f"<div class='figs'>{figure_html(fig, alt='held-out errors')}</div>"
    return Section("Held-out validation", body)


def fit_report_html(result: FitResult, table: pd.DataFrame, validation: ValidationResult | None = None) -> str:
    """The whole self-contained HTML page."""
    from mixlaw.report.html import render_report

    return render_report(
        f"mixlaw fit report: {result.law_name}",
        fit_sections(result, table, validation),
        subtitle=f"target {result.target}, {result.n_points} points",
    )


def write_fit_report(
    result: FitResult, table: pd.DataFrame, path: str | Path, validation: ValidationResult | None = None
) -> Path:
    """Write :func:`fit_report_html` to ``path``; returns the path. ``table`` holds the fitted rows (with the
    law's inputs, through the fit's ``input_map``, and the target)."""
    from mixlaw.safeio import atomic_write_text

    p = Path(path)
    atomic_write_text(p, fit_report_html(result, table, validation))  # a reader never sees half a page
    return p
