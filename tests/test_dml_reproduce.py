"""Data Mixing Laws reproductions on the public ``mixinglaws`` tables (laws.md §7.5; Ye et al., arXiv:2403.16952).

**5-domain notebook** (``mix_5_domains.ipynb``: 70M, 30k steps, 26 mixtures of the Pile regrouped into academic /
prose / dialogue / symbolic / internet). A validation domain's loss is the ``valid_weight``-weighted mean of its Pile
sub-domains; the overall loss is the ``valid_weight``-weighted sum of all 22. The notebook fits one explicit law
``c + k exp(t·r)`` per validation domain on **all 26** mixtures (raw-loss Huber, δ = 0.05) and scores the overall
loss ``Σ_i s_i L_i(r)`` on 6 "eval" mixtures — the eval mixtures are in the fit, so its 0.00862 is in-sample.

What reproduces, measured when written:

- The data pipeline is the authors': the published parameters give, on our table, the mean Huber the notebook
  printed for each domain to 5 significant digits (e.g. academic 0.000568292 vs printed 0.000568288).
- Our fit (the engine's robust fit, ``dml`` with ``fit_space="raw"``, δ = 0.05) reaches the published optimum or a
  hair below it in every domain, and its parameters match the published table in the identifiable form
  (``t_j − t_5``, ``log k + t_5``; the paper's form has a free shift along (1, …, 1)): log c to 1e-4 in all five
  domains; the other entries to 0.002–0.008 (2–3 decimals), the large own-domain entries to ≤ 0.05 %
  (dialogue −38.085 vs −38.067, symbolic −19.579 vs −19.581, prose −5.2625 vs −5.2545: the ill-conditioned
  directions).
- The published 0.00862 cannot be re-scored: the notebook's 20/6 split is ``np.random.shuffle`` (seed 4096) of the
  mixtures in the iteration order of a ``set`` of file lines — string-hash order, different in every Python process
  (``PYTHONHASHSEED``). 13.8 % of the C(26, 6) six-mixture subsets have an MAE ≤ 0.00862 under the published
  parameters (median 0.0115), so the number is an ordinary draw. The same shuffle of ``proportions.txt``'s order
  (the line the notebook commented out) is what we score: published parameters 0.01052, our all-26 fit 0.01051
  (the paper's protocol), and the leak-free protocol — laws fitted on the 20 training mixtures only — 0.0190 (the
  eval mixture without internet data, 0.5-0.1875-0.0625-0.25-0, is an extrapolation: 0.054 alone).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mixlaw.fit import fit_law, objective_at
from mixlaw.laws import get_law
from mixlaw.laws.dml import from_paper
from mixlaw.options import FitOptions, ObjectiveOptions

FIVE = ("academic", "prose", "dialogue", "symbolic", "internet")
GROUPS = {  # mix_5_domains.ipynb, DOMAINS_2_SUBDOMAINS
    "academic": ["ArXiv", "PubMed_Abstracts", "PhilPapers", "NIH_ExPorter", "FreeLaw", "USPTO_Backgrounds",
                 "PubMed_Central"],
    "prose": ["PG19", "Books3", "BookCorpus2"],
    "dialogue": ["Ubuntu_IRC", "OpenSubtitles", "EuroParl", "Enron_Emails", "HackerNews", "YoutubeSubtitles"],
    "symbolic": ["DM_Mathematics", "Github"],
    "internet": ["Pile-CC", "OpenWebText2", "StackExchange", "Wikipedia_en"],
}  # fmt: skip
# laws.md §7.5: the published [log c, log k, t_1..t_5] per validation domain ...
PUBLISHED = {
    "academic": (0.9750, -2.1391, [-10.0864, 2.7140, 2.7106, 2.6083, 1.5866]),
    "prose": (1.2624, -2.1656, [1.3930, -4.6811, 0.7855, 1.8719, 0.5734]),
    "dialogue": (1.1375, -7.1017, [6.7135, 6.2643, -31.8621, 6.6423, 6.2053]),
    "symbolic": (0.4750, -3.6546, [3.3289, 3.6705, 3.1127, -16.4217, 3.1591]),
    "internet": (1.2402, -1.9510, [1.1897, 0.8697, -0.5184, 1.7122, -3.0870]),
}
# ... and the mean Huber (δ = 0.05) the notebook printed beside each of them.
PRINTED_OBJECTIVE = {
    "academic": 0.0005682876217179,
    "prose": 0.00012334295024629682,
    "dialogue": 0.0005513424403034151,
    "symbolic": 0.0001428198884241283,
    "internet": 8.165960753103718e-05,
}
DELTA = 0.05
SEED = 4096  # the notebook's


@pytest.fixture(scope="module")
def five_70m(external: Path) -> tuple[pd.DataFrame, dict[str, float]]:
    """The 26 mixtures at 70M / 30k steps: ``w_<domain>``, ``loss_<domain>`` per validation domain, ``loss``."""
    root = external / "mixinglaws"
    vw = json.loads((root / "pipeline" / "valid_weight.json").read_text())
    d = pd.read_csv(root / "tidy" / "5Mix.csv")
    d = d[(d["model_size"] == "70M") & (d["step"] == 30000)]
    group = {s: g for g, subs in GROUPS.items() for s in subs}
    d = d.assign(group=d["valid_domain"].map(group), vw=d["valid_domain"].map(vw))
    d = d.assign(wl=d["loss"] * d["vw"])
    rows = []
    for run, g in d.groupby("run"):
        assert len(g) == 22, run
        row: dict[str, object] = {"run_id": run, "mixture": str(run).split("-", 1)[1]}
        row |= {f"w_{k}": float(g[f"p_{k}"].iloc[0]) for k in FIVE}
        by = g.groupby("group")
        row |= {f"loss_{k}": float(by.get_group(k)["wl"].sum() / by.get_group(k)["vw"].sum()) for k in FIVE}
        row["loss"] = float(g["wl"].sum())
        rows.append(row)
    share = {k: float(sum(vw[s] for s in GROUPS[k])) for k in FIVE}
    return pd.DataFrame(rows), share


def _huber_mean(r: np.ndarray) -> float:
    a = np.abs(r)
    return float(np.mean(np.where(a <= DELTA, 0.5 * r**2, DELTA * (a - 0.5 * DELTA))))


def _identifiable(log_c: float, log_k: float, t: list[float]) -> np.ndarray:
    """[log c, log k + t_5, t_1 − t_5, …, t_4 − t_5]: the paper's parameters without their free shift."""
    return np.array([log_c, log_k + t[-1], *[v - t[-1] for v in t[:-1]]])


