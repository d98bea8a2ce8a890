"""The released Data Mixing Laws pipeline's mixing law: implicit-aggregation MLPs, boosted (laws.md §7.3).

Ye et al., "Data Mixing Laws", arXiv:2403.16952; repository yegcjs/mixinglaws, ``pipeline/mixlaw.py`` and the
``MixtureMLP`` / ``MLPEstimator`` of ``pipeline/utils.py`` (commit c58d349). The paper's closed-form laws are
:mod:`mixlaw.laws.dml` and :mod:`mixlaw.laws.dml_implicit`; **this is not a closed-form fit** but the estimator the
released pipeline actually runs for its 1B predictions:

- **network** ``ŷ(r) = softmax(v) · exp(W r + c) + bias`` with ``K`` hidden units (the implicit law of §7.1,
  :func:`mixlaw.laws.dml_implicit.from_network` maps a trained network onto that law's parameters); initialised as
  ``torch.nn.Linear`` does (uniform in ``±1/sqrt(fan_in)``), from the seed's own generator;
- **training** AdamW (lr 0.1, weight decay 1e-3 on every parameter) for ``steps`` full-batch steps of the Huber loss
  (δ = 0.03) on raw losses over the first ``1 − select_fraction`` of the rows it is given;
- **checkpoint selection**: after every step the parameters with the lowest selection MAE are kept;
- **boosting**: AdaBoost.R2 with ``estimators`` rounds (scikit-learn's ``AdaBoostRegressor``, linear loss,
  :mod:`mixlaw.surrogates.adaboost`); each round's network trains on a weighted bootstrap sample of the training
  rows, so its "last 20 %" are a random fifth of that sample;
- **seeds**: ``seeds`` ensembles (AdaBoost seeds ``seed, seed + 1, …``; the release: 42…57) and the one with the
  lowest MAE on the training rows is kept. Test rows never enter any choice.

Presets (``protocol``): ``"released"`` = K 30, 16 seeds, 30 estimators, 5000 steps (about a minute for 20 rows
here: the seeds train as one batched network); ``"fast"`` (default) = K 30, 4 seeds, no boosting (1 estimator),
2000 steps (about a second). Explicit ``seeds`` / ``estimators`` / ``steps`` override the preset. Every fit says
which ran (:meth:`DmlMlp.describe`, ``info["protocol"]``).

Where the release is ambiguous or differs from its description (written down, not guessed silently):

1. *Selection rows.* The release trains on the first 80 % of the rows and keeps the step with the lowest MAE over
   **all** rows it was given (the trained 80 % and the held-out 20 %): ``select="all"`` (default). ``"held"``
   selects on the held-out fifth only.
2. *The selection is a no-op in the release*: it stores ``state_dict()``, whose tensors share storage with the live
   parameters, so the loaded "best" state is the last step's. ``select="last"`` reproduces that behaviour.
3. *Reduction.* laws.md §7.3 gives sum-reduced Huber for the L-BFGS law fits; the MLP calls ``huber_loss`` with its
   default mean reduction. ``reduction="mean"`` (default) or ``"sum"``; under Adam the two differ only through the
   ε of the update.
4. *Seeds.* The release forks 16 workers after seeding torch once, so every worker draws the same initial network
   and only the AdaBoost seed differs; here seed ``s`` also seeds its networks' initialisation (generator
   ``[s, round]``), so the seeds differ in both. Float64, CPU; deterministic given ``seed``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mixlaw.errors import InputError, NotFittedError
from mixlaw.surrogates._options import float_option, int_option

__all__ = ["PROTOCOLS", "DmlMlp", "DmlMlpFit"]

#: Preset values of (seeds, estimators, steps) per protocol.
PROTOCOLS: dict[str, dict[str, int]] = {
    "fast": {"seeds": 4, "estimators": 1, "steps": 2000},
    "released": {"seeds": 16, "estimators": 30, "steps": 5000},
}
SELECT = ("all", "held", "last")


@dataclass
class _Net:
    """One trained network (numpy float64): ``softmax(v) · exp(W r + c) + bias``."""

    W: np.ndarray
    c: np.ndarray
    v: np.ndarray
    bias: float

    def __call__(self, X: np.ndarray) -> np.ndarray:
        z = self.v - self.v.max()
        s = np.exp(z) / np.exp(z).sum()
        return np.asarray(np.exp(X @ self.W.T + self.c) @ s + self.bias, dtype=np.float64)


@dataclass
class DmlMlp:
    """The released pipeline's boosted implicit-aggregation MLP as a mixture surrogate (module docstring).

    Parameters
    ----------
    domains
        Training domains; the inputs are the columns ``w_<domain>``.
    protocol
        ``"fast"`` (default: 4 seeds, 1 estimator, 2000 steps) or ``"released"`` (16 seeds, 30 estimators, 5000
        steps); ``seeds``, ``estimators``, ``steps`` override it.
    k
        Hidden units = implicit validation domains (30, the release's).
    lr, weight_decay, delta, reduction
        AdamW learning rate (0.1) and weight decay (1e-3); Huber δ (0.03) and its reduction (``mean``).
    select, select_fraction
        Checkpoint selection (``all`` / ``held`` / ``last``) and the share of rows held out of the gradient (0.2).
    seed
        First AdaBoost / initialisation seed (42, the release's).
    """

    domains: Sequence[str]
    protocol: str = "fast"
    seeds: int | None = None
    estimators: int | None = None
    steps: int | None = None
    k: int = 30
    lr: float = 0.1
    weight_decay: float = 1e-3
    delta: float = 0.03
    reduction: str = "mean"
    select: str = "all"
    select_fraction: float = 0.2
    seed: int = 42

    name = "dml_mlp"
    backend = "mlp"  # not "gp": mix compare's intervals are cross-conformal (mixlaw.surrogates.intervals)

    def __post_init__(self) -> None:
        doms = [d.strip() for d in (self.domains.split(",") if isinstance(self.domains, str) else self.domains)]
        if len(doms) < 2 or len(set(doms)) != len(doms) or not all(doms):
            raise InputError(f"dml_mlp: expected at least two distinct domains, got {self.domains!r}")
        self.domains = tuple(doms)
        if self.protocol not in PROTOCOLS:
            raise InputError(
                f"dml_mlp option 'protocol': expected one of {', '.join(PROTOCOLS)}, got {self.protocol!r}"
            )
        preset = PROTOCOLS[self.protocol]
        owner = "dml_mlp"
        self.seeds = int_option(owner, "seeds", preset["seeds"] if self.seeds is None else self.seeds, 1)
        est = preset["estimators"] if self.estimators is None else self.estimators
        self.estimators = int_option(owner, "estimators", est, 1)
        self.steps = int_option(owner, "steps", preset["steps"] if self.steps is None else self.steps, 1)
        self.k = int_option(owner, "k", self.k, 1)
        self.lr = float_option(owner, "lr", self.lr, 1e-12, np.inf, closed_lo=True)
        self.weight_decay = float_option(owner, "weight_decay", self.weight_decay, 0.0, np.inf, closed_lo=True)
        self.delta = float_option(owner, "delta", self.delta, 1e-12, np.inf, closed_lo=True)
        self.select_fraction = float_option(owner, "select_fraction", self.select_fraction, 0.0, 1.0, closed_lo=True)
        self.seed = int_option(owner, "seed", self.seed, 0)
        if self.reduction not in ("mean", "sum"):
            raise InputError(f"dml_mlp option 'reduction': expected mean or sum, got {self.reduction!r}")
        if self.select not in SELECT:
            raise InputError(f"dml_mlp option 'select': expected one of {', '.join(SELECT)}, got {self.select!r}")

    @classmethod
    def from_options(cls, domains: Sequence[str], options: Mapping[str, Any]) -> DmlMlp:
        """Build from ``--models dml_mlp:protocol=released;k=10`` style options (one-line error on an unknown one)."""
        known = [f for f in cls.__dataclass_fields__ if f != "domains"]
        bad = [k for k in options if k not in known]
        if bad:
            raise InputError(f"dml_mlp has no option {bad[0]!r}; its options: {', '.join(known)}")
        return cls(domains, **dict(options))

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(f"w_{d}" for d in self.domains)

    def describe(self) -> str:
        """One line naming what runs: the protocol and its actual settings."""
        boost = f"AdaBoost.R2 x{self.estimators}" if self.estimators and self.estimators > 1 else "no boosting"
        return (
            f"dml_mlp ({self.protocol} protocol): implicit MLP K={self.k}, {boost}, best of {self.seeds} seeds, "
            f"AdamW lr {self.lr:g} wd {self.weight_decay:g}, {self.steps} steps, Huber {self.delta:g} "
            f"({self.reduction}), select {self.select}"
        )

    def _x(self, table: Any, what: str) -> np.ndarray:
        for c in self.inputs:
            if c not in table.columns:
                raise InputError(f"dml_mlp: the {what} table has no column '{c}'")
        X = np.column_stack([np.asarray(table[c], dtype=np.float64) for c in self.inputs])
        if not np.isfinite(X).all():
            raise InputError(f"dml_mlp: the {what} table row {int(np.flatnonzero(~np.isfinite(X).all(1))[0]) + 1}:"
                             " non-finite w_<domain>")  # fmt: skip
        return X

    def fit(self, table: Any, target: str = "loss") -> DmlMlpFit:
        """Fit on the rows of ``table`` (``w_<domain>`` columns and ``target``); no other rows are seen."""
        from mixlaw.surrogates.adaboost import adaboost_r2

        X = self._x(table, "training")
        if target not in table.columns:
            raise InputError(f"dml_mlp: the training table has no column '{target}'")
        y = np.asarray(table[target], dtype=np.float64)
        if not np.isfinite(y).all():
            raise InputError(f"dml_mlp: the training table row {int(np.flatnonzero(~np.isfinite(y))[0]) + 1}: "
                             f"non-finite {target}")  # fmt: skip
        if len(y) < 3:
            raise InputError(f"dml_mlp: expected at least 3 training rows, got {len(y)}")
        t0 = time.process_time()
        seeds = [self.seed + i for i in range(int(self.seeds or 1))]
        rounds = [0]

        def fit_round(active: Sequence[int], xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> list[_Net]:
            rounds[0] += 1
            return self._train(np.stack(xs), np.stack(ys), [[seeds[b], rounds[0]] for b in active])

        if int(self.estimators or 1) > 1:
            ensembles = adaboost_r2(X, y, seeds, int(self.estimators or 1), fit_round)
            members = [(list(e.estimators), list(e.weights), e.stopped) for e in ensembles]
        else:  # no boosting: each seed trains on its own permutation of the rows (its own held-out fifth)
            perms = [np.random.default_rng(s).permutation(len(y)) for s in seeds]
            nets = self._train(np.stack([X[p] for p in perms]), np.stack([y[p] for p in perms]),
                               [[s, 0] for s in seeds])  # fmt: skip
            members = [([n], [1.0], "") for n in nets]
        with np.errstate(over="ignore", invalid="ignore"):
            maes = [float(np.mean(np.abs(_ensemble_predict(m[0], m[1], X) - y))) for m in members]
        best = int(np.argmin([v if np.isfinite(v) else np.inf for v in maes]))  # a diverged seed never wins
        info = {
            "protocol": self.protocol,
            "estimator": self.describe(),
            "seeds": seeds,
            "train_mae": maes,
            "chosen_seed": seeds[best],
            "n_estimators": len(members[best][0]),
            "stopped": members[best][2],
            "cpu_s": time.process_time() - t0,
        }
        return DmlMlpFit(self, target, nets=members[best][0], weights=members[best][1], info=info)

    def _train(self, X: np.ndarray, y: np.ndarray, gen_seeds: Sequence[Sequence[int]]) -> list[_Net]:
        """Train ``B`` networks at once, network ``b`` on ``(X[b], y[b])`` (``X`` of shape ``(B, m, n)``).

        Plain numpy, float64: the gradient of the Huber loss in closed form and ``torch.optim.AdamW``'s update
        (β = (0.9, 0.999), ε = 1e-8, decoupled weight decay) written out; AdamW is elementwise, so one update of the
        stacked parameters is ``B`` independent optimisers (``tests/test_dml_mlp.py`` checks both against torch's
        autograd and AdamW). One forward pass per step serves the selection (the parameters after the previous
        step, as the release measures them) and the gradient."""
        B, m, n = X.shape
        K = int(self.k)
        n_fit = max(1, m - int(m * self.select_fraction))  # the release trains on X[:-(m // 5)]
        sel = slice(n_fit, m) if self.select == "held" and n_fit < m else slice(0, m)
        theta = np.stack([_init(n, K, s) for s in gen_seeds])  # (B, P): W (K n), c (K), v (K), bias (1)
        best, best_mae = theta.copy(), np.full(B, np.inf)
        steps = int(self.steps or 1)
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging network gives inf/NaN: never selected
            self._loop(X, y, theta, best, best_mae, n_fit, sel, steps)
        final = theta if self.select == "last" else best
        out = []
        for i in range(B):
            th = final[i]
            out.append(_Net(th[: K * n].reshape(K, n).copy(), th[K * n : K * n + K].copy(),
                            th[K * n + K : K * n + 2 * K].copy(), float(th[-1])))  # fmt: skip
        return out

    def _loop(
        self,
        X: np.ndarray,
        y: np.ndarray,
        theta: np.ndarray,
        best: np.ndarray,
        best_mae: np.ndarray,
        n_fit: int,
        sel: slice,
        steps: int,
    ) -> None:
        """The training steps of :meth:`_train`, updating ``theta``, ``best`` and ``best_mae`` in place."""  # fmt: skip
        B, m, n = X.shape
        K = int(self.k)
        m1, m2 = np.zeros_like(theta), np.zeros_like(theta)
        b1, b2, eps, lr, wd, delta = 0.9, 0.999, 1e-8, self.lr, self.weight_decay, self.delta
        scale = 1.0 / n_fit if self.reduction == "mean" else 1.0
        Xf, yf = X[:, :n_fit], y[:, :n_fit]
        for t in range(steps + 1):
            W = theta[:, : K * n].reshape(B, K, n)
            c, v, bias = theta[:, K * n : K * n + K], theta[:, K * n + K : K * n + 2 * K], theta[:, -1:]
            s = np.exp(v - v.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            h = np.exp(np.matmul(X, W.transpose(0, 2, 1)) + c[:, None, :])  # (B, m, K)
            pred = np.matmul(h, s[:, :, None])[:, :, 0] + bias
            if t >= 1 and self.select != "last":  # the parameters after step t
                mae = np.abs(pred[:, sel] - y[:, sel]).mean(axis=1)
                better = mae < best_mae
                if better.any():
                    best_mae[better] = mae[better]
                    best[better] = theta[better]
            if t == steps:
                break
            g = np.clip(pred[:, :n_fit] - yf, -delta, delta) * scale  # dHuber/dŷ, (B, n_fit)
            hf = h[:, :n_fit]
            gs = np.einsum("bm,bmk->bk", g, hf)  # d/ds
            dz = g[:, :, None] * hf * s[:, None, :]  # d/d(W r + c), (B, n_fit, K)
            grad = np.concatenate(
                [
                    np.matmul(dz.transpose(0, 2, 1), Xf).reshape(B, K * n),
                    dz.sum(axis=1),
                    s * (gs - (s * gs).sum(axis=1, keepdims=True)),
                    g.sum(axis=1, keepdims=True),
                ],
                axis=1,
            )
            theta *= 1.0 - lr * wd
            m1 += (1.0 - b1) * (grad - m1)
            m2 *= b2
            m2 += (1.0 - b2) * grad * grad
            k = t + 1
            theta -= (lr / (1.0 - b1**k)) * m1 / (np.sqrt(m2) / np.sqrt(1.0 - b2**k) + eps)


def _init(n: int, K: int, seed: Sequence[int]) -> np.ndarray:
    """``torch.nn.Linear``'s default initialisation (uniform in ±1/sqrt(fan_in)), flattened; seeded generator."""
    rng = np.random.default_rng([int(v) for v in seed])
    a, b = 1.0 / np.sqrt(n), 1.0 / np.sqrt(K)
    return np.concatenate(
        [rng.uniform(-a, a, K * n), rng.uniform(-a, a, K), rng.uniform(-b, b, K), rng.uniform(-b, b, 1)]
    )


def _ensemble_predict(nets: Sequence[_Net], weights: Sequence[float], X: np.ndarray) -> np.ndarray:
    from mixlaw.surrogates.adaboost import weighted_median

    if len(nets) == 1:
        return nets[0](X)
    return weighted_median(np.column_stack([net(X) for net in nets]), np.asarray(weights, dtype=np.float64))


@dataclass
class DmlMlpFit:
    """A fitted :class:`DmlMlp`: :meth:`predict` on new mixtures; ``info`` says which protocol ran."""

    spec: DmlMlp
    target: str
    nets: list[_Net] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def law_name(self) -> str:
        return "dml_mlp"

    def predict(self, table: Any) -> np.ndarray:
        """Predicted ``target`` for each row of ``table`` (its ``w_<domain>`` columns)."""
        if not self.nets:
            raise NotFittedError("dml_mlp: predict() before fit()")
        return _ensemble_predict(self.nets, self.weights, self.spec._x(table, "prediction"))

    def as_law_params(self) -> dict[str, Any] | None:
        """A single network as the parameters of ``dml_implicit`` (same predictions); ``None`` for an ensemble."""
        from mixlaw.laws.dml_implicit import from_network

        if len(self.nets) != 1:
            return None
        n = self.nets[0]
        return from_network(n.v, n.W, n.c, n.bias, self.spec.domains)
