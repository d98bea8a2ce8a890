"""Bounded laws stay bounded: ``benchmark_logistic`` keeps ``chance ≤ C`` and ``C + A ≤ scale``, and the intervals of
any law that declares an output range are clipped to it, with a note
(:func:`mixlaw.fit.uncertainty.profile.clip_to_range`).

An accuracy is simulated from the logistic law with a ceiling of 0.99 (floor 0.25, four-way multiple choice) on
losses 2.6-4.4 with 4 accuracy points of noise, and predicted at losses down to 2.0 (larger models, beyond the
fitted range). Seeded; a few seconds.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from mixlaw.errors import InputError
from mixlaw.fit import fit_law
from mixlaw.fit.uncertainty.intervals import _band, band, inputs_of
from mixlaw.laws import get_law
from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

TRUE = {"C": 0.25, "A": 0.74, "k": [3.0], "B": -9.5}


def _table(seed: int, law: object) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    loss = np.linspace(2.6, 4.4, 24)
    acc = np.asarray(law.evaluate({"loss": loss}, TRUE), dtype=np.float64)  # type: ignore[attr-defined]
    return pd.DataFrame({"loss": loss, "acc": acc + 0.04 * rng.standard_normal(loss.size), "run_id": np.arange(24)})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_benchmark_law_keeps_its_ceiling_and_its_intervals_in_the_scale(seed: int) -> None:
    law = get_law("benchmark_logistic", losses="loss", benchmark="acc", chance=0.25)
    assert law.output_range == (0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # a ceiling on its constraint is reported at a bound
        res = fit_law(
            law,
            _table(seed, law),
            FitOptions(
                starts=StartOptions(given=[{"C": 0.3, "A": 0.5, "k": [2.0], "B": -6.0}]),
                bootstrap=BootstrapOptions(resamples=30),
                seed=seed,
            ),
            target="acc",
        )
    p = res.params
    assert 0.25 <= float(p["C"]) and float(p["C"]) + float(p["A"]) <= 1.0 + 1e-12
    draws = res.bootstrap_params
    assert draws is not None and bool(((draws["C"] + draws["A"]) <= 1.0 + 1e-12).all())
    x = inputs_of(res, pd.DataFrame({"loss": np.linspace(2.0, 4.4, 13)}))
    for kind in ("confidence", "prediction"):
        b = band(res, x, kind=kind)  # type: ignore[arg-type]
        assert b is not None and np.all(b.lo >= 0.0) and np.all(b.hi <= 1.0)
    raw = _band(res, x, kind="prediction")  # before clipping: a noise of 4 points crosses 1 near the ceiling
    assert raw is not None and (raw.hi > 1.0).any()
    b = band(res, x, kind="prediction")
    assert b is not None and b.note is not None and "clipped to the output range [0, 1]" in b.note
    np.testing.assert_allclose(b.hi, np.minimum(raw.hi, 1.0))  # clipped, not moved


def test_the_chance_level_is_checked() -> None:
    with pytest.raises(InputError, match="chance"):
        get_law("benchmark_logistic", losses="loss", chance=1.5)
    assert get_law("chinchilla").output_range == (-np.inf, np.inf)
