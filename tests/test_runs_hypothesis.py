"""Property tests: malformed files always give InputError (never another exception); a refused ingest leaves
the store unchanged."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mixlaw.errors import InputError
from mixlaw.runs.io import read_table
from mixlaw.runs.store import RunStore

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MUTATIONS = (
    "drop_run_id",
    "drop_loss",
    "nan",
    "inf",
    "empty_cell",
    "negative_tokens",
    "negative_n_params",
    "negative_step",
    "fractional_step",
    "bad_mixture_sum",
    "negative_weight",
    "partial_mixture",
    "non_numeric",
    "duplicate_row",
    "varying_n_params",
    "bad_phase",
)


def _valid_table(seed: int, n_runs: int, n_steps: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    recs = []
    for r in range(n_runs):
        w = rng.dirichlet([1.0, 1.0, 1.0])
        w[-1] = 1.0 - w[0] - w[1]
        n = int(rng.integers(10**5, 10**8))
        for s in range(n_steps):
            recs.append(
                {
                    "run_id": f"r{r}",
                    "step": s * 100,
                    "tokens": s * 100 * 4096,
                    "lr": 1e-3,
                    "n_params": n,
                    "w_a": float(w[0]),
                    "w_b": float(w[1]),
                    "w_c": float(w[2]),
                    "loss_a": float(3 + rng.random()),
                    "loss_b": float(2 + rng.random()),
                }
            )
    return pd.DataFrame(recs)


def _mutate(df: pd.DataFrame, kind: str, row: int) -> pd.DataFrame:
    df = df.copy().astype(object)
    row = row % len(df)
    if kind == "drop_run_id":
        return df.drop(columns="run_id")
    if kind == "drop_loss":
        return df.drop(columns=["loss_a", "loss_b"])
    if kind == "nan":
        df.loc[row, "loss_a"] = float("nan")
    elif kind == "inf":
        df.loc[row, "loss_b"] = float("inf")
    elif kind == "empty_cell":
        df.loc[row, "tokens"] = None
    elif kind == "negative_tokens":
        df.loc[row, "tokens"] = -1
    elif kind == "negative_n_params":
        df["n_params"] = -5
    elif kind == "negative_step":
        df.loc[row, "step"] = -100
    elif kind == "fractional_step":
        df.loc[row, "step"] = 0.5
    elif kind == "bad_mixture_sum":
        df.loc[row, "w_a"] = float(df.loc[row, "w_a"]) + 0.01
    elif kind == "negative_weight":
        df.loc[row, "w_a"] = -0.25
        df.loc[row, "w_b"] = float(df.loc[row, "w_b"]) + 0.25 + float(df.loc[row, "w_a"] or 0) + 0.25
    elif kind == "partial_mixture":
        df.loc[row, "w_b"] = None
    elif kind == "non_numeric":
        df.loc[row, "loss_b"] = "abc"
    elif kind == "duplicate_row":
        df = pd.concat([df, df.iloc[[row]]], ignore_index=True)
    elif kind == "varying_n_params":
        df.loc[row, "n_params"] = 123
        if (df["run_id"] == df.loc[row, "run_id"]).sum() == 1:
            df = pd.concat([df, df.iloc[[row]].assign(step=10**6, n_params=456)], ignore_index=True)
    elif kind == "bad_phase":
        df["phase"] = "pt"
        df.loc[row, "phase"] = "sft"
    return df


def _write(df: pd.DataFrame, path: Path) -> None:
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    else:
        with path.open("w") as fh:
            for rec in df.to_dict("records"):
                fh.write(json.dumps({k: (None if v is None else v) for k, v in rec.items()}) + "\n")


@SETTINGS
@given(
    seed=st.integers(0, 2**16),
    n_runs=st.integers(1, 3),
    n_steps=st.integers(1, 4),
    kind=st.sampled_from(MUTATIONS),
    row=st.integers(0, 100),
    suffix=st.sampled_from([".csv", ".jsonl"]),
)
def test_malformed_tables_raise_input_error_and_leave_store_unchanged(
    seed: int, n_runs: int, n_steps: int, kind: str, row: int, suffix: str
) -> None:
    good = _valid_table(seed, n_runs, n_steps)
    bad = _mutate(good, kind, row)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"runs{suffix}"
        _write(bad, path)
        store = RunStore(Path(d) / "s.db")
        store.ingest_table(_valid_table(seed + 1, 1, 2).assign(run_id="existing"), "seed.csv")
        before = store.dump()
        try:
            table = read_table(path)
            store.ingest_table(table, path.name, validated=True)
        except InputError as exc:
            msg = str(exc)
            assert "\n" not in msg and msg.startswith("expected "), msg
            assert path.name in msg or "run" in msg, msg
        else:
            raise AssertionError(f"mutation {kind} was accepted")
        finally:
            after = store.dump()
            store.close()
        assert after == before


@SETTINGS
@given(
    data=st.binary(min_size=0, max_size=400),
    suffix=st.sampled_from([".csv", ".tsv", ".jsonl", ".json", ".parquet", ".tfevents"]),
)
def test_random_bytes_never_raise_other_exceptions(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        name = "events.out.tfevents.x" if suffix == ".tfevents" else f"f{suffix}"
        path = Path(d) / name
        path.write_bytes(data)
        try:
            read_table(path)
        except InputError as exc:
            assert "\n" not in str(exc)


_cell = st.one_of(
    st.text(max_size=8),
    st.sampled_from(["", "nan", "NaN", "inf", "-inf", "-1", "0", "1e3", "1.5", "abc", '"', "a,b", "\t"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-10, 10**12).map(str),
)


@SETTINGS
@given(
    header=st.lists(
        st.sampled_from(
            ["run_id", "step", "tokens", "lr", "n_params", "w_a", "w_b", "loss", "loss_x", "phase", "x"]
        ),
        min_size=0,
        max_size=8,
    ),
    rows=st.lists(st.lists(_cell, min_size=0, max_size=9), min_size=0, max_size=6),
    suffix=st.sampled_from([".csv", ".jsonl"]),
)
def test_random_structured_cells(header: list[str], rows: list[list[str]], suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"t{suffix}"
        if suffix == ".csv":
            lines = [",".join(header)] + [",".join(r) for r in rows]
            path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
        else:
            with path.open("w", encoding="utf-8", errors="surrogatepass") as fh:
                for r in rows:
                    fh.write(json.dumps(dict(zip(header, r, strict=False))) + "\n")
        store = RunStore(Path(d) / "s.db")
        before = store.dump()
        try:
            t = read_table(path)
        except InputError as exc:
            assert "\n" not in str(exc)
            assert store.dump() == before
        else:
            # whatever was accepted is a valid RunTable the store takes as is
            assert t["step"].dtype == np.int64 and not t.duplicated(["run_id", "step"]).any()
            try:
                store.ingest_table(t, path.name, validated=True)
            except InputError:
                assert store.dump() == before
        finally:
            store.close()
