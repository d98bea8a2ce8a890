"""The run tables behind every verb: reading files and stores, table options, row selection, ingest and listing."""

from mixlaw.expr import filter_rows
from mixlaw.runs.base_eval import add_base_eval
from mixlaw.runs.columns import column_summary, format_numbers
from mixlaw.runs.ingest import expand_sources, ingest_files
from mixlaw.runs.io import parse_column_map, read_table
from mixlaw.runs.schema import RUN_LEVEL_COLUMNS
from mixlaw.runs.select import TableOptions, load_runs, parse_set, parse_steps
from mixlaw.runs.store import RunStore

__all__ = [
    "RUN_LEVEL_COLUMNS",
    "RunStore",
    "TableOptions",
    "add_base_eval",
    "column_summary",
    "expand_sources",
    "filter_rows",
    "format_numbers",
    "ingest_files",
    "load_runs",
    "parse_column_map",
    "parse_set",
    "parse_steps",
    "read_table",
]
