"""The CMR-paper laws and the exponential ratio law: registry, broadcasting, published numbers, options."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mixlaw.errors import InputError
from mixlaw.laws import get_law, law_names
from mixlaw.laws.dloss_general import canonical_params

CMR_NAMES = ("ratio_power", "ratio_exp", "dloss_domain", "dloss_general", "cmr_law")

# laws.md §6.6: (alpha4, s4, beta3) per size, T in 0.2B-token units, and the derived checks.
PUBLISHED_CMR = {
    "460M": ((0.22524761, 0.26944345, -0.48139982), 0.2976, 0.1649, 0.5158),
    "940M": ((0.7520627, 0.13720245, -1.06581937), 0.3489, 0.2205, 0.5384),
    "1.6B": ((-2.36384831, -0.15125569, 1.59223649), 0.4143, 0.2841, 0.5668),
    "3.1B": ((-2.5368197, -0.42071423, 0.84375368), 0.4783, 0.3545, 0.5952),
}


def _params(size: str) -> dict[str, float]:
    return dict(zip(("alpha4", "s4", "beta3"), PUBLISHED_CMR[size][0], strict=True))


def test_registered() -> None:
    names = law_names()
    for n in CMR_NAMES:
        assert n in names


@pytest.mark.parametrize(
    ("name", "opts"),
    [(n, {}) for n in CMR_NAMES] + [("dloss_domain", {"pin_zero": True}), ("dloss_general", {"pin_zero": True})],
)
def test_broadcasting_and_grid(name: str, opts: dict[str, bool]) -> None:
    law = get_law(name, **opts)
    x = {k: torch.linspace(0.1, 1.0, 7, dtype=torch.float64) * (1e10 if k == "tokens" else 1.0) for k in law.inputs}
    grid = law.internal_grid()
    assert grid.shape[1] == len(law.param_names) and grid.shape[0] >= 50
    p = law.to_natural(torch.as_tensor(grid[:5]))
    assert law.predict(x, p).shape == (5, 7)
    assert law.formula and "arXiv" in law.citation and law.fit_space == "raw"
    y = law.evaluate({k: v.numpy() for k, v in x.items()}, law.example_params)
    assert y.shape == (7,) and np.all(np.isfinite(y))


@pytest.mark.parametrize("size", list(PUBLISHED_CMR))
def test_published_cmr_law_values(size: str) -> None:
    """R_CMR(50/100/250) from the published parameters (laws.md §6.6), 20B tokens = T 100."""
    law = get_law("cmr_law")
    _, r100, r50, r250 = PUBLISHED_CMR[size]
    got = law.evaluate({"tokens": np.array([10e9, 20e9, 50e9])}, _params(size))
    np.testing.assert_allclose(got, [r50, r100, r250], atol=5e-5)


def test_published_t0_one_third() -> None:
    """T0(1/3) = 118.1 (460M, > 100: infeasible) and 92.3 (940M, feasible) in 0.2B-token units."""
    law = get_law("cmr_law")
    t460 = float(law.t0_tokens(1 / 3, _params("460M"))) / 2e8
    t940 = float(law.t0_tokens(1 / 3, _params("940M"))) / 2e8
    assert t460 == pytest.approx(118.1, abs=0.05) and t460 > 100
    assert t940 == pytest.approx(92.3, abs=0.05) and t940 < 100
    table = {"460M": (79.1, 118.1, 235.6), "940M": (59.0, 92.3, 209.6), "1.6B": (42.2, 64.4, 164.7),
             "3.1B": (31.6, 45.2, 115.7)}  # fmt: skip
    for size, want in table.items():
        got = law.t0_tokens(np.array([0.25, 1 / 3, 0.5]), _params(size)) / 2e8
        np.testing.assert_allclose(got, want, atol=0.06)


def test_token_unit_rescales_parameters() -> None:
    """The same curve in another token unit: ``alpha' = alpha * (u / u')^s``."""
    a = get_law("cmr_law", token_unit=2e8)
    b = get_law("cmr_law", token_unit=1e6)
    p = _params("460M")
    pb = dict(p, alpha4=p["alpha4"] * (2e8 / 1e6) ** (-p["s4"]))
    t = np.array([1e9, 2e10, 7e10])
    np.testing.assert_allclose(a.evaluate({"tokens": t}, p), b.evaluate({"tokens": t}, pb), rtol=1e-12)
    with pytest.raises(InputError):
        get_law("cmr_law", token_unit=0)
    with pytest.raises(InputError):
        get_law("dloss_general", token_unit="x")


def test_t0_inverse_undefined_is_nan() -> None:
    law = get_law("cmr_law")
    # 460M saturates upward; a ratio below beta3 has no T0
    assert np.isnan(law.t0_tokens(-0.6, _params("460M")))


def test_pin_zero_passes_through_origin() -> None:
    for name in ("dloss_domain", "dloss_general"):
        law = get_law(name, pin_zero=True)
        assert "beta1" not in law.param_names and "beta2" not in law.param_names
        y = law.evaluate({"tokens": np.array([0.0, 1e6])}, law.example_params)
        assert y[0] == 0.0 and y[1] != 0.0
        assert law.options["pin_zero"] is True
        assert law.spec(law.param_names[1]).lower == 0.0


def test_dloss_general_rises_then_falls_and_canonical_order() -> None:
    law = get_law("dloss_general")
    p = {"alpha2": 0.01, "s2": 0.5, "alpha3": -0.0005, "s3": 1.0, "beta2": 0.0}
    t = np.linspace(1, 1000, 2000) * 2e8
    y = law.evaluate({"tokens": t}, p)
    peak = t[np.argmax(y)] / 2e8
    assert peak == pytest.approx((0.01 * 0.5 / (0.0005 * 1.0)) ** 2, rel=1e-2)  # (-a s2 / (b s3))^(1/(s3-s2))
    swapped = {"alpha2": -0.0005, "s2": 1.0, "alpha3": 0.01, "s3": 0.5, "beta2": 0.0}
    assert canonical_params(swapped) == p


def test_ratio_laws_example_values() -> None:
    # 460M domain loss, Table 2 derived least-squares parameters (laws.md §6.6)
    y = get_law("ratio_power").evaluate({"ratio": np.array([0.25])}, {"alpha": -0.42613, "s": 0.1781, "beta": 1.88902})
    assert y[0] == pytest.approx(1.5561, abs=2e-4)
    # Pile-side Data Mixing Laws fit: at the critical Pile share 0.2862 the loss is the pre-CPT 2.87337
    y = get_law("ratio_exp").evaluate({"ratio": np.array([0.2862])}, {"c": 2.8103, "k": -3.7407, "b": -1.6936})
    assert y[0] == pytest.approx(2.87337, abs=2e-4)
