"""Prediction across LR schedules on the MultiPowerLaw loss curves (Luo et al., arXiv:2503.12811).

For each model size (25M, 100M, 400M) fit ``lr_annealing`` (Tissue et al., arXiv:2408.11029; warm-up
counted at the peak LR) and ``multi_power`` (warm-up LRs as logged) through :func:`mixlaw.fit.fit_law` on the
``constant_24000`` and ``cosine_24000`` curves, then predict that size's other seven schedules (WSD with
exponential and linear decay, the three two-stage ``wsdcon`` schedules, and the 72k-step constant and
cosine curves — a 3x longer horizon). Prints MAE and max absolute error per schedule, size and law; the
last line is ``mae_max=<worst per-schedule MAE over sizes, laws and predicted schedules>``.

Run: ``python benchmarks/schedule_prediction.py [--data DIR]`` (default:
``../shared/data/external/MultiPowerLaw`` next to the checkout). Not asserted in CI.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from mixlaw.decide.cpt import identifiability
from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.options import FitOptions
from mixlaw.schedules import Schedule, add_schedule_features

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "external" / "MultiPowerLaw"
FIT_ON = ("constant_24000", "cosine_24000")
PAPER_SPLIT = ("constant_24000", "cosine_24000", "wsdcon_9")
WARMUP = 2160


def mpl_schedule(name: str) -> Schedule:
    """The schedules of the MultiPowerLaw curves (data README): warm-up 2160 steps 0 → 3e-4."""
    if name.startswith("cosine_"):
        return Schedule.parse(f"cosine:peak=3e-4,steps={name.split('_')[1]},warmup={WARMUP},final=3e-5")
    if name.startswith("constant_"):
        return Schedule.parse(f"constant:peak=3e-4,steps={name.split('_')[1]},warmup={WARMUP}")
    if name.startswith("wsdld_"):
        return Schedule.parse(f"wsd:peak=3e-4,steps=24000,warmup={WARMUP},final=3e-5,decay=4000")
    if name.startswith("wsd_"):
        return Schedule.parse(f"wsd:peak=3e-4,steps=24000,warmup={WARMUP},final=3e-5,decay=4000,shape=exp")
    if name.startswith("wsdcon_"):
        gamma = int(name.split("_")[1]) * 1e-5 / 3e-4
        return Schedule.parse(f"multistep:peak=3e-4,steps=16000,warmup={WARMUP},milestones=8000,gamma={gamma}")
    raise ValueError(f"unknown schedule {name}")


def load_size(data: Path, size: str, warmup: str = "peak") -> tuple[pd.DataFrame, dict[str, Schedule]]:
    frames, scheds = [], {}
    for f in sorted((data / "loss_curve_repo" / f"csv_{size}").glob("*.csv")):
        df = pd.read_csv(f)
        df.insert(0, "run_id", f.stem)
        frames.append(df)
        scheds[f.stem] = mpl_schedule(f.stem)
    table = pd.concat(frames, ignore_index=True)
    table = add_schedule_features(table, scheds, warmup=warmup, multi_power_bins=48)  # type: ignore[arg-type]
    return table, scheds


def _report(table: pd.DataFrame, pred: np.ndarray, fit_on: tuple[str, ...]) -> list[tuple[str, str, float, float]]:
    err = pred - table["loss"].to_numpy()
    rows = []
    for run in dict.fromkeys(table["run_id"]):
        m = (table["run_id"] == run).to_numpy()
        mae, mx = float(np.mean(np.abs(err[m]))), float(np.max(np.abs(err[m])))
        role = "fit" if run in fit_on else "pred"
        rows.append((run, role, mae, mx))
        print(f"  {run:<18} {role:<4}  MAE {mae:.4f}  max {mx:.4f}")
    return rows


def run_split(
    tables: dict[str, pd.DataFrame], fit_on: tuple[str, ...], laws: tuple[str, ...] = ("lr_annealing", "multi_power")
) -> pd.DataFrame:
    rows = []
    for size, table in tables.items():
        train = table[table["run_id"].isin(fit_on)].reset_index(drop=True)
        for law in (get_law(n) for n in laws):
            t0 = time.perf_counter()
            res = fit_law(law, train, FitOptions(seed=0), target="loss")
            secs = time.perf_counter() - t0
            pred = np.asarray(res.predict(table), dtype=np.float64)
            params = ", ".join(f"{k}={v:.4g}" for k, v in res.params.items())
            print(f"[{size}M] {law.name}: fitted on {'+'.join(fit_on)} in {secs:.1f}s ({res.status.value}); {params}")
            flags = identifiability(res, train)
            print(f"  identifiability: {flags['message']} (condition {flags['condition']:.2g})")
            rows += [(size, law.name, *r) for r in _report(table, pred, fit_on)]
    return pd.DataFrame(rows, columns=["size", "law", "schedule", "role", "mae", "max"])


def summarise(df: pd.DataFrame, label: str) -> float:
    pred = df[df["role"] == "pred"]
    print(f"{label}: predicted schedules, MAE mean / worst per law and size:")
    for (law_name, size), r in pred.groupby(["law", "size"])["mae"].agg(["mean", "max"]).iterrows():
        print(f"  {law_name:<13} {size:>4}M  mean {r['mean']:.4f}  worst {r['max']:.4f}")
    for law_name, g in pred.groupby("law"):
        print(f"{label}: mae_max[{law_name}]={g['mae'].max():.4f}")
    return float(pred["mae"].max())


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--quick", action="store_true", help="only the constant+cosine split")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tables = {size: load_size(args.data, size)[0] for size in ("25", "100", "400")}
    if not args.quick:
        from mixlaw.laws.multi_power import PUBLISHED_MPL

        print("== published multi-power parameters (README of the MultiPowerLaw repository), no fitting ==")
        law = get_law("multi_power", n_bins=48)
        for size, table in tables.items():
            print(f"[{size}M] multi_power published")
            x = {c: table[c].to_numpy(copy=True) for c in law.inputs}
            _report(table, law.evaluate(x, PUBLISHED_MPL[f"{size}M"]), PAPER_SPLIT)
        print(f"== fitted on the multi-power paper's split {'+'.join(PAPER_SPLIT)} (context) ==")
        summarise(run_split(tables, PAPER_SPLIT), "paper split")
        print("== lr_annealing with the warm-up LRs as logged in S1 (context; default: counted at the peak) ==")
        logged = {size: load_size(args.data, size, warmup="logged")[0] for size in tables}
        summarise(run_split(logged, FIT_ON, laws=("lr_annealing",)), "warm-up as logged")
    print(f"== fitted on {'+'.join(FIT_ON)}, predicting the other schedules ==")
    worst = summarise(run_split(tables, FIT_ON), "constant+cosine")
    print(f"mae_max={worst:.4f}")


if __name__ == "__main__":
    main()
