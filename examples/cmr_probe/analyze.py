"""Model-free summary of the CMR probe runs (runs.csv): the general-loss bump and an empirical CMR per size.

For every CPT run: ΔL(T) = L(T) − L(0) of the general and the domain loss (L(0) = the run's step-0 evaluation =
the parent's final weights). The *bump*: max ΔL_gen over the run, where it peaks, and ΔL_gen at the end. The
empirical CMR at the budget (λ → ∞ reading of Gu et al., arXiv 2407.17467, laws.md §6.5) is the largest ratio R
with (i) ΔL_gen(T_max) ≤ ε, (ii) ΔL_dom(T_max) < 0 and (iii) the general loss past its peak by T_max (peak
before the last evaluation). ``mixlaw cmr`` fits the laws instead; this script is the plain-data check.

Usage: python examples/cmr_probe/analyze.py [runs.csv] [--eps 0.02]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def summarise(df: pd.DataFrame) -> pd.DataFrame:
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
                "peak_dgen": float(d_gen.max()),
                "peak_tokens": float(g["tokens"].iloc[k]),
                "end_dgen": float(d_gen[-1]),
                "end_ddom": float(d_dom[-1]),
                "past_peak": bool(0 < k < len(d_gen) - 1 and d_gen[-1] < d_gen[k]),
            }
        )
    return pd.DataFrame(rows).sort_values(["domain", "n_params", "R"]).reset_index(drop=True)


def empirical_cmr(s: pd.DataFrame, eps: float) -> pd.DataFrame:
    out = []
    for (dom, size), g in s.groupby(["domain", "size"], sort=False):
        ok = g[(g["end_dgen"] <= eps) & (g["end_ddom"] < 0) & g["past_peak"]]
        out.append(
            {
                "domain": dom,
                "size": size,
                "n_params": int(g["n_params"].iloc[0]),
                "cmr_empirical": float(ok["R"].max()) if len(ok) else float("nan"),
                "feasible_R": ", ".join(f"{r:g}" for r in ok["R"]),
            }
        )
    return pd.DataFrame(out).sort_values(["domain", "n_params"]).reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="?", default=str(Path(__file__).with_name("runs.csv")))
    ap.add_argument("--eps", type=float, default=0.02)
    args = ap.parse_args()
    df = pd.read_csv(args.csv)
    s = summarise(df)
    pd.set_option("display.width", 160)
    print(s.drop(columns=["run_id"]).round(4).to_string(index=False))
    print()
    print(f"empirical CMR (eps={args.eps}):")
    print(empirical_cmr(s, args.eps).to_string(index=False))


if __name__ == "__main__":
    main()
