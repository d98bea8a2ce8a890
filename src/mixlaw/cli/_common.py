"""What every verb shares: the one user-error handler, JSON output, progress bars and the common options.

Only typer, rich and the standard library are imported here (and by every ``mixlaw.cli`` module at import time),
so that ``mixlaw --help`` answers without loading torch, scipy, pandas or matplotlib.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from mixlaw.errors import MixlawError

__all__ = [
    "verb",
    "user_errors",
    "one_line",
    "emit_json",
    "progress_bar",
    "stage_lines",
    "console",
    "TableArg",
    "StoreOpt",
    "WhereOpt",
    "MapOpt",
    "DeriveOpt",
    "LawOpt",
    "LawOptionOpt",
    "LawFileOpt",
    "JsonOpt",
    "MaxMemoryOpt",
    "check_file",
]

F = TypeVar("F", bound=Callable[..., Any])


MAX_MESSAGE = 400
"""Characters of an error or warning message printed at most (the rest is elided, with the total length)."""


def one_line(message: str, limit: int = MAX_MESSAGE) -> str:
    """``message`` as one bounded line: line breaks and control characters escaped, at most ``limit`` characters
    kept (then ``… (N characters)``). A nested value once produced a 40 KB "one-line" error."""
    flat = "".join(c if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF else repr(c)[1:-1] for c in message)
    if len(flat) <= limit:
        return flat
    return f"{flat[: limit - 24].rstrip()}… ({len(flat):,} characters)"


@contextmanager
def user_errors() -> Iterator[list[warnings.WarningMessage]]:
    """Turn mixlaw errors (and OS errors on user paths) into one ``error: ...`` line on stderr and exit 1.

    Warnings raised inside are collected and printed as one ``warning: ...`` line each, after the verb's output.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield caught
        except MixlawError as exc:
            typer.echo(f"error: {one_line(_as_cli(exc))}", err=True)
            raise typer.Exit(1) from None
        except OSError as exc:
            text = f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
            typer.echo(f"error: {one_line(text)}", err=True)
            raise typer.Exit(1) from None
        finally:
            for w in caught:
                typer.echo(f"warning: {w.category.__name__}: {one_line(str(w.message))}", err=True)


#: API keywords an error may name (``InputError(column=...)``) and the CLI option that sets each.
KEYWORD_FLAGS = {"level": "--level", "interval": "--interval", "method": "--method", "drop_highest": "--drop-highest"}
KEYWORD_FLAGS |= {k: f"--{k.replace('_', '-')}" for k in ("order_column", "size_column", "group_column")}


def _as_cli(exc: MixlawError) -> str:
    """An API error in the CLI's words: ``expected a level in (0, 1), got 1.5 (--level)``, not ``... in level``."""
    text = str(exc)
    col = getattr(exc, "column", None)
    if col in KEYWORD_FLAGS and getattr(exc, "file", None) is None and getattr(exc, "row", None) is None:
        tail = f" in {col}"
        if text.endswith(tail):
            return f"{text[: -len(tail)]} ({KEYWORD_FLAGS[col]})"
    return text


