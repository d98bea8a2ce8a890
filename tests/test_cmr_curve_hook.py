"""The report draws a fitted ΔL_gen curve solid only where it reads the data: Eq. 6's two power terms can cancel
near the first evaluations and hook below zero where every observed increment is positive (the shipped probes,
R = 1 at 13.2k); that leading stretch is drawn dotted, never as a solid fitted curve."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

matplotlib.use("Agg")

from mixlaw.decide.cmr import critical_mixture_ratio  # noqa: E402
from mixlaw.report.plots import early_opposite_sign, plot_general_increments  # noqa: E402

RUNS = Path(__file__).resolve().parents[1] / "examples" / "cmr_probe" / "runs.csv"


def test_early_opposite_sign_marks_only_the_leading_stretch() -> None:
    t = np.linspace(1.0, 10.0, 10)
    obs_t, obs_y = np.array([1.0, 5.0, 10.0]), np.array([0.001, 0.01, 0.1])
    y = np.array([-0.02, -0.01, -0.001, 0.002, 0.01, 0.02, 0.03, -0.5, 0.06, 0.1])  # a later dip is not "early"
    off = early_opposite_sign(t, y, obs_t, obs_y)
    assert off.tolist() == [True, True, True] + [False] * 7
    assert not early_opposite_sign(t, np.abs(y), obs_t, obs_y).any()
    assert early_opposite_sign(t, -np.abs(y), obs_t, obs_y).all()  # wrong everywhere: all dotted


def test_the_shipped_r1_curve_hook_is_not_drawn_solid() -> None:
    runs = pd.read_csv(RUNS)
    dec = critical_mixture_ratio(runs, general_eval="general", domain_eval="legal", random_state=0,
                                 sensitivity_lambdas=(), sensitivity_epsilons=())  # fmt: skip
    s = min(dec.sizes, key=lambda x: x.n_params)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        plot_general_increments(s, dec.increments, epsilon=0.05, ax=ax)
        solid = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-" and len(ln.get_xdata()) > 2]
        dotted = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":" and len(ln.get_xdata()) > 1]
        assert solid, "no fitted curve drawn"
        d = dec.increments[(dec.increments["size"] == s.n_params) & (dec.increments["tokens"] > 0)]
        first = d.groupby("ratio")["tokens"].min()
        hooked = 0
        for r in sorted(s.curves):
            g = d[d["ratio"] == r]
            if s.curves[r]["general"] is None or not (g["dloss_general"] > 0).all():
                continue
            (line,) = [ln for ln in solid if ln.get_label() == f"R = {r:.3g}"]
            y = np.asarray(line.get_ydata(), dtype=np.float64)
            x = np.asarray(line.get_xdata(), dtype=np.float64)
            assert y[0] >= 0, f"R = {r}: solid fitted curve starts below zero at {x[0]}"
            hooked += int(x[0] > float(first[r]) * (1 + 1e-9))  # the axes are in tokens
        assert hooked >= 1 and dotted, "the R = 1 hook at the smallest size should be drawn dotted"
    finally:
        plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])
