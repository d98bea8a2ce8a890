"""RegMix: the data mixture as a regression problem (laws.md §8).

Liu, Zheng, Muennighoff, Zeng, Dou, Pang, Jiang and Lin, "RegMix: Data Mixture as Regression for Language Model
Pre-training", arXiv:2407.01492 (ICLR 2025). A nonparametric surrogate maps the mixture weights (columns
``w_<domain>``) of small proxy runs to one validation loss; it is fitted on the proxy runs and predicts unseen
mixtures. It has no size or token term: fit one per model size.

Backends:

- ``lightgbm`` (the paper's): gradient-boosted trees (gbdt, regression objective, learning rate 1e-2, at most 1000
  rounds, seed 42, early stopping after 3 rounds without improvement of the L1 metric — the paper's notebook
  settings). Optional extra ``mixlaw[lightgbm]``.
- ``gp``: a Gaussian process from scikit-learn (constant × anisotropic RBF + white noise, normalised targets, the
  kernel's hyper-parameters by marginal likelihood). Optional extra ``mixlaw[sklearn]``. It also gives a predictive
  standard deviation (:meth:`RegMixFit.predict_std`).
- ``linear``: ordinary least squares on the weights (the paper's linear baseline), numpy only.

Early stopping (``lightgbm``). The paper's notebook stops on the *test* mixtures, which leaks the test set into the
model choice (laws.md §8.1). Here ``early_stopping="train_split"`` (the default) stops on a seeded ``valid_fraction``
of the *training* runs, then refits on all training runs for the chosen number of rounds; ``"none"`` runs every
round; ``"eval"`` reproduces the published protocol and requires the evaluation table to be passed explicitly
(``fit(..., eval_table=...)``) — use it only to reproduce the paper.
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mixlaw.errors import InputError, NotFittedError
from mixlaw.surrogates._options import float_option, int_option

__all__ = ["BACKENDS", "EARLY_STOPPING", "RegMix", "RegMixFit", "optional_module"]

BACKENDS = ("lightgbm", "gp", "linear")
EARLY_STOPPING = ("train_split", "none", "eval")


def optional_module(module: str, extra: str) -> Any:
    """Import an optional dependency; a one-line :class:`InputError` naming the extra when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(
            f"regmix needs the optional package '{module.split('.')[0]}': pip install 'mixlaw[{extra}]'"
        ) from None


