"""Exponential ratio law of Data Mixing Laws (two-domain form).

.. math:: L(R) = c + \\exp(k R + b)

Ye et al., "Data Mixing Laws: Optimizing Data Mixtures by Predicting Language Modeling Performance",
arXiv:2403.16952 (Sec. 3 and the continual pre-training experiment, Sec. 5; laws.md §7.1, §7.4). ``R`` is the
share of one domain in a two-domain mix (``ratio``, in ``[0, 1]``), ``L`` a validation loss (nats/token).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws._base import Law, ParamSpec, Tensor, register


@register
class RatioExp(Law):
    """``L(R) = c + exp(k * R + b)`` (Ye et al. 2024, arXiv:2403.16952).

    ``c`` is the loss floor, ``k`` the signed sensitivity to the share, ``b`` the log amplitude. The published
    two-domain recipe picks ``c`` by scanning ``[0, min L)`` for the largest ``|corr(R, log(L - c))|`` and
    then fits ``(k, b)``; :func:`mixlaw.decide.cmr.fit_ratio_law` implements it as ``c_method="corr_grid"``. A
    plain fit of all three parameters is ``c_method="fit"``.
    """

    name = "ratio_exp"
    inputs = ("ratio",)
    param_specs = (
        ParamSpec("c", description="loss floor (nats/token)"),
        ParamSpec("k", description="sensitivity to the share (signed)"),
        ParamSpec("b", description="log amplitude"),
    )
    # Pile-side CPT fit of Data Mixing Laws with R = Pile share (laws.md §7.4).
    example_params = {"c": 2.8103, "k": -3.7397, "b": -1.6938}
    formula = "L = c + exp(k*R + b)"
    citation = "Ye et al. 2024, arXiv:2403.16952"
    fit_space = "raw"
    default_delta = 1e-3

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return p["c"] + torch.exp(p["k"] * x["ratio"] + p["b"])

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Shares spread over ``[0, 1]``."""
        return {"ratio": rng.uniform(0.0, 1.0, n)}

    def start_grid(self) -> dict[str, np.ndarray]:
        return {
            "c": np.array([0.0, 1.0, 2.0, 3.0, 5.0]),
            "k": np.linspace(-6.0, 6.0, 13),
            "b": np.linspace(-5.0, 1.0, 7),
        }

    # ---- separable form (used by mixlaw.fit.solver.profiled): k nonlinear, c and the amplitude exp(b) linear
    def profile_points(self) -> dict[str, np.ndarray]:
        """Sensitivities ``k`` over ``[-30, 30]`` without 0."""
        k = np.round(np.arange(-30.0, 30.0001, 0.1), 3)
        return {"k": k[np.abs(k) > 0.05]}

    def linear_design(
        self, x: Mapping[str, np.ndarray], theta: Mapping[str, np.ndarray]
    ) -> tuple[tuple[str, ...], np.ndarray]:
        """Columns ``[1, exp(k R)]`` for ``c`` and the amplitude ``exp(b)``."""
        r = np.asarray(x["ratio"], dtype=np.float64)
        with np.errstate(all="ignore"):
            e = np.exp(np.asarray(theta["k"])[..., None] * r)
        return ("c", "amp"), np.stack([np.ones_like(e), e], axis=-1)

    def from_profile(self, params: Mapping[str, float]) -> dict[str, float] | None:
        """``b = log(amp)``; None when the amplitude is not positive (not this law's shape)."""
        amp = float(params["amp"])
        if not amp > 0:
            return None
        return {"c": float(params["c"]), "k": float(params["k"]), "b": float(np.log(amp))}


def corr_grid_c(ratio: np.ndarray, loss: np.ndarray, n_grid: int = 1000) -> float:
    """Data Mixing Laws' floor ``c``: the ``c`` in ``[0, min L)`` maximising ``|corr(R, log(L − c))|``.

    (laws.md §7.3-7.4; ``continue_training.ipynb`` of yegcjs/mixinglaws: a 1000-point grid.)
    """
    y = np.asarray(loss, dtype=np.float64)
    if np.min(y) <= 0:
        raise InputError("the correlation-grid recipe needs positive losses")
    cs = np.linspace(0.0, float(np.min(y)), n_grid, endpoint=False)
    best, best_c = -1.0, 0.0
    for c in cs:
        z = np.log(y - c)
        if np.std(z) == 0:
            continue
        r = abs(float(np.corrcoef(ratio, z)[0, 1]))
        if r > best:
            best, best_c = r, float(c)
    return best_c