def verb(func: F) -> F:
    """Decorator of every verb: run it inside :func:`user_errors` (typer still sees the original signature)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with user_errors():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def console(stderr: bool = False) -> Any:
    """A rich console (imported on first use)."""
    from rich.console import Console

    return Console(stderr=stderr)


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, Path):
        return str(v)
    raise TypeError(type(v).__name__)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


def emit_json(obj: Any, **dumps: Any) -> None:
    """Print one JSON object (NaN/inf as null, numpy scalars as numbers)."""
    typer.echo(json.dumps(_clean(obj), default=_json_default, **dumps))


@contextmanager
def progress_bar(enabled: bool, lines: str | None = None) -> Iterator[Callable[[str, int, int], None] | None]:
    """A ``(stage, done, total)`` callback drawing one rich bar per stage on stderr; disabled, with ``lines`` (the
    verb) and stdout not a terminal (a log, a pipe, CI), one stderr line per stage when it starts and ends and at
    most every 10 s between (:func:`stage_lines`); else ``None``."""
    if not enabled:
        yield stage_lines(lines) if lines is not None and not sys.stdout.isatty() else None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    ) as prog:
        tasks: dict[str, Any] = {}

        def cb(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = prog.add_task(stage, total=total)
            prog.update(tasks[stage], completed=done, total=total)

        yield cb


def stage_lines(verb: str, every: float = 10.0) -> Callable[[str, int, int], None]:
    """``(stage, done, total)`` → ``<verb> [  12 s]: bootstrap 40/200`` on stderr: at a stage's start and end and at
    most every ``every`` seconds between."""
    import time

    t0 = time.monotonic()
    last: dict[str, float] = {}

    def cb(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage in last and done < total and now - last[stage] < every:
            return
        if stage in last and done >= total and last[stage] == -1.0:
            return
        last[stage] = -1.0 if done >= total else now
        print(f"{verb} [{now - t0:5.0f} s]: {stage} {done}/{total}", file=sys.stderr, flush=True)

    return cb


TableArg = Annotated[
    Path | None,
    typer.Argument(
        help="Table file (CSV, JSONL, Parquet, TensorBoard dir, W&B export) or RunStore (*.db); default: the --store."
    ),
]
StoreOpt = Annotated[Path, typer.Option("--store", help="RunStore used when TABLE is omitted.")]
WHERE_HELP = "Row filter: columns, literals, comparisons, and/or/not, + - * /, log/exp/sqrt, max(step, by=run_id)."
WhereOpt = Annotated[str | None, typer.Option("--where", help=WHERE_HELP)]
MapOpt = Annotated[list[str] | None, typer.Option("--map", help="canonical=foreign column rename (repeatable).")]
DeriveOpt = Annotated[
    list[str] | None, typer.Option("--derive", help="column=expression (the --where expression language; repeatable).")
]
LawOpt = Annotated[str, typer.Option("--law", help="Registered law (see `mixlaw laws`).")]
LawOptionOpt = Annotated[list[str] | None, typer.Option("--law-option", help="Law option key=value (repeatable).")]
LawFileOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--law-file",
        help="Python file defining and registering a Law (repeatable). It is imported: it RUNS CODE, with your "
        "permissions; only pass files you trust.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
DecisionMaxIterOpt = Annotated[
    int | None,
    typer.Option(
        "--max-iter",
        help="Iteration cap of every fit the decision makes (default: each fit's own limit, the adaptive one where "
        "it runs while the fit improves).",
    ),
]
LevelOpt = Annotated[float, typer.Option("--level", help="Interval level, e.g. 0.95.")]
MaxMemoryOpt = Annotated[
    str,
    typer.Option(
        "--max-memory",
        help="Memory the job may plan to use (4G, 512M, ...): larger requests stop first with their estimate.",
    ),
]


def check_file(path: Path, what: str) -> None:
    """A missing input file (or a directory) is the error :func:`mixlaw.safeio.read_text` gives, raised before a
    verb imports its libraries: ``expected a fit JSON file, got no such file in fit.json`` in a fraction of a
    second instead of after seconds of imports."""
    if not path.is_file():
        from mixlaw.errors import InputError

        raise InputError(f"expected a {what} file, got {'a directory' if path.is_dir() else 'no such file'}",
                         file=str(path))  # fmt: skip


def parse_weights(items: Sequence[str] | None, what: str = "--weights") -> dict[str, float]:
    """The one weights syntax of every verb: ``NAME=VALUE`` items, repeated or comma-separated
    (``--weights loss_a=0.5 --weights loss_b=0.5`` = ``--weights loss_a=0.5,loss_b=0.5``)."""
    from mixlaw.errors import InputError

    out: dict[str, float] = {}
    for item in (part for it in items or () for part in str(it).split(",") if part.strip()):
        if "=" not in item:
            raise InputError(f"{what}: expected name=value, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise InputError(f"{what} {item}: expected a number after '='") from None
    return out
