"""Published / derived numbers of the LR-annealing, multi-power and CPT laws (laws.md §4, §5, §15)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from mixlaw.decide.cpt import CptFits, CptPlan, LawFit, critical_point, critical_s1_constant, turning_length
from mixlaw.laws import get_law
from mixlaw.laws.cpt import shift_term
from mixlaw.laws.cpt_size import effective_single_size
from mixlaw.laws.multi_power import PUBLISHED_MPL
from mixlaw.schedules import Schedule
from mixlaw.schedules.multi_power import multi_power_exact, multi_power_features

EXTERNAL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "external"
MPL_DIR = EXTERNAL / "MultiPowerLaw" / "loss_curve_repo"

FIG3_DPT = {
    "L0": 3.057,
    "A": 0.490,
    "alpha": 0.497,
    "C1": 0.299,
    "C2": 0.298,
    "B": 0.366,
    "E": 28.0,
    "beta": 0.189,
}
FIG3_DCPT = {
    "L0": 3.024,
    "A": 0.412,
    "alpha": 0.677,
    "C1": 0.278,
    "C2": 0.324,
    "B": -0.666,
    "E": 5662.0,
    "beta": 0.146,
}


def _t(v: float) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.float64)


def _shift(s1: np.ndarray, B: float, E: float, beta: float) -> np.ndarray:
    return shift_term(torch.as_tensor(s1), _t(B), _t(E), _t(beta)).numpy()


def test_shift_per_step_and_per_s1_agree() -> None:
    # laws.md §5.6: Fig. 2 (per CPT step, constant 2e-4) vs Fig. 3 (per S1_cpt = 2e-4·t)
    t = np.array([1000.0, 5000.0, 10000.0, 20000.0])
    per_step = 0.368 * (1 - (0.008 * t + 1) ** -0.173)
    per_s1 = _shift(2e-4 * t, 0.366, 28.0, 0.189)
    np.testing.assert_allclose(per_step, [0.116, 0.174, 0.196, 0.215], atol=6e-4)
    np.testing.assert_allclose(per_s1, [0.110, 0.172, 0.196, 0.216], atol=6e-4)
    assert per_step[2] == pytest.approx(0.196, abs=5e-4) and per_s1[2] == pytest.approx(0.196, abs=5e-4)
    # D_cpt magnitudes
    cpt_step = 0.702 * (1 - (1.345 * t + 1) ** -0.131)
    cpt_s1 = -_shift(2e-4 * t, -0.666, 5662.0, 0.146)
    np.testing.assert_allclose(cpt_step, [0.429, 0.481, 0.500, 0.517], atol=6e-4)
    np.testing.assert_allclose(cpt_s1, [0.427, 0.477, 0.496, 0.512], atol=6e-4)


def test_eq7_effective_parameters_at_106m() -> None:
    fig15 = get_law("cpt_size").example_params
    eff = effective_single_size(fig15, 106e6)
    assert eff["C1"] == pytest.approx(0.269, abs=5e-4)
    assert eff["L0"] == pytest.approx(3.066, abs=5e-4)
    eff594 = effective_single_size(fig15, 594e6)
    assert eff594["C1"] == pytest.approx(0.404, abs=1e-3)
    assert eff594["L0"] == pytest.approx(2.713, abs=1e-3)
    # the law itself agrees with the single-size law built from the effective parameters
    x = {"s1_pt": np.array([4.0, 6.0]), "s1_cpt": np.array([0.0, 1.0]), "s2_pt": np.array([0.1, 0.17])}
    x["s2_cpt"] = np.array([0.0, 0.05])
    big = get_law("cpt_size").evaluate({**x, "n_params": np.full(2, 106e6)}, fig15)
    small = get_law("cpt").evaluate(x, eff)
    np.testing.assert_allclose(big, small, rtol=1e-12)


def _fits() -> CptFits:
    return CptFits(fits={"loss_pt": LawFit(get_law("cpt"), dict(FIG3_DPT), target="loss_pt")}, pt_set="loss_pt")


def test_critical_point_constant_lr() -> None:
    assert critical_s1_constant(FIG3_DPT) == pytest.approx(1.7987, abs=1e-4)
    plan = CptPlan(
        pt=Schedule.parse("constant:peak=2e-4,steps=20000"),
        cpt=Schedule.parse("constant:peak=2e-4,steps=100"),
    )
    cp = critical_point(_fits(), plan, n_scan=40)
    assert cp.s1_pt == pytest.approx(1.7987, abs=2e-4)
    assert cp.step == pytest.approx(8994, abs=1.0)


@pytest.mark.parametrize(
    ("pt_steps", "turn", "peak_step", "rise"),
    [
        (2000, 509, 181, 0.013),
        (4000, 4325, 789, 0.053),
        (6000, 15140, 1533, 0.079),
        (8000, 46189, 2385, 0.098),
    ],
)
def test_turning_lengths(pt_steps: int, turn: int, peak_step: int, rise: float) -> None:
    plan = CptPlan(
        pt=Schedule.parse(f"constant:peak=2e-4,steps={pt_steps}"),
        cpt=Schedule.parse("constant:peak=2e-4,steps=100"),
    )
    tl = turning_length(_fits(), plan, horizon=60000)
    assert tl.steps == turn
    assert tl.peak_step == peak_step
    assert tl.peak_rise == pytest.approx(rise, abs=6e-4)
    assert tl.asymptotic_class == "pre-critical"


def test_post_critical_transient_dip_reported_separately() -> None:
    # laws.md §5.5 caveat: a start after 10k PT steps is post-critical yet crosses below at ≈ 181k CPT steps
    plan = CptPlan(
        pt=Schedule.parse("constant:peak=2e-4,steps=10000"), cpt=Schedule.parse("constant:peak=2e-4,steps=10")
    )
    tl = turning_length(_fits(), plan, horizon=300_000)
    assert tl.asymptotic_class == "post-critical"
    assert tl.steps == pytest.approx(181_000, rel=0.01)
    short = turning_length(_fits(), plan, horizon=50_000)
    assert np.isinf(short.steps) and "post-critical" in short.reason


# ------------------------------------------------------------ multi-power law on the released curves
def mpl_schedule(name: str) -> Schedule:
    """The MultiPowerLaw schedules (README of the data folder), warm-up 2160 steps 0 → 3e-4."""
    w = 2160
    if name.startswith("cosine_"):
        return Schedule.parse(f"cosine:peak=3e-4,steps={name.split('_')[1]},warmup={w},final=3e-5")
    if name.startswith("constant_"):
        return Schedule.parse(f"constant:peak=3e-4,steps={name.split('_')[1]},warmup={w}")
    if name.startswith("wsdld_"):
        return Schedule.parse(f"wsd:peak=3e-4,steps=24000,warmup={w},final=3e-5,decay=4000")
    if name.startswith("wsd_"):
        return Schedule.parse(f"wsd:peak=3e-4,steps=24000,warmup={w},final=3e-5,decay=4000,shape=exp")
    if name.startswith("wsdcon_"):
        k = int(name.split("_")[1])
        return Schedule.parse(f"multistep:peak=3e-4,steps=16000,warmup={w},milestones=8000,gamma={k * 1e-5 / 3e-4}")
    raise ValueError(name)


needs_mpl = pytest.mark.skipif(not MPL_DIR.is_dir(), reason=f"external data not found at {MPL_DIR}")


@needs_mpl
@pytest.mark.parametrize("size", ["25", "100", "400"])
def test_published_mpl_parameters_fit_every_curve(size: str) -> None:
    law = get_law("multi_power")
    params = PUBLISHED_MPL[f"{size}M"]
    r2s = {}
    for f in sorted((MPL_DIR / f"csv_{size}").glob("*.csv")):
        df = pd.read_csv(f)
        s = mpl_schedule(f.stem)
        steps = df["step"].to_numpy()
        np.testing.assert_allclose(s.lr(steps), df["lr"].to_numpy(), rtol=1e-9, atol=1e-15)
        x = multi_power_features(s.lrs(), steps, eta0=s.eta0, longest=72000)
        pred = law.evaluate(x, params)
        y = df["loss"].to_numpy()
        r2s[f.stem] = 1 - np.sum((pred - y) ** 2) / np.sum((y - y.mean()) ** 2)
    assert len(r2s) == 9
    assert min(r2s.values()) >= 0.99, r2s


@needs_mpl
def test_mpl_compressed_history_matches_exact_sum() -> None:
    params = PUBLISHED_MPL["400M"]
    law = get_law("multi_power")
    for name in ("cosine_72000", "wsd_20000_24000", "wsdcon_3"):
        df = pd.read_csv(MPL_DIR / "csv_400" / f"{name}.csv")
        s = mpl_schedule(name)
        steps = df["step"].to_numpy()[::7]
        exact = multi_power_exact(s.lrs(), steps, params, eta0=s.eta0)
        approx = law.evaluate(multi_power_features(s.lrs(), steps, eta0=s.eta0, longest=72000), params)
        assert np.max(np.abs(exact - approx)) < 3e-4
    # 400M cosine_24000: R² 0.9978, MAE ≈ 0.0071 (laws.md §4.5)
    df = pd.read_csv(MPL_DIR / "csv_400" / "cosine_24000.csv")
    s = mpl_schedule("cosine_24000")
    pred = multi_power_exact(s.lrs(), df["step"].to_numpy(), params, eta0=s.eta0)
    y = df["loss"].to_numpy()
    assert 1 - np.sum((pred - y) ** 2) / np.sum((y - y.mean()) ** 2) == pytest.approx(0.9978, abs=5e-4)
    assert np.mean(np.abs(pred - y)) == pytest.approx(0.0071, abs=3e-4)
