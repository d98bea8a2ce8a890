"""Sampling strategies as data: how many runs each fitting size gets, and which mixtures they train on.

An *allocation* is the vector of run counts ``n_s`` over the fitting sizes plus the mixtures each size uses,
subject to ``Σ_s n_s · cost_s ≤ budget`` (laws.md §12.4, after CAMEL, Li et al. 2026, arXiv:2603.08022, which
compares Rectangle, Triangle and Hourglass allocations). A strategy is a *profile* ``p(x)`` over the sizes'
positions ``x ∈ [0, 1]`` (log model size, smallest 0, largest 1) with shape parameters:

========================  =====================================================  ===========================
strategy                  profile p(x)                                           shape parameters (default)
========================  =====================================================  ===========================
``rectangle``             1                                                      —
``triangle``              1 − (1 − tip)·x  (falls with size)                     ``tip`` (0.25)
``inverted_triangle``     tip + (1 − tip)·x  (rises with size)                   ``tip`` (0.25)
``hourglass``             waist + (1 − waist)·|x − c| / max(c, 1 − c)            ``waist`` (0.25), ``center`` (0.5)
``diamond``               1 − (1 − tip)·|x − c| / max(c, 1 − c)                  ``tip`` (0.25), ``center`` (0.5)
``random``                a Dirichlet(concentration) draw over the sizes         ``concentration`` (1), ``seed`` (0)
========================  =====================================================  ===========================

The profile is drawn in *count* space (``n_s ∝ p_s``) or in *compute* space (the compute of size ``s``,
``n_s · cost_s ∝ p_s``). :func:`solve_counts` is the one budget solver: ``n_s(λ) = min(cap_s, max(floor_s,
⌊λ p'_s⌋))`` with ``p'_s = p_s`` (count) or ``p_s / cost_s`` (compute), and ``λ`` the largest scale whose cost fits
the budget (runs are added in the order ``λ`` reaches them, ties together; the first that does not fit stops the
sweep, so the counts keep the declared shape). It is deterministic, never exceeds the budget, and reports the
leftover.

Mixtures come from one space-filling master list on the simplex (:func:`mixture_pool`): anchors first (the prior
or natural mixture, then uniform), then greedy farthest-point order over seeded Dirichlet(1) candidates, every
weight at least the per-domain floor. Sizes share it as nested prefixes (``n_s`` runs train on the first ``n_s``
mixtures) or draw their own lists independently (anchors still first).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from mixlaw.design.budget import SizeSpec
from mixlaw.errors import InputError

__all__ = [
    "STRATEGIES",
    "Allocation",
    "AllocationOptions",
    "Strategy",
    "allocate",
    "mixture_parameters",
    "mixture_pool",
    "parse_strategies",
    "solve_counts",
]

Space = Literal["count", "compute"]
Sharing = Literal["nested", "independent"]

#: strategy -> its shape parameters and their defaults
STRATEGIES: dict[str, dict[str, float]] = {
    "rectangle": {},
    "triangle": {"tip": 0.25},
    "inverted_triangle": {"tip": 0.25},
    "hourglass": {"waist": 0.25, "center": 0.5},
    "diamond": {"tip": 0.25, "center": 0.5},
    "random": {"concentration": 1.0, "seed": 0.0},
}


@dataclass(frozen=True)
class Strategy:
    """A named allocation profile with its shape parameters, in count or compute space."""

    name: str
    shape: Mapping[str, float] = field(default_factory=dict)
    space: Space = "count"

    def __post_init__(self) -> None:
        if self.name not in STRATEGIES:
            raise InputError(f"--strategy: unknown strategy '{self.name}'; known: {', '.join(STRATEGIES)}")
        if self.space not in ("count", "compute"):
            raise InputError(f"--strategy {self.name}: space must be 'count' or 'compute', got {self.space!r}")
        unknown = [k for k in self.shape if k not in STRATEGIES[self.name]]
        if unknown:
            known = ", ".join(STRATEGIES[self.name]) or "none"
            raise InputError(f"--strategy {self.name}: no shape parameter '{unknown[0]}' (its parameters: {known})")
        p = self.params
        for key in ("tip", "waist"):
            if key in p and not 0 < p[key] <= 1:
                raise InputError(f"--strategy {self.name}: expected 0 < {key} <= 1, got {p[key]:g}")
        if "center" in p and not 0 <= p["center"] <= 1:
            raise InputError(f"--strategy {self.name}: expected 0 <= center <= 1, got {p['center']:g}")
        if "concentration" in p and not p["concentration"] > 0:
            raise InputError(f"--strategy {self.name}: expected concentration > 0, got {p['concentration']:g}")

    @property
    def params(self) -> dict[str, float]:
        """The shape parameters with their defaults filled in."""
        return {**STRATEGIES[self.name], **{k: float(v) for k, v in self.shape.items()}}

    @property
    def label(self) -> str:
        extra = [f"{k}={v:g}" for k, v in self.shape.items()] + (
            [f"space={self.space}"] if self.space != "count" else []
        )
        return self.name + (":" + ",".join(extra) if extra else "")

    def profile(self, positions: Sequence[float] | np.ndarray) -> np.ndarray:
        """``p(x)`` at the sizes' positions (``x`` in [0, 1]); positive, largest entry 1."""
        x = np.clip(np.asarray(positions, dtype=np.float64), 0.0, 1.0)
        p = self.params
        if self.name == "rectangle":
            out = np.ones_like(x)
        elif self.name == "triangle":
            out = 1.0 - (1.0 - p["tip"]) * x
        elif self.name == "inverted_triangle":
            out = p["tip"] + (1.0 - p["tip"]) * x
        elif self.name in ("hourglass", "diamond"):
            c = p["center"]
            dist = np.abs(x - c) / max(c, 1.0 - c, 1e-12)
            out = p["waist"] + (1 - p["waist"]) * dist if self.name == "hourglass" else 1 - (1 - p["tip"]) * dist
        else:  # random
            rng = np.random.default_rng(int(p["seed"]))
            out = rng.dirichlet(np.full(len(x), p["concentration"]))
            out = np.maximum(out, 1e-3 * out.max())
        return out / out.max()

    @classmethod
    def parse(cls, text: str) -> Strategy:
        """``"hourglass"``, ``"hourglass:waist=0.2"``, ``"triangle:tip=0.1,space=compute"``."""
        name, _, rest = str(text).strip().partition(":")
        shape: dict[str, float] = {}
        space = "count"
        for kv in filter(None, (t.strip() for t in rest.split(","))):
            k, eq, v = kv.partition("=")
            if not eq:
                raise InputError(f"--strategy {text}: expected name:key=value,..., got {kv!r}")
            if k.strip() == "space":
                space = v.strip()
                continue
            try:
                shape[k.strip()] = float(v)
            except ValueError:
                raise InputError(f"--strategy {text}: expected a number for {k.strip()}, got {v!r}") from None
        return cls(name.strip().replace("-", "_"), shape, space)  # type: ignore[arg-type]


