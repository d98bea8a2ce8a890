"""Python API conventions: `load_table` takes the CLI's table options, `FitResult.predict(..., interval=)` gives a
tidy frame with the same interval as `api.predict`, and API errors speak keywords, not CLI flags."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mixlaw import api
from mixlaw.errors import InputError
from mixlaw.options import BootstrapOptions, FitOptions
from mixlaw.runs.select import TableOptions

TRUTH = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 410.0, "beta": 0.28}


def _chinchilla_runs(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = np.repeat([1e6, 3e6, 1e7, 3e7, 1e8], 4)
    d = np.tile([1e8, 3e8, 1e9, 3e9], 5)
    loss = TRUTH["E"] + TRUTH["A"] / n ** TRUTH["alpha"] + TRUTH["B"] / d ** TRUTH["beta"]
    return pd.DataFrame({"run_id": [f"r{i}" for i in range(20)], "n_params": n, "tokens": d,
                         "loss": loss * np.exp(0.005 * rng.standard_normal(20))})  # fmt: skip


def test_fitresult_predict_interval_is_a_tidy_frame_matching_api_predict() -> None:
    res = api.fit(_chinchilla_runs(0), "chinchilla", FitOptions(bootstrap=BootstrapOptions(resamples=30), seed=0))
    at = pd.DataFrame({"n_params": [2e6, 2e7], "tokens": [5e8, 2e9]})  # inside the fitted range
    frame = res.predict(at, interval=0.95)
    assert list(frame.columns) == ["n_params", "tokens", "predicted", "lo", "hi"] and len(frame) == 2
    assert frame.attrs["level"] == 0.95 and frame.attrs["kind"] == "confidence"
    assert np.allclose(frame["predicted"], res.predict(at))  # the bare array is unchanged without interval
    for i in range(2):
        one = api.predict(res, at={"n_params": float(at["n_params"][i]), "tokens": float(at["tokens"][i])})
        assert frame["lo"][i] == pytest.approx(one["lo"]) and frame["hi"][i] == pytest.approx(one["hi"])
    truth = TRUTH["E"] + TRUTH["A"] / at["n_params"] ** TRUTH["alpha"] + TRUTH["B"] / at["tokens"] ** TRUTH["beta"]
    assert ((frame["lo"] < frame["predicted"]) & (frame["predicted"] < frame["hi"])).all()
    assert ((frame["lo"] <= truth) & (truth <= frame["hi"])).all()  # the law's curve, simulated truth
    wide = res.predict(at, interval=0.95, kind="prediction")
    assert (wide["hi"] - wide["lo"] > frame["hi"] - frame["lo"]).all()  # a new observation adds its noise
    no_draws = api.fit(_chinchilla_runs(0), "chinchilla", FitOptions(seed=0))
    with pytest.raises(InputError, match="bootstrap=N"):
        no_draws.predict(at, interval=0.9)


def test_api_errors_speak_keywords_not_flags() -> None:
    res = api.fit(_chinchilla_runs(1), "chinchilla", FitOptions(bootstrap=BootstrapOptions(resamples=5), seed=0))
    for call in (
        lambda: res.predict({"n_params": [1e7], "tokens": [1e9]}, interval=1.5),
        lambda: api.predict(res, at={"n_params": 1e7, "tokens": 1e9}, level=0.0),
        lambda: api.predict(res),
        lambda: api.load_table(_chinchilla_runs(1), drop_highest=99, target="loss"),
    ):
        with pytest.raises(InputError) as exc:
            call()
        assert "--" not in str(exc.value), str(exc.value)


def test_load_table_takes_the_table_options(tmp_path: Path) -> None:
    rows = []
    for rid in ("a", "b"):
        for s in range(10, 1010, 10):
            rows.append({"run_id": rid, "step": s, "loss_train": 3.0 - s / 1e3,
                         "loss": 2.5 - s / 2e3 if s % 100 == 0 else None})  # fmt: skip
    path = tmp_path / "log.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    final = api.load_table(path, final=True, target="loss", set_values={"n_params": 1e7})
    assert final[["run_id", "step"]].values.tolist() == [["a", 1000], ["b", 1000]]
    assert (final["n_params"] == 1e7).all()
    thin = api.load_table(path, every=500, steps="500:", target="loss", where="run_id == 'a'")
    assert thin["step"].tolist() == [500, 1000]
    gappy = api.load_table(path, options=TableOptions(), target="loss")
    assert len(gappy) == 20 and "left out 180 of 200 rows" in gappy.attrs["notes"][0]
