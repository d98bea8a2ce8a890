"""Plots and the HTML report section for schedule-aware and continual pre-training predictions.

Pure functions: each takes data and an optional ``ax`` and returns the :class:`matplotlib.axes.Axes` it
drew on; nothing here selects a backend or changes global state. :func:`cpt_section` returns a
self-contained HTML fragment (PNG figures embedded as base64) for the report.
"""

from __future__ import annotations

import base64
import html
import io
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import ExtrapolationWarning, InputError

__all__ = [
    "plot_predicted_vs_observed",
    "plot_optimum_vs_weight",
    "plot_plan_trajectory",
    "cpt_section",
    "cpt_report_section",
]


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, new = plt.subplots(figsize=(6.4, 4.2))
    return new


def plot_predicted_vs_observed(
    curves: pd.DataFrame,
    *,
    ax: Any = None,
    schedule_column: str = "schedule",
    step_column: str = "step",
    observed_column: str = "observed",
    predicted_column: str = "predicted",
    fitted: Sequence[str] = (),
    title: str | None = None,
) -> Any:
    """Observed loss (dots) and predicted loss (lines) per schedule.

    ``curves`` has one row per (schedule, step) with the observed and the predicted loss; schedules named in
    ``fitted`` are drawn dashed (fitted on), the others solid (predicted).
    """
    for c in (schedule_column, step_column, observed_column, predicted_column):
        if c not in curves.columns:
            raise InputError(f"plot needs a column '{c}'", column=c)
    ax = _axes(ax)
    import matplotlib as mpl

    names = list(dict.fromkeys(curves[schedule_column].astype(str)))
    cmap = mpl.colormaps["tab10"]
    for i, name in enumerate(names):
        d = curves[curves[schedule_column].astype(str) == name].sort_values(step_column)
        color = cmap(i % 10)
        ax.plot(d[step_column], d[observed_column], ".", ms=2.5, color=color, alpha=0.5)
        mae = float(np.mean(np.abs(d[predicted_column] - d[observed_column])))
        style = "--" if name in fitted else "-"
        tag = "fit" if name in fitted else "pred"
        ax.plot(
            d[step_column],
            d[predicted_column],
            style,
            lw=1.2,
            color=color,
            label=f"{name} ({tag}, MAE {mae:.4f})",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title)
    return ax


def plot_optimum_vs_weight(table: pd.DataFrame, *, over: str, ax: Any = None, title: str | None = None) -> Any:
    """Best value of ``over`` (replay ratio, CPT peak LR or loss potential) against the D_pt weight ``w_pt``.

    ``table`` is :func:`mixlaw.decide.cpt.optimum_vs_weight` output (``w_pt, best, lo, hi, at_edge``).
    """
    for c in ("w_pt", "best"):
        if c not in table.columns:
            raise InputError(f"plot needs a column '{c}'", column=c)
    ax = _axes(ax)
    ax.plot(table["w_pt"], table["best"], "o-", lw=1.2, ms=4, label="optimum")
    if {"lo", "hi"} <= set(table.columns) and np.isfinite(table["lo"]).any():
        ax.fill_between(table["w_pt"], table["lo"], table["hi"], alpha=0.25, label="bootstrap interval")
    if "at_edge" in table.columns and table["at_edge"].any():
        e = table[table["at_edge"].astype(bool)]
        ax.plot(e["w_pt"], e["best"], "x", color="red", label="at grid edge")
    if over == "peak_lr":
        ax.set_yscale("log")
    label = {"replay": "replay ratio r_pt", "peak_lr": "CPT peak LR", "loss_potential": "loss potential"}
    ax.set_xlabel("weight on D_pt loss (w_pt = 1 − w_cpt)")
    ax.set_ylabel(f"optimal {label.get(over, over)}")
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title)
    return ax


