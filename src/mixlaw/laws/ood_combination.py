"""OOD loss as a linear combination of the D_pt and D_cpt losses (Wang et al., arXiv:2505.07796, Eq. 6).

.. math:: L_{ood} = c_{pt} L_{D_{pt}} + c_{cpt} L_{D_{cpt}}

No intercept; the coefficients (the paper's λ'1, λ'2, named ``ood_coef_pt`` / ``ood_coef_cpt`` here) are
signed and need not sum to 1 (e.g. StackExchange 1.853·L_cpt − 0.546·L_pt), so never normalise them into a
convex combination. Inputs ``loss_pt`` and ``loss_cpt`` are the observed (for fitting) or predicted (for
decisions) losses on the two sets; map them to real columns with ``input_map={"loss_pt": "loss_general",
"loss_cpt": "loss_code"}``. Fitted in raw space (the paper reports least-squares errors ≤ 0.003).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from mixlaw.laws._base import Law, ParamSpec, Tensor, register
from mixlaw.laws.lr_annealing import safe_log

__all__ = ["OODCombination"]


@register
class OODCombination(Law):
    """``L_ood = ood_coef_pt·L_pt + ood_coef_cpt·L_cpt`` (arXiv:2505.07796 Eq. 6, no intercept).

    ``example_params``: the published C4 coefficients (0.867·L_FineWeb + 0.152·L_KnowledgePile).
    """

    name = "ood_combination"
    inputs = ("loss_pt", "loss_cpt")
    param_specs = (
        ParamSpec("ood_coef_pt", transform="identity", description="coefficient of the D_pt loss (signed)"),
        ParamSpec("ood_coef_cpt", transform="identity", description="coefficient of the D_cpt loss (signed)"),
    )
    example_params = {"ood_coef_pt": 0.867, "ood_coef_cpt": 0.152}
    formula = "L_ood = ood_coef_pt*L_pt + ood_coef_cpt*L_cpt"
    citation = "Wang et al. 2025, arXiv:2505.07796 (Eq. 6)"
    fit_space = "raw"
    default_delta = 1e-2

    def predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return p["ood_coef_pt"] * x["loss_pt"] + p["ood_coef_cpt"] * x["loss_cpt"]

    def log_predict(self, x: Mapping[str, Tensor], p: Mapping[str, Tensor]) -> Tensor:
        return safe_log(self.predict(x, p))

    def start_grid(self) -> dict[str, np.ndarray]:
        return {"ood_coef_pt": np.array([-0.5, 0.5, 1.5]), "ood_coef_cpt": np.array([-0.5, 0.5, 1.5])}

    def example_inputs(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        loss_pt = rng.uniform(2.8, 3.6, n)
        return {"loss_pt": loss_pt, "loss_cpt": loss_pt + rng.uniform(-1.0, 1.0, n)}
