"""Strict reading and atomic writing of the files mixlaw reads and writes besides run tables.

Reading (fit JSON, CPT plans, sweep specs, plan specs): the bytes are bounded (:data:`MAX_FILE_BYTES`), decoded as
strict UTF-8, parsed with duplicate keys refused (JSON; TOML refuses them itself), nesting bounded
(:data:`MAX_DEPTH`) and integers bounded (:data:`MAX_INT_DIGITS`); every failure is one
:class:`~mixlaw.errors.InputError` line naming the file and, where there is one, the field. The typed schema of
each file (pydantic models or the file's own checks) then runs on what these return, before any of it is used.

Writing (fit files, reports, specs, exports): :func:`atomic_write_text` / :func:`atomic_write_bytes` write a
temporary file in the target's directory, flush and ``fsync`` it, and ``os.replace`` it over the target, so a
crash or a full disk leaves the previous file whole (the ``sqlite3`` and ``numpy.save`` users' expectation:
nothing half-written). :func:`check_output_path` refuses an output that cannot be written *before* a run.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mixlaw.errors import InputError

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_INT_DIGITS",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_depth",
    "check_output_path",
    "field_error",
    "loads_json",
    "loads_toml",
    "read_text",
]

MAX_FILE_BYTES = 256 * 1024 * 1024
"""Largest spec / plan / fit file read (a fit with 100,000 bootstrap draws of 30 parameters is about 60 MB)."""
MAX_DEPTH = 32
"""Deepest nesting of objects and arrays accepted in a spec, plan or fit file (theirs is at most 5)."""
MAX_INT_DIGITS = 40
"""Most digits of an integer literal (2^64 has 20; a 100,000-digit integer is refused, not converted)."""


def read_text(path: str | Path, what: str, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The text of ``path`` as strict UTF-8 (a BOM is dropped), at most ``max_bytes`` bytes.

    Raises :class:`InputError` naming ``what`` and the file: missing, a directory, unreadable, too large, or not
    UTF-8 (with the byte offset).
    """
    p = Path(path)
    if "\x00" in str(p):
        raise InputError(f"expected a {what} path, got one with a NUL character")
    try:
        if not p.is_file():
            raise InputError(f"expected a {what} file, got {'a directory' if p.is_dir() else 'no such file'}",
                             file=str(p))  # fmt: skip
        size = p.stat().st_size
        if size > max_bytes:
            raise InputError(f"expected a {what} of at most {max_bytes:,} bytes, got {size:,}", file=str(p))
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"expected a readable {what}, got {exc.strerror or exc}", file=str(p)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"expected UTF-8 text, got byte 0x{data[exc.start]:02x} at offset {exc.start}",
                         file=str(p)) from None  # fmt: skip
    return text[1:] if text.startswith("\ufeff") else text


def _no_duplicates(source: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise InputError(f"expected unique keys, got {k!r:.60} twice in one object", file=source)
            out[k] = v
        return out

    return hook


def _bounded_int(source: str) -> Callable[[str], int]:
    def parse(s: str) -> int:
        if len(s.lstrip("-")) > MAX_INT_DIGITS:
            raise InputError(f"expected a number of at most {MAX_INT_DIGITS} digits, got one of {len(s):,}",
                             file=source)  # fmt: skip
        return int(s)

    return parse


def loads_json(text: str, source: str) -> Any:
    """Parse JSON strictly: duplicate keys, integers over :data:`MAX_INT_DIGITS` digits and nesting deeper than
    :data:`MAX_DEPTH` are refused (``NaN``/``Infinity`` literals parse; each schema says where they may stand)."""
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates(source), parse_int=_bounded_int(source))
    except json.JSONDecodeError as exc:
        raise InputError(f"expected JSON, got invalid JSON ({exc.msg} at line {exc.lineno})", file=source) from None
    except RecursionError:
        raise InputError(f"expected JSON nested at most {MAX_DEPTH} deep, got deeper", file=source) from None
    check_depth(obj, source)
    return obj


