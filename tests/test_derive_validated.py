"""Derived (``--derive``) and ``--set`` values are validated like values read from the file: a negative loss, a
negative token count or a non-finite value is one error naming the file, row, column and run, and the store is
not created or changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mixlaw.cli import app

runner = CliRunner()

CSV = "run_id,step,n_params,tokens,loss\na,1,1e8,1e9,3.2\na,2,1e8,2e9,3.0\nb,1,2e8,1e9,3.1\n"


def _ingest(tmp_path: Path, *args: str) -> tuple[int, str, Path]:
    src = tmp_path / "t.csv"
    src.write_text(CSV)
    store = tmp_path / "s.db"
    res = runner.invoke(app, ["ingest", str(src), "--store", str(store), *args])
    return res.exit_code, res.output, store


@pytest.mark.parametrize(
    ("derive", "column", "row", "run"),
    [
        ("loss=-loss", "loss", 2, "a"),  # the reproducer (with --where 'step >= 0' below)
        ("tokens=tokens-1.5e9", "tokens", 2, "a"),
        ("loss=log(loss-3.05)", "loss", 3, "a"),  # log of a negative number: NaN, not a missing cell
        ("n_params=n_params-1.5e8", "n_params", 2, "a"),
    ],
)
def test_bad_derived_values_refused_before_the_store(
    tmp_path: Path, derive: str, column: str, row: int, run: str
) -> None:
    code, out, store = _ingest(tmp_path, "--derive", derive, "--where", "step >= 0")
    assert code != 0
    line = out.strip()
    assert "\n" not in line and "Traceback" not in out
    assert f"--derive {column}" in line and f"run '{run}'" in line and f"t.csv:{row}:{column}" in line
    assert not store.exists()  # nothing written


def test_bad_derived_value_leaves_an_existing_store_byte_identical(tmp_path: Path) -> None:
    code, _, store = _ingest(tmp_path)
    assert code == 0
    before = store.read_bytes()
    code, out, _ = _ingest(tmp_path, "--derive", "loss=-loss", "--replace")
    assert code != 0 and "--derive loss" in out
    assert store.read_bytes() == before


def test_valid_derived_values_are_stored(tmp_path: Path) -> None:
    code, out, store = _ingest(tmp_path, "--derive", "loss=loss*2")
    assert code == 0, out
    from mixlaw.runs.store import RunStore

    with RunStore(store) as st:
        df = st.to_frame()
    assert sorted(df["loss"].round(6)) == [6.0, 6.2, 6.4]


def test_set_values_are_validated_like_read_values(tmp_path: Path) -> None:
    src = tmp_path / "u.csv"
    src.write_text("run_id,step,n_params,loss\na,1,1e8,3.2\n")
    for value, what in (("-5", "non-negative"), ("inf", "finite")):
        res = runner.invoke(app, ["ingest", str(src), "--store", str(tmp_path / "s.db"), "--set", f"tokens={value}"])
        assert res.exit_code != 0 and what in res.output and "u.csv:2:tokens" in res.output
    assert not (tmp_path / "s.db").exists()