def plot_plan_trajectory(
    pred: pd.DataFrame,
    *,
    sets: Sequence[str] | None = None,
    ax: Any = None,
    x: str = "step",
    title: str | None = None,
) -> Any:
    """Predicted loss of a plan per eval set with its interval band, and the CPT start as a vertical line.

    ``pred`` is :func:`mixlaw.decide.cpt.predict_plan` output (``pred_<set>``, optional
    ``lo_<set>``/``hi_<set>``).
    """
    names = [c[5:] for c in pred.columns if c.startswith("pred_")] if sets is None else list(sets)
    if not names:
        raise InputError("the prediction table has no pred_<set> columns")
    ax = _axes(ax)
    for name in names:
        col = f"pred_{name}"
        if col not in pred.columns:
            raise InputError(f"no predictions for set '{name}'", column=col)
        (line,) = ax.plot(pred[x], pred[col], lw=1.3, label=name)
        if f"lo_{name}" in pred.columns:
            ax.fill_between(pred[x], pred[f"lo_{name}"], pred[f"hi_{name}"], color=line.get_color(), alpha=0.2)
    if "cpt_step" in pred.columns and x == "step":
        started = pred[pred["cpt_step"] > 0]
        if len(started):
            ax.axvline(float(started[x].iloc[0]) - 1, color="grey", ls=":", lw=1, label="CPT start")
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel("predicted loss (nats/token)")
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title)
    return ax


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(fig: Any, alt: str) -> str:
    import matplotlib.pyplot as plt

    data = _png(fig)
    plt.close(fig)
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"/>'


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if math.isinf(v):
            return "∞"
        return f"{v:.4g}"
    return html.escape(str(v))


def cpt_section(
    fits: Any,
    plan: Any,
    *,
    weights: tuple[float, float] | None = None,
    over: Sequence[str] = (),
    observed: pd.DataFrame | None = None,
    fitted_schedules: Sequence[str] = (),
    schedule_cmr: Any = None,
    table: pd.DataFrame | None = None,
    title: str = "Continual pre-training",
    wrap: bool = True,
) -> str:
    """HTML fragment (``<section>``) with the CPT analysis of a plan.

    Contents: the plan, the predicted trajectories with bands, final losses, the turning length and critical
    point of the D_pt loss (and of the composite with ``weights``), one optimum-vs-weight figure per entry of
    ``over``, the predicted-vs-observed figure when ``observed`` (``schedule, step, observed, predicted``) is
    given, the schedule-aware CMR beside the constant-LR CMR when ``schedule_cmr`` (a
    :class:`mixlaw.decide.cpt.ScheduleCMR`) is given, the identifiability flags of every fit on ``table`` (the
    fitted RunTable with its schedule features) when given, and every extrapolation warning raised on the way.
    ``wrap=False`` returns the inner fragment without the ``<section>`` and its heading (for
    :class:`mixlaw.report.html.Section`; see :func:`cpt_report_section`).
    """
    import matplotlib.pyplot as plt

    from mixlaw.decide import cpt as d
    from mixlaw.decide.cpt.critical import HasAsymptote

    parts = [f"<section class='cpt'><h2>{html.escape(title)}</h2>"] if wrap else []
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExtrapolationWarning)
        w = weights if (weights is not None and fits.cpt_set is not None) else None
        pred = d.predict_plan(fits, plan, weights=w)
        pt_desc = "black-box base model" if plan.pt is None else html.escape(plan.pt.spec())
        parts.append(
            "<p><b>Plan.</b> PT: "
            + pt_desc
            + (f" (branch at step {plan.branch_step})" if plan.branch_step else "")
            + f"; CPT: {html.escape(plan.cpt.spec())}; replay ratio {plan.replay_ratio:g}.</p>"
        )
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        plot_plan_trajectory(pred, ax=ax, title="Predicted trajectories")
        parts.append(_img(fig, "predicted trajectories"))
        last = pred.iloc[-1]
        rows = "".join(
            f"<tr><td>{html.escape(c[5:])}</td><td>{_fmt(float(last[c]))}</td>"
            f"<td>{_fmt(float(last.get('lo_' + c[5:], float('nan'))))} – "
            f"{_fmt(float(last.get('hi_' + c[5:], float('nan'))))}</td></tr>"
            for c in pred.columns
            if c.startswith("pred_")
        )
        parts.append(f"<table><tr><th>set</th><th>final loss</th><th>interval</th></tr>{rows}</table>")
        if plan.pt is not None and isinstance(fits.fits[fits.pt_set].law, HasAsymptote):
            trows = []
            for label, ww in (("D_pt", None), ("composite", w)):
                if label == "composite" and ww is None:
                    continue
                try:
                    tl = d.turning_length(fits, plan, weights=ww)
                    trows.append(
                        f"<tr><td>{label}</td><td>{_fmt(tl.steps)}</td><td>{html.escape(tl.reason)}</td>"
                        f"<td>{html.escape(tl.asymptotic_class)}</td><td>{_fmt(tl.peak_rise)}</td></tr>"
                    )
                except InputError as exc:
                    notes.append(f"turning length ({label}): {exc}")
            if trows:
                parts.append(
                    "<table><tr><th>curve</th><th>turning length (CPT steps)</th><th>reason</th>"
                    "<th>asymptotic class</th><th>peak rise</th></tr>" + "".join(trows) + "</table>"
                )
            try:
                cp = d.critical_point(fits, plan, n_scan=60)
                parts.append(
                    f"<p><b>Critical point</b> (D_pt): PT step {_fmt(cp.step)}, S1_pt {_fmt(cp.s1_pt)} — "
                    f"{html.escape(cp.reason)}.</p>"
                )
            except InputError as exc:
                notes.append(f"critical point: {exc}")
        for o in over:
            try:
                tab = d.optimum_vs_weight(fits, plan, o)  # type: ignore[arg-type]
            except InputError as exc:
                notes.append(f"optimum over {o}: {exc}")
                continue
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            plot_optimum_vs_weight(tab, over=o, ax=ax, title=f"Optimal {o} vs weight")
            parts.append(_img(fig, f"optimal {o} vs weight"))
        if observed is not None:
            fig, ax = plt.subplots(figsize=(6.4, 4.2))
            plot_predicted_vs_observed(observed, ax=ax, fitted=fitted_schedules, title="Predicted vs observed")
            parts.append(_img(fig, "predicted vs observed"))
        if schedule_cmr is not None:
            c = schedule_cmr
            iv = "—" if c.interval is None else f"{c.interval[0]:.3f} – {c.interval[1]:.3f}"
            parts.append(
                "<table><tr><th>CMR under</th><th>value</th><th>interval</th><th>status</th></tr>"
                f"<tr><td>{html.escape(c.schedule)}</td><td>{_fmt(c.cmr)}</td><td>{iv}</td>"
                f"<td>{html.escape(c.status)}</td></tr>"
                "<tr><td>constant LR (CMR paper setting)</td>"
                f"<td>{_fmt(c.constant_lr_cmr)}</td><td>—</td><td></td></tr>"
                f"</table><p>ε = {c.epsilon:g} nats/token at {c.budget_steps} CPT steps.</p>"
            )
    if table is not None:
        irows = []
        for name, f in fits.fits.items():
            try:
                r = d.identifiability(f, table)
            except InputError as exc:
                notes.append(f"identifiability ({name}): {exc}")
                continue
            irows.append(
                f"<tr><td>{html.escape(name)}</td><td>{html.escape(f.law.name)}</td>"
                f"<td>{html.escape(', '.join(r['flagged']) or 'none')}</td><td>{r['condition']:.3g}</td></tr>"
            )
        if irows:
            parts.append(
                "<table><tr><th>set</th><th>law</th><th>not identifiable (interpret only jointly)</th>"
                "<th>condition number</th></tr>" + "".join(irows) + "</table>"
            )
    parts.append(_fit_tables(fits))
    msgs = list(dict.fromkeys(str(c.message) for c in caught)) + notes
    if msgs:
        items = "".join(f"<li>{html.escape(m)}</li>" for m in msgs)
        parts.append(f"<div class='warnings'><b>Warnings</b><ul>{items}</ul></div>")
    if wrap:
        parts.append("</section>")
    return "\n".join(parts)


