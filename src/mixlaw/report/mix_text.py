"""The terminal screen of ``mixlaw mix optimize``: the optimum, its intervals, the verdicts against the defaults and
the health of the fits, rendered from the decision's result."""

from __future__ import annotations

from typing import Any

__all__ = ["print_optimum"]


def _console() -> Any:
    """The rich console, 120 columns wide when the output is not a terminal (files, pipes, tests)."""
    from rich.console import Console

    con = Console()
    if not con.is_terminal:
        con.width = max(con.width, 120)
    return con


def _camel_k_lines(camel_k: dict[str, Any]) -> list[str]:
    """One line per CAMEL target: the k used, and why a larger k was refused (rendered from the status codes)."""
    lines = []
    for t, c in camel_k.items():
        comps = c["health"]["components"]
        line = f"fit health {t}: camel k = {c['k']}"
        if c["dropped"]:
            why = []
            for d in c["dropped"]:
                kinds = [x["status"].replace("_", " ") for x in d["components"] if x["status"] not in ("active",)]
                counts = {k: kinds.count(k) for k in dict.fromkeys(kinds)}
                why.append(
                    f"k = {d['k']} refused, {d['k_effective']} of its components are CAMEL components ("
                    + ", ".join(f"{n} {k}" for k, n in counts.items()) + ")"
                )
            line += " (" + "; ".join(why) + ")"
        if c["status"] == "degenerate":
            line += "; DEGENERATE even at k = 1: " + c["health"]["text"]
        free = [x["index"] for x in comps if x["status"] == "size_free"]
        if free:
            line += f"; component {', '.join(map(str, free))} does not change with size"
        if c["health"]["c_at_zero"]:
            line += "; C at 0 (no irreducible loss identified)"
        lines.append(line)
    return lines


