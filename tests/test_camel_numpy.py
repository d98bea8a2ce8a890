"""A law's analytic natural-parameter derivatives (``log_predict_grad``, CAMEL's in numpy) and its autograd-free
value match the torch/autograd path they replace in the solver: the Jacobian to 1e-10 relative."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mixlaw.fit.problem.data import make_residuals
from mixlaw.fit.solver.steps import split_jacobian
from mixlaw.laws import get_law, law_names


def _with_grad() -> list[str]:
    return [n for n in law_names() if getattr(get_law(n), "log_predict_grad", None) is not None]


def _law(name: str, n_dom: int, k: int):  # type: ignore[no-untyped-def]
    opts = {"domains": tuple(f"d{j}" for j in range(n_dom)), "k": k} if name == "camel" else {}
    return get_law(name, **opts)


def _data(law, n: int, rng: np.random.Generator) -> tuple[dict[str, torch.Tensor], torch.Tensor]:  # type: ignore[no-untyped-def]
    x = {c: torch.tensor(v, dtype=torch.float64) for c, v in law.example_inputs(n, rng).items()}
    with torch.no_grad():
        y = law.predict(x, {k: torch.tensor(v, dtype=torch.float64) for k, v in law.check_params(
            law.example_params).items()}) * torch.tensor(np.exp(rng.normal(0, 0.05, n)))  # fmt: skip
    return x, y


def test_camel_declares_analytic_derivatives() -> None:
    assert "camel" in _with_grad()


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n_dom=st.integers(2, 7),
    k=st.integers(1, 4),
    spread=st.floats(0.1, 3.0),
    n_prob=st.integers(1, 3),
)
def test_analytic_jacobian_matches_autograd(seed: int, n_dom: int, k: int, spread: float, n_prob: int) -> None:
    rng = np.random.default_rng(seed)
    for name in _with_grad():
        law = _law(name, n_dom, k)
        n = int(rng.integers(5, 60))
        x, y = _data(law, n, rng)
        Y = y[None, :] * torch.tensor(np.exp(rng.normal(0, 0.02, (n_prob, n))))
        res = make_residuals(law, x, Y if n_prob > 1 else y)
        u0 = law.to_internal(law.example_params)
        S = 6
        U = torch.tensor(u0 + rng.normal(0, spread, (S, law.n_internal)))
        pid = torch.tensor(rng.integers(0, n_prob, S))
        r_new, J_new = split_jacobian(res, U, pid, n)  # type: ignore[misc]
        del res.natural_grad  # type: ignore[attr-defined]
        Ue = U.unsqueeze(1).expand(-1, n, -1).clone().requires_grad_(True)
        with torch.enable_grad():
            r_old = res(Ue, pid)  # autograd path: the one-pass Jacobian of before
            (J_old,) = torch.autograd.grad(r_old.sum(), Ue)
        r_old = r_old.detach()
        assert torch.isfinite(J_old).all()
        scale = r_old.abs().amax() + 1.0
        assert (r_new - r_old).abs().max() <= 1e-12 * scale
        err = (J_new - J_old).abs()
        tol = 1e-10 * (J_old.abs() + 1e-6 * J_old.abs().amax(dim=(1, 2), keepdim=True))
        assert bool((err <= tol).all()), float((err / tol).max())


def test_value_paths_agree_on_every_shape_and_edge() -> None:
    """0-d, per-row and per-point parameters; ``C = 0`` and a subnormal ``K`` (the CAMEL SlimPajama point fit's
    end): the numpy value equals the torch one, and the derivatives are non-finite exactly where autograd's are."""
    rng = np.random.default_rng(3)
    law = _law("camel", 4, 3)
    n = 30
    x, _ = _data(law, n, rng)
    U = torch.tensor(law.to_internal(law.example_params) + rng.normal(0, 0.5, (5, law.n_internal)))
    p = dict(law.to_natural(U))
    p["C"] = p["C"].clone()
    p["C"][0] = 0.0
    p["K_0"] = p["K_0"].clone()
    p["K_0"][1] = np.exp(-716.6)  # subnormal
    p["alpha_0"] = p["alpha_0"].clone()
    p["alpha_0"][1] = 366.0
    shapes = [
        {k: v[2] for k, v in p.items()},  # one row: (1,) scalars and (1, D) loadings
        {k: v[2, 0] for k, v in p.items()},  # 0-d scalars and (D,) loadings
        p,  # (S, 1) and (S, 1, D)
        {k: v.expand(5, n, *v.shape[2:]).clone() for k, v in p.items()},  # per-point copies
    ]
    for q in shapes:
        with torch.no_grad():
            fast = law.log_predict(x, q)
        req = {k: v.clone().requires_grad_(True) for k, v in q.items()}
        with torch.enable_grad():
            slow = law.log_predict(x, req)
            assert slow.grad_fn is not None  # differentiable tensors still take the torch path
        np.testing.assert_allclose(fast.numpy(), slow.detach().numpy(), rtol=1e-13, atol=1e-13)
    pe = {k: v.expand(5, n, *v.shape[2:]).clone().requires_grad_(True) for k, v in p.items()}
    with torch.enable_grad():
        out = law.log_predict(x, pe)
        gs = torch.autograd.grad(out.sum(), list(pe.values()))
    value, grads = law.log_predict_grad(x, p)
    np.testing.assert_allclose(value.numpy(), out.detach().numpy(), rtol=1e-13, atol=1e-13)
    for (name, g_old), g_new in zip(zip(pe, gs, strict=True), grads.values(), strict=True):
        assert list(grads)[list(pe).index(name)] == name
        fin = torch.isfinite(g_old)
        assert torch.equal(fin, torch.isfinite(g_new)), name
        np.testing.assert_allclose(g_new[fin].numpy(), g_old[fin].numpy(), rtol=1e-10, atol=1e-300)


def test_torch_path_kept_for_float32() -> None:
    law = _law("camel", 3, 2)
    x = {c: torch.tensor(v, dtype=torch.float32) for c, v in law.example_inputs(8, np.random.default_rng(0)).items()}
    p = {k: torch.tensor(v, dtype=torch.float32) for k, v in law.check_params(law.example_params).items()}
    with torch.no_grad():
        assert law.log_predict(x, p).dtype == torch.float32
    with pytest.raises(TypeError):
        law.log_predict_grad(x, p)


def test_blocked_value_equals_one_pass() -> None:
    """Thousands of trial rows are evaluated in cache-sized blocks: the same values as one pass, and as torch's."""
    from mixlaw.laws import _camel_numpy as camel_numpy

    rng = np.random.default_rng(5)
    law = _law("camel", 5, 3)
    n = 120
    x, _ = _data(law, n, rng)
    U = torch.tensor(law.to_internal(law.example_params) + rng.normal(0, 1.0, (700, law.n_internal)))
    with torch.no_grad():
        p = law.to_natural(U)
        fast = law.log_predict(x, p)
    assert 700 * n > 2 * camel_numpy.BLOCK_CELLS  # several blocks
    w, log_m, q = law._plain(x, p)
    terms, _ = camel_numpy._terms(w, log_m, q, 3)
    np.testing.assert_array_equal(fast.numpy(), camel_numpy._lse(terms))
    req = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    with torch.enable_grad():
        slow = law.log_predict(x, req).detach()
    np.testing.assert_allclose(fast.numpy(), slow.numpy(), rtol=1e-13, atol=1e-13)
