"""Parameters the data do not pin down travel into the intervals (:mod:`mixlaw.fit.uncertainty.profile`).

The data-constrained law (Muennighoff et al. 2023) is simulated at its published parameters on 3 sizes × 3 unique-token
budgets × 1-60 epochs (0.5 % noise) and fitted on the rows with **one** epoch: nothing in them moves the repetition
decay ``R_D*``. The fit says so (unidentifiable, ``R_D*`` running off on both sides) and its intervals at 16-60
epochs carry every value of ``R_D*`` the fitted rows accept: they cover the held-out runs, where the interval of the
parameter spread alone (``R_D*`` held where the solver left it) misses them, and they say they are unbounded.
Also: fitted on ≤ 4 epochs, a fit whose ``R_D*`` runs off upwards is ``weak``, never a silent ``converged``.
Seeded; a few seconds.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.fit import fit_law
from mixlaw.fit.result import FitResult, FitStatus
from mixlaw.fit.uncertainty.intervals import _band, band, inputs_of
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions

LAW = get_law("data_constrained")


def _table(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    grid = np.array(np.meshgrid([1e8, 3e8, 1e9], [2e9, 6e9, 2e10], [1, 1.5, 2, 3, 4, 8, 16, 32, 60], indexing="ij"))
    n, u, ep = (g.ravel() for g in grid)
    x = {"n_params": n, "tokens": ep * u, "unique_tokens": u}
    y = np.asarray(LAW.evaluate(x, LAW.example_params), dtype=np.float64) * np.exp(0.005 * rng.standard_normal(n.size))
    return pd.DataFrame({**x, "epochs": ep, "loss": y, "run_id": np.arange(n.size)})


def _fit(df: pd.DataFrame, seed: int, calibrate: bool = True, bootstrap: int = 20) -> FitResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # the unidentifiable / weak fits warn: checked below
        return fit_law(
            LAW, df, FitOptions(bootstrap=BootstrapOptions(resamples=bootstrap, calibrate=calibrate), seed=seed)
        )


@pytest.mark.parametrize("seed", [0, 1])
def test_an_unidentified_repetition_decay_gives_intervals_that_cover_and_say_they_are_unbounded(seed: int) -> None:
    df = _table(seed)
    res = _fit(df[df["epochs"] == 1], seed)
    ident = res.identifiability or {}
    assert res.status is FitStatus.UNIDENTIFIABLE and "R_D_star" in ident["undetermined"]
    lo, hi, open_lo, open_hi = ident["profile"]["R_D_star"]
    assert open_lo and open_hi and lo < 15.39 < hi  # every value accepted: the published 15.4 among them
    held = df[df["epochs"] >= 16]
    x, obs = inputs_of(res, held), held["loss"].to_numpy()
    for kind in ("confidence", "prediction"):
        b = band(res, x, level=0.95, kind=kind)  # type: ignore[arg-type]
        assert b is not None and b.note is not None and "R_D_star" in b.note and "unbounded" in b.note
        base = _band(res, x, level=0.95, kind=kind)  # type: ignore[arg-type]
        assert base is not None and np.all(base.lo >= b.lo) and np.all(base.hi <= b.hi)
    inside, inside_base = (b.lo <= obs) & (obs <= b.hi), (base.lo <= obs) & (obs <= base.hi)
    assert inside.all() and inside_base.mean() < 0.95, (inside.mean(), inside_base.mean())  # 85 %, 70 % without
    # the ends are the law's limits (no discount of repeats, repeats worth nothing), not infinite
    assert np.all(np.isfinite(b.lo)) and np.all(np.isfinite(b.hi)) and np.all(b.hi < 2 * obs)
    xi = inputs_of(res, df[df["epochs"] == 1])  # the fitted rows: R_D* does not act where nothing repeats
    bi, base_i = band(res, xi, kind="prediction"), _band(res, xi, kind="prediction")
    assert bi is not None and base_i is not None and bi.note is None
    np.testing.assert_array_equal(bi.lo, base_i.lo)


def test_a_decay_running_off_beyond_the_fitted_epochs_is_weak_not_converged() -> None:
    df = _table(0)
    res = _fit(df[df["epochs"] <= 4], 0, calibrate=False, bootstrap=8)  # the bootstrap interval carries R_D* too
    ident = res.identifiability or {}
    assert ident["status"] == "weak" and "R_D_star" in ident["running_off"]
    assert "do not bound R_D_star" in ident["reason"]
    assert ident["profile"]["R_D_star"][3]  # open above: the data cannot tell 60 from 6e4
    held = df[df["epochs"] >= 16]
    b = band(res, inputs_of(res, held), kind="prediction")
    obs = held["loss"].to_numpy()
    assert b is not None and b.note is not None and np.all((b.lo <= obs) & (obs <= b.hi))


def test_validate_folds_carry_the_verdict_of_their_fit() -> None:
    from mixlaw.fit.evaluate.validate import validate_law

    df = _table(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        val = validate_law("data_constrained", df[df["epochs"] <= 4], FitOptions(seed=0), holdout="epochs > 1")
    fold = val.folds.iloc[0]  # fitted on one epoch: R_D* undetermined, running off both ways
    assert fold["identified"] == "unidentifiable" and fold["rank"] == "6/7" and "R_D_star" in fold["weakest"]
    assert fold["running_off"] == "R_D_star" and fold["at_bounds"] == ""
    assert any(w.startswith("fold fit unidentifiable") and "R_D_star" in w for w in val.warnings)


@pytest.mark.parametrize("seed", [2, 3])
def test_a_carried_parameter_counts_once_whatever_value_the_solver_left_it_at(seed: int) -> None:
    """Fitted on ≤ 4 epochs, ``R_D*`` runs off upwards and the bootstrap draws already spread over it. Its interval
    is the union of the fit's interval and, at accepted values of ``R_D*``, the draws with the effect of their own
    ``R_D*`` replaced by that value's:

    - the carried interval contains the base interval and is narrower than the base interval moved to the ends of
      the prediction envelope (which counts the parameter's spread twice: once in the draws, once along its range);
    - moving the estimate to another accepted value, the draws and the profile unchanged, gives the same interval:
      it does not depend on where in a flat valley the solver stopped."""
    from dataclasses import replace

    from mixlaw.fit.uncertainty.profile import profile_envelope

    df = _table(seed)
    res = _fit(df[df["epochs"] <= 4], seed, calibrate=False, bootstrap=20)
    prof = (res.identifiability or {})["profile"]
    lo_r, hi_r = prof["R_D_star"][:2]
    x = inputs_of(res, df[df["epochs"] == 60])
    w = lambda b: np.log(b.hi / b.lo)  # noqa: E731
    base, carried = _band(res, x, kind="confidence"), band(res, x, kind="confidence")
    assert base is not None and carried is not None and carried.note is not None
    assert np.all(carried.lo <= base.lo) and np.all(carried.hi >= base.hi)
    env = profile_envelope(res.law, res.params, prof, x)
    assert env is not None
    pt = np.log(np.asarray(res.law.evaluate(x, res.params), dtype=np.float64).reshape(-1))
    moved = np.fmax(np.log(base.hi), env[1] + np.log(base.hi) - pt) - np.fmin(
        np.log(base.lo), env[0] + np.log(base.lo) - pt
    )
    assert np.mean(w(carried)) < np.mean(moved) - 0.25 * np.mean(env[1] - env[0])
    other = float(np.sqrt(lo_r * min(hi_r, 1e4 * lo_r)))  # another accepted value, decades from the estimate
    assert abs(np.log10(other / float(res.params["R_D_star"]))) > 0.5
    elsewhere = replace(res, params={**res.params, "R_D_star": other})
    for kind in ("confidence", "prediction"):
        a, b = band(res, x, kind=kind), band(elsewhere, x, kind=kind)  # type: ignore[arg-type]
        assert a is not None and b is not None
        np.testing.assert_allclose(b.lo, a.lo, rtol=1e-12)
        np.testing.assert_allclose(b.hi, a.hi, rtol=1e-12)


def test_the_draws_keep_what_their_own_value_does_only_where_their_other_parameters_do_not_make_up_for_it() -> None:
    """How much of a loose parameter's own effect the draws keep (``c`` of
    :func:`mixlaw.fit.uncertainty.profile._kept`), on Chinchilla draws at one model size: all of it when only the
    irreducible loss ``E`` varies; none when each draw's amplitude ``A`` makes up for its ``E`` (the same prediction
    everywhere); all of it, by default, when the draws do not move ``E`` at all."""
    from mixlaw.fit.uncertainty.profile import _fit_space, _kept

    law = get_law("chinchilla")
    names = list(law.flat_names)
    rng = np.random.default_rng(7)
    p0 = dict(law.example_params)
    flat0 = np.asarray(law.flatten(p0), dtype=np.float64)
    x = {"n_params": np.full(5, 1e9), "tokens": np.geomspace(2e10, 2e11, 5)}
    e_draws = p0["E"] + rng.uniform(-0.3, 0.3, 40)
    alone = np.repeat(flat0[None, :], 40, axis=0)
    alone[:, names.index("E")] = e_draws
    made_up = alone.copy()  # A / N^alpha lowered by what E adds: the prediction is the estimate's
    made_up[:, names.index("A")] = p0["A"] - (e_draws - p0["E"]) * 1e9 ** p0["alpha"]
    still = np.repeat(flat0[None, :], 40, axis=0)
    j = names.index("E")

    def kept(draws: np.ndarray) -> np.ndarray:
        return _kept(law, draws, _fit_space(law, draws, x), flat0, j, x)[2]

    np.testing.assert_allclose(kept(alone), 1.0, atol=1e-9)
    np.testing.assert_allclose(kept(made_up), 0.0, atol=1e-6)
    np.testing.assert_array_equal(kept(still), 1.0)


def test_rows_a_parameter_does_not_move_pick_no_values_to_carry() -> None:
    """Where nothing repeats, ``R_D*`` moves no prediction, and rounding makes any value the extreme one: such rows
    add no values to carry (each costs a pass over the noise draws); a row it moves adds its extremes."""
    from mixlaw.fit.uncertainty.profile import MAX_PINNED, _pinned_values

    grid = np.geomspace(1.0, 1e4, 41)
    rng = np.random.default_rng(0)
    flat = 2.5 + 1e-15 * rng.standard_normal((41, 50))  # 50 rows the parameter does not move
    np.testing.assert_array_equal(_pinned_values(flat, grid), [0, 40])
    bowl = np.log(grid)[:, None] ** 2 - 2 * np.log(grid)[:, None]  # smallest inside the range, largest at an end
    got = _pinned_values(np.hstack([flat, bowl]), grid)
    assert set(got) == {0, 40, int(np.argmin(bowl[:, 0]))} and len(got) <= MAX_PINNED
