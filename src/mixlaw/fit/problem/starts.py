"""The starts of a fit: the law's own design, its data-informed guesses, user starts and seeded random starts.

Every start is one point (a row of internal values); the design is a list of points — the Cartesian product of a
small grid, or scrambled Sobol points for large laws (see :meth:`mixlaw.laws.Law.start_design`) — never a
product of 10^5 points, and never the law's ``example_params``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mixlaw.errors import InputError
from mixlaw.fit.problem.data import FitData
from mixlaw.fit.solver.refits import internal_starts
from mixlaw.laws import Law

__all__ = [
    "SCREEN_CELLS",
    "StartSet",
    "build_starts",
    "choose_polish",
    "distinct",
    "screen_chunks",
    "screen_parts",
    "user_starts",
]

SCREEN_CELLS = 2_000_000
"""Starts × data points of one chunk of the start screen (16 MB per float64 tensor): the screen's memory is linear
in the points, whatever the number of starts."""


SCREEN_TRIM_POINTS = 20_000
"""Data points from which the start screen hands its freed heap back to the OS between chunks."""


@dataclass(frozen=True)
class StartSet:
    """The ``(S, n_internal)`` start matrix and where its rows came from (``n_grid + n_guess + n_user + n_random``)."""

    U: np.ndarray
    n_grid: int
    n_guess: int
    n_user: int
    n_random: int


def user_starts(law: Law, starts: np.ndarray | Sequence[Mapping[str, Any]] | None) -> np.ndarray:
    """User starts in natural units → internal rows.

    An array has one column per flat natural entry (``law.flat_names``: the parameter names for a scalar law);
    a list has one complete parameter dict per start.
    """
    if starts is None:
        return np.zeros((0, law.n_internal))
    if isinstance(starts, np.ndarray):
        arr = np.atleast_2d(np.asarray(starts, dtype=np.float64))
        if arr.shape[1] != len(law.flat_names):
            raise InputError(f"expected starts with {len(law.flat_names)} columns {law.flat_names}, got {arr.shape[1]}")
        return np.stack([law.to_internal(law.unflatten(row)) for row in arr]).reshape(-1, law.n_internal)
    return internal_starts(law, list(starts))


def guess_starts(law: Law, data: FitData) -> np.ndarray:
    """The law's :meth:`~mixlaw.laws.Law.guess` for these data, as internal rows (non-finite rows dropped)."""
    guesses = list(law.guess(data.frame(law)) or [])
    if not guesses:
        return np.zeros((0, law.n_internal))
    try:
        U = internal_starts(law, guesses)
    except InputError as exc:
        raise InputError(f"law '{law.name}': guess() returned a bad start ({exc})") from None
    return U[np.isfinite(U).all(axis=1)]


def build_starts(
    law: Law,
    data: FitData | None,
    rng: np.random.Generator,
    *,
    use_grid: bool = True,
    use_guess: bool = True,
    starts: np.ndarray | Sequence[Mapping[str, Any]] | None = None,
    n_random: int = 0,
) -> StartSet:
    """The start matrix of one fit: design, guesses, user starts, random starts (in this order)."""
    blocks: list[np.ndarray] = []
    grid = law.start_design() if use_grid else np.zeros((0, law.n_internal))
    guess = guess_starts(law, data) if use_guess and data is not None else np.zeros((0, law.n_internal))
    user = user_starts(law, starts)
    rand = law.random_starts(int(n_random), rng) if n_random else np.zeros((0, law.n_internal))
    blocks = [b for b in (grid, guess, user, rand) if len(b)]
    if not blocks:
        raise InputError("expected at least one start: enable the grid, give starts or random starts")
    return StartSet(
        U=np.concatenate(blocks, axis=0),
        n_grid=len(grid),
        n_guess=len(guess),
        n_user=len(user),
        n_random=len(rand),
    )


def screen_chunks(n_starts: int, n_points: int) -> int:
    """How many chunks the screen of ``n_starts`` starts over ``n_points`` points takes: about 512 starts each, and
    fewer where ``starts × points`` would exceed :data:`SCREEN_CELLS` (one start per chunk at the least)."""
    by_cells = -(-n_starts * max(1, n_points) // SCREEN_CELLS)
    return max(1, min(n_starts, max(n_starts // 512, by_cells)))


def screen_parts(U: np.ndarray, n_points: int) -> Iterator[np.ndarray]:
    """The chunks of :func:`screen_chunks` of the start matrix ``U``; from :data:`SCREEN_TRIM_POINTS` points on,
    the freed heap goes back to the OS after each (:func:`mixlaw.fit.solver.pools.trim_heap`): the screen of a
    25,000-row fit raised the peak resident set from 321 to 1,078 MB through the holes its chunks left."""
    from mixlaw.fit.solver.pools import trim_heap

    for chunk in np.array_split(U, screen_chunks(len(U), n_points)):
        yield chunk
        if n_points >= SCREEN_TRIM_POINTS:
            trim_heap()


def choose_polish(U: np.ndarray, f_init: np.ndarray, n_polish: int, full: bool) -> np.ndarray:
    """Indices of the starts to optimise: all (``full``), or the ``n_polish`` best distinct finite ones."""
    finite = np.flatnonzero(np.isfinite(f_init))
    if full or finite.size <= n_polish:
        return np.arange(len(U))
    order = finite[np.argsort(f_init[finite], kind="stable")]
    # Distinct starts only: identical rows (e.g. a user start equal to a grid point) would be merged anyway.
    _, first = np.unique(np.round(U[order], 12), axis=0, return_index=True)
    order = order[np.sort(first)]
    return np.sort(order[:n_polish])


def distinct(U: np.ndarray, k: int, tol: float = 1e-4) -> np.ndarray:
    """The first ``k`` rows of ``U`` that differ from every earlier chosen row by more than ``tol`` (max-abs)."""
    chosen: list[np.ndarray] = []
    for u in U:
        if all(np.abs(u - c).max() > tol for c in chosen):
            chosen.append(u)
        if len(chosen) == k:
            break
    return np.array(chosen).reshape(len(chosen), U.shape[1])
