"""Runs: the RunTable schema and validator, the SQLite RunStore, and readers for foreign logs."""

from mixlaw.runs.io import read_table
from mixlaw.runs.schema import Mixture, RunMeta, validate_table
from mixlaw.runs.store import RunStore

__all__ = ["Mixture", "RunMeta", "RunStore", "read_table", "validate_table"]
