"""Option checks shared by the multi-domain mixture laws (``camel``, ``dml``, ``benchmark_logistic``, ``bimix``,
``mixture_additive``, ``mixture_joint``, ``repetition_aware``)."""

from __future__ import annotations

from typing import Any

from mixlaw.errors import InputError

__all__ = [
    "domain_list",
    "domain_name",
    "column_list",
    "column_name",
    "positive_int",
    "positive_float",
    "share_floor",
]


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, list | tuple):
        items = [str(v).strip() for v in value]
    else:
        raise InputError(f"expected a comma-separated list of names, got {value!r}")
    if any(not v for v in items):
        raise InputError(f"expected non-empty names, got {value!r}")
    if len(set(items)) != len(items):
        raise InputError(f"expected distinct names, got {value!r}")
    return tuple(items)


def domain_list(value: Any) -> tuple[str, ...]:
    """``"a,b,c"`` or a sequence → ``("a", "b", "c")``; at least two distinct domains."""
    names = _names(value)
    if len(names) < 2:
        raise InputError(f"expected at least two domains, got {value!r}")
    return names


def domain_name(value: Any) -> str:
    """One domain name (the law reads its ``w_<domain>`` column); no commas."""
    names = _names(value)
    if len(names) != 1:
        raise InputError(f"expected one domain name, got {value!r}")
    return names[0]


def column_list(value: Any) -> tuple[str, ...]:
    """``"loss_a,loss_b"`` or a sequence → a tuple of at least one distinct column name."""
    return _names(value)


def column_name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"expected the name of a column, got {value!r}")
    return value.strip()


def positive_int(value: Any) -> int:
    k = int(value)
    if k < 1 or k != float(value):
        raise InputError(f"expected a positive integer, got {value!r}")
    return k


def positive_float(value: Any) -> float:
    v = float(value)
    if not v > 0 or v == float("inf"):
        raise InputError(f"expected a positive number, got {value!r}")
    return v


def share_floor(value: Any) -> float:
    """A floor for mixture shares under a negative power: a number in (0, 0.1]."""
    v = float(value)
    if not 0 < v <= 0.1:
        raise InputError(f"expected a share floor in (0, 0.1], got {value!r}")
    return v
