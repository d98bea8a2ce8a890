"""CAMEL's value without autograd and its analytic derivatives (numpy): the solver's hot path for the law.

The law (:mod:`mixlaw.laws.camel`, Li, Gu and Zhang 2026, arXiv:2603.08022) in log space is

.. math:: \\log L = \\mathrm{LSE}\\big(\\log C,\\; \\log K_i - \\alpha_i \\log\\langle t_i, r\\rangle
          - \\beta_i \\log (M/M_0)\\big)_{i=1..k}.

With the softmax weights ``s_0 = C/L`` and ``s_i = K_i⟨t_i, r⟩^{−α_i}(M/M_0)^{−β_i}/L`` its derivatives are
``∂/∂C = s_0/C``, ``∂/∂K_i = s_i/K_i``, ``∂/∂α_i = −s_i log⟨t_i, r⟩``, ``∂/∂β_i = −s_i log(M/M_0)`` and
``∂/∂t_{i,d} = −s_i α_i r_d / ⟨t_i, r⟩`` — the same expressions, in the same order of operations, as reverse mode
forms them through :meth:`~mixlaw.laws.camel.Camel.log_predict` (a subnormal ``K_i`` still gives ``s_i/K_i`` = inf,
which the solver repairs, :func:`mixlaw.fit.solver.steps.repair_jacobian`). Everything here is float64 numpy:
its ``exp``/``log`` are vectorised where torch's float64 ones are not (about 2.5x faster on the CAMEL fit's trial
points), and the analytic Jacobian needs no per-point copies of the parameters and no backward pass.
``tests/test_camel_numpy.py`` checks both against the torch/autograd path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["log_predict", "log_predict_grad", "shares"]

Array = np.ndarray


def shares(w: Array, t: Array) -> Array:
    """``⟨t, r⟩`` for every row of ``w`` (``(n, D)``) and every loading ``t`` (``(..., D)``): ``(..., n)`` with the
    ``(S, 1, D)`` loadings of the solver's rows giving ``(S, n)``."""
    if t.ndim == 1:
        return w @ t
    if t.shape[-2] == 1:  # one matrix product (a batched one over (1, D) rows is several times slower)
        return (t.reshape(-1, t.shape[-1]) @ w.T).reshape(*t.shape[:-2], w.shape[0])
    return (t * w).sum(-1)


def _terms(w: Array, log_m: Array, p: Mapping[str, Array], k: int) -> tuple[list[Array], list[Array]]:
    """The ``k + 1`` log-terms of the sum and the ``k`` shares."""
    sh = [shares(w, p[f"t_{i}"]) for i in range(k)]
    terms = [np.log(p["C"])]
    for i in range(k):
        terms.append(np.log(p[f"K_{i}"]) - p[f"alpha_{i}"] * np.log(sh[i]) - p[f"beta_{i}"] * log_m)
    return terms, sh


def _lse(terms: Sequence[Array]) -> Array:
    """``log Σ exp(terms)`` over the list (broadcast), shifted by the largest term as ``torch.logsumexp`` is (an
    infinite maximum shifts by 0)."""
    mx = np.array(np.broadcast_to(terms[0], np.broadcast_shapes(*(v.shape for v in terms))))
    for v in terms[1:]:
        np.maximum(mx, v, out=mx)
    np.copyto(mx, 0.0, where=np.isinf(mx))
    s = np.exp(terms[0] - mx)
    tmp = np.empty_like(s)
    for v in terms[1:]:
        np.subtract(v, mx, out=tmp)
        s += np.exp(tmp, out=tmp)
    return np.log(s, out=s) + mx


def _full(a: Array, shape: tuple[int, ...]) -> Array:
    """``a`` broadcast to ``shape`` as a writable array (torch warns on read-only views)."""
    return a if a.shape == shape else np.broadcast_to(a, shape).copy()


#: Cells (rows × points) of one block of :func:`log_predict`: the solver's trial points (thousands of rows) are
#: evaluated in blocks that stay in cache, about 1.7x faster than one pass over all of them (the same values).
BLOCK_CELLS = 32_768


def log_predict(w: Array, log_m: Array, p: Mapping[str, Array], k: int) -> Array:
    """``log L`` (broadcast shape of the parameters against ``(n,)``); ``w`` ``(n, D)``, ``log_m`` ``(n,)``."""
    shape = np.broadcast_shapes(log_m.shape, *(v.shape[:-1] if m.startswith("t_") else v.shape for m, v in p.items()))
    rows = max(1, BLOCK_CELLS // max(1, shape[-1]))
    with np.errstate(all="ignore"):
        if len(shape) != 2 or shape[0] <= rows:
            terms, _ = _terms(w, log_m, p, k)
            return _full(_lse(terms), shape)
        out = np.empty(shape)
        for a in range(0, shape[0], rows):
            q = {m: v[a : a + rows] if v.ndim >= 2 and v.shape[0] == shape[0] else v for m, v in p.items()}
            terms, _ = _terms(w, log_m, q, k)
            out[a : a + rows] = _lse(terms)
        return out


def log_predict_grad(w: Array, log_m: Array, p: Mapping[str, Array], k: int) -> tuple[Array, dict[str, Array]]:
    """``log L`` and its derivative with respect to every natural parameter, each broadcast to the value's shape
    (``(S, n)``; the loadings ``(S, n, D)``) — one entry per point, as the solver's Jacobian needs them."""
    with np.errstate(all="ignore"):
        terms, sh = _terms(w, log_m, p, k)
        shape = np.broadcast_shapes(*(v.shape for v in terms))
        out = _full(_lse(terms), shape)
        s = [np.exp(v - out) for v in terms]  # the softmax weights, as logsumexp's backward forms them
        grads: dict[str, Array] = {"C": _full(s[0] / p["C"], shape)}
        for i in range(k):
            si = s[i + 1]
            grads[f"K_{i}"] = _full(si / p[f"K_{i}"], shape)
            grads[f"alpha_{i}"] = _full(-si * np.log(sh[i]), shape)
            grads[f"beta_{i}"] = _full(-si * log_m, shape)
            g_share = _full(-si * p[f"alpha_{i}"] / sh[i], shape)
            grads[f"t_{i}"] = g_share[..., None] * w
    return out, grads
