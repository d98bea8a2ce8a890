"""The schema of a verb's ``--config FILE.toml`` (the ``plan``, ``cmr`` and ``mix`` specs): every key checked
against the verb's own options before any of it is used.

The file is read with :func:`mixlaw.safeio.read_text` (bounded size, strict UTF-8) and
:func:`mixlaw.safeio.loads_toml` (duplicate keys are a TOML error; nesting bounded). Each value must then have
the type of its option — an integer option takes a TOML integer (not ``true``, ``"3"`` or ``3.5``) within the
int64 range, a number option a finite number, a flag ``true``/``false``, a text or path option a string without
NUL characters (or a finite number, read as the command line would: ``target_size = 1e9``); a repeatable
option also takes an array of those, a ``NAME=VALUE`` option a table of finite numbers or strings, and a
comma-list option an array of strings or finite numbers. The first failure is one
:class:`~mixlaw.errors.InputError` line naming the file and the field (``field 'budget': expected a finite
number, got inf in plan.toml``); nothing of a refused file reaches the verb.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from mixlaw.errors import InputError
from mixlaw.safeio import loads_toml, read_text

__all__ = ["MAX_CONFIG_BYTES", "read_config"]

MAX_CONFIG_BYTES = 1024 * 1024
"""Largest ``--config`` file read (a verb's options fit in a few kB)."""
MAX_ITEMS = 10_000
"""Most entries of one array or table value."""
_INT_MAX = 2**63 - 1


def _kind(param: Any) -> str:
    """``int``, ``float``, ``bool`` or ``str``: what one value of ``param`` is."""
    if getattr(param, "is_flag", False):
        return "bool"
    bare = getattr(param, "bare_type", None)  # typer's own parameters: the annotation without Optional
    if callable(bare):
        text = str(bare())
        kind = next((k for k in ("bool", "int", "float") if text in (k, f"list[{k}]")), None)
        return kind or "str"
    name = str(getattr(getattr(param, "type", None), "name", "text"))
    if name.startswith("integer"):
        return "int"
    if name.startswith("float"):
        return "float"
    if name == "boolean":
        return "bool"
    return "str"


def _scalar(v: Any, kind: str, field: str, source: str) -> Any:
    """One value of kind ``kind`` (the checked value; a number option keeps its TOML integer)."""
    def fail(expected: str) -> InputError:
        shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
        return InputError(f"field '{field}': expected {expected}, got {shown}", file=source)

    if kind == "bool":
        if not isinstance(v, bool):
            raise fail("true or false")
        return v
    if kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise fail("an integer")
        if abs(v) > _INT_MAX:
            raise fail(f"an integer of at most {_INT_MAX:,}")
        return v
    if kind == "float":
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise fail("a number")
        if isinstance(v, float) and not math.isfinite(v):
            raise fail("a finite number")
        if isinstance(v, int) and abs(v) > _INT_MAX:
            raise fail("a number of at most 9.2e18")
        return v
    if isinstance(v, int | float) and not isinstance(v, bool):  # target_size = 1e9: the text the command line gives
        return str(_scalar(v, "float", field, source))
    if not isinstance(v, str):
        raise fail("a string")
    if "\x00" in v:
        raise fail("a string without NUL characters")
    return v


def _item(v: Any, field: str, source: str) -> str:
    """One entry of a comma list or a ``NAME=VALUE`` table: a string or a finite number, as text."""
    return str(_scalar(v, "str", field, source))


def _value(param: Any, v: Any, field: str, source: str) -> Any:
    """``v`` checked against ``param`` and put in the form the command line would give."""
    kind = _kind(param)
    multiple = bool(getattr(param, "multiple", False))
    if isinstance(v, Mapping):  # NAME=VALUE options: weights = {loss_a = 0.5}
        if kind != "str":
            raise InputError(f"field '{field}': expected {kind_text(kind)}, got a table", file=source)
        if len(v) > MAX_ITEMS:
            raise InputError(f"field '{field}': expected at most {MAX_ITEMS:,} entries, got {len(v):,}", file=source)
        pairs = [f"{_scalar(k, 'str', field, source)}={_item(x, f'{field}.{k}', source)}" for k, x in v.items()]
        return pairs if multiple else ",".join(pairs)
    if isinstance(v, list):
        if len(v) > MAX_ITEMS:
            raise InputError(f"field '{field}': expected at most {MAX_ITEMS:,} entries, got {len(v):,}", file=source)
        if multiple:
            return [_scalar(x, kind, f"{field}[{i}]", source) for i, x in enumerate(v)]
        if getattr(param, "nargs", 1) == 1 and kind == "str":
            return ",".join(_item(x, f"{field}[{i}]", source) for i, x in enumerate(v))  # --domains a,b,c
        raise InputError(f"field '{field}': expected {kind_text(kind)}, got an array", file=source)
    one = _scalar(v, kind, field, source)
    return [one] if multiple else one


def kind_text(kind: str) -> str:
    """How a message names a kind of value."""
    return {"int": "an integer", "float": "a number", "bool": "true or false"}.get(kind, "a string")


def read_config(path: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The checked ``--config`` of a verb: ``{parameter name: value}`` for click's ``default_map``.

    Parameters
    ----------
    path
        The TOML file.
    params
        ``{key: click parameter}``: every spelling a key may take (the parameter's name and its option names
        without dashes, ``-`` read as ``_``).

    Raises
    ------
    InputError
        One line naming the file and the field: an unreadable or invalid file, an unknown key (with the closest
        option), a value of the wrong type, a non-finite number, a duplicate key (a TOML error).
    """
    data = loads_toml(read_text(path, "--config TOML", max_bytes=MAX_CONFIG_BYTES), path)
    out: dict[str, Any] = {}
    for key, v in data.items():
        k = str(key).replace("-", "_")
        p = params.get(k)
        if p is None:
            close = difflib.get_close_matches(k, sorted(params), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputError(f"field '{key}': unknown option{hint}", file=path)
        if p.name in out:
            raise InputError(f"field '{key}': the option {p.name!r} is given twice (under two spellings)", file=path)
        out[p.name] = _value(p, v, str(key), path)
    return out