def _inputs(table: pd.DataFrame) -> dict[str, np.ndarray]:
    return {f"w_{k}": table[f"w_{k}"].to_numpy(dtype=np.float64) for k in FIVE}


def _fit_domains(table: pd.DataFrame) -> dict[str, object]:
    law = get_law("dml", domains=",".join(FIVE), fit_space="raw")
    out = {}
    for k in FIVE:
        rows = table[["run_id", *[f"w_{x}" for x in FIVE]]].assign(loss=table[f"loss_{k}"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)  # flat-valley notes: the problem is ill-posed
            out[k] = fit_law(law, rows, FitOptions(objective=ObjectiveOptions(delta=DELTA), seed=0))
    return out


@pytest.fixture(scope="module")
def fits_all_26(five_70m: tuple) -> dict[str, object]:
    """The paper's protocol: one explicit law per validation domain on all 26 mixtures."""
    return _fit_domains(five_70m[0])


def _eval_split(table: pd.DataFrame, root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The notebook's 20/6 shuffle (seed 4096) applied to the mixtures in ``proportions.txt`` order."""
    order = [ln.strip() for ln in (root / "data" / "5Mix" / "proportions.txt").read_text().splitlines() if ln.strip()]
    assert sorted(order) == sorted(table["mixture"])
    np.random.seed(SEED)  # the notebook's legacy global generator, for its exact permutation  # noqa: NPY002
    np.random.shuffle(order)  # noqa: NPY002
    by = table.set_index("mixture")
    return by.loc[order[:20]].reset_index(), by.loc[order[20:]].reset_index()


def test_published_parameters_give_the_printed_objective_on_our_table(five_70m: tuple) -> None:
    table, share = five_70m
    assert len(table) == 26 and sum(share.values()) == pytest.approx(1.0, abs=1e-12)
    law = get_law("dml", domains=",".join(FIVE))
    for k in FIVE:
        pred = law.evaluate(_inputs(table), from_paper(*PUBLISHED[k]))
        got = _huber_mean(table[f"loss_{k}"].to_numpy() - pred)
        # 4-decimal published parameters move the objective by < 1e-4 relative; a wrong aggregation by far more.
        assert got == pytest.approx(PRINTED_OBJECTIVE[k], rel=1e-4), k


def test_explicit_fits_reach_the_published_optimum_and_parameters(five_70m: tuple, fits_all_26: dict) -> None:
    table, _ = five_70m
    fits = fits_all_26
    for k in FIVE:
        res = fits[k]
        p = res.params
        ours = np.array([np.log(p["c"]), np.log(p["k"]), *p["t"]])
        theirs = _identifiable(*PUBLISHED[k])
        obj = _huber_mean(table[f"loss_{k}"].to_numpy() - res.predict(table))
        assert obj <= PRINTED_OBJECTIVE[k] * (1 + 1e-5), (k, obj)  # at least as good a fit as the published one
        assert ours[0] == pytest.approx(theirs[0], abs=5e-4), k  # log c: measured ≤ 1e-4 in every domain
        # Measured: ≤ 0.008 absolute, ≤ 0.05 % on the large own-domain entries (dialogue −38.09 vs −38.07).
        np.testing.assert_allclose(ours, theirs, atol=0.012, rtol=1e-3, err_msg=k)


def test_overall_loss_mae_on_the_six_eval_mixtures_published_and_leak_free(
    five_70m: tuple, fits_all_26: dict, external: Path
) -> None:
    table, share = five_70m
    train, evals = _eval_split(table, external / "mixinglaws")
    assert len(train) == 20 and len(evals) == 6
    law = get_law("dml", domains=",".join(FIVE))
    obs = evals["loss"].to_numpy()
    published = sum(share[k] * law.evaluate(_inputs(evals), from_paper(*PUBLISHED[k])) for k in FIVE)
    mae_published = float(np.mean(np.abs(published - obs)))

    def mae(fits: dict[str, object]) -> float:
        pred = sum(share[k] * fits[k].predict(evals) for k in FIVE)  # type: ignore[attr-defined]
        return float(np.mean(np.abs(pred - obs)))

    leaky, leak_free = mae(fits_all_26), mae(_fit_domains(train))
    # The paper's protocol (fit on all 26): our laws predict the six like the published ones (measured 0.01051 vs
    # 0.01052), and in the range of the published 0.00862 for a six-mixture draw (that exact draw is lost, above).
    assert leaky == pytest.approx(mae_published, abs=5e-4)
    assert 0.005 < leaky < 0.016
    # Leak-free (fit on the 20 only): measured 0.0190, about twice the in-sample figure.
    assert leaky < leak_free < 0.025


def test_implicit_mlp_on_the_six_eval_mixtures_leak_free_and_in_sample(five_70m: tuple, external: Path) -> None:
    """The notebook's implicit rows (K = 1, 3, 5, 10, 30: 0.02685 … 0.00199) come from saved weights
    (``mix5mlp.pt``) whose training is not in the repository; the notebook's only MLP training code (commented out)
    fits all 26 mixtures, eval included. ``dml_mlp`` on the same split as above (docs/mix.md has the full table):
    fitted on the 20 only (leak-free), K = 30 scores 0.0190 (fast protocol) — no better than the explicit law
    leak-free (0.0190) — while K = 1 scores 0.0558; fitted on all 26 (in-sample, the notebook's visible protocol),
    K = 30 reaches 0.0047 with 16 seeds × 5000 steps and 0.0005 with the released protocol (AdaBoost ×30; 70 s,
    not run here): the published figures are reached only in-sample."""
    from mixlaw.surrogates import DmlMlp

    table, _ = five_70m
    train, evals = _eval_split(table, external / "mixinglaws")
    obs = evals["loss"].to_numpy()

    def mae(k: int, rows: pd.DataFrame, **kw: object) -> float:
        return float(np.mean(np.abs(DmlMlp(FIVE, k=k, **kw).fit(rows).predict(evals) - obs)))  # type: ignore[arg-type]

    k1, k5, k30 = mae(1, train), mae(5, train), mae(30, train)  # measured 0.0558, 0.0327, 0.0190
    assert k30 < k5 < k1 and k30 < 0.6 * k1
    assert 0.010 < k30 < 0.030
    leak_free, in_sample = mae(30, train, steps=5000, seeds=16), mae(30, table, steps=5000, seeds=16)
    assert in_sample < 0.35 * leak_free  # measured 0.0047 vs 0.0209


# ---------------------------------------------------------------------------------------------------------------------
# RedPajama, 7 domains (laws.md §7.5, pipeline/run.sh): 20 fitting mixtures at 70M–410M to 30k steps, two 1B runs to
# 100k steps (the default and the optimised mixture). Domain order CC, C4, GitHub, Wikipedia, Books, ArXiv,
# StackExchange (§7.6: likely, unverified). Two mixture strings in the run names do not sum to 1: the default's C4
# share is written 0.168375 (sum 1.0199; the LLaMA mix's 15 % is 1 − the rest = 0.1484375, used here) and the
# optimised 1B run's last share 0.01562 (sum 0.999995; 0.015625, as in proportions.txt).
# ---------------------------------------------------------------------------------------------------------------------
RPJ = tuple(f"rpj_d{i}" for i in range(7))
RPJ_SIZES = {"70M": 18915328, "160M": 85056000, "305M": 201541632, "410M": 302311424, "1B": 805736448}
RPJ_OPTIMISED = (0.125, 0.25, 0.140625, 0.25, 0.09375, 0.125, 0.015625)
RPJ_DEFAULT = (0.66796875, 0.1484375, 0.046875, 0.04296875, 0.04296875, 0.02734375, 0.0234375)


def _key(w: object) -> str:
    return "-".join(f"{float(v):.6f}" for v in w)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def redpajama(external: Path) -> pd.DataFrame:
    """Overall (Pile) loss per run and checkpoint of the 20 fitting mixtures and the two 1B runs."""
    root = external / "mixinglaws"
    vw = json.loads((root / "pipeline" / "valid_weight.json").read_text())
    d = pd.read_csv(root / "tidy" / "RedPajama.csv")
    d = d.assign(wl=d["loss"] * d["valid_domain"].map(vw))
    keys = ["run", "model_size", "step", *[f"p_{x}" for x in RPJ]]
    a = d.groupby(keys, as_index=False).agg(loss=("wl", "sum"), n=("wl", "size"))
    a = a[a["n"] == len(vw)].rename(columns={f"p_{x}": f"w_{x}" for x in RPJ} | {"run": "run_id"})
    w = a[[f"w_{x}" for x in RPJ]].to_numpy(dtype=np.float64)
    total = w.sum(axis=1)
    fix_c4, fix_last = np.abs(total - 1.0199375) < 1e-9, np.abs(total - 0.999995) < 1e-9
    w[fix_c4, 1] = 1.0 - np.delete(w[fix_c4], 1, axis=1).sum(axis=1)
    w[fix_last, 6] = 1.0 - w[fix_last, :6].sum(axis=1)
    a[[f"w_{x}" for x in RPJ]] = w
    fitting = {
        _key(ln.split("-"))
        for ln in (root / "data" / "RedPajama" / "proportions.txt").read_text().splitlines()
        if ln.strip()
    }
    mix = [_key(r) for r in w]
    assert len(fitting) == 20 and _key(RPJ_OPTIMISED) in fitting  # the published optimum is a fitting mixture
    keep = np.array([m in fitting for m in mix]) | (a["model_size"] == "1B").to_numpy()
    return a[keep].assign(n_params=a["model_size"].map(RPJ_SIZES)).reset_index(drop=True)


def test_redpajama_fitting_error_at_30k_steps(redpajama: pd.DataFrame, external: Path) -> None:
    """The released prediction file's 20 step-30000 entries are the 410M runs (our aggregation gives its observed
    values to 1e-12); their MAE is the §7.5 "≈ 0.0008" — of the released pipeline's mixing law, an AdaBoost
    ensemble of 30 implicit MLPs (K = 30) fitted in-sample on those 20 points. The explicit law cannot do that on
    this loss: ``dml`` (8 parameters) reaches an in-sample MAE of 0.0089 (measured; a scipy ``least_squares``
    multi-start reaches the same 0.0088), with ``k → 0`` and two large opposite exponents — a spike, not a trend."""
    pred_file = json.loads((external / "mixinglaws" / "data" / "RPJ.predictions.json").read_text())["full"]
    rows = redpajama[(redpajama["model_size"] == "410M") & (redpajama["step"] == 30000)]
    assert len(rows) == 20
    by_key = {_key(k.split("-")): v["30000"] for k, v in pred_file.items() if "30000" in v}
    pairs = np.array([by_key[_key(r)] for r in rows[[f"w_{x}" for x in RPJ]].to_numpy()])
    np.testing.assert_allclose(pairs[:, 1], rows["loss"].to_numpy(), atol=1e-12)
    assert float(np.mean(np.abs(pairs[:, 0] - pairs[:, 1]))) == pytest.approx(0.0008, abs=5e-5)  # 0.000825
    law = get_law("dml", domains=",".join(RPJ), fit_space="raw")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(law, rows, FitOptions(objective=ObjectiveOptions(delta=DELTA), seed=0))
    mae = float(np.mean(np.abs(res.predict(rows) - rows["loss"].to_numpy())))
    assert 0.004 < mae < 0.012, mae  # an order of magnitude above the MLP ensemble's in-sample 0.0008


@pytest.mark.slow
def test_redpajama_nested_pipeline_ranks_the_published_optimum_first(redpajama: pd.DataFrame) -> None:
    """run.sh's pipeline with our fits: step law on 10k–30k per (mixture, size) extrapolated to 100k, the size law
    with one exponent for every mixture (``--tie_alpha all``) over 70M–410M extrapolated to 1B. Of the 20 fitting
    mixtures, the published optimised mixture gets the lowest predicted 1B/100k loss (measured 2.5148, next 2.5334):
    the same choice as the paper's grid search. Its prediction is 6.1 % below the observed 2.6787 (the paper's
    2.5682 is 4.1 % below; its predictions are 2–4 % low). With one exponent per curve instead (the default), the
    optimum is predicted 2.5616 (4.4 % low) but ranks 5th: four sizes leave a free exponent badly fixed."""
    from mixlaw.decide.mixture.nested import nested

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        out = nested(
            redpajama, domains=RPJ, target_size=RPJ_SIZES["1B"], target_step=100_000, max_fit_step=30_000,
            tie_size_exponent=True, law_options={"fit_space": "raw"},
        )  # fmt: skip
    assert out["n_size_fits"] == 20 and out["size_law"]["tied"] and 0 < out["size_law"]["alpha"] < 1
    ranked = sorted(out["mixtures"], key=lambda m: m["predicted"])
    best = ranked[0]
    assert _key(best["weights"].values()) == _key(RPJ_OPTIMISED)
    assert ranked[1]["predicted"] - best["predicted"] > 0.01  # measured 0.019
    observed = float(
        redpajama.loc[(redpajama["model_size"] == "1B") & (redpajama["step"] == 100_000), :]
        .loc[lambda t: [_key(r) == _key(RPJ_OPTIMISED) for r in t[[f"w_{x}" for x in RPJ]].to_numpy()], "loss"]
        .iloc[0]
    )
    assert observed == pytest.approx(2.6787, abs=1e-4)  # laws.md §7.5
    assert -0.08 < (best["predicted"] - observed) / observed < 0  # low, like the paper's (measured −6.1 %)


def test_redpajama_default_and_optimised_1b_predictions_with_the_mlp_mixing_law(redpajama: pd.DataFrame) -> None:
    """The released pipeline's last stage is the MLP ensemble (laws.md §7.3), not the closed form: the paper's 1B
    predictions, default mixture 2.6502 (observed 2.7133) and optimised 2.5682 (observed 2.6787), come from it. The
    same nested pipeline as above with ``dml_mlp`` as its last stage, measured (docs/mix.md):

    - fast protocol (default, about 1 s; run here): default 2.7345, optimised 2.5198;
    - released protocol (16 seeds × AdaBoost ×30 × 5000 steps, 40 s): default 2.6322, optimised 2.5158;
    - explicit ``dml`` (raw Huber): 2.5601 for both — a flat law, ranking lost (the default mixture, CommonCrawl
      0.668, lies outside every fitting mixture, CommonCrawl ≤ 0.5, so its prediction is an extrapolation: across
      the protocols above it ranges 2.60–2.73).

    The optimised mixture is a fitting mixture, so its prediction is the MLP's in-sample fit of our step → size
    prediction (2.5148, 6.1 % low; the paper's is 4.1 % low): the gap to 2.5682 is in the step and size stages."""
    from mixlaw.decide.mixture.nested import nested

    def run(law: str, opts: dict[str, object]) -> tuple[dict[str, object], float, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            out = nested(
                redpajama, domains=RPJ, target_size=RPJ_SIZES["1B"], target_step=100_000, max_fit_step=30_000,
                tie_size_exponent=True, mixture_law=law, law_options=opts,
            )  # fmt: skip
        by = {_key(p["weights"].values()): p for p in out["validation"]["predictions"]}  # type: ignore[index]
        return out, by[_key(RPJ_DEFAULT)]["predicted"], by[_key(RPJ_OPTIMISED)]["predicted"]

    out, default, optimised = run("dml_mlp", {})
    assert out["mixture_law"]["estimator"].startswith("dml_mlp (fast protocol)")  # type: ignore[index]
    assert default - optimised > 0.1  # ranking preserved, as in the paper (2.6502 vs 2.5682); measured 0.215
    assert default == pytest.approx(2.6502, rel=0.04)  # measured +3.2 % (released protocol: −0.7 %)
    assert -0.08 < (optimised - 2.6787) / 2.6787 < 0  # low, like the paper's −4.1 %; measured −5.9 %
    _, d_exp, o_exp = run("dml", {"fit_space": "raw"})
    assert abs(d_exp - o_exp) < 0.01  # the explicit law cannot tell them apart here (measured 2.5601 both)


def test_mix_nested_cli_runs_the_mlp_last_stage_and_says_so(redpajama: pd.DataFrame, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mixlaw.cli import app

    path = tmp_path / "rpj.csv"
    redpajama.drop(columns=["model_size", "n"]).to_csv(path, index=False)
    argv = ["mix", "nested", str(path), "--domains", ",".join(RPJ), "--target-size", str(RPJ_SIZES["1B"]),
            "--target-step", "100000", "--max-fit-step", "30000", "--tie-size-exponent", "--law", "dml_mlp",
            "--law-option", "steps=500", "--law-option", "k=10"]  # fmt: skip
    res = CliRunner().invoke(app, argv)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "mixture law: dml_mlp (fast protocol): implicit MLP K=10, no boosting, best of 4 seeds" in text
    assert "500 steps" in text and "held-out runs at the target: 2" in text
    bad = CliRunner().invoke(app, [*argv[:-4], "--law-option", "depth=3"])
    assert bad.exit_code == 1 and "dml_mlp has no option 'depth'" in bad.output and "Traceback" not in bad.output


# laws.md §7.5: the 2-domain notebook's 12 (k, b) of log(L − c) = k x + b, x the validation domain's own share, in
# the order model {70M, 160M} × domain {Github, Pile-CC} × step {10k, 20k, 30k} (the order that matches).
TWO_DOMAIN = [
    (-2.4381, -0.5978), (-1.5473, -0.6506), (-1.6405, -0.6819), (-2.9041, -0.5333), (-2.2959, -0.5862),
    (-2.5189, -0.6257), (-3.6654, -0.1843), (-1.6850, -0.7528), (-1.6139, -0.7760), (-0.1236, 1.3070),
    (-2.4178, -0.5877), (-2.7239, -0.6131),
]  # fmt: skip


def _correlation_scan(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """The notebook's recipe: ``c`` of 1000 values in [0, min y) with the highest ``|corr(x, log(y − c))|``, then
    ``log(y − c) = k x + b`` by least squares. Returns ``(c, k, b)``."""
    cs = np.linspace(0.0, float(y.min()), 1000, endpoint=False)
    corr = [abs(np.corrcoef(x, np.log(y - c))[0, 1]) for c in cs]
    c = float(cs[int(np.argmax(corr))])
    k, b = np.polyfit(x, np.log(y - c), 1)
    return c, float(k), float(b)


def test_two_domain_notebook_k_b_pairs_as_loose_targets(external: Path) -> None:
    """The notebook's recipe on the tidy table gives the 12 published pairs — 10 within 0.026 (measured); the
    degenerate 160M Pile-CC 10k curve within 0.032, 160M Github at 10k at (−3.40, −0.29) vs (−3.67, −0.18) — and
    ``dml`` (own/other share, raw Huber δ = 0.02, all three parameters free) fits each curve at least as well as the
    recipe's parameters (its own (k, b) differ by up to 0.19 in k, and by 6 on the degenerate curve: 5 points,
    3 parameters, a flat valley)."""
    d = pd.read_csv(external / "mixinglaws" / "tidy" / "2Mix.csv")
    law = get_law("dml", domains="own,other", fit_space="raw")
    got = []
    for model in ("70M", "160M"):
        for dom in ("Github", "Pile-CC"):
            for step in (10000, 20000, 30000):
                g = d[(d["model_size"] == model) & (d["valid_domain"] == dom) & (d["step"] == step)]
                assert len(g) == 5
                rows = pd.DataFrame({"run_id": g["run"], "w_own": g[f"p_{dom}"], "loss": g["loss"]})
                rows["w_other"] = 1.0 - rows["w_own"]
                c, k, b = _correlation_scan(rows["w_own"].to_numpy(), rows["loss"].to_numpy())
                got.append((k, b))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", category=UserWarning)  # 5 points, 3 parameters
                    res = fit_law(law, rows, FitOptions(objective=ObjectiveOptions(delta=0.02), seed=0))
                recipe = {"c": c, "k": float(np.exp(b)), "t": [k]}
                ours = objective_at(law, rows, res.params, delta=0.02)
                assert ours <= objective_at(law, rows, recipe, delta=0.02) * (1 + 1e-6) + 1e-12, (model, dom, step)
    err = np.abs(np.array(got) - np.array(TWO_DOMAIN))
    assert (err <= [0.35, 0.15]).all(), np.round(err, 3)
    assert (err.max(axis=1) < 0.03).sum() >= 10
