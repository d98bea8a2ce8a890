"""``mix compare``'s prediction intervals contain their point and cover new runs; every row has one or its reason.

The intervals are bias-corrected percentile intervals of the resampled predictions plus residual noise
(:mod:`mixlaw.decide.mixture.intervals`). Before, the plain percentile interval of ``mixture_joint``'s off-centre
resamples could exclude the point prediction (``2.645 [2.654, 4.929]`` on the simulated runs of
``test_mix_intervals.py``); the first test rebuilds that situation deterministically from a fast dml fit whose
resampled parameters are shifted.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.api.mixture import compare
from mixlaw.cli import app
from mixlaw.decide.mixture.intervals import bc_ends, prediction_interval
from mixlaw.fit import fit_law
from mixlaw.fit.uncertainty.intervals import band, inputs_of
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions, SolverOptions

NOISE = 0.01
DOMS = ("web", "code", "math", "books")


def _dml_runs(n: int, seed: int) -> pd.DataFrame:
    law = get_law("dml", domains=DOMS)
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(len(DOMS)), size=n)
    x = {f"w_{d}": w[:, j] for j, d in enumerate(DOMS)}
    y = law.evaluate(x, {"c": 2.1, "k": 0.9, "t": [-1.6, 0.7, -0.9]}) * np.exp(NOISE * rng.standard_normal(n))
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(n)], "n_params": 1e8, **x, "loss": y})


def test_bc_ends_contain_the_point_where_the_percentile_interval_does_not() -> None:
    rng = np.random.default_rng(0)
    sample = rng.normal(1.0, 0.1, size=(4000, 3))  # resamples centred 1 sd (col 1) and 3 sd (col 2) off the point
    point = np.array([1.0, 0.9, 0.7])
    lo, hi, ext = bc_ends(sample, point, 0.95)
    assert ((lo <= point) & (point <= hi)).all()
    q_lo, q_hi = np.quantile(sample, [0.025, 0.975], axis=0)
    assert q_lo[2] > point[2]  # the plain percentile interval excludes the point 3 sd away ...
    assert ext.tolist() == [False, False, True]  # ... and BC had to be extended only there
    assert lo[0] == pytest.approx(q_lo[0], abs=0.01) and hi[0] == pytest.approx(q_hi[0], abs=0.01)  # unshifted: same
    assert lo[1] < q_lo[1] and hi[1] < q_hi[1]  # shifted by 1 sd: the levels move towards the point


def test_shifted_resamples_give_an_interval_around_the_point_not_beside_it() -> None:
    df = _dml_runs(24, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(
            get_law("dml", domains=DOMS),
            df.iloc[:16],
            FitOptions(solver=SolverOptions(max_iter=300), bootstrap=BootstrapOptions(resamples=12), seed=0),
            target="loss",
        )
    # Resampled fits shifted against the point (as mixture_joint's were): c moved up by 8 residual sds.
    shifted = res.bootstrap_params.assign(c=res.bootstrap_params["c"] + 8 * res.residual_sd * float(res.params["c"]))
    res = replace(res, bootstrap_params=shifted)
    test = df.iloc[16:]
    x = inputs_of(res, test)
    point = np.asarray(res.predict(test), dtype=np.float64)
    old = band(res, x, level=0.95, kind="prediction")
    assert old is not None and (old.lo > point).any()  # the percentile interval: beside the point
    lo, hi, ext, reason = prediction_interval(res, x, 0.95, seed=0)
    assert reason is None and np.isfinite(lo).all() and ((lo <= point) & (point <= hi)).all()
    assert ext.any()


@pytest.fixture(scope="module")
def joint_compare() -> tuple[dict, pd.DataFrame, np.ndarray]:
    """120 simulated mixture_joint runs (k = 2, 13 parameters), 2 folds of 60: two fits, 120 held-out runs."""
    doms = ("a", "b")
    law = get_law("mixture_joint", domains=doms)
    rng = np.random.default_rng(1)
    x = law.example_inputs(120, rng)
    truth = np.asarray(law.evaluate(x, law.example_params), dtype=np.float64)
    df = pd.DataFrame(x).assign(
        loss=truth * np.exp(NOISE * rng.standard_normal(120)), run_id=[f"r{i}" for i in range(120)]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # boundary and stall notes of the fold fits
        out = compare(df, domains=doms, targets=["loss"], holdout="mixtures:2", models="mixture_joint", bootstrap=20)
    return out["targets"][0]["models"][0], df, truth


def test_mixture_joint_intervals_contain_their_point_and_cover_new_runs(
    joint_compare: tuple[dict, pd.DataFrame, np.ndarray],
) -> None:
    m, df, truth = joint_compare
    assert m["n_predicted"] == 120 and m["n_interval"] == 120 and m["no_interval"] == []
    p = pd.DataFrame(m["predictions"]).set_index("run_id").loc[df["run_id"]]
    lo, hi, pred = (p[k].to_numpy(dtype=np.float64) for k in ("lo", "hi", "predicted"))
    assert ((lo <= pred) & (pred <= hi)).all()  # every reported interval contains its point
    # Coverage of new runs of each held-out mixture: 200 fresh noisy replicates of its true loss per row.
    rng = np.random.default_rng(11)
    new = truth[:, None] * np.exp(NOISE * rng.standard_normal((len(truth), 200)))
    cover = float(np.mean((lo[:, None] <= new) & (new <= hi[:, None])))
    assert 0.90 <= cover <= 0.99, cover
    assert 0.88 <= m["coverage"] <= 1.0  # the held-out runs themselves (120 points)
    rel_half = np.median((hi - lo) / 2 / pred)
    assert 1.5 * NOISE < rel_half < 6 * NOISE, rel_half  # about ±2σ of the noise, not orders of magnitude wider


def test_every_row_without_an_interval_says_why_and_the_cli_counts_them(tmp_path) -> None:
    df = _dml_runs(20, seed=2)
    df.loc[df.index[-4:], "n_params"] = 3e8  # 4 runs at a size with no training run there (the holdout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        out = compare(df, domains=DOMS, targets=["loss"], holdout="mixtures:2", models="dml,blind", bootstrap=6)
    for m in out["targets"][0]["models"]:
        lo = np.array([q["lo"] for q in m["predictions"]], dtype=np.float64)
        named = {rid for g in m["no_interval"] for rid in g["run_ids"]}
        missing = {q["run_id"] for q, v in zip(m["predictions"], lo, strict=True) if not np.isfinite(v)}
        assert named == missing and m["n_interval"] == m["n_test"] - len(missing)  # no silent gaps
        assert sum(g["n"] for g in m["no_interval"]) == len(missing)
    dml = out["targets"][0]["models"][0]
    assert dml["n_interval"] < 20 and any("no prediction" in g["reason"] for g in dml["no_interval"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        off = compare(df, domains=DOMS, targets=["loss"], holdout="mixtures:2", models="dml,blind", bootstrap=0)
    dml0, blind0 = off["targets"][0]["models"]
    assert dml0["n_interval"] == 0 and dml0["no_interval"][0]["reason"] == "intervals off (--bootstrap 0)"
    assert dml0["no_interval"][0]["n"] == 16  # the other 4: no prediction at 3e8, said so
    assert blind0["n_interval"] >= 16  # the blind interval needs no resamples (every 1e8 row has one)
    for m in (dml0, blind0):
        assert m["n_interval"] + sum(g["n"] for g in m["no_interval"]) == m["n_test"] == 20
    path = tmp_path / "runs.csv"
    df.to_csv(path, index=False)
    argv = ["mix", "compare", str(path), "--domains", ",".join(DOMS), "--target", "loss", "--holdout"]
    res = CliRunner().invoke(app, [*argv, "n_params > 2e8", "--models", "dml,blind", "--bootstrap", "6"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())  # rich wraps long lines
    # a size the models were not fitted at: predicted under rank transfer, each row counted with its reason
    assert "dml: interval on 0 of 4 rows (4: no interval (prediction or interval not finite))" in text
    assert "blind: interval on 0 of 4 rows (4: levels not comparable (rank transfer from another size))" in text
