"""RunTable schema: Mixture, RunMeta and the one validator."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import InputError
from mixlaw.runs.schema import Mixture, RunMeta, validate_table

MSG = re.compile(r"^expected .+, got .+ in [^\s:]+(:\d+)?(:[^\s:]+)?$")


# ------------------------------------------------------------------------------------------------ Mixture


def test_mixture_mapping_and_normalisation() -> None:
    mix = Mixture({"general": 0.75, "code": 0.25})
    assert mix["code"] == 0.25
    assert mix.domains == ("general", "code")
    assert dict(mix) == {"general": 0.75, "code": 0.25}
    assert mix.to_dict() == {"general": 0.75, "code": 0.25}
    assert mix.as_columns() == {"w_general": 0.75, "w_code": 0.25}
    assert len(mix) == 2 and "code" in mix
    # within 1e-9 of 1 -> divided by the sum
    m2 = Mixture({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3 + 5e-10})
    assert math.isclose(math.fsum(m2.values()), 1.0, abs_tol=1e-15)


def test_mixture_equality_hash_and_immutability() -> None:
    a = Mixture({"general": 0.75, "code": 0.25})
    b = Mixture({"code": 0.25, "general": 0.75})
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    # a zero-weight domain is the same training mixture
    assert Mixture({"a": 1.0}) == Mixture({"a": 1.0, "b": 0.0})
    assert a != Mixture({"general": 0.5, "code": 0.5})
    with pytest.raises(AttributeError):
        a._weights = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        a["code"] = 0.3  # type: ignore[index]
    d = a.to_dict()
    d["code"] = 9.0
    assert a["code"] == 0.25
    assert Mixture(a) == a


@pytest.mark.parametrize(
    "weights",
    [
        {},
        {"a": 0.5, "b": 0.4},
        {"a": 1.5, "b": -0.5},
        {"a": float("nan"), "b": 1.0},
        {"a": "0.5", "b": 0.5},
        {"a": True},
        {"": 1.0},
        {"a b": 1.0},
        {"a": 1.0 + 1e-7},
    ],
)
def test_mixture_rejects(weights: dict) -> None:
    with pytest.raises(InputError):
        Mixture(weights)


def test_mixture_row_tolerance() -> None:
    with pytest.raises(InputError):
        Mixture({"a": 0.5, "b": 0.5 + 1e-7})
    assert Mixture({"a": 0.5, "b": 0.5 + 1e-7}, atol=1e-6)["a"] == pytest.approx(0.5)


# ------------------------------------------------------------------------------------------------ RunMeta


def _meta(**kw: object) -> RunMeta:
    base: dict = dict(
        run_id="s1m-cpt-code-0.25",
        phase="cpt",
        n_params=1_000_000,
        n_params_total=1_500_000,
        mixture=Mixture({"general": 0.75, "code": 0.25}),
        parent_run="s1m-pt",
        seed=0,
        schedule={"kind": "table", "lr": [1e-3, 9e-4, 8e-4]},
        meta={"size": "s1m", "unique_tokens_code": 10**9, "tokenizer": {"vocab": 4096}},
    )
    base.update(kw)
    return RunMeta(**base)  # type: ignore[arg-type]


def test_runmeta_json_roundtrip() -> None:
    m = _meta()
    s = m.to_json()
    assert RunMeta.from_json(s) == m
    assert hash(RunMeta.from_json(s)) == hash(m)
    assert json.loads(s)["schedule"]["lr"] == [1e-3, 9e-4, 8e-4]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.n_params = 5  # type: ignore[misc]


def test_runmeta_accepts_plain_mapping_mixture_and_copies_meta() -> None:
    meta = {"k": [1, 2]}
    m = RunMeta("r", mixture={"a": 1.0}, meta=meta)
    assert isinstance(m.mixture, Mixture)
    meta["k"].append(3)
    assert m.meta == {"k": [1, 2]}


@pytest.mark.parametrize(
    "kw",
    [
        {"run_id": ""},
        {"phase": "sft"},
        {"n_params": -1},
        {"n_params": float("inf")},
        {"seed": 1.5},
        {"mixture": {"a": 0.2}},
        {"schedule": {"lr": [1.0]}},
        {"schedule": {"kind": "table", "lr": []}},
        {"schedule": {"kind": "table", "lr": [1.0, float("nan")]}},
        {"schedule": {"kind": "table", "lr": [-1.0]}},
        {"meta": {"loss_x": 1.0}},
        {"meta": {"w_a": 1.0}},
        {"meta": {"bad": object()}},
    ],
)
def test_runmeta_rejects(kw: dict) -> None:
    with pytest.raises(InputError):
        _meta(**kw)


def test_runmeta_merge_and_conflicts() -> None:
    a = RunMeta("r", n_params=10, meta={"x": 1})
    b = RunMeta("r", seed=3, meta={"y": 2})
    m = a.merge(b)
    assert m.n_params == 10 and m.seed == 3 and m.meta == {"x": 1, "y": 2}
    with pytest.raises(InputError, match="n_params"):
        a.merge(RunMeta("r", n_params=11))
    with pytest.raises(InputError, match="meta"):
        a.merge(RunMeta("r", meta={"x": 2}))


def test_runmeta_from_dict_unknown_key() -> None:
    with pytest.raises(InputError, match="unknown"):
        RunMeta.from_dict({"run_id": "r", "size": 3})


def test_runmeta_fractional_size_kept() -> None:
    assert RunMeta("r", n_params=6795600349.289497).n_params == 6795600349.289497
    assert isinstance(RunMeta("r", n_params=1e6).n_params, int)


# ------------------------------------------------------------------------------------------------ validator


def _good() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run_id": ["a", "a", "b"],
            "step": [0, 10, 0],
            "tokens": [0.0, 1e6, 0.0],
            "lr": [1e-3, 1e-3, 2e-3],
            "n_params": [1e6, 1e6, 2e6],
            "w_web": [0.5, 0.5, 1.0],
            "w_code": [0.5, 0.5, 0.0],
            "loss_web": [3.0, 2.5, 3.1],
            "grad_norm": [1.0, 0.5, 0.7],
            "size": ["s", "s", "m"],
        }
    )


def test_validate_good_table_dtypes() -> None:
    t = validate_table(_good(), "x.csv")
    assert list(t.columns[:2]) == ["run_id", "step"]
    assert t["step"].dtype == np.int64
    assert t["loss_web"].dtype == np.float64 and t["grad_norm"].dtype == np.float64
    assert t["size"].tolist() == ["s", "s", "m"]
    # strings holding numbers are numbers
    df = _good().astype({"loss_web": str, "tokens": str})
    t2 = validate_table(df, "x.csv")
    assert t2["loss_web"].tolist() == [3.0, 2.5, 3.1]


def test_validate_step_defaults_to_zero_for_one_row_per_run() -> None:
    df = pd.DataFrame({"run_id": ["a", "b"], "loss": [1.0, 2.0]})
    assert validate_table(df, "x.csv")["step"].tolist() == [0, 0]
    df = pd.DataFrame({"run_id": ["a", "a"], "loss": [1.0, 2.0]})
    with pytest.raises(InputError, match=r"step.*in x\.csv:2:step$"):
        validate_table(df, "x.csv")


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d.drop(columns="run_id"), "x.csv:run_id"),
        (lambda d: d.drop(columns="loss_web"), "x.csv:loss"),
        (lambda d: d.assign(loss_web=[3.0, np.nan, 1.0]), "x.csv:2:loss_web"),
        (lambda d: d.assign(loss_web=[3.0, 1.0, np.inf]), "x.csv:3:loss_web"),
        (lambda d: d.assign(tokens=[0.0, -1.0, 0.0]), "x.csv:2:tokens"),
        (lambda d: d.assign(n_params=[1.0, 1.0, -2.0]), "x.csv:3:n_params"),
        (lambda d: d.assign(step=[0, -10, 0]), "x.csv:2:step"),
        (lambda d: d.assign(step=[0, 1.5, 0]), "x.csv:2:step"),
        (lambda d: d.assign(w_web=[0.5, 0.6, 1.0]), "x.csv:2:w_code"),
        (lambda d: d.assign(w_web=[0.5, 0.5, 1.5], w_code=[0.5, 0.5, -0.5]), "x.csv:3:w_code"),
        (lambda d: d.assign(w_web=[0.5, 0.5, None]), "x.csv:3:w_web"),
        (lambda d: d.assign(step=[0, 0, 0]), "x.csv:2:step"),
        (lambda d: d.assign(loss_web=["3.0", "abc", "1"]), "x.csv:2:loss_web"),
        (lambda d: d.assign(grad_norm=["1.0", "x", "1"]), "x.csv:2:grad_norm"),
        (lambda d: d.assign(loss_web=[3.0, True, 1.0]), "x.csv:2:loss_web"),
        (lambda d: d.assign(phase=["pt", "sft", "pt"]), "x.csv:2:phase"),
        (lambda d: d.assign(run_id=["a", None, "b"]), "x.csv:2:run_id"),
        (lambda d: d.assign(loss_web=[3.0, -0.1, 1.0]), "x.csv:2:loss_web"),
        (lambda d: d.assign(schedule=["{", None, None]), "x.csv:1:schedule"),
    ],
)
def test_validate_errors_name_file_row_column(mutate, where: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as ei:
        validate_table(mutate(_good()), "x.csv")
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.endswith(" in " + where), msg
    assert msg.startswith("expected ")
    assert ", got " in msg


def test_validate_row_numbers_from_caller() -> None:
    df = _good().assign(tokens=[0.0, -1.0, 0.0])
    with pytest.raises(InputError, match=r"in x\.csv:12:tokens$"):
        validate_table(df, "x.csv", rows=[11, 12, 13])


def test_validate_allow_nan_and_missing() -> None:
    df = _good().assign(loss_web=[3.0, np.nan, 1.0])
    assert np.isnan(validate_table(df, "x.csv", allow_nan=True)["loss_web"][1])
    assert np.isnan(validate_table(df, "x.csv", allow_missing=True)["loss_web"][1])
    # explicit 'nan' text is a value, not a missing cell
    df2 = _good().astype({"loss_web": object})
    df2.loc[1, "loss_web"] = "nan"
    with pytest.raises(InputError, match="finite"):
        validate_table(df2, "x.csv", allow_missing=True)
    df2.loc[1, "loss_web"] = ""
    assert np.isnan(validate_table(df2, "x.csv", allow_missing=True)["loss_web"][1])


def test_validate_row_without_any_mixture_is_allowed() -> None:
    df = _good().assign(w_web=[0.5, 0.5, None], w_code=[0.5, 0.5, None])
    t = validate_table(df, "x.csv")
    assert np.isnan(t["w_web"][2])


def test_validate_mixture_tolerance_1e6() -> None:
    ok = _good().assign(w_web=[0.5 + 5e-7, 0.5, 1.0])
    validate_table(ok, "x.csv")
    bad = _good().assign(w_web=[0.5 + 5e-6, 0.5, 1.0])
    with pytest.raises(InputError, match="summing to 1"):
        validate_table(bad, "x.csv")


def test_validate_duplicate_names_first_row() -> None:
    df = pd.DataFrame({"run_id": ["a", "b", "a"], "step": [5, 5, 5], "loss": [1.0, 1.0, 1.0]})
    with pytest.raises(InputError, match=r"first at row 1\) in t:3:step$"):
        validate_table(df, "t")


def test_validate_messages_are_one_line_format() -> None:
    bad = [
        _good().drop(columns="run_id"),
        _good().assign(tokens=[0.0, -1.0, 0.0]),
        pd.DataFrame({"run_id": [], "loss": []}),
    ]
    for df in bad:
        with pytest.raises(InputError) as ei:
            validate_table(df, "f.csv")
        assert MSG.match(str(ei.value)) or str(ei.value).startswith("expected "), str(ei.value)


def test_input_error_attributes() -> None:
    with pytest.raises(InputError) as ei:
        validate_table(_good().assign(tokens=[0.0, -1.0, 0.0]), "x.csv", rows=[2, 3, 4])
    assert (ei.value.file, ei.value.row, ei.value.column) == ("x.csv", 3, "tokens")
    with pytest.raises(InputError) as ei:
        validate_table(_good().drop(columns="run_id"), "x.csv")
    assert (ei.value.file, ei.value.row, ei.value.column) == ("x.csv", None, "run_id")
