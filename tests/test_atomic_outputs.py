"""Every report, export, spec and bundle mixlaw writes goes through :mod:`mixlaw.safeio` (temp file + fsync +
rename), and output paths are checked before the run: a directory or a missing parent is one line before any
work, and a failed write leaves the previous file byte-identical with no temporary file behind."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.runs.store import RunStore

runner = CliRunner()
SRC = Path(__file__).resolve().parents[1] / "src" / "mixlaw"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: Direct writes to a path (not to a buffer or a string): the only module allowed them is safeio itself; probe/
#: prepares corpora in its own work directory (marker files written last) and appends to its run logs.
DIRECT = re.compile(r"\.write_text\(|\.write_bytes\(|open\([^)]*['\"]wb?['\"]|"
                    r"\.(to_csv|to_parquet|to_json|savefig)\((?!\)|\w+=|buf\b)")  # fmt: skip
ALLOWED = {"safeio.py", "probe/corpora.py", "probe/sources.py"}


def test_no_direct_writes_outside_safeio() -> None:
    found = []
    for p in SRC.rglob("*.py"):
        rel = p.relative_to(SRC).as_posix()
        if rel in ALLOWED:
            continue
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if DIRECT.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{rel}:{i}: {line.strip()}")
    assert not found, "\n".join(found)


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "s.db"
    with RunStore(db) as st:
        st.ingest_table(pd.DataFrame({"run_id": ["a", "a"], "step": [1, 2], "n_params": [1e8, 1e8],
                                      "tokens": [1e9, 2e9], "loss": [3.2, 3.0]}), "frame")  # fmt: skip
    return db


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_failed_export_keeps_the_previous_file(tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    db = _store(tmp_path)
    out = tmp_path / f"runs{suffix}"
    out.write_text("previous\n")
    monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with RunStore(db) as st, pytest.raises(InputError, match="No space left on device"):
        st.export(out)
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["s.db", out.name])  # no temp file left


def test_export_writes_a_table_that_reads_back(tmp_path: Path) -> None:
    db = _store(tmp_path)
    r = runner.invoke(app, ["runs", "--store", str(db), "--export", str(tmp_path / "x.csv")])
    assert r.exit_code == 0, r.output
    assert list(pd.read_csv(tmp_path / "x.csv")["loss"]) == [3.2, 3.0]


@pytest.mark.parametrize("where", ["dir", "missing"])
def test_export_path_checked_first(tmp_path: Path, where: str) -> None:
    db = _store(tmp_path)
    target = tmp_path if where == "dir" else tmp_path / "nope" / "x.csv"
    r = runner.invoke(app, ["runs", "--store", str(db), "--export", str(target)])
    assert r.exit_code == 1 and "--export" in r.output and "\n" not in r.output.strip(), r.output


@pytest.mark.parametrize("where", ["dir", "missing"])
def test_mix_optimize_report_checked_before_fitting(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mixlaw.api.mixture as mix_api

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("fitted before the --report path was checked")

    monkeypatch.setattr(mix_api, "optimize", boom)
    target = tmp_path if where == "dir" else tmp_path / "nope" / "r.html"
    runs = str(EXAMPLES / "mixture_probe" / "runs.csv")
    args = ["mix", "optimize", runs, "--domains", "bio,code,docs,general,legal", "--target-size", "1e9"]
    r = runner.invoke(app, [*args, "--report", str(target)])
    assert r.exit_code == 1 and "--report" in r.output and "\n" not in r.output.strip(), r.output
