"""Pool experiment: CausalMix against RegMix at predicting the best mixture for a held-out data pool.

Input: a runs table, one row per run, with ``pool``, the pool statistics (constant within a pool), ``w_<domain>``
and the loss. For each pool in turn (leave-one-pool-out), both surrogates are fitted on the other pools' runs:

- ``causalmix``: the pool-aware surrogate (``mix optimize --law causalmix``), which reads the held-out pool's
  statistics;
- ``regmix``: the RegMix surrogate on the mixture weights alone (pool-blind; ``--backend``: ``linear`` or
  ``lightgbm`` with 5-run leaves), the way ``mix optimize --law regmix`` would be used on pooled runs.

Each ranks the held-out pool's *observed* runs. Scored per model, averaged over pools: ``picked regret`` = the
observed loss of the run it ranks first minus the pool's best observed loss (what choosing by the model would have
cost among runs that were made), and the within-pool Spearman of predicted against observed; the ``random pick`` row
is the expected picked regret of a run chosen at random. With ``--simulate`` the
table is a simulated pool experiment with a known truth and the table also gives the *true* regret of each model's
proposed mixture (CausalMix: its proposal; RegMix: the top-128 mean of 20,000 Dirichlet samples).

Run: ``PYTHONPATH=src python examples/pool_probe/analyze.py RUNS.csv --domains a,b,c --covariates x,y`` or
``PYTHONPATH=src python examples/pool_probe/analyze.py --simulate`` (seconds). ``--probe`` reads the export of the
experiment's RunStore (``examples/pool_probe/runs.csv``, every evaluation row) as :func:`probe_table` does: each
run's last evaluation, ``loss`` = the mean of its five validation losses, the pool statistics
``log10_pool_tokens_<d>``; its defaults are the experiment's domains and those statistics.
``tests/test_pool_probe_example.py`` runs both.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from mixlaw.surrogates import build_surrogate
from mixlaw.surrogates.causalmix import EPS, CausalMix, CausalMixOptions

SIM_DOMAINS = ("a", "b", "c")
SIM_COVS = ("log_unique_a", "quality_b")
PROBE_DOMAINS = ("general", "legal", "docs", "bio", "code")
PROBE_COVS = tuple(f"log10_pool_tokens_{d}" for d in PROBE_DOMAINS)


def probe_table(rows: pd.DataFrame, domains: Sequence[str] = PROBE_DOMAINS) -> pd.DataFrame:
    """One row per run of a probe store's export: its last evaluation, ``loss`` = the mean of ``loss_<d>`` over
    ``domains`` (every domain's validation loss weighted equally: the objective of the pools' best mixture), and
    ``log10_pool_tokens_<d>`` (the pool's size per corpus, recorded by every run)."""
    from mixlaw.errors import InputError

    need = ["run_id", "step", "pool", *(f"{k}_{d}" for d in domains for k in ("loss", "pool_tokens", "w"))]
    missing = [c for c in need if c not in rows.columns]
    if missing:
        raise InputError(f"the probe export has no column '{missing[0]}'")
    last = rows.sort_values(["run_id", "step"]).groupby("run_id").tail(1).reset_index(drop=True)
    out = last.copy()
    out["loss"] = last[[f"loss_{d}" for d in domains]].mean(axis=1)
    for d in domains:
        out[f"log10_pool_tokens_{d}"] = np.log10(last[f"pool_tokens_{d}"].astype(float))
    return out


def _true_c(x1: float, x2: float) -> np.ndarray:
    return np.array([0.06 + 0.15 * (x1 - 8.0), 0.09 + 0.18 * x2, 0.15])


def true_loss(x1: float, x2: float, w: np.ndarray) -> np.ndarray:
    """The simulated truth: the level falls with the pool's size and quality; each share's log effect moves with
    them (a matters more in a larger pool of a, b more when b's quality is high)."""
    return 3.0 + 0.2 * (10 - x1) - 0.1 * x2 - np.log(np.atleast_2d(w) + EPS) @ _true_c(x1, x2)


def simulate(seed: int = 0, n_pools: int = 8, runs: int = 5, noise: float = 0.003) -> pd.DataFrame:
    """``n_pools`` pools × ``runs`` Dirichlet mixtures (about 40 runs, the probe experiment's shape)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, (x1, x2) in enumerate(zip(rng.uniform(8, 10, n_pools), rng.uniform(0, 1, n_pools), strict=True)):
        for j, w in enumerate(rng.dirichlet(np.ones(3), size=runs)):
            y = float(true_loss(x1, x2, w)[0]) + noise * rng.standard_normal()
            rows.append({"run_id": f"p{i}r{j}", "pool": f"p{i}", "log_unique_a": x1, "quality_b": x2,
                         **{f"w_{d}": float(v) for d, v in zip(SIM_DOMAINS, w, strict=True)}, "loss": y})  # fmt: skip
    return pd.DataFrame(rows)


def _true_best(x1: float, x2: float) -> float:
    from scipy.optimize import minimize

    r = minimize(lambda w: float(true_loss(x1, x2, w)[0]), np.full(3, 1 / 3), method="SLSQP", bounds=[(0, 1)] * 3,
                 constraints=({"type": "eq", "fun": lambda w: w.sum() - 1},), options={"ftol": 1e-14})  # fmt: skip
    return float(true_loss(x1, x2, r.x)[0])


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 3 or np.ptp(a) == 0:
        return float("nan")
    return float(pd.Series(a).corr(pd.Series(b), method="spearman"))


def compare_pools(table: pd.DataFrame, domains: Sequence[str], covariates: Sequence[str], *, target: str = "loss",
                  backend: str = "linear", simulated: bool = False, seed: int = 0) -> pd.DataFrame:  # fmt: skip
    """Leave-one-pool-out rows: per held-out pool and model, the picked regret, Spearman (and the true regret)."""
    from mixlaw.errors import InputError

    doms = tuple(domains)
    wcols = [f"w_{d}" for d in doms]
    missing = [c for c in ["pool", target, *wcols, *covariates] if c not in table.columns]
    if missing:
        raise InputError(f"the runs table has no column '{missing[0]}'")
    ropts = {"backend": "linear"} if backend == "linear" else {"backend": "lightgbm", "min_leaf": 5}
    rng = np.random.default_rng(seed)
    samples = pd.DataFrame(rng.dirichlet(np.ones(len(doms)), size=20_000), columns=wcols)
    rows = []
    for p in sorted(table["pool"].astype(str).unique()):
        train, test = table[table["pool"].astype(str) != p], table[table["pool"].astype(str) == p]
        obs = test[target].to_numpy(dtype=np.float64)
        stats = {c: float(test[c].iloc[0]) for c in covariates}
        cm = CausalMix(CausalMixOptions(doms, tuple(covariates), target)).fit(train)
        rm = build_surrogate("regmix", doms, ropts).fit(train, target)
        preds = {"causalmix": cm.predict(test), "regmix": np.asarray(rm.predict(test), dtype=np.float64)}
        proposals = {"causalmix": np.array(list(cm.propose(stats).values())),
                     "regmix": samples.to_numpy()[np.argsort(np.asarray(rm.predict(samples)))[:128]].mean(axis=0)}
        for name, pred in preds.items():
            row = {"pool": p, "model": name, "n_runs": len(test),
                   "picked_regret": float(obs[int(np.argmin(pred))] - obs.min()), "spearman": _spearman(pred, obs),
                   **{f"proposed_{d}": float(v) for d, v in zip(doms, proposals[name], strict=True)}}  # fmt: skip
            if simulated:
                x1, x2 = stats[SIM_COVS[0]], stats[SIM_COVS[1]]
                row["true_regret"] = float(true_loss(x1, x2, proposals[name])[0]) - _true_best(x1, x2)
            rows.append(row)
        # context: the expected picked regret of a run chosen at random (Spearman 0 by construction)
        rows.append({"pool": p, "model": "random pick", "n_runs": len(test),
                     "picked_regret": float(obs.mean() - obs.min()), "spearman": 0.0})  # fmt: skip
    return pd.DataFrame(rows)


def summary(per_pool: pd.DataFrame) -> pd.DataFrame:
    """Per model: the mean over held-out pools of each score."""
    cols = [c for c in ("picked_regret", "spearman", "true_regret") if c in per_pool.columns]
    return per_pool.groupby("model")[cols].mean().reset_index()


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="?", type=Path)
    ap.add_argument("--domains", default=None, help="default: the simulated or the probe experiment's")
    ap.add_argument("--covariates", default=None, help="default: the simulated or the probe experiment's")
    ap.add_argument("--probe", action="store_true", help="RUNS is the probe store's export (every evaluation row)")
    ap.add_argument("--per-pool", action="store_true", help="print the per-pool rows too")
    ap.add_argument("--drop-mixture", default=None, help="leave out the runs of this mixture_name (fit and score)")
    ap.add_argument("--target", default="loss")
    ap.add_argument("--backend", choices=("linear", "lightgbm"), default="linear")
    ap.add_argument("--simulate", action="store_true", help="a simulated pool experiment with a known truth")
    a = ap.parse_args(argv)
    if a.simulate == (a.runs is not None):
        ap.error("give a runs table or --simulate")
    doms = a.domains.split(",") if a.domains else list(PROBE_DOMAINS if a.probe else SIM_DOMAINS)
    covs = a.covariates.split(",") if a.covariates else list(PROBE_COVS if a.probe else SIM_COVS)
    table = simulate() if a.simulate else pd.read_csv(a.runs)
    if a.probe:
        table = probe_table(table, doms)
    if a.drop_mixture:
        table = table[table["mixture_name"].astype(str) != a.drop_mixture].reset_index(drop=True)
    per = compare_pools(table, doms, covs, target=a.target, backend=a.backend, simulated=a.simulate)
    out = summary(per)
    print(f"{table['pool'].nunique()} pools, {len(table)} runs" + (" (simulated)" if a.simulate else ""))
    fmt = lambda v: f"{v:.4f}"  # noqa: E731
    if a.per_pool and "mixture_name" in table.columns:
        print(table.pivot(index="pool", columns="mixture_name", values=a.target).to_string(float_format=fmt))
    if a.per_pool:
        print(per[["pool", "model", "picked_regret", "spearman"]].to_string(index=False, float_format=fmt))
    print(out.to_string(index=False, float_format=fmt))
    return out


if __name__ == "__main__":
    main()
