"""Fuzz harness over the non-run files mixlaw reads: fit JSON (given to ``predict``/``cpt``) and CPT plan TOML.

A valid file with up to two fields set to random JSON/TOML values (nested, huge, non-finite, of the wrong type),
a section replaced, or random bytes: every case either reads or fails with one bounded :class:`InputError` line
naming the file; a fit that reads has finite parameters of its law, and a plan that reads is within its bounds.
Fast profile by default (seeded); ``pytest -m fuzz_long`` runs the long one (see ``tests/_fuzz.py``).
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

from mixlaw.api import load_fit
from mixlaw.decide.cpt import load_plan
from mixlaw.fit import fit_law
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

sys.path.insert(0, str(Path(__file__).parent))
from _fuzz import FAST, LONG, flush_report, outcome, scaled  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _report() -> Iterator[None]:
    yield
    flush_report()


def _fit_record() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(7, 9, 20), 10 ** rng.uniform(9, 11, 20)
    y = (1.7 + 400 / N**0.34 + 1500 / D**0.3) * np.exp(0.01 * rng.standard_normal(20))
    df = pd.DataFrame({"n_params": N, "tokens": D, "loss": y})
    return json.loads(
        fit_law(
            "chinchilla",
            df,
            FitOptions(starts=StartOptions(n_polish=2), bootstrap=BootstrapOptions(resamples=4), seed=0),
        ).to_json()
    )


FIT = _fit_record()
FIT_KEYS = sorted(FIT) + ["params.A", "params.alpha", "input_ranges.tokens", "bootstrap.params", "calibration",
                          "bootstrap.n_resamples", "identifiability.condition"]  # fmt: skip

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.sampled_from(["chinchilla", "mixlaw.fit/1", "mixlaw.fit/9", "huber", "log", "\x00"]),
)  # fmt: skip
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                      max_leaves=8)  # fmt: skip


def _set(d: dict[str, Any], key: str, v: Any) -> None:
    head, _, rest = key.partition(".")
    if rest and isinstance(d.get(head), dict):
        d[head][rest] = v
    else:
        d[head] = v


def _fit_case(edits: list[tuple[str, Any]], raw: bytes | None) -> None:
    with tempfile.TemporaryDirectory() as tmp, outcome("fit JSON") as label:
        p = Path(tmp) / "fit.json"
        if raw is not None:
            label("bytes")
            p.write_bytes(raw)
        else:
            d = json.loads(json.dumps(FIT))
            for k, v in edits:
                _set(d, k, v)
            p.write_text(json.dumps(d, allow_nan=True))
        res = load_fit(p)
        assert all(math.isfinite(v) for v in res.law.flatten(res.params))  # what reads is finite
        assert set(res.params) == set(res.law.param_names)


FIT_ARGS = dict(
    edits=st.lists(st.tuples(st.sampled_from(FIT_KEYS), values), max_size=2),
    raw=st.none() | st.binary(max_size=200) | st.sampled_from([b"[" * 3000, b'{"schema": ' + b"9" * 5000 + b"}"]),
)


@scaled(FAST, 0.5)
@given(**FIT_ARGS)
def test_fuzz_fit_json(edits: list[tuple[str, Any]], raw: bytes | None) -> None:
    _fit_case(edits, raw)


@pytest.mark.fuzz_long
@scaled(LONG, 1.0)
@given(**FIT_ARGS)
def test_fuzz_fit_json_long(edits: list[tuple[str, Any]], raw: bytes | None) -> None:
    _fit_case(edits, raw)


PLAN_KEYS = [("pt", "schedule"), ("pt", "loss_potential"), ("pt", "branch_step"), ("cpt", "schedule"),
             ("cpt", "peak_lr"), ("cpt", "replay_ratio"), ("areas", "decay"), ("areas", "warmup"),
             ("areas", "split"), ("areas", "eval_every"), ("areas", "n_params"), ("cpt", "colour")]  # fmt: skip
toml_values = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str), st.floats(allow_nan=True, allow_infinity=True).map(
        lambda x: "nan" if math.isnan(x) else ("inf" if x == math.inf else "-inf" if x == -math.inf else repr(x))),
    st.booleans().map(lambda b: "true" if b else "false"), st.text(max_size=20).map(json.dumps),
    st.sampled_from(['"cosine:peak=2e-4,steps=100000000"', '{kind = "cosine"}', "[1, [2, [3]]]", "[" * 100 + "]" * 100,
                     '"constant:peak=1e-4,steps=50"', '{kind = "constant", peak_lr = 1e-4, total_steps = 20}']),
)  # fmt: skip


def _plan_case(edits: list[tuple[tuple[str, str], str]]) -> None:
    doc = {"pt": {"schedule": '"wsd:peak=2e-4,steps=400,decay=80"'},
           "cpt": {"schedule": '"cosine:peak=2e-4,steps=100"'}, "areas": {}}  # fmt: skip
    for (sec, key), v in edits:
        doc[sec][key] = v
    text = "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) for s, kv in doc.items())
    with tempfile.TemporaryDirectory() as tmp, outcome("CPT plan") as _:
        p = Path(tmp) / "plan.toml"
        p.write_text(text)
        plan = load_plan(p)
        assert 0.0 <= plan.replay_ratio <= 1.0 and plan.eval_every >= 1
        assert plan.cpt.total_steps * 100 <= 4 * 1024**3  # within the default --max-memory


PLAN_ARGS = dict(edits=st.lists(st.tuples(st.sampled_from(PLAN_KEYS), toml_values), max_size=2))


@scaled(FAST, 0.75)
@given(**PLAN_ARGS)
def test_fuzz_cpt_plan(edits: list[tuple[tuple[str, str], str]]) -> None:
    _plan_case(edits)


@pytest.mark.fuzz_long
@scaled(LONG, 1.0)
@given(**PLAN_ARGS)
def test_fuzz_cpt_plan_long(edits: list[tuple[tuple[str, str], str]]) -> None:
    _plan_case(edits)
