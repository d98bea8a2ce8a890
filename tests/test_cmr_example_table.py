"""The example's CMR table (examples/cmr_probe/cmr_table.md) is what the main job decides on the shipped runs: the
script that writes it, re-run, reproduces it line for line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "cmr_probe"


def test_example_cmr_table_is_current() -> None:
    spec = importlib.util.spec_from_file_location("cmr_table", EXAMPLES / "cmr_table.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fresh = mod.table_markdown(pd.read_csv(EXAMPLES / "runs.csv"))
    assert fresh == (EXAMPLES / "cmr_table.md").read_text(encoding="utf-8")
    assert "CMR between 0.25 and 0.5" in fresh  # 113k legal: bracketed, not the tolerance boundary
