"""``--law`` on the command line: required where no law is a meaningful default, checked before the fitting engine.

The built-in laws are the public modules of :mod:`mixlaw.laws`, one law per module named after it (a test holds
the registry to this), so their names are known without importing the package (its base imports torch): a typo
in ``--law`` is a one-line error with "did you mean" in a fraction of a second, and ``mixlaw fit`` without
``--law`` names the choices. Names from ``--law-file`` or a plugin package are checked by the registry itself,
after those are loaded.
"""

from __future__ import annotations

import difflib
import importlib.util
import pkgutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mixlaw.errors import InputError

__all__ = ["builtin_law_names", "check_law_name", "law_choices", "require_law_choices"]

ENTRY_POINT_GROUP = "mixlaw.laws"  # = mixlaw.laws._registry.ENTRY_POINT_GROUP (not imported: it imports torch)


def builtin_law_names() -> list[str]:
    """The built-in law names, sorted: the public module names of :mod:`mixlaw.laws`, found without importing it."""
    spec = importlib.util.find_spec("mixlaw.laws")
    paths = list(spec.submodule_search_locations or []) if spec is not None else []
    return sorted(m.name for m in pkgutil.iter_modules(paths) if not m.name.startswith("_"))


def law_choices() -> str:
    """``"benchmark_logistic, bimix, ..."``: every built-in law, for an error that asks for one."""
    return ", ".join(builtin_law_names())


def _has_plugins() -> bool:
    from importlib.metadata import entry_points

    return bool(entry_points(group=ENTRY_POINT_GROUP))


def check_law_name(name: str, law_files: Sequence[Path] | None = None) -> None:
    """Refuse an unknown ``--law`` before any table is read or the fitting engine is imported.

    A built-in name passes; with ``--law-file`` or a plugin package installed the registry decides later (their
    names are known only once loaded). Otherwise an unknown name is an :class:`InputError`:
    ``unknown law 'chinchila'; did you mean 'chinchilla'? (every law: mixlaw laws)``, or the list of laws when
    nothing is close.
    """
    names = builtin_law_names()
    if name in names or law_files or _has_plugins():
        return
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        hint = " or ".join(map(repr, close))
        raise InputError(f"unknown law {name!r}; did you mean {hint}? (every law: mixlaw laws)")
    raise InputError(f"unknown law {name!r}; expected one of: {', '.join(names)}")


_REQUIRED: dict[type, type] = {}


def _law_class(cls: type) -> type:
    """A subclass of an option class whose "Missing option '--law'" error lists the laws."""
    if cls not in _REQUIRED:

        def get_missing_message(self: Any, ctx: Any = None) -> str:
            return f"Choose a law: {law_choices()} (`mixlaw laws` describes each)"

        _REQUIRED[cls] = type(f"Law{cls.__name__}", (cls,), {"get_missing_message": get_missing_message})
    return _REQUIRED[cls]


def require_law_choices(cmd: Any) -> None:
    """In a command and its sub-commands, a required ``--law`` option names the laws when it is missing."""
    for p in getattr(cmd, "params", []):
        if "--law" in getattr(p, "opts", ()) and getattr(p, "required", False):
            p.__class__ = _law_class(type(p))
    for sub in getattr(cmd, "commands", {}).values():
        require_law_choices(sub)
