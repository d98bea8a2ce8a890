"""Coverage of mixlaw's prediction intervals on held-out public data, for each resampling scheme.

Cases (data under ``../shared/data/external``):

- ``epoch``: the Chinchilla replication's 240 digitised points (Besiroglu et al. 2024, 5 highest losses dropped),
  fitted on N ≤ 5e9, the N > 5e9 points held out.
- ``olmo/<domain>``: the OLMo ladder (Bhagia et al. 2024), Chinchilla law per validation domain fitted on the final
  checkpoints of the 20 runs ≤ 1.3B (0.5–10×C), held out: the 3B runs (incl. the rerun), OLMo-2 7B (anneal) and
  13B (final). N of 3B is its 1×C token count / 20 (the ladder's own convention; 3B is not in ``final.json``).
- ``mpl/<size>``: the MultiPowerLaw loss curves (Luo et al. 2025), multi-power law per model size (25M, 100M, 400M)
  fitted on ``cosine_24000``, ``constant_24000`` and ``wsdcon_9`` (the paper's split, every 4th logged step),
  held out: the other six schedules (WSD, WSD-linear, two more two-stage, and the 72k-step cosine and constant runs,
  ×3 in steps), without their rows that repeat a fitted row (the shared trunk before a schedule's own decay, the
  same logged losses: :func:`_repeats_fitted`; 64, 96 and 84 rows at 25M, 100M and 400M).
- ``dml-cpt``: Data Mixing Laws' continual pre-training runs (Ye et al. 2025; Pythia-70M, Pile:Python mixtures),
  the mixing law ``c + k·exp(t·x)`` (``dml``, raw space) fitted per evaluation step (1k–10k) and per loss (the
  weighted Pile loss and the Python loss) on the four training mixtures, held out: the validation run at Pile
  share 0.28515625 (20 points).

For every case and scheme: ``mixlaw validate --holdout … --coverage`` in Python (:func:`mixlaw.api.validate`), 95 %
prediction intervals (``--interval prediction``) of the default method, ``auto``: the *extrapolation-calibrated*
interval (:mod:`mixlaw.fit.evaluate.calibrate`: the bootstrap interval — percentile interval of the draws plus Student-t
noise of ``n − p`` degrees of freedom — widened by the factor that nested validation inside the fitted rows
measures at the query's distance beyond the fitted range; where the fitted runs are curves — the MultiPowerLaw
schedules — plus the new-run term of :mod:`mixlaw.fit.evaluate.calib_runs`, from leave-one-schedule-out fits and forward
cuts within every schedule). For the default scheme the same fits also give the
``bootstrap`` and ``calibrated`` rows. The other schemes are measured with ``bootstrap`` only, with
``--bootstrap-other`` resamples (default 20, half the default scheme's 40, so that the whole table finishes in
about 20 minutes on the shared 2-core machine); ``sizes`` is skipped where the fitted rows hold one model size
(the MultiPowerLaw and Data Mixing Laws cases: nothing to resample). Every fit has a hard cap of ``MAX_ITER`` =
500 iterations (see there; the calibration's nested fits get at least
:data:`mixlaw.fit.evaluate.calibrate.FOLD_MIN_ITER`). Calibration warnings (the extrapolation check) are printed per
case. Every row also gives ``spread``, the range of the held-out losses over their median per validated table
(averaged over the tables): a mean 95 % width (``width95``) near it is an interval as wide as everything held out.
Beside the 95 % coverage: ``ci95``, its exact binomial (Clopper–Pearson) 95 % interval over the points; ``units``,
the independent held-out runs behind the points (a curve, or a run evaluated on several validation sets or at many
steps, counts once: the MultiPowerLaw 72k rows are 2 curves, the OLMo ladder along tokens 10 runs on 11 domains);
and ``ci95_units``, the same interval over the units (each counting with its share of points inside), the honest one
where the points of a unit deviate together. A row of few units all inside (17 of 17: 0.80–1.00) does not tell an
interval too wide from a calibrated one.
The ``mpl/<size>`` cases are also pooled into one row per scheme and method (``mpl pooled``: the headline case,
"the MultiPowerLaw schedules", as the OLMo row pools its 11 domain fits). Prints one table, then ``seconds=``,
``coverage95_worst_issue_cases=`` (the four headline cases, MultiPowerLaw pooled) and last
``coverage95_worst=<lowest 95 % coverage over every row for the default scheme and method>``.

Checks outside the table (``--cases``, not in the default list): ``epoch@CUT`` (Epoch with N > CUT held out),
``olmo@CUT`` (the OLMo ladder fitted on N ≤ CUT, every larger run held out, 3B rerun excluded),
``mplalt/<size>`` (the multi-power law fitted on ``constant_24000``, ``wsdld_20000_24000`` and ``wsdcon_18``, the
six other schedules held out) and ``mlf`` (the over-training testbed of Gadre et al. 2024: the Chinchilla law per
pre-training × validation set, 24 tables, fitted on the models ≤ 411M, the 1.4B and 6.9B models held out) and
``isoflop`` (the IsoFLOP sweeps of ``scaling-law-analysis`` with its outlier flags: Marin 2026-03 on three
datasets, "(Mis)fitting", Llama-3 raw losses; the Chinchilla law per sweep, its largest budget held out).

Rows along the other axes a prediction extrapolates (``--cases``, not in the default list; the calibration's axes
of :mod:`mixlaw.fit.evaluate.calib_axes`): ``olmo-tokens`` (the OLMo ladder per domain, every size 190M-3B fitted at
0.5-2×C, held out: 5× and 10×C at the same sizes), ``mlf-tokens`` (Gadre et al.'s grid per pre-training ×
validation set, models up to 1.4B, fitted at token multipliers ≤ 4, held out: 16 and 32), ``mpl72k/<size>`` (the
multi-power law fitted on the paper's three 24k-step-or-shorter schedules, held out: the 72k-step cosine and
constant runs, rows that repeat a fitted row dropped), ``rep-sim`` (a simulated repetition grid: the
data-constrained law at its published parameters, 3 sizes × 3 unique-token budgets × 1-60 epochs, 1 % noise, four
seeds; fitted on ≤ 4 epochs, held out: 8-60) and the Epoch cuts ``epoch`` (N > 5e9) and ``epoch@1e9``. Out-of-sample
variants of the repetition grid (:data:`REP_VARIANTS`): ``rep-sim/new`` (eight other seeds), ``rep-sim/many`` (forty
other seeds: ten times the fits behind the headline row's coverage), ``rep-sim/rd5`` (the
repetition decay ``R_D*`` = 5) and ``rep-sim/bend`` (the loss times ``exp(0.01 · log(epochs)²)``, a misfit along
epochs).

The scheme measured with every method is ``--default`` (``auto``: ``runs`` on curves, the pooled residual
bootstrap where every run is one row, ``wild`` where ``runs`` leaves more than 20 % unusable;
:func:`mixlaw.fit.uncertainty.bootstrap.bootstrap_law`); the ``weak`` column counts the
fits whose intervals rest on 80 % of their resamples or fewer (:attr:`mixlaw.fit.FitResult.interval_status`).

Measured figures, with the date and commit of each measurement: ``docs/coverage.md``; how the benchmark's counting
and the calibration came to be what they are: ``docs/design/coverage-benchmark.md``,
``docs/design/new-run-term.md``, ``docs/design/bootstrap-scheme.md``, ``docs/design/resample-check.md``.

Run: ``PYTHONPATH=src python benchmarks/coverage.py [--bootstrap 40] [--bootstrap-other 20]
[--schemes auto,runs,sizes,...] [--default auto] [--cases ...] [--save fits.pkl]``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.options import BootstrapOptions, FitOptions, SolverOptions, StartOptions

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
                mult = float(rid.split("-")[1][:-2]) if rid.endswith("xC") else float("nan")
                out.append({"run_id": rid, "n_params": float(n), "tokens": _tokens(row), "loss": float(row[col]),
                            "domain": dom, "rerun": "rerun" in rid, "mult": mult})  # fmt: skip
    df = pd.DataFrame(out)
    fit = df[(df["n_params"] <= 1.3e9) & ~df["rerun"]].reset_index(drop=True)
    held = df[df["n_params"] > 1.3e9].reset_index(drop=True)
    return fit, held


def mlf() -> list[pd.DataFrame]:
    """The over-training testbed of Gadre et al. 2024 (``mlfoundations-scaling``): one table per (pre-training set,
    validation set), the final losses of its models (one row per model), ``split`` = fit (≤ 411M, every token
    multiplier) | test (open_lm_1b and open_lm_7b)."""
    d = pd.read_csv(EXTERNAL / "mlfoundations-scaling" / "models_flat.csv")
    out = []
    for (_, _), g in d.groupby(["train_dataset", "val_data"], sort=True):
        out.append(
            pd.DataFrame(
                {"run_id": g["name"].to_numpy(), "n_params": g["params"].to_numpy(dtype=np.float64),
                 "tokens": g["tokens"].to_numpy(dtype=np.float64), "loss": g["loss"].to_numpy(dtype=np.float64),
                 "split": np.where(g["params"].to_numpy() > 5e8, "test", "fit")}
            )  # fmt: skip
        )
    return out


def olmo_tokens() -> list[pd.DataFrame]:
    """The OLMo ladder along tokens: one table per validation domain, every ladder size (190M-3B, reruns excluded),
    ``split`` = fit for the runs at 0.5-2×C, test for 5× and 10×C (the same sizes, 2.5-5× more tokens)."""
    fit, held = olmo()
    both = pd.concat([fit, held], ignore_index=True)
    both = both[~both["rerun"] & np.isfinite(both["mult"])]
    out = []
    for dom in sorted(both["domain"].unique()):
        t = both[both["domain"] == dom].reset_index(drop=True)
        out.append(t.assign(split=np.where(t["mult"] <= 2, "fit", "test")).drop(columns=["rerun", "domain"]))
    return out


def mlf_tokens() -> list[pd.DataFrame]:
    """The over-training grid of Gadre et al. 2024 along the token multiplier: one table per (pre-training set,
    validation set), the models up to 1.4B; ``split`` = fit for multipliers ≤ 4 (of Chinchilla's 20 tokens per
    parameter), test for 16 and 32 (the same sizes, 4-8× more tokens)."""
    d = pd.read_csv(EXTERNAL / "mlfoundations-scaling" / "models_flat.csv")
    d = d[d["params"] < 5e9]
    out = []
    for (_, _), g in d.groupby(["train_dataset", "val_data"], sort=True):
        m = g["chinchilla_multiplier"].to_numpy(dtype=np.float64)
        keep = (m <= 4) | (m >= 16)
        g, m = g[keep], m[keep]
        out.append(
            pd.DataFrame(
                {"run_id": g["name"].to_numpy(), "n_params": g["params"].to_numpy(dtype=np.float64),
                 "tokens": g["tokens"].to_numpy(dtype=np.float64), "loss": g["loss"].to_numpy(dtype=np.float64),
                 "split": np.where(m <= 4, "fit", "test")}
            )  # fmt: skip
        )
    return out


#: The simulated repetition grid (``rep-sim``): the data-constrained law at its published parameters (Muennighoff et
#: al. 2023) on 3 sizes x 3 unique-token budgets x 1-60 epochs, 1 % noise, one table per seed.
REP_EPOCHS = (1, 1.5, 2, 3, 4, 8, 16, 32, 60)


#: Variants of the grid for out-of-sample checks (``rep-sim/<name>``): seeds, parameters replaced, and a bend
#: ``exp(b · log(epochs)²)`` multiplying the loss (a misfit the law cannot follow beyond the fitted epochs).
REP_VARIANTS: dict[str, tuple[tuple[int, ...], dict[str, float], float]] = {
    "new": (tuple(range(4, 12)), {}, 0.0),
    "many": (tuple(range(12, 52)), {}, 0.0),
    "rd5": ((0, 1, 2, 3), {"R_D_star": 5.0}, 0.0),
    "bend": ((0, 1, 2, 3), {}, 0.01),
}


def rep_sim(
    seeds: tuple[int, ...] = (0, 1, 2, 3), replace: dict[str, float] | None = None, bend: float = 0.0
) -> list[pd.DataFrame]:
    """``split`` = fit for ≤ 4 epochs, test for 8-60 epochs."""
    from mixlaw.laws import get_law

    law = get_law("data_constrained")
    params = {**law.example_params, **(replace or {})}
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        grid = np.array(np.meshgrid([1e8, 3e8, 1e9], [2e9, 6e9, 2e10], REP_EPOCHS, indexing="ij"))
        n, u, ep = (g.ravel() for g in grid)
        x = {"n_params": n, "tokens": ep * u, "unique_tokens": u}
        y = np.asarray(law.evaluate(x, params), dtype=np.float64) * np.exp(bend * np.log(ep) ** 2)
        y = y * np.exp(0.01 * rng.standard_normal(n.size))
        out.append(pd.DataFrame({**x, "loss": y, "run_id": [f"s{seed}-r{i}" for i in range(n.size)],
                                 "split": np.where(ep <= 4, "fit", "test")}))  # fmt: skip
    return out


def isoflop() -> list[pd.DataFrame]:
    """IsoFLOP sweeps (``scaling-law-analysis``, its outlier flags applied): the measured Marin 2026-03 sweeps on
    three datasets, the "(Mis)fitting" sweep and Llama-3's digitised raw losses; one table per sweep, one row per
    model, ``split`` = test for the largest budget, fit for the others."""
    d = pd.read_csv(EXTERNAL / "scaling-law-analysis" / "data" / "isoflops" / "transform" / "isoflops.csv")
    d = d[~d["outlier"].astype(bool) & d["source"].isin(["marin_202603", "misfitting", "llama_3"])]
    d = d[d["condition"].fillna("raw_loss") == "raw_loss"]
    out = []
    for (_, _), g in d.groupby(["source", "dataset"], sort=True):
        top = g["budget"].max()
        out.append(
            pd.DataFrame(
                {"run_id": [f"m{i}" for i in range(len(g))], "n_params": g["params"].to_numpy(dtype=np.float64),
                 "tokens": g["tokens"].to_numpy(dtype=np.float64), "loss": g["loss"].to_numpy(dtype=np.float64),
                 "split": np.where(g["budget"].to_numpy() == top, "test", "fit")}
            )  # fmt: skip
        )
    return out


MPL = EXTERNAL / "MultiPowerLaw" / "loss_curve_repo"
MPL_FIT = ("cosine_24000", "constant_24000", "wsdcon_9")
#: Another split, for the checks outside the table (``mplalt/<size>``): three other schedules fitted, six held out.
MPL_ALT = ("constant_24000", "wsdld_20000_24000", "wsdcon_18")
DML = EXTERNAL / "mixinglaws"


def _mpl_schedule(name: str) -> Any:
    """The MultiPowerLaw schedules (README of the data folder), warm-up 2160 steps 0 → 3e-4."""
    from mixlaw.schedules import Schedule

    w = 2160
    if name.startswith("cosine_"):
        return Schedule.parse(f"cosine:peak=3e-4,steps={name.split('_')[1]},warmup={w},final=3e-5")
    if name.startswith("constant_"):
        return Schedule.parse(f"constant:peak=3e-4,steps={name.split('_')[1]},warmup={w}")
    if name.startswith("wsdld_"):
        return Schedule.parse(f"wsd:peak=3e-4,steps=24000,warmup={w},final=3e-5,decay=4000")
    if name.startswith("wsd_"):
        return Schedule.parse(f"wsd:peak=3e-4,steps=24000,warmup={w},final=3e-5,decay=4000,shape=exp")
    k = int(name.split("_")[1])  # wsdcon_<k>: two-stage, 3e-4 then k·1e-5 from step 8000
    return Schedule.parse(f"multistep:peak=3e-4,steps=16000,warmup={w},milestones=8000,gamma={k * 1e-5 / 3e-4}")


def mpl(size: str, every: int = 4, fitted: tuple[str, ...] = MPL_FIT) -> pd.DataFrame:
    """Every schedule of one size with its multi-power history columns; ``split`` = fit (``fitted``) | test."""
    from mixlaw.schedules.multi_power import multi_power_features

    parts = []
    for f in sorted((MPL / f"csv_{size}").glob("*.csv")):
        d = pd.read_csv(f).iloc[::every]
        s = _mpl_schedule(f.stem)
        x = multi_power_features(s.lrs(), d["step"].to_numpy(), eta0=s.eta0, longest=72000)
        parts.append(pd.DataFrame(x).assign(run_id=f.stem, step=d["step"].to_numpy(), loss=d["loss"].to_numpy()))
    out = pd.concat(parts, ignore_index=True)
    out = out.assign(split=np.where(out["run_id"].isin(fitted), "fit", "test"))
    return out[~_repeats_fitted(out)].reset_index(drop=True)


def _repeats_fitted(table: pd.DataFrame) -> np.ndarray:
    """Held-out rows that *are* fitted rows: the same step and the same logged loss as a row of a fitted schedule.

    The schedules of one size branch from shared trunk runs (every schedule that starts with the constant phase is
    one run up to its own decay: the same losses to the logged digit), so where a held-out schedule has not yet
    left a fitted schedule's trunk its rows are copies of fitted rows, not held-out data. Measured: 64 of 408
    held-out rows at 25M (the trunk of ``wsdcon_9`` up to step 8000), 96 of 416 at 100M and 84 of 416 at 400M (the
    trunk of ``constant_24000``; at 25M ``constant_24000`` is a run of its own, 0.0073 apart on average).
    """
    fit = table[table["split"] == "fit"]
    seen = set(zip(fit["step"].to_numpy(), fit["loss"].to_numpy(), strict=True))
    held = (table["split"] == "test").to_numpy()
    pairs = zip(table["step"].to_numpy(), table["loss"].to_numpy(), strict=True)
    return held & np.array([(s, v) in seen for s, v in pairs], dtype=bool)


def dml_cpt() -> list[pd.DataFrame]:
    """One table per (evaluation step, loss): the five CPT runs at that step, ``split`` = fit | test."""
    import json

    d = pd.read_csv(DML / "tidy" / "ct.csv")
    d = d[d["run"].str.startswith("70M_ct_")]
    weights = json.loads((DML / "pipeline" / "valid_weight.json").read_text())
    pile = d[d["valid_domain"].isin(list(weights))]
    pile = pile.assign(wl=pile["loss"] * pile["valid_domain"].map(weights))
    pile = pile.groupby(["run", "step", "p_pile", "p_python"], as_index=False)["wl"].sum()
    py = d[d["valid_domain"] == "python"].rename(columns={"loss": "wl"})
    tables = []
    for what, src in (("pile", pile), ("python", py)):
        for step, g in src.groupby("step"):
            tables.append(
                pd.DataFrame(
                    {"run_id": g["run"].to_numpy(), "w_pile": g["p_pile"].to_numpy(),
                     "w_python": g["p_python"].to_numpy(), "loss": g["wl"].to_numpy(),
                     "split": np.where(g["run"].str.startswith("70M_ct_9"), "test", "fit"),
                     "case": f"{what}@{step}"}
                )  # fmt: skip
            )
    return tables


SCHEMES = ("auto", "runs", "rows", "residuals", "parametric", "sizes", "wild")
DEFAULT = "auto"
DEFAULT_METHOD = "auto"
#: Prediction-interval methods measured on the fits of the default scheme (one set of fits, every method).
METHODS = ("auto", "bootstrap", "calibrated")
#: Hard iteration cap of every fit here. The adaptive default (run while the objective falls, up to 10,000
#: iterations) let a few resamples that crawl along a flat valley (a multi-power resample drawing one schedule
#: three times, whose decay parameters the data cannot pin down) keep a whole batched solve iterating: the
#: MultiPowerLaw 100M case took 599 s for 100 resamples, 20,092 solver iterations. At the cap a resample is
#: refitted once more from the point estimate, then counted as unusable (the table's `unusable` column).
MAX_ITER = 500
#: Every validation of the run (``--save``: pickled, to measure other interval methods on the same fits).
SAVED: list[dict] = []
#: The ``mpl/<size>`` (and ``mplalt/<size>``) cases' points, pooled into one row per split, scheme and method
#: (:func:`_pooled`).
POOL: list[dict] = []
#: Labels of the issue's four cases (``coverage95_worst_issue_cases``): the MultiPowerLaw schedules count once,
#: pooled over the sizes of the issue's split.
ISSUE_CASES: set[str] = set()
#: Validated tables so far (a running id: the ``table`` column of every case's points, for :func:`_spread`).
TABLES = [0]


def _pooled(scheme: str, methods: tuple[str, ...]) -> list[dict]:
    """One row per method for the MultiPowerLaw schedules of every size measured under ``scheme``, per split (the
    issue's split is the issue's case; the per-size rows stay in the table): the held-out points of the sizes
    together."""
    rows = []
    for alt in (False, True):
        got = [p for p in POOL if p["scheme"] == scheme and p["alt"] == alt]
        if len(got) < 2:
            continue
        nf, nr = sum(p["nf"] for p in got), sum(p["nr"] for p in got)
        weak, secs = f"{sum(p['nw'] for p in got)}/{sum(p['nfit'] for p in got)}", sum(p["s"] for p in got)
        label = f"mpl pooled ({len(got)} sizes)" + (" (other split)" if alt else "")
        if not alt:
            ISSUE_CASES.add(label)
        rows += [_row(label, scheme, m, pd.concat([p["pts"][m] for p in got], ignore_index=True), nf, nr, secs, weak)
                 for m in methods]  # fmt: skip
    return rows


def _validate(
    table: pd.DataFrame, holdout: str, size_column: str, scheme: str, bootstrap: int, methods: tuple[str, ...],
    law: str = "chinchilla", law_options: dict | None = None, n_polish: int = 32,
) -> dict:  # fmt: skip
    from mixlaw import api
    from mixlaw.fit.evaluate.coverage import LEVELS, point_intervals

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes of individual folds are reported in the table instead
        res = api.validate(
            table,
            law,
            FitOptions(
                starts=StartOptions(n_polish=n_polish),
                solver=SolverOptions(max_iter=MAX_ITER),
                bootstrap=BootstrapOptions(
                    resamples=bootstrap, scheme=scheme, calibrate=any(m != "bootstrap" for m in methods)
                ),
                seed=0,
            ),
            holdout=holdout,
            size_column=size_column,
            coverage=False,
            interval="prediction",
            law_options=law_options,
        )
    held = table.reset_index(drop=True).loc[res.points["row"].to_numpy()]
    pts = {}
    for m in methods:
        if m == "calibrated" and res.fits[0].calibration is None:  # too few rows or sizes for a single fold
            cols = {f"{e}_{100 * lv:g}": np.nan for lv in LEVELS for e in ("lo", "hi")}
            pts[m] = res.points.assign(method="none", lo=np.nan, hi=np.nan, **cols)
            continue
        pts[m] = point_intervals(res.points, res.fits[0], held, LEVELS, "prediction", main=0.95, method=m)
    SAVED.append({"res": res, "held": held})
    return {
        "points": pts,
        "n_failed": int(res.folds["n_failed"].sum()),
        "n_resamples": int(res.folds["n_resamples"].sum()),
        "n_weak": int(res.folds["interval_status"].astype(str).str.startswith("weak").sum()),
        "n_fits": len(res.folds),
        "warnings": [w for f in res.fits for w in (f.calibration or {}).get("warnings", [])],
    }


def _row(
    case: str, scheme: str, method: str, pts: pd.DataFrame, n_failed: int, n_resamples: int, seconds: float,
    weak: str = "",
) -> dict:  # fmt: skip
    from mixlaw.fit.evaluate.coverage import coverage_summary

    c = coverage_summary(pts, "prediction")
    lv = {f"cov{int(100 * x['level'])}": x["coverage"] for x in c["levels"]}
    w95 = next(x["mean_rel_width"] for x in c["levels"] if x["level"] == 0.95)
    used = "+".join(sorted(set(pts["method"].astype(str)))) if "method" in pts else method
    inside, units = _inside95(pts)
    return {"case": case, "scheme": scheme, "method": method, "built": used, "n_held": c["n"], **lv,
            "ci95": _binomial_ci(inside, c["n"]), "units": units, "ci95_units": _units_ci(pts), "width95": w95,
            "spread": _spread(pts), "mae": c["mae"], "mre": c["mre"], "unusable": f"{n_failed}/{n_resamples}",
            "weak": weak, "s": seconds}  # fmt: skip


def _inside95(pts: pd.DataFrame) -> tuple[int, int]:
    """``(points inside their 95 % interval, independent units)``: the units are the distinct held-out runs
    (``unit``: a run evaluated on several validation sets or at many steps counts once; a curve is one run)."""
    if not len(pts) or "lo_95" not in pts:
        return 0, 0
    obs = pts["observed"].to_numpy(dtype=np.float64)
    inside = (pts["lo_95"].to_numpy() <= obs) & (obs <= pts["hi_95"].to_numpy())
    units = int(pts["unit"].nunique()) if "unit" in pts else len(pts)
    return int(inside.sum()), units


def _binomial_ci(k: int, n: int, level: float = 0.95) -> str:
    """The exact (Clopper–Pearson 1934) ``level`` interval of a coverage of ``k`` in ``n``, as ``lo-hi``: the true
    coverage values that ``k`` of ``n`` independent points do not reject. 17 of 17 gives 0.80-1.00, which holds 0.95:
    a row of few points all inside is not evidence of an interval too wide."""
    from scipy.stats import beta

    if n <= 0:
        return "-"
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return f"{lo:.2f}-{hi:.2f}"


def _units_ci(pts: pd.DataFrame) -> str:
    """:func:`_binomial_ci` of the 95 % coverage over the independent units instead of the points: each unit counts
    with the share of its points inside, summed and rounded. Points of one run (a curve, a run on 11 validation
    sets) deviate together, so the interval over the points is too narrow where the units are few; over the units
    it is the interval where every run's points are either all inside or all outside (the extreme of that
    dependence)."""
    if not len(pts) or "lo_95" not in pts or "unit" not in pts:
        return "-"
    obs = pts["observed"].to_numpy(dtype=np.float64)
    inside = pd.Series((pts["lo_95"].to_numpy() <= obs) & (obs <= pts["hi_95"].to_numpy()), index=pts.index)
    share = inside.groupby(pts["unit"].to_numpy()).mean()
    return _binomial_ci(int(round(float(share.sum()))), int(share.size))


def _spread(pts: pd.DataFrame) -> float:
    """The spread of the held-out losses, on the scale of ``width95``: per validated table (one fit: a domain, a
    size, a seed), the range of its held-out observations over their median, averaged over the tables. A mean 95 %
    width at or above it is an interval as wide as everything held out: covering, but not informative."""
    if "table" not in pts or "observed" not in pts or not len(pts):
        return float("nan")
    g = pts.groupby("table")["observed"]
    return float(((g.max() - g.min()) / g.median()).mean())


def _case(case: str, scheme: str, methods: tuple[str, ...], bootstrap: int) -> list[dict]:
    t = time.time()
    pts: dict[str, list[pd.DataFrame]] = {m: [] for m in methods}
    nf, nr, nw, nfit, notes = 0, 0, 0, 0, []

    def add(out: dict) -> None:
        nonlocal nf, nr, nw, nfit
        TABLES[0] += 1  # each validated table's held-out losses make one spread (:func:`_spread`)
        for m in methods:  # a held-out run is one unit however many tables (domains, steps) evaluate it
            got = out["points"][m]
            pts[m].append(got.assign(table=TABLES[0], unit=[f"{case}/{r}" for r in got["run_id"].astype(str)]))
        nf, nr = nf + out["n_failed"], nr + out["n_resamples"]
        nw, nfit = nw + out["n_weak"], nfit + out["n_fits"]
        notes.extend(out["warnings"])

    if case == "epoch":
        e = epoch().assign(size=lambda d: np.round(np.log10(d["n_params"]), 1))  # sizes: 0.1-decade bins
        add(_validate(e, "n_params > 5e9", "size", scheme, bootstrap, methods))
        label = "epoch N>5e9"
    elif case.startswith("epoch@"):  # a check outside the table: another cut
        cut = float(case.split("@")[1])
        e = epoch().assign(size=lambda d: np.round(np.log10(d["n_params"]), 1))
        add(_validate(e, f"n_params > {cut:g}", "size", scheme, bootstrap, methods))
        label = f"epoch N>{cut:g}"
    elif case.startswith("olmo@"):  # a check outside the table: fit the sizes <= cut, predict the larger ones
        cut = float(case.split("@")[1])
        fit, held = olmo()
        both = pd.concat([fit, held], ignore_index=True)
        both = both[~both["rerun"]].drop(columns="rerun")
        for dom in sorted(both["domain"].unique()):
            table = both[both["domain"] == dom].reset_index(drop=True)
            add(_validate(table, f"n_params > {cut:g}", "n_params", scheme, bootstrap, methods))
        label = f"olmo <={cut:g}->larger"
    elif case == "olmo":
        fit, held = olmo()
        for dom in sorted(fit["domain"].unique()):
            table = pd.concat([fit[fit["domain"] == dom], held[held["domain"] == dom]], ignore_index=True)
            add(_validate(table.drop(columns="rerun"), "n_params > 1.3e9", "n_params", scheme, bootstrap, methods))
        label = "olmo <=1.3B->3-13B"
    elif case == "mlf":  # a check outside the table: 24 (pre-training set, validation set) tables
        for table in mlf():
            add(_validate(table, "split == 'test'", "n_params", scheme, bootstrap, methods))
        label = "mlf <=411M->1.4B,6.9B"
    elif case == "olmo-tokens":  # along tokens: fit <= 2xC at every size, predict 5x and 10xC
        for table in olmo_tokens():
            add(_validate(table, "split == 'test'", "n_params", scheme, bootstrap, methods))
        label = "olmo tokens <=2xC->5,10xC"
    elif case == "mlf-tokens":  # along the token multiplier: fit <= 4, predict 16 and 32
        for table in mlf_tokens():
            add(_validate(table, "split == 'test'", "n_params", scheme, bootstrap, methods))
        label = "mlf tokens M<=4->16,32"
    elif case == "rep-sim" or case.startswith("rep-sim/"):  # along epochs: fitted on <= 4 epochs, predict 8-60
        seeds, replace, bend = REP_VARIANTS[case.split("/")[1]] if "/" in case else ((0, 1, 2, 3), {}, 0.0)
        for table in rep_sim(seeds, replace, bend):
            add(_validate(table, "split == 'test'", "n_params", scheme, bootstrap, methods, law="data_constrained"))
        label = "rep-sim epochs<=4->8-60" + (f" ({case.split('/')[1]})" if "/" in case else "")
    elif scheme == "sizes" and case.startswith("mpl72k"):
        return []
    elif case.startswith("mpl72k/"):  # along schedule length: fit three 24k-step schedules, predict the 72k ones
        size = case.split("/")[1]
        table = mpl(size, fitted=MPL_FIT)  # the paper's three 24k-step (and shorter) schedules
        table = table[(table["split"] == "fit") | table["run_id"].str.endswith("_72000")].reset_index(drop=True)
        add(_validate(table, "split == 'test'", "n_params", scheme, bootstrap, methods, law="multi_power"))
        label = f"mpl {size}M 24k->72k steps"
    elif case == "isoflop":  # a check outside the table: every IsoFLOP sweep, its largest budget held out
        for table in isoflop():
            add(_validate(table, "split == 'test'", "n_params", scheme, bootstrap, methods))
        label = "isoflop sweeps: top budget"
    elif scheme == "sizes" and (case.startswith("mpl") or case == "dml-cpt"):
        return []  # one model size: the sizes bootstrap has nothing to resample
    elif case.startswith("mpl"):
        size = case.split("/")[1]
        alt = case.startswith("mplalt")
        table = mpl(size, fitted=MPL_ALT if alt else MPL_FIT)
        add(_validate(table, "split == 'test'", "n_params", scheme, bootstrap, methods, law="multi_power"))
        label = f"mpl {size}M 3->6 schedules" + (" (other split)" if alt else "")
    elif case == "dml-cpt":
        opts = {"domains": "pile,python", "fit_space": "raw"}
        for table in dml_cpt():
            add(_validate(table, "split == 'test'", "n_params", scheme, bootstrap, methods, law="dml",
                          law_options=opts, n_polish=8))  # fmt: skip
        label = "dml-cpt 4->1 mixture x20"
    else:
        raise SystemExit(f"unknown case {case!r}")
    s = time.time() - t
    rows = [_row(label, scheme, m, pd.concat(pts[m], ignore_index=True), nf, nr, s, f"{nw}/{nfit}") for m in methods]
    if case.startswith(("mpl/", "mplalt/")):  # kept for the pooled rows (the issue's case: the MPL schedules)
        POOL.append({"scheme": scheme, "pts": {m: pd.concat(pts[m], ignore_index=True) for m in methods}, "nf": nf,
                     "nr": nr, "nw": nw, "nfit": nfit, "s": s, "alt": case.startswith("mplalt/")})  # fmt: skip
    elif case in ("epoch", "olmo", "dml-cpt"):
        ISSUE_CASES.add(label)
    for w in sorted(set(notes)):
        print(f"  warning ({label}): {w}", flush=True)
    return rows


def main() -> None:
    global DEFAULT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=40, help="resamples per fit, default scheme")
    ap.add_argument("--bootstrap-other", type=int, default=20, help="resamples per fit, the other schemes")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--cases", default="epoch,olmo,mpl/25,mpl/100,mpl/400,dml-cpt")
    ap.add_argument("--default", default=DEFAULT, help="the scheme measured with every method (default: %(default)s)")
    ap.add_argument("--save", type=Path, help="pickle every validation (fits, held-out rows) to this file")
    args = ap.parse_args()
    DEFAULT = args.default
    rows = []
    t0 = time.time()
    for scheme in args.schemes.split(","):
        methods = METHODS if scheme == DEFAULT else ("bootstrap",)
        for case in args.cases.split(","):
            got = _case(case, scheme, methods, args.bootstrap if scheme == DEFAULT else args.bootstrap_other)
            rows += got
            if args.save:
                import pickle

                args.save.write_bytes(pickle.dumps(SAVED))
            for r in got:
                print(r, flush=True)
        rows += _pooled(scheme, methods)
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 220, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(df.to_string(index=False))
    print(f"seconds={time.time() - t0:.0f}")
    default = df[(df["scheme"] == DEFAULT) & (df["method"] == DEFAULT_METHOD)]
    issue = default[default["case"].isin(ISSUE_CASES)]
    if 0 < len(issue) < len(default):  # the issue's cases: the MultiPowerLaw schedules as one (pooled over sizes)
        print(f"coverage95_worst_issue_cases={issue['cov95'].min():.3f}")
    print(f"coverage95_worst={default['cov95'].min():.3f}" if len(default) else "coverage95_worst=nan")


if __name__ == "__main__":
    main()
