"""Run ids are compared exactly: ids that differ only by surrounding spaces (``"a"``/``"a "``) or by type
(``1``/``"1"``) are never merged into one run — the collision is refused with one line naming both spellings, the
file, the row and the column, in the readers, in ``ingest`` and in :meth:`RunStore.ingest_table`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.runs.store import RunStore
from mixlaw.runs.validate import validate_table

runner = CliRunner()


def _rows(ids: list[object]) -> list[dict[str, object]]:
    return [{"run_id": r, "step": 1, "n_params": 1e8, "tokens": 1e9 * (i + 1), "loss": 3.0 + i / 10}
            for i, r in enumerate(ids)]  # fmt: skip


@pytest.mark.parametrize(
    ("ids", "why"),
    [(["a", "a "], "surrounding spaces"), ([" b", "b"], "surrounding spaces"), ([1, "1"], "type"),
     (["x\t", "x"], "surrounding spaces")],  # fmt: skip
)
def test_validator_refuses_ids_equal_only_after_normalising(ids: list[object], why: str) -> None:
    with pytest.raises(InputError) as err:
        validate_table(pd.DataFrame(_rows(ids)), "t.jsonl")
    msg = str(err.value)
    assert why in msg and "\n" not in msg and msg.endswith("t.jsonl:2:run_id")
    assert repr(ids[0]) in msg and repr(ids[1]) in msg


def test_identical_spellings_are_one_run_and_padding_alone_is_stripped() -> None:
    out = validate_table(pd.DataFrame(_rows([" a", " a", "b"])).assign(step=[1, 2, 1]), "t.csv")
    assert list(out["run_id"]) == ["a", "a", "b"]  # one spelling with spaces: the run 'a', no collision
    out = validate_table(pd.DataFrame(_rows([1, 1, 2])).assign(step=[1, 2, 1]), "t.jsonl")
    assert list(out["run_id"]) == ["1", "1", "2"]


def test_store_ingest_table_refuses_the_collision_and_stays_empty(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as st:
        with pytest.raises(InputError, match="differ only by surrounding spaces"):
            st.ingest_table(pd.DataFrame(_rows(["a", "a "])), "frame")
        assert st.to_frame().empty


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_ingest_cli_refuses_the_issue_reproducers(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / f"t.{fmt}"
    if fmt == "csv":
        src.write_text('run_id,step,n_params,tokens,loss\na,1,1e8,1e9,3.2\n"a ",1,1e8,2e9,3.0\n')
    else:
        src.write_text("".join(json.dumps(r) + "\n" for r in _rows([1, "1"])))
    store = tmp_path / "s.db"
    res = runner.invoke(app, ["ingest", str(src), "--store", str(store)])
    assert res.exit_code != 0
    line = res.output.strip()
    assert "\n" not in line and "Traceback" not in res.output
    assert "differ only by" in line and line.endswith(f"t.{fmt}:{3 if fmt == 'csv' else 2}:run_id")
    assert not store.exists()
