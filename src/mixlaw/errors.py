"""One exception family and the warnings mixlaw raises.

Every user-facing failure is a :class:`MixlawError`; the CLI prints its message as one line and exits 1.
"""

from __future__ import annotations


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


class BoundaryWarning(UserWarning):
    """A fitted parameter sits at a bound of its allowed range."""


class ExtrapolationWarning(UserWarning):
    """A prediction is made outside the range the law was fitted on."""
