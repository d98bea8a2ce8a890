"""``mixlaw cpt``: continual pre-training predictions and decisions from fitted CPT laws.

Mount in the main CLI with ``app.add_typer(cpt.app, name="cpt")`` (:data:`mixlaw.cli._group.VERBS`). Verbs:

* ``predict FIT.json --plan PLAN.toml [--weights W_PT,W_CPT] [--json]`` — final losses (and the trajectory
  with ``--json``) of every fitted eval set for a plan;
* ``optimize FIT.json --over replay|peak_lr|loss_potential --weights W_PT,W_CPT [--plan PLAN.toml]
  [--json]`` — the best value of one schedule-family hyper-parameter;
* ``critical FIT.json [--plan PLAN.toml] [--weights W_PT,W_CPT] [--json]`` — critical point and turning
  length;
* ``bundle PT_FIT.json CPT_FIT.json --out BUNDLE.json`` — the D_pt + D_cpt bundle the verbs above read, from two
  ``mixlaw fit --law cpt ... --out`` results.

``FIT.json`` is a CPT fit bundle (:meth:`mixlaw.decide.cpt.CptFits.to_dict`) or a single fit. Without
``--plan`` the paper's hyper-parameter-study setting is used: PT = WSD 40k steps at 2e-4 with an 8k-step
decay, CPT = cosine over 10k steps from 2e-4; ``critical`` then says so in its first line (JSON: ``plan.assumed``).
Intervals are 95 % by default. ``--base-tokens N --tokens-per-step B [--base-lr LR]`` replaces the plan's PT
schedule by a constant LR (default the CPT peak) for ``N / B`` steps, for a base known only by its token count
(:class:`mixlaw.decide.cpt.BaseTokens`). User errors print one line on stderr and exit 1.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from mixlaw.cli._common import MaxMemoryOpt, check_file, verb
from mixlaw.errors import ExtrapolationWarning, MixlawError

app = typer.Typer(help="Continual pre-training: predict a plan, optimise it, critical point.", no_args_is_help=True)

DEFAULT_PT = "wsd:peak=2e-4,steps=40000,decay=8000"
DEFAULT_CPT = "cosine:peak=2e-4,steps=10000"


def _weights(text: str | None) -> tuple[float, float] | None:
    """``pt=0.3,cpt=0.7`` (the NAME=VALUE syntax of every verb) or the older ``0.3,0.7``."""
    if text is None:
        return None
    if "=" in text:
        from mixlaw.cli._common import parse_weights

        w = parse_weights([text])
        if set(w) != {"pt", "cpt"}:
            raise MixlawError(f"--weights must name pt and cpt (pt=W_PT,cpt=W_CPT), got '{text}'")
        return w["pt"], w["cpt"]
    try:
        a, b = (float(v) for v in text.split(","))
    except ValueError:
        raise MixlawError(f"--weights must be pt=W_PT,cpt=W_CPT (or two numbers W_PT,W_CPT), got '{text}'") from None
    return a, b


def _plan(path: Path | None, max_memory: str = "4G", base_tokens: float | None = None) -> Any:
    from mixlaw.api.cpt import CptPlan, Schedule, load_plan
    from mixlaw.limits import MemoryLimit, parse_size

    if path is None:  # the paper's setting; its PT schedule gives way to --base-tokens
        pt = None if base_tokens is not None else Schedule.parse(DEFAULT_PT)
        return CptPlan(pt=pt, cpt=Schedule.parse(DEFAULT_CPT))
    return load_plan(path, limit=MemoryLimit(parse_size(max_memory)))


def _write_report(path: Path, title: str, lines: list[str], fits: Any, plan: Any,
                  weights: tuple[float, float] | None, over: tuple[str, ...] = ()) -> None:  # fmt: skip
    """``--report``: the verb's answer first (the same lines it printed), then the CPT analysis of the plan (fitted
    parameters with intervals, trajectories, critical point, turning length), written atomically."""
    from mixlaw.report.cpt_plots import cpt_report_section
    from mixlaw.report.html import Section, esc, render_report

    answer = Section("Answer", "<ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>")
    html = render_report(title, [answer, cpt_report_section(fits, plan, weights=weights, over=list(over))])
    from mixlaw.safeio import atomic_write_text

    atomic_write_text(path, html)  # temp file, fsync, rename: a failure leaves the previous page whole
    typer.echo(f"report written to {path}")


def _check_report(report: Path | None) -> None:
    """``--report`` checked before any work (a directory or a missing parent is one line, not a late failure)."""
    if report is not None:
        from mixlaw.safeio import check_output_path

        check_output_path(report, "--report")


def _identifiability_notes(fits: Any) -> list[str]:
    """One line per fit of the bundle whose engine record says the data do not pin down its parameters."""
    out = []
    for k, f in fits.fits.items():
        rec = f.record or {}
        ident = rec.get("identifiability") or {}
        st = ident.get("status") or rec.get("status")
        if st in ("unidentifiable", "weak"):
            why = ident.get("reason") or "see the fit's identifiability"
            out.append(f"note: the {k} fit is {st} ({why}): answers that rest on it are not determined by the data")
    return out


_REPORT = typer.Option("--report", help="also write an HTML report (the answer, then the CPT analysis of the plan)")
_BASE_TOKENS = typer.Option(
    "--base-tokens", help="the base model's PT token count when its schedule is unknown: its PT history is a constant "
    "LR (--base-lr, default the CPT peak) for BASE_TOKENS / --tokens-per-step steps, in place of the plan's [pt]",
)  # fmt: skip
_TOKENS_PER_STEP = typer.Option("--tokens-per-step", help="tokens per optimizer step of the base's PT (--base-tokens)")
_BASE_LR = typer.Option("--base-lr", help="constant LR of the base's PT (--base-tokens; default the CPT peak LR)")


def _with_base(
    plan: Any, fits: Any, tokens: float | None, per_step: float | None, lr: float | None
) -> tuple[Any, str]:  # fmt: skip
    """The plan with the base's PT history from ``--base-tokens`` (:class:`mixlaw.decide.cpt.BaseTokens`), and what
    the ``base:`` line says (the fits' own assumption without it)."""
    if tokens is None:
        if per_step is not None or lr is not None:
            raise MixlawError("--tokens-per-step and --base-lr go with --base-tokens")
        return plan, fits.base_assumption()
    if per_step is None:
        raise MixlawError("--base-tokens needs --tokens-per-step (tokens per optimizer step of the base's PT)")
    if any(f.law.options.get("base") == "blackbox" for f in fits.fits.values()):
        raise MixlawError(
            "--base-tokens: the fits treat the base as a black box (S1_pt is a fitted parameter), so a PT token count "
            "has nothing to set; refit without --law-option base=blackbox to assume one"
        )
    new, base = plan.with_base_tokens(tokens, per_step, lr)
    return new, f"{base.describe()} (fits: {fits.base_assumption()})"


def _num(v: float | None) -> float | None:
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return None
    return float(v)


def _emit_warnings(caught: list[warnings.WarningMessage], as_json: bool) -> list[str]:
    msgs = list(dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, ExtrapolationWarning)))
    if not as_json:
        for m in msgs:
            typer.echo(f"warning: {m}", err=True)
    return msgs


