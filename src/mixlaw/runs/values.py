"""Column names, value ranges and the checks shared by :mod:`mixlaw.runs.schema` (value objects) and
:mod:`mixlaw.runs.validate` (the table validator): what a value must be so that the store can write it and read
it back unchanged."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError

PHASES = ("pt", "cpt")
#: Tolerance on a table row's mixture weights summing to 1 (the :class:`Mixture` itself uses 1e-9).
MIXTURE_ROW_ATOL = 1e-6
_MIXTURE_ATOL = 1e-9

#: Canonical columns and their units.
SCHEMA_COLUMNS: dict[str, str] = {
    "run_id": "run identifier",
    "step": "optimiser step",
    "tokens": "tokens",
    "lr": "learning rate",
    "loss": "nats/token",
    "loss_<evalset>": "nats/token",
    "n_params": "non-embedding parameters",
    "n_params_total": "parameters incl. embeddings",
    "w_<domain>": "mixture weight",
    "phase": "pt | cpt",
    "parent_run": "run identifier",
    "seed": "integer",
    "schedule": "JSON object",
    "unique_tokens_<domain>": "tokens",
    "tokens_<domain>": "tokens",
    "compute_flops": "FLOP",
}

#: Columns that describe a run and must be constant within it (``w_*`` and ``unique_tokens_*`` too).
RUN_LEVEL_COLUMNS = ("n_params", "n_params_total", "phase", "parent_run", "seed", "schedule")
_STRING_COLUMNS = ("run_id", "phase", "parent_run", "schedule")
_NONNEG_COLUMNS = ("step", "tokens", "lr", "n_params", "n_params_total", "compute_flops")
_INTEGER_COLUMNS = ("step", "seed")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+\-]+$")
#: Largest |value| of an integer column (``step``, ``seed``) read from a table: every value passes through float64,
#: which holds integers exactly only below 2^53 (a larger step would be rounded, one >= 2^63 would wrap).
MAX_TABLE_INT = 2**53 - 1
#: Largest |value| of an integer stored in run metadata (SQLite and NumPy integers are signed 64-bit).
MAX_META_INT = 2**63 - 1
#: Deepest nesting of a JSON value (schedule, meta) that is accepted.
MAX_JSON_DEPTH = 32
# Number-like text: decimal/scientific numbers and the words Python's float() reads as nan / inf.
# ASCII only: Python's float() and \d also read other scripts' digits ('١٢٣' -> 123), which no log means as a number.
_NUMBER_RE = r"(?a)^\s*[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|nan|NaN|NAN|inf|Inf|INF|infinity|Infinity)\s*$"
_NUMBER_MATCH = re.compile(_NUMBER_RE).match


def is_loss_column(name: str) -> bool:
    """True for ``loss`` and ``loss_<evalset>``."""
    return name == "loss" or (name.startswith("loss_") and len(name) > 5)


def is_weight_column(name: str) -> bool:
    """True for ``w_<domain>``."""
    return name.startswith("w_") and len(name) > 2


def _is_unique_tokens(name: str) -> bool:
    return name.startswith("unique_tokens_") and len(name) > len("unique_tokens_")


def _is_domain_tokens(name: str) -> bool:
    return name.startswith("tokens_") and len(name) > len("tokens_")


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError(f"expected a {what} name of letters, digits, '_', '.', '+' or '-', got {name!r}")
    return name


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def check_json_value(obj: Any, what: str) -> None:
    """Refuse a value the store could write but not read back: nesting deeper than :data:`MAX_JSON_DEPTH`,
    integers beyond signed 64 bits, non-finite floats, text that is not encodable as UTF-8 (lone surrogates),
    non-string keys and non-JSON types. Iterative, so a deeply nested value cannot exhaust the stack."""
    stack: list[tuple[Any, int, str]] = [(obj, 0, what)]
    while stack:
        v, depth, path = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise InputError(f"expected {what} nested at most {MAX_JSON_DEPTH} levels deep, got deeper at {path}")
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, int | np.integer):
            if abs(int(v)) > MAX_META_INT:
                raise InputError(f"expected integers with |value| < 2^63 in {what}, got {_fmt(int(v))} at {path}")
        elif isinstance(v, float | np.floating):
            if not math.isfinite(float(v)):
                raise InputError(f"expected finite numbers in {what}, got {float(v)!r} at {path}")
        elif isinstance(v, str):
            _check_text(v, f"{what} at {path}")
        elif isinstance(v, list | tuple):
            stack.extend((x, depth + 1, f"{path}[{i}]") for i, x in enumerate(v))
        elif isinstance(v, Mapping):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise InputError(f"expected string keys in {what}, got {_fmt(k)} at {path}")
                _check_text(k, f"{what} key at {path}")
                stack.append((x, depth + 1, f"{path}.{k}"[:200]))
        else:
            raise InputError(f"expected JSON values (numbers, text, lists, objects) in {what}, got {type(v).__name__}")


def _check_text(v: str, what: str) -> None:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"expected UTF-8 text in {what}, got a lone surrogate {v[exc.start]!r}") from None


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON: {type(v).__name__}")


def _json_clone(obj: Any, what: str) -> Any:
    check_json_value(obj, what)
    try:
        return json.loads(json.dumps(obj, allow_nan=False, sort_keys=True, default=_json_default))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InputError(f"expected JSON-serialisable {what}, got {_fmt(obj)} ({exc})") from None


def validate_schedule(schedule: Any) -> dict[str, Any] | None:
    """Check a schedule: ``None``, a spec dict with a string ``kind``, or ``{"kind": "table", "lr": [...]}``.

    A table schedule holds the learning rate of every step ``0 .. len(lr) - 1`` (finite, non-negative).
    """
    if schedule is None:
        return None
    if hasattr(schedule, "to_dict") and not isinstance(schedule, Mapping):
        schedule = schedule.to_dict()
    if not isinstance(schedule, Mapping) or not isinstance(schedule.get("kind"), str):
        raise InputError(f"expected a schedule dict with a string 'kind', got {_fmt(schedule)}")
    clone = _json_clone(dict(schedule), "schedule")
    if clone["kind"] == "table":
        lr = clone.get("lr")
        if not isinstance(lr, list) or not lr:
            raise InputError(f"expected a non-empty list 'lr' in a table schedule, got {_fmt(lr)}")
        for i, v in enumerate(lr):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise InputError(f"expected a finite non-negative lr at step {i} of the table schedule, got {v!r}")
        clone["lr"] = [float(v) for v in lr]
    return clone


def _short(v: Any) -> str:
    try:
        s = repr(v)
    except ValueError:  # int repr over the interpreter's digit limit
        s = f"<an integer of about {int(v.bit_length() * 0.30103)} digits>"
    return s if len(s) <= 60 else s[:57] + "..."


def _to_float(v: Any) -> float:
    """``float(v)``; an integer too large for a float (``10**400``) is ``inf``, not an OverflowError."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _where(source: str, row: int | None, column: str | None) -> str:
    return ":".join(str(p) for p in (source, row, column) if p is not None)


def printable(text: str, limit: int = 200) -> str:
    """``text`` for a one-line message: control characters and lone surrogates escaped, at most ``limit``
    characters (a column named ``"a\\nb"`` must not break the line)."""
    out = "".join(c if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF else repr(c)[1:-1] for c in text[:limit])
    return out if len(text) <= limit else out + "…"


def _fail(expected: str, got: str, source: str, row: int | None, column: str | None) -> InputError:
    # InputError formats "... in FILE:ROW:COLUMN" itself and keeps file/row/column as attributes for callers.
    col = None if column is None else printable(column)
    return InputError(f"expected {expected}, got {got}", file=printable(source), row=row, column=col)


def _fmt(v: Any) -> str:
    """A short, printable rendering of a cell for a one-line message (never raises)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 128:
        return f"an integer of about {int(v.bit_length() * 0.30103) + 1} digits"
    try:
        s = repr(v)
    except RecursionError:
        return "a deeply nested value"
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(s) <= 40:
        return s
    return s[:37] + ("...'" if isinstance(v, str) else "...")
