"""The one place that sets the thread pools of a batched solve: torch's intra-op pool and the BLAS / OpenMP pools.

A batched solve is many small linear algebra calls (``P × P`` systems, ``(K, n, P)`` products). Multi-threaded
BLAS spins its worker threads on every such call, for no gain at these sizes: pinning one thread cut the CPU of a
400-resample bootstrap by 2.8× on a many-core machine. Every fit, batch fit and resample refit therefore runs under
:func:`threads`, which sets torch (``torch.set_num_threads``) and, through threadpoolctl, every BLAS (OpenBLAS,
MKL, BLIS) and OpenMP runtime loaded in the process (numpy's OpenBLAS, torch's libgomp), and restores all of them
afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["threads"]


@contextmanager
def threads(n: int | None) -> Iterator[None]:
    """Run the block with ``n`` threads in torch and in every BLAS / OpenMP pool (all restored afterwards).

    Parameters
    ----------
    n
        Threads (≥ 1); ``None`` leaves every pool as it is.
    """
    if n is None:
        yield
        return
    if int(n) < 1:
        raise ValueError(f"expected n_threads >= 1, got {n}")
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        with threadpool_limits(limits=int(n)):
            yield
    finally:
        torch.set_num_threads(before)
