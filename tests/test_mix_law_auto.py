"""``--law auto``: the law is chosen by a nested size holdout and never rests on an unhealthy fit when another fits.

Data simulated from ``mixture_additive`` with a token term that varies apart from the size: CAMEL (no token term)
fits them only with a parameter at a bound or a degenerate component, so it must not be chosen while
``mixture_additive`` fits healthily.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mixlaw.decide.mixture.law_choice import LawChoiceStatus, choose_law
from mixlaw.errors import InputError
from mixlaw.laws import get_law

DOMS = ("web", "code", "math")


def _runs(seed: int) -> pd.DataFrame:
    """Simulated from mixture_additive (its example parameters), 8 mixtures × 4 sizes, 10 or 40 tokens per parameter."""
    law = get_law("mixture_additive", domains=",".join(DOMS))
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.full(3, 0.8), size=8)
    rows = []
    for i in range(8):
        for j, n in enumerate((5e7, 1.5e8, 4e8, 1.2e9)):
            x = {"n_params": n, "tokens": (10.0 if (i + j) % 2 else 40.0) * n,
                 **{f"w_{d}": w[i, k] for k, d in enumerate(DOMS)}}  # fmt: skip
            f = float(law.evaluate({k: np.array([v]) for k, v in x.items()}, law.example_params)[0])
            rows.append({"run_id": f"m{i}_{n:.0e}", **x, "loss": f * np.exp(2e-3 * rng.standard_normal())})
    return pd.DataFrame(rows)


def test_auto_does_not_rest_on_an_unhealthy_camel(monkeypatch: pytest.MonkeyPatch) -> None:
    """CAMEL given the better held-out score (so it is checked first): its fit on every run is unhealthy, and the
    choice falls on the healthy mixture_additive, whose fits are returned for the caller to use."""
    from mixlaw.decide.mixture import law_choice

    real = law_choice._nested
    scored: list[str] = []

    def camel_first(name: str, *a: object, **k: object) -> tuple[float, float]:
        mre, bias = real(name, *a, **k)  # type: ignore[arg-type]
        scored.append(name)
        return (mre / 100.0 if name == "camel" else mre), bias

    monkeypatch.setattr(law_choice, "_nested", camel_first)
    runs = _runs(0)
    choice = choose_law({"loss": runs}, DOMS, candidates=("camel", "mixture_additive"))
    by = {s.law: s for s in choice.scores}
    assert by["camel"].mre < by["mixture_additive"].mre and by["camel"].checked
    assert not by["camel"].healthy and by["camel"].problems
    assert by["mixture_additive"].healthy, by["mixture_additive"].problems
    assert choice.law == "mixture_additive" and choice.status is LawChoiceStatus.CHOSEN
    assert choice.heldout_size == 1.2e9 and np.isfinite(by["mixture_additive"].mre)
    assert by["mixture_additive"].mre < 0.02  # it extrapolates the held-out size (the truth is in its family)
    d = choice.to_dict()
    assert [c["law"] for c in d["candidates"]] == ["camel", "mixture_additive"] and d["status"] == "chosen"
    fit = choice.fits["loss"]  # the chosen law's fit on every run, reused by mix optimize
    assert fit.law.name == "mixture_additive" and fit.n_points == len(runs)


def test_auto_skips_a_candidate_that_cannot_win() -> None:
    """Held-out scores first; the fits on every run stop at the first healthy law that no unchecked one beats."""
    runs = _runs(0)
    choice = choose_law({"loss": runs}, DOMS, candidates=("camel", "mixture_additive"))
    by = {s.law: s for s in choice.scores}
    assert choice.law == "mixture_additive" and by["mixture_additive"].healthy and by["mixture_additive"].checked
    if not by["camel"].checked:  # skipped only because it scored no better held out
        assert by["camel"].mre >= by["mixture_additive"].mre and not by["camel"].healthy
    else:
        assert not by["camel"].healthy


def test_auto_needs_three_sizes() -> None:
    runs = _runs(1)
    with pytest.raises(InputError, match="at least 3 fitted sizes"):
        choose_law({"loss": runs[runs["n_params"] < 2e8]}, DOMS, candidates=("mixture_additive",))


def test_auto_is_the_default_of_mix_optimize() -> None:
    """``--law auto`` is the default of the CLI and of the Python entry point (README 1b names camel explicitly)."""
    import inspect

    from typer.testing import CliRunner

    from mixlaw.cli import app
    from mixlaw.decide.builtin.mixture import OptimumOptions
    from mixlaw.decide.mixture.optimum import optimize

    assert inspect.signature(optimize).parameters["law"].default == "auto"
    assert OptimumOptions(domains=("a", "b")).law == "auto"  # `mixlaw decide mix_optimize` agrees with the verb
    r = CliRunner().invoke(app, ["mix", "optimize", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "auto (the default)" in r.output, r.output


def test_optimize_auto_uses_the_choice_fits_and_shows_the_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    """``optimize(law="auto")`` takes the chosen law's fits from the choice (no second fit), and the text output and
    the HTML report show the candidates table right under the weights / the decision."""
    from rich.console import Console

    from mixlaw.decide.mixture import law_choice, optimum
    from mixlaw.report.mix_page import mix_report
    from mixlaw.report.mix_text import print_optimum

    real = law_choice.choose_law
    only = ("mixture_additive",)
    monkeypatch.setattr(law_choice, "choose_law", lambda *a, **k: real(*a, **{**k, "candidates": only}))

    def no_refit(*_a: object, **_k: object) -> None:
        raise AssertionError("the chosen law was fitted again")

    monkeypatch.setattr(optimum, "fit_emitting", no_refit)
    out = optimum.optimize(_runs(2), domains=DOMS, target="loss", target_size=3e9)
    assert out["law"] == "mixture_additive" and out["law_choice"]["law"] == "mixture_additive"
    assert out["fits"]["loss"]["n_points"] == 32
    con = Console(record=True, width=160)
    print_optimum(out, console=con)
    text = con.export_text()
    assert text.index("code") < text.index("held-out MRE") < text.index("law auto: mixture_additive")
    html = mix_report(out)
    assert html.index("Decision") < html.index("Law choice") < html.index("Optimal mixture")
