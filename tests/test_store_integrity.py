"""A store that bad values cannot poison, and no silent corruption on the way in (issue 12, items 2–4).

Every value is checked against its column's type and range before it is written; whatever writing accepted,
reading returns (``to_frame``, ``runs``, ``export``) without an exception.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import InputError
from mixlaw.runs.io import read_table
from mixlaw.runs.schema import RunMeta, validate_table
from mixlaw.runs.store import RunStore

sys.path.insert(0, str(Path(__file__).parent))
from _formats import event, simple, write_events  # noqa: E402


def _read_back(store: RunStore) -> None:
    """Everything a user can read from a store."""
    store.to_frame(include_schedule=True)
    store.runs()
    for rid in store.run_ids():
        store.get_run(rid)


def _ingest(tmp_path: Path, name: str, text: str, **kw: object) -> RunStore:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    store = RunStore(tmp_path / "s.db")
    before = store.dump()
    try:
        store.ingest_table(read_table(path, **kw), name, validated=True)  # type: ignore[arg-type]
    except InputError:
        assert store.dump() == before  # a refused file writes nothing
        _read_back(store)
        raise
    _read_back(store)
    return store


@pytest.mark.parametrize(
    "name, text, kw, match",
    [
        # issue 12 item 2: a seed of 1e19 ingested, then every read failed with OverflowError
        ("seed.csv", "run_id,step,loss,seed\na,1,3.0,1e19\n", {}, r"seed with \|seed\| < 2\^53.* seed\.csv:2:seed$"),
        # item 3: steps at or above 2^63 were stored as -2^63, steps above 2^53 were rounded
        ("s63.csv", "run_id,step,loss\na,1e19,3.0\n", {}, r"step with \|step\| < 2\^53.* s63\.csv:2:step$"),
        ("s53.csv", "run_id,step,loss\na,9007199254740993,3.0\n", {}, r"\|step\| < 2\^53.*:2:step$"),
        ("s53j.jsonl", '{"run_id":"a","step":9007199254740993,"loss":3}\n', {}, r"\|step\| < 2\^53.*:1:step$"),
        ("sinf.csv", "run_id,step,loss\na,inf,3.0\n", {"allow_nan": True}, r"admits NaN, not inf.*:2:step$"),
        ("linf.csv", "run_id,step,loss\na,1,-inf\n", {"allow_nan": True}, r"admits NaN, not inf.*:2:loss$"),
        # Unicode digits are not numbers (float('١٢٣') == 123.0 in Python)
        ("ar.csv", "run_id,step,loss\na,١٢٣,3.0\n", {}, r"expected a number, got '١٢٣' in ar\.csv:2:step$"),
        ("ar2.csv", "run_id,step,loss\na,1,٣\n", {}, r"a number, got '٣' in ar2\.csv:2:loss$"),
        ("fw.csv", "run_id,step,loss\na,１,3\n", {}, r"a number.*fw\.csv:2:step$"),
        # item 4: reader tracebacks
        ("big.jsonl", '{"run_id":"a","step":1,"loss":' + "9" * 400 + "}\n", {}, r"finite.*big\.jsonl:1:loss$"),
        ("bigs.jsonl", '{"run_id":"a","step":' + "9" * 400 + ',"loss":3}\n', {}, r"finite.*bigs\.jsonl:1:step$"),
        ("jinf.jsonl", '{"run_id":"a","step":1,"loss":3,"seed":1e400}\n', {}, r"finite.*:1:seed$"),
        ("rinf.jsonl", '{"run_id":1e400,"step":1,"loss":3}\n', {}, r"a string, got inf in rinf\.jsonl:1:run_id$"),
        ("xinf.jsonl", '{"run_id":"a","step":1,"loss":3,"label":"x","n":-1e400}\n', {"allow_nan": True}, r":1:n$"),
        ("sur.jsonl", '{"run_id":"a\\ud800","step":1,"loss":3}\n', {}, r"lone surrogate.*sur\.jsonl:1:run_id$"),
        ("surm.jsonl", '{"run_id":"a","step":1,"loss":3,"size":"\\udc00"}\n', {}, r"surrogate.*:1:size$"),
        ("surk.jsonl", '{"run_id":"a","step":1,"loss\\ud800":3}\n', {}, r"surrogate.*surk\.jsonl:1$"),
        ("sch.jsonl", '{"run_id":"a","step":1,"loss":3,"schedule":{"kind":"cosine","peak":1e400}}\n', {}, "finite"),
    ],
)
def test_bad_values_are_clear_errors_and_the_store_stays_readable(
    tmp_path: Path, name: str, text: str, kw: dict[str, object], match: str
) -> None:
    with pytest.raises(InputError, match=match) as err:
        _ingest(tmp_path, name, text, **kw)
    assert "\n" not in str(err.value) and len(str(err.value)) < 400


def test_deeply_nested_schedule_json_is_an_input_error(tmp_path: Path) -> None:
    deep = '{"kind":"x","a":' * 3000 + "1" + "}" * 3000
    cell = '"' + deep.replace('"', '""') + '"'
    with pytest.raises(InputError, match=r"schedule.*deep\.csv:2:schedule$"):
        _ingest(tmp_path, "deep.csv", f"run_id,step,loss,schedule\na,1,3.0,{cell}\n")
    moderately = '{"kind":"x","a":' * 40 + "1" + "}" * 40  # deeper than any schedule, within the JSON parser
    with pytest.raises(InputError, match="nested at most 32"):
        _ingest(tmp_path, "mid.jsonl", '{"run_id":"a","step":1,"loss":3,"schedule":' + moderately + "}\n")


def test_largest_exact_values_round_trip(tmp_path: Path) -> None:
    big = 2**53 - 1
    store = _ingest(tmp_path, "ok.csv", f"run_id,step,loss,seed\na,{big},3.0,{-big}\n")
    f = store.to_frame()
    assert f["step"].tolist() == [big] and f["seed"].tolist() == [-big]


def test_runmeta_refuses_what_it_could_not_read_back(tmp_path: Path) -> None:
    for kw, match in [
        ({"seed": 2**70}, r"seed with \|seed\| < 2\^63"),
        ({"meta": {"size": 10**30}}, r"\|value\| < 2\^63 in meta.*meta\.size"),
        ({"meta": {"note": "\ud800"}}, "lone surrogate"),
        ({"meta": {"\udc80": 1}}, "lone surrogate"),
        ({"run_id": "a\ud800"}, "lone surrogate"),
        ({"meta": {"x": {"y": [float("inf")]}}}, "finite"),
        ({"schedule": {"kind": "table", "lr": [10**400]}}, r"< 2\^63"),
    ]:
        args = {"run_id": "a", **kw}
        with pytest.raises(InputError, match=match):
            RunMeta(**args)  # type: ignore[arg-type]
    nested: dict[str, object] = {"kind": "x"}
    for _ in range(5000):
        nested = {"kind": "x", "a": nested}
    with pytest.raises(InputError, match="nested at most"):
        RunMeta("a", schedule=nested)


def test_int64_meta_values_read_back(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        store.put_run(RunMeta("a", seed=2**63 - 1, meta={"size": "s", "unique_tokens_web": 2**62}))
        store.put_run(RunMeta("b", seed=-(2**63) + 1, meta={"unique_tokens_web": 2.5}))
        store.append_evals("a", [{"step": 1, "loss": 3.0}])
        store.append_evals("b", [{"step": 1, "loss": 3.0}])
        f = store.to_frame()
        assert f["seed"].tolist() == [2**63 - 1, -(2**63) + 1]
        assert store.runs()["unique_tokens_web"].tolist() == [2**62, 2.5]


def test_status_messages_are_printable_and_bounded(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        store.put_run(RunMeta("a"))
        store.set_status("a", "failed", "boom \ud800 " + "x" * 50_000)
        msg = store.runs()["message"][0]
        assert "\\ud800" in msg and len(msg) <= 2000
        msg.encode("utf-8")


def test_tensorboard_step_at_2_63_and_run_id_tag(tmp_path: Path) -> None:
    ev = write_events(tmp_path / "big" / "events.out.tfevents.1", [event(2**63 - 1, [simple("loss", 3.0)])])
    with pytest.raises(InputError, match=r"\|step\| < 2\^53"):
        read_table(ev.parent)
    # a scalar tag named run_id used to rename the run; it is a namespaced metric now
    tb = tmp_path / "tb"
    write_events(tb / "r1" / "events.out.tfevents.1", [event(1, [simple("loss", 3.0), simple("run_id", 7.0)])])
    write_events(tb / "r2" / "events.out.tfevents.1", [event(1, [simple("loss", 2.0), simple("run_id", 7.0)])])
    t = read_table(tb)
    assert t["run_id"].tolist() == ["r1", "r2"] and t["metric_run_id"].tolist() == [7.0, 7.0]
    with pytest.raises(InputError, match="named by their directory"):
        read_table(tb, column_map={"run_id": "loss"})


def test_validate_table_refuses_huge_python_ints_in_frames() -> None:
    df = pd.DataFrame({"run_id": ["a"], "step": pd.Series([10**400], dtype=object), "loss": [3.0]})
    with pytest.raises(InputError, match="finite"):
        validate_table(df, "x")
    df = pd.DataFrame({"run_id": pd.Series([10**5000], dtype=object), "step": [1], "loss": [3.0]})
    with pytest.raises(InputError, match=r"a string, got an integer of about"):
        validate_table(df, "x")
    df = pd.DataFrame({"run_id": ["a"], "step": np.array([2**63 + 5], dtype=np.uint64), "loss": [3.0]})
    with pytest.raises(InputError, match=r"\|step\| < 2\^53"):
        validate_table(df, "x")


def test_json_export_of_a_clean_store_round_trips(tmp_path: Path) -> None:
    rec = {"run_id": "a", "step": 3, "tokens": 12, "lr": 1e-3, "loss": 2.5, "seed": 7}
    store = _ingest(tmp_path, "ok.jsonl", json.dumps(rec) + "\n")
    out = store.export(tmp_path / "e.jsonl")
    assert read_table(out, allow_missing=True)["seed"].tolist() == [7]