@dataclass
class RegMix:
    """The RegMix surrogate: ``loss ≈ f(w_<domain> …)`` by gradient-boosted trees, a Gaussian process or OLS.

    Parameters
    ----------
    domains
        Training domains; the features are the columns ``w_<domain>``.
    backend
        ``lightgbm`` (default), ``gp`` or ``linear``.
    early_stopping
        ``train_split`` (default; stop on a split of the training runs, then refit on all of them), ``none`` or
        ``eval`` (the paper's protocol: stop on the evaluation table given to :meth:`fit` — a test-set leak).
    valid_fraction
        Share of the training runs held out for early stopping under ``train_split`` (default 0.2).
    rounds, learning_rate, patience
        Boosting rounds at most (1000), learning rate (1e-2), rounds without improvement before stopping (3).
    seed
        Seed of the trees and of the early-stopping split (42, the paper's).
    num_threads
        LightGBM threads (default 1: deterministic and friendly to shared machines).
    min_leaf
        LightGBM's ``min_data_in_leaf`` (default 20, LightGBM's and the paper's). With a few dozen proxy runs the
        trees can hardly split at 20 and the surrogate falls back to the mean; lower it there (or use ``gp``).
    """

    domains: Sequence[str]
    backend: str = "lightgbm"
    early_stopping: str = "train_split"
    valid_fraction: float = 0.2
    rounds: int = 1000
    learning_rate: float = 1e-2
    patience: int = 3
    seed: int = 42
    num_threads: int = 1
    min_leaf: int = 20

    name = "regmix"

    def __post_init__(self) -> None:
        doms = [d.strip() for d in (self.domains.split(",") if isinstance(self.domains, str) else self.domains)]
        if len(doms) < 2 or len(set(doms)) != len(doms) or not all(doms):
            raise InputError(f"regmix: expected at least two distinct domains, got {self.domains!r}")
        self.domains = tuple(doms)
        if self.backend not in BACKENDS:
            raise InputError(f"regmix option 'backend': expected one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.early_stopping not in EARLY_STOPPING:
            raise InputError(
                f"regmix option 'early_stopping': expected one of {', '.join(EARLY_STOPPING)}, "
                f"got {self.early_stopping!r}"
            )
        self.valid_fraction = float_option("regmix", "valid_fraction", self.valid_fraction, 0.0, 1.0)
        self.rounds = int_option("regmix", "rounds", self.rounds, 1)
        self.learning_rate = float_option("regmix", "learning_rate", self.learning_rate, 0.0, math.inf)
        self.patience = int_option("regmix", "patience", self.patience, 1)
        self.seed = int_option("regmix", "seed", self.seed, 0)
        self.num_threads = int_option("regmix", "num_threads", self.num_threads, 1)
        self.min_leaf = int_option("regmix", "min_leaf", self.min_leaf, 1)

    @classmethod
    def from_options(cls, domains: Sequence[str], options: Mapping[str, Any]) -> RegMix:
        """Build from ``--models regmix:backend=gp;rounds=200`` style options (one-line error on an unknown one)."""
        known = [f for f in cls.__dataclass_fields__ if f != "domains"]
        bad = [k for k in options if k not in known]
        if bad:
            raise InputError(f"regmix has no option {bad[0]!r}; its options: {', '.join(known)}")
        return cls(domains, **dict(options))

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(f"w_{d}" for d in self.domains)

    def _xy(self, table: Any, target: str | None, what: str) -> tuple[np.ndarray, np.ndarray | None]:
        for c in self.inputs + ((target,) if target else ()):
            if c not in table.columns:
                raise InputError(f"regmix: the {what} table has no column '{c}'")
        X = np.column_stack([np.asarray(table[c], dtype=np.float64) for c in self.inputs])
        y = None if target is None else np.asarray(table[target], dtype=np.float64)
        bad = ~np.isfinite(X).all(axis=1) if y is None else ~(np.isfinite(X).all(axis=1) & np.isfinite(y))
        if bad.any():
            col = target if y is not None and not np.isfinite(y[bad][0]) else "a w_<domain> column"
            raise InputError(f"regmix: the {what} table row {int(np.flatnonzero(bad)[0]) + 1}: non-finite {col}")
        return X, y

    def fit(self, table: Any, target: str = "loss", *, eval_table: Any = None) -> RegMixFit:
        """Fit on the rows of ``table`` (a DataFrame with ``w_<domain>`` columns and ``target``).

        ``eval_table`` is used only by ``early_stopping="eval"`` (the published, leaky protocol).
        """
        X, y_opt = self._xy(table, target, "training")
        y = np.asarray(y_opt, dtype=np.float64)
        if len(y) < 3:
            raise InputError(f"regmix: expected at least 3 training rows, got {len(y)}")
        if self.backend == "linear":
            A = np.column_stack([np.ones(len(y)), X])
            coef = np.linalg.lstsq(A, y, rcond=None)[0]
            return RegMixFit(self, target, model=coef, info={"backend": "linear"})
        if self.backend == "gp":
            return self._fit_gp(X, y, target)
        return self._fit_lightgbm(X, y, target, eval_table)

    # ------------------------------------------------------------------ lightgbm
    def _lgb_params(self) -> dict[str, Any]:
        return {
            "objective": "regression",
            "boosting_type": "gbdt",
            "learning_rate": self.learning_rate,
            "metric": ["l1", "l2"],
            "seed": self.seed,
            "num_threads": self.num_threads,
            "min_data_in_leaf": self.min_leaf,
            "verbosity": -1,
            "deterministic": True,
        }

    def _fit_lightgbm(self, X: np.ndarray, y: np.ndarray, target: str, eval_table: Any) -> RegMixFit:
        lgb = optional_module("lightgbm", "lightgbm")
        params = self._lgb_params()
        info: dict[str, Any] = {"backend": "lightgbm", "early_stopping": self.early_stopping}
        if self.early_stopping == "none":
            model = lgb.train(params, lgb.Dataset(X, y), num_boost_round=self.rounds)
            info["rounds"] = self.rounds
            return RegMixFit(self, target, model=model, info=info)
        stop = [lgb.early_stopping(self.patience, verbose=False)]
        if self.early_stopping == "eval":
            if eval_table is None:
                raise InputError("regmix early_stopping='eval' needs the evaluation table (the paper's leaky protocol)")
            Xe, ye = self._xy(eval_table, target, "evaluation")
            model = lgb.train(
                params, lgb.Dataset(X, y), num_boost_round=self.rounds, valid_sets=[lgb.Dataset(Xe, ye)], callbacks=stop
            )
            info["rounds"] = int(model.best_iteration or self.rounds)
            info["leak"] = "early stopping on the evaluation rows"
            return RegMixFit(self, target, model=model, info=info)
        n_valid = max(1, int(round(self.valid_fraction * len(y))))
        if len(y) - n_valid < 2:
            raise InputError(f"regmix: {len(y)} training rows are too few to hold out {n_valid} for early stopping")
        perm = np.random.default_rng(self.seed).permutation(len(y))
        va, tr = perm[:n_valid], perm[n_valid:]
        probe = lgb.train(
            params,
            lgb.Dataset(X[tr], y[tr]),
            num_boost_round=self.rounds,
            valid_sets=[lgb.Dataset(X[va], y[va])],
            callbacks=stop,
        )
        best = int(probe.best_iteration or self.rounds)
        model = lgb.train(params, lgb.Dataset(X, y), num_boost_round=best)
        info |= {"rounds": best, "n_valid": int(n_valid)}
        return RegMixFit(self, target, model=model, info=info)

    # ------------------------------------------------------------------ gaussian process
    def _fit_gp(self, X: np.ndarray, y: np.ndarray, target: str) -> RegMixFit:
        gp_mod = optional_module("sklearn.gaussian_process", "sklearn")
        kernels = optional_module("sklearn.gaussian_process.kernels", "sklearn")
        d = X.shape[1]
        kernel = kernels.ConstantKernel(1.0, (1e-3, 1e3)) * kernels.RBF(
            length_scale=np.full(d, 0.3), length_scale_bounds=(1e-3, 1e3)
        ) + kernels.WhiteKernel(1e-3, (1e-8, 1e0))
        gp = gp_mod.GaussianProcessRegressor(
            kernel=kernel, normalize_y=True, n_restarts_optimizer=0, random_state=self.seed
        )
        limits = optional_module("threadpoolctl", "sklearn").threadpool_limits
        with warnings.catch_warnings(record=True) as caught, limits(limits=self.num_threads):
            warnings.simplefilter("always")  # sklearn's ConvergenceWarning on a bound is recorded, not raised
            gp.fit(X, y)  # BLAS limited to num_threads: on a busy machine its default threads thrash (20x slower)
        notes = sorted({str(w.message).splitlines()[0] for w in caught})
        return RegMixFit(self, target, model=gp, info={"backend": "gp", "kernel": str(gp.kernel_), "notes": notes})


@dataclass
class RegMixFit:
    """A fitted RegMix surrogate: :meth:`predict` (and :meth:`predict_std` for the GP) on new mixtures."""

    spec: RegMix
    target: str
    model: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def law_name(self) -> str:
        return "regmix"

    def predict(self, table: Any) -> np.ndarray:
        """Predicted ``target`` for each row of ``table`` (its ``w_<domain>`` columns)."""
        if self.model is None:
            raise NotFittedError("regmix: predict() before fit()")
        X, _ = self.spec._xy(table, None, "prediction")
        backend = self.info["backend"]
        if backend == "linear":
            return np.asarray(self.model[0] + X @ self.model[1:], dtype=np.float64)
        if backend == "gp":
            return np.asarray(self.model.predict(X), dtype=np.float64)
        return np.asarray(self.model.predict(X, num_iteration=self.info.get("rounds")), dtype=np.float64)

    def predict_std(self, table: Any) -> np.ndarray:
        """Predictive standard deviation (GP backend only; NaN for the others)."""
        X, _ = self.spec._xy(table, None, "prediction")
        if self.info.get("backend") != "gp":
            return np.full(len(X), np.nan)
        _, sd = self.model.predict(X, return_std=True)
        return np.asarray(sd, dtype=np.float64)
