"""Law specs as instance values: options, vector and simplex parameters, symmetry, and laws from outside.

The mixture law below is written here, not in the package: three training domains ``w_<d>`` (a required option
lists them), a simplex ``t`` saying how the target's intrinsic domain is spread over the training domains (the
other intrinsic domain is everything else), so the effective share of the target domain is ``m = Σ t_d w_d`` and
``L = E + A · m^(−alpha)``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mixlaw import api
from mixlaw.errors import InputError
from mixlaw.fit import FitResult, fit_law
from mixlaw.fit.evaluate.validate import validate_law
from mixlaw.laws import LAWS, Law, Option, ParamSpec, Symmetry, get_law, law_names, load_law_file
from mixlaw.laws import _registry as registry
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

Tensor = torch.Tensor


def _domains(value: Any) -> tuple[str, ...]:
    names = tuple(str(v) for v in (value.split(",") if isinstance(value, str) else value))
    if len(names) < 2:
        raise InputError(f"expected at least two domains, got {value!r}")
    return names


class IntrinsicMixture(Law):
    """``L = E + A * (sum_d t_d w_d)^(-alpha)`` with a simplex ``t`` (test law; after arXiv:2403.16952)."""

    name = "test_intrinsic_mixture"
    options_schema = (Option("domains", help="training domains (one w_<domain> input each)", check=_domains),)
    formula = "L = E + A * (sum_d t_d w_d)^(-alpha)"
    citation = "test law after Ye et al. 2024, arXiv:2403.16952"

    def configure(self, **options: Any) -> Mapping[str, Any]:
        doms = options["domains"]
        return {
            "inputs": tuple(f"w_{d}" for d in doms),
            "param_specs": (
                ParamSpec("A", 0.0, np.inf, plausible=(0.1, 10.0)),
                ParamSpec("E", 0.0, np.inf, plausible=(0.5, 5.0)),
                ParamSpec("alpha", 0.0, np.inf, plausible=(0.05, 2.0)),
                ParamSpec("t", simplex=True, length=len(doms), description="target domain's spread"),
            ),
            "example_params": {"A": 0.8, "E": 2.0, "alpha": 0.5, "t": list(np.full(len(doms), 1.0 / len(doms)))},
        }

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        w = torch.stack([x[c] for c in self.inputs], dim=-1)  # (n, D)
        t = p["t"]  # (S, 1, D), (S, n, D) or (D,)
        m = (w * t).sum(-1)
        return p["E"] + p["A"] * m ** (-p["alpha"])

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        w = rng.dirichlet(np.full(len(self.inputs), 0.3), size=n)  # many lopsided mixtures
        return {c: w[:, j] for j, c in enumerate(self.inputs)}


class TwoTerms(Law):
    """``L = E + a_0 x^(-b_0) + a_1 x^(-b_1)`` with vector ``a``, ``b`` (interchangeable terms; arXiv:2407.17467)."""

    name = "test_two_terms"
    inputs = ("tokens",)
    param_specs = (
        ParamSpec("E", 0.0, np.inf),
        ParamSpec("a", 0.0, np.inf, length=2),
        ParamSpec("b", 0.0, np.inf, length=2),
    )
    example_params = {"E": 1.5, "a": [3.0, 40.0], "b": [0.2, 0.6]}
    symmetry = Symmetry(indexed=("b", "a"))
    formula = "L = E + sum_k a_k x^(-b_k)"
    citation = "test law, arXiv:2407.17467"

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        t = x["tokens"] / 1e6
        return p["E"] + (p["a"] * torch.pow(t.unsqueeze(-1), -p["b"])).sum(-1)

    def start_grid(self) -> dict[str, np.ndarray]:
        return {"E": np.array([0.5, 2.0]), "a": np.array([[1.0, 10.0], [10.0, 1.0]]), "b": np.array([[0.1, 1.0]])}


@pytest.fixture
def registered() -> Iterator[None]:
    """Register the test laws for one test and remove them afterwards (the registry is process-wide)."""
    for cls in (IntrinsicMixture, TwoTerms):
        LAWS[cls.name] = cls
    yield
    for cls in (IntrinsicMixture, TwoTerms):
        LAWS.pop(cls.name, None)


def _simulate(law: Law, truth: Mapping[str, Any], n: int, seed: int, noise: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = law.example_inputs(n, rng)
    y = law.evaluate(x, truth) * np.exp(noise * rng.standard_normal(n))
    return pd.DataFrame(x).assign(loss=y, run_id=[f"r{i // 2}" for i in range(n)])


# ----------------------------------------------------------------------------------------------- options
def test_options_build_a_frozen_spec(registered: None) -> None:
    law = get_law("test_intrinsic_mixture", domains="web,code,math")
    assert law.inputs == ("w_web", "w_code", "w_math")
    assert law.flat_names == ("A", "E", "alpha", "t[0]", "t[1]", "t[2]")
    assert law.n_internal == 5  # the simplex has 3 entries, 2 free coordinates
    assert dict(law.options) == {"domains": ("web", "code", "math")}
    with pytest.raises(AttributeError):
        law.inputs = ("x",)  # type: ignore[misc]
    with pytest.raises(TypeError):
        law.options["domains"] = ("a", "b")  # type: ignore[index]
    # Two instances with different options do not share state.
    two = get_law("test_intrinsic_mixture", domains=["a", "b"])
    assert two.inputs == ("w_a", "w_b") and law.inputs == ("w_web", "w_code", "w_math")


def test_unknown_or_missing_option_is_one_line_error(registered: None) -> None:
    with pytest.raises(InputError, match=r"law 'test_intrinsic_mixture' needs option 'domains'.*its options: domains"):
        get_law("test_intrinsic_mixture")
    with pytest.raises(InputError, match=r"law 'power_law' has no option 'inptu'; its options: input='tokens'") as e:
        get_law("power_law", inptu="n_params")
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match=r"law 'chinchilla' has no option 'x'; its options: none"):
        get_law("chinchilla", x=1)
    with pytest.raises(InputError, match=r"law 'cpt', option 'base': expected one of 'known', 'blackbox'"):
        get_law("cpt", base="grey")
    with pytest.raises(InputError, match=r"option 'domains': expected at least two domains"):
        get_law("test_intrinsic_mixture", domains="web")


def test_list_laws_shows_options_and_survives_a_required_option(registered: None) -> None:
    rows = {r["name"]: r for r in api.list_laws()}
    assert set(rows) == set(law_names())
    mix = rows["test_intrinsic_mixture"]
    assert mix["configured"] is False
    assert mix["options"] == [
        {"name": "domains", "default": None, "required": True, "choices": None,
         "help": "training domains (one w_<domain> input each)"}
    ]  # fmt: skip
    cpt = {o["name"]: o for o in rows["cpt"]["options"]}
    assert cpt["base"]["default"] == "known" and cpt["base"]["choices"] == ["known", "blackbox"]
    assert rows["chinchilla"]["options"] == [] and rows["chinchilla"]["configured"] is True
    json.dumps(rows)  # the CLI prints it with --json


def test_option_dependent_specs_of_builtin_laws() -> None:
    assert get_law("power_law", input="n_params").inputs == ("n_params",)
    assert "E" not in get_law("cpt", fixed_E=100.0).param_names
    assert get_law("cpt", base="blackbox").inputs == ("s1_cpt", "s2_cpt")
    assert "beta" not in get_law("data_constrained", tie_exponents=True).example_params
    assert get_law("multi_power", n_bins=8).inputs[0] == "mpl_s1" and len(get_law("multi_power", n_bins=8).inputs) == 25
    # The class-level declaration is untouched by configured instances.
    assert "E" in get_law("cpt").param_names and get_law("cpt").inputs[0] == "s1_pt"


# ------------------------------------------------------------------------------------------ start designs
@pytest.mark.parametrize("name", law_names())
def test_start_design_is_a_small_list_of_points_away_from_the_example(name: str) -> None:
    law = get_law(name)
    design = law.start_design()
    assert design.ndim == 2 and design.shape[1] == law.n_internal and 1 <= len(design) < 100_000
    truth = law.to_internal(law.example_params)
    assert np.abs(design - truth).max(axis=1).min() > 1e-3  # never seeded with example_params


def test_large_grid_becomes_sobol_points() -> None:
    class Big(Law):
        name = "test_big_grid"
        inputs = ("x",)
        param_specs = tuple(ParamSpec(f"p{i}") for i in range(8))

        def start_grid(self) -> dict[str, np.ndarray]:
            return {f"p{i}": np.linspace(-1.0, 1.0, 5) for i in range(8)}  # 5^8 = 390,625 points

    design = Big().start_design()
    assert len(design) == 1024 and design.min() >= -1.0 and design.max() <= 1.0
    assert len(np.unique(np.round(design, 6), axis=0)) == 1024


class Saturating(Law):
    """``L = E + A * exp(-k * x)`` with a data-informed ``guess`` (test law; arXiv:2403.16952)."""

    name = "test_saturating"
    inputs = ("x",)
    param_specs = (ParamSpec("E"), ParamSpec("A", 0.0, np.inf), ParamSpec("k", 0.0, np.inf))
    example_params = {"E": 2.0, "A": 1.5, "k": 0.7}
    formula = "L = E + A exp(-k x)"
    citation = "test law, arXiv:2403.16952"
    fit_space = "raw"
    calls: list[int] = []

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return p["E"] + p["A"] * torch.exp(-p["k"] * x["x"])

    def guess(self, table: pd.DataFrame) -> list[dict[str, float]]:
        self.calls.append(len(table))
        x, y = table["x"].to_numpy(), table[self.target].to_numpy()
        E = float(y.min()) - 1e-3 * float(np.ptp(y))
        slope, icpt = np.polyfit(x, np.log(y - E), 1)
        return [{"E": E, "A": float(np.exp(icpt)), "k": float(-slope)}]


def test_guess_gives_data_informed_starts() -> None:
    law = Saturating()
    rng = np.random.default_rng(2)
    x = rng.uniform(0.0, 6.0, 50)
    df = pd.DataFrame({"x": x, "loss": 2.0 + 1.5 * np.exp(-0.7 * x) + 1e-3 * rng.standard_normal(50)})
    res = fit_law(law, df, FitOptions(starts=StartOptions(use_grid=False)))  # the guess is the only start
    assert Saturating.calls == [50] and res.settings["n_guess"] == 1 and res.n_starts == 1
    assert res.status.value == "converged"
    for p, v in {"E": 2.0, "A": 1.5, "k": 0.7}.items():
        assert res.params[p] == pytest.approx(v, rel=0.02), p
    with pytest.raises(InputError, match="expected at least one start"):
        fit_law(law, df, FitOptions(starts=StartOptions(use_grid=False, use_guess=False)))

    class BadGuess(Saturating):
        name = "test_bad_guess"

        def guess(self, table: pd.DataFrame) -> list[dict[str, float]]:
            return [{"E": 1.0}]

    with pytest.raises(InputError, match=r"law 'test_bad_guess': guess\(\) returned a bad start .*\['A', 'k'\]"):
        fit_law(BadGuess(), df)


def test_mixlaw_laws_lists_a_law_with_a_required_option(registered: None) -> None:
    from typer.testing import CliRunner

    from mixlaw.cli import app

    out = CliRunner().invoke(app, ["laws", "--json"])
    assert out.exit_code == 0, out.output
    rows = {r["name"]: r for r in json.loads(out.output)["laws"]}
    assert rows["test_intrinsic_mixture"]["options"][0]["required"] is True
    table = CliRunner().invoke(app, ["laws"], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "test_intrinsic_mixture" in table.output


# ------------------------------------------------------------------------------------ simplex and vectors
def test_simplex_law_is_recovered_from_its_own_design(registered: None) -> None:
    law = get_law("test_intrinsic_mixture", domains="web,code,math")
    truth = {"A": 0.8, "E": 2.0, "alpha": 0.5, "t": [0.1, 0.7, 0.2]}
    df = _simulate(law, truth, n=120, seed=3, noise=5e-4)
    res = fit_law(law, df, FitOptions(seed=0))
    # The starts are the law's Sobol design; none is near the truth.
    starts = res.starts[[f"start_{n}" for n in law.flat_names]].to_numpy()
    U = np.stack([law.to_internal(law.unflatten(r)) for r in starts])
    assert np.abs(U - law.to_internal(truth)).max(axis=1).min() > 0.1
    assert res.status.value == "converged"
    t = np.array(res.params["t"])
    assert isinstance(res.params["t"], list) and t.sum() == pytest.approx(1.0, abs=1e-12) and (t >= 0).all()
    np.testing.assert_allclose(t, truth["t"], atol=0.03)
    for p in ("A", "E", "alpha"):
        assert res.params[p] == pytest.approx(truth[p], rel=0.1), p


def test_vector_params_in_json_report_and_bootstrap_are_natural(registered: None) -> None:
    law = get_law("test_intrinsic_mixture", domains="web,code,math")
    truth = {"A": 0.8, "E": 2.0, "alpha": 0.5, "t": [0.1, 0.7, 0.2]}
    df = _simulate(law, truth, n=120, seed=4, noise=1e-3)
    res = fit_law(law, df, FitOptions(bootstrap=BootstrapOptions(resamples=40), seed=1))
    d = json.loads(res.to_json())
    assert isinstance(d["params"]["t"], list) and len(d["params"]["t"]) == 3
    assert set(d["ci"]) == {"A", "E", "alpha", "t[0]", "t[1]", "t[2]"}
    back = FitResult.from_json(res.to_json())
    assert back == res and back.params["t"] == res.params["t"]
    np.testing.assert_allclose(back.predict(df), res.predict(df))
    boot = res.bootstrap_params
    assert boot is not None and list(boot.columns) == list(law.flat_names)
    tb = boot[["t[0]", "t[1]", "t[2]"]].to_numpy()
    np.testing.assert_allclose(tb.sum(axis=1), 1.0, atol=1e-12)  # draws are proportions, not logits
    assert (tb >= 0).all() and (tb <= 1).all()
    for j in range(3):
        lo, hi = res.ci()[f"t[{j}]"]
        assert 0.0 <= lo <= res.params["t"][j] <= hi <= 1.0
    assert "t            [" in res.report()


def test_symmetric_vector_law_reports_fits_and_draws_canonically(registered: None) -> None:
    law = get_law("test_two_terms")
    truth = {"E": 1.5, "a": [3.0, 40.0], "b": [0.2, 0.6]}
    assert law.canonical({"E": 1.0, "a": [40.0, 3.0], "b": [0.6, 0.2]}) == {"E": 1.0, "a": [3.0, 40.0], "b": [0.2, 0.6]}
    rng = np.random.default_rng(0)
    tokens = np.exp(rng.uniform(np.log(1e6), np.log(1e11), 60))
    y = law.evaluate({"tokens": tokens}, truth) * np.exp(1e-3 * rng.standard_normal(60))
    df = pd.DataFrame({"tokens": tokens, "loss": y, "run_id": np.arange(60) // 3})
    res = fit_law(
        law, df, FitOptions(starts=StartOptions(n_random=16), bootstrap=BootstrapOptions(resamples=20), seed=0)
    )
    assert res.params["b"][0] <= res.params["b"][1]
    np.testing.assert_allclose(res.params["b"], truth["b"], rtol=0.1)
    boot = res.bootstrap_params
    assert boot is not None and (boot["b[0]"] <= boot["b[1]"]).all()


def test_bad_parameter_shapes_are_input_errors(registered: None) -> None:
    law = get_law("test_intrinsic_mixture", domains="a,b,c")
    x = law.example_inputs(3, np.random.default_rng(0))
    with pytest.raises(InputError, match=r"expected 3 values for parameter 't'"):
        law.evaluate(x, {"A": 1.0, "E": 1.0, "alpha": 0.5, "t": [0.5, 0.5]})
    with pytest.raises(InputError, match=r"needs parameters \['t'\]"):
        law.evaluate(x, {"A": 1.0, "E": 1.0, "alpha": 0.5})


# --------------------------------------------------------------------------------------- laws from outside
LAW_FILE = '''
import numpy as np
import torch
from mixlaw.laws import Law, ParamSpec, register


@register
class {cls}(Law):
    """``y = a + b * log(x)`` (a user's law; arXiv:0000.00000)."""

    name = "{name}"
    inputs = ("x",)
    param_specs = (ParamSpec("a"), ParamSpec("b"))
    example_params = {{"a": 1.0, "b": -0.1}}
    formula = "y = a + b log x"
    citation = "a user, arXiv:0000.00000"
    fit_space = "raw"

    def predict(self, x, p):
        return p["a"] + p["b"] * torch.log(x["x"])
'''


@pytest.fixture
def law_file(tmp_path: Any) -> Iterator[Any]:
    path = tmp_path / "my_laws.py"
    path.write_text(LAW_FILE.format(cls="UserLog", name="test_user_log"))
    yield path
    LAWS.pop("test_user_log", None)
    registry.LOADER.files.pop(str(path.resolve()), None)


def test_law_file_gets_fit_bootstrap_predict_and_validate(law_file: Any) -> None:
    assert load_law_file(law_file) == ["test_user_log"]
    assert load_law_file(law_file) == ["test_user_log"]  # loading twice is harmless
    assert "test_user_log" in law_names()
    rng = np.random.default_rng(5)
    x = np.exp(rng.uniform(0.0, 8.0, 40))
    df = pd.DataFrame({"x": x, "loss": 2.0 - 0.15 * np.log(x) + 0.01 * rng.standard_normal(40),
                       "run_id": np.arange(40) // 4, "size": np.repeat(np.arange(10), 4)})  # fmt: skip
    res = fit_law("test_user_log", df, FitOptions(bootstrap=BootstrapOptions(resamples=30), seed=0))
    assert res.params["a"] == pytest.approx(2.0, abs=0.02) and res.params["b"] == pytest.approx(-0.15, abs=0.01)
    lo, hi = res.ci()["b"]
    assert lo < -0.15 < hi
    np.testing.assert_allclose(FitResult.from_json(res.to_json()).predict(df), res.predict(df))
    val = validate_law("test_user_log", df, scheme="leave-largest-out", size_column="size")
    assert val.mre < 0.05 and set(val.folds["status"]) == {"converged"}


def test_law_file_errors_are_one_line_input_errors(tmp_path: Any) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_law_file(tmp_path / "nope.py")
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")
    with pytest.raises(InputError, match=r"bad.py' line 1: syntax error"):
        load_law_file(bad)
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(InputError, match="registers no law"):
        load_law_file(empty)
    boom = tmp_path / "boom.py"
    boom.write_text("raise RuntimeError('no GPU here')\n")
    with pytest.raises(InputError, match=r"failed while loading: RuntimeError: no GPU here"):
        load_law_file(boom)
    clash = tmp_path / "clash.py"
    clash.write_text(LAW_FILE.format(cls="Clash", name="chinchilla"))
    with pytest.raises(InputError, match="registered twice"):
        load_law_file(clash)
    assert LAWS["chinchilla"].__module__ == "mixlaw.laws.chinchilla"


def test_entry_point_laws_are_loaded_lazily(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "thirdparty_laws_pkg.py"
    pkg.write_text(LAW_FILE.format(cls="Plugin", name="test_plugin_law").replace("@register\n", ""))
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [
        EntryPoint("plugin", "thirdparty_laws_pkg:Plugin", registry.ENTRY_POINT_GROUP),
        EntryPoint("broken", "no_such_module_xyz:Law", registry.ENTRY_POINT_GROUP),
    ]

    def fake_entry_points(group: str) -> list[EntryPoint]:
        return eps if group == registry.ENTRY_POINT_GROUP else []

    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    monkeypatch.setitem(registry.LOADER.loaded, "plugins", False)
    monkeypatch.setattr(registry.LOADER, "errors", {})
    try:
        assert "test_plugin_law" in law_names()
        assert get_law("test_plugin_law").formula == "y = a + b log x"
        assert "broken" in registry.plugin_errors()
        with pytest.raises(InputError, match=r"plugins that failed to load: broken"):
            get_law("no_such_law")
    finally:
        LAWS.pop("test_plugin_law", None)
        sys.modules.pop("thirdparty_laws_pkg", None)


def test_configured_laws_and_fits_pickle_by_name_and_options(registered: None) -> None:
    import copy
    import pickle

    law = get_law("test_intrinsic_mixture", domains="a,b,c")
    back = pickle.loads(pickle.dumps(law))
    assert type(back) is IntrinsicMixture and back.inputs == law.inputs and dict(back.options) == dict(law.options)
    assert copy.deepcopy(get_law("cpt", fixed_E=100.0)).param_names == get_law("cpt", fixed_E=100.0).param_names
    df = _simulate(law, {"A": 0.8, "E": 2.0, "alpha": 0.5, "t": [0.1, 0.7, 0.2]}, n=40, seed=0, noise=1e-3)
    res = fit_law(law, df, FitOptions(starts=StartOptions(n_polish=4), seed=0))
    assert pickle.loads(pickle.dumps(res)) == res


@settings(max_examples=40, deadline=None)
@given(w=st.lists(st.floats(1e-4, 1.0), min_size=2, max_size=6))
def test_simplex_round_trip_and_constraint(w: list[float]) -> None:
    spec = ParamSpec("t", simplex=True, length=len(w))
    v = np.array(w) / np.sum(w)
    u = spec.to_internal(v)
    assert u.shape == (len(w) - 1,)
    back = spec.to_natural(torch.as_tensor(u)).numpy()
    np.testing.assert_allclose(back, v, rtol=1e-9, atol=1e-12)
    U = torch.as_tensor(np.random.default_rng(len(w)).normal(0.0, 5.0, (4, 3, len(w) - 1)))
    nat = spec.to_natural(U).numpy()
    assert nat.shape == (4, 3, len(w)) and (nat >= 0).all()
    np.testing.assert_allclose(nat.sum(-1), 1.0, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_canonical_form_is_idempotent_and_keeps_the_prediction(seed: int) -> None:
    law = TwoTerms()
    rng = np.random.default_rng(seed)
    p = {"E": float(rng.uniform(0.5, 3)), "a": list(rng.uniform(0.1, 50, 2)), "b": list(rng.uniform(0.05, 1.5, 2))}
    c = law.canonical(p)
    assert law.canonical(c) == c and c["b"][0] <= c["b"][1]
    x = {"tokens": np.exp(rng.uniform(np.log(1e6), np.log(1e11), 9))}
    np.testing.assert_allclose(law.evaluate(x, c), law.evaluate(x, p), rtol=1e-12)
    general = get_law("dloss_general")
    q = {"alpha2": -0.01, "s2": 0.9, "alpha3": 0.03, "s3": 0.3, "beta2": 0.0}
    cq = general.canonical(q)
    assert cq["s2"] == 0.3 and cq["alpha2"] == 0.03 and general.canonical(cq) == cq
