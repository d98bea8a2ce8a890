"""The README's Data Mixing Laws command prints what the README promises (issue 13 item 9)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parents[1]


def _readme_command(prefix: str) -> list[str]:
    text = " ".join((REPO / "README.md").read_text().split())  # commands wrap across lines in the prose
    m = re.search(rf"`({re.escape(prefix)}[^`]*)`", text)
    assert m, f"no `{prefix} ...` command in the README"
    return shlex.split(m.group(1))


def test_data_mixing_laws_command_prints_the_published_boundary(monkeypatch) -> None:
    from mixlaw.cli import app

    cmd = _readme_command("mixlaw cmr examples/mixinglaws_ct/runs.csv")
    assert cmd[cmd.index("--where") + 1] == "split == 'fit'"
    monkeypatch.chdir(REPO)
    r = CliRunner().invoke(app, [*cmd[1:], "--json"])
    assert r.exit_code == 0, r.output
    cmr = json.loads(r.stdout)["cmr"][0]
    assert cmr["tolerance_boundary"] == pytest.approx(0.7138, abs=5e-4)  # the README: 0.71382, published 0.7138
    assert "0.71382" in (REPO / "README.md").read_text()
