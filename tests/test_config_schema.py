"""The schema of ``--config FILE.toml`` (the plan / cmr / mix specs): every key checked against the verb's own
option before the verb runs — strict types, finite numbers, duplicate keys and deep nesting refused, one line
naming the file and the field — and a seeded fuzz of random values (in the CI set: ``tests/_fuzz.py``)."""

from __future__ import annotations

import json
import math
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.cli.config_schema import read_config
from mixlaw.errors import InputError

sys.path.insert(0, str(Path(__file__).parent))
from _fuzz import FAST, LONG, flush_report, outcome, scaled  # noqa: E402

runner = CliRunner()
VALID = 'sizes = "25k,50k"\ntarget_size = "1.6m"\nbudget = "3e15"\ndomains = ["a", "b"]\nsimulate = 0\n'


@pytest.fixture(autouse=True, scope="module")
def _report() -> Iterator[None]:
    yield
    flush_report()


def _plan_params() -> dict[str, Any]:
    cmd = typer.main.get_command(app).get_command(None, "plan")  # type: ignore[attr-defined,arg-type]
    names: dict[str, Any] = {}
    for q in cmd.params:
        if q.name in (None, "config"):
            continue
        names[q.name] = q
        for o in getattr(q, "opts", ()):
            names.setdefault(o.lstrip("-").replace("-", "_"), q)
    return names


PARAMS = _plan_params()


def _plan(tmp_path: Path, body: str | bytes, *extra: str) -> tuple[int, str]:
    cfg = tmp_path / "plan.toml"
    cfg.write_bytes(body if isinstance(body, bytes) else body.encode())
    r = runner.invoke(app, ["plan", "--config", str(cfg), *extra])
    return r.exit_code, r.output


def test_valid_config_plans_like_the_command_line(tmp_path: Path) -> None:
    code, out = _plan(tmp_path, VALID, "--json")
    assert code == 0, out
    r = runner.invoke(app, ["plan", "--sizes", "25k,50k", "--target-size", "1.6m", "--budget", "3e15", "--domains",
                            "a,b", "--json"])  # fmt: skip
    assert r.exit_code == 0
    same = json.loads(r.output) == json.loads(out)  # (a bool: pytest's diff of two 500 kB strings takes minutes)
    assert same


@pytest.mark.parametrize(
    ("edit", "field", "expected"),
    [
        ("simulate = true", "simulate", "an integer"),
        ('simulate = "3"', "simulate", "an integer"),
        ("simulate = 2.5", "simulate", "an integer"),
        ("tokens_per_param = inf", "tokens_per_param", "a finite number"),
        ("tokens_per_param = nan", "tokens_per_param", "a finite number"),
        ("budget = inf", "budget", "a finite number"),
        ('data_dir = "a\\u0000b"', "data_dir", "without NUL"),
        ("json = 1", "json", "true or false"),
        ("domains = [true, false]", "domains[0]", "a string"),
        ("simulate = [1, 2]", "simulate", "got an array"),
        ("floor_runs = 9223372036854775808", "floor_runs", "at most"),
        ("budgte = 1", "budgte", "did you mean 'budget'"),
    ],
)
def test_bad_values_are_one_line_naming_file_and_field(tmp_path: Path, edit: str, field: str, expected: str) -> None:
    body = "\n".join(line for line in VALID.splitlines() if not line.startswith(edit.split(" ")[0] + " ")) + "\n"
    code, out = _plan(tmp_path, body + edit + "\n")
    assert code == 2, out  # a usage error, before any work
    assert f"field '{field}'" in out and expected in out and "plan.toml" in out and "Traceback" not in out, out


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (VALID + "simulate = 1\n", "invalid TOML"),  # a duplicate key
        (VALID + "x = " + "[" * 100 + "]" * 100 + "\n", "nesting at most"),
        (VALID.encode() + b"# \xff\n", "UTF-8"),
        (VALID + "max_iter = 5\nmax-iter = 6\n", "given twice"),
        (VALID + "simulate_ = 1\n", "unknown option"),
    ],
)
def test_bad_files_are_refused(tmp_path: Path, body: str | bytes, expected: str) -> None:
    code, out = _plan(tmp_path, body)
    assert code == 2 and expected in out and "Traceback" not in out, out


def test_size_bounded() -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "big.toml"
        p.write_text("# " + "x" * (2 * 1024 * 1024) + "\n")
        with pytest.raises(InputError, match="at most 1,048,576 bytes"):
            read_config(str(p), PARAMS)


# ---------------------------------------------------------------------------------------------------- fuzz

_SCALAR = st.one_of(
    st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6).filter(lambda s: all(0x20 <= ord(c) < 0xD800 and c not in '"\\' for c in s)),
)  # fmt: skip
_VALUE = st.recursive(_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(["a", "b"]), inner)),
                      max_leaves=4)  # fmt: skip
_KEYS = sorted({q.name for q in PARAMS.values()}) + ["nonsense"]


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"


def _case(edits: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "plan.toml"
        p.write_text("\n".join(f"{k} = {_toml(v)}" for k, v in dict(edits).items()) + "\n", encoding="utf-8")
        with outcome("config: plan --config with random values") as label:
            label("toml")
            out = read_config(str(p), PARAMS)
            for name, v in out.items():  # what is accepted has its option's type
                kind = str(PARAMS[name].bare_type())
                for x in v if isinstance(v, list) else [v]:
                    if kind == "int":
                        assert isinstance(x, int) and not isinstance(x, bool) and abs(x) < 2**63
                    elif kind == "float":
                        assert isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
                    elif kind == "bool":
                        assert isinstance(x, bool)
                    else:
                        assert isinstance(x, str) and "\x00" not in x
                        assert not any(t in ("nan", "inf", "-inf") for t in x.replace("=", ",").split(","))


ARGS = dict(edits=st.lists(st.tuples(st.sampled_from(_KEYS), _VALUE), min_size=1, max_size=3))


@scaled(FAST, 1.0)
@given(**ARGS)
def test_fuzz_config(**kw: Any) -> None:
    _case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 1.0)
@given(**ARGS)
def test_fuzz_config_long(**kw: Any) -> None:
    _case(**kw)
