"""Registered scaling laws. Each law lives in its own module; :func:`get_law` builds one by name."""

from mixlaw.laws._base import LAWS, Law, ParamSpec, get_law, law_names, register

__all__ = ["LAWS", "Law", "ParamSpec", "get_law", "law_names", "register"]
