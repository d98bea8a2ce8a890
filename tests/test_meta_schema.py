"""The ``--meta`` table's schema: cells are checked against the RunTable rules of the columns they fill (finite
numbers, numeric columns numeric, non-negative sizes, integer seeds), one line naming file, line and column; a
seeded fuzz of random cells (in the CI set) either reads or fails that way, and what it reads obeys the rules."""

from __future__ import annotations

import math
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mixlaw.errors import InputError
from mixlaw.runs.meta import read_meta

sys.path.insert(0, str(Path(__file__).parent))
from _fuzz import FAST, LONG, flush_report, outcome, scaled  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _report() -> Iterator[None]:
    yield
    flush_report()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("run_id,n_params\na,nan\n", "finite number (or an empty cell), got nan in m.csv:2:n_params"),
        ("run_id,tokens\na,inf\n", "finite number (or an empty cell), got inf in m.csv:2:tokens"),
        ("run_id,n_params\na,abc\n", "expected a number for 'n_params', got 'abc' in m.csv:2:n_params"),
        ("run_id,seed\na,1.5\n", "for 'seed', got 1.5 in m.csv:2:seed"),
        ("run_id,seed\na,1e300\n", "for 'seed'"),
        ("run_id,lr\na,-0.1\n", "non-negative 'lr', got -0.1 in m.csv:2:lr"),
        ("run_id,w_code\na,-1\n", "non-negative 'w_code'"),
        ("run_id,loss_base\na,0\n", "positive loss"),
        ("run_id,n_params,n_params\na,1,2\n", "'n_params' twice"),
    ],
)
def test_bad_cells_refused(tmp_path: Path, body: str, expected: str) -> None:
    p = tmp_path / "m.csv"
    p.write_text(body)
    with pytest.raises(InputError) as err:
        read_meta(p)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_valid_table_reads(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text("run_id,n_params,seed,lr,note\na,1.9e8,3,3e-4,first\nb,,4,,\n")
    t = read_meta(p)
    assert t.rows[0].values == {"n_params": 1.9e8, "seed": 3, "lr": 3e-4, "note": "first"}
    assert t.rows[1].values == {"seed": 4}


_CELL = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1.5", "3", "1e400", "abc", "", " ", "1_000", "0x10", "9" * 30]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers(-(2**70), 2**70).map(str),
    st.text(max_size=5).filter(lambda s: all(0x20 <= ord(c) < 0xD800 and c not in ',"\r\n' for c in s)),
)  # fmt: skip
_COLS = ["n_params", "tokens", "seed", "lr", "loss_base", "w_code", "note", "compute_flops"]


def _case(cells: list[tuple[str, str]]) -> None:
    cols = list(dict(cells))
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.csv"
        p.write_text("run_id," + ",".join(cols) + "\na," + ",".join(dict(cells)[c] for c in cols) + "\n")
        with outcome("meta: random cells") as label:
            label("csv")
            t = read_meta(p)
            for c, v in t.rows[0].values.items():  # what is read obeys the rules of its column
                if c == "note":
                    continue
                assert isinstance(v, int | float) and math.isfinite(v), (c, v)
                assert c == "seed" or (v >= 0 and (c != "loss_base" or v > 0))  # a seed may be negative
                assert c != "seed" or float(v).is_integer()


ARGS: dict[str, Any] = dict(cells=st.lists(st.tuples(st.sampled_from(_COLS), _CELL), min_size=1, max_size=4))


@scaled(FAST, 1.0)
@given(**ARGS)
def test_fuzz_meta(**kw: Any) -> None:
    _case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 1.0)
@given(**ARGS)
def test_fuzz_meta_long(**kw: Any) -> None:
    _case(**kw)
