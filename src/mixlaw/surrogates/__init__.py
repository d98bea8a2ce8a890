"""Nonparametric mixture surrogates behind the fit/predict interface of the parametric laws (``mix compare``).

:class:`RegMix` (laws.md §8): gradient-boosted trees (optional extra ``lightgbm``), a Gaussian process (optional
extra ``sklearn``) or least squares, on the mixture weights. :class:`DmlMlp` (laws.md §7.3): the released Data
Mixing Laws pipeline's boosted implicit-aggregation MLPs (numpy only).
"""

from collections.abc import Mapping, Sequence
from typing import Any

from mixlaw.surrogates.dml_mlp import PROTOCOLS, DmlMlp, DmlMlpFit
from mixlaw.surrogates.regmix import BACKENDS, EARLY_STOPPING, RegMix, RegMixFit

__all__ = [
    "BACKENDS",
    "EARLY_STOPPING",
    "PROTOCOLS",
    "SURROGATES",
    "DmlMlp",
    "DmlMlpFit",
    "RegMix",
    "RegMixFit",
    "build_surrogate",
]

#: Surrogates by the name ``--models`` uses.
SURROGATES: dict[str, Any] = {"regmix": RegMix, "dml_mlp": DmlMlp}


def build_surrogate(name: str, domains: Sequence[str], options: Mapping[str, Any]) -> Any:
    """The surrogate ``name`` over ``domains`` with ``options`` (one-line :class:`InputError` on a bad one)."""
    from mixlaw.errors import InputError

    if name not in SURROGATES:
        raise InputError(f"unknown surrogate '{name}'; known: {', '.join(SURROGATES)}")
    return SURROGATES[name].from_options(tuple(domains), options)