@app.command()
@verb
def predict(
    fit: Annotated[Path, typer.Argument(help="FIT.json: a CPT fit bundle or one fit")],
    plan: Annotated[Path, typer.Option("--plan", help="PLAN.toml (see mixlaw.decide.cpt.load_plan)")],
    weights: Annotated[str | None, typer.Option(help="pt=W_PT,cpt=W_CPT for the composite loss")] = None,
    level: Annotated[float, typer.Option(help="interval level of the bootstrap bands")] = 0.95,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output with the trajectory")] = False,
    max_memory: MaxMemoryOpt = "4G",
    report: Annotated[Path | None, _REPORT] = None,
    base_tokens: Annotated[float | None, _BASE_TOKENS] = None,
    tokens_per_step: Annotated[float | None, _TOKENS_PER_STEP] = None,
    base_lr: Annotated[float | None, _BASE_LR] = None,
) -> None:
    """Predict every fitted eval set along a PT + CPT plan."""
    check_file(fit, "fit JSON")
    from mixlaw import limits
    from mixlaw.api.cpt import load_fits, predict_plan

    limits.level(level)
    limits.parse_size(max_memory)
    _check_report(report)
    fits = load_fits(fit)
    p, base = _with_base(_plan(plan, max_memory, base_tokens), fits, base_tokens, tokens_per_step, base_lr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExtrapolationWarning)
        pred = predict_plan(fits, p, weights=_weights(weights), level=level)
    msgs = _emit_warnings(caught, as_json)
    sets = [c[5:] for c in pred.columns if c.startswith("pred_")]
    last = pred.iloc[-1]
    if as_json:
        out = {
            "final": {s: _num(float(last[f"pred_{s}"])) for s in sets},
            "interval": {
                s: [_num(float(last[f"lo_{s}"])), _num(float(last[f"hi_{s}"]))] for s in sets if f"lo_{s}" in pred
            },
            "n_boot": dict(pred.attrs.get("n_boot", {})),
            "trajectory": json.loads(pred.to_json(orient="records")),
            "warnings": msgs,
            "base": base,
        }
        typer.echo(json.dumps(out))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Predicted losses at the end of the plan (step {int(last['step'])})")
    t.add_column("eval set")
    t.add_column("final loss", justify="right")
    t.add_column(f"{level:.0%} interval", justify="right")
    t.add_column("resamples", justify="right")
    n_boot = pred.attrs.get("n_boot", {})
    for s in sets:
        iv = f"{last[f'lo_{s}']:.4f} – {last[f'hi_{s}']:.4f}" if f"lo_{s}" in pred else "—"
        t.add_row(s, f"{last[f'pred_{s}']:.4f}", iv, str(n_boot.get(s, 0)))
    Console().print(t)
    typer.echo(f"base: {base}")
    if report is not None:
        ivs = {s: f", {level:.0%} interval {last[f'lo_{s}']:.4f} – {last[f'hi_{s}']:.4f}" for s in sets
               if f"lo_{s}" in pred}  # fmt: skip
        lines = [f"{s}: final loss {last[f'pred_{s}']:.4f}{ivs.get(s, '')} at step {int(last['step'])}" for s in sets]
        lines.append(f"base: {base}")
        _write_report(report, "CPT prediction", lines + [f"warning: {m}" for m in msgs], fits, p, _weights(weights))


