"""Run ids compared exactly across files: ids that differ only by surrounding spaces or by type (``"a"``/``"a "``,
``1``/``"1"``) in two files — several files in one ``ingest``, or a file ingested into a store that already holds
the run — are refused with one line naming the run, both spellings and both files, and the store is unchanged.
The same spelling in several files (a run logged in shards) is still one run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.runs.schema import RunMeta
from mixlaw.runs.store import RunStore
from mixlaw.runs.validate import validate_table

runner = CliRunner()


def _jsonl(path: Path, rid: object, step: int) -> Path:
    row = {"run_id": rid, "step": step, "n_params": 1e8, "tokens": 1e9 * step, "loss": 3.0 - step / 10}
    path.write_text(json.dumps(row) + "\n")
    return path


def _csv(path: Path, rid: str, step: int) -> Path:
    path.write_text(f'run_id,step,n_params,tokens,loss\n"{rid}",{step},1e8,{1e9 * step},{3.0 - step / 10}\n')
    return path


PAIRS = [(1, "1", "by type"), ("1", 1, "by type"), ("a", "a ", "by surrounding spaces"),
         (" a", "a", "by surrounding spaces")]  # fmt: skip


@pytest.mark.parametrize(("first", "second", "why"), PAIRS)
def test_two_files_in_one_ingest_are_refused_naming_both(tmp_path: Path, first: object, second: object,
                                                         why: str) -> None:  # fmt: skip
    a, b = _jsonl(tmp_path / "a.jsonl", first, 1), _jsonl(tmp_path / "b.jsonl", second, 2)
    store = tmp_path / "s.db"
    res = runner.invoke(app, ["ingest", str(a), str(b), "--store", str(store), "--json"])
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    err = out["files"][1]["status"]
    assert err.startswith("error: ") and "\n" not in err and why in err
    assert "in a.jsonl and " in err and " in b.jsonl" in err and json.dumps(second) in err
    with RunStore(store, read_only=True) as st:
        assert st.run_ids() == [str(first).strip()] and len(st.to_frame()) == 1  # b wrote nothing


def test_a_file_into_an_existing_store_is_refused_and_the_store_is_unchanged(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert runner.invoke(app, ["ingest", str(_csv(tmp_path / "c.csv", "x", 1)), "--store", str(store)]).exit_code == 0
    with RunStore(store, read_only=True) as st:
        before = st.dump()
    res = runner.invoke(app, ["ingest", str(_csv(tmp_path / "d.csv", "x ", 2)), "--store", str(store)])
    line = res.output.strip()
    assert res.exit_code == 1 and "\n" not in line and "Traceback" not in res.output
    assert "run 'x' written \"x\" (untyped text) in c.csv and \"x \" (untyped text) in d.csv" in line
    assert "surrounding spaces" in line
    with RunStore(store, read_only=True) as st:
        assert st.dump() == before


def test_one_spelling_in_several_files_is_one_run(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    files = [_jsonl(tmp_path / f"shard{i}.jsonl", 7, i) for i in (1, 2)] + [_jsonl(tmp_path / "pad.jsonl", " b ", 1)]
    assert runner.invoke(app, ["ingest", *map(str, files), "--store", str(store)]).exit_code == 0
    res = runner.invoke(app, ["ingest", str(_jsonl(tmp_path / "shard3.jsonl", 7, 3)), str(_jsonl(tmp_path /
                              "pad2.jsonl", " b ", 2)), "--store", str(store)])  # fmt: skip
    assert res.exit_code == 0, res.output
    with RunStore(store, read_only=True) as st:
        assert sorted(st.run_ids()) == ["7", "b"] and st.steps("7") == [1, 2, 3] and st.steps("b") == [1, 2]


def test_a_run_stored_without_a_recorded_spelling_counts_as_plain_text(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as st:
        st.put_run(RunMeta("5", n_params=1e8))  # a sweep's run: written as the text "5"
        row = {"run_id": 5, "step": 1, "n_params": 1e8, "tokens": 1e9, "loss": 3.0}
        with pytest.raises(InputError, match=r"run '5' written \"5\" \(text\) in the store .* and 5 \(a number\)"):
            st.ingest_table(validate_table(pd.DataFrame([row])), "n.jsonl", validated=True)
        assert st.steps("5") == []
        st.ingest_table(pd.DataFrame([{**row, "run_id": "5"}]), "t.csv")  # the plain text: the same run
        assert st.steps("5") == [1]


def test_a_deleted_run_forgets_its_spelling(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as st:
        row = {"run_id": "a ", "step": 1, "n_params": 1e8, "tokens": 1e9, "loss": 3.0}
        st.ingest_table(pd.DataFrame([row]), "one.jsonl")
        with pytest.raises(InputError, match="one.jsonl and .* two.jsonl"):
            st.ingest_table(pd.DataFrame([{**row, "run_id": "a", "step": 2}]), "two.jsonl")
        st.delete_run("a")
        st.ingest_table(pd.DataFrame([{**row, "run_id": "a", "step": 2}]), "two.jsonl")
        assert st.run_ids() == ["a"] and st.steps("a") == [2]


def test_an_lr_table_that_spells_a_run_differently_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"run_id": 3, "step": s, "n_params": 1e8, "tokens": 1e9 * s,
                                       "loss": 3.0 - s / 10}) + "\n" for s in (1, 2)))  # fmt: skip
    lr = tmp_path / "lr.csv"
    lr.write_text('run_id,step,lr\n"3",1,1e-3\n"3 ",2,1e-3\n')  # two spellings in one file
    store = tmp_path / "s.db"
    res = runner.invoke(app, ["ingest", str(log), "--lr-table", str(lr), "--store", str(store)])
    line = res.output.strip()
    assert res.exit_code == 1 and "\n" not in line
    assert "differ only by surrounding spaces" in line and "lr.csv" in line  # within the LR table first
    lr.write_text('run_id,step,lr\n" 3",1,1e-3\n" 3",2,1e-3\n')  # one spelling, padded: the run '3', written ' 3'
    res = runner.invoke(app, ["ingest", str(log), "--lr-table", str(lr), "--store", str(store)])
    line = res.output.strip()
    assert res.exit_code == 1 and "run '3' written 3 (a number) in log.jsonl and \" 3\" (untyped text)" in line
    assert "in lr.csv: they differ only by surrounding spaces" in line
    with RunStore(store, read_only=True) as st:
        assert st.run_ids() == []  # nothing written
    lr.write_text("run_id,step,lr\n3,1,1e-3\n3,2,1e-3\n")  # CSV cells have no type: the text 3 is the log's 3
    res = runner.invoke(app, ["ingest", str(log), "--lr-table", str(lr), "--store", str(store)])
    assert res.exit_code == 0, res.output
    with RunStore(store, read_only=True) as st:
        assert st.run_ids() == ["3"] and st.get_run("3").schedule is not None


def test_a_csv_id_matches_a_typed_id_of_the_same_text_but_not_a_padded_one(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert runner.invoke(app, ["ingest", str(_jsonl(tmp_path / "a.jsonl", 4, 1)), "--store", str(store)]).exit_code == 0
    assert runner.invoke(app, ["ingest", str(_csv(tmp_path / "b.csv", "4", 2)), "--store", str(store)]).exit_code == 0
    res = runner.invoke(app, ["ingest", str(_csv(tmp_path / "c.csv", "4 ", 3)), "--store", str(store)])
    assert res.exit_code == 1 and "4 (a number) in a.jsonl and \"4 \" (untyped text) in c.csv" in res.output
    with RunStore(store, read_only=True) as st:
        assert st.steps("4") == [1, 2]
