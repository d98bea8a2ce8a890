"""The size growth of the calibration is read from each nested fit's rows *beyond* its fitted range.

:func:`mixlaw.fit.evaluate.calib_growth.error_model` (``docs/design/growth-uncertainty.md``, "Rows beyond the
range"): a K-fold that leaves out an end size predicts one or two rows just beyond the fitted range among many
inside it. Averaged with its interpolation errors, that fold's excess score and squared distance shrank together
and its weight in the slope through the origin with them, while the noise of its inside rows stayed: the first step
beyond the fitted range, where such folds are the main evidence, was read as noise. Simulated standardised fold
errors with a known growth (``E[z² | d] = 1 + γ² d²``), seeded; under a second.
"""

from __future__ import annotations

import numpy as np

from mixlaw.fit.evaluate.calib_folds import FoldErrors
from mixlaw.fit.evaluate.calib_growth import error_model


def _folds(rng: np.random.Generator, g2: float) -> FoldErrors:
    """10 K-fold folds of 10 rows inside their range; the two that leave out an end size also predict one row
    0.3-0.7 e-folds beyond; 3 short forward cuts (6 rows, 0.02-0.12 e-folds)."""
    e: list[float] = []
    d: list[float] = []
    split: list[int] = []
    fwd: list[bool] = []
    for k in range(10):
        z = list(rng.normal(0.0, 1.0, 10))
        dist = [0.0] * len(z)
        if k in (0, 9):
            far = float(rng.uniform(0.3, 0.7))
            z.append(float(rng.normal()) * float(np.sqrt(1 + g2 * far**2)))
            dist.append(far)
        e += z
        d += dist
        split += [k] * len(z)
        fwd += [False] * len(z)
    for k in range(3):
        dist_f = rng.uniform(0.02, 0.12, 6)
        e += list(rng.normal(0.0, 1.0, 6) * np.sqrt(1 + g2 * dist_f**2))
        d += list(dist_f)
        split += [10 + k] * 6
        fwd += [True] * 6
    n = len(e)
    return FoldErrors(
        e=np.array(e), d=np.array(d), split=np.array(split), forward=np.array(fwd), rows=np.arange(n),
        last=np.zeros(n, dtype=bool), span=np.ones(n), sd=np.ones(n), axis="n_params", n_folds=13,
    )  # fmt: skip


def _padded(fe: FoldErrors, n: int) -> FoldErrors:
    """``fe`` with ``n`` more rows inside the range in each K-fold fold that reaches beyond it, at the mean inside
    score (so that the inflation ``c²`` is unchanged)."""
    inside = ~fe.forward & (fe.d == 0)
    score = float(np.sqrt(np.mean(fe.e[inside] ** 2)))
    ends = np.unique(fe.split[~fe.forward & (fe.d > 0)])
    split = np.concatenate([fe.split, np.repeat(ends, n)])
    k = split.size
    return FoldErrors(
        e=np.concatenate([fe.e, np.full(ends.size * n, score)]), d=np.concatenate([fe.d, np.zeros(ends.size * n)]),
        split=split, forward=np.concatenate([fe.forward, np.zeros(ends.size * n, dtype=bool)]), rows=np.arange(k),
        last=np.zeros(k, dtype=bool), span=np.ones(k), sd=np.ones(k), axis=fe.axis, n_folds=fe.n_folds,
    )  # fmt: skip


def test_interpolation_rows_of_a_fold_do_not_move_the_growth() -> None:
    """Rows a fold predicts inside its range, at the mean inside score, leave the inflation and the growth as they
    are (they diluted a fold's distance, and so its weight, before)."""
    for seed in range(5):
        fe = _folds(np.random.default_rng(seed), 4.0)
        base, padded = error_model(fe), error_model(_padded(fe, 30))
        assert base[2] == padded[2] and abs(base[0] - padded[0]) < 1e-9 and abs(base[1] - padded[1]) < 1e-9


def test_a_first_step_growth_is_measured_and_covered() -> None:
    """400 replicates per truth: the expected growth errs wide but not by multiples (mean γ² 6.0 at 4, 2.4 at 0; the
    fold means diluted by their inside rows gave 16.2 and 13.8), and 95 % intervals cover new scores drawn within the
    first e-fold in 90-99 % (measured 92.4 % and 97.2 %)."""
    rng = np.random.default_rng(0)
    for truth, top in ((4.0, 9.0), (0.0, 4.0)):
        g2, inside = [], []
        for _ in range(400):
            inflation, growth, _ = error_model(_folds(rng, truth))
            q = rng.uniform(0.0, 1.0, 50)
            z = rng.normal(0.0, 1.0, 50) * np.sqrt(1 + truth * q**2)
            f = np.maximum(1.0, np.sqrt(inflation**2 + growth**2 * q**2))
            inside.append(np.mean(np.abs(z) <= 1.96 * f))
            g2.append(growth**2)
        assert truth <= np.mean(g2) <= top, (truth, np.mean(g2))
        assert 0.90 <= np.mean(inside) <= 0.99, (truth, np.mean(inside))
