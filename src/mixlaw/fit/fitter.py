"""The fitting engine: robust multi-start fits of any registered law, batched across starts and resamples."""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from mixlaw.errors import BoundaryWarning, ConvergenceWarning, FitError, InputError, NotFittedError
from mixlaw.fit.result import FitResult, FitStatus
from mixlaw.fit.solve import (
    STATUS_CONVERGED,
    STATUS_FAILED,
    STATUS_MAX_ITER,
    STATUS_STALLED,
    objective_values,
    rho,
    solve,
)
from mixlaw.laws import Law, get_law

Strategy = Literal["screen", "full"]
Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)`` — called by long fits (the CLI draws a progress bar with it)."""

__all__ = ["BatchFit", "Fitter", "fit_batch", "fit_law", "objective_at", "prepare_data", "FitData"]


class FitData:
    """Inputs and target of one fit, validated and converted to float64 tensors."""

    def __init__(
        self,
        law: Law,
        table: pd.DataFrame | Mapping[str, Any],
        *,
        target: str = "loss",
        input_map: Mapping[str, str] | None = None,
        group_column: str | None = "run_id",
        source: str = "table",
    ) -> None:
        input_map = dict(input_map or {})
        df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(dict(table))
        self.input_map = {name: input_map.get(name, name) for name in law.inputs}
        self.x_np: dict[str, np.ndarray] = {}
        for name, col in self.input_map.items():
            self.x_np[name] = _numeric_column(df, col, source, what=f"input '{name}' of law '{law.name}'")
        self.y = _numeric_column(df, target, source, what="the target")
        if law.fit_space == "log":
            bad = np.flatnonzero(self.y <= 0)
            if bad.size:
                raise InputError(
                    f"expected a positive target for log-space law '{law.name}', got {self.y[bad[0]]:g}",
                    file=source,
                    row=int(bad[0]) + 1,
                    column=target,
                )
        if len(self.y) == 0:
            raise InputError(f"expected at least one row to fit, got none in {source}")
        self.target = target
        self.n = len(self.y)
        self.x = {k: torch.tensor(v) for k, v in self.x_np.items()}
        self.y_t = torch.tensor(self.y)
        self.log_y = torch.log(self.y_t) if law.fit_space == "log" else None
        if group_column is not None and group_column in df.columns:
            self.groups: np.ndarray | None = pd.factorize(df[group_column])[0]
            self.group_unit = group_column
        else:
            self.groups = None
            self.group_unit = "row"

    def ranges(self) -> dict[str, list[float]]:
        return {k: [float(np.min(v)), float(np.max(v))] for k, v in self.x_np.items()}


def _numeric_column(df: pd.DataFrame, col: str, source: str, what: str) -> np.ndarray:
    if col not in df.columns:
        raise InputError(
            f"expected column '{col}' ({what}), got columns {list(df.columns)[:12]}", file=source, column=col
        )
    values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raw = df[col].iloc[bad[0]]
        raise InputError(f"expected a finite number, got {raw!r}", file=source, row=int(bad[0]) + 1, column=col)
    return values


def prepare_data(
    law: Law | str,
    table: pd.DataFrame | Mapping[str, Any],
    *,
    target: str = "loss",
    input_map: Mapping[str, str] | None = None,
    group_column: str | None = "run_id",
    source: str = "table",
) -> FitData:
    """Validate and convert the data of one fit (see :class:`FitData`)."""
    return FitData(get_law(law), table, target=target, input_map=input_map, group_column=group_column, source=source)


def _make_residuals(law: Law, data: FitData) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if law.fit_space == "log":
        log_y = torch.log(data.y_t)

        def residuals(U: torch.Tensor, pid: torch.Tensor) -> torch.Tensor:
            return law.log_predict(data.x, law.to_natural(U)) - log_y

    else:
        y = data.y_t

        def residuals(U: torch.Tensor, pid: torch.Tensor) -> torch.Tensor:
            return law.predict(data.x, law.to_natural(U)) - y

    return residuals


class Fitter:
    """Robust multi-start fitter for one registered law (scikit-learn estimator contract).

    Parameters
    ----------
    law
        Law name or instance.
    loss
        ``"huber"`` (default; Huber on residuals in the law's ``fit_space`` with **sum** reduction) or ``"l2"``.
    delta
        Huber threshold; default ``law.default_delta`` (1e-3 on log losses, as Chinchilla and its replication).
    starts
        Extra starts in natural units: an ``(S, P)`` array in ``law.param_names`` order or a list of dicts. They
        are added to the law's default grid (``use_grid=True``) or replace it.
    use_grid
        Include ``law.start_grid()``.
    n_random_starts
        Seeded random starts added to the grid (drawn around the grid's range in internal space).
    strategy
        ``"screen"`` (default): the objective is evaluated at every start in one batched call and the
        ``n_polish`` best distinct starts are optimised to convergence (grid search with local polish, as in
        ``scipy.optimize.brute``); ``"full"``: every start is optimised.
    n_polish
        Starts optimised under ``"screen"``.
    bootstrap
        Number of bootstrap resamples (0 = none). Resampling is over groups (``group_column``, default
        ``run_id``: every run's points enter or leave together), over rows when the column is absent.
    bootstrap_starts
        Starts per resample: the point estimate, then the next-best distinct local optima of the main fit.
    n_threads
        Torch threads during the fit (restored afterwards). The batched problems are small and memory-bound, and
        the machines this runs on are often shared: one thread is the fastest and most predictable default.
    max_iter, ftol, xtol
        Solver limits, see :func:`mixlaw.fit.solve.solve`.
    random_state
        Seed of the random starts and of the resampling. The same seed gives an identical result.
    """

    def __init__(
        self,
        law: Law | str,
        *,
        loss: Literal["huber", "l2"] = "huber",
        delta: float | None = None,
        starts: np.ndarray | Sequence[Mapping[str, float]] | None = None,
        use_grid: bool = True,
        n_random_starts: int = 0,
        strategy: Strategy = "screen",
        n_polish: int = 32,
        bootstrap: int = 0,
        bootstrap_starts: int = 1,
        group_column: str | None = "run_id",
        max_iter: int = 300,
        ftol: float = 1e-11,
        xtol: float = 1e-9,
        random_state: int | None = None,
        n_threads: int | None = 1,
        progress: Progress | None = None,
    ) -> None:
        self.law = law
        self.loss = loss
        self.delta = delta
        self.starts = starts
        self.use_grid = use_grid
        self.n_random_starts = n_random_starts
        self.strategy = strategy
        self.n_polish = n_polish
        self.bootstrap = bootstrap
        self.bootstrap_starts = bootstrap_starts
        self.group_column = group_column
        self.max_iter = max_iter
        self.ftol = ftol
        self.xtol = xtol
        self.random_state = random_state
        self.n_threads = n_threads
        self.progress = progress

    # ------------------------------------------------------------------ public
    def fit(
        self,
        table: pd.DataFrame | Mapping[str, Any],
        *,
        target: str = "loss",
        input_map: Mapping[str, str] | None = None,
        source: str = "table",
    ) -> Fitter:
        with _threads(self.n_threads):
            return self._fit(table, target=target, input_map=input_map, source=source)

    def _fit(
        self,
        table: pd.DataFrame | Mapping[str, Any],
        *,
        target: str,
        input_map: Mapping[str, str] | None,
        source: str,
    ) -> Fitter:
        law = get_law(self.law)
        self._check_settings()
        data = FitData(law, table, target=target, input_map=input_map, group_column=self.group_column, source=source)
        delta = float(self.delta if self.delta is not None else law.default_delta)
        rng = np.random.default_rng(self.random_state)
        residuals = _make_residuals(law, data)
        W = torch.ones(1, data.n, dtype=torch.float64)

        U_all = self._start_matrix(law, rng)
        S = U_all.shape[0]
        f_init = np.concatenate(
            [
                objective_values(residuals, chunk, np.zeros(len(chunk), dtype=np.int64), W, loss=self.loss, delta=delta)
                for chunk in np.array_split(U_all, max(1, S // 512))
            ]
        )
        if not np.isfinite(f_init).any():
            raise FitError(
                f"law '{law.name}': the objective is not finite at any of the {S} starts — check the data "
                f"ranges and the law's inputs ({', '.join(law.inputs)})"
            )
        polish = self._choose_polish(U_all, f_init)
        sol = solve(
            residuals,
            U_all[polish],
            np.zeros(polish.size, dtype=np.int64),
            W,
            loss=self.loss,
            delta=delta,
            max_iter=self.max_iter,
            ftol=self.ftol,
            xtol=self.xtol,
            callback=self._callback("fit", polish.size),
        )
        status = np.array(["screened"] * S, dtype=object)
        f_final = f_init.copy()
        U_final = U_all.copy()
        n_iter = np.zeros(S, dtype=np.int64)
        status[polish] = sol.status
        f_final[polish] = sol.f
        U_final[polish] = sol.x
        n_iter[polish] = sol.n_iter
        # A merged start shares its survivor's state; it counts as converged when the survivor did.
        root_status = sol.status.copy()
        merged = sol.merged_into >= 0
        root_status[merged] = sol.status[sol.merged_into[merged]]
        usable = np.isin(root_status, [STATUS_CONVERGED, STATUS_STALLED, STATUS_MAX_ITER])
        if not usable.any():
            raise FitError(f"law '{law.name}': every start failed (non-finite objective or derivatives)")
        cand = polish[usable]
        best = int(cand[np.argmin(f_final[cand])])
        best_local = int(np.flatnonzero(polish == best)[0])
        best_status = root_status[best_local]

        params = self._natural(law, U_final[best])
        starts_df = self._starts_table(law, U_all, U_final, f_init, f_final, status, n_iter, polish, sol)
        fit_status = {STATUS_CONVERGED: FitStatus.CONVERGED, STATUS_STALLED: FitStatus.STALLED}.get(
            str(best_status), FitStatus.MAX_ITER
        )
        message = self._message(law, fit_status, residuals, U_final[best], W, delta)

        boot_df, n_failed = None, 0
        if self.bootstrap:
            order = polish[usable][np.argsort(f_final[polish[usable]])]
            seeds = _distinct(U_final[order], self.bootstrap_starts)
            boot_df, n_failed = self._bootstrap(law, residuals, data, seeds, rng, delta)

        pred = _predict_numpy(law, data, params)
        settings = {
            "strategy": self.strategy,
            "n_grid": int(len(law.internal_grid())) if self.use_grid else 0,
            "n_random_starts": self.n_random_starts,
            "n_user_starts": 0 if self.starts is None else int(len(self._user_starts(law))),
            "n_polish": int(polish.size),
            "max_iter": self.max_iter,
            "ftol": self.ftol,
            "xtol": self.xtol,
            "random_state": self.random_state,
            "bootstrap_starts": self.bootstrap_starts,
        }
        self.result_ = FitResult(
            law_name=law.name,
            law_options=dict(law.options),
            params=params,
            objective=float(f_final[best]),
            status=fit_status,
            message=message,
            starts=starts_df,
            n_points=data.n,
            target=target,
            input_map=data.input_map,
            loss=self.loss,
            delta=delta,
            fit_space=law.fit_space,
            fingerprint=_fingerprint(law, data, self.loss, delta),
            input_ranges=data.ranges(),
            settings=settings,
            metrics=_metrics(data.y, pred, law.fit_space),
            bootstrap_params=boot_df,
            n_bootstrap=int(self.bootstrap),
            n_failed_resamples=n_failed,
            bootstrap_unit=data.group_unit if self.bootstrap else None,
        )
        self._warn(law, self.result_)
        return self

    @property
    def result(self) -> FitResult:
        if not hasattr(self, "result_"):
            raise NotFittedError("this Fitter is not fitted yet: call fit(table) first")
        return self.result_

    def predict(self, table: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
        return self.result.predict(table)

    # ------------------------------------------------------------------ internals
    def _check_settings(self) -> None:
        if self.loss not in ("huber", "l2"):
            raise InputError(f"expected loss 'huber' or 'l2', got {self.loss!r}")
        if self.strategy not in ("screen", "full"):
            raise InputError(f"expected strategy 'screen' or 'full', got {self.strategy!r}")
        for name in ("n_random_starts", "bootstrap"):
            if int(getattr(self, name)) < 0:
                raise InputError(f"expected a non-negative {name}, got {getattr(self, name)}")
        if self.n_polish < 1 or self.bootstrap_starts < 1:
            raise InputError("expected n_polish and bootstrap_starts of at least 1")
        if self.delta is not None and not self.delta > 0:
            raise InputError(f"expected a positive Huber delta, got {self.delta}")

    def _user_starts(self, law: Law) -> np.ndarray:
        starts = self.starts
        if starts is None:
            return np.zeros((0, len(law.param_specs)))
        if isinstance(starts, np.ndarray):
            arr = np.atleast_2d(np.asarray(starts, dtype=np.float64))
            if arr.shape[1] != len(law.param_specs):
                raise InputError(
                    f"expected starts with {len(law.param_specs)} columns {law.param_names}, got {arr.shape[1]}"
                )
            return np.stack([law.to_internal(dict(zip(law.param_names, row, strict=True))) for row in arr])
        rows = []
        for s in starts:
            missing = [n for n in law.param_names if n not in s]
            if missing:
                raise InputError(f"expected a start with every parameter, got one missing {missing}")
            rows.append(law.to_internal(s))
        return np.array(rows, dtype=np.float64).reshape(-1, len(law.param_specs))

    def _start_matrix(self, law: Law, rng: np.random.Generator) -> np.ndarray:
        blocks = []
        if self.use_grid:
            blocks.append(law.internal_grid())
        user = self._user_starts(law)
        if len(user):
            blocks.append(user)
        if self.n_random_starts:
            blocks.append(law.random_starts(int(self.n_random_starts), rng))
        if not blocks:
            raise InputError("expected at least one start: enable the grid, give starts or random starts")
        return np.concatenate(blocks, axis=0)

    def _choose_polish(self, U: np.ndarray, f_init: np.ndarray) -> np.ndarray:
        finite = np.flatnonzero(np.isfinite(f_init))
        if self.strategy == "full" or finite.size <= self.n_polish:
            return np.arange(len(U))
        order = finite[np.argsort(f_init[finite], kind="stable")]
        # Distinct starts only: identical rows (e.g. a user start equal to a grid point) would be merged anyway.
        _, first = np.unique(np.round(U[order], 12), axis=0, return_index=True)
        order = order[np.sort(first)]
        return np.sort(order[: self.n_polish])

    def _callback(self, stage: str, total: int) -> Callable[[int, int], None] | None:
        if self.progress is None:
            return None
        progress = self.progress

        def cb(iteration: int, n_active: int) -> None:
            progress(stage, total - n_active, total)

        return cb

    @staticmethod
    def _natural(law: Law, u: np.ndarray) -> dict[str, float]:
        """Internal vector → natural-unit parameters in the law's canonical form."""
        return law.canonical({s.name: float(s.to_natural(torch.tensor(u[i]))) for i, s in enumerate(law.param_specs)})

    def _starts_table(
        self,
        law: Law,
        U0: np.ndarray,
        U1: np.ndarray,
        f0: np.ndarray,
        f1: np.ndarray,
        status: np.ndarray,
        n_iter: np.ndarray,
        polish: np.ndarray,
        sol: Any,
    ) -> pd.DataFrame:
        t0 = torch.as_tensor(U0)
        t1 = torch.as_tensor(U1)
        cols: dict[str, Any] = {}
        for i, s in enumerate(law.param_specs):
            cols[f"start_{s.name}"] = s.to_natural(t0[:, i]).numpy()
        for i, s in enumerate(law.param_specs):
            cols[s.name] = s.to_natural(t1[:, i]).numpy()
        cols["initial_objective"] = f0
        cols["objective"] = f1
        cols["status"] = status
        cols["n_iter"] = n_iter
        merged_into = np.full(len(U0), -1, dtype=np.int64)
        m = sol.merged_into >= 0
        merged_into[polish[m]] = polish[sol.merged_into[m]]
        cols["merged_into"] = merged_into
        return pd.DataFrame(cols)

    def _message(
        self, law: Law, status: FitStatus, residuals: Any, u: np.ndarray, W: torch.Tensor, delta: float
    ) -> str:
        if status is FitStatus.CONVERGED:
            return "the best start converged"
        if status is FitStatus.STALLED:
            worst = _worst_parameter(law, residuals, u, W, self.loss, delta)
            return (
                "the best start stalled in a flat valley (the objective stopped decreasing measurably); parameter "
                f"'{worst}' is poorly determined by these data — read it with its bootstrap interval, fix it, or add "
                "data that constrain it"
            )
        worst = _worst_parameter(law, residuals, u, W, self.loss, delta)
        return (
            f"the best start did not converge in {self.max_iter} iterations; parameter '{worst}' is still "
            f"moving — raise max_iter, add starts near the expected values, or check that '{worst}' is "
            "identifiable from these data"
        )

    def _warn(self, law: Law, res: FitResult) -> None:
        if res.status is not FitStatus.CONVERGED:
            warnings.warn(f"law '{law.name}': {res.message}", ConvergenceWarning, stacklevel=3)
        for name in res.at_bounds():
            spec = law.spec(name)
            warnings.warn(
                f"law '{law.name}': parameter '{name}' = {res.params[name]:.6g} sits at its bound "
                f"[{spec.lower:g}, {spec.upper:g}]; the optimum may lie outside — check the data or the law",
                BoundaryWarning,
                stacklevel=3,
            )
        if res.n_bootstrap and res.n_failed_resamples > 0.1 * res.n_bootstrap:
            warnings.warn(
                f"law '{law.name}': {res.n_failed_resamples} of {res.n_bootstrap} bootstrap resamples failed to "
                "converge; the intervals describe the converged ones only",
                ConvergenceWarning,
                stacklevel=3,
            )

    def _bootstrap(
        self,
        law: Law,
        residuals: Any,
        data: FitData,
        seeds: np.ndarray,
        rng: np.random.Generator,
        delta: float,
    ) -> tuple[pd.DataFrame, int]:
        B = int(self.bootstrap)
        groups = data.groups if data.groups is not None else np.arange(data.n)
        G = int(groups.max()) + 1
        draws = rng.integers(0, G, size=(B, G))
        counts = np.stack([np.bincount(d, minlength=G) for d in draws])  # (B, G)
        W_all = torch.as_tensor(counts[:, groups].astype(np.float64))  # (B, n)
        k = len(seeds)
        params = np.full((B, len(law.param_specs)), np.nan)
        ok = np.zeros(B, dtype=bool)
        chunk = max(1, 200_000 // max(1, data.n * k))
        done = 0
        for lo in range(0, B, chunk):
            hi = min(B, lo + chunk)
            nb = hi - lo
            U0 = np.tile(seeds, (nb, 1))
            pid = np.repeat(np.arange(nb), k)
            sol = solve(
                residuals,
                U0,
                pid,
                W_all[lo:hi],
                loss=self.loss,
                delta=delta,
                max_iter=self.max_iter,
                ftol=self.ftol,
                xtol=self.xtol,
            )
            st = sol.status.copy()
            m = sol.merged_into >= 0
            st[m] = sol.status[sol.merged_into[m]]
            f = np.where(np.isin(st, [STATUS_CONVERGED, STATUS_STALLED]), sol.f, np.inf).reshape(nb, k)
            j = np.argmin(f, axis=1)
            good = np.isfinite(f[np.arange(nb), j])
            xs = sol.x.reshape(nb, k, -1)[np.arange(nb), j]
            ok[lo:hi] = good
            for i in np.flatnonzero(good):
                params[lo + i] = [v for v in self._natural(law, xs[i]).values()]
            done += nb
            if self.progress is not None:
                self.progress("bootstrap", done, B)
        df = pd.DataFrame(params[ok], columns=list(law.param_names))
        return df, int((~ok).sum())


@contextmanager
def _threads(n: int | None) -> Iterator[None]:
    if n is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _distinct(U: np.ndarray, k: int, tol: float = 1e-4) -> np.ndarray:
    chosen: list[np.ndarray] = []
    for u in U:
        if all(np.abs(u - c).max() > tol for c in chosen):
            chosen.append(u)
        if len(chosen) == k:
            break
    return np.array(chosen)


def _worst_parameter(law: Law, residuals: Any, u: np.ndarray, W: torch.Tensor, loss: str, delta: float) -> str:
    for i, s in enumerate(law.param_specs):
        if abs(u[i]) > 50:
            return s.name
    U = torch.tensor(u[None, :], dtype=torch.float64, requires_grad=True)
    f = (W * rho(residuals(U, torch.zeros(1, dtype=torch.long)), loss, delta)).sum()
    (g,) = torch.autograd.grad(f, U)
    return law.param_specs[int(torch.argmax(g.abs().reshape(-1)))].name


def _predict_numpy(law: Law, data: FitData, params: Mapping[str, float]) -> np.ndarray:
    return np.asarray(law.evaluate(data.x_np, params), dtype=np.float64).reshape(-1)


def _metrics(y: np.ndarray, pred: np.ndarray, fit_space: str) -> dict[str, float]:
    resid = pred - y
    ss_res = float(np.sum(resid**2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    out = {
        "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
        "mse": float(np.mean(resid**2)),
        "mae": float(np.mean(np.abs(resid))),
    }
    if np.all(y != 0):
        out["mre"] = float(np.mean(np.abs(resid) / np.abs(y)))
    if fit_space == "log" and np.all(pred > 0):
        out["rmse_log"] = float(np.sqrt(np.mean((np.log(pred) - np.log(y)) ** 2)))
    return out


def _fingerprint(law: Law, data: FitData, loss: str, delta: float) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([law.name, law.options, loss, delta, data.target], sort_keys=True, default=str).encode())
    for name in sorted(data.x_np):
        h.update(name.encode())
        h.update(np.ascontiguousarray(data.x_np[name]).tobytes())
    h.update(np.ascontiguousarray(data.y).tobytes())
    if data.groups is not None:
        h.update(np.ascontiguousarray(data.groups).tobytes())
    return h.hexdigest()


def fit_law(
    law: Law | str,
    table: pd.DataFrame | Mapping[str, Any],
    *,
    target: str = "loss",
    input_map: Mapping[str, str] | None = None,
    source: str = "table",
    **settings: Any,
) -> FitResult:
    """Fit a registered law to a table and return the :class:`FitResult`.

    ``settings`` are :class:`Fitter` arguments (``loss``, ``delta``, ``starts``, ``n_random_starts``,
    ``strategy``, ``n_polish``, ``bootstrap``, ``group_column``, ``random_state``, ...).
    """
    law_obj = get_law(law)
    return Fitter(law_obj, **settings).fit(table, target=target, input_map=input_map, source=source).result


def objective_at(
    law: Law | str,
    table: pd.DataFrame | Mapping[str, Any],
    params: Mapping[str, float],
    *,
    target: str = "loss",
    input_map: Mapping[str, str] | None = None,
    loss: Literal["huber", "l2"] = "huber",
    delta: float | None = None,
) -> float:
    """The fit objective of ``params`` on ``table`` — e.g. to compare published parameters with a fit."""
    law_obj = get_law(law)
    data = FitData(law_obj, table, target=target, input_map=input_map, group_column=None)
    u = law_obj.to_internal(params)[None, :]
    W = torch.ones(1, data.n, dtype=torch.float64)
    d = float(delta if delta is not None else law_obj.default_delta)
    return float(
        objective_values(_make_residuals(law_obj, data), u, np.zeros(1, dtype=np.int64), W, loss=loss, delta=d)[0]
    )


@dataclass(frozen=True)
class BatchFit:
    """Result of :func:`fit_batch`: one parameter set per target row (``NaN`` where the fit failed)."""

    law_name: str
    params: pd.DataFrame  # (B, P), canonical form
    objective: np.ndarray  # (B,)
    status: np.ndarray  # (B,) "converged" | "stalled" | "max_iter" | "failed"

    def row(self, b: int) -> dict[str, float] | None:
        """Parameters of problem ``b``, or ``None`` if it failed."""
        if self.status[b] == STATUS_FAILED:
            return None
        return {k: float(v) for k, v in self.params.iloc[b].items()}


def fit_batch(
    law: Law | str,
    table: pd.DataFrame | Mapping[str, Any],
    targets: np.ndarray,
    *,
    starts: Sequence[Mapping[str, float]] | Sequence[Sequence[Mapping[str, float]]],
    input_map: Mapping[str, str] | None = None,
    loss: Literal["huber", "l2"] = "huber",
    delta: float | None = None,
    max_iter: int = 300,
    ftol: float = 1e-11,
    xtol: float = 1e-9,
    n_threads: int | None = 1,
) -> BatchFit:
    """Fit one law to many target vectors over the same inputs in ONE batched solve.

    The building block of residual and parametric bootstraps (and of any "same design, many responses"
    problem): row ``b`` of ``targets`` (shape ``(B, n)``) is fitted from its own starts, every start of every
    problem is a row of the same vectorised solve (see :func:`mixlaw.fit.solve.solve`).

    Parameters
    ----------
    law
        Law name or instance.
    table
        The inputs (the law's input columns); ``n`` rows.
    targets
        ``(B, n)`` target values, one problem per row.
    starts
        Natural-unit starts: one list of dicts shared by every problem, or ``B`` lists (one per problem; each of
        the same length ``k``).
    loss, delta, max_iter, ftol, xtol, n_threads
        As in :class:`Fitter`.
    """
    law_obj = get_law(law)
    Y = np.atleast_2d(np.asarray(targets, dtype=np.float64))
    if not np.isfinite(Y).all():
        raise InputError("expected finite targets in every resample")
    df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(dict(table))
    if Y.shape[1] != len(df):
        raise InputError(f"expected targets with {len(df)} columns (one per row), got {Y.shape[1]}")
    data = FitData(law_obj, df.assign(_target=Y[0]), target="_target", input_map=input_map, group_column=None)
    B = Y.shape[0]
    per_problem = len(starts) > 0 and not isinstance(starts[0], Mapping)
    rows = starts if per_problem else [starts] * B  # type: ignore[list-item]
    if len(rows) != B:
        raise InputError(f"expected {B} start lists (one per problem), got {len(rows)}")
    k = len(rows[0])  # type: ignore[arg-type]
    if k == 0 or any(len(r) != k for r in rows):  # type: ignore[arg-type]
        raise InputError("expected the same, non-zero number of starts for every problem")
    U0 = np.array([[law_obj.to_internal(s) for s in r] for r in rows], dtype=np.float64).reshape(B * k, -1)
    pid = np.repeat(np.arange(B), k)
    if law_obj.fit_space == "log":
        if (Y <= 0).any():
            raise InputError(f"expected positive targets for log-space law '{law_obj.name}'")
        Yt = torch.log(torch.tensor(Y))

        def residuals(U: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
            return law_obj.log_predict(data.x, law_obj.to_natural(U)) - Yt[p]

    else:
        Yt = torch.tensor(Y)

        def residuals(U: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
            return law_obj.predict(data.x, law_obj.to_natural(U)) - Yt[p]

    d = float(delta if delta is not None else law_obj.default_delta)
    with _threads(n_threads):
        sol = solve(
            residuals,
            U0,
            pid,
            torch.ones(B, data.n, dtype=torch.float64),
            loss=loss,
            delta=d,
            max_iter=max_iter,
            ftol=ftol,
            xtol=xtol,
        )
    st = sol.status.copy()
    m = sol.merged_into >= 0
    st[m] = sol.status[sol.merged_into[m]]
    rank = np.where(st == STATUS_CONVERGED, 0, np.where(np.isin(st, [STATUS_STALLED, STATUS_MAX_ITER]), 1, 2))
    f = sol.f.reshape(B, k)
    order = np.lexsort((np.where(np.isfinite(f), f, np.inf).ravel(), rank))  # by status class, then objective
    best = np.full(B, -1)
    for idx in order:  # first (best) row of each problem
        b = idx // k
        if best[b] < 0:
            best[b] = idx
    status = np.array([STATUS_FAILED if rank[i] == 2 else str(st[i]) for i in best], dtype=object)
    status[~np.isfinite(sol.f[best])] = STATUS_FAILED
    names = list(law_obj.param_names)
    params = np.full((B, len(names)), np.nan)
    for b in range(B):
        if status[b] != STATUS_FAILED:
            nat = Fitter._natural(law_obj, sol.x[best[b]])
            params[b] = [nat[n] for n in names]
    return BatchFit(
        law_name=law_obj.name,
        params=pd.DataFrame(params, columns=names),
        objective=np.where(status == STATUS_FAILED, np.inf, sol.f[best]),
        status=status,
    )
