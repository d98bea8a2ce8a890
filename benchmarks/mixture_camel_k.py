"""CAMEL's number of components ``k`` beside the other mixture laws, on a size holdout (held-out MRE and bias).

Cases (``--cases``, comma-separated):

- ``slim``: the 7-domain SlimPajama table (``Explaining-Data-Mixing-Scaling-Laws``), final checkpoint of every run,
  target ``openhermes_loss``: fitted on 122M-937M (200 runs), predicting the 24 runs at 1.235B and 2.718B.
- ``probe``: the shipped probes (``examples/mixture_probe``), final rows, the five validation losses: fitted on
  12k-50k (34 runs), predicting the 16 runs at 100k.

For each case and target, every model of ``--models`` is fitted on the training sizes and predicts the held-out
size(s) (``mix compare --holdout``, no bootstrap); every ``camel:k=K`` is also fitted on the training rows once more
for its health (:func:`mixlaw.decide.mixture.camel_k.camel_health`: components switched off, at the exponential
limit, size-free; ``C`` at 0). Prints one row per case, target and model: held-out rows, MRE, bias, and for camel the
health; then ``camel_k_best=<k>`` per case (lowest mean MRE among healthy CAMEL fits).

Run: ``PYTHONPATH=src nice -n 10 python benchmarks/mixture_camel_k.py [--cases slim,probe] [--ks 1,2,3]``.
Measured figures: ``docs/design/camel-k.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
SLIM = ROOT.parent / "shared/data/external/Explaining-Data-Mixing-Scaling-Laws/data/dmsl_llm_slimpajama.csv"
SLIM_DOMAINS = ("arxiv", "book", "c4", "github", "commoncrawl", "stackexchange", "wikipedia")
PROBE = ROOT / "examples/mixture_probe/runs.csv"
PROBE_DOMAINS = ("general", "legal", "docs", "bio", "code")


def slim() -> tuple[pd.DataFrame, tuple[str, ...], list[str], str]:
    d = pd.read_csv(SLIM).rename(
        columns={f"weight_{x}": f"w_{x}" for x in SLIM_DOMAINS} | {"model_size": "n_params", "n_tokens": "tokens"}
    )
    last = d.groupby("n_params")["tokens"].transform("max")
    d = d[d["tokens"] == last].reset_index(drop=True)
    d = d.assign(run_id=[f"slim{i}" for i in range(len(d))])
    return d, SLIM_DOMAINS, ["openhermes_loss"], "n_params > 9.4e8"


def probe() -> tuple[pd.DataFrame, tuple[str, ...], list[str], str]:
    from mixlaw.cli._table import load

    d = load(PROBE, final=True, where="n_params < 2e5")
    return d, PROBE_DOMAINS, [f"loss_{x}" for x in PROBE_DOMAINS], "n_params > 6e4"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="slim,probe")
    ap.add_argument("--ks", default="1,2,3")
    ap.add_argument("--models", default="mixture_additive,mixture_joint,dml")
    args = ap.parse_args()
    from mixlaw.api.mixture import compare
    from mixlaw.decide.mixture.camel_k import fit_camel
    from mixlaw.expr import filter_rows

    ks = [int(k) for k in args.ks.split(",")]
    for case in args.cases.split(","):
        table, doms, targets, holdout = {"slim": slim, "probe": probe}[case]()
        train = table.drop(index=filter_rows(table, holdout).index)
        models = [f"camel:k={k}" for k in ks] + [m for m in args.models.split(",") if m]
        healthy_mre: dict[int, list[float]] = {k: [] for k in ks}
        for target in targets:
            for model in models:
                t0 = time.process_time()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = compare(table, domains=doms, targets=[target], holdout=holdout, models=model, bootstrap=0)
                r = out["targets"][0]["models"][0]
                note = ""
                if model.startswith("camel"):
                    k = int(model.split("=")[1])
                    _, h = fit_camel(train, target, doms, k)
                    note = h.text
                    if h.status.value == "healthy":
                        healthy_mre[k].append(r["mre"])
                    else:
                        healthy_mre[k].append(np.inf)
                print(
                    f"{case} {target} {model:<18} n={r['n_predicted']}/{r['n_test']} mre={r['mre']:.4f} "
                    f"bias={r['bias']:+.4f} cpu={time.process_time() - t0:.0f}s {note}",
                    flush=True,
                )
        means = {k: float(np.mean(v)) for k, v in healthy_mre.items()}
        best = min(means, key=lambda k: means[k])
        print(f"camel_k_best[{case}]={best} (mean held-out MRE of healthy fits {means})", flush=True)


if __name__ == "__main__":
    main()
