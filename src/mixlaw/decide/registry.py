"""Finding decisions: the built-in ones, third-party packages (entry points) and user decision files.

- Built-in decisions are the modules of :mod:`mixlaw.decide.builtin` (their ``@register_decision`` runs on import).
- A third-party package registers decisions through the entry-point group ``mixlaw.decisions``; each entry point
  names a module (importing it registers its decisions) or a :class:`~mixlaw.decide.contract.Decision` subclass.
  They are loaded lazily, the first time the registry is asked for a decision.
- :func:`load_decision_file` runs a user's Python file that defines and registers one (``--decision-file``).

A decision found any of these ways gets ``mixlaw decide``, ``--json``, the report section and the bootstrap of
:mod:`mixlaw.fit.uncertainty.from_draws` with no other change.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mixlaw.decide.contract import Decision
from mixlaw.errors import InputError
from mixlaw.plugins import PluginLoader

__all__ = [
    "DECISIONS",
    "ENTRY_POINT_GROUP",
    "LOADER",
    "build_options",
    "decision_names",
    "get_decision",
    "load_decision_file",
    "register_decision",
]

ENTRY_POINT_GROUP = "mixlaw.decisions"

#: name → Decision subclass.
DECISIONS: dict[str, type[Decision]] = {}


def register_decision(cls: type[Decision]) -> type[Decision]:
    """Class decorator: register a :class:`Decision` subclass under its ``name``."""
    if not (isinstance(cls, type) and issubclass(cls, Decision)):
        raise TypeError(f"expected a Decision subclass, got {cls!r}")
    if not cls.name or not cls.name.replace("_", "").isalnum():
        raise TypeError(f"decision {cls.__name__} needs a name of letters, digits and '_', got {cls.name!r}")
    if not (dataclasses.is_dataclass(cls.Options) and cls.Options.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"decision {cls.name!r}: Options must be a frozen dataclass")
    known = DECISIONS.get(cls.name)
    if known is not None and known is not cls and known.__qualname__ != cls.__qualname__:
        raise TypeError(f"a decision named {cls.name!r} is already registered ({known.__module__})")
    DECISIONS[cls.name] = cls
    return cls


#: Built-in decisions, ``mixlaw.decisions`` entry points and user decision files (see :mod:`mixlaw.plugins`).
LOADER = PluginLoader(
    kind="decision",
    package="mixlaw.decide.builtin",
    group=ENTRY_POINT_GROUP,
    base=Decision,
    registry=DECISIONS,
    register=register_decision,
    decorate_hint="decorate a Decision subclass with @register_decision",
)


def decision_names() -> list[str]:
    """Every registered decision, sorted."""
    LOADER.load_all()
    return sorted(DECISIONS)


def get_decision(name: str) -> Decision:
    """An instance of the decision called ``name``; an unknown name is one line with the closest known names."""
    names = decision_names()
    if name not in DECISIONS:
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise InputError(f"unknown decision {name!r}{hint} (known: {', '.join(names)}){LOADER.errors_suffix()}")
    return DECISIONS[name]()


def load_decision_file(path: str | Path) -> list[str]:
    """Run a user's decision file (it defines and registers a Decision); return the names it added.

    Loading the same file again returns the same names without running it twice; any failure is a one-line
    :class:`InputError` naming the file (see :meth:`mixlaw.plugins.PluginLoader.load_file`).
    """
    return LOADER.load_file(path)


def _coerce(text: str, tp: Any, name: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if text.strip().lower() in ("none", "null", "") and len(args) < len(typing.get_args(tp)):
            return None
        for a in args:
            try:
                return _coerce(text, a, name)
            except InputError:
                continue
        raise InputError(f"expected option {name} as {tp}, got {text!r}", column=name)
    if origin is dict:
        _key, value_tp = typing.get_args(tp) or (str, str)
        out = {}
        for item in (x for x in text.split(",") if x.strip()):
            if "=" not in item:
                raise InputError(f"expected option {name} as key=value[,key=value], got {text!r}", column=name)
            k, v = item.split("=", 1)
            out[k.strip()] = _coerce(v.strip(), value_tp, name)
        return out
    if origin is tuple:
        (inner, *_rest) = typing.get_args(tp) or (str,)
        return tuple(_coerce(x.strip(), inner, name) for x in text.split(",") if x.strip())
    if tp is bool:
        low = text.strip().lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise InputError(f"expected option {name} true or false, got {text!r}", column=name)
    if tp in (int, float):
        try:
            return tp(float(text)) if tp is int and float(text).is_integer() else tp(text)
        except ValueError:
            raise InputError(f"expected option {name} as a number, got {text!r}", column=name) from None
    if tp is str or tp is Any:
        return text
    raise InputError(f"option {name} cannot be given on the command line ({tp})", column=name)


def build_options(decision: Decision | type[Decision], given: Mapping[str, Any]) -> Any:
    """The decision's ``Options`` from ``given`` (strings from the command line are coerced by the field types);
    an unknown option is one line listing the known ones."""
    cls = decision.Options
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        known = ", ".join(fields) or "none"
        raise InputError(f"unknown option(s) {', '.join(unknown)} of decision {decision.name!r} (options: {known})")
    kw = {k: _coerce(v, hints[k], k) if isinstance(v, str) else v for k, v in given.items()}
    try:
        return cls(**kw)
    except TypeError as exc:
        raise InputError(f"decision {decision.name!r}: {exc}") from None
