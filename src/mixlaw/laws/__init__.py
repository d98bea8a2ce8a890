"""Registered scaling laws. Each law lives in its own module; :func:`get_law` builds one by name.

Laws from outside the package: the entry-point group ``mixlaw.laws`` and :func:`load_law_file`.
"""

from mixlaw.laws._base import LAWS, REQUIRED, Law, LawSpec, Option, ParamSpec, Symmetry, register
from mixlaw.laws._registry import ENTRY_POINT_GROUP, describe_law, get_law, law_names, load_law_file, plugin_errors

__all__ = [
    "ENTRY_POINT_GROUP",
    "LAWS",
    "REQUIRED",
    "Law",
    "LawSpec",
    "Option",
    "ParamSpec",
    "Symmetry",
    "describe_law",
    "get_law",
    "law_names",
    "load_law_file",
    "plugin_errors",
    "register",
]