def parse_strategies(text: str | Sequence[str]) -> list[Strategy]:
    """Strategies separated by ``;`` or by ``,`` between names (``"rectangle,triangle"``)."""
    if not isinstance(text, str):
        return [Strategy.parse(t) for t in text]
    parts: list[str] = []
    for chunk in text.split(";"):
        for tok in chunk.split(","):
            tok = tok.strip()
            if not tok:
                continue
            if "=" in tok and ":" not in tok and parts:  # "center=0.3" continues the strategy before it
                parts[-1] += "," + tok
            else:
                parts.append(tok)
    if not parts:
        raise InputError("--compare: expected one or more strategies")
    return [Strategy.parse(p) for p in parts]


def positions(sizes: Sequence[SizeSpec]) -> np.ndarray:
    """Each size's position in [0, 1] by log parameters (one size: 0)."""
    ln = np.log([s.n_params for s in sizes])
    span = float(ln.max() - ln.min())
    return (ln - ln.min()) / span if span > 0 else np.zeros(len(sizes))


def solve_counts(
    profile: Sequence[float] | np.ndarray,
    costs: Sequence[float] | np.ndarray,
    budget: float,
    *,
    floors: int | Sequence[int] = 1,
    caps: int | Sequence[int | None] | None = None,
    space: Space = "count",
) -> tuple[np.ndarray, float]:
    """Run counts following ``profile`` within ``budget``; returns ``(counts, leftover)``.

    ``n_s(λ) = min(cap_s, max(floor_s, ⌊λ p'_s⌋))`` with ``λ`` raised until the next run (or the next tie of runs)
    would exceed the budget. Never exceeds the budget; deterministic (no randomness, ties taken together).

    Raises
    ------
    InputError
        The floors alone cost more than the budget, or a floor exceeds its cap.
    """
    p = np.asarray(profile, dtype=np.float64)
    c = np.asarray(costs, dtype=np.float64)
    S = len(p)
    if c.shape != (S,) or S == 0 or not (np.all(c > 0) and np.all(np.isfinite(c))):
        raise InputError("expected one positive cost per size")
    if not (np.all(p >= 0) and np.isfinite(p).all() and p.max() > 0):
        raise InputError("expected a non-negative profile with a positive entry")
    f = np.broadcast_to(np.asarray(floors, dtype=np.int64), (S,)).copy()
    cap_list = [caps] * S if caps is None or isinstance(caps, int) else list(caps)
    if len(cap_list) != S:
        raise InputError(f"expected {S} caps (one per size), got {len(cap_list)}")
    u = np.array([np.iinfo(np.int64).max if v is None else int(v) for v in cap_list], dtype=np.int64)
    if np.any(f < 0) or np.any(f > u):
        raise InputError(f"expected 0 <= floor <= cap runs per size, got floors {f.tolist()} and caps {cap_list}")
    pp = p if space == "count" else p / c
    pp = pp / pp.max()
    spent = math.fsum(f * c)
    if spent > budget * (1 + 1e-12):
        raise InputError(f"--budget: the floor of {f.tolist()} runs per size costs {spent:.3g}, more than {budget:.3g}")
    # every event below λ0 fits (cost(λ) <= Σ f c + λ Σ p' c), so the sweep may start there
    lam0 = max(0.0, (budget - spent) / math.fsum(pp * c)) * (1 - 1e-9)
    n = np.minimum(u, np.maximum(f, np.floor(np.minimum(lam0 * pp, 2.0**62)).astype(np.int64)))  # no int64 wrap
    spent = math.fsum(n * c)
    while True:
        live = (pp > 0) & (n < u)
        if not live.any():
            break
        nxt = np.where(live, (n + 1) / np.where(pp > 0, pp, 1.0), np.inf)  # λ at which each size gains a run
        lam = nxt.min()
        group = np.flatnonzero(nxt <= lam * (1 + 1e-12))
        extra = math.fsum(c[group])
        if spent + extra > budget * (1 + 1e-12):
            break
        n[group] += 1
        spent += extra
    return n, float(max(budget - spent, 0.0))


