"""Moved to :mod:`mixlaw.cli.runs`; this name stays importable (``from mixlaw.runs.cli import ingest, runs``)."""

from mixlaw.cli.runs import app, ingest, runs

__all__ = ["app", "ingest", "runs"]