def loads_toml(text: str, source: str) -> dict[str, Any]:
    """Parse TOML (duplicate keys are a TOML error) with nesting bounded by :data:`MAX_DEPTH`."""
    try:
        d = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"expected TOML, got invalid TOML ({exc})", file=source) from None
    except RecursionError:
        raise InputError(f"expected TOML nested at most {MAX_DEPTH} deep, got deeper", file=source) from None
    check_depth(d, source)
    return d


def check_depth(obj: Any, source: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse nesting deeper than ``max_depth`` (iteratively: a deep document cannot exhaust the stack here)."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, Mapping | list | tuple):
            if d >= max_depth:
                raise InputError(f"expected nesting at most {max_depth} deep, got deeper", file=source)
            children = v.values() if isinstance(v, Mapping) else v
            stack.extend((c, d + 1) for c in children if isinstance(c, Mapping | list | tuple))


def field_error(exc: Exception, source: str | None) -> InputError:
    """One line from a pydantic ``ValidationError``: the first failing field (dotted path), what it expected and
    what it got; the count of further failures."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return InputError(f"expected a valid record, got {exc}", file=source)
    errs = errors(include_url=False)
    if not errs:
        return InputError("expected a valid record", file=source)

    def where(e: Mapping[str, Any]) -> str:  # the union branch tags ("float", "list[float]") are not fields
        parts = [str(p) for p in e.get("loc", ()) if not (isinstance(p, str) and _TYPE_TAG.match(p))]
        return ".".join(parts) or "(top level)"

    e = errs[0]
    loc = where(e)
    n_more = len({where(x) for x in errs} - {loc})
    more = f" (and {n_more} more)" if n_more else ""
    if e.get("type") == "missing":
        return InputError(f"field '{loc}': required, missing{more}", file=source)
    got = e.get("input")
    shown = f"a JSON {'object' if isinstance(got, Mapping) else 'array'}" if isinstance(got, Mapping | list) \
        else repr(got)  # fmt: skip
    if len(shown) > 60:
        shown = shown[:57] + "..."
    msg = str(e.get("msg", "invalid")).rstrip(".")
    return InputError(f"field '{loc}': {msg[:1].lower() + msg[1:]}, got {shown}{more}", file=source)


_TYPE_TAG = re.compile(r"^(float|int|str|bool|none|list\[.*\]|dict\[.*\]|function-\w+\[.*\]|constrained-\w+)$")


def finite(v: float, name: str, source: str | None = None) -> float:
    """``v`` when finite, else one :class:`InputError` naming ``name``."""
    if not math.isfinite(v):
        raise InputError(f"expected a finite {name}, got {v}", file=source)
    return v


# ------------------------------------------------------------------------------------------------ writing
def check_output_path(path: str | Path, option: str) -> Path:
    """``path`` if a file can be written there: not a directory, its directory exists and is writable.

    Called before a run, so that ``--out``/``--report`` to a missing directory fails in a second, not after the
    whole run. Raises :class:`InputError` naming ``option``.
    """
    p = Path(path)
    if "\x00" in str(p):
        raise InputError(f"expected {option} to be a path, got one with a NUL character")
    if p.is_dir():
        raise InputError(f"expected {option} to name a file, got the directory {p}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"expected {option} in an existing directory, got {p} ({parent} does not exist)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"expected {option} in a writable directory, got {p} ({parent} is not writable)")
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"expected {option} to be writable, got the read-only file {p}")
    return p


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory, ``fsync``, ``os.replace``.

    On any failure (a full disk, a kill) the previous file at ``path`` is untouched and the temporary file is
    removed; an :class:`OSError` is re-raised as one :class:`InputError` line naming the path.
    """
    p = Path(path)
    fd, tmp = -1, ""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=str(p.parent) or ".")
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if p.exists():
            try:
                os.chmod(tmp, p.stat().st_mode & 0o7777)
            except OSError:
                pass
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, p)
        tmp = ""
    except OSError as exc:
        raise InputError(f"could not write {p}: {exc.strerror or exc} (the previous file, if any, is unchanged)") \
            from None
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """:func:`atomic_write_bytes` of ``text`` encoded as ``encoding``."""
    atomic_write_bytes(path, text.encode(encoding))
