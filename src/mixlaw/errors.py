"""One exception family and the warnings mixlaw raises.

Every user-facing failure is a :class:`MixlawError`; the CLI prints its message as one line and exits 1.
"""

from __future__ import annotations

from typing import Any


class MixlawError(Exception):
    """Base class of every error mixlaw raises on purpose."""


class InputError(MixlawError, ValueError):
    """Bad user input: a file, a column, a value. The message names file, row and column where known."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        self.file = file
        self.row = row
        self.column = column
        where = ":".join(str(p) for p in (file, row, column) if p is not None)
        super().__init__(f"{message} in {where}" if where else message)


class FitError(MixlawError, RuntimeError):
    """A fit could not be carried out (e.g. every start failed)."""


class NotFittedError(MixlawError, AttributeError):
    """An estimator was used before ``fit``."""


class ConvergenceWarning(UserWarning):
    """A fit (or some of its starts) did not converge."""


class IdentifiabilityWarning(ConvergenceWarning):
    """The data do not determine some parameters of a fit (its status is ``unidentifiable``)."""


class BoundaryWarning(UserWarning):
    """A fitted parameter sits at a bound of its allowed range."""


class ExtrapolationWarning(UserWarning):
    """A prediction is made outside the range the law was fitted on."""


# ---------------------------------------------------------------------------------------------- row numbers
_LINES_ATTR = "mixlaw_source_lines"


class SourceLines:
    """The line of the source file each row of a table was read from (kept in ``DataFrame.attrs``).

    Messages about a row of a table read from a file name the file's line (a CSV's first data row is line 2).
    pandas copies ``attrs`` to frames derived from the table; those may have dropped or reordered rows, so the
    lines are only used while the frame still has the same length and the same ``run_id``/``step`` order as when
    they were attached (checked on the error path only). Deep copies share the object; equality is identity, so
    concatenating tables of different files drops it.
    """

    __slots__ = ("lines", "keys")

    def __init__(self, lines: Any, keys: tuple[Any, ...]) -> None:
        self.lines = lines
        self.keys = keys

    def __deepcopy__(self, memo: dict[int, Any]) -> SourceLines:
        return self

    def __repr__(self) -> str:
        return f"SourceLines({len(self.lines)} rows)"


def _order_keys(frame: Any) -> tuple[Any, ...]:
    cols = getattr(frame, "columns", ())
    return tuple(frame[c].to_numpy() for c in ("run_id", "step") if c in cols)


def attach_lines(frame: Any, lines: Any) -> Any:
    """Record ``lines`` (one file line per row of ``frame``) on ``frame`` and return it."""
    frame.attrs[_LINES_ATTR] = SourceLines(lines, _order_keys(frame))
    return frame


def source_lines(frame: Any) -> Any:
    """The file lines of ``frame``'s rows (a NumPy array), or ``None`` when unknown or no longer aligned."""
    import numpy as np

    rec = getattr(frame, "attrs", {}).get(_LINES_ATTR)
    if not isinstance(rec, SourceLines) or len(rec.lines) != len(frame):
        return None
    now = _order_keys(frame)
    if len(now) != len(rec.keys) or not all(np.array_equal(a, b) for a, b in zip(now, rec.keys, strict=True)):
        return None
    return np.asarray(rec.lines)


def row_of(frame: Any, position: int) -> int:
    """The row number a message names for row ``position`` (0-based) of ``frame``: the source file's line where
    the table came from a file (:func:`attach_lines`), else ``position + 1``."""
    lines = source_lines(frame)
    return int(lines[position]) if lines is not None else position + 1
