"""Issue 9 item 1: ``--max-iter`` exists on every verb that fits, and a decision's cap reaches every fit it makes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from mixlaw.cli import app
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, SolverOptions

REPO = Path(__file__).resolve().parents[1]
MIX = str(REPO / "examples" / "mixture_probe" / "runs.csv")
CMR = str(REPO / "examples" / "cmr_probe" / "runs.csv")


@pytest.mark.parametrize(
    "verb", [["fit"], ["validate"], ["cmr"], ["mix", "compare"], ["mix", "optimize"], ["mix", "nested"], ["plan"]]
)
def test_every_verb_that_fits_takes_max_iter(verb: list[str]) -> None:
    r = CliRunner().invoke(app, [*verb, "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "--max-iter" in r.output


def test_solver_options_carry_the_cap() -> None:
    """The cap travels as an explicit, frozen option: set, it overrides every fit's own limit; unset, each fit
    keeps its own (``None``: the adaptive limit); a cap below 1 is a one-line error naming the field."""
    assert DEFAULT_SOLVER.cap(None) is None and DEFAULT_SOLVER.cap(300) == 300
    capped = SolverOptions(max_iter=7)
    assert capped.cap(None) == 7 and capped.cap(300) == 7
    assert SolverOptions(max_iter=None).cap(300) == 300  # no cap: each fit's own limit again
    with pytest.raises(AttributeError):
        capped.max_iter = 8  # type: ignore[misc]  # frozen: no fit can change another's cap
    for bad in (0, -3, 2.5, True):
        with pytest.raises(InputError, match="max_iter"):
            SolverOptions(max_iter=bad)  # type: ignore[arg-type]


def test_no_hidden_iteration_state() -> None:
    """No module of the package keeps a context variable (the cap reached the solvers through one)."""
    src = REPO / "src" / "mixlaw"
    offenders = [str(p.relative_to(src)) for p in src.rglob("*.py") if "contextvars" in p.read_text(encoding="utf-8")]
    assert offenders == []


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record the ``max_iter`` of every engine fit and every batched resample refit."""
    import mixlaw.fit as fit_mod
    import mixlaw.fit.solver.refits as refits_mod
    import mixlaw.fit.uncertainty.bootstrap as boot_mod

    seen: list[Any] = []
    fit_law, refit = fit_mod.fit_law, boot_mod._refit

    def fit_spy(*a: Any, **kw: Any) -> Any:
        opts = kw.get("options", a[2] if len(a) > 2 else None)  # the FitOptions of the fit
        seen.append(("fit_law", None if opts is None else opts.solver.max_iter))
        return fit_law(*a, **kw)

    def refit_spy(*a: Any, **kw: Any) -> Any:
        seen.append(("refit", kw.get("max_iter")))
        return refit(*a, **kw)

    monkeypatch.setattr(fit_mod, "fit_law", fit_spy)
    monkeypatch.setattr(boot_mod, "_refit", refit_spy)  # the resample refits
    monkeypatch.setattr(refits_mod, "_refit", refit_spy)  # their rescues, and every other batched refit
    return seen


@pytest.mark.parametrize("cap", [None, 3])
def test_mix_optimize_caps_every_fit(monkeypatch: pytest.MonkeyPatch, cap: int | None) -> None:
    seen = _spy(monkeypatch)
    args = ["mix", "optimize", MIX, "--law", "dml", "--domains", "general,legal,docs,bio,code", "--target",
            "loss_general", "--final", "--where", "n_params < 2e5", "--target-size", "252720", "--bootstrap", "4"]
    r = CliRunner().invoke(app, args + ([] if cap is None else ["--max-iter", str(cap)]))
    assert r.exit_code == 0, r.output
    assert {k for k, _ in seen} == {"fit_law", "refit"}  # the point fit and the resample refits
    assert all(m == cap for _, m in seen), seen  # None: the adaptive limit, as before
    if cap is not None:
        assert f"did not converge in {cap} iterations" in r.output


@pytest.mark.parametrize("cap", [None, 4])
def test_cmr_caps_every_fit(monkeypatch: pytest.MonkeyPatch, cap: int | None) -> None:
    """The constant-LR CMR fits its curves, ratio laws and CMR laws with its own profiled least squares (a
    pattern search of at most 200 rounds) and the engine: every one asks the decision's cap."""
    got: list[Any] = []
    real = SolverOptions.cap

    def spy(self: SolverOptions, default: int | None = None) -> int | None:
        got.append(real(self, default))
        return got[-1]

    monkeypatch.setattr(SolverOptions, "cap", spy)
    args = ["cmr", CMR, "--general-eval", "general", "--domain-eval", "legal", "--bootstrap", "3", "--json"]
    r = CliRunner().invoke(app, args + ([] if cap is None else ["--max-iter", str(cap)]))
    assert r.exit_code == 0, r.output
    assert got  # the profiled fits
    assert all(m == cap for m in got) if cap is not None else (4 not in got and 200 in got), got
    if cap is not None:  # the cap changes the answer: four rounds of the pattern search do not finish
        free = CliRunner().invoke(app, args)
        assert free.exit_code == 0 and '"not converged"' not in free.stdout
        assert '"not converged"' in r.stdout and free.stdout != r.stdout  # the same runs, deterministic otherwise
