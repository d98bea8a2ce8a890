"""The mixture report (``mixlaw mix optimize … --report mix.html``): the decision first, in one sentence, then the
optimal mixture with its bootstrap intervals, predicted vs observed on held-out runs per law, the optimum against
model size with its band, and the loss-to-benchmark fits; self-contained (figures embedded, nothing fetched)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mixlaw.fmt import fmt_size
from mixlaw.report.html import Section, esc, figure_html, render_report, table_html

__all__ = ["decision_sentence", "mix_report", "write_mix_report"]


def decision_sentence(out: Mapping[str, Any]) -> str:
    """The optimum in words: the mixture (largest shares first), the goal, the size, and how sure it is."""
    w = sorted(out["weights"].items(), key=lambda kv: -kv[1])
    band = (out.get("bootstrap") or {}).get("weights", {})
    parts = []
    for d, v in w:
        txt = f"{d} {100 * v:.1f}%"
        if d in band:
            txt += f" [{100 * band[d][0]:.1f}–{100 * band[d][1]:.1f}%]"
        parts.append(txt)
    size = out.get("target_size")
    at = f" at {fmt_size(size)} parameters" if size else ""
    if out.get("benchmark_weights"):
        goal = f"the {out.get('objective_preset') or 'weighted'} benchmark score (predicted {out['score']:.4g})"
    else:
        goal = f"the weighted validation loss (predicted {out['objective']:.4g})"
    boot = out.get("bootstrap") or {}
    sure = f" Intervals: {100 * boot['level']:.0f}% bootstrap, {boot['n']} resamples." if boot.get("n") else ""
    act = ", ".join(out.get("active_constraints") or []) or "none"
    verdict = " ".join(f"Against {v['against']}: {v['text']}." for v in out.get("verdicts") or [])
    far = next(iter((out.get("extrapolation") or {}).values()), "")
    far = f" The target extrapolates {far}." if far else ""
    health = [f"{t}: camel k = {c['k']} ({c['status']}{', C at 0' if c['health']['c_at_zero'] else ''})"
              for t, c in (out.get("camel_k") or {}).items()]  # fmt: skip
    fits = f" Fit health: {'; '.join(health)}." if health else ""
    return (
        f"Train on {', '.join(parts)}{at}: this mixture optimises {goal}. {verdict}{far}{fits} "
        f"Active constraints: {act}.{sure}"
    )


def _bar(out: Mapping[str, Any]) -> str:
    import matplotlib.pyplot as plt

    doms = list(out["weights"])
    w = np.array([out["weights"][d] for d in doms])
    band = (out.get("bootstrap") or {}).get("weights", {})
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.bar(doms, w, color="#3b6ea5")
    if band:
        lo = np.array([band[d][0] for d in doms])
        hi = np.array([band[d][1] for d in doms])
        ax.errorbar(doms, w, yerr=[np.maximum(w - lo, 0), np.maximum(hi - w, 0)], fmt="none", ecolor="k", capsize=4)
    ax.set_ylabel("share of training tokens")
    ax.set_title("optimal mixture" + (f" at {fmt_size(out['target_size'])}" if out.get("target_size") else ""))
    fig.tight_layout()
    return figure_html(fig, alt="optimal mixture")


def _held_out(held: Mapping[str, Any]) -> str:
    import matplotlib.pyplot as plt

    figs, rows = [], []
    for t in held["targets"]:
        fig, ax = plt.subplots(figsize=(5.2, 4.2))
        lims = []
        for m in t["models"]:
            p = [x for x in m["predictions"] if np.isfinite(x["predicted"])]
            if not p:
                continue
            obs = np.array([x["observed"] for x in p])
            pred = np.array([x["predicted"] for x in p])
            lo = np.array([x["lo"] for x in p])
            hi = np.array([x["hi"] for x in p])
            err = None
            if np.isfinite(lo).all() and np.isfinite(hi).all():
                err = [np.maximum(pred - lo, 0), np.maximum(hi - pred, 0)]
            ax.errorbar(obs, pred, yerr=err, fmt="o", ms=3, capsize=2, label=m["model"], alpha=0.8)
            lims += [obs.min(), obs.max()]
            rows.append({"target": t["target"], "model": m["model"], "test runs": m["n_test"], "MRE %": 100 * m["mre"],
                         "Spearman": m["spearman"], "in 95% PI": m["coverage"]})  # fmt: skip
        if lims:
            ax.plot([min(lims), max(lims)], [min(lims), max(lims)], "k--", lw=0.8)
        ax.set_xlabel(f"observed {t['target']}")
        ax.set_ylabel("predicted (95% prediction interval)")
        ax.set_title(f"held-out runs ({esc(held['holdout'])})")
        ax.legend(fontsize=8)
        fig.tight_layout()
        figs.append(figure_html(fig, alt=f"predicted vs observed {t['target']}"))
    note = f"<p>{esc(held['method'])}</p>" if held.get("method") else ""
    return f'<div class="figs">{"".join(figs)}</div>' + table_html(rows) + note


def _vs_size(out: Mapping[str, Any]) -> str:
    import matplotlib.pyplot as plt

    curve = out.get("vs_size") or []
    if not curve:
        return "<p>Not computed: give <code>--sizes 1e9,7e9,…</code> (a size-aware law).</p>"
    sizes = np.array([r["size"] for r in curve])
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for d in out["weights"]:
        w = np.array([r["weights"][d] for r in curve])
        (line,) = ax.plot(sizes, w, "o-", label=d)
        if all("band" in r for r in curve):
            lo = np.array([r["band"][d][0] for r in curve])
            hi = np.array([r["band"][d][1] for r in curve])
            ax.fill_between(sizes, lo, hi, color=line.get_color(), alpha=0.15)
    ax.set_xscale("log")
    ax.set_xlabel("target model size (parameters)")
    ax.set_ylabel("optimal share")
    ax.set_title("optimal mixture vs model size")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    rows = [{"size": fmt_size(r["size"]), **{d: v for d, v in r["weights"].items()}, "objective": r["objective"]}
            for r in curve]  # fmt: skip
    return figure_html(fig, alt="optimum vs size") + table_html(rows)


def _benchmarks(out: Mapping[str, Any]) -> str:
    fits = {b: f for b, f in out["fits"].items() if f["law"] == "benchmark_logistic"}
    if not fits:
        return "<p>The objective is a weighted sum of validation losses: no benchmark law was fitted.</p>"
    rows = []
    for b, f in fits.items():
        p = f["params"]
        k = ", ".join(f"{v:.3g}" for v in np.atleast_1d(p["k"]))
        rows.append({"benchmark": b, "weight": out["benchmark_weights"].get(b), "runs": f["n_rows"], "C": p["C"],
                     "A": p["A"], "k": k, "B": p["B"], "R²": f["r2"], "status": f["status"],
                     "predicted at optimum": out["predicted_accuracies"].get(b)})  # fmt: skip
    return (
        "<p>Acc_b = C_b + A_b / (1 + exp(k_bᵀ L + B_b)) over the validation losses (laws.md §12.3).</p>"
        + table_html(rows)
    )


def mix_report(out: Mapping[str, Any], held: Mapping[str, Any] | None = None, *, source: str | None = None) -> str:
    """The whole page from :func:`mixlaw.api.mixture.optimize`'s result and, optionally, a comparison."""
    boot = out.get("bootstrap") or {}
    wb = boot.get("weights") or {}
    wrows = [{"domain": d, "weight": v, "95% low": wb.get(d, [None])[0], "95% high": wb.get(d, [None, None])[1]}
             for d, v in out["weights"].items()]  # fmt: skip
    preds = {**out["predicted_losses"], **out["predicted_accuracies"]}
    at = boot.get("predicted_at_optimum") or {}
    prow = [{"quantity": k, "predicted": v, "95% low": at.get(k, [None])[0], "95% high": at.get(k, [None, None])[1]}
            for k, v in preds.items()]  # fmt: skip
    k = out["kkt"]
    kkt = (f"<p>KKT {'satisfied' if k['ok'] else '<b>not satisfied</b>'} (stationarity {k['stationarity']:.2g}, "
           f"min multiplier {k['min_multiplier']:.2g}); {out['n_distinct']} distinct optimum(s) from "
           f"{out['n_starts']} starts.</p>")  # fmt: skip
    sections = [
        Section("Decision", f"<p><b>{esc(decision_sentence(out))}</b></p>"),
        Section("Optimal mixture", _bar(out) + table_html(wrows) + table_html(prow) + kkt),
    ]
    choice = out.get("law_choice")
    if choice:  # --law auto: the candidates, right under the decision
        crows = [
            {
                "law": c["law"] + (f" (k = {c['k']})" if c.get("k") else ""),
                "held-out MRE": c["heldout_mre"],
                "bias": c["heldout_bias"],
                "healthy": ("yes" if c["healthy"] else "no") if c.get("checked", True) else "not checked (cannot win)",
                "problems": "; ".join(c["problems"]),
            }
            for c in choice["candidates"]
        ]
        sections.insert(1, Section("Law choice", f"<p>{esc(choice['text'])}</p>" + table_html(crows)))
    if held is not None:
        sections.append(Section("Predicted vs observed on held-out runs", _held_out(held)))
    sections.append(Section("Optimal mixture vs model size", _vs_size(out)))
    sections.append(Section("Loss-to-benchmark fits", _benchmarks(out)))
    fit_rows = [{"target": t, "law": f["law"], "rows": f["n_rows"], "status": f["status"], "R²": f["r2"]}
                for t, f in out["fits"].items()]  # fmt: skip
    sections.append(Section("Fits", table_html(fit_rows)))
    return render_report(f"Mixture decision — {out['law']}", sections, subtitle=source)


def write_mix_report(
    path: str | Path, out: Mapping[str, Any], held: Mapping[str, Any] | None = None, *, source: str | None = None
) -> Path:
    """Write :func:`mix_report` to ``path`` and return it."""
    from mixlaw.safeio import atomic_write_text

    p = Path(path)
    atomic_write_text(p, mix_report(out, held, source=source))  # temp file + rename: never half a page
    return p
