"""The one place that sets the thread pools of a batched solve: torch's intra-op pool and the BLAS / OpenMP pools.

A batched solve is many small linear algebra calls (``P × P`` systems, ``(K, n, P)`` products). Multi-threaded
BLAS spins its worker threads on every such call, for no gain at these sizes: pinning one thread cut the CPU of a
400-resample bootstrap by 2.8× on a many-core machine. Every fit, batch fit and resample refit therefore runs under
:func:`threads`, which sets torch (``torch.set_num_threads``) and, through threadpoolctl, every BLAS (OpenBLAS,
MKL, BLIS) and OpenMP runtime loaded in the process (numpy's OpenBLAS, torch's libgomp), and restores all of them
afterwards.

It is also the one place that hands freed heap memory back to the operating system (:func:`trim_heap`): a fit on
hundreds of thousands of rows allocates and frees tensors of tens of MB on every iteration, and glibc's allocator
keeps the holes they leave resident (its mmap threshold rises to 32 MB after the first large free), so the
resident set grew with the iterations, not with the live data: 1,410 MB peak for a 100,000-row fit whose live
tensors never exceed ~550 MB (measured with ``benchmarks/fit_memory.py``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import cast

import torch

__all__ = ["threads", "trim_heap"]


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


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (``None`` on another C library or platform)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):  # musl and others have no malloc_trim
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return cast(Callable[[int], int], fn)


def trim_heap() -> None:
    """Return the free pages of the C heap to the operating system (glibc ``malloc_trim(0)``; a no-op elsewhere).

    Called between the row chunks of a large solve and after the large single passes of a fit, so that the resident
    set follows the live tensors instead of the largest heap the allocator ever reached. It changes no number.
    """
    fn = _malloc_trim()
    if fn is not None:
        fn(0)
