"""Property tests every registered law must satisfy (the contract the batched fitter relies on)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mixlaw.fit.solver.solve import _residuals_and_jacobian
from mixlaw.laws import LAWS, get_law, law_names

NAMES = law_names()
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _inputs(name: str, seed: int, n: int = 7) -> dict[str, torch.Tensor]:
    law = get_law(name)
    x = law.example_inputs(n, np.random.default_rng(seed))
    return {k: torch.tensor(np.asarray(v, dtype=np.float64)) for k, v in x.items()}


def _jittered_internal(name: str, seed: int, S: int, scale: float) -> torch.Tensor:
    law = get_law(name)
    u0 = law.to_internal(law.example_params)
    rng = np.random.default_rng(seed)
    return torch.tensor(u0[None, :] + scale * rng.standard_normal((S, len(u0))))


@pytest.mark.parametrize("name", NAMES)
def test_law_declares_its_contract(name: str) -> None:
    law = get_law(name)
    assert LAWS[name].name == name
    assert law.formula and law.citation and law.inputs
    assert set(law.example_params) == set(law.param_names)
    assert type(law).__doc__ and "arXiv" in (type(law).__doc__ or "") + law.citation
    grid = law.internal_grid()
    assert grid.ndim == 2 and grid.shape[1] == law.n_internal and np.isfinite(grid).all()
    assert law.fit_space in ("log", "raw")


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_natural_internal_round_trip(name: str, seed: int) -> None:
    law = get_law(name)
    u = _jittered_internal(name, seed, 1, 0.3)[0]
    nat = law.natural(u.numpy(), canonical=False)
    np.testing.assert_allclose(law.to_internal(nat), u.numpy(), rtol=1e-7, atol=1e-7)
    for s in law.param_specs:
        if s.transform is None:
            assert np.all((s.lower <= np.asarray(nat[s.name])) & (np.asarray(nat[s.name]) <= s.upper))


@pytest.mark.parametrize("name", NAMES)
@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), S=st.integers(1, 4))
def test_broadcasting_per_start_equals_per_point_parameters(name: str, seed: int, S: int) -> None:
    """Params (S, 1) and their per-point copies (S, n) must give the same (S, n) prediction, row by row equal to
    a single-start evaluation: this is what makes the one-pass Jacobian and the batched solve exact."""
    law = get_law(name)
    x = _inputs(name, seed)
    n = next(iter(x.values())).shape[0]
    U = _jittered_internal(name, seed, S, 0.05)
    with torch.no_grad():
        a = law.predict(x, law.to_natural(U))
        b = law.predict(x, law.to_natural(U.unsqueeze(1).expand(-1, n, -1)))
        assert a.shape == (S, n)
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
        for k in range(S):
            single = law.predict(x, law.to_natural(U[k : k + 1]))
            torch.testing.assert_close(a[k : k + 1], single, rtol=1e-12, atol=1e-12)
        if law.fit_space == "log":
            torch.testing.assert_close(law.log_predict(x, law.to_natural(U)), torch.log(a), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_one_pass_jacobian_matches_finite_differences(name: str) -> None:
    law = get_law(name)
    x = _inputs(name, 0)
    U = _jittered_internal(name, 1, 2, 0.05)

    def resid(V: torch.Tensor, pid: torch.Tensor) -> torch.Tensor:
        p = law.to_natural(V)
        return law.log_predict(x, p) if law.fit_space == "log" else law.predict(x, p)

    n = next(iter(x.values())).shape[0]
    r, J = _residuals_and_jacobian(resid, U, torch.zeros(2, dtype=torch.long), n)
    h = 1e-6
    for j in range(U.shape[1]):
        e = torch.zeros_like(U)
        e[:, j] = h
        with torch.no_grad():
            fd = (resid(U + e, None) - resid(U - e, None)) / (2 * h)  # type: ignore[arg-type]
        torch.testing.assert_close(J[:, :, j], fd, rtol=1e-4, atol=1e-6 * (1 + float(fd.abs().max())))
