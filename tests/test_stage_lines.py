"""Stage lines on stderr for long verbs whose stdout is not a terminal (mixlaw.cli._common.stage_lines)."""

from __future__ import annotations

import pytest

from mixlaw.cli._common import progress_bar, stage_lines


def test_stage_lines_start_end_and_throttled(capsys: pytest.CaptureFixture[str]) -> None:
    cb = stage_lines("fit", every=3600.0)
    for done in range(0, 33):
        cb("fit", done, 32)
    cb("fit", 32, 32)  # a repeated end is not printed twice
    cb("bootstrap", 200, 200)
    err = capsys.readouterr().err.splitlines()
    assert [e.split(": ", 1)[1] for e in err] == ["fit 0/32", "fit 32/32", "bootstrap 200/200"]
    assert all(e.startswith("fit [") for e in err)


def test_progress_bar_disabled_gives_lines_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar(False) as cb:
        assert cb is None
    with progress_bar(False, lines="fit") as cb:  # pytest's stdout is not a terminal
        assert cb is not None
        cb("fit", 1, 1)
    assert "fit 1/1" in capsys.readouterr().err
