"""The mixture laws of laws.md §9–§11 beyond the registry-wide contract: bimix against the paper's five-coefficient
form, the additive law's size-independent optimum and the joint law's moving one, the joint law's paper loadings,
the repetition-aware effective tokens, parameter counts, data-informed guesses and option errors."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.mixture import FittedLaw, MixtureConstraints, MixtureObjective, optimize_mixture
from mixlaw.errors import InputError
from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.laws.mixture_joint import to_paper
from mixlaw.laws.repetition_aware import effective_tokens
from mixlaw.options import FitOptions, StartOptions

DOMS = ("a", "b", "c")


def _simulate(law, params, n: int, seed: int, noise: float = 2e-5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = law.example_inputs(n, rng)
    df = pd.DataFrame(x)
    df["loss"] = law.evaluate(x, params) * np.exp(noise * rng.standard_normal(n))
    return df


def test_bimix_own_domain_form_equals_the_papers_five_coefficients() -> None:
    # laws.md §9.1: L = (A / r^alpha) (B / s^beta + C); only A·B and A·C enter, so A·C and B/C are this law's A, B.
    a_p, alpha, b_p, beta, c_p = 1.7, 0.21, 3.0, 0.55, 1.4
    law = get_law("bimix", domains="a,b,c", domain="b", volume="steps", volume_unit=1.0)
    rng = np.random.default_rng(0)
    r = rng.uniform(0.01, 1.0, 300)
    s = rng.uniform(100, 1e5, 300)
    paper = a_p / r**alpha * (b_p / s**beta + c_p)
    ours = law.evaluate({"w_b": r, "steps": s}, {"A": a_p * c_p, "alpha": alpha, "B": b_p / c_p, "beta": beta})
    np.testing.assert_allclose(ours, paper, rtol=1e-12)
    assert law.inputs == ("w_b", "steps") and law.n_internal == 4


def test_bimix_own_form_is_recovered_from_starts_away_from_the_truth() -> None:
    law = get_law("bimix", domains="a,b,c", domain="a")
    truth = {"A": 3.1, "alpha": 0.08, "B": 2.5, "beta": 0.3}
    df = _simulate(law, truth, 120, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(law, df, FitOptions(starts=StartOptions(use_guess=False), seed=0))
    design = law.start_design()
    u = law.to_internal(truth)
    assert (np.abs(design - u) / (0.1 + np.abs(u))).max(axis=1).min() > 0.1
    for p, v in truth.items():
        assert res.params[p] == pytest.approx(v, rel=0.02), p


def test_fixed_budget_bimix_has_no_volume_term() -> None:
    law = get_law("bimix", domains="a,b", volume="none")
    assert law.inputs == ("w_a", "w_b") and law.param_names == ("A", "alpha")
    x = {"w_a": np.array([0.25]), "w_b": np.array([0.75])}
    got = law.evaluate(x, {"A": [1.0, 2.0], "alpha": [0.5, 0.2]})
    assert got[0] == pytest.approx(0.25**-0.5 + 2.0 * 0.75**-0.2, rel=1e-12)


def test_parameter_counts_match_laws_md() -> None:
    # laws.md §15: additive 2k + 5, joint 4k + 5 (37 at k = 8, the count the paper reports).
    eight = ",".join(f"d{i}" for i in range(8))
    add, joint = get_law("mixture_additive", domains=eight), get_law("mixture_joint", domains=eight)
    assert len(add.flat_names) == 2 * 8 + 5
    # The joint law's loadings a, b are simplexes (scale carried by A, B): 4k + 5 free parameters.
    assert joint.n_internal == 4 * 8 + 5 == 37
    assert get_law("mixture_joint", domains=eight, exponents="mixture").n_internal == 6 * 8 + 3


def test_joint_law_paper_loadings_give_the_same_predictions() -> None:
    law = get_law("mixture_joint", domains="a,b,c")
    p = dict(law.example_params)
    x = law.example_inputs(200, np.random.default_rng(3))
    paper = to_paper(p)
    h = np.column_stack([x[f"w_{d}"] for d in DOMS])
    n, d = x["n_params"] / 1e8, x["tokens"] / 1e9
    bias = 1.0 / (np.asarray(p["C"]) * h ** np.asarray(p["gamma"])).sum(axis=1)
    a_h = (h @ np.asarray(paper["CA"])) ** p["gammaA"]
    b_h = (h @ np.asarray(paper["CB"])) ** p["gammaB"]
    expected = p["E"] + bias + a_h / n ** p["alpha"] + b_h / d ** p["beta"]
    np.testing.assert_allclose(law.evaluate(x, p), expected, rtol=1e-12)


def _optimum(law, params, size: float, tokens: float) -> np.ndarray:
    obj = MixtureObjective(DOMS, {"loss": FittedLaw(law, params)}, fixed_inputs={"n_params": size, "tokens": tokens})
    return optimize_mixture(obj, MixtureConstraints(DOMS, floors=dict.fromkeys(DOMS, 0.02)), n_dirichlet=8).w


def test_additive_optimum_ignores_scale_and_joint_optimum_moves_with_it() -> None:
    add = get_law("mixture_additive", domains="a,b,c")
    p = dict(add.example_params)
    np.testing.assert_allclose(_optimum(add, p, 1e8, 1e9), _optimum(add, p, 1e11, 1e12), atol=1e-5)
    joint = get_law("mixture_joint", domains="a,b,c")
    q = dict(joint.example_params)
    small, big = _optimum(joint, q, 1e8, 2e9), _optimum(joint, q, 3e10, 2e9)
    # The size term grows with b's share (a[1] is the largest loading, gammaA > 0) and fades with N: b is held back
    # at small N and gains share at large N.
    assert big[1] > small[1] + 0.05
    flat = q | {"gammaA": 0.0, "gammaB": 0.0}  # no mixture in the scale terms: the joint law is additive
    np.testing.assert_allclose(_optimum(joint, flat, 1e8, 2e9), _optimum(joint, flat, 3e10, 2e9), atol=1e-5)


def test_effective_tokens_count_first_passes_and_saturate_on_repeats() -> None:
    h, d, u, r1 = 0.1, 1e11, 2e9, 4.0  # r = hD/U = 5 passes
    r = np.linspace(0.01, 60, 5000)
    d_eff = effective_tokens(r * u / d, d, u, r1)
    first = r <= 1
    np.testing.assert_allclose(d_eff[first], (r * u)[first], rtol=1e-12)  # every first-pass token counts
    assert np.all(np.diff(d_eff) > 0) and np.all(d_eff < u * (1 + r1))  # more repeats help, less and less
    assert d_eff[-1] == pytest.approx(u * (1 + r1), rel=1e-5)  # saturates at U (1 + r1) (laws.md §11.2)
    assert effective_tokens(h, d, u, r1) == pytest.approx(u * (1 + r1 * (1 - np.exp(-4 / r1))), rel=1e-12)


def test_repetition_aware_optimal_share_is_interior_and_falls_when_the_pool_shrinks() -> None:
    law = get_law("repetition_aware")
    p = dict(law.example_params)
    h = np.linspace(0.005, 1.0, 2000)

    def best(unique: float) -> float:
        x = {"w_target": h, "unique_tokens": np.full_like(h, unique), "n_params": np.full_like(h, 1e9)}
        x["tokens"] = np.full_like(h, 1e11)
        return float(h[np.argmin(law.evaluate(x, p))])

    big_pool, small_pool = best(2e10), best(1e9)
    assert 0.005 < small_pool < big_pool < 1.0  # gamma > 0 keeps it interior; saturation caps a small pool's use


@pytest.mark.parametrize("name", ["bimix", "repetition_aware", "mixture_additive"])
def test_guess_alone_starts_a_fit_that_reaches_the_truth(name: str) -> None:
    law = get_law(name)
    df = _simulate(law, dict(law.example_params), 160, seed=7)
    guesses = law.guess(df)
    assert guesses and all(set(g) == set(law.param_names) for g in guesses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        res = fit_law(law, df, FitOptions(starts=StartOptions(use_grid=False), seed=0))
    assert res.n_starts == len(guesses)
    truth = law.evaluate({k: df[k].to_numpy() for k in law.inputs}, law.example_params)
    assert np.max(np.abs(res.predict(df) / truth - 1)) < 2e-3


@pytest.mark.parametrize(
    ("name", "opts", "match"),
    [
        ("bimix", {"domain": "z"}, r"option 'domain': expected 'all' or one of a, b, c, got 'z'"),
        ("bimix", {"floor": 0.5}, r"option 'floor': expected a share floor in \(0, 0.1\]"),
        ("mixture_additive", {"tokens": "n_params"}, r"options 'size' and 'tokens' name the same column"),
        ("mixture_joint", {"exponents": "free"}, r"option 'exponents': expected one of 'shared', 'mixture'"),
        ("repetition_aware", {"domain": "a,b"}, r"option 'domain': expected one domain name"),
    ],
)
def test_option_mistakes_are_one_line_errors(name: str, opts: dict, match: str) -> None:
    with pytest.raises(InputError, match=match) as e:
        get_law(name, **opts)
    assert "\n" not in str(e.value)
