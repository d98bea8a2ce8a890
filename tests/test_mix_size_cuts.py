"""The nested size cuts behind ``mix compare``'s intervals across sizes (:mod:`mixlaw.decide.mixture.size_folds`,
:func:`mixlaw.decide.mixture.intervals.size_widening`), on simulated truths. Seeded; a few seconds.

- Three fitted sizes (the shipped probes; SlimPajama fitted up to 680M): the engine's size calibration forms no
  nested fit there (it keeps three sizes per fold); the cut on two sizes gives the extrapolation term, and a
  held-out size farther than that cut reached is flagged.
- A cut whose fitted runs share one token count cannot determine the token term: left out, with its reason.
- The term comes from the cut nearest the full fit and is robust to one mixture a cut extrapolates wildly.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.intervals import SizeStatus, cut_excess, prediction_interval, size_widening
from mixlaw.decide.mixture.size_folds import SizeFolds, size_folds
from mixlaw.fit import fit_law
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.uncertainty.intervals import inputs_of
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

POWER = get_law("power_law", input="n_params")
TRUTH = {"A": 40.0, "E": 2.0, "alpha": 0.3}


def _three_sizes(seed: int, bend: float) -> pd.DataFrame:
    """Power law in size bent by ``exp(bend · log(n / 1e8)²)`` (0.5 % noise, 4 runs per size): fitted at 1e8, 3e8,
    1e9; held out at 2.2e9 (0.79 e-folds beyond, as the probes' 113k beyond 51k) and 2e10 (3.0 e-folds)."""
    rng = np.random.default_rng(seed)
    n = np.repeat([1e8, 3e8, 1e9, 2.2e9, 2e10], 4)
    y = np.asarray(POWER.evaluate({"n_params": n}, TRUTH), dtype=np.float64)
    y = y * np.exp(bend * np.log(n / 1e8) ** 2 + 0.005 * rng.standard_normal(n.size))
    return pd.DataFrame({"n_params": n, "loss": y, "run_id": [f"r{i}" for i in range(n.size)]})


def _widening(seed: int, bend: float) -> tuple[object, pd.DataFrame, np.ndarray, np.ndarray]:
    df = _three_sizes(seed, bend)
    train, test = df[df["n_params"] <= 1e9], df[df["n_params"] > 1e9]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(
            POWER,
            train,
            FitOptions(
                starts=StartOptions(given=[{"A": 30.0, "E": 1.5, "alpha": 0.25}]),
                bootstrap=BootstrapOptions(resamples=20, scheme="parametric"),
                seed=seed,
            ),
        )
    lo, hi, _, reason = prediction_interval(res, inputs_of(res, test), 0.95, seed)
    assert reason is None
    return size_widening(res, train, test, "loss", "n_params", lo, hi, seed), test, lo, hi


def test_three_fitted_sizes_get_a_size_term_from_the_two_size_cut_and_far_rows_are_flagged() -> None:
    from mixlaw.fit.evaluate.calibrate import fold_errors

    inside_bc, inside, ratio = [], [], []
    for seed in range(4):
        w, test, lo, hi = _widening(seed, bend=0.02)
        near = test["n_params"].to_numpy() < 3e9
        # the engine's calibration has no nested fit on three sizes (each fold keeps three): nothing to widen by
        df = _three_sizes(seed, 0.02)
        train = df[df["n_params"] <= 1e9]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)
            res = fit_law(
                POWER, train, FitOptions(starts=StartOptions(given=[{"A": 30.0, "E": 1.5, "alpha": 0.25}]), seed=seed)
            )
        data = FitData(POWER, train, target="loss", input_map=res.input_map, group_column="run_id")
        fe = fold_errors(POWER, data, np.asarray(POWER.to_internal(res.params))[None, :], size_input="n_params",
                         clusters=pd.factorize(train["n_params"])[0], rng=np.random.default_rng(0), loss=res.loss,
                         delta=res.delta)  # fmt: skip
        assert fe is None or not (fe.d > 0).any()
        assert w.folds is not None and w.cut[0] >= 0 and w.folds.n_sizes[w.cut[0]] == 2
        assert w.kappa[0] > 0
        assert [w.status[i] for i in np.flatnonzero(near)] == [SizeStatus.CALIBRATED] * int(near.sum())
        assert [w.status[i] for i in np.flatnonzero(~near)] == [SizeStatus.BEYOND_NESTED] * int((~near).sum())
        assert "NOT calibrated on 4 rows" in w.summary(True) and w.to_dict()["status"] == "beyond_nested"
        lo2, hi2 = w.ends("log")
        assert np.all(lo2 <= lo) and np.all(hi2 >= hi) and np.all((lo2 <= w.point) & (w.point <= hi2))
        obs = test["loss"].to_numpy()
        inside_bc.append(((lo <= obs) & (obs <= hi))[near])
        inside.append(((lo2 <= obs) & (obs <= hi2))[near])
        ratio.append((np.log(hi2 / lo2) / 2 / np.abs(np.log(w.point / obs)))[near])
    bc, cal = float(np.concatenate(inside_bc).mean()), float(np.concatenate(inside).mean())
    assert bc <= 0.25 and cal >= 0.75, (bc, cal)
    assert float(np.median(np.concatenate(ratio))) < 2.0  # covering, not by a width far beyond the error