def _fit_tables(fits: Any) -> str:
    """Every fitted set's parameter table (values, bootstrap intervals, bounds), folded under ``<details>``;
    the same table as the fit report's (:func:`mixlaw.report.fit_report.parameter_rows`)."""
    from mixlaw.report.fit_report import parameter_rows
    from mixlaw.report.html import table_html

    blocks = []
    for name, f in {**fits.fits, **fits.ood}.items():
        n_boot = 0 if f.bootstrap is None else len(f.bootstrap)
        tab = table_html(parameter_rows(f.law, f.params, f.bootstrap, 0.9))
        blocks.append(
            f"<p><b>{html.escape(name)}</b> — law {html.escape(f.law.name)}, {n_boot} bootstrap draws</p>{tab}"
        )
    return "<details><summary>fitted parameters (90 % bootstrap intervals)</summary>" + "".join(blocks) + "</details>"


def cpt_report_section(fits: Any, plan: Any, *, title: str = "Continual pre-training", **kwargs: Any) -> Any:
    """The CPT analysis as a :class:`mixlaw.report.html.Section` for :func:`mixlaw.report.html.render_report`
    (``kwargs`` as for :func:`cpt_section`)."""
    from mixlaw.report.html import Section

    return Section(title, cpt_section(fits, plan, title=title, wrap=False, **kwargs))
