"""Registered scaling laws. Each law lives in its own module; :func:`get_law` builds one by name."""

from mixlaw.laws._base import LAWS, Law, ParamSpec, get_law, law_names, register

__all__ = ["LAWS", "Law", "ParamSpec", "get_law", "law_names", "register", "load_law_file"]


def load_law_file(path: str) -> list[str]:
    """Import a user's law file (a ``.py`` that defines and :func:`register`\\ s a :class:`Law`).

    Minimal implementation: the module is imported under a unique name; returns the names of the laws it
    registered. ``InputError`` when the file is missing, fails to import or registers no law.
    """
    import hashlib
    import importlib.util
    import sys
    from pathlib import Path

    from mixlaw.errors import InputError

    p = Path(path)
    if not p.is_file():
        raise InputError(f"expected a law file (.py), got no such file {path}")
    law_names()  # the built-in laws first, so that a name clash is the user file's
    before = set(LAWS)
    mod_name = f"mixlaw_user_law_{hashlib.sha1(str(p.resolve()).encode()).hexdigest()[:12]}"
    if mod_name in sys.modules:  # loaded before in this process: report what it registered then
        return sorted(getattr(sys.modules[mod_name], "__mixlaw_laws__", []))
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise InputError(f"expected a Python law file, got {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code may raise anything
        del sys.modules[mod_name]
        for name in set(LAWS) - before:
            del LAWS[name]
        raise InputError(f"expected an importable law file, got {type(exc).__name__}: {exc} in {path}") from None
    new = sorted(set(LAWS) - before)
    if not new:
        del sys.modules[mod_name]
        raise InputError(f"expected the law file to register a law (@register), got none in {path}")
    setattr(module, "__mixlaw_laws__", new)  # noqa: B010 - a marker the module did not define
    return new
