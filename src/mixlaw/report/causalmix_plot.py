"""How the mixture a pool-aware surrogate proposes moves with each pool statistic (the "CATE interpreter" view), and
the report of ``mix optimize --law causalmix --report``: the decision, the shares-vs-statistic plots, the
leave-one-pool-out check and the candidates, self-contained."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["causalmix_report", "draw_share_curve", "plot_proposed_shares", "write_causalmix_report"]


def plot_proposed_shares(
    fit: Any, base: Mapping[str, float], covariate: str, values: Sequence[float], ax: Any = None
) -> Any:
    """The proposed share of every domain (stacked) as ``covariate`` runs over ``values``, the other pool statistics
    held at ``base`` (:meth:`mixlaw.surrogates.causalmix.CausalMixFit.propose`); returns the Axes."""
    xs = np.asarray(values, dtype=np.float64)
    shares = np.array([list(fit.propose({**base, covariate: float(v)}).values()) for v in xs])
    return draw_share_curve(xs, dict(zip(fit.options.domains, shares.T, strict=True)), covariate, ax=ax)


def draw_share_curve(
    values: Sequence[float] | np.ndarray, shares: Mapping[str, Any], covariate: str, *, at: float | None = None,
    ax: Any = None,
) -> Any:  # fmt: skip
    """Stacked proposed shares against one pool statistic (``shares``: ``{domain: [share per value]}``); a dashed
    line at the new pool's value ``at``. Returns the Axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.0, 3.4))
    xs = np.asarray(values, dtype=np.float64)
    ax.stackplot(xs, np.array([list(v) for v in shares.values()]), labels=list(shares), alpha=0.85)
    if at is not None:
        ax.axvline(at, color="black", ls="--", lw=1)
    ax.set_xlabel(covariate)
    ax.set_ylabel("proposed share")
    ax.set_ylim(0, 1)
    ax.legend(loc="upper left", fontsize=8, ncol=len(shares))
    return ax


def causalmix_report(out: Mapping[str, Any], *, source: str | None = None) -> str:
    """The page of a ``--law causalmix`` result (:func:`mixlaw.decide.mixture.pool_propose.propose_for_pool`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mixlaw.report.html import Section, esc, figure_html, render_report, table_html
    from mixlaw.report.mix_page import decision_sentence

    pool = out["pool"]
    band = (out.get("bootstrap") or {}).get("weights", {})
    wrows = [{"domain": d, "weight": v, **({"interval": f"[{band[d][0]:.4f}, {band[d][1]:.4f}]"} if band.get(d)
              else {})} for d, v in out["weights"].items()]  # fmt: skip
    stats = [{"statistic": c, "new pool": pool["statistics"][c], "fitted min": pool["fitted_range"][c][0],
              "fitted max": pool["fitted_range"][c][1]} for c in pool["covariates"]]  # fmt: skip
    figs = []
    for c, cur in out.get("shares_vs_statistic", {}).items():
        fig, ax = plt.subplots(figsize=(5.4, 3.4))
        draw_share_curve(cur["values"], cur["shares"], c, at=cur["at"], ax=ax)
        fig.tight_layout()
        figs.append(figure_html(fig, alt=f"proposed shares vs {c}"))
    cands = [{"mixture": c["name"], "objective": c["objective"], "regret": c["regret"],
              "paired interval": (f"[{c['regret_interval'][0]:+.4g}, {c['regret_interval'][1]:+.4g}]"
                                  if c.get("regret_interval") else "none"),
              "weights": ", ".join(f"{d}={w:.3f}" for d, w in c["weights"].items())}
             for c in out.get("candidates") or []]  # fmt: skip
    sections = [
        Section("Decision", f"<p><b>{esc(decision_sentence(out))}</b></p><p>{esc(out['proposer']['text'])}</p>"),
        Section("Proposed mixture", table_html(wrows) + table_html(stats)),
        Section("Proposed shares vs each pool statistic (the others held at the new pool's)", "".join(figs)),
        Section("Other mixtures at the same pool", table_html(cands)),
    ]
    if out.get("pool_holdout"):
        sections.append(Section("Leave-one-pool-out: each pool's runs predicted from the others",
                                table_html(out["pool_holdout"])))  # fmt: skip
    return render_report("Mixture decision — causalmix", sections, subtitle=source)


def write_causalmix_report(path: str | Path, out: Mapping[str, Any], *, source: str | None = None) -> Path:
    """Write :func:`causalmix_report` to ``path`` (atomically) and return it."""
    from mixlaw.safeio import atomic_write_text

    p = Path(path)
    atomic_write_text(p, causalmix_report(out, source=source))
    return p