@app.command()
@verb
def optimize(
    fit: Annotated[Path, typer.Argument(help="FIT.json: a CPT fit bundle with D_pt and D_cpt fits")],
    over: Annotated[str, typer.Option(help="replay | peak_lr | loss_potential")],
    weights: Annotated[str, typer.Option(help="pt=W_PT,cpt=W_CPT objective weights (sum to 1)")],
    plan: Annotated[Path | None, typer.Option("--plan", help="base PLAN.toml (default: the paper's setting)")] = None,
    grid: Annotated[str | None, typer.Option(help="comma-separated grid of values to try")] = None,
    level: Annotated[float, typer.Option("--level", help="Interval level, e.g. 0.95.")] = 0.95,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    max_memory: MaxMemoryOpt = "4G",
    report: Annotated[Path | None, _REPORT] = None,
    base_tokens: Annotated[float | None, _BASE_TOKENS] = None,
    tokens_per_step: Annotated[float | None, _TOKENS_PER_STEP] = None,
    base_lr: Annotated[float | None, _BASE_LR] = None,
) -> None:
    """Best replay ratio, CPT peak LR or loss potential for the weighted objective w_pt·L_pt + w_cpt·L_cpt."""
    check_file(fit, "fit JSON")
    from mixlaw import limits
    from mixlaw.api.cpt import load_fits
    from mixlaw.api.cpt import optimize as run_optimize

    limits.level(level)
    limits.parse_size(max_memory)
    _check_report(report)
    if over not in ("replay", "peak_lr", "loss_potential"):
        raise MixlawError(f"--over must be replay, peak_lr or loss_potential, got '{over}'")
    g = None
    if grid is not None:
        try:
            g = [float(v) for v in grid.split(",") if v.strip()]
        except ValueError:
            raise MixlawError(f"--grid must be comma-separated numbers, got '{grid}'") from None
    fits = load_fits(fit)
    w = _weights(weights)
    if w is None:
        raise MixlawError("--weights W_PT,W_CPT is required")
    p, base_said = _with_base(_plan(plan, max_memory, base_tokens), fits, base_tokens, tokens_per_step, base_lr)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExtrapolationWarning)
        res = run_optimize(fits, p, over, w, grid=g, level=level)  # type: ignore[arg-type]
    msgs = _emit_warnings(caught, as_json)
    if as_json:
        d = res.to_dict()
        d["warnings"] = msgs
        d["base"] = base_said
        typer.echo(json.dumps(d))
        return
    pct = f"{100 * res.level:g}%"
    iv = "—" if res.interval is None else f"[{res.interval[0]:.4g}, {res.interval[1]:.4g}]"
    oiv = ""
    if res.objective_interval is not None:
        oiv = f" {pct} [{res.objective_interval[0]:.4f}, {res.objective_interval[1]:.4f}]"
    edge = " (at the edge of the grid: widen it)" if res.at_edge else ""
    boot = f" from {res.n_boot} paired resamples" if res.n_boot else " (no bootstrap draws in the fits)"
    line = (f"best {over} = {res.best:.4g} {pct} {iv}{edge}; objective {res.best_objective:.4f}{oiv} "
            f"(w_pt={res.weights[0]:g}, w_cpt={res.weights[1]:g}); bootstrap intervals{boot}")  # fmt: skip
    base = f"base: {base_said}"
    typer.echo(line)
    typer.echo(base)
    if report is not None:
        _write_report(report, "CPT optimisation", [line, base] + [f"warning: {m}" for m in msgs], fits, p, w,
                      over=(over,))  # fmt: skip