def _floor_box(w: np.ndarray, floor: float) -> np.ndarray:
    """Map simplex points into ``{w : w_i >= floor}`` (``floor + (1 − d·floor)·w``)."""
    return floor + (1.0 - w.shape[-1] * floor) * w


def mixture_pool(
    domains: Sequence[str],
    n: int,
    *,
    prior: Mapping[str, float] | None = None,
    floor: float = 0.0,
    seed: int = 0,
    n_candidates: int | None = None,
) -> np.ndarray:
    """``(n, d)`` space-filling mixtures: the prior (if given), uniform, then farthest-point order.

    Every weight is at least ``floor``; a prior below the floor is moved into the floor box. Candidates are
    seeded Dirichlet(1) draws (4,096 to 20,000, at least ``2n``); each next mixture is the candidate farthest from
    every mixture chosen so far.
    """
    d = len(domains)
    if d < 2:
        raise InputError(f"--domains: expected at least two domains, got {list(domains)}")
    if not 0 <= floor < 1.0 / d:
        raise InputError(f"--mixture-floor: expected 0 <= floor < 1/{d} = {1 / d:.4g}, got {floor:g}")
    anchors: list[np.ndarray] = []
    if prior is not None:
        unknown = [k for k in prior if k not in domains]
        if unknown:
            raise InputError(f"--prior: '{unknown[0]}' is not one of --domains {','.join(domains)}")
        w = np.array([float(prior.get(k, 0.0)) for k in domains])
        if np.any(w < 0) or not math.isclose(w.sum(), 1.0, abs_tol=1e-6):
            raise InputError(f"--prior: expected non-negative weights summing to 1, got {dict(prior)}")
        anchors.append(w / w.sum() if w.min() >= floor else _floor_box(w / w.sum(), floor))
    uni = np.full(d, 1.0 / d)
    if not anchors or np.abs(anchors[0] - uni).max() > 1e-9:
        anchors.append(uni)
    if n <= len(anchors):
        return np.array(anchors[: max(n, 0)]).reshape(max(n, 0), d)
    rng = np.random.default_rng(seed)
    m = n_candidates or max(min(max(4096, 4 * n), 20000), 2 * n)
    cand = _floor_box(rng.dirichlet(np.ones(d), size=m), floor)  # (m, d)
    chosen = list(anchors)
    dmin = np.min(((cand[:, None, :] - np.array(chosen)[None]) ** 2).sum(-1), axis=1)  # (m,) squared distance
    while len(chosen) < n:
        j = int(np.argmax(dmin))
        chosen.append(cand[j])
        dmin = np.minimum(dmin, ((cand - cand[j]) ** 2).sum(-1))
    return np.array(chosen)


