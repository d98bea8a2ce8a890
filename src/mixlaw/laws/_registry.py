"""Finding laws: the built-in modules, third-party packages (entry points) and user law files.

- Built-in laws are the modules of :mod:`mixlaw.laws` (their ``@register`` decorators run on import).
- A third-party package registers laws through the entry-point group ``mixlaw.laws``; each entry point names a
  module (importing it registers its laws) or a :class:`Law` subclass (registered if it is not already). They are
  loaded lazily, the first time the registry is asked for a law.
- :func:`load_law_file` runs a user's Python file that defines and registers a law (``--law-file PATH.py``).

A law found any of these ways gets fitting, bootstrap, predict and validate with no other change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mixlaw.errors import InputError
from mixlaw.laws._base import LAWS, Law, register
from mixlaw.plugins import PluginLoader

__all__ = ["ENTRY_POINT_GROUP", "LOADER", "describe_law", "get_law", "law_names", "load_law_file", "plugin_errors"]

ENTRY_POINT_GROUP = "mixlaw.laws"

#: Built-in law modules, ``mixlaw.laws`` entry points and user law files (see :mod:`mixlaw.plugins`).
LOADER = PluginLoader(
    kind="law",
    package="mixlaw.laws",
    group=ENTRY_POINT_GROUP,
    base=Law,
    registry=LAWS,
    register=register,
    decorate_hint="decorate a Law subclass with @mixlaw.laws.register",
)


def plugin_errors() -> dict[str, str]:
    """``{entry point: error}`` for ``mixlaw.laws`` entry points that failed to load."""
    LOADER.load_plugins()
    return dict(LOADER.errors)


def _load_all() -> None:
    LOADER.load_all()


def law_names() -> list[str]:
    """Names of every registered law (built-in, entry points, loaded law files), sorted."""
    _load_all()
    return sorted(LAWS)


def get_law(name: str | Law, **options: Any) -> Law:
    """Build a registered law by name (``InputError`` listing the known names otherwise).

    Options are checked against the law's ``options_schema``: an unknown or missing option is a one-line
    :class:`InputError` naming the law and its options.
    """
    if isinstance(name, Law):
        if options:
            raise InputError(f"law '{name.name}' is already configured; pass options with its name instead")
        return name
    _load_all()
    if name not in LAWS:
        raise InputError(f"unknown law '{name}'{_did_you_mean(name)}{LOADER.errors_suffix()}")
    return LAWS[name](**options)


def load_law_file(path: str | Path) -> list[str]:
    """Run a user's law file (a Python file that defines and registers a :class:`Law`); return the new names.

    Loading the same file again returns the same names without running it twice. Errors — a missing file, a
    syntax error, an exception while running it, a name that another law already has, a file that registers no
    law — are one-line :class:`InputError` messages naming the file.
    """
    return LOADER.load_file(path)


def describe_law(name: str) -> dict[str, Any]:
    """What ``mixlaw laws`` shows for one law: formula, inputs, parameters, options (with defaults and help).

    A law with a required option is described from its class declaration (its inputs or parameters may depend on
    the option; ``configured`` is then ``False``) instead of failing.
    """
    _load_all()
    if name not in LAWS:
        raise InputError(f"unknown law '{name}'{_did_you_mean(name)}")
    cls = LAWS[name]
    options = [o.to_dict() for o in cls.options_schema]
    try:
        law = cls()
    except InputError:
        decl = cls._declared
        return {
            "name": name,
            "formula": str(decl["formula"]),
            "inputs": list(decl["inputs"]),
            "params": [p.name for p in decl["param_specs"]],
            "fit_space": decl["fit_space"],
            "citation": str(decl["citation"]),
            "options": options,
            "configured": False,
        }
    return {
        "name": name,
        "formula": law.formula,
        "inputs": list(law.inputs),
        "params": list(law.param_names),
        "fit_space": law.fit_space,
        "citation": law.citation,
        "options": options,
        "configured": True,
    }


def _did_you_mean(name: str) -> str:
    """``; did you mean 'chinchilla'? (every law: mixlaw laws)``, or the list of laws when nothing is close."""
    import difflib

    close = difflib.get_close_matches(str(name), sorted(LAWS), n=3, cutoff=0.6)
    if close:
        return f"; did you mean {' or '.join(repr(c) for c in close)}? (every law: mixlaw laws)"
    return f"; known laws: {', '.join(sorted(LAWS))}"
