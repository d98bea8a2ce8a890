"""The page of the schedule-aware CMR (``mixlaw cmr --law cpt_replay``): the CMR under the CPT schedule beside the
constant-LR CMR of the same fit and the CMR paper's decision on the runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from mixlaw.fmt import fmt_size as _size
from mixlaw.fmt import fmt_tokens as _tok
from mixlaw.report.cmr_page import cmr_sections
from mixlaw.report.html import Section, esc, figure_html, render_report, table_html

if TYPE_CHECKING:
    from mixlaw.decide.cmr import CMRDecision
    from mixlaw.decide.cpt.schedule_size import SizeScheduleCMR

__all__ = ["schedule_cmr_report", "schedule_cmr_section"]


def schedule_cmr_section(
    results: Sequence[SizeScheduleCMR],
    *,
    decision: CMRDecision | None = None,
    decision_error: str | None = None,
) -> Section:
    """The schedule-aware CMR (``mixlaw cmr --law cpt_replay``) beside the constant-LR CMR: a table per size
    (CMR under the schedule, the same fit under a constant LR at the schedule's peak, the CMR paper's decision
    on the runs), the predicted general-loss rise vs domain share under both schedules, and the LR schedules."""
    import matplotlib.pyplot as plt

    from mixlaw.report import plots

    paper = {} if decision is None else {_key(s.n_params): s for s in decision.sizes}

    def iv(v: tuple[float, float] | None) -> str:
        return f"[{v[0]:.3f}, {v[1]:.3f}]" if v else "—"

    def num(v: float | None) -> str:
        return "—" if v is None else f"{v:.3f}"

    rows, figs, notes = [], [], []
    for r in results:
        res = r.result
        ps = paper.get(_key(r.n_params))
        paper_txt = "—" if ps is None else num(ps.cmr) + ("" if ps.status == "ok" else f" ({ps.status})")
        rows.append(
            {
                "size": _size(r.n_params) if r.n_params is not None else "—",
                "budget (steps)": "—" if r.budget_steps is None else f"{r.budget_steps:,}",
                "budget (tokens)": _tok(r.budget_tokens),
                "CMR under the schedule": num(r.cmr),
                "95% CI": iv(r.ci),
                "constant LR (same fit)": num(None if res is None else res.constant_lr_cmr),
                "95% CI ": iv(None if res is None else res.constant_lr_interval),
                "CMR paper decision": paper_txt,
                "95% CI  ": iv(None if ps is None else ps.ci),
                "status": r.status,
            }
        )
        notes += [f"{_size(r.n_params) if r.n_params is not None else 'all'}: {n}" for n in r.notes]
        if res is None:
            continue
        fig, ax = plt.subplots(figsize=(4.9, 3.6))
        label = _size(r.n_params) if r.n_params is not None else ""
        plots.plot_schedule_cmr(res, ax=ax, title=f"{label} general-loss rise after {r.budget_steps} steps")
        fig.tight_layout()
        figs.append(figure_html(fig, alt=f"schedule-aware CMR {label}"))
    first = next((r for r in results if r.budget_steps is not None), None)
    if first is not None:  # one schedule and budget for every size
        fig, ax = plt.subplots(figsize=(4.9, 3.6))
        plots.plot_cpt_lr(first.schedule, int(first.budget_steps or first.schedule.total_steps), ax=ax)
        fig.tight_layout()
        figs.insert(0, figure_html(fig, alt="CPT LR schedules"))
    fits = []
    for r in results:
        if r.fit is None:
            continue
        pr = ", ".join(f"{k} = {v:.4g}" for k, v in r.fit.params.items())
        r2 = r.fit.metrics.get("r2")
        fits.append(
            f"<li>{esc(_size(r.n_params) if r.n_params is not None else 'all')}: {esc(r.fit.status.value)}, "
            f"{r.fit.n_points} points from {r.n_runs} runs, R² = {'—' if r2 is None else f'{r2:.4f}'}, "
            f"bootstrap {r.fit.n_bootstrap} resamples of {esc(r.fit.bootstrap_unit or '—')} "
            f"({r.fit.n_failed_resamples} failed); PT run {esc(r.pt_run)} <code>{esc(r.pt_schedule)}</code>; "
            f"trained domain shares {esc(', '.join(f'{x:g}' for x in r.trained_shares))}; {esc(pr)}</li>"
        )
    eps = next((r.result.epsilon for r in results if r.result is not None), None)
    paper_txt = f"<p class='warn'>CMR paper decision on these runs: {esc(decision_error)}</p>" if decision_error else ""
    html_ = (
        f"<p>CPT schedule <code>{esc(results[0].schedule.spec())}</code>. The CMR under the schedule is the largest "
        "domain share (1 − replay share) whose general-loss rise at the budget, predicted by the replay law "
        "<code>cpt_replay</code> (Wang et al. 2025, arXiv:2505.07796, Eq. 8, normalised replay factor) fitted on "
        "the general loss of the PT and CPT runs, stays within "
        f"ε = {'—' if eps is None else f'{eps:g}'} nats/token of the loss at the branch point. "
        "<b>Constant LR (same fit)</b> is the same law under a constant LR at the schedule's peak (the CMR paper's "
        "setting); <b>CMR paper decision</b> is the model-free constant-LR decision on the runs (Gu et al. 2024, "
        "arXiv:2407.17467) at the same token budget. Intervals: bootstrap percentiles over the law's refits "
        "(resampling runs).</p>"
        + paper_txt
        + table_html(rows)
        + f'<div class="figs">{"".join(figs)}</div>'
        + (f"<p><b>Fits</b></p><ul>{''.join(fits)}</ul>" if fits else "")
        + (f"<p><b>Notes</b></p><ul>{''.join(f'<li>{esc(n)}</li>' for n in notes)}</ul>" if notes else "")
    )
    return Section("Schedule-aware CMR (CPT schedule vs constant LR)", html_)


def _key(v: Any) -> Any:
    return float(v) if isinstance(v, (int, float, np.integer, np.floating)) else v


def schedule_cmr_report(
    results: Sequence[SizeScheduleCMR],
    *,
    decision: CMRDecision | None = None,
    decision_error: str | None = None,
    title: str = "Critical mixture ratio under a CPT schedule",
    source: str | None = None,
) -> str:
    """The page of ``mixlaw cmr --law cpt_replay``: the schedule-aware section first, then the constant-LR CMR
    sections of the CMR paper's decision when it could be computed."""
    sections = [schedule_cmr_section(results, decision=decision, decision_error=decision_error)]
    if decision is not None:
        sections += cmr_sections(decision, source=source)
    return render_report(title, sections, subtitle=source)
