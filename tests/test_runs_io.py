"""Readers: every format, column mapping, W&B and TensorBoard layouts, real published data."""

from __future__ import annotations

import json
import struct
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import InputError
from mixlaw.runs.io import _masked_crc, canonical_metric_name, parse_column_map, read_table, read_wandb
from mixlaw.runs.store import RunStore

EXTERNAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "external"

CSV = """run_id,step,tokens,lr,n_params,w_web,w_code,loss_web,loss_code
a,0,0,0.001,1000000,0.75,0.25,4.0,3.0
a,100,409600,0.001,1000000,0.75,0.25,3.5,2.5
b,0,0,0.002,2000000,0.5,0.5,4.1,3.1
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_roundtrip(tmp_path: Path) -> None:
    t = read_table(_write(tmp_path, "runs.csv", CSV))
    assert t["run_id"].tolist() == ["a", "a", "b"]
    assert t["loss_code"].tolist() == [3.0, 2.5, 3.1]
    assert t["step"].dtype == np.int64


def test_csv_errors_name_line(tmp_path: Path) -> None:
    bad = CSV.replace("a,100,409600", "a,100,-5")
    with pytest.raises(InputError, match=r"in bad\.csv:3:tokens$"):
        read_table(_write(tmp_path, "bad.csv", bad))
    # a blank line shifts the reported line like in an editor
    bad2 = CSV.replace("\nb,0,0,0.002", "\n\nb,0,0,-0.002")
    with pytest.raises(InputError, match=r"in bad2\.csv:5:lr$"):
        read_table(_write(tmp_path, "bad2.csv", bad2))
    ragged = CSV + "c,0,1\n"
    with pytest.raises(InputError, match=r"expected 9 fields.* in ragged\.csv:5$"):
        read_table(_write(tmp_path, "ragged.csv", ragged))
    with pytest.raises(InputError, match="empty file"):
        read_table(_write(tmp_path, "empty.csv", ""))
    p = tmp_path / "bin.csv"
    p.write_bytes(b"run_id,loss\na,\xff\xfe\n")
    with pytest.raises(InputError, match=r"UTF-8.* in bin\.csv:2$"):
        read_table(p)
    with pytest.raises(InputError, match="no such path"):
        read_table(tmp_path / "missing.csv")


def test_tsv_jsonl_json(tmp_path: Path) -> None:
    ref = read_table(_write(tmp_path, "r.csv", CSV))
    tsv = _write(tmp_path, "r.tsv", CSV.replace(",", "\t"))
    pd.testing.assert_frame_equal(read_table(tsv), ref)
    recs = pd.read_csv(tmp_path / "r.csv").to_dict("records")
    jl = _write(tmp_path, "r.jsonl", "\n".join(json.dumps(r) for r in recs) + "\n\n")
    pd.testing.assert_frame_equal(read_table(jl), ref)
    js = _write(tmp_path, "r.json", json.dumps(recs))
    pd.testing.assert_frame_equal(read_table(js), ref)
    cols = _write(tmp_path, "c.json", json.dumps({k: [r[k] for r in recs] for k in recs[0]}))
    pd.testing.assert_frame_equal(read_table(cols), ref)


def test_jsonl_errors(tmp_path: Path) -> None:
    good = json.dumps({"run_id": "a", "step": 0, "loss": 1.0})
    with pytest.raises(InputError, match=r"invalid JSON.* in x\.jsonl:2$"):
        read_table(_write(tmp_path, "x.jsonl", good + "\n{oops\n"))
    with pytest.raises(InputError, match=r"JSON object.* in y\.jsonl:1$"):
        read_table(_write(tmp_path, "y.jsonl", "[1, 2]\n"))
    nan = json.dumps({"run_id": "a", "step": 1, "loss": float("nan")})
    with pytest.raises(InputError, match=r"finite.* in z\.jsonl:2:loss$"):
        read_table(_write(tmp_path, "z.jsonl", good + "\n" + nan + "\n"))
    missing = json.dumps({"run_id": "a", "step": 1})
    with pytest.raises(InputError, match=r"empty cell in m\.jsonl:2:loss$"):
        read_table(_write(tmp_path, "m.jsonl", good + "\n" + missing + "\n"))
    assert len(read_table(tmp_path / "m.jsonl", allow_missing=True)) == 2


def test_parquet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    df = pd.read_csv(_write(tmp_path, "r.csv", CSV))
    df.to_parquet(tmp_path / "r.parquet")
    pd.testing.assert_frame_equal(read_table(tmp_path / "r.parquet"), read_table(tmp_path / "r.csv"))
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=r"Parquet.* in junk\.parquet$"):
        read_table(tmp_path / "junk.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(InputError, match=r"pip install mixlaw\[parquet\]"):
        read_table(tmp_path / "r.parquet")


def test_column_map(tmp_path: Path) -> None:
    text = CSV.replace("run_id,", "Run,").replace(",loss_web,", ",val loss web,")
    p = _write(tmp_path, "m.csv", text)
    cmap = parse_column_map(["run_id=Run", "loss_web='val loss web'"])
    assert cmap == {"run_id": "Run", "loss_web": "val loss web"}
    t = read_table(p, column_map=cmap)
    assert "loss_web" in t.columns and "run_id" in t.columns
    with pytest.raises(InputError, match=r"expected column 'nope'"):
        read_table(p, column_map={"run_id": "nope"})
    with pytest.raises(InputError, match="one column named 'loss_code'"):
        read_table(p, column_map={"run_id": "Run", "loss_web": "val loss web", "loss_code": "lr"})
    for bad in (["x"], ["=y"], ["a=b", "a=c"]):
        with pytest.raises(InputError):
            parse_column_map(bad)


def test_set_drop_run_id_options(tmp_path: Path) -> None:
    p = _write(tmp_path, "one.csv", "step,loss,label\n0,3.0,x\n10,2.0,x\n")
    t = read_table(p, run_id="r1", set_values={"n_params": 1000, "phase": "pt"}, drop=["label"])
    assert t["run_id"].unique().tolist() == ["r1"] and t["n_params"].tolist() == [1000.0, 1000.0]
    assert "label" not in t.columns
    with pytest.raises(InputError, match="existing column"):
        read_table(p, run_id="r1", set_values={"loss": 1})
    rows = read_table(_write(tmp_path, "rows.csv", "loss,size\n3.0,1\n2.0,2\n"), run_id_from_row=True)
    assert rows["run_id"].tolist() == ["rows-1", "rows-2"] and rows["step"].tolist() == [0, 0]


def test_evalset_pivot(tmp_path: Path) -> None:
    text = "run,step,domain,loss,p_a,p_b\nr,10,A,3.0,0.5,0.5\nr,10,B-x,2.0,0.5,0.5\nr,20,A,2.5,0.5,0.5\n"
    p = _write(tmp_path, "long.csv", text)
    cmap = {"run_id": "run", "w_a": "p_a", "w_b": "p_b"}
    t = read_table(p, column_map=cmap, evalset_column="domain", allow_missing=True)
    assert t["loss_A"].tolist() == [3.0, 2.5]
    assert t["loss_B-x"].tolist()[0] == 2.0 and np.isnan(t["loss_B-x"].tolist()[1])
    with pytest.raises(InputError, match=r"empty cell in long\.csv:4:loss_B-x$"):
        read_table(p, column_map=cmap, evalset_column="domain")
    dup = _write(tmp_path, "dup.csv", text + "r,10,A,1.0,0.5,0.5\n")
    with pytest.raises(InputError, match=r"second 'A'.* in dup\.csv:5:domain$"):
        read_table(dup, column_map=cmap, evalset_column="domain", allow_missing=True)
    varying = _write(tmp_path, "var.csv", text.replace("r,10,B-x,2.0,0.5,0.5", "r,10,B-x,2.0,0.4,0.6"))
    with pytest.raises(InputError, match=r"constant within.* in var\.csv:3:w_a$"):
        read_table(varying, column_map=cmap, evalset_column="domain", allow_missing=True)


@pytest.mark.parametrize(
    ("name", "canon"),
    [
        ("_step", "step"),
        ("trainer/global_step", "step"),
        ("_runtime", None),
        ("_wandb.runtime", None),
        ("eval/code/loss", "loss_code"),
        ("loss/web", "loss_web"),
        ("train/loss", "loss_train"),
        ("val/loss", "loss"),
        ("val_loss", "loss"),
        ("code_loss", "loss_code"),
        ("lr", "lr"),
        ("train/learning_rate", "lr"),
        ("lr-AdamW", "lr"),
        ("train/tokens_seen", "tokens"),
        ("train/grad norm", "train_grad_norm"),
    ],
)
def test_canonical_metric_names(name: str, canon: str | None) -> None:
    assert canonical_metric_name(name) == canon


def test_wandb_history_csv(tmp_path: Path) -> None:
    text = (
        "_step,_runtime,_timestamp,Name,train/loss,eval/code/loss,train/learning_rate,tokens\n"
        "0,1.0,1700000000,run-a,4.0,,0.001,0\n"
        "100,10.0,1700000100,run-a,3.0,3.5,0.001,409600\n"
        "0,1.0,1700000000,run-b,4.1,,0.001,0\n"
    )
    t = read_table(_write(tmp_path, "history.csv", text))
    assert set(t.columns) >= {"run_id", "step", "loss_train", "loss_code", "lr", "tokens"}
    assert "_runtime" not in t.columns
    assert t["run_id"].tolist() == ["run-a", "run-a", "run-b"]
    assert np.isnan(t["loss_code"][0]) and t["loss_code"][1] == 3.5
    t2 = read_table(tmp_path / "history.csv", column_map={"loss": "train/loss"})
    assert "loss" in t2.columns and "loss_train" not in t2.columns
    # one-run history without a name column: the file stem names the run
    one = _write(tmp_path, "myrun.csv", "_step,val/loss\n0,4.0\n10,3.0\n")
    assert read_table(one)["run_id"].unique().tolist() == ["myrun"]
    t3 = read_table(one, run_id="other")
    assert t3["loss"].tolist() == [4.0, 3.0] and t3["run_id"].unique().tolist() == ["other"]


def test_wandb_panel_csv(tmp_path: Path) -> None:
    text = (
        'Step,"run-a - eval/loss","run-a - eval/loss__MIN","run-a - eval/loss__MAX","run-b - eval/loss"\n'
        "100,3.0,2.9,3.1,3.2\n"
        "200,2.5,2.4,2.6,\n"
    )
    t = read_table(_write(tmp_path, "panel.csv", text))
    assert sorted(zip(t["run_id"], t["step"], t["loss"], strict=True)) == [
        ("run-a", 100, 3.0),
        ("run-a", 200, 2.5),
        ("run-b", 100, 3.2),
    ]


def test_wandb_collision_is_an_error(tmp_path: Path) -> None:
    text = "_step,Name,val/loss,eval/loss\n0,a,1.0,1.0\n"
    with pytest.raises(InputError, match="both mapping to 'loss'"):
        read_table(_write(tmp_path, "c.csv", text))


class _FakeRun:
    def __init__(self, name: str, rows: list[dict]) -> None:
        self.name = name
        self.id = name + "-id"
        self._rows = rows

    def scan_history(self, keys: list[str] | None = None) -> list[dict]:
        return self._rows


def test_wandb_api_with_fake_module(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [
        _FakeRun(
            "a",
            [
                {"_step": 0, "train/loss": 4.0},
                {"_step": 0, "eval/loss": 4.2},
                {"_step": 10, "train/loss": 3.0},
            ],
        ),
        _FakeRun("b", [{"_step": 0, "train/loss": 4.5}]),
    ]

    class Api:
        def runs(self, path: str) -> list[_FakeRun]:
            assert path == "ent/proj"
            return runs

        def run(self, path: str) -> _FakeRun:
            return runs[0]

    fake = types.ModuleType("wandb")
    fake.Api = Api  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    t = read_wandb("ent/proj")
    assert len(t) == 3  # the two logs at step 0 of run a are merged
    row = t[(t["run_id"] == "a") & (t["step"] == 0)].iloc[0]
    assert row["loss_train"] == 4.0 and row["loss"] == 4.2
    assert len(read_table("wandb://ent/proj/a")) == 2


def test_wandb_api_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(InputError, match=r"pip install mixlaw\[wandb\]"):
        read_wandb("ent/proj")


# ------------------------------------------------------------------------------------------------ TensorBoard


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, wt: int, payload: bytes | int) -> bytes:
    key = _varint((num << 3) | wt)
    if wt == 0:
        assert isinstance(payload, int)
        return key + _varint(payload)
    assert isinstance(payload, bytes)
    if wt == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _event(step: int, values: list[bytes], wall: float = 1.7e9) -> bytes:
    summary = b"".join(_field(1, 2, v) for v in values)
    return _field(1, 1, struct.pack("<d", wall)) + _field(2, 0, step) + _field(5, 2, summary)


def _simple(tag: str, x: float) -> bytes:
    return _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", x))


def _tensor(tag: str, x: float, *, double: bool = False) -> bytes:
    if double:
        tensor = _field(1, 0, 2) + _field(2, 2, b"") + _field(4, 2, struct.pack("<d", x))
    else:
        tensor = _field(1, 0, 1) + _field(2, 2, b"") + _field(5, 2, struct.pack("<f", x))
    meta = _field(1, 2, _field(1, 2, b"scalars"))
    return _field(1, 2, tag.encode()) + _field(9, 2, meta) + _field(8, 2, tensor)


def _record(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", _masked_crc(head)) + payload + struct.pack("<I", _masked_crc(payload))


def _write_events(path: Path, events: list[bytes], *, tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    version = _field(1, 1, struct.pack("<d", 1.7e9)) + _field(3, 2, b"brain.Event:2")
    path.write_bytes(_record(version) + b"".join(_record(e) for e in events) + tail)
    return path


def test_masked_crc_known_value() -> None:
    # CRC-32C check value of "123456789" is 0xE3069283 (RFC 3720); masked as TFRecord does.
    crc = 0xE3069283
    assert _masked_crc(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_tensorboard_directory_of_runs(tmp_path: Path) -> None:
    root = tmp_path / "tb"
    _write_events(
        root / "run-a" / "events.out.tfevents.1.host",
        [
            _event(0, [_simple("train/loss", 4.0), _simple("lr", 1e-3)]),
            _event(100, [_simple("train/loss", 3.0), _tensor("eval/code/loss", 3.25)]),
            _event(100, [_simple("train/loss", 2.9)]),  # re-logged step: last wins
        ],
    )
    _write_events(
        root / "run-b" / "events.out.tfevents.2.host",
        [_event(0, [_tensor("train/loss", 4.5, double=True)])],
        tail=b"\x10\x00\x00",  # truncated record of a killed writer
    )
    t = read_table(root)
    assert sorted(set(t["run_id"])) == ["run-a", "run-b"]
    a = t[t["run_id"] == "run-a"].set_index("step")
    assert a.loc[100, "loss_train"] == pytest.approx(2.9, rel=1e-6)
    assert a.loc[100, "loss_code"] == 3.25 and np.isnan(a.loc[0, "loss_code"])
    assert a.loc[0, "lr"] == pytest.approx(1e-3, rel=1e-6)
    assert t[t["run_id"] == "run-b"]["loss_train"].tolist() == [4.5]
    single = read_table(root / "run-b" / "events.out.tfevents.2.host")
    assert single["run_id"].tolist() == ["run-b"]


def test_tensorboard_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "events.out.tfevents.bad"
    bad.write_bytes(b"\x01" * 64)
    with pytest.raises(InputError, match=r"checksum at byte 0 in events\.out\.tfevents\.bad$"):
        read_table(bad)
    nan = _write_events(
        tmp_path / "n" / "events.out.tfevents.n", [_event(5, [_simple("loss", float("nan"))])]
    )
    with pytest.raises(InputError, match=r"finite.*:5:loss$"):
        read_table(nan)
    assert np.isnan(read_table(nan, allow_nan=True)["loss"][0])
    empty = _write_events(tmp_path / "e" / "events.out.tfevents.e", [])
    with pytest.raises(InputError, match="no scalar|none"):
        read_table(empty)


# ------------------------------------------------------------------------------------------------ real data


def test_real_chinchilla_svg_data(tmp_path: Path) -> None:
    path = EXTERNAL / "analyzing-chinchilla" / "svg_extracted_data.csv"
    if not path.exists():
        pytest.skip(f"external data absent: {path}")
    t = read_table(
        path,
        column_map={"n_params": "Model Size", "compute_flops": "Training FLOP"},
        run_id_from_row=True,
    )
    assert len(t) == 245 and t["run_id"].is_unique and (t["step"] == 0).all()
    raw = pd.read_csv(path)
    np.testing.assert_array_equal(t["loss"].to_numpy(), raw["loss"].to_numpy())
    np.testing.assert_array_equal(t["n_params"].to_numpy(), raw["Model Size"].to_numpy())
    store = RunStore(tmp_path / "c.db")
    store.ingest_table(t, path.name, validated=True)
    f = store.to_frame()
    np.testing.assert_array_equal(f["n_params"].to_numpy(), raw["Model Size"].to_numpy())
    np.testing.assert_array_equal(f["compute_flops"].to_numpy(), raw["Training FLOP"].to_numpy())
    store.close()


def test_real_mixinglaws_ct(tmp_path: Path) -> None:
    path = EXTERNAL / "mixinglaws" / "tidy" / "ct.csv"
    if not path.exists():
        pytest.skip(f"external data absent: {path}")
    t = read_table(
        path,
        column_map={
            "run_id": "run",
            "tokens": "tokens_assuming_4M_bsz",
            "w_pile": "p_pile",
            "w_python": "p_python",
        },
        evalset_column="valid_domain",
        set_values={"n_params": 18_915_328},
    )
    assert len(t) == 51 and t["run_id"].nunique() == 6
    assert "loss_python" in t.columns and "loss_Pile-CC" in t.columns
    store = RunStore(tmp_path / "ct.db")
    store.ingest_table(t, path.name, validated=True)
    base = store.get_run("base_pythia70m_step20000")
    assert base.mixture is None
    m = store.get_run("70M_ct_1-0.25-0.75").mixture
    assert m is not None and m["pile"] == 0.25
    raw = pd.read_csv(path)
    ref = raw[(raw["run"] == "70M_ct_3-0.5-0.5") & (raw["step"] == 10000) & (raw["valid_domain"] == "python")]
    got = store.to_frame("run_id == '70M_ct_3-0.5-0.5' and step == 10000")["loss_python"]
    assert got.tolist() == ref["loss"].tolist()
    store.close()
