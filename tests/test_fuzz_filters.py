"""Fuzz harness over filter and derive expressions (issue 12 item 1): generated expressions (from the grammar,
from outside it, and random text) never raise anything but a one-line InputError, and never run code.

Fast profile by default; ``pytest -m fuzz_long`` runs the long one (see ``tests/_fuzz.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mixlaw.expr import FUNCTIONS, derive_column, filter_rows

sys.path.insert(0, str(Path(__file__).parent))
from _fuzz import FAST, LONG, flush_report, outcome, scaled  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _report() -> Iterator[None]:
    yield
    flush_report()


FRAME = pd.DataFrame(
    {
        "run_id": ["a", "a", "b", "c"],
        "step": np.array([0, 100, 100, 2**40], dtype=np.int64),
        "n_params": [1e6, 1e6, 2e6, 3e8],
        "loss": [4.0, np.nan, 3.0, -0.0],
        "phase": ["pt", "pt", "cpt", None],
        "Training FLOP": [1.0, 2.0, 3.0, 4.0],
        "flag": [True, False, True, False],
    }
)
_COLS = ["run_id", "step", "n_params", "loss", "phase", "`Training FLOP`", "flag", "nope", "`no such`"]
_BAD = ["__class__", "@x", "x.y", "step.to_csv('/tmp/mixlaw-fuzz-pwned')", "a[0]", "lambda: 1", "`a`b`", "'open",
        "__import__('os')", "open('x')", "f'{step}'", "b'x'", "1j", "...", "None", "{1: 2}", "x if y else z",
        "(x := 1)", "*step", "step is 1", "print"]  # fmt: skip
_ATOMS = st.one_of(
    st.sampled_from(_COLS),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False).map(repr),
    st.sampled_from(["'pt'", '"fit"', "''", "'\\n'", "True", "False", "inf", "1e400", "0x10", "1_000", "'\\ud800'"]),
    st.sampled_from(_BAD),
)
_OPS = ["+", "-", "*", "/", "**", "%", "==", "!=", "<", "<=", ">", ">=", " and ", " or ", "&", "|", " in ",
        " not in ", "@", ".", "//", "<<"]  # fmt: skip


def _expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(_OPS), inner).map("".join),
            inner.map(lambda e: f"({e})"),
            inner.map(lambda e: f"not {e}"),
            inner.map(lambda e: f"~{e}"),
            inner.map(lambda e: f"-{e}"),
            st.tuples(st.sampled_from([*FUNCTIONS, "eval", "getattr"]), inner).map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(
                st.sampled_from(["max", "min"]), inner, st.sampled_from(["run_id", "phase", "[run_id, step]"])
            ).map(lambda t: f"{t[0]}({t[1]}, by={t[2]})"),
            st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
        )

    return st.recursive(_ATOMS, extend, max_leaves=10)


def _filter_case(text: str) -> None:
    for fn, what in ((filter_rows, "where"), (derive_column, "derive")):
        with outcome("filters: --where / --derive expressions") as label:
            label(what)
            out = fn(FRAME, text)
            if fn is filter_rows:  # only rows that exist, each once, unchanged
                assert out.index.is_unique and set(out.index) <= set(FRAME.index)
                pd.testing.assert_frame_equal(out, FRAME.loc[out.index])
            else:
                assert len(out) == len(FRAME)
    assert not Path("/tmp/mixlaw-fuzz-pwned").exists()


FILTER_ARGS = dict(text=st.one_of(_expressions(), st.text(max_size=40)))


@scaled(FAST, 6.0)
@given(**FILTER_ARGS)
def test_fuzz_filters(**kw: Any) -> None:
    _filter_case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 3.0)
@given(**FILTER_ARGS)
def test_fuzz_filters_long(**kw: Any) -> None:
    _filter_case(**kw)
