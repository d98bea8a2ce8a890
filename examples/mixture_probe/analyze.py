"""The mixture experiment's analysis: choose the target-size mixtures, then check them against the target runs.

Every number comes from ``mixlaw`` verbs run on the shipped runs (``runs.csv``), called here with ``--json``::

    python examples/mixture_probe/analyze.py choose   # fit, choose; writes the target-size spec (target_chosen.toml)
    python examples/mixture_probe/analyze.py check    # predicted vs measured objective of the target-size runs
    python examples/mixture_probe/analyze.py check --reuse   # the same predictions, re-read measurements
    python examples/mixture_probe/analyze.py seeds    # the target-size mixtures over seeds (runs_seeds.csv)
    python examples/mixture_probe/analyze.py holdout  # mix compare: fit 12k-51k, predict the 16 runs at 113k

The objective is the *balanced validation loss*: the mean of the five per-corpus validation losses (weight 0.2
each), at the target size (the 250k probe model, 252,720 non-embedding parameters, 20 tokens per parameter).
``choose`` fits CAMEL (k = 2) on the fitting sizes 12k–100k and minimises the predicted objective at 250k; the
size-blind choice is the Data Mixing Laws law (``dml``, no size term) fitted on the largest fitting size alone.
``check`` predicts every target-size mixture under the CAMEL fit (``--evaluate``; 95 % intervals and the paired
regret against the chosen mixture from a bootstrap over mixtures) and sets the measured objective beside it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOMAINS = ["general", "legal", "docs", "bio", "code"]
TARGET_SIZE = 252_720  # the 250k probe model
FIT = "n_params < 2e5"  # the fitting runs (12k-100k); the target runs are the 250k ones
LARGEST = "n_params > 1e5 and n_params < 2e5"  # the largest fitting size (100k), for the size-blind law
TARGETS = [a for d in DOMAINS for a in ("--target", f"loss_{d}")]
WEIGHTS = [a for d in DOMAINS for a in ("--weights", f"loss_{d}=0.2")]
ANCHORS = {
    "natural": {"general": 0.30723, "legal": 0.09984, "docs": 0.394447, "bio": 0.093796, "code": 0.104687},
    "uniform": dict.fromkeys(DOMAINS, 0.2),
}


def mixlaw(*args: str) -> dict:
    """Run one ``mixlaw`` verb with ``--json``; its JSON output."""
    cmd = [sys.executable, "-m", "mixlaw.cli", *args, "--json"]
    print("$ mixlaw " + " ".join(args), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"mixlaw {args[0]} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def optimize(runs: Path, law: str, *extra: str) -> dict:
    doms = ",".join(DOMAINS)
    return mixlaw("mix", "optimize", str(runs), "--law", law, "--domains", doms, *TARGETS, *WEIGHTS, "--final", *extra)


def fmt_mix(w: dict[str, float]) -> str:
    return " ".join(f"{d}={w[d]:.3f}" for d in DOMAINS)


def rounded(w: dict[str, float]) -> dict[str, float]:
    """Six decimals that still sum to 1 (the probe spec checks the sum): the largest weight takes the remainder."""
    r = {d: round(w[d], 6) for d in DOMAINS}
    top = max(r, key=lambda d: r[d])
    r[top] = round(1.0 - sum(v for d, v in r.items() if d != top), 6)
    return r


def as_evaluate(name: str, w: dict[str, float]) -> list[str]:
    return ["--evaluate", f"{name}:" + ",".join(f"{d}={w[d]:.6f}" for d in DOMAINS)]


def choose(runs: Path, spec: Path) -> dict:
    camel = optimize(runs, "camel", "--where", FIT, "--target-size", str(TARGET_SIZE))
    blind = optimize(runs, "dml", "--where", LARGEST)
    chosen = {"camel": camel["weights"], "dml_100k": blind["weights"]}
    print(f"CAMEL optimum at 250k: {fmt_mix(camel['weights'])}; predicted objective {camel['objective']:.4f}")
    print(f"size-blind optimum (dml on the 100k runs): {fmt_mix(blind['weights'])}")
    head = "".join((HERE / "target_anchors.toml").read_text().split("[pt.mixtures]")[0].splitlines(True)[2:])
    head = (
        "# Target-size runs of the mixture experiment (examples/mixture_probe): the mixtures chosen by\n"
        "# analyze.py choose (CAMEL at 250k; dml on the 100k runs alone). Same settings as spec.toml.\n" + head
    )
    body = "[pt.mixtures]\n" + "".join(
        f"{name} = {{ " + ", ".join(f"{d} = {v}" for d, v in rounded(w).items()) + " }\n" for name, w in chosen.items()
    )
    spec.write_text(head + body + "\n[pt.runs]\n250k = [" + ", ".join(f'"{n}"' for n in chosen) + "]\n")
    out = {"camel": camel, "dml_100k": blind}
    (HERE / "choose.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


def check(runs: Path, bootstrap: int, reuse: bool = False) -> None:
    import pandas as pd

    table = pd.read_csv(runs)
    final = table.sort_values("tokens").groupby("run_id").tail(1)
    target = final[final["n_params"] > 2e5]
    chosen = json.loads((HERE / "choose.json").read_text())
    mixtures = {**ANCHORS, "dml_100k": chosen["dml_100k"]["weights"]}
    ev = [a for name, w in mixtures.items() for a in as_evaluate(name, w)]
    if reuse:  # the predictions of an earlier `check` (they use only the fitting runs): re-read the measurements
        res = json.loads((HERE / "check.json").read_text())["optimize"]
    else:
        res = optimize(runs, "camel", "--where", FIT, "--target-size", str(TARGET_SIZE), "--bootstrap",
                       str(bootstrap), *ev)  # fmt: skip
    rows = [{"name": "camel", "weights": res["weights"], "objective": res["objective"],
             "objective_interval": res["bootstrap"]["objective"], "regret": 0.0}]  # fmt: skip
    rows += res["candidates"]
    print(f"CAMEL optimum now: {fmt_mix(res['weights'])} (chosen: {fmt_mix(chosen['camel']['weights'])})")
    print(f"{'mixture':<9} {'predicted [95%]':<26} {'regret [paired 95%]':<28} {'measured':>9}  weights")
    for r in rows:
        runs_of = target[target["run_id"].str.endswith(f"-pt-{r['name']}")]
        measured = runs_of[[f"loss_{d}" for d in DOMAINS]].mean(axis=1).tolist()
        r["measured"] = measured
        r["measured_losses"] = runs_of[[f"loss_{d}" for d in DOMAINS]].to_dict("records")
        lo, hi = r["objective_interval"]
        ri = r.get("regret_interval")
        reg = f"{r['regret']:+.4f}" + (f" [{ri[0]:+.4f}, {ri[1]:+.4f}]" if ri else "")
        m = " ".join(f"{x:.4f}" for x in measured) or "-"
        print(f"{r['name']:<9} {r['objective']:.4f} [{lo:.4f}, {hi:.4f}]   {reg:<28} {m:>9}  {fmt_mix(r['weights'])}")
    (HERE / "check.json").write_text(json.dumps({"optimize": res, "rows": rows}, indent=1) + "\n")


HOLDOUT_MODELS = "camel,mixture_joint,mixture_additive,blind"


def holdout(runs: Path, bootstrap: int) -> None:
    """``mix compare`` fitted on 12k-51k, predicting the 16 runs at 113k (the same 2.2x extrapolation in size as the
    target runs); writes ``holdout.json`` (per target and model: MRE, bias, Spearman, coverage)."""
    res = mixlaw("mix", "compare", str(runs), "--domains", ",".join(DOMAINS), *TARGETS, "--final",
                 "--where", FIT, "--holdout", "n_params > 1e5", "--models", HOLDOUT_MODELS,
                 "--bootstrap", str(bootstrap))  # fmt: skip
    rows = {}
    for t in res["targets"]:
        rows[t["target"]] = {m["model"]: {k: m.get(k) for k in ("mre", "bias", "spearman", "coverage", "n_test")}
                             for m in t["models"]}  # fmt: skip
        cells = "  ".join(f"{m}: {v['mre']:.1%}" for m, v in rows[t["target"]].items() if v["mre"] is not None)
        print(f"{t['target']:<13} {cells}")
    out = {"command": "mix compare " + " ".join(["--holdout", "n_params > 1e5", "--models", HOLDOUT_MODELS,
                                                  "--bootstrap", str(bootstrap)]),
           "bootstrap": bootstrap, "rows": rows}  # fmt: skip
    (HERE / "holdout.json").write_text(json.dumps(out, indent=1) + "\n")


def seed_summary(runs: Path) -> dict:
    """Every mixture of the seed study (``runs_seeds.csv``) over its seeds, and the chosen mixture against each other.

    Per mixture: the final objective of each seed, their mean and standard deviation (the seed spread). For the
    chosen mixture against every other (``camel_vs``) and every mixture against uniform (``vs_uniform``): the
    difference of means (positive = the first is better), its standard error
    sqrt(s_a^2/n_a + s_b^2/n_b) and a Welch 95 % interval (Welch-Satterthwaite degrees of freedom), and the verdict
    ``beats`` / ``loses`` when the interval excludes 0, else ``no_evidence``.
    """
    import numpy as np
    import pandas as pd
    from scipy import stats

    table = pd.read_csv(runs)
    final = table.sort_values("tokens").groupby("run_id").tail(1)
    final = final.assign(objective=final[[f"loss_{d}" for d in DOMAINS]].mean(axis=1))
    mixtures: dict[str, dict] = {}
    for name, g in final.sort_values("seed").groupby("mixture_name", sort=False):
        obj = g["objective"].to_numpy(float)
        mixtures[str(name)] = {
            "weights": {d: float(g[f"w_{d}"].iloc[0]) for d in DOMAINS},
            "seeds": [int(x) for x in g["seed"]], "objective": [float(x) for x in obj],
            "mean": float(obj.mean()), "sd": float(obj.std(ddof=1)), "n": int(obj.size),
            "device": sorted(set(map(str, g["device"]))),
        }  # fmt: skip
    def versus(a: dict, b: dict) -> dict:  # b's mean minus a's: positive = a is better
        va, vb = a["sd"] ** 2 / a["n"], b["sd"] ** 2 / b["n"]
        se = float(np.sqrt(va + vb))
        dof = (va + vb) ** 2 / (va**2 / (a["n"] - 1) + vb**2 / (b["n"] - 1))
        diff = b["mean"] - a["mean"]
        half = float(stats.t.ppf(0.975, dof)) * se
        lo, hi = diff - half, diff + half
        verdict = "beats" if lo > 0 else "loses" if hi < 0 else "no_evidence"
        return {"diff": diff, "se": se, "dof": float(dof), "interval": [lo, hi], "verdict": verdict}

    camel_vs = {n: versus(mixtures["camel"], m) for n, m in mixtures.items() if n != "camel"}
    vs_uniform = {n: versus(m, mixtures["uniform"]) for n, m in mixtures.items() if n != "uniform"}
    return {"mixtures": mixtures, "camel_vs": camel_vs, "vs_uniform": vs_uniform, "level": 0.95}


def seeds(runs: Path) -> None:
    out = seed_summary(runs)
    print(f"{'mixture':<9} {'n':>2} {'mean':>7} {'sd':>7}  objective per seed")
    for name, m in out["mixtures"].items():
        per = " ".join(f"{x:.4f}" for x in m["objective"])
        print(f"{name:<9} {m['n']:>2} {m['mean']:.4f} {m['sd']:.4f}  {per}")
    for key, label in (("camel_vs", "camel vs {}"), ("vs_uniform", "{} vs uniform")):
        for name, c in out[key].items():
            lo, hi = c["interval"]
            print(f"{label.format(name)}: better by {c['diff']:+.4f} [{lo:+.4f}, {hi:+.4f}] ({c['verdict']})")
    (HERE / "seeds.json").write_text(json.dumps(out, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["choose", "check", "seeds", "holdout"])
    ap.add_argument("--runs", type=Path, help="the RunTable (default: runs.csv; seeds: runs_seeds.csv)")
    ap.add_argument("--spec", type=Path, default=HERE / "target_chosen.toml")
    ap.add_argument("--bootstrap", type=int, default=20)
    ap.add_argument("--reuse", action="store_true", help="check: keep check.json's predictions, re-read the runs")
    a = ap.parse_args()
    if a.step == "seeds":
        seeds(a.runs or HERE / "runs_seeds.csv")
    elif a.step == "holdout":
        holdout(a.runs or HERE / "runs.csv", a.bootstrap)
    elif a.step == "choose":
        choose(a.runs or HERE / "runs.csv", a.spec)
    else:
        check(a.runs or HERE / "runs.csv", a.bootstrap, a.reuse)


if __name__ == "__main__":
    main()
