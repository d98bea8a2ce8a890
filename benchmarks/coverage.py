"""Coverage of mixlaw's prediction intervals on held-out public data, for each resampling scheme.

Cases (data under ``../shared/data/external``):

- ``epoch``: the Chinchilla replication's 240 digitised points (Besiroglu et al. 2024, 5 highest losses dropped),
  fitted on N ≤ 5e9, the N > 5e9 points held out.
- ``olmo/<domain>``: the OLMo ladder (Bhagia et al. 2024), Chinchilla law per validation domain fitted on the final
  checkpoints of the 20 runs ≤ 1.3B (0.5–10×C), held out: the 3B runs (incl. the rerun), OLMo-2 7B (anneal) and
  13B (final). N of 3B is its 1×C token count / 20 (the ladder's own convention; 3B is not in ``final.json``).

For every case and scheme: ``mixlaw validate --holdout … --coverage`` in Python (:func:`mixlaw.api.validate`), 95 %
prediction intervals (``--interval prediction``). Prints one table, then ``coverage95_worst=<lowest 95 % coverage
over the cases for the default scheme>``.

Run: ``PYTHONPATH=src python benchmarks/coverage.py [--bootstrap 200] [--schemes runs,sizes,...]``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

EXTERNAL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "external"
LADDER = EXTERNAL / "OLMo-ladder" / "src" / "scripts" / "paper" / "data" / "ladder-runs"
N_OF = {"190M": 190_354_176, "370M": 371_262_464, "760M": 758_220_288, "1B": 1_279_395_840}
N_7B, N_13B = 6_887_575_552, 13_202_396_160
LOSS = "eval/{}-validation/CrossEntropyLoss"


def epoch() -> pd.DataFrame:
    raw = pd.read_csv(EXTERNAL / "analyzing-chinchilla" / "svg_extracted_data.csv")
    raw = raw.sort_values("loss", kind="stable").iloc[:-5]
    n = raw["Model Size"].to_numpy()
    return pd.DataFrame(
        {"run_id": [f"p{i}" for i in range(len(raw))], "n_params": n, "tokens": raw["Training FLOP"] / (6 * n),
         "loss": raw["loss"].to_numpy()}
    ).reset_index(drop=True)  # fmt: skip


def _final(path: Path) -> pd.Series:
    d = pd.read_csv(path)
    return d.iloc[-1]


def _tokens(row: pd.Series) -> float:
    if "throughput/total_tokens" in row and np.isfinite(row["throughput/total_tokens"]):
        return float(row["throughput/total_tokens"])
    return float(row["_step"] * row["batch_size_in_tokens"])


def olmo() -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(fit, held)`` long tables: one row per (run, domain) with n_params, tokens, loss, domain, run_id."""
    rows = []
    n3b = _tokens(_final(LADDER / "3B-1xC.csv")) / 20
    for path in sorted(LADDER.glob("*xC*.csv")):
        size = path.name.split("-")[0]
        n = N_OF.get(size, n3b if size == "3B" else None)
        rows.append((path.stem, n, _final(path)))
    rows.append(("7B-anneal", N_7B, _final(LADDER / "peteish7_eval_anneal.csv")))
    rows.append(("13B-final", N_13B, _final(LADDER / "peteish13_eval_final.csv")))
    out = []
    for rid, n, row in rows:
        for col in row.index:
            if col.startswith("eval/") and col.endswith("-validation/CrossEntropyLoss"):
                dom = col[len("eval/") : -len("-validation/CrossEntropyLoss")]
                out.append({"run_id": rid, "n_params": float(n), "tokens": _tokens(row), "loss": float(row[col]),
                            "domain": dom, "rerun": "rerun" in rid})  # fmt: skip
    df = pd.DataFrame(out)
    fit = df[(df["n_params"] <= 1.3e9) & ~df["rerun"]].reset_index(drop=True)
    held = df[df["n_params"] > 1.3e9].reset_index(drop=True)
    return fit, held


SCHEMES = ("runs", "rows", "residuals", "parametric", "sizes")
DEFAULT = "runs"


def _validate(table: pd.DataFrame, holdout: str, size_column: str, scheme: str, bootstrap: int) -> dict:
    from mixlaw import api

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes of individual folds are reported in the table instead
        res = api.validate(
            table, "chinchilla", holdout=holdout, size_column=size_column, coverage=True, bootstrap=bootstrap,
            bootstrap_scheme=scheme, interval="prediction", random_state=0,
        )  # fmt: skip
    pts = res.points
    return {
        "points": pts,
        "n_failed": int(res.folds["n_failed"].sum()),
        "n_resamples": int(res.folds["n_resamples"].sum()),
    }


def _row(case: str, scheme: str, pts: pd.DataFrame, n_failed: int, n_resamples: int, seconds: float) -> dict:
    from mixlaw.fit.coverage import coverage_summary

    c = coverage_summary(pts, "prediction")
    lv = {f"cov{int(100 * x['level'])}": x["coverage"] for x in c["levels"]}
    w95 = next(x["mean_rel_width"] for x in c["levels"] if x["level"] == 0.95)
    return {"case": case, "scheme": scheme, "n_held": c["n"], **lv, "width95": w95, "mae": c["mae"],
            "mre": c["mre"], "unusable": f"{n_failed}/{n_resamples}", "s": seconds}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=100)
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--cases", default="epoch,olmo")
    args = ap.parse_args()
    rows = []
    for scheme in args.schemes.split(","):
        if "epoch" in args.cases:
            t = time.time()
            e = epoch().assign(size=lambda d: np.round(np.log10(d["n_params"]), 1))  # sizes: 0.1-decade bins
            out = _validate(e, "n_params > 5e9", "size", scheme, args.bootstrap)
            rows.append(
                _row("epoch N>5e9", scheme, out["points"], out["n_failed"], out["n_resamples"], time.time() - t)
            )
            print(rows[-1], flush=True)
        if "olmo" in args.cases:
            t = time.time()
            fit, held = olmo()
            pts, nf, nr = [], 0, 0
            for dom in sorted(fit["domain"].unique()):
                table = pd.concat([fit[fit["domain"] == dom], held[held["domain"] == dom]], ignore_index=True)
                out = _validate(table.drop(columns="rerun"), "n_params > 1.3e9", "n_params", scheme, args.bootstrap)
                pts.append(out["points"])
                nf, nr = nf + out["n_failed"], nr + out["n_resamples"]
            rows.append(_row("olmo <=1.3B->3-13B", scheme, pd.concat(pts, ignore_index=True), nf, nr, time.time() - t))
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(df.to_string(index=False))
    default = df[df["scheme"] == DEFAULT]
    print(f"coverage95_worst={default['cov95'].min():.3f}" if len(default) else "coverage95_worst=nan")


if __name__ == "__main__":
    main()
