"""Fuzz harness over the file formats and the store (issue 12): malformed files always give a one-line
InputError, never a traceback or a hang; invalid data is never silently accepted; whatever is accepted is
stored and read back unchanged (``to_frame``, ``runs`` never fail on it).

Fast profile by default; ``pytest -m fuzz_long`` runs the long one (see ``tests/_fuzz.py``).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mixlaw.runs.io import read_table
from mixlaw.runs.store import RunStore

sys.path.insert(0, str(Path(__file__).parent))
from _formats import event, field, simple, write_events  # noqa: E402
from _fuzz import FAST, LONG, flush_report, outcome, scaled  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _report() -> Iterator[None]:
    yield
    flush_report()


# ------------------------------------------------------------------------------------ valid tables, mutations
def _valid(rng: np.random.Generator, n_runs: int, n_steps: int) -> list[dict[str, Any]]:
    recs = []
    for r in range(n_runs):
        w = rng.dirichlet([1.0, 1.0])
        n = int(rng.integers(10**5, 10**8))
        for s in range(n_steps):
            recs.append(
                {
                    "run_id": f"r{r}",
                    "step": s * 100,
                    "tokens": s * 100 * 4096,
                    "n_params": n,
                    "seed": r,
                    "w_a": float(w[0]),
                    "w_b": float(1.0 - w[0]),
                    "loss_a": float(3 + rng.random()),
                    "size": f"s{r}",
                }
            )
    return recs


def _set(recs: list[dict[str, Any]], row: int, key: str, value: Any) -> list[dict[str, Any]]:
    out = [dict(r) for r in recs]
    out[row % len(out)][key] = value
    return out


# Each mutation makes the table invalid: reading + ingesting it must raise InputError, whatever the format.
MUTATIONS: dict[str, Any] = {
    "nan_loss": lambda t, i: _set(t, i, "loss_a", math.nan),
    "inf_loss": lambda t, i: _set(t, i, "loss_a", math.inf),
    "neg_inf_tokens": lambda t, i: _set(t, i, "tokens", -math.inf),
    "negative_step": lambda t, i: _set(t, i, "step", -100),
    "fractional_step": lambda t, i: _set(t, i, "step", 0.5),
    "step_1e19": lambda t, i: _set(t, i, "step", 1e19),
    "step_2_63": lambda t, i: _set(t, i, "step", 2**63 - 1),
    "step_2_53_plus_1": lambda t, i: _set(t, i, "step", 2**53 + 1),
    "step_400_digits": lambda t, i: _set(t, i, "step", 10**400),
    "seed_1e19": lambda t, i: [dict(r, seed=1e19) for r in t],
    "seed_text": lambda t, i: [dict(r, seed="abc") for r in t],
    "arabic_digits": lambda t, i: _set(t, i, "loss_a", "٣"),
    "fullwidth_step": lambda t, i: _set(t, i, "step", "１"),
    "underscore_number": lambda t, i: _set(t, i, "tokens", "1_000"),
    "negative_tokens": lambda t, i: _set(t, i, "tokens", -1),
    "bad_mixture_sum": lambda t, i: _set(t, i, "w_a", 0.9),
    "negative_weight": lambda t, i: _set(_set(t, i, "w_a", -0.5), i, "w_b", 1.5),
    "non_numeric_loss": lambda t, i: _set(t, i, "loss_a", "abc"),
    "bool_loss": lambda t, i: _set(t, i, "loss_a", True),
    "duplicate_row": lambda t, i: [*t, dict(t[i % len(t)])],
    "varying_n_params": lambda t, i: [*t, dict(t[i % len(t)], step=10**6, n_params=7)],
    "bad_phase": lambda t, i: [dict(r, phase="sft") for r in t],
    "surrogate_run_id": lambda t, i: _set(t, i, "run_id", "r\ud800"),
    "surrogate_label": lambda t, i: [dict(r, size="\udc80") for r in t],
    "empty_run_id": lambda t, i: _set(t, i, "run_id", "  "),
    "drop_loss": lambda t, i: [{k: v for k, v in r.items() if k != "loss_a"} for r in t],
    "deep_schedule": lambda t, i: [dict(r, schedule=_deep(3000)) for r in t],
    "schedule_inf": lambda t, i: [dict(r, schedule={"kind": "constant", "peak_lr": math.inf}) for r in t],
    "schedule_not_object": lambda t, i: [dict(r, schedule=[1, 2]) for r in t],
}


class _Deep:
    """A schedule nested ``n`` levels deep, written as raw JSON text (json.dumps would hit the recursion limit)."""

    def __init__(self, n: int) -> None:
        self.text = '{"kind": "x", "a": ' * n + "1" + "}" * n


def _deep(n: int) -> _Deep:
    return _Deep(n)


def _json_record(r: dict[str, Any]) -> str:
    """One JSON object; NaN / Infinity as json.dumps writes them (json.loads reads them back)."""
    deep = {k: v.text for k, v in r.items() if isinstance(v, _Deep)}
    text = json.dumps({k: ("@" + k if k in deep else v) for k, v in r.items()})
    for k, raw in deep.items():
        text = text.replace(json.dumps("@" + k), raw)
    return text


def _write(recs: list[dict[str, Any]], path: Path) -> None:
    if path.suffix == ".csv":
        cols: list[str] = []
        for r in recs:
            cols += [k for k in r if k not in cols]

        def cell(v: Any) -> str:
            if v is None:
                return ""
            if isinstance(v, _Deep):
                v = v.text
            elif isinstance(v, dict | list):
                v = json.dumps(v)
            s = str(v) if not isinstance(v, float) else repr(v)
            return '"' + s.replace('"', '""') + '"' if any(ch in s for ch in ',"\n') else s

        lines = [",".join(cols)] + [",".join(cell(r.get(c)) for c in cols) for r in recs]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    else:
        text = [_json_record(r) for r in recs]
        if path.suffix == ".json":
            path.write_text("[" + ",".join(text) + "]", encoding="utf-8")
        else:
            path.write_text("\n".join(text) + "\n", encoding="utf-8")


def _check_roundtrip(table: pd.DataFrame, store: RunStore, name: str) -> None:
    """Accepted data is stored and read back: every read works and returns the numbers that went in."""
    store.ingest_table(table, name, validated=True)
    frame = store.to_frame(include_schedule=True)
    store.runs()
    got = frame.set_index(["run_id", "step"]).sort_index()
    want = table.set_index(["run_id", "step"]).sort_index()
    for c in ("loss", "loss_a", "loss_x", "tokens", "lr"):
        if c in want.columns:
            b = want[c].to_numpy(dtype=float)
            if c not in got.columns:  # a column with no value at all is not stored: it reads back as absent
                assert np.isnan(b).all(), c
                continue
            np.testing.assert_array_equal(got[c].to_numpy(dtype=float), b)


def _mutated_case(seed: int, n_runs: int, n_steps: int, kind: str, row: int, suffix: str, allow_nan: bool) -> None:
    rng = np.random.default_rng(seed)
    bad = MUTATIONS[kind](_valid(rng, n_runs, n_steps), row)
    if kind == "nan_loss" and allow_nan:
        bad = MUTATIONS["inf_loss"](bad, row)  # NaN is allowed then; inf never is
    with tempfile.TemporaryDirectory() as d, RunStore(":memory:") as store:
        store.ingest_table(pd.DataFrame(_valid(rng, 1, 2)).assign(run_id="existing"), "seed.csv")
        before = store.dump()
        path = Path(d) / f"runs{suffix}"
        _write(bad, path)
        try:
            with outcome("formats: mutated valid tables", must_fail=True) as label:
                label(f"{suffix} {kind}")
                store.ingest_table(read_table(path, allow_nan=allow_nan), path.name, validated=True)
        finally:
            assert store.dump() == before  # a refused file writes nothing
            store.to_frame()


MUTATION_ARGS = dict(
    seed=st.integers(0, 2**16),
    n_runs=st.integers(1, 3),
    n_steps=st.integers(1, 4),
    kind=st.sampled_from(sorted(MUTATIONS)),
    row=st.integers(0, 100),
    suffix=st.sampled_from([".csv", ".jsonl", ".json"]),
    allow_nan=st.booleans(),
)


@scaled(FAST, 1.0)
@given(**MUTATION_ARGS)
def test_fuzz_mutated_tables(**kw: Any) -> None:
    _mutated_case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 1.0)
@given(**MUTATION_ARGS)
def test_fuzz_mutated_tables_long(**kw: Any) -> None:
    _mutated_case(**kw)


# --------------------------------------------------------------------------------------- random cells and bytes
_CELL = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", "nan", "NaN", "inf", "-inf", "-1", "0", "1e3", "1.5", "abc", '"', "a,b", "\t", "1e19",
                     "9007199254740993", "١٢٣", "１", "1_0", "0x10", "∞", "\ud800", "9" * 400, "-0", "+1"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(2**70), 2**70).map(str),
)  # fmt: skip
_JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**80), 2**80),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
        st.sampled_from(["\ud800", "١", "nan", "1e400"]),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=6,
)


def _cells_case(
    seed: int, n_runs: int, n_steps: int, edits: list[tuple[int, str, Any]], suffix: str, allow_nan: bool
) -> None:
    """A valid table with a few cells replaced by random values (valid or not): either a clean error, or a
    table the store takes and gives back unchanged."""
    recs = _valid(np.random.default_rng(seed), n_runs, n_steps)
    for row, col, value in edits:
        recs = _set(recs, row, col, value)
    with tempfile.TemporaryDirectory() as d, RunStore(":memory:") as store:
        path = Path(d) / f"t{suffix}"
        if suffix == ".csv":
            cols = list(dict.fromkeys(k for r in recs for k in r))
            lines = [",".join(cols)] + [",".join(str(r.get(c, "")) for c in cols) for r in recs]
            path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
        else:
            path.write_text("\n".join(json.dumps(r) for r in recs) + "\n", encoding="utf-8")
        before = store.dump()
        with outcome("formats: valid tables with random cells (CSV, JSONL)") as label:
            label(suffix)
            try:
                table = read_table(path, allow_nan=allow_nan)
            except BaseException:
                assert store.dump() == before
                raise
            assert table["step"].dtype == np.int64 and not table.duplicated(["run_id", "step"]).any()
            assert (table["step"].abs() < 2**53).all()
            _check_roundtrip(table, store, path.name)


_COLUMNS = st.sampled_from(["run_id", "step", "tokens", "n_params", "seed", "w_a", "w_b", "loss_a", "size", "lr",
                            "phase", "parent_run", "schedule", "x"])  # fmt: skip
CELL_ARGS = dict(
    seed=st.integers(0, 2**16),
    n_runs=st.integers(1, 3),
    n_steps=st.integers(1, 3),
    edits=st.lists(st.tuples(st.integers(0, 20), _COLUMNS, st.one_of(_CELL, _JSON_VALUE)), max_size=3),
    suffix=st.sampled_from([".csv", ".jsonl"]),
    allow_nan=st.booleans(),
)


@scaled(FAST, 1.5)
@given(**CELL_ARGS)
def test_fuzz_random_cells(**kw: Any) -> None:
    _cells_case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 2.0)
@given(**CELL_ARGS)
def test_fuzz_random_cells_long(**kw: Any) -> None:
    _cells_case(**kw)


def _bytes_case(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        name = "events.out.tfevents.x" if suffix == ".tfevents" else f"f{suffix}"
        path = Path(d) / name
        path.write_bytes(data)
        with outcome("formats: random bytes") as label:
            label(suffix)
            read_table(path)


BYTES_ARGS = dict(
    data=st.one_of(
        st.binary(max_size=400),
        st.sampled_from([b"run_id,step,loss\n", b'{"run_id": "a"}\n', b"PAR1", b"\xff\xfe", b"[{}]", b"{}"]).flatmap(
            lambda head: st.binary(max_size=200).map(lambda tail: head + tail)
        ),
    ),
    suffix=st.sampled_from([".csv", ".tsv", ".jsonl", ".json", ".parquet", ".tfevents"]),
)


@scaled(FAST, 1.0)
@given(**BYTES_ARGS)
def test_fuzz_random_bytes(**kw: Any) -> None:
    _bytes_case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 1.0)
@given(**BYTES_ARGS)
def test_fuzz_random_bytes_long(**kw: Any) -> None:
    _bytes_case(**kw)


# ------------------------------------------------------------------------------------------------ TensorBoard
def _tb_case(runs: list[list[tuple[int, str, float]]], garbage: bytes) -> None:
    with tempfile.TemporaryDirectory() as d, RunStore(":memory:") as store:
        root = Path(d) / "tb"
        for k, events in enumerate(runs):
            evs = [event(step, [simple(tag, value)]) for step, tag, value in events]
            path = write_events(root / f"run{k}" / "events.out.tfevents.1", evs)
            if garbage:
                path.write_bytes(path.read_bytes() + field(1, 2, garbage))
        with outcome("formats: TensorBoard event files") as label:
            label("tfevents")
            table = read_table(root)
            assert set(table["run_id"]) <= {f"run{k}" for k in range(len(runs))}  # a tag never renames a run
            assert (table["step"] >= 0).all() and (table["step"] < 2**53).all()
            _check_roundtrip(table, store, "tb")


_TAG = st.one_of(
    st.sampled_from(["loss", "eval/code/loss", "lr", "run_id", "step", "phase", "seed", "n_params", "train/loss"]),
    st.text(min_size=1, max_size=6),
)
TB_ARGS = dict(
    runs=st.lists(
        st.lists(
            st.tuples(
                st.one_of(st.integers(0, 100), st.integers(0, 2**64 - 1)),
                _TAG,
                st.floats(width=32, allow_nan=True, allow_infinity=True),
            ),
            min_size=1,
            max_size=4,
        ),
        min_size=1,
        max_size=2,
    ),
    garbage=st.one_of(st.just(b""), st.binary(max_size=12)),
)


@scaled(FAST, 0.6)
@given(**TB_ARGS)
def test_fuzz_tensorboard(**kw: Any) -> None:
    _tb_case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 0.5)
@given(**TB_ARGS)
def test_fuzz_tensorboard_long(**kw: Any) -> None:
    _tb_case(**kw)


# -------------------------------------------------------------------------------------------------- Parquet
def _parquet_case(values: list[Any], column: str) -> None:
    pytest.importorskip("pyarrow")
    with tempfile.TemporaryDirectory() as d, RunStore(":memory:") as store:
        n = len(values)
        df = pd.DataFrame({"run_id": [f"r{i}" for i in range(n)], "step": np.arange(n), "loss": np.full(n, 3.0)})
        try:
            df[column] = pd.Series(values)
            path = Path(d) / "t.parquet"
            df.to_parquet(path, index=False)
        except Exception:  # pyarrow cannot write this column: not a reader case
            return
        with outcome("formats: Parquet columns") as label:
            label(column)
            table = read_table(path)
            _check_roundtrip(table, store, "t.parquet")


PARQUET_ARGS = dict(
    values=st.one_of(
        st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=4),
        st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=4),
        st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=4),
        st.lists(st.text(max_size=5), min_size=1, max_size=4),
        st.lists(st.booleans(), min_size=1, max_size=4),
    ),
    column=st.sampled_from(["step", "seed", "tokens", "loss_x", "n_params", "w_a", "size", "phase"]),
)


@scaled(FAST, 0.4)
@given(**PARQUET_ARGS)
def test_fuzz_parquet(**kw: Any) -> None:
    _parquet_case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 0.5)
@given(**PARQUET_ARGS)
def test_fuzz_parquet_long(**kw: Any) -> None:
    _parquet_case(**kw)
