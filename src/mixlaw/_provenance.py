"""Which code produced a result: the package version and, for a source checkout, the git commit.

Recorded in every fit JSON (:meth:`mixlaw.fit.FitResult.to_dict`) and every probe checkpoint, so that a number can
be traced to the code that made it.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

__all__ = ["provenance", "package_version", "git_sha"]


def package_version() -> str:
    """The installed distribution's version (``importlib.metadata``), ``"0+unknown"`` when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mixlaw")
    except PackageNotFoundError:
        return "0+unknown"


@functools.cache
def git_sha() -> str | None:
    """The commit of the source tree this package is imported from (``+dirty`` with uncommitted changes to it).

    ``MIXLAW_GIT_SHA`` overrides it (for builds without ``.git``); ``None`` outside a git checkout or without git.
    """
    env = os.environ.get("MIXLAW_GIT_SHA")
    if env:
        return env
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no", "--", "."],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}+dirty" if dirty else sha or None


@functools.cache
def provenance() -> dict[str, str | None]:
    """``{"mixlaw_version": ..., "git_sha": ...}`` (computed once per process)."""
    return {"mixlaw_version": package_version(), "git_sha": git_sha()}
