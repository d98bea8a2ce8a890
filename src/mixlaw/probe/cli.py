"""Moved to :mod:`mixlaw.cli.probe`; this name stays importable (``from mixlaw.probe.cli import app, corpora_app``)."""

from mixlaw.cli.probe import app, corpora_app

__all__ = ["app", "corpora_app"]
