"""Fuzz harness over CLI argument lists (issue 12): every verb ``mixlaw --help`` lists, with options drawn from
its own option set and values drawn from valid and invalid files, numbers, filters and junk.

Each case runs in-process through typer's ``CliRunner`` and must end with exit code 0 (accepted), 1 (a clean
one-line user error) or 2 (a usage error) — never a traceback, never Python exception or warning text on stderr
(a NumPy ``RuntimeWarning`` before a clean error included), never a file created or changed by a verb that only
reads, and within the harness' time limit. A case with an option the verb does not have must not exit 0 (a
silent acceptance). ``probe run`` (trains models) and ``corpora prepare`` (fetches packages) are left out: their
option parsing is covered by ``--help`` here and their specs by ``test_fuzz_specs.py``.

Fast profile by default; ``pytest -m fuzz_long`` runs the long one (see ``tests/_fuzz.py``).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.cli._group import VERBS, load_verb
from mixlaw.options import FitOptions, StartOptions

sys.path.insert(0, str(Path(__file__).parent))
from _fuzz import FAST, LONG, flush_report, outcome, scaled  # noqa: E402

SKIPPED = {("probe", "run"), ("corpora", "prepare")}
#: Options whose value is a path the verb writes (a case using one may create files).
WRITES = {"--out", "--report", "--export", "--log"}
#: Verbs that write by design (the store).
WRITING_VERBS = {("ingest",)}
PATH_OPTIONS = {"--store", "--law-file", "--lr-table", "--plan", "--weights", "--table", "--data-dir", "--work-dir",
                "--cache", "--schedule", "--prior"}  # fmt: skip


def _leaves(cmd: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(None):
            yield from _leaves(cmd.get_command(None, name), (*path, name))
    else:
        yield path, cmd


def _verbs() -> dict[tuple[str, ...], list[tuple[str, bool, bool]]]:
    """``{verb path: [(option or argument name, is_flag, is_argument)]}`` read from the commands themselves."""
    out: dict[tuple[str, ...], list[tuple[str, bool, bool]]] = {}
    for verb in VERBS:
        for path, cmd in _leaves(load_verb(verb), (verb,)):
            if path in SKIPPED:
                continue
            params = []
            for p in cmd.params:
                if p.name in ("install_completion", "show_completion"):
                    continue
                is_arg = not getattr(p, "opts", None) or not str(p.opts[0]).startswith("-")
                params.append((p.name if is_arg else p.opts[0], bool(getattr(p, "is_flag", False)), is_arg))
            out[path] = params
    return out


VERB_PARAMS = _verbs()
VERB_PATHS = sorted(VERB_PARAMS)

# --------------------------------------------------------------------------- the files the cases draw from
def _make_files(root: Path) -> dict[str, Path]:
    from mixlaw.fit import fit_law
    from mixlaw.laws import get_law

    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    N, D = np.meshgrid(np.geomspace(1e7, 1e9, 3), np.geomspace(1e9, 1e11, 3))
    N, D = N.ravel(), D.ravel()
    truth = {"A": 400.0, "B": 1500.0, "E": 1.8, "alpha": 0.34, "beta": 0.3}
    y = np.asarray(get_law("chinchilla").evaluate({"n_params": N, "tokens": D}, truth))
    table = pd.DataFrame({"run_id": [f"r{i}" for i in range(N.size)], "step": 100, "n_params": N, "tokens": D,
                          "loss": y * np.exp(0.003 * rng.standard_normal(N.size))})  # fmt: skip
    files = {"table.csv": root / "table.csv", "table.jsonl": root / "table.jsonl"}
    table.to_csv(files["table.csv"], index=False)
    table.to_json(files["table.jsonl"], orient="records", lines=True)
    power = fit_law("power_law", table.assign(tokens=D), FitOptions(starts=StartOptions(n_polish=2)))
    files["power.json"] = root / "power.json"
    files["power.json"].write_text(power.to_json())
    files["const.csv"] = root / "const.csv"
    table.assign(n_params=1e8).to_csv(files["const.csv"], index=False)
    files["bytes.csv"] = root / "bytes.csv"
    files["bytes.csv"].write_bytes(bytes(rng.integers(0, 256, 300, dtype=np.uint8)))
    files["empty.csv"] = root / "empty.csv"
    files["empty.csv"].write_text("")
    files["array.json"] = root / "array.json"
    files["array.json"].write_text("[1, 2, 3]")
    files["nested.json"] = root / "nested.json"
    files["nested.json"].write_text("[" * 5000 + "]" * 5000)
    files["huge.json"] = root / "huge.json"
    files["huge.json"].write_text(json.dumps({"schema": "mixlaw.fit/1", "law": "power_law", "params": {"E": 1e400}}))
    files["spec.toml"] = root / "spec.toml"
    files["spec.toml"].write_text(
        '[sweep]\nname = "f"\ndata_dir = "data"\nwork_dir = "runs"\nblock_size = 32\nbatch_size = 4\n'
        'eval_tokens = 256\n[pt]\nsizes = ["debug"]\ntokens = 2048\nmixture = {general = 1.0}\nevals = 2\n'
        'schedule = {kind = "wsd", peak_lr = 3e-3, warmup_fraction = 0.1, decay_fraction = 0.2}\n'
    )
    files["bad.toml"] = root / "bad.toml"
    files["bad.toml"].write_text("[sweep\nname = ")
    files["law.py"] = root / "law.py"
    files["law.py"].write_text("x = 1  # defines no law\n")
    files["broken.py"] = root / "broken.py"
    files["broken.py"].write_text("def (:\n")
    files["dir"] = root / "adir"
    files["dir"].mkdir(exist_ok=True)
    from mixlaw.runs.io import read_table
    from mixlaw.runs.store import RunStore

    files["store.db"] = root / "store.db"
    if not files["store.db"].exists():
        with RunStore(str(files["store.db"])) as store:
            store.ingest_table(read_table(files["table.csv"]))
    return files


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    made = _make_files(tmp_path_factory.mktemp("fuzz_cli_files"))
    for verb in VERB_PATHS:  # import every verb's modules once, so that no case is timed with a first import
        CliRunner().invoke(app, [*verb, "--help"])
    return made


@pytest.fixture(autouse=True, scope="module")
def _report() -> Iterator[None]:
    yield
    flush_report()


FILE_KEYS = ["table.csv", "table.jsonl", "power.json", "const.csv", "bytes.csv", "empty.csv", "array.json",
             "nested.json", "huge.json", "spec.toml", "bad.toml", "law.py", "broken.py", "dir", "store.db",
             "@missing.csv", "@missing.db"]  # fmt: skip
NUMBERS = ["0", "1", "2", "3", "-1", "0.5", "1.5", "1e23", "1e400", "-1e400", "nan", "inf", "-inf", "abc", "",
           "99999999999999999999", "0x10", "1_000", "١٢٣"]  # fmt: skip
WORDS = ["chinchilla", "power_law", "data_constrained", "nope", "runs", "rows", "residuals", "parametric", "sizes",
         "confidence", "prediction", "leave-largest-out", "rollout", "leave-group-out", "huber", "l2", "screen",
         "full", "n_params", "tokens", "loss", "run_id", "step", "general", "code", "power", "exp", "auto",
         "replay", "camel", "dml", "bpe", "bytes", "fetch", "slice"]  # fmt: skip
ASSIGN = ["n_params=1e9", "n_params=1e9,tokens=1e10", "tokens=3e11", "n_params==1", "x=1", "=", "a=b=c",
          "input=tokens", "input=nope", "loss=loss", "tokens=tokens * 2", "general=1.0", "code=0.5,general=0.5",
          "n_params=nan,tokens=1e10", "tokens=-1"]  # fmt: skip
FILTERS = ["n_params > 1e8", "step == max(step, by=run_id)", "loss < 3", "__import__('os')", "n_params.to_csv('x')",
           "@x", "nope > 1", "'a' + 1", "log(n_params) > 0", "(", "1e400 > n_params"]  # fmt: skip
JUNK = ["--nope", "-x", "--", "-", "--json", "--help", "../x", "a" * 300, "\x00", "'\udcff'", "{}", "[]"]


#: Valid values that let a case get past parsing into the verb's work (drawn half the time for these names).
GOOD = {"table": ["@file:table.csv", "@file:table.jsonl"], "file": ["@file:table.csv"], "runs": ["@file:table.csv"],
        "fit_json": ["@file:power.json"], "fit": ["@file:power.json"], "spec": ["@file:spec.toml"],
        "--law": ["power_law", "chinchilla"], "--law-option": ["input=tokens", "input=n_params"],
        "--at": ["tokens=1e10", "tokens=3e12", "n_params=1e9,tokens=1e10"], "--table": ["@file:table.csv"],
        "--store": ["@file:store.db"], "--where": FILTERS[:4], "--bootstrap": ["0", "2", "3"],
        "--level": ["0.5", "0.9"], "--scheme": ["leave-largest-out", "rollout"], "--n-polish": ["1", "2"]}  # fmt: skip


def _value_strategy(name: str, valid: bool = False) -> st.SearchStrategy[str]:
    base = _any_value(name)
    if name not in GOOD:
        return base
    good = st.sampled_from(GOOD[name])
    return good if valid else st.one_of(good, base)


def _any_value(name: str) -> st.SearchStrategy[str]:
    files = st.sampled_from(FILE_KEYS).map(lambda k: f"@file:{k}")
    mixed = st.one_of(st.sampled_from(NUMBERS), st.sampled_from(WORDS), st.sampled_from(ASSIGN),
                      st.sampled_from(FILTERS), st.sampled_from(JUNK), st.text(max_size=12))  # fmt: skip
    if name in WRITES:
        return st.sampled_from(["@out:o.json", "@out:o.html", "@out:o.csv", "@out:sub/o.json", "@file:dir"])
    if name in PATH_OPTIONS or not name.startswith("-"):
        return st.one_of(files, files, mixed)
    return mixed


@st.composite
def _cases(draw: st.DrawFn, valid: bool = False) -> tuple[tuple[str, ...], list[str]]:
    """One argument list; ``valid`` cases draw mostly valid values, so that they reach the verb's work."""
    verb = draw(st.sampled_from(VERB_PATHS))
    params = VERB_PARAMS[verb]
    args: list[str] = list(verb)
    positional = [p for p in params if p[2]]
    options = [p for p in params if not p[2] and (not valid or p[1] or p[0] in GOOD)]
    for name, _, _ in positional:
        if valid or draw(st.integers(0, 9)) > 0:
            args.append(draw(_value_strategy(name, valid)))
    chosen = draw(st.lists(st.sampled_from(options), max_size=2 if valid else 4)) if options else []
    for name, is_flag, _ in chosen:
        args.append(name)
        if not is_flag:
            args.append(draw(_value_strategy(name, valid)))
    if not valid and draw(st.integers(0, 5)) == 0:
        args.insert(draw(st.integers(len(verb), len(args))), draw(st.sampled_from(JUNK)))
    return verb, args


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