@app.command()
@verb
def critical(
    fit: Annotated[Path, typer.Argument(help="FIT.json: a CPT fit bundle or one cpt fit")],
    plan: Annotated[Path | None, typer.Option("--plan", help="PLAN.toml (default: the paper's setting)")] = None,
    weights: Annotated[str | None, typer.Option(help="pt=W_PT,cpt=W_CPT: also analyse the composite loss")] = None,
    horizon: Annotated[int | None, typer.Option(help="turning-length horizon in CPT steps")] = None,
    level: Annotated[float, typer.Option("--level", help="Interval level, e.g. 0.95.")] = 0.95,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    max_memory: MaxMemoryOpt = "4G",
    report: Annotated[Path | None, _REPORT] = None,
    base_tokens: Annotated[float | None, _BASE_TOKENS] = None,
    tokens_per_step: Annotated[float | None, _TOKENS_PER_STEP] = None,
    base_lr: Annotated[float | None, _BASE_LR] = None,
) -> None:
    """Critical point (PT step whose CPT curve converges back to its start) and turning length, each with its
    bootstrap interval over the fits' draws."""
    check_file(fit, "fit JSON")
    from mixlaw import limits
    from mixlaw.api.cpt import (
        critical_point,
        critical_point_interval,
        critical_s1_constant,
        load_fits,
        turning_length,
        turning_length_interval,
    )

    limits.level(level)
    if horizon is not None:
        limits.count(horizon, "--horizon")
    limits.parse_size(max_memory)
    _check_report(report)

    def with_iv(d: dict[str, Any], iv: Any) -> dict[str, Any]:
        return {**d, "interval": None if iv is None else iv.to_dict()}

    fits = load_fits(fit)
    p, base_said = _with_base(_plan(plan, max_memory, base_tokens), fits, base_tokens, tokens_per_step, base_lr)
    w = _weights(weights)
    assumed_pt = None if plan is not None else DEFAULT_PT if base_tokens is None else p.pt.spec()
    out: dict[str, Any] = {"plan": {"assumed": plan is None, "pt": assumed_pt,
                                    "cpt": DEFAULT_CPT if plan is None else None}}  # fmt: skip
    said: list[str] = []

    def say(line: str) -> None:
        typer.echo(line)
        said.append(line)

    if plan is None and not as_json:  # the answer depends on the plan: say which one first, never silently
        pt_said = DEFAULT_PT if base_tokens is None else f"{assumed_pt} (from --base-tokens)"
        say(f"assumed plan (no --plan given): PT {pt_said}, CPT {DEFAULT_CPT} — the CPT paper's "
                   "hyper-parameter study; give --plan PLAN.toml for your own schedules")  # fmt: skip
    try:
        out["s1_pt_star_constant_lr"] = critical_s1_constant(fits.fits[fits.pt_set].params)
    except (MixlawError, KeyError) as exc:
        out["s1_pt_star_constant_lr"] = None
        out["s1_pt_star_constant_lr_reason"] = str(exc)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ExtrapolationWarning)
        cp = critical_point(fits, p)
        cp_iv = critical_point_interval(fits, p, level=level) if p.pt is not None else None
        out["critical_point"] = with_iv({"pt_step": _num(cp.step), "s1_pt": _num(cp.s1_pt), "reason": cp.reason},
                                        cp_iv)  # fmt: skip
        out["turning_length"] = with_iv(
            turning_length(fits, p, horizon=horizon).to_dict(),
            turning_length_interval(fits, p, horizon=horizon, level=level),
        )
        if w is not None:
            cpc = critical_point(fits, p, weights=w)
            out["composite"] = {
                "weights": list(w),
                "critical_point": with_iv(
                    {"pt_step": _num(cpc.step), "s1_pt": _num(cpc.s1_pt), "reason": cpc.reason},
                    critical_point_interval(fits, p, weights=w, level=level) if p.pt is not None else None,
                ),
                "turning_length": with_iv(
                    turning_length(fits, p, weights=w, horizon=horizon).to_dict(),
                    turning_length_interval(fits, p, weights=w, horizon=horizon, level=level),
                ),
            }
    out["warnings"] = _emit_warnings(caught, as_json)
    out["identifiability"] = _identifiability_notes(fits)
    out["base"] = base_said
    if as_json:
        typer.echo(json.dumps(out))
        return
    s1 = out["s1_pt_star_constant_lr"]
    say(f"base: {out['base']}")
    for note in _identifiability_notes(fits):  # repeated where it matters: the answer rests on these parameters
        say(note)
    if s1 is not None:
        say(f"constant-LR critical forward area S1_pt* = (A/B)^(1/alpha) = {s1:.4f}")
    else:
        say(f"constant-LR critical point: {out.get('s1_pt_star_constant_lr_reason')}")
    blocks = [("D_pt", out)] + ([("composite", out["composite"])] if "composite" in out else [])
    pct = f"{100 * level:g}%"

    def iv_text(iv: dict[str, Any] | None, inf: str) -> str:
        if iv is None:
            return " (no bootstrap draws in the fits: no interval)"
        ends = [inf if v == "inf" else f"{v:.0f}" for v in (iv["lo"], iv["hi"])]
        cens = f", {iv['n_censored']} without one in range" if iv["n_censored"] else ""
        return f" {pct} [{ends[0]}, {ends[1]}] over {iv['n_draws']} draws{cens}"

    for label, b in blocks:
        c, t = b["critical_point"], b["turning_length"]
        where = "—" if c["pt_step"] is None else f"PT step {c['pt_step']:.0f} (S1_pt {c['s1_pt']:.4f})"
        turn = "∞" if t["infinite"] else f"{t['steps']:.0f} CPT steps"
        cpi, tli = iv_text(c["interval"], "beyond the PT schedule"), iv_text(t["interval"], "∞")
        say(f"[{label}] critical point: {where}{cpi} — {c['reason']}")
        say(f"[{label}] turning length: {turn}{tli} — {t['reason']}; asymptotic class {t['asymptotic_class']}")
    if report is not None:
        _write_report(report, "CPT critical point", said + [f"warning: {m}" for m in out["warnings"]], fits, p, w)