def test_the_term_is_small_when_the_law_is_right() -> None:
    bent = _widening(0, bend=0.02)[0].kappa[0]
    right = _widening(0, bend=0.0)[0].kappa[0]
    assert right < 0.25 * bent, (right, bent)


def test_a_cut_whose_runs_share_one_token_count_is_left_out() -> None:
    """Chinchilla ``E + A/N^α + B/D^β`` on 4 sizes, the two smallest trained on the same tokens (as SlimPajama's
    122M and 310M on 20B): the upward cut on those two cannot see the token term and is not used."""
    law = get_law("chinchilla")
    n = np.repeat([1.2e8, 3.1e8, 6.8e8, 9.4e8], 3)
    d = np.repeat([2e10, 2e10, 2.6e10, 3.5e10], 3)
    p = {"A": 400.0, "B": 400.0, "E": 1.7, "alpha": 0.34, "beta": 0.28}
    rng = np.random.default_rng(0)
    y = np.asarray(law.evaluate({"n_params": n, "tokens": d}, p)) * np.exp(0.003 * rng.standard_normal(n.size))
    df = pd.DataFrame({"n_params": n, "tokens": d, "loss": y, "run_id": [f"r{i}" for i in range(n.size)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(law, df, FitOptions(starts=StartOptions(given=[{**p, "E": 1.5, "alpha": 0.3}]), seed=0))
    data = FitData(law, df, target="loss", input_map=res.input_map, group_column="run_id")
    f = size_folds(law, data, res.params, "n_params", loss=res.loss, delta=res.delta, max_iter=None)
    assert f is not None
    assert any(s.startswith("fit 1.2e+08-3.1e+08") and "tokens takes one value" in s for s in f.dropped)
    assert not any(c.startswith("fit 1.2e+08-3.1e+08") for c in f.cuts)
    assert any(c.startswith("fit 1.2e+08-6.8e+08") for c in f.cuts)  # the cut leaving out the largest size stays


def _folds(errors: list[np.ndarray], n_sizes: list[int], d: list[float]) -> SizeFolds:
    e = np.concatenate(errors)
    fold = np.concatenate([np.full(len(x), j) for j, x in enumerate(errors)])
    return SizeFolds(e=e, d=np.array([d[j] for j in fold]), fold=fold, up=np.ones(e.size, dtype=bool),
                     s2=np.full(e.size, 1e-4), cuts=tuple(f"cut{j}" for j in range(len(errors))),
                     n_sizes=tuple(n_sizes), dropped=())  # fmt: skip


def test_cut_excess_reads_the_nearest_cut_and_ignores_one_wild_mixture() -> None:
    rng = np.random.default_rng(1)
    near = 0.05 + 0.02 * rng.standard_normal(7)
    far = 0.25 + 0.05 * rng.standard_normal(7)  # a cut on fewer sizes errs more
    f = _folds([far, near], [2, 3], [1.4, 0.8])
    k2, cut, reach = cut_excess(f, f.up)
    assert cut == 1 and reach == 0.8
    expect = (np.median(near) ** 2 + (1.4826 * np.median(np.abs(near - np.median(near)))) ** 2 - 1e-4) / 0.8
    assert np.isclose(k2, expect)
    wild = near.copy()
    wild[3] = 12.4  # one mixture extrapolated to e^12 times its loss
    k2_wild, _, _ = cut_excess(_folds([far, wild], [2, 3], [1.4, 0.8]), f.up)
    assert k2_wild < 2 * k2 and np.mean(wild**2) / 0.8 > 1000 * k2
    assert cut_excess(f, ~f.up) == (0.0, -1, 0.0)


def test_law_auto_says_when_the_target_lies_beyond_the_nested_holdouts_reach() -> None:
    from mixlaw.decide.mixture.law_choice import LawChoice, LawChoiceStatus, LawScore

    score = (LawScore("mixture_joint", 0.01, 0.01, True, ()),)
    far = LawChoice("mixture_joint", LawChoiceStatus.CHOSEN, 9.37e8, score, reach_factor=9.37 / 6.8,
                    target_factor=2.718 / 0.937)  # fmt: skip
    assert far.reach is SizeStatus.BEYOND_NESTED and "NOT calibrated" in far.text and "2.90x" in far.text
    assert far.to_dict()["size_reach"]["status"] == "beyond_nested"
    near = LawChoice("mixture_joint", LawChoiceStatus.CHOSEN, 9.37e8, score, reach_factor=9.37 / 6.8,
                     target_factor=1.235 / 0.937)  # fmt: skip
    assert near.reach is SizeStatus.CALIBRATED and "NOT" not in near.text
    assert LawChoice("mixture_joint", LawChoiceStatus.CHOSEN, 9.37e8, score).reach is None


def test_mix_compare_names_the_rows_beyond_the_cuts_reach() -> None:
    """``mix compare`` across sizes on runs simulated from CAMEL (k = 2, 0.3 % noise): fitted at 5e7-1.2e9, held out
    at 2.4e9 (0.69 e-folds, within the 4e8 → 1.2e9 cut's 1.10) and 1.2e10 (2.3 e-folds, beyond it)."""
    import math

    from mixlaw.decide.mixture.compare import compare

    doms = ("web", "code", "math")
    law = get_law("camel", domains=",".join(doms))
    rng = np.random.default_rng(0)
    rows = []
    for i, w in enumerate(rng.dirichlet(np.full(3, 0.8), size=8)):
        for n in (5e7, 1.5e8, 4e8, 1.2e9, 2.4e9, 1.2e10):
            x = {"n_params": np.array([n]), "w_web": w[:1], "w_code": w[1:2], "w_math": w[2:]}
            y = float(law.evaluate(x, law.example_params)[0]) * math.exp(3e-3 * rng.standard_normal())
            rows.append({"run_id": f"m{i}_{n:.0e}", "n_params": n, "w_web": w[0], "w_code": w[1],
                         "w_math": 1.0 - w[0] - w[1], "loss": y})  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        out = compare(pd.DataFrame(rows), domains=doms, targets=["loss"], holdout="n_params > 1.5e9", models="camel",
                      bootstrap=10, random_state=0)  # fmt: skip
    (m,) = out["targets"][0]["models"]
    (cal,) = m["size_calibration"]
    assert cal["status"] == "beyond_nested" and cal["n_rows"] == {"calibrated": 8, "beyond_nested": 8, "no_nested": 0}
    assert cal["cut_above"] == "fit 5e+07-4e+08 -> 1.2e+09" and math.isclose(cal["reach_factor_above"], 3.0)
    assert "NOT calibrated on 8 rows up to x10.00" in m["interval_method"]
    assert all(p["lo"] <= p["predicted"] <= p["hi"] for p in m["predictions"])
