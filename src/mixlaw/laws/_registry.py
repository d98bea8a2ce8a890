"""Finding laws: the built-in modules, third-party packages (entry points) and user law files.

- Built-in laws are the modules of :mod:`mixlaw.laws` (their ``@register`` decorators run on import).
- A third-party package registers laws through the entry-point group ``mixlaw.laws``; each entry point names a
  module (importing it registers its laws) or a :class:`Law` subclass (registered if it is not already). They are
  loaded lazily, the first time the registry is asked for a law.
- :func:`load_law_file` runs a user's Python file that defines and registers a law (``--law-file PATH.py``).

A law found any of these ways gets fitting, bootstrap, predict and validate with no other change.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import sys
from pathlib import Path
from typing import Any

from mixlaw.errors import InputError
from mixlaw.laws._base import LAWS, Law, register

__all__ = ["ENTRY_POINT_GROUP", "describe_law", "get_law", "law_names", "load_law_file", "plugin_errors"]

ENTRY_POINT_GROUP = "mixlaw.laws"

_state: dict[str, bool] = {"builtin": False, "plugins": False}
_plugin_errors: dict[str, str] = {}
_law_files: dict[str, list[str]] = {}


def _load_builtin() -> None:
    if _state["builtin"]:
        return
    import mixlaw.laws as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if not mod.name.startswith("_"):
            importlib.import_module(f"mixlaw.laws.{mod.name}")
    _state["builtin"] = True


def _load_plugins() -> None:
    """Load every ``mixlaw.laws`` entry point once; a broken plugin is recorded (see :func:`plugin_errors`)."""
    if _state["plugins"]:
        return
    _state["plugins"] = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            if isinstance(obj, type) and issubclass(obj, Law):
                if LAWS.get(obj.name) is not obj:
                    register(obj)
        except Exception as exc:  # noqa: BLE001 - a third-party plugin may fail in any way; keep the rest usable
            _plugin_errors[ep.name] = f"{type(exc).__name__}: {exc}"


def plugin_errors() -> dict[str, str]:
    """``{entry point: error}`` for ``mixlaw.laws`` entry points that failed to load."""
    _load_plugins()
    return dict(_plugin_errors)


def _load_all() -> None:
    _load_builtin()
    _load_plugins()


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
        extra = ""
        if _plugin_errors:
            extra = "; plugins that failed to load: " + ", ".join(f"{k} ({v})" for k, v in _plugin_errors.items())
        raise InputError(f"unknown law '{name}'{_did_you_mean(name)}{extra}")
    return LAWS[name](**options)


def load_law_file(path: str | Path) -> list[str]:
    """Run a user's law file (a Python file that defines and registers a :class:`Law`); return the new names.

    Loading the same file again returns the same names without running it twice. Errors — a missing file, a
    syntax error, an exception while running it, a name that another law already has, a file that registers no
    law — are one-line :class:`InputError` messages naming the file.
    """
    p = Path(path)
    if p.suffix != ".py":
        raise InputError(f"expected a Python law file (.py), got '{p}'")
    if not p.is_file():
        raise InputError(f"expected an existing law file, got no such file '{p}'")
    key = str(p.resolve())
    if key in _law_files:
        return list(_law_files[key])
    _load_all()
    before = dict(LAWS)
    mod_name = f"mixlaw_law_file_{p.stem}_{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise InputError(f"cannot load law file '{p}'")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        _rollback(before, mod_name)
        raise InputError(f"law file '{p}' line {exc.lineno}: syntax error ({exc.msg})") from None
    except TypeError as exc:
        _rollback(before, mod_name)
        raise InputError(f"law file '{p}': {exc}") from None
    except Exception as exc:  # noqa: BLE001 - user code may fail in any way; the user gets one line
        _rollback(before, mod_name)
        raise InputError(f"law file '{p}' failed while loading: {type(exc).__name__}: {exc}") from None
    new = sorted(n for n in LAWS if n not in before)
    if not new:
        _rollback(before, mod_name)
        raise InputError(f"law file '{p}' registers no law (decorate a Law subclass with @mixlaw.laws.register)")
    _law_files[key] = new
    return list(new)


def _rollback(before: dict[str, type[Law]], mod_name: str) -> None:
    for n in [n for n in LAWS if n not in before]:
        del LAWS[n]
    sys.modules.pop(mod_name, None)


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
