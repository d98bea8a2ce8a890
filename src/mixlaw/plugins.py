"""One way to find extensions: built-in modules, entry points and user Python files.

Laws (:mod:`mixlaw.laws._registry`) and decisions (:mod:`mixlaw.decide.registry`) are found the same three ways; a
:class:`PluginLoader` holds the rules once:

- the built-in modules of a package are imported on first use (their decorators register what they define);
- a third-party package registers through an entry-point group; each entry point names a module (importing it
  registers) or a class of the right base (registered if it is not already); a broken entry point is recorded, the
  rest stay usable;
- a user's Python file (``--law-file``, ``--decision-file``) is run once per resolved path; any failure is a
  one-line :class:`~mixlaw.errors.InputError` naming the file, and what the file had registered is rolled back.

Loading an entry point or a user file runs its code: only load what you trust.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mixlaw.errors import InputError

__all__ = ["PluginLoader"]


@dataclass
class PluginLoader:
    """Finds the extensions of one kind (``"law"``, ``"decision"``) and registers them into ``registry``.

    Parameters
    ----------
    kind
        The word used in messages (``"law"``).
    package
        The package whose public modules are the built-ins (``"mixlaw.laws"``).
    group
        The entry-point group (``"mixlaw.laws"``).
    base
        The class an entry point may name directly.
    registry
        ``name → class``, filled by ``register``.
    register
        The registering decorator (raises ``TypeError`` on a bad or clashing class).
    decorate_hint
        What a file that registers nothing should do (``"decorate a Law subclass with @mixlaw.laws.register"``).
    """

    kind: str
    package: str
    group: str
    base: type
    registry: MutableMapping[str, Any]
    register: Callable[[Any], Any]
    decorate_hint: str
    loaded: dict[str, bool] = field(default_factory=lambda: {"builtin": False, "plugins": False})
    errors: dict[str, str] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)

    def load_builtin(self) -> None:
        """Import the package's public modules once."""
        if self.loaded["builtin"]:
            return
        pkg = importlib.import_module(self.package)
        for mod in pkgutil.iter_modules(pkg.__path__):
            if not mod.name.startswith("_"):
                importlib.import_module(f"{self.package}.{mod.name}")
        self.loaded["builtin"] = True

    def load_plugins(self) -> None:
        """Load every entry point of the group once; a broken one is recorded in :attr:`errors`."""
        if self.loaded["plugins"]:
            return
        self.loaded["plugins"] = True
        from importlib.metadata import entry_points

        for ep in entry_points(group=self.group):
            try:
                obj = ep.load()
                is_class = isinstance(obj, type) and issubclass(obj, self.base)
                if is_class and self.registry.get(getattr(obj, "name", "")) is not obj:
                    self.register(obj)
            except Exception as exc:  # noqa: BLE001 - a third-party plugin may fail in any way; keep the rest usable
                self.errors[ep.name] = f"{type(exc).__name__}: {exc}"

    def load_all(self) -> None:
        """Built-ins, then entry points."""
        self.load_builtin()
        self.load_plugins()

    def errors_suffix(self) -> str:
        """``"; plugins that failed to load: a (…), b (…)"``, or ``""``."""
        if not self.errors:
            return ""
        return "; plugins that failed to load: " + ", ".join(f"{k} ({v})" for k, v in self.errors.items())

    def load_file(self, path: str | Path) -> list[str]:
        """Run a user's Python file that defines and registers extensions; return the names it added.

        Loading the same file again returns the same names without running it twice. A missing file, a syntax
        error, an exception while running it, a name that is already taken and a file that registers nothing are
        one-line :class:`InputError` messages naming the file; what the file registered before failing is removed.
        """
        p = Path(path)
        if p.suffix != ".py":
            raise InputError(f"expected a Python {self.kind} file (.py), got '{p}'")
        if not p.is_file():
            raise InputError(f"expected an existing {self.kind} file, got no such file '{p}'")
        key = str(p.resolve())
        if key in self.files:
            return list(self.files[key])
        self.load_all()
        before = set(self.registry)
        mod_name = f"mixlaw_{self.kind}_file_{p.stem}_{hashlib.sha256(key.encode()).hexdigest()[:10]}"
        spec = importlib.util.spec_from_file_location(mod_name, p)
        if spec is None or spec.loader is None:
            raise InputError(f"cannot load {self.kind} file '{p}'")
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        try:
            spec.loader.exec_module(module)
        except SyntaxError as exc:
            self._rollback(before, mod_name)
            raise InputError(f"{self.kind} file '{p}' line {exc.lineno}: syntax error ({exc.msg})") from None
        except TypeError as exc:
            self._rollback(before, mod_name)
            raise InputError(f"{self.kind} file '{p}': {exc}") from None
        except Exception as exc:  # noqa: BLE001 - user code may fail in any way; the user gets one line
            self._rollback(before, mod_name)
            raise InputError(f"{self.kind} file '{p}' failed while loading: {type(exc).__name__}: {exc}") from None
        new = sorted(n for n in self.registry if n not in before)
        if not new:
            self._rollback(before, mod_name)
            raise InputError(f"{self.kind} file '{p}' registers no {self.kind} ({self.decorate_hint})")
        self.files[key] = new
        return list(new)

    def _rollback(self, before: set[str], mod_name: str) -> None:
        for n in [n for n in self.registry if n not in before]:
            del self.registry[n]
        sys.modules.pop(mod_name, None)
