"""Any decision, rendered: the terminal text and the HTML report section of a
:class:`~mixlaw.decide.contract.DecisionResult`.

Both read only the contract (status, reasons, answers with their intervals, fits, data basis), so a decision
registered by a third party renders like a built-in one. Every sentence comes from a reason code's template.
"""

from __future__ import annotations

import math
from pathlib import Path

from mixlaw.decide.contract import DecisionResult, FitHealth, Status
from mixlaw.report.html import Section, esc, render_report

__all__ = ["decision_report", "decision_section", "decision_text"]

_STATUS_WORDS = {
    Status.OK: "ok — the data support this answer",
    Status.WEAK: "weak — usable with the caveats below",
    Status.NO_ANSWER: "no answer — the data do not determine one",
}
_STATUS_CLASS = {Status.OK: "ok", Status.WEAK: "warn", Status.NO_ANSWER: "bad"}


def _num(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "—"
    return f"{v:.4g}"


def _interval(a: object) -> str:
    iv = getattr(a, "interval", None)
    if iv is None:
        return ""
    unusable = f", {iv.n_unusable}/{iv.n_resamples} resamples unusable" if iv.n_resamples else ""
    return f"[{_num(iv.lo)}, {_num(iv.hi)}] ({iv.level:.0%}{unusable})"


def decision_text(result: DecisionResult) -> str:
    """The result as a few lines of plain text (what ``mixlaw decide`` prints)."""
    lines = [f"{result.decision}: {_STATUS_WORDS[result.status]}"]
    width = max((len(a.name) for a in result.answers), default=0)
    for a in result.answers:
        unit = f" {a.unit}" if a.unit else ""
        iv = _interval(a)
        lines.append(f"  {a.name:<{width}}  {_num(a.value)}{unit}{'  ' + iv if iv else ''}")
    for r in result.reasons:
        lines.append(f"  - {r.text}")
    for f in result.fits:
        ident = f"; {_pinned(f)}" if _pinned(f) else ""
        bounds = f"; at bounds: {', '.join(f.at_bounds)}" if f.at_bounds else ""
        lines.append(f"  fit {f.name}: {f.law}, {f.status}{ident}{bounds}")
    if result.data is not None:
        d = result.data
        lines.append(f"  data: {d.n_runs} runs, {d.n_rows} rows (fingerprint {d.fingerprint})")
    return "\n".join(lines)


def _pinned(f: FitHealth) -> str:
    """What the data pin down: ``identifiable``, ``weak (running off: R_D)``, ``NOT identifiable`` or ``""``."""
    words = {"ok": "identifiable", "weak": "weak", "unidentifiable": "NOT identifiable"}
    if f.identifiability:
        ident = words.get(f.identifiability, f.identifiability)
    else:
        ident = "" if f.identifiable is None else words["ok" if f.identifiable else "unidentifiable"]
    loose = f" (running off: {', '.join(f.running_off)})" if f.running_off else ""
    unpinned = ident in ("weak", "NOT identifiable") or bool(f.running_off)
    aside = " (does not move the answer)" if unpinned and not f.moves_answer else ""
    return f"{ident}{loose}{aside}"


def decision_section(result: DecisionResult) -> Section:
    """The HTML section of a result: its status and reasons first, then the answers with intervals and the fits."""
    cls = _STATUS_CLASS[result.status]
    parts = [f'<p class="{cls}">{esc(_STATUS_WORDS[result.status])}</p>']
    if result.reasons:
        parts.append("<ul>" + "".join(f"<li>{esc(r.text)}</li>" for r in result.reasons) + "</ul>")
    rows = "".join(
        f"<tr><td>{esc(a.name)}</td><td class=num>{esc(_num(a.value))}</td><td>{esc(a.unit)}</td>"
        f"<td>{esc(_interval(a))}</td></tr>"
        for a in result.answers
    )
    parts.append(f"<table><tr><th>answer</th><th>value</th><th>unit</th><th>interval</th></tr>{rows}</table>")
    if result.fits:
        frows = "".join(
            f"<tr><td>{esc(f.name)}</td><td>{esc(f.law)}</td><td>{esc(f.status)}</td>"
            f"<td>{esc(_pinned(f) or '—')}</td>"
            f"<td>{esc(', '.join(f.at_bounds))}</td></tr>"
            for f in result.fits
        )
        parts.append("<table><tr><th>fit</th><th>law</th><th>status</th><th>identifiability</th><th>at bounds</th></tr>"
                     f"{frows}</table>")  # fmt: skip
    if result.data is not None:
        d = result.data
        parts.append(f"<p><small>{d.n_runs} runs, {d.n_rows} rows; data fingerprint {esc(d.fingerprint)}</small></p>")
    return Section(f"Decision: {result.decision}", "".join(parts))


def decision_report(result: DecisionResult, path: str | Path) -> Path:
    """Write a self-contained HTML page of ``result`` (atomically: a temporary file renamed into place)."""
    from mixlaw.safeio import atomic_write_text

    p = Path(path)
    atomic_write_text(p, render_report(f"mixlaw — {result.decision}", [decision_section(result)]))
    return p
