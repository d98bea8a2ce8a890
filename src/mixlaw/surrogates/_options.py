"""Checked option values of the surrogates (one-line :class:`~mixlaw.errors.InputError` naming owner and option)."""

from __future__ import annotations

from typing import Any

from mixlaw.errors import InputError

__all__ = ["float_option", "int_option"]


def int_option(owner: str, name: str, value: Any, lo: int) -> int:
    """``value`` as an integer ``>= lo``; an :class:`InputError` naming ``owner`` and ``name`` otherwise."""
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{owner} option '{name}': expected an integer, got {value!r}") from None
    if v < lo or v != float(value):
        raise InputError(f"{owner} option '{name}': expected an integer >= {lo}, got {value!r}")
    return v


def float_option(owner: str, name: str, value: Any, lo: float, hi: float, *, closed_lo: bool = False) -> float:
    """``value`` as a number in ``(lo, hi)`` (``[lo, hi)`` with ``closed_lo``); an :class:`InputError` otherwise."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{owner} option '{name}': expected a number, got {value!r}") from None
    if not ((lo <= v) if closed_lo else (lo < v)) or not v < hi:
        interval = f"{'[' if closed_lo else '('}{lo:g}, {hi:g})"
        raise InputError(f"{owner} option '{name}': expected a number in {interval}, got {value!r}")
    return v