@app.command()
@verb
def bundle(
    pt_fit: Annotated[Path, typer.Argument(help="FIT.json of the D_pt (general) eval set, from mixlaw fit --out")],
    cpt_fit: Annotated[Path, typer.Argument(help="FIT.json of the D_cpt (domain) eval set, from mixlaw fit --out")],
    out: Annotated[Path, typer.Option("--out", help="where to write the bundle (JSON)")],
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Write the D_pt + D_cpt bundle that ``optimize`` and ``critical`` read, from two single fits (``mixlaw fit
    RUNS --law cpt --target loss_general --out pt.json`` and the same for the domain's loss)."""
    from mixlaw.api.cpt import CptFits, load_fits
    from mixlaw.safeio import check_output_path

    check_output_path(out, "--out")  # before the fits are read

    pt, cpt = load_fits(pt_fit), load_fits(cpt_fit)
    if pt.pt_set == cpt.pt_set:
        raise MixlawError(f"both fits are of the same eval set '{pt.pt_set}': give the D_pt and the D_cpt fit")
    both = CptFits(fits={pt.pt_set: pt.fits[pt.pt_set], cpt.pt_set: cpt.fits[cpt.pt_set]}, pt_set=pt.pt_set,
                   cpt_set=cpt.pt_set)  # fmt: skip
    from mixlaw.safeio import atomic_write_text

    atomic_write_text(out, json.dumps(both.to_dict(), indent=1))  # atomic: a reader never sees half a bundle
    if as_json:
        typer.echo(json.dumps({"out": str(out), "pt_set": pt.pt_set, "cpt_set": cpt.pt_set}))
    else:
        typer.echo(f"bundle written to {out}: D_pt = {pt.pt_set}, D_cpt = {cpt.pt_set}")


def main() -> None:  # pragma: no cover - convenience entry point
    app(sys.argv[1:])
