"""Memory linear in rows: the identifiability spectrum never forms an ``n × n`` matrix, the start screen and the
solver's iterations are chunked by starts × points, and the chunks change no number; every batched solve runs with
its thread pools pinned in one place (``mixlaw.fit.solver.pools``). The end-to-end figure (``fit`` on 250,000 rows
within
2 GB) is ``benchmarks/fit_memory.py``."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest
import torch

from mixlaw.fit import fit_law
from mixlaw.fit.problem.data import make_residuals
from mixlaw.fit.problem.starts import SCREEN_CELLS, screen_chunks
from mixlaw.fit.solver import solve as solve_mod
from mixlaw.fit.solver.pools import threads
from mixlaw.fit.solver.settings import SolveSettings
from mixlaw.fit.uncertainty.identify import _spectrum
from mixlaw.laws import get_law
from mixlaw.options import FitOptions, StartOptions

TRUTH = {"A": 400.0, "B": 1500.0, "E": 1.8, "alpha": 0.34, "beta": 0.3}


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    N, D = 10 ** rng.uniform(7, 9.5, n), 10 ** rng.uniform(9, 11.5, n)
    y = np.asarray(get_law("chinchilla").evaluate({"n_params": N, "tokens": D}, TRUTH))
    return pd.DataFrame({"n_params": N, "tokens": D, "loss": y * np.exp(0.01 * rng.standard_normal(n))})


def test_spectrum_of_a_tall_jacobian_allocates_no_rows_by_rows_matrix() -> None:
    rng = np.random.default_rng(3)
    n, P = 6_000, 5
    J = rng.standard_normal((n, P)) * np.array([1.0, 1e3, 1e-2, 5.0, 1.0])
    J[:, 4] = J[:, 0] + 1e-9 * rng.standard_normal(n)  # one nearly collinear direction
    tracemalloc.start()
    norms, rel, vt = _spectrum(J)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 20 * J.nbytes  # an n × n factor alone would be 1,200 × J (288 MB)
    # The same spectrum as the SVD of the scaled matrix itself.
    s = np.linalg.svd(J / norms, compute_uv=False)
    np.testing.assert_allclose(rel, s / s[0], rtol=1e-6, atol=1e-12)
    assert vt.shape == (P, P)
    np.testing.assert_allclose(vt @ vt.T, np.eye(P), atol=1e-10)
    assert rel[-1] < 1e-7 < rel[-2]  # the collinear direction is found, the others are not


def test_spectrum_with_fewer_rows_than_parameters_keeps_every_direction() -> None:
    J = np.random.default_rng(4).standard_normal((2, 5))
    _, rel, vt = _spectrum(J)
    assert rel.shape == (5,) and vt.shape == (5, 5)
    assert (rel[2:] == 0).all() and (rel[:2] > 0).all()


def test_screen_chunks_bound_starts_times_points() -> None:
    assert screen_chunks(4500, 240) == 8  # the Epoch screen: ~512 starts a chunk, as before
    for S, n in [(4500, 250_000), (4500, 25_000), (100, 10**7), (1, 5)]:
        k = screen_chunks(S, n)
        assert 1 <= k <= S
        per = -(-S // k)
        assert per == 1 or per * n <= SCREEN_CELLS


def test_row_chunks_bound_cells_and_keep_every_row() -> None:
    active = np.arange(3, 40)
    for n in [10, 10_000, 250_000, 10**8]:
        chunks = solve_mod._row_chunks(active, n, 22)
        np.testing.assert_array_equal(np.concatenate(chunks), active)
        assert all(c.size == 1 or c.size * 22 * n <= solve_mod.ITER_CELLS for c in chunks)


def test_chunked_iterations_give_the_same_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows one at a time give the fit of all rows at once: the chunks are a memory bound, not a new method.

    Batched kernels of another batch size may round the last bit differently (measured: 9e-16 after one
    iteration), which rows crawling along a flat valley amplify; the steps agree to rounding and the estimate —
    the best row — is the same."""
    law = get_law("chinchilla")
    df = _table(60, seed=11)
    x = {"n_params": torch.tensor(df["n_params"].to_numpy()), "tokens": torch.tensor(df["tokens"].to_numpy())}
    res = make_residuals(law, x, torch.tensor(df["loss"].to_numpy()))
    U0 = law.random_starts(6, np.random.default_rng(5))  # away from the truth
    W = torch.ones(1, len(df), dtype=torch.float64)
    pid = np.zeros(len(U0), dtype=np.int64)
    first, whole = (solve_mod.solve(res, U0, pid, W, SolveSettings(max_iter=m)) for m in (1, 150))
    monkeypatch.setattr(solve_mod, "ITER_CELLS", 1)
    first_c, chunked = (solve_mod.solve(res, U0, pid, W, SolveSettings(max_iter=m)) for m in (1, 150))
    np.testing.assert_allclose(first_c.x, first.x, rtol=1e-13, atol=1e-13)
    assert not np.array_equal(first.x, U0)  # the iteration moved
    b, bc = int(np.argmin(whole.f)), int(np.argmin(chunked.f))
    assert whole.status[b] == chunked.status[bc] == "converged"
    np.testing.assert_allclose(chunked.f[bc], whole.f[b], rtol=1e-9)
    np.testing.assert_allclose(chunked.x[bc], whole.x[b], rtol=1e-5, atol=1e-6)


def test_fit_with_chunked_screen_and_iterations_recovers_the_law(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fit whose screen and iterations are forced into many chunks still finds the truth."""
    from mixlaw.fit.problem import starts as starts_mod

    df = _table(400, seed=12)
    monkeypatch.setattr(starts_mod, "SCREEN_CELLS", 400 * 7)  # 7 starts a chunk
    monkeypatch.setattr(solve_mod, "ITER_CELLS", 400 * 22 * 3)  # 3 rows a chunk
    res = fit_law("chinchilla", df, FitOptions(starts=StartOptions(n_polish=8), seed=0))
    assert res.converged
    assert res.params["alpha"] == pytest.approx(TRUTH["alpha"], rel=0.1)
    assert res.params["beta"] == pytest.approx(TRUTH["beta"], rel=0.1)
    assert res.params["E"] == pytest.approx(TRUTH["E"], rel=0.05)


def test_threads_pins_torch_and_blas_and_restores_them() -> None:
    from threadpoolctl import threadpool_info

    before_torch = torch.get_num_threads()
    before = {(i["filepath"], i["num_threads"]) for i in threadpool_info()}
    with threads(1):
        assert torch.get_num_threads() == 1
        assert all(i["num_threads"] == 1 for i in threadpool_info())
    assert torch.get_num_threads() == before_torch
    assert {(i["filepath"], i["num_threads"]) for i in threadpool_info()} == before
    with pytest.raises(ValueError, match="n_threads >= 1"):
        with threads(0):
            pass