_PY_TEXT = re.compile(r"Traceback \(most recent call last\)|^\S+\.py:\d+: \w+Warning|RuntimeWarning|Exception:", re.M)


def _cli_case(files: dict[str, Path], work: Path, verb: tuple[str, ...], args: list[str]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    real = []
    for a in args:
        if a.startswith("@file:"):
            key = a[len("@file:") :]
            real.append(str(files["dir"].parent / key[1:]) if key.startswith("@") else str(files[key]))
        elif a.startswith("@out:"):
            real.append(str(work / a[len("@out:") :]))
        else:
            real.append(a)
    writes = bool(WRITES & set(real)) or verb in WRITING_VERBS
    before = (_snapshot(files["dir"].parent), _snapshot(work))
    name = "cli: " + " ".join(verb)
    with outcome("cli: argument lists") as label, contextlib.chdir(work):
        label(name)
        r = CliRunner().invoke(app, real, catch_exceptions=True)
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            raise AssertionError(f"traceback for {real!r}: {type(r.exception).__name__}: {r.exception}"[:2000])
        assert r.exit_code in (0, 1, 2), (real, r.exit_code, r.output[-500:])
        leaked = _PY_TEXT.search(r.stderr)
        assert leaked is None, f"Python text on stderr for {real!r}: {r.stderr[-800:]}"
        if r.exit_code == 1:
            errors = [s for s in r.stderr.splitlines() if s.startswith("error: ")]
            assert len(errors) == 1 and len(errors[0]) < 400, r.stderr[-800:]
        if "--nope" in real and "--help" not in real and "--" not in real:
            assert r.exit_code != 0, f"unknown option accepted: {real!r}"
        after = (_snapshot(files["dir"].parent), _snapshot(work))
        if verb in WRITING_VERBS:  # ingest may write into the store it is given (--store store.db), nothing else
            before[0].pop("store.db", None)
            after[0].pop("store.db", None)
        assert after[0] == before[0], f"the input files changed: {real!r}"
        if not writes:
            assert after[1] == before[1], f"a read-only verb created or changed files: {real!r}"
        if r.exit_code != 0:
            from mixlaw.errors import InputError

            raise InputError("clean error")  # counted as a clean error by the tally


CLI_ARGS = dict(case=st.one_of(_cases(valid=True), _cases()))


def test_every_verb_is_fuzzed_and_answers_help() -> None:
    assert {v[0] for v in VERB_PATHS} == set(VERBS) - {"corpora"}
    for verb in [*VERB_PATHS, *SKIPPED]:
        r = CliRunner().invoke(app, [*verb, "--help"])
        assert r.exit_code == 0 and "Usage" in r.output, verb


@scaled(FAST, 1.0)
@given(**CLI_ARGS)
def test_fuzz_cli_arguments(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, case: Any) -> None:
    _cli_case(files, _workdir(tmp_path_factory), *case)


@pytest.mark.fuzz_long
@scaled(LONG, 0.3)
@given(**CLI_ARGS)
def test_fuzz_cli_arguments_long(files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, case: Any) -> None:
    _cli_case(files, _workdir(tmp_path_factory), *case)


_WORK: list[Path] = []


def _workdir(factory: pytest.TempPathFactory) -> Path:
    """A fresh empty working directory per case (cases must not see each other's outputs)."""
    if not _WORK:
        _WORK.append(factory.mktemp("fuzz_cli_work"))
    path = _WORK[0] / f"case{len(list(_WORK[0].iterdir()))}"
    return path
