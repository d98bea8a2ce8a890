"""Nonparametric mixture surrogates behind the fit/predict interface of the parametric laws (``mix compare``).

:class:`RegMix` (laws.md §8): gradient-boosted trees (optional extra ``lightgbm``), a Gaussian process (optional
extra ``sklearn``) or least squares, on the mixture weights.
"""

from mixlaw.surrogates.regmix import BACKENDS, EARLY_STOPPING, RegMix, RegMixFit

__all__ = ["BACKENDS", "EARLY_STOPPING", "RegMix", "RegMixFit"]
