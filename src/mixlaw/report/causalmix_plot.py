"""How the mixture a pool-aware surrogate proposes moves with each pool statistic (the "CATE interpreter" view)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["plot_proposed_shares"]


def plot_proposed_shares(
    fit: Any, base: Mapping[str, float], covariate: str, values: Sequence[float], ax: Any = None
) -> Any:
    """The proposed share of every domain (stacked) as ``covariate`` runs over ``values``, the other pool statistics
    held at ``base`` (:meth:`mixlaw.surrogates.causalmix.CausalMixFit.propose`); returns the Axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.0, 3.4))
    xs = np.asarray(values, dtype=np.float64)
    shares = np.array([list(fit.propose({**base, covariate: float(v)}).values()) for v in xs])
    ax.stackplot(xs, shares.T, labels=list(fit.options.domains), alpha=0.85)
    ax.set_xlabel(covariate)
    ax.set_ylabel("proposed share")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8, ncol=len(fit.options.domains))
    return ax
