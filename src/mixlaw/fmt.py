"""Number formatting shared by the engine, the CLI tables and the reports (stdlib only: the bottom of the package)."""

from __future__ import annotations

import numbers
from typing import Any

__all__ = ["fmt_tokens", "fmt_size"]


def fmt_tokens(v: float | None) -> str:
    """Tokens (or parameters) with a k/M/B/T suffix: ``300000 → '300k'``; None → ``—``."""
    if v is None:
        return "—"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.3g}"


def fmt_size(v: Any) -> str:
    """A model size: numbers with a suffix, labels as they are."""
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return fmt_tokens(float(v))
    return str(v)