def print_optimum(out: dict[str, Any], *, console: Any = None) -> None:
    """The optimum, its verdicts and the other mixtures' table (``console``: a rich console, default the
    terminal's, 120 columns when piped)."""
    from rich.table import Table

    band = out.get("bootstrap", {}).get("weights", {})
    if out["benchmark_weights"]:
        goal = (out["objective_preset"] or "weighted") + " accuracy"
    else:
        goal = " + ".join(f"{a:g}·{t}" for t, a in out["loss_weights"].items())
    size = out["target_size"]
    tab = Table(title=f"optimal mixture — {out['law']}, {goal}" + (f" at {size:g}" if size else ""))
    pct = f"{100 * out.get('bootstrap', {}).get('level', 0.95):g}%"
    for col in ("domain", "weight", f"{pct} interval" if band else ""):
        if col:
            tab.add_column(col, justify="left" if col == "domain" else "right")
    for d, w in out["weights"].items():
        row = [d, f"{w:.4f}"]
        if band:
            lo, hi = band[d]
            row.append(f"[{lo:.4f}, {hi:.4f}]")
        tab.add_row(*row)
    con = console if console is not None else _console()
    con.print(tab)
    choice = out.get("law_choice")
    if choice:
        ct = Table(title=f"law auto: fitted below {choice['heldout_size']:.3g}, predicting it (mean over the losses)")
        for col in ("law", "held-out MRE", "bias", "healthy", "problems"):
            ct.add_column(col, justify="left" if col in ("law", "problems") else "right")
        for c in choice["candidates"]:
            ct.add_row(
                c["law"] + (f" (k = {c['k']})" if c.get("k") else ""), f"{c['heldout_mre']:.2%}",
                f"{c['heldout_bias']:+.2%}", ("yes" if c["healthy"] else "no") if c.get("checked", True)
                else "not checked (cannot win)",
                "; ".join(c["problems"][:2]) + (f" (+{len(c['problems']) - 2})" if len(c["problems"]) > 2 else ""),
            )  # fmt: skip
        con.print(ct)
        con.print(choice["text"])
    for line in _camel_k_lines(out.get("camel_k") or {}):
        con.print(line)
    for v in out.get("verdicts") or []:
        con.print(f"verdict: {v['text']}")
    preds = {**out["predicted_losses"], **out["predicted_accuracies"]}
    score = f"score {out['score']:.5g}" if out["benchmark_weights"] else f"objective {out['objective']:.5g}"
    if "bootstrap" in out and out["bootstrap"].get("n"):
        lo, hi = out["bootstrap"]["score" if out["benchmark_weights"] else "objective"]
        score += f" [{lo:.5g}, {hi:.5g}] ({out['bootstrap']['n']} resamples, {out['bootstrap']['n_failed']} failed"
        widened = (out.get("regret_calibration") or {}).get("level_sd")
        score += ", with the size-extrapolation error)" if widened else ")"
        if str(out["bootstrap"].get("status", "ok")).startswith("weak"):
            score += " — WEAK: > 20 % of the resamples unusable"
    con.print(score + "; predicted " + ", ".join(f"{t} {v:.5g}" for t, v in preds.items()))
    tin = out.get("target_inputs") or {}
    for c, v in (tin.get("values") or {}).items():
        if tin["sources"][c] != "--target-size":
            con.print(f"target {c} = {v:.4g} ({tin['sources'][c]})")
    far = out.get("extrapolation") or {}
    if far and len(set(far.values())) == 1 and len(far) == len(preds):
        con.print(f"extrapolates: {next(iter(far.values()))}")
    for t, text in (far.items() if len(set(far.values())) > 1 or len(far) < len(preds) else ()):
        con.print(f"{t} extrapolates: {text}")
    con.print("active constraints: " + (", ".join(out["active_constraints"]) or "none"))
    rc = out.get("regret_calibration")
    if rc and rc.get("status") != "not_applicable":
        con.print(rc["text"])
    if out.get("candidates"):
        title = "other mixtures under the same laws (regret = their objective minus the optimum's)"
        if con.width < 120:  # a narrow terminal: no vertical rules, intervals wrap after their comma, nothing cut
            from rich import box

            ct = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
        else:
            ct = Table(title=title)
        widened = any(c.get("regret_sd_extrapolation") for c in out["candidates"])
        paired = "paired + size interval" if widened else "paired interval"
        for col in ("mixture", "objective", "interval", "regret", paired, "P(better)", "weights"):
            ct.add_column(col, justify="left" if col in ("mixture", "weights") else "right", overflow="fold",
                          no_wrap="interval" not in col)  # numbers and weights whole; intervals wrap at ", "
        for c in out["candidates"]:
            jl, rl = c.get("objective_interval"), c.get("regret_interval")
            ct.add_row(
                c["name"],
                f"{c['objective']:.5g}",
                f"[{jl[0]:.5g}, {jl[1]:.5g}]" if jl else "",
                f"{c['regret']:+.4g}",
                f"[{rl[0]:+.4g}, {rl[1]:+.4g}]" if rl else "",
                f"{c['p_better_than_chosen']:.0%}" if "p_better_than_chosen" in c else "",
                "\n".join(f"{d}={w:.3f}" for d, w in c["weights"].items()),  # one domain a line: never cut
            )
        con.print(ct)
    if out.get("vs_size"):
        curve = Table(title="optimal mixture vs model size")
        curve.add_column("size", justify="right")
        for d in out["weights"]:
            curve.add_column(d, justify="right")
        curve.add_column("objective", justify="right")
        for row in out["vs_size"]:
            b = row.get("band")
            cells = [f"{v:.4f}" + (f" [{b[d][0]:.3f}, {b[d][1]:.3f}]" if b else "") for d, v in row["weights"].items()]
            curve.add_row(f"{row['size']:.3g}", *cells, f"{row['objective']:.5g}")
        con.print(curve)
    k = out["kkt"]
    if out.get("proposer", {}).get("text"):  # a proposer that renders its own line (causalmix)
        con.print(out["proposer"]["text"])
    elif out.get("proposer"):
        pr = out["proposer"]
        con.print(
            f"proposal: the mean of the top {pr['top_k']} of {pr['n_feasible']} feasible Dirichlet samples "
            f"(of {pr['n_samples']}, temperature {pr['temperature']:g}, around "
            + ", ".join(f"{d}={v:.3f}" for d, v in pr["prior"].items()) + ")"
        )
    else:
        con.print(
            f"KKT: {'ok' if k['ok'] else 'NOT satisfied'} (stationarity {k['stationarity']:.2g}, "
            f"min multiplier {k['min_multiplier']:.2g}); {out['n_distinct']} distinct optimum(s) from "
            f"{out['n_starts']} starts"
        )
    if out.get("report"):
        con.print(f"report: {out['report']}")
    if out.get("verdicts"):
        far = next(iter((out.get("extrapolation") or {}).values()), "")
        con.print(
            "verdict on the chosen mixture: "
            + "; ".join(v["text"] for v in out["verdicts"])
            + (" (at an extrapolated mixture or size: see 'extrapolates' above)" if far else "")
        )