def mixture_parameters(law: str = "camel", n_domains: int = 5, k: int = 2) -> int:
    """Free parameters of a law that depend on the mixture (the warning threshold is twice this).

    CAMEL: per component ``K_i``, ``alpha_i`` and the loading ``t_i`` (``n − 1`` free on the simplex), so
    ``k(n + 1)``; the capacity exponents ``beta_i`` and ``C`` are identified by size, not by mixture. Other laws:
    every internal parameter of the registered law.
    """
    if law == "camel":
        return k * (n_domains + 1)
    from mixlaw.laws import get_law

    return int(get_law(law, domains=tuple(f"d{i}" for i in range(n_domains))).n_internal)


@dataclass(frozen=True)
class Allocation:
    """Run counts per size, the mixtures each size trains on, and the budget account."""

    strategy: Strategy
    sizes: tuple[SizeSpec, ...]
    counts: tuple[int, ...]
    domains: tuple[str, ...]
    mixtures: tuple[np.ndarray, ...]  # per size: (n_s, d)
    mixture_ids: tuple[tuple[int, ...], ...]  # per size: index of each run's mixture in `pool`
    pool: np.ndarray  # (m, d): every distinct mixture used, in master order
    budget: float
    leftover: float
    notes: tuple[str, ...] = ()

    @property
    def spent(self) -> float:
        return math.fsum(n * s.cost for n, s in zip(self.counts, self.sizes, strict=True))

    @property
    def n_runs(self) -> int:
        return int(sum(self.counts))

    @property
    def distinct_mixtures(self) -> int:
        return len({i for ids in self.mixture_ids for i in ids})

    def rows(self) -> list[dict[str, Any]]:
        """One row per size: label, probe size, parameters, tokens, runs, compute and its share, mixtures."""
        spent = self.spent or 1.0
        return [
            {
                "size": s.label,
                "probe_size": s.probe_size,
                "n_params": s.n_params,
                "tokens": s.tokens,
                "runs": n,
                "compute": n * s.cost,
                "compute_share": n * s.cost / spent,
                "distinct_mixtures": len(set(ids)),
            }
            for s, n, ids in zip(self.sizes, self.counts, self.mixture_ids, strict=True)
        ]

    def runs(self) -> list[dict[str, Any]]:
        """One dict per run: size label, ``n_params``, ``tokens``, mixture id, replicate index, ``w_<domain>``."""
        out = []
        for s, ids, W in zip(self.sizes, self.mixture_ids, self.mixtures, strict=True):
            seen: dict[int, int] = {}
            for i, w in zip(ids, W, strict=True):
                rep = seen.get(i, 0)
                seen[i] = rep + 1
                out.append(
                    {
                        "size": s.label,
                        "n_params": s.n_params,
                        "tokens": s.tokens,
                        "mixture": i,
                        "replicate": rep,
                        **{f"w_{d}": float(x) for d, x in zip(self.domains, w, strict=True)},
                    }
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy.label,
            "space": self.strategy.space,
            "budget": self.budget,
            "spent": self.spent,
            "leftover": self.leftover,
            "runs": self.n_runs,
            "distinct_mixtures": self.distinct_mixtures,
            "sizes": self.rows(),
            "mixtures": {
                f"m{i:03d}": dict(zip(self.domains, map(float, w), strict=True)) for i, w in enumerate(self.pool)
            },
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class AllocationOptions:
    """How an allocation is built (frozen, validated once; ``mixlaw plan``'s ``--floor-runs``, ``--cap-runs``,
    ``--prior``, ``--mixture-floor``, ``--mixtures``, ``--max-mixtures``, ``--seed``, ``--k``).

    Parameters
    ----------
    floors, caps
        Least and most runs per size (one value for every size, or one per size).
    prior, mixture_floor
        Centre of the mixture pool (``None``: uniform) and the smallest share of a domain in it.
    sharing
        ``"nested"`` (every size draws its mixtures from the front of one master list) or ``"independent"``.
    max_mixtures
        Cap on the distinct mixtures; runs beyond it repeat the list (replicates that measure seed noise).
    seed
        Seed of the mixture pool.
    law, k
        The mixture law the design is for (its mixture-dependent parameters set the identifiability note).
    """

    floors: int | tuple[int, ...] = 1
    caps: int | tuple[int | None, ...] | None = None
    prior: Mapping[str, float] | None = None
    mixture_floor: float = 0.0
    sharing: Sharing = "nested"
    max_mixtures: int | None = None
    seed: int = 0
    law: str = "camel"
    k: int = 2

    def __post_init__(self) -> None:
        if self.sharing not in ("nested", "independent"):
            raise InputError(f"--mixtures: expected 'nested' or 'independent', got {self.sharing!r}")
        if self.max_mixtures is not None and self.max_mixtures < 1:
            raise InputError(f"--max-mixtures: expected at least 1, got {self.max_mixtures}")
        for name in ("floors", "caps"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, int):
                object.__setattr__(self, name, tuple(v))


def allocate(
    strategy: Strategy | str,
    sizes: Sequence[SizeSpec],
    budget: float,
    domains: Sequence[str],
    options: AllocationOptions | None = None,
    *,
    master: np.ndarray | None = None,
) -> Allocation:
    """The allocation of ``strategy`` over ``sizes`` within ``budget``, with its mixtures and notes (``options``:
    :class:`AllocationOptions`).

    ``max_mixtures`` caps the distinct mixtures: runs beyond it repeat the list (replicates of a mixture, which
    measure seed noise). Notes warn when the design has fewer distinct mixtures than twice the law's
    mixture-dependent parameters (:func:`mixture_parameters`), or fewer than 3 runs at the largest size.
    ``master`` gives the master list instead of :func:`mixture_pool` (the simulator shares one across strategies).
    """
    o = options or AllocationOptions()
    floors, caps, prior, mixture_floor, sharing = o.floors, o.caps, o.prior, o.mixture_floor, o.sharing
    max_mixtures, seed, law, k = o.max_mixtures, o.seed, o.law, o.k
    strat = Strategy.parse(strategy) if isinstance(strategy, str) else strategy
    sizes = sorted(sizes, key=lambda s: s.n_params)
    doms = tuple(domains)
    counts, leftover = solve_counts(
        strat.profile(positions(sizes)), [s.cost for s in sizes], budget, floors=floors, caps=caps, space=strat.space
    )
    top = int(counts.max()) if len(counts) else 0
    m = top if max_mixtures is None else min(top, max_mixtures)
    if master is None:
        master = mixture_pool(doms, m, prior=prior, floor=mixture_floor, seed=seed)
    elif len(master) < m:
        raise InputError(f"expected a master list of at least {m} mixtures, got {len(master)}")
    pool_rows: list[np.ndarray] = [master[i] for i in range(len(master))]
    mixtures, ids = [], []
    for j, n in enumerate(counts):
        take = int(n) if max_mixtures is None else min(int(n), max_mixtures)
        if sharing == "nested" or take == 0:
            local = list(range(take))
        else:
            own = mixture_pool(doms, take, prior=prior, floor=mixture_floor, seed=seed + 1 + j)
            local = []
            for w in own:
                hit = next((i for i, v in enumerate(pool_rows) if np.abs(v - w).max() < 1e-12), None)
                if hit is None:
                    pool_rows.append(w)
                    hit = len(pool_rows) - 1
                local.append(hit)
        run_ids = [local[r % len(local)] for r in range(int(n))] if local else []
        ids.append(tuple(run_ids))
        mixtures.append(np.array([pool_rows[i] for i in run_ids]).reshape(int(n), len(doms)))
    used = sorted({i for r in ids for i in r})
    remap = {old: new for new, old in enumerate(used)}
    pool = np.array([pool_rows[i] for i in used]).reshape(len(used), len(doms))
    ids = [tuple(remap[i] for i in r) for r in ids]
    notes: list[str] = []
    need = 2 * mixture_parameters(law, len(doms), k)
    distinct = len(used)
    if distinct < need:
        notes.append(
            f"{distinct} distinct mixtures, fewer than 2x the {need // 2} mixture-dependent parameters of "
            f"{law}{f' (k={k})' if law == 'camel' else ''}: the mixture terms are poorly identified"
        )
    if len(counts) and counts[-1] < 3:
        notes.append(f"{int(counts[-1])} run(s) at the largest size {sizes[-1].label}, fewer than 3")
    if leftover > 0.1 * budget:
        notes.append(f"{leftover / budget:.0%} of the budget is left: the next run(s) of this shape do not fit")
    return Allocation(
        strat,
        tuple(sizes),
        tuple(int(v) for v in counts),
        doms,
        tuple(mixtures),
        tuple(ids),
        pool,
        float(budget),
        leftover,
        tuple(notes),
    )
