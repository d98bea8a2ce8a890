"""Fuzz harness over sweep specs (issue 12 item 5): a valid spec with one key set to a random TOML value, or a
random document, either plans or fails with one InputError naming the key; what plans is a sound sweep.

Fast profile by default; ``pytest -m fuzz_long`` runs the long one (see ``tests/_fuzz.py``).
"""

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

from mixlaw.probe.spec import MAX_THREADS
from mixlaw.probe.sweep import load_spec, plan
from mixlaw.runs.schema import Mixture

sys.path.insert(0, str(Path(__file__).parent))
from _fuzz import FAST, LONG, flush_report, outcome, scaled  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _report() -> Iterator[None]:
    yield
    flush_report()


VALID: dict[str, dict[str, Any]] = {
    "sweep": {"name": "f", "data_dir": "data", "work_dir": "runs", "block_size": 32, "batch_size": 4,
              "eval_tokens": 256, "seed": 0, "threads": 1, "compile": False, "bf16": False, "device": "cpu"},
    "pt": {"sizes": ["debug"], "tokens": 2048, "mixture": {"general": 1.0}, "evals": 2,
           "schedule": {"kind": "wsd", "peak_lr": 3e-3, "warmup_fraction": 0.1, "decay_fraction": 0.2},
           "save_at_lr_fractions": [0.5]},
    "cpt": {"domains": ["code"], "ratios": [0.25, 1.0], "replay": "general", "tokens": 1024, "evals": 2,
            "schedules": [{"kind": "constant", "peak_lr": 3e-4}], "parent": "final"},
}  # fmt: skip


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f'"{k}" = {_toml_value(x)}' for k, x in v.items()) + "}"
    raise TypeError(type(v))


def _toml(doc: dict[str, Any]) -> str:
    out = [f'"{k}" = {_toml_value(v)}' for k, v in doc.items() if not isinstance(v, dict)]
    for name, sec in doc.items():
        if isinstance(sec, dict):
            out.append(f"[{name}]")
            out += [f'"{k}" = {_toml_value(v)}' for k, v in sec.items()]
    return "\n".join(out) + "\n"


_SCALAR = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8).filter(lambda s: all(0x20 <= ord(c) < 0xD800 for c in s)),
    st.sampled_from(["../x", "a/b", ".", "..", "tpu", "cuda", "cuda:0", "false", "abc", "lrfrac0.5", "final",
                     "general", "legal", "code", "debug", "12k", "huge", "wsd", "constant"]),
)  # fmt: skip
_PLAUSIBLE = st.one_of(st.integers(1, 64), st.floats(0.01, 1.0), st.sampled_from(["debug", "code", "general", "x1"]))
_VALUE = st.recursive(
    st.one_of(_PLAUSIBLE, _PLAUSIBLE, _SCALAR),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["general", "code", "kind", "x"]), inner)
    ),
    max_leaves=5,
)
_KEYS = [(sec, key) for sec, d in VALID.items() for key in d] + [
    ("sweep", "eval_sets"), ("pt", "tokens_per_param"), ("cpt", "schedule"), ("pt", "eval_log_points"),
    ("sweep", "nonsense"), ("pt", "evlas"),
]  # fmt: skip


def _spec_case(edits: list[tuple[tuple[str, str], Any]], drop_cpt: bool, whole_section: Any) -> None:
    doc = {sec: dict(d) for sec, d in VALID.items()}
    for (sec, key), value in edits:
        doc[sec][key] = value
    if drop_cpt:
        doc.pop("cpt")
    if whole_section is not None:
        doc[whole_section[0]] = whole_section[1]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "spec.toml"
        try:
            path.write_text(_toml(doc), encoding="utf-8")
        except (TypeError, UnicodeEncodeError):
            return
        with outcome("specs: valid spec with random keys") as label:
            label("toml")
            jobs = plan(load_spec(path))
            # what plans is a sound sweep: nothing a run could crash on or write outside the work dir
            for j in jobs:
                c = j.config
                assert 1 <= c.threads <= MAX_THREADS and c.batch_size >= 1 and c.block_size >= 2
                assert c.eval_every >= 1 and c.eval_tokens > c.block_size and c.device.startswith(("cpu", "cuda"))
                assert isinstance(c.compile, bool) and isinstance(c.bf16, bool) and isinstance(c.seed, int)
                Mixture(dict(c.mixture))
                assert all(0 < f <= 1 for f in c.save_at_lr_fractions)
                assert (Path(c.work_dir) / c.run_id).resolve().parent == Path(c.work_dir).resolve()
                if c.parent_checkpoint is not None:
                    assert Path(c.parent_checkpoint).resolve().parent.parent == Path(c.work_dir).resolve()
                assert c.get_schedule().total_steps >= 1


SPEC_ARGS = dict(
    edits=st.lists(st.tuples(st.sampled_from(_KEYS), _VALUE), min_size=0, max_size=2),
    drop_cpt=st.booleans(),
    whole_section=st.one_of(st.none(), st.tuples(st.sampled_from(["sweep", "pt", "cpt", "extra"]), _SCALAR)),
)


@scaled(FAST, 1.0)
@given(**SPEC_ARGS)
def test_fuzz_specs(**kw: Any) -> None:
    _spec_case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 1.0)
@given(**SPEC_ARGS)
def test_fuzz_specs_long(**kw: Any) -> None:
    _spec_case(**kw)


def _text_case(text: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "spec.toml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        with outcome("specs: random TOML text") as label:
            label("text")
            plan(load_spec(path))


TEXT_ARGS = dict(
    text=st.one_of(
        st.text(max_size=80),
        st.sampled_from(["[pt]\n", "[sweep]\n[pt]\nsizes = ['debug']\n", "[pt]\nsizes=['debug']\ntokens=1\n"]).flatmap(
            lambda head: st.text(max_size=40).map(lambda tail: head + tail)
        ),
    )
)


@scaled(FAST, 1.0)
@given(**TEXT_ARGS)
def test_fuzz_spec_text(**kw: Any) -> None:
    _text_case(**kw)


@pytest.mark.fuzz_long
@scaled(LONG, 0.5)
@given(**TEXT_ARGS)
def test_fuzz_spec_text_long(**kw: Any) -> None:
    _text_case(**kw)
