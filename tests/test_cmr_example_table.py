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


def test_the_readme_cmr_column_quotes_cmr_table() -> None:
    """The README's per-size table quotes the generated ``cmr_table.md`` in its `mixlaw cmr` column (the value of the
    reading the answer comes from, to 3 digits, the interval and the status, or the bracket) and in its `mixlaw cmr`
    vs the control column."""
    import re

    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    table = (EXAMPLES / "cmr_table.md").read_text(encoding="utf-8")
    sizes = {"12k": "13.2k", "25k": "21.7k", "100k": "113k"}
    checked = 0
    for size, dom, cell, rel in re.findall(
        r"^\| (12k|25k|100k) \| (legal|code) \([a-z]+\) \| ([^|]+)\|[^|]+\|[^|]+\|[^|]+\| ([^|]+)\|", readme, re.M
    ):
        row = re.search(rf"^\| {dom} \| {re.escape(sizes[size])} \| ([^|]+)\| [^|]+\| ([^|]+)\| ([^|]+)\| [^|]+\| "
                        rf"([^|]+)\| ([^|]+)\|$", table, re.M)  # fmt: skip
        assert row, (size, dom)
        answer, bracket, boundary, status, control = (g.strip() for g in row.groups())
        assert rel.strip() == control, (size, dom)  # the `mixlaw cmr` vs the control column
        cell = cell.strip()
        if answer.startswith("CMR between"):
            lo, hi = (x.strip() for x in bracket.split(","))
            assert cell.startswith(f"between {lo} and {hi}") and f"(tolerance boundary {boundary})" in cell
        else:
            iv = re.search(r"\[[\d.]+, [\d.]+\]", answer)
            assert iv and cell.startswith(f"{boundary} {iv.group(0)}, {status}"), (size, dom, cell, answer)
        checked += 1
    assert checked == 6
