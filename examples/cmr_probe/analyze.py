"""Model-free summary of the CMR probe runs (runs.csv): control drift, seed spread, the bump, an empirical CMR.

For every CPT run: ΔL(T) = L(T) − L(0) of the general and the domain loss (L(0) = the run's step-0 evaluation =
the parent's final weights). Printed, in order:

1. **Control drift**: ΔL_gen at the end of the R = 0 run (general replay only) per size, against ε/5. A base
   that is still learning shows a negative drift (continued learning); the example is meant to measure
   forgetting, so the drift has to stay inside ε/5.
2. **Seed spread** at the cells run with more than one seed (``seeds.py``): peak and end-of-budget ΔL_gen and
   end ΔL_dom per seed, and their range.
3. **The bump** per run: max ΔL_gen, where it peaks, ΔL_gen and ΔL_dom at the end (seed-0 runs).
4. **Empirical CMR** at the budget (λ → ∞ reading of Gu et al., arXiv 2407.17467, laws.md §6.5): the largest
   ratio R with (i) ΔL_gen(T_max) ≤ ε, (ii) ΔL_dom(T_max) < 0 and (iii) the general loss past its peak by T_max
   (peak before the last evaluation); the same with ΔL_gen measured against the R = 0 control
   (ΔL_gen − ΔL_gen,control at T_max); and the model-free crossing: where the end-of-budget ΔL_gen, linearly
   interpolated between the trained ratios (seeds averaged), reaches ε.

``mixlaw cmr`` fits the laws instead; this script is the plain-data check.

Usage: python examples/cmr_probe/analyze.py [runs.csv] [--eps 0.05]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """One row per CPT run: size, domain, R, seed and its ΔL_gen bump / end-of-budget increments."""
    rows = []
    for rid, g in df[df["phase"] == "cpt"].groupby("run_id"):
        g = g.sort_values("step")
        dom = str(g["domain"].iloc[0])
        d_gen = g["loss_general"].to_numpy() - g["loss_general"].iloc[0]
        d_dom = g[f"loss_{dom}"].to_numpy() - g[f"loss_{dom}"].iloc[0]
        k = int(d_gen.argmax())
        rows.append(
            {
                "run_id": rid,
                "size": g["size"].iloc[0],
                "n_params": int(g["n_params"].iloc[0]),
                "domain": dom,
                "R": float(g[f"w_{dom}"].iloc[0]),
                "seed": int(g["seed"].iloc[0]),
                "peak_dgen": float(d_gen.max()),
                "peak_tokens": float(g["tokens"].iloc[k]),
                "end_tokens": float(g["tokens"].iloc[-1]),
                "end_dgen": float(d_gen[-1]),
                "end_ddom": float(d_dom[-1]),
                "past_peak": bool(0 < k < len(d_gen) - 1 and d_gen[-1] < d_gen[k]),
            }
        )
    return pd.DataFrame(rows).sort_values(["domain", "n_params", "R", "seed"]).reset_index(drop=True)


def control_drift(s: pd.DataFrame, eps: float) -> pd.DataFrame:
    """ΔL_gen of the R = 0 control over the CPT budget, per size (and domain label), against ε/5."""
    c = s[s["R"] == 0]
    out = c.groupby(["size", "n_params", "domain"], as_index=False).agg(
        end_dgen=("end_dgen", "mean"),
        min_dgen=("end_dgen", "min"),
        max_dgen=("end_dgen", "max"),
        seeds=("seed", "nunique"),
    )
    out["within_eps/5"] = out["end_dgen"].abs() <= eps / 5
    return out.sort_values(["n_params", "domain"]).reset_index(drop=True)


def control_extremes(df: pd.DataFrame) -> pd.DataFrame:
    """Largest |ΔL_gen| anywhere along each R = 0 control run (not only at the end)."""
    rows = []
    cpt = df[(df["phase"] == "cpt")]
    for rid, g in cpt.groupby("run_id"):
        dom = str(g["domain"].iloc[0])
        if float(g[f"w_{dom}"].iloc[0]) != 0.0:
            continue
        g = g.sort_values("step")
        d = g["loss_general"].to_numpy() - g["loss_general"].iloc[0]
        rows.append({"run_id": rid, "size": g["size"].iloc[0], "max_dgen": float(d.max()), "min_dgen": float(d.min())})
    return pd.DataFrame(rows)


def seed_spread(s: pd.DataFrame) -> pd.DataFrame:
    """Cells with several seeds: per-seed increments and their range (max − min)."""
    multi = s.groupby(["domain", "size", "R"]).filter(lambda g: g["seed"].nunique() > 1)
    if multi.empty:
        return multi
    agg = multi.groupby(["domain", "n_params", "size", "R"], as_index=False).agg(
        seeds=("seed", "nunique"),
        peak_dgen=("peak_dgen", lambda v: " / ".join(f"{x:+.4f}" for x in v)),
        end_dgen=("end_dgen", lambda v: " / ".join(f"{x:+.4f}" for x in v)),
        range_end_dgen=("end_dgen", lambda v: float(np.ptp(v))),
        range_peak_dgen=("peak_dgen", lambda v: float(np.ptp(v))),
        end_ddom=("end_ddom", lambda v: " / ".join(f"{x:+.3f}" for x in v)),
        range_end_ddom=("end_ddom", lambda v: float(np.ptp(v))),
    )
    return agg.sort_values(["domain", "n_params", "R"]).drop(columns=["n_params"]).reset_index(drop=True)


def _crossing(r: np.ndarray, y: np.ndarray, eps: float) -> float:
    """Largest R before the first upward crossing of ``eps`` by piecewise-linear y(R); 1 if never; NaN at R=0."""
    if y[0] > eps:
        return float("nan")
    for i in range(1, len(r)):
        if y[i] > eps:
            return float(r[i - 1] + (eps - y[i - 1]) * (r[i] - r[i - 1]) / (y[i] - y[i - 1]))
    return 1.0


def empirical_cmr(s: pd.DataFrame, eps: float) -> pd.DataFrame:
    """Largest trained R meeting the CMR conditions (absolute and vs the control), and the interpolated crossing."""
    out = []
    for (dom, size), g in s.groupby(["domain", "size"], sort=False):
        m = g.groupby("R", as_index=False).agg(
            end_dgen=("end_dgen", "mean"), end_ddom=("end_ddom", "mean"), past_peak=("past_peak", "all")
        )
        ctrl = float(m.loc[m["R"] == 0, "end_dgen"].iloc[0]) if (m["R"] == 0).any() else float("nan")
        rel = m["end_dgen"] - ctrl
        cond = (m["end_ddom"] < 0) & m["past_peak"]
        ok_abs = m[cond & (m["end_dgen"] <= eps)]
        ok_rel = m[cond & (rel <= eps)]
        r, y = m["R"].to_numpy(), m["end_dgen"].to_numpy()
        out.append(
            {
                "domain": dom,
                "size": size,
                "n_params": int(g["n_params"].iloc[0]),
                "cmr_trained": float(ok_abs["R"].max()) if len(ok_abs) else float("nan"),
                "cmr_trained_vs_control": float(ok_rel["R"].max()) if len(ok_rel) else float("nan"),
                "crossing": _crossing(r, y, eps),
                "crossing_vs_control": _crossing(r, rel.to_numpy(), eps),
                "feasible_R": ", ".join(f"{x:g}" for x in ok_abs["R"]),
            }
        )
    return pd.DataFrame(out).sort_values(["domain", "n_params"]).reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?", default=str(Path(__file__).with_name("runs.csv")))
    ap.add_argument("--eps", type=float, default=0.05, help="CMR tolerance ε (the `mixlaw cmr` default: 0.05)")
    args = ap.parse_args()
    df = pd.read_csv(args.csv)
    s = summarise(df)
    pd.set_option("display.width", 160)
    print(f"1. control drift: ΔL_gen of the R = 0 run over the CPT budget (ε/5 = {args.eps / 5:g})")
    print(control_drift(s, args.eps).round(4).to_string(index=False))
    ext = control_extremes(df)
    if len(ext):
        print(
            "   largest rise / fall anywhere along a control run: "
            f"{ext['max_dgen'].max():+.4f} / {ext['min_dgen'].min():+.4f}"
        )
    print()
    sp = seed_spread(s)
    print("2. seed spread (cells with several seeds):")
    print(sp.round(4).to_string(index=False) if len(sp) else "   none")
    print()
    print("3. the bump (seed-0 runs):")
    print(s[s["seed"] == 0].drop(columns=["run_id", "seed"]).round(4).to_string(index=False))
    print()
    print(f"4. empirical CMR (ε = {args.eps:g}):")
    print(empirical_cmr(s, args.eps).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
