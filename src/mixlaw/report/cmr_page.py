"""The critical-mixture-ratio report: the decision first (one sentence per domain and size), then the plots, then
the tables (each once; long fit-quality tables folded), the held-out checks and the assumptions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from mixlaw.fmt import fmt_size, fmt_tokens
from mixlaw.report.html import Section, _status_class, esc, figure_html, render_report, table_html

if TYPE_CHECKING:
    from mixlaw.decide.cmr import CMRDecision

__all__ = ["cmr_sections", "cmr_domains_section", "cmr_report", "decision_sentences"]


def _ci(ci: Sequence[float] | None) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—"


def _cmr_cell(s: Any) -> float | str | None:
    """The CMR column: the value, or the answer in words when the table only brackets it."""
    return s.cmr if s.cmr is not None else s.answer().removeprefix("CMR ")


def cmr_class(s: Any) -> str:
    """Colour by meaning: a usable reading is green (``ok``) or amber (``warn``: weak, a bracket, a bound); red
    (``bad``) only when there is nothing to act on (no CMR and no bracket)."""
    from mixlaw.decide.cmr.result import Reading

    if s.cmr is not None and s.status == "ok":
        return "ok"
    if s.cmr is not None or s.reading in (Reading.BRACKET, Reading.UPPER_BOUND, Reading.LOWER_BOUND):
        return "warn"
    return _status_class(s.status)


def decision_sentences(decisions: Mapping[str, CMRDecision]) -> str:
    """One ``<li>`` per (domain, size): the decision in words, its status coloured."""
    items = []
    for d, dec in decisions.items():
        for s in dec.sizes:
            txt = s.sentence(d)
            cr = s.control_reading
            if cr:
                v = "no CMR" if cr.get("cmr") is None else f"{cr['cmr']:.2f}"
                txt += f" — {cr['reading']}: {v} {_ci(cr.get('ci'))} ({cr.get('status')})"
            items.append(f'<li class="{cmr_class(s)}">{esc(txt)}</li>')
    return f"<ul>{''.join(items)}</ul>"


def _notes(decision: CMRDecision) -> str:
    from mixlaw.report.cmr_text import domain_notes

    lis = "".join(f"<li>{esc(n)}</li>" for n in domain_notes(decision.sizes))
    return f"<p><b>Notes</b> (one line per kind of issue, with the sizes it concerns)</p><ul>{lis}</ul>" if lis else ""


def _validation_html(v: dict[str, Any] | None) -> str:
    if not v:
        return ""
    out = []
    ho = v.get("held_out_ratios") or {}
    if ho.get("n_points"):
        out.append(f"<p>Each interior ratio held out in turn ({ho['n_points']} runs): MAE of the predicted "
                   f"end-of-budget ΔL_gen {ho['mae_general']:.4f}, ΔL_dom {ho['mae_domain']:.4f} nats/token; "
                   f"{100 * ho['coverage']:.0f}% of held-out points inside the 95% band; the CMR moves by up to "
                   f"{ho['max_cmr_shift']:.3f}.</p>")  # fmt: skip
        rows = [{"size": fmt_size(r["n_params"]), "held-out R": r["ratio"], "ΔL_gen obs": r["observed_dloss_general"],
                 "ΔL_gen pred": r["predicted_dloss_general"], "inside": r["inside_general"],
                 "ΔL_dom obs": r["observed_dloss_domain"], "ΔL_dom pred": r["predicted_dloss_domain"],
                 "inside ": r["inside_domain"], "CMR": r["cmr"], "CMR without it": r["cmr_without"]}
                for r in ho["rows"]]  # fmt: skip
        out.append(f"<details><summary>per held-out ratio</summary>{table_html(rows)}</details>")
    hs = v.get("held_out_size")
    if hs and hs.get("predicted") is not None:
        act = "—" if hs["actual"] is None else f"{hs['actual']:.3f}"
        mae = "" if hs.get("mae_general") is None else (
            f"; its end-of-budget ΔL_gen predicted by per-ratio size trends with MAE {hs['mae_general']:.4f} "
            f"({100 * hs['coverage']:.0f}% inside the band)")  # fmt: skip
        clip = f" (trend value {hs['predicted_raw']:.3f}, clipped to a share)" if hs.get("clipped") else ""
        used = ", ".join(fmt_size(x) for x in hs.get("trend_sizes", []))
        nc = f" (its own CMR is not comparable: {hs['held_out_not_comparable']})" if hs.get(
            "held_out_not_comparable") else ""  # fmt: skip
        out.append(f"<p>Largest size {esc(fmt_size(hs['n_params']))} held out: the trend of the other sizes "
                   f"({esc(used)}) predicts its {esc(hs.get('reading', 'CMR'))} {hs['predicted']:.3f}{esc(clip)}, "
                   f"fitted {act}{esc(nc)}{esc(mae)}."
                   "</p>")  # fmt: skip
    elif hs:
        left = "; ".join(f"{fmt_size(x['n_params'])} ({x['reason']})" for x in hs.get("trend_left_out", []))
        out.append(f"<p>Largest size {esc(fmt_size(hs['n_params']))} held out: no trend of the other sizes (need ≥ 2 "
                   f"with a comparable CMR{esc('; left out: ' + left if left else '')}).</p>")  # fmt: skip
    return "".join(out) or "<p>Not enough sizes or interior ratios to hold any out.</p>"


def _sens_cell(r: pd.Series) -> str:
    """A sensitivity cell: the CMR, or its bracket when the table only brackets it (same words as the answer)."""
    v = r.get("cmr")
    if v is not None and not (isinstance(v, float) and math.isnan(v)):
        return f"{float(v):.3f}"
    lo, hi = r.get("bracket_lo"), r.get("bracket_hi")
    lo = None if lo is None or (isinstance(lo, float) and math.isnan(lo)) else float(lo)
    hi = None if hi is None or (isinstance(hi, float) and math.isnan(hi)) else float(hi)
    if lo is not None and hi is not None:
        return f"between {lo:g} and {hi:g}"
    if hi is not None:
        return f"< {hi:g}"
    return "—"


def _sensitivity(decision: CMRDecision) -> str:
    sens = decision.sensitivity.copy()
    if "bracket_hi" in sens.columns:
        sens["cmr"] = sens.apply(_sens_cell, axis=1)
        why = sens[sens["why_moves"].notna()] if "why_moves" in sens.columns else sens.iloc[:0]
    else:
        why = sens.iloc[:0]
    sens["_n"] = pd.to_numeric(sens["n_params"], errors="coerce")
    sens["_l"] = sens["lagrange_mult"].map(lambda v: math.inf if isinstance(v, str) else float(v))
    sens = sens.sort_values(["_n", "_l", "epsilon"])
    order = list(dict.fromkeys(zip(sens["n_params"], sens["lagrange_mult"], strict=True)))
    pivot = sens.pivot_table(index=["n_params", "lagrange_mult"], columns="epsilon", values="cmr", aggfunc="first",
                             dropna=False, sort=False)  # fmt: skip
    pivot = pivot.reindex(order)
    pivot.columns = [f"ε = {c:g}" for c in pivot.columns]
    pivot = pivot.reset_index().rename(columns={"n_params": "size", "lagrange_mult": "λ"})
    pivot["size"] = pivot["size"].map(fmt_size)
    pivot["λ"] = pivot["λ"].map(lambda v: v if isinstance(v, str) else f"{v:g}")
    notes = "".join(f"<li>{esc(fmt_size(r['n_params']))}, λ = {esc(r['lagrange_mult'])}, ε = {r['epsilon']:g}: "
                    f"{esc(r['why_moves'])}</li>" for _, r in why.iterrows())  # fmt: skip
    return table_html(pivot) + (f"<p>Rows where the CMR rises with λ:</p><ul>{notes}</ul>" if notes else
                                "<p>The CMR does not rise with λ in any row (a larger λ moves every T0 towards the "
                                "peak of ΔL_gen, so the feasible set can only shrink).</p>")  # fmt: skip


def cmr_sections(decision: CMRDecision, *, source: str | None = None, domain: str | None = None,
                 lead: bool = True, assumptions: bool = True) -> list[Section]:  # fmt: skip
    """The CMR report sections of one domain: answer, plots, CMR table, per-ratio table, fit quality (folded),
    sensitivity, data, held-out checks, assumptions."""
    import matplotlib.pyplot as plt

    from mixlaw.report import plots

    st = decision.settings
    inc = decision.increments
    dom = domain or str(st["domain_eval"]).removeprefix("loss_")
    out: list[Section] = []
    if lead:
        out.append(Section("Answer: largest domain share of the CPT mix", decision_sentences({dom: decision})
                           + f"<p>The CMR is the largest domain share whose general loss has turned (peaked) within "
                           f"the budget and stays within ε = {st['epsilon']:g} nats/token of its value before CPT; "
                           f"increments {esc(st['increments'])}.</p>"))  # fmt: skip
    figs = []
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.2))
    plots.plot_cmr_vs_budget(decision.sizes, ax=axes[0])
    if sum(s.cmr is not None for s in decision.sizes) >= 2:
        plots.plot_cmr_vs_size(decision, ax=axes[1])
    else:
        axes[1].axis("off")
        axes[1].text(0.5, 0.5, "CMR vs model size needs ≥ 2 sizes with a CMR", ha="center", va="center")
    fig.tight_layout()
    figs.append(figure_html(fig, alt="CMR vs budget and size"))
    for s in decision.sizes:  # one figure per size, titled with it
        fig, (a0, a1) = plt.subplots(1, 2, figsize=(12.0, 4.2))
        plots.plot_general_increments(s, inc, epsilon=st["epsilon"], ax=a0)
        plots.plot_ratio_law(s, epsilon=st["epsilon"], ax=a1)
        fig.tight_layout()
        figs.append(figure_html(fig, alt=f"trajectories {fmt_size(s.n_params)}", dpi=80))
    n = len(decision.sizes)
    trend = ""
    if len(decision.sizes) > 1:
        from mixlaw.decide.cmr.pipeline import trend_summary

        line = trend_summary(decision.sizes, decision.trend)
        trend = f"<p>{esc(line[0].upper() + line[1:])}.</p>"
    out.append(Section("Plots", f'<div class="figs">{"".join(figs)}</div>{trend}'))
    rows = [{"size": fmt_size(s.n_params), "budget (tokens)": fmt_tokens(s.budget_tokens), "CMR": _cmr_cell(s),
             "95% CI": _ci(s.ci), "from": s.cmr_source, "largest feasible tried": s.cmr_discrete,
             "CMR law at budget": s.cmr_law_at_budget, "tolerance boundary": s.tolerance_boundary,
             "model-free crossing": s.model_free_crossing,
             "bootstrap (ok/failed)": f"{s.n_bootstrap - s.n_bootstrap_failed}/{s.n_bootstrap_failed}"
             if s.n_bootstrap else "—", "status": s.status, "why weak": "; ".join(s.weak_reasons) or "—"}
            for s in decision.sizes]  # fmt: skip
    out.append(Section("Critical mixture ratio per size", table_html(rows) + _notes(decision)))
    rrows = [{"size": fmt_size(s.n_params), "ratio": r["ratio"], "T0 (tokens)": fmt_tokens(r["t0_tokens"]),
              "T0 from": r["t0_status"], "ΔL_gen @ budget (fit)": r["dloss_general_at_budget"],
              "ΔL_gen @ budget (obs)": r["observed_dloss_general_at_budget"],
              "ΔL_dom @ budget (fit)": r["dloss_domain_at_budget"], "feasible": r["feasible"], "reason": r["reason"]}
             for s in decision.sizes for r in s.ratios]  # fmt: skip
    out.append(Section("Per trained ratio", table_html(rrows)))
    qrows = [{"size": fmt_size(s.n_params), "ratio": r["ratio"], "ΔL_gen fit": r["fit_general"],
              "R² ΔL_gen": r["r2_general"], "ΔL_dom fit": r["fit_domain"], "R² ΔL_dom": r["r2_domain"]}
             for s in decision.sizes for r in s.ratios]  # fmt: skip
    lrows = [{"size": fmt_size(s.n_params), "law": f"{f.law} on {lbl} loss", "status": f.status, "R²": f.r2}
             for s in decision.sizes for lbl, f in (("general", s.ratio_law_general), ("domain", s.ratio_law_domain))
             if f is not None]  # fmt: skip
    ncol = min(3, n)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.2 * ncol, 3.6 * nrow), squeeze=False)
    for s, ax in zip(decision.sizes, axes.ravel(), strict=False):
        plots.plot_fit_residuals(s, inc, ax=ax)
    for ax in axes.ravel()[n:]:
        ax.axis("off")
    fig.tight_layout()
    rfigs = [figure_html(fig, alt="increment-fit residuals per size", dpi=70)]
    out.append(Section("Fit quality", f"<details><summary>curve fits (Eq. 6) per ratio: status and R²</summary>"
                       f"{table_html(qrows)}</details><details><summary>ratio laws at the budget</summary>"
                       f"{table_html(lrows)}</details><details><summary>residual plots</summary>"
                       f'<div class="figs">{"".join(rfigs)}</div></details>'))  # fmt: skip
    if not decision.sensitivity.empty:
        out.append(Section("Sensitivity of the CMR to λ and ε", "<p>Point estimates, or the bracket of trained "
                           "ratios where no law value agrees with the table; — marks no answer (see the status column "
                           "of the JSON output).</p>" + _sensitivity(decision)))  # fmt: skip
    summ = (inc.groupby(["size", "ratio"]).agg(runs=("run_id", "nunique"), evals=("tokens", "size"),
            max_tokens=("tokens", "max")).reset_index())  # fmt: skip
    summ["max_tokens"] = summ["max_tokens"].map(fmt_tokens)
    summ["size"] = summ["size"].map(fmt_size)
    out.append(Section("Data", f"<details><summary>{len(inc)} CPT evaluations from {inc['run_id'].nunique()} runs"
                       f"{' in ' + esc(source) if source else ''}</summary>{table_html(summ)}</details>"))  # fmt: skip
    if decision.validation:
        out.append(Section("Held-out checks (--validate)", _validation_html(decision.validation)))
    if assumptions:
        out.append(_assumptions(decision))
    return out


def _assumptions(decision: CMRDecision) -> Section:
    from mixlaw.decide.cmr.common import BOOT_LOST_MAX, R2_MIN

    st = decision.settings
    units = ", ".join(f"{fmt_size(s.n_params)}: T unit = {fmt_tokens(s.token_unit)} tokens" for s in decision.sizes)
    return Section("Assumptions", "<ul>"
        f"<li>Tolerance ε = {st['epsilon']:g} nats/token on the general loss at the budget.</li>"
        f"<li>λ = {esc(st['lagrange_mult'])}: T0 solves dΔL_dom/dT + λ·dΔL_gen/dT = 0 at its first + → − change "
        "after a rise (a peak; a dip at the origin is not one); λ = inf puts T0 at the peak of ΔL_gen. Every "
        "turning verdict is checked against the observed increments.</li>"
        "<li>Increment laws (Gu et al. 2024, arXiv:2407.17467, Eq. 6) fitted per ratio by exact profiled least "
        f"squares on T &gt; 0 (amplitudes in closed form, exponents searched); ΔL(0) pinned: {st['pin_zero']}.</li>"
        f"<li>Ratio law: {esc(st['ratio_law'])} on the losses at the budget (observed where an evaluation sits "
        "there); the model-free crossing interpolates the observations linearly.</li>"
        "<li>CMR law R = α4·T^s4 + β3 (Eq. 8) through (T0(R_j), R_j), clipped to [0, 1].</li>"
        f"<li>Weak: a fit the number rests on did not converge or has R² &lt; {R2_MIN:g}, more than "
        f"{BOOT_LOST_MAX:.0%} of the resamples gave no CMR, or a binding ratio law misses its points by &gt; 3 "
        "noise units.</li>"
        f"<li>Bootstrap: {st['bootstrap']} resamples of {esc(st['bootstrap_unit'])}; bias-corrected percentile "
        "(BC) intervals at level "
        f"{st['level']:g}; evaluations along one run are autocorrelated, so intervals are a lower bound on "
        "seed-to-seed spread.</li>"
        f"<li>Units: tokens everywhere; {esc(units)} (the paper's unit is 0.2B tokens).</li></ul>")  # fmt: skip


def cmr_domains_section(decisions: Mapping[str, CMRDecision]) -> Section:
    """Several domains side by side: the decision sentences, CMR per (domain, size), CMR vs size per domain."""
    import matplotlib.pyplot as plt

    from mixlaw.report import plots

    rows = [{"domain": d, "size": fmt_size(s.n_params), "budget (tokens)": fmt_tokens(s.budget_tokens),
             "CMR": _cmr_cell(s), "95% CI": _ci(s.ci), "tolerance boundary": s.tolerance_boundary,
             "model-free crossing": s.model_free_crossing, "status": s.status}
            for d, dec in decisions.items() for s in dec.sizes]  # fmt: skip
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    plots.plot_cmr_vs_size(dict(decisions), ax=ax)
    return Section("Domains side by side: the answer", decision_sentences(decisions)
                   + f'<div class="figs">{figure_html(fig, alt="CMR vs size per domain")}</div>' + table_html(rows)
                   + f"<p>{esc(similarity_finding(decisions))}</p>")  # fmt: skip


def _comparable(s: Any) -> tuple[float, float] | None:
    """The range the answer puts the CMR in: the point (both ends), the bracket, or None (no answer)."""
    if s.cmr is not None and s.reading.value != "lower_bound":
        return (float(s.cmr), float(s.cmr))
    lo, hi = s.bracket
    if lo is None and hi is None:
        return None
    return (0.0 if lo is None else float(lo), 1.0 if hi is None else float(hi))


def similarity_finding(decisions: Mapping[str, CMRDecision]) -> str:
    """The CMR paper's finding — a domain closer to the general data allows a higher CMR — evaluated on the data
    shown: per size, the domains ordered by how close they are to the general data (the base model's loss on the
    domain's validation set before CPT: lower = closer), and whether their answers are ordered the same way (a
    verdict only where the ranges do not overlap)."""
    from mixlaw.fmt import fmt_size

    by_size: dict[Any, list[tuple[float, str, tuple[float, float] | None]]] = {}
    for d, dec in decisions.items():
        for s in dec.sizes:
            by_size.setdefault(s.n_params, []).append((float(s.reference_domain), d, _comparable(s)))
    agree, contra, undecided = [], [], []
    for size, items in by_size.items():
        if len(items) < 2:
            continue
        items.sort(key=lambda t: t[0])
        near, far = items[0], items[-1]
        if near[2] is None or far[2] is None:
            undecided.append(fmt_size(size))
        elif near[2][0] > far[2][1]:
            agree.append(fmt_size(size))
        elif far[2][0] > near[2][1]:
            contra.append(f"{fmt_size(size)} ({far[1]} > {near[1]})")
        else:
            undecided.append(fmt_size(size))
    if not (agree or contra or undecided):
        return "The CMR paper's finding (a domain closer to the general data allows a higher CMR) needs ≥ 2 domains."
    names = sorted({it[1] for items in by_size.values() for it in items[:1]})
    parts = [f"closer domain by the base model's loss before CPT: {', '.join(names)}"]
    if agree:
        parts.append(f"agrees at {', '.join(agree)}")
    if contra:
        parts.append(f"contradicted at {', '.join(contra)}")
    if undecided:
        parts.append(f"undecided (answers overlap or missing) at {', '.join(undecided)}")
    return "The CMR paper's finding, a domain closer to the general data allows a higher CMR, on these runs: " + (
        "; ".join(parts) + ".")


def cmr_report(decision: CMRDecision | Mapping[str, CMRDecision], *, title: str = "Critical mixture ratio",
               source: str | None = None, extra_sections: Sequence[Section] = ()) -> str:  # fmt: skip
    """The whole self-contained CMR report page (extra sections, e.g. from the CPT report, go at the end).

    ``decision`` may be a mapping ``{domain: CMRDecision}``: the page then opens with every domain's decision and
    the comparison, followed by each domain's plots and tables (the assumptions once, at the end)."""
    if isinstance(decision, Mapping):
        sections = [cmr_domains_section(decision)]
        for d, secs in zip(decision, _domain_sections(list(decision.items()), source), strict=True):
            sections += [Section(f"[{d}] {sec.title}", sec.html) for sec in secs]
        sections.append(_assumptions(next(iter(decision.values()))))
    else:
        sections = cmr_sections(decision, source=source)
    return render_report(title, [*sections, *extra_sections], subtitle=source)


def _one_domain_sections(args: tuple[str, CMRDecision, str | None]) -> list[Section]:
    d, dec, source = args
    return cmr_sections(dec, source=source, domain=d, lead=False, assumptions=False)


def _domain_sections(items: list[tuple[str, CMRDecision]], source: str | None) -> list[list[Section]]:
    """Each domain's sections; with several domains, drawn in two forked worker processes (the figures are the
    report's cost, and they are independent)."""
    import multiprocessing as mp
    import os
    import warnings

    jobs = [(d, dec, source) for d, dec in items]
    if len(jobs) < 2 or (os.cpu_count() or 1) < 2 or "fork" not in mp.get_all_start_methods():
        return [_one_domain_sections(j) for j in jobs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python ≥ 3.12: fork() with idle library threads
        pool = mp.get_context("fork").Pool(min(2, len(jobs)))
    try:
        return pool.map(_one_domain_sections, jobs)
    finally:
        pool.close()
        pool.join()
