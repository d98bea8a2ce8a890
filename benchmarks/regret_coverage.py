"""Coverage of the size-extrapolation error of regrets (:mod:`mixlaw.decide.mixture.regret_calib`) on held-out sizes.

A *regret* is the difference of a mixture law's objective between two mixtures at one size; ``mix optimize`` widens
its verdict intervals by ``s1 · d · δ_t/δ_h`` (module docstring of ``regret_calib``). This checks that error model
where the truth is measured: the law is fitted on the fitting sizes, the calibration is measured on them (nested:
refitted below their largest size from that fit, as ``mix optimize`` does, predicting it), and every pair of runs at
each held-out size is predicted. A pair is covered when its observed difference lies within
``predicted ± z · s1 · d · δ_t/δ_h`` (the calibration alone: the verdict adds the paired bootstrap's spread on top,
so its intervals are wider still).

Cases:

- ``slimpajama``: the 7-domain SlimPajama table (``Explaining-Data-Mixing-Scaling-Laws``, target ``openhermes_loss``,
  final checkpoints), fitted on 122M–937M (200 runs), predicting the pairs among the 20 runs at 1.235B and the 4 at
  2.718B.
- ``probes``: the shipped mixture probes (``examples/mixture_probe/runs.csv``, objective the mean of five validation
  losses), fitted on 12k–51k, predicting the pairs among the 16 runs at 113k.

Prints per case and law: ``s1``, the growth, pairs, coverage of the 95 % band, median half-width and median
``|observed difference|`` (the scale of what is being predicted), then ``regret_coverage95_worst=``.

Run: ``PYTHONPATH=src nice python benchmarks/regret_coverage.py [--laws mixture_joint,camel]``.

Measured 2026-12-04 on the shared 2-core machine (the calibration alone, 95 %; nested fits warm-started from the fit):

| case | law | s1 (nats per unit L1) | pairs | coverage | median half-width | median abs. difference |
|---|---|---|---|---|---|---|
| slimpajama | mixture_joint | 0.0094 | 196 | 88.8 % (1.235B 88.4 %, 2.718B 100 %) | 0.0126 | 0.0236 |
| slimpajama | camel | 0.0124 | 196 | 83.2 % (1.235B 82.6 %, 2.718B 100 %) | 0.0166 | 0.0236 |
| probes | mixture_joint | 0.1426 | 120 | 97.5 % | 0.3107 | 0.1473 |
| probes | camel (k = 1) | 0.1082 | 120 | 88.3 % | 0.2359 | 0.1473 |

``regret_coverage95_worst=0.832 (slimpajama/camel)``; 90 s CPU in all.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from mixlaw.decide.mixture.compare import build_model
from mixlaw.decide.mixture.regret_calib import calibrate_regret, nested_refit, pair_errors
from mixlaw.fit import fit_law
from mixlaw.fit.solver.pools import threads
from mixlaw.options import FitOptions

ROOT = Path(__file__).resolve().parents[1]
SP = ROOT.parent / "shared/data/external/Explaining-Data-Mixing-Scaling-Laws/data/dmsl_llm_slimpajama.csv"
SP_DOMS = ["arxiv", "book", "c4", "github", "commoncrawl", "stackexchange", "wikipedia"]
PR_DOMS = ["general", "legal", "docs", "bio", "code"]


def slimpajama() -> tuple[dict[str, pd.DataFrame], dict[str, float], list[str], float]:
    d = pd.read_csv(SP)
    d = d.rename(columns={f"weight_{x}": f"w_{x}" for x in SP_DOMS} | {"model_size": "n_params", "n_tokens": "tokens"})
    d = d.dropna(subset=["openhermes_loss"])
    d = d[d["tokens"] == d.groupby("n_params")["tokens"].transform("max")].reset_index(drop=True)
    mix = d[[f"w_{x}" for x in SP_DOMS]].round(6).astype(str).agg("|".join, axis=1)
    d = d.assign(run_id=[f"r{i}" for i in pd.factorize(mix + "@" + d["n_params"].astype(str))[0]])
    return {"openhermes_loss": d}, {"openhermes_loss": 1.0}, SP_DOMS, 9.4e8


def probes() -> tuple[dict[str, pd.DataFrame], dict[str, float], list[str], float]:
    t = pd.read_csv(ROOT / "examples/mixture_probe/runs.csv")
    t = t.sort_values("tokens").groupby("run_id").tail(1)
    t = t[t["n_params"] < 2e5].reset_index(drop=True)
    targets = [f"loss_{x}" for x in PR_DOMS]
    return {c: t for c in targets}, dict.fromkeys(targets, 0.2), PR_DOMS, 6e4


CASES = {"slimpajama": slimpajama, "probes": probes}


def _fit(law: Any, rows: pd.DataFrame, target: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_law(law, rows, FitOptions(seed=0), target=target)


def run(case: str, law_name: str, level: float) -> dict[str, Any]:
    rows, weights, doms, cut = CASES[case]()
    t0 = time.process_time()
    law = build_model(law_name, {"k": 1} if law_name == "camel" and case == "probes" else {}, doms, "n_params")
    fitted = {t: r[r["n_params"] <= cut].reset_index(drop=True) for t, r in rows.items()}
    full = {t: _fit(law, fitted[t], t) for t in rows}
    far = float(rows[next(iter(rows))]["n_params"].max())
    calib = calibrate_regret(fitted, dict.fromkeys(rows, law), weights, doms, far,  # as mix optimize: warm refits
                             refit=lambda t, top: nested_refit(full[t], fitted[t], "n_params", top, None))  # fmt: skip
    z = float(norm.ppf(0.5 + level / 2))
    some = next(iter(rows.values()))
    held = sorted(float(s) for s in some["n_params"].unique() if s > cut)
    top = float(max(r["n_params"].max() for r in fitted.values()))
    out: dict[str, Any] = {"case": case, "law": law_name, "s1": calib.per_l1, "status": calib.status.value}
    cov, half, scale, n = [], [], [], 0
    for s in held:
        at = some[some["n_params"] == s]
        obs = sum(weights[t] * rows[t].loc[at.index, t].to_numpy(float) for t in rows)
        pred = sum(weights[t] * np.asarray(full[t].predict(at), dtype=np.float64) for t in rows)
        w = at[[f"w_{x}" for x in doms]].to_numpy(float)
        e, d, _ = pair_errors(obs, pred, w)
        growth = np.log(s / top) / np.log(top / calib.inner_size) if calib.inner_size else np.nan
        hw = z * calib.per_l1 * d * growth
        inside = np.abs(e) <= hw
        out[f"coverage@{s:.3g}"] = float(inside.mean())
        cov += inside.tolist()
        half += hw.tolist()
        obs_d = (obs[:, None] - obs[None, :])[np.triu_indices(obs.size, 1)]
        scale += np.abs(obs_d[np.abs(w[:, None] - w[None, :]).sum(-1)[np.triu_indices(obs.size, 1)] > 1e-3]).tolist()
        n += e.size
    out |= {"pairs": n, "coverage": float(np.mean(cov)), "median_half_width": float(np.median(half)),
            "median_abs_diff": float(np.median(scale)), "cpu_s": time.process_time() - t0}  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="slimpajama,probes")
    ap.add_argument("--laws", default="mixture_joint,camel")
    ap.add_argument("--level", type=float, default=0.95)
    a = ap.parse_args()
    worst = (2.0, "")
    with threads(1):
        for case in a.cases.split(","):
            for law in a.laws.split(","):
                r = run(case, law, a.level)
                extra = " ".join(f"{k} {v:.1%}" for k, v in r.items() if k.startswith("coverage@"))
                print(f"{case:<11} {law:<14} s1 {r['s1']:.4f} pairs {r['pairs']:>4} coverage {r['coverage']:.1%} "
                      f"({extra}) median half-width {r['median_half_width']:.4f} median |diff| "
                      f"{r['median_abs_diff']:.4f} cpu {r['cpu_s']:.0f} s", flush=True)  # fmt: skip
                worst = min(worst, (r["coverage"], f"{case}/{law}"))
    print(f"regret_coverage95_worst={worst[0]:.3f} ({worst[1]})")


if __name__ == "__main__":
    main()
