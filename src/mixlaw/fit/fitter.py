"""The fitting engine: robust multi-start fits of any registered law, batched across starts and resamples.

The pieces live beside this module — :mod:`~mixlaw.fit.problem.data` (validated inputs, residuals),
:mod:`~mixlaw.fit.problem.starts` (the start design), :mod:`~mixlaw.fit.solver.solve` (the batched solver),
:mod:`~mixlaw.fit.uncertainty.bootstrap` (the usable-row rule and the one bootstrap), :mod:`~mixlaw.fit.solver.batch`
(:func:`fit_batch`), :mod:`~mixlaw.fit.diagnostics` (metrics, messages, warnings) and
:mod:`~mixlaw.fit.result` (:class:`FitResult`). This module puts them together; its old names stay importable.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from mixlaw import limits
from mixlaw.errors import FitError, InputError, NotFittedError
from mixlaw.fit.diagnostics import fingerprint, metrics, predict_numpy, status_message, warn_about
from mixlaw.fit.problem.data import FitData, make_residuals, prepare_data, project_internal
from mixlaw.fit.problem.starts import build_starts, choose_polish, distinct, screen_parts
from mixlaw.fit.result import FitResult, FitStatus
from mixlaw.fit.solver.batch import BatchFit, fit_batch
from mixlaw.fit.solver.multi import PolishRequest
from mixlaw.fit.solver.pools import threads
from mixlaw.fit.solver.refine import iteration_cap, point_stall_units_for, repolish, stall_tol_for
from mixlaw.fit.solver.refits import root_status, usable
from mixlaw.fit.solver.solve import STATUS_CONVERGED, STATUS_STALLED, SolveResult, objective_values
from mixlaw.fit.uncertainty.bootstrap import SCHEME_CHOICES, Scheme, bootstrap_law, resolve_scheme
from mixlaw.fit.uncertainty.identify import assess_fit
from mixlaw.fit.uncertainty.intervals import residual_sd
from mixlaw.laws import Law, get_law
from mixlaw.limits import MemoryLimit

Strategy = Literal["screen", "full"]
Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)`` — called by long fits (the CLI draws a progress bar with it)."""

__all__ = ["BatchFit", "Fitter", "fit_batch", "fit_law", "objective_at", "prepare_data", "FitData"]


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
        Extra starts in natural units: an ``(S, F)`` array in ``law.flat_names`` order (the parameter names for a
        scalar law) or a list of dicts. They are added to the law's design (``use_grid=True``) or replace it.
    use_grid
        Include the law's start design (:meth:`~mixlaw.laws.Law.start_design`).
    use_guess
        Include the law's data-informed starts (:meth:`~mixlaw.laws.Law.guess`).
    n_random_starts
        Seeded random starts added to the design (drawn around the design's range in internal space).
    strategy
        ``"screen"`` (default): the objective is evaluated at every start in one batched call and the
        ``n_polish`` best distinct starts are optimised to convergence (grid search with local polish, as in
        ``scipy.optimize.brute``); ``"full"``: every start is optimised.
    n_polish
        Starts optimised under ``"screen"``.
    bootstrap
        Number of bootstrap resamples (0 = none), see :mod:`mixlaw.fit.uncertainty.bootstrap`.
    bootstrap_scheme
        ``"auto"`` (default: ``"runs"`` where runs are curves, ``"residuals"`` where every run is one row — a
        fixed design; the scheme that ran is ``result.settings["bootstrap_scheme"]``), ``"runs"`` (every run's
        points enter or leave together; rows when ``group_column`` is absent), ``"rows"``, ``"residuals"``
        (residuals resampled within runs, pooled where runs are single rows), ``"parametric"`` (Gaussian noise
        of the fitted residual size added to the fitted curve), ``"sizes"`` (cluster bootstrap over the values of
        ``size_column``: the scheme for extrapolation in model size) or ``"wild"`` (each run's residual vector
        times one random weight: the design kept, for curves from few runs). See
        :mod:`mixlaw.fit.uncertainty.bootstrap`.
    size_column
        The column whose distinct values are the clusters of the ``"sizes"`` scheme (default ``n_params``; the
        column the law's ``n_params`` input is mapped to when the table has no such column).
    bootstrap_starts
        Starts per resample: the point estimate, then the next-best distinct local optima of the main fit.
    n_threads
        Threads of torch and of every BLAS / OpenMP pool during the fit (:func:`mixlaw.fit.solver.pools.threads`;
        restored afterwards). The batched problems are small and memory-bound, and
        the machines this runs on are often shared: one thread is the fastest and most predictable default.
    max_iter
        Iteration cap per start. ``None`` (default): adaptive — every start runs while its objective still falls
        measurably, up to :data:`mixlaw.fit.solver.refine.AUTO_MAX_ITER`; an integer is a hard cap. A best start that
        stops at the cap is re-polished from where it stopped before it is reported (:mod:`mixlaw.fit.solver.refine`).
    ftol, xtol
        Solver tolerances, see :func:`mixlaw.fit.solver.solve.solve`.
    calibrate
        Fit the out-of-sample error model of calibrated prediction intervals (:mod:`mixlaw.fit.evaluate.calibrate`:
        grouped K-fold and forward-chaining refits along the size axis, one batched solve). ``False`` (default):
        not fitted (internal fits of decisions do not pay for it); ``None``: whenever ``bootstrap > 0`` (what
        :func:`mixlaw.api.fit`, and so ``mixlaw fit``, asks for).
    halt
        ``halt(U) -> settled`` on internal points: the point fit stops a problem once every start still running is
        settled and holds the lowest objective (:mod:`mixlaw.fit.solver.halt`; a fit run to learn what kind of optimum
        it reaches, e.g. a CAMEL fit at the exponential limit); ``settings["halted"]`` says whether it did.
    memory_limit
        The memory the bootstrap may plan to use (:class:`mixlaw.limits.MemoryLimit`, default 4 GiB): a larger
        request (:func:`mixlaw.limits.bootstrap_bytes`: resamples × rows × parameters) stops before the point fit
        with one line naming ``--max-memory``.
    random_state
        Seed of the random starts and of the resampling. The same seed gives an identical result.

    Which solver rows count is the usable-row rule of :mod:`mixlaw.fit.uncertainty.bootstrap`: the point estimate is the
    lowest-objective ``converged``/``stalled`` start (falling back, with a warning, to the best ``max_iter`` one).
    """

    def __init__(
        self,
        law: Law | str,
        *,
        loss: Literal["huber", "l2"] = "huber",
        delta: float | None = None,
        starts: np.ndarray | Sequence[Mapping[str, Any]] | None = None,
        use_grid: bool = True,
        use_guess: bool = True,
        n_random_starts: int = 0,
        strategy: Strategy = "screen",
        n_polish: int = 32,
        bootstrap: int = 0,
        bootstrap_scheme: Scheme = "auto",
        bootstrap_starts: int = 1,
        group_column: str | None = "run_id",
        size_column: str = "n_params",
        max_iter: int | None = None,
        ftol: float = 1e-11,
        xtol: float = 1e-9,
        random_state: int | None = None,
        n_threads: int | None = 1,
        progress: Progress | None = None,
        calibrate: bool | None = False,
        memory_limit: MemoryLimit | None = None,
        halt: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        self.law = law
        self.loss = loss
        self.delta = delta
        self.starts = starts
        self.use_grid = use_grid
        self.use_guess = use_guess
        self.n_random_starts = n_random_starts
        self.strategy = strategy
        self.n_polish = n_polish
        self.bootstrap = bootstrap
        self.bootstrap_scheme = bootstrap_scheme
        self.bootstrap_starts = bootstrap_starts
        self.group_column = group_column
        self.size_column = size_column
        self.max_iter = max_iter
        self.ftol = ftol
        self.xtol = xtol
        self.random_state = random_state
        self.n_threads = n_threads
        self.progress = progress
        self.calibrate = calibrate
        self.memory_limit = memory_limit
        self.halt = halt

    # ------------------------------------------------------------------ public
    def fit(
        self,
        table: pd.DataFrame | Mapping[str, Any],
        *,
        target: str = "loss",
        input_map: Mapping[str, str] | None = None,
        source: str = "table",
    ) -> Fitter:
        with threads(self.n_threads):
            return self._fit(table, target=target, input_map=input_map, source=source)

    @property
    def result(self) -> FitResult:
        if not hasattr(self, "result_"):
            raise NotFittedError("this Fitter is not fitted yet: call fit(table) first")
        return self.result_

    def predict(self, table: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
        return self.result.predict(table)

    # ------------------------------------------------------------------ internals
    def _fit(
        self,
        table: pd.DataFrame | Mapping[str, Any],
        *,
        target: str,
        input_map: Mapping[str, str] | None,
        source: str,
    ) -> Fitter:
        steps = self._fit_steps(table, target=target, input_map=input_map, source=source)
        request = next(steps)
        try:
            steps.send(request.run())
        except StopIteration:
            pass
        return self

    def _fit_steps(
        self,
        table: pd.DataFrame | Mapping[str, Any],
        *,
        target: str,
        input_map: Mapping[str, str] | None,
        source: str,
    ) -> Generator[PolishRequest, SolveResult, None]:
        """The fit as a generator: it yields the polish of its best starts (a :class:`PolishRequest`), receives the
        solve's result and sets ``result_`` (:func:`mixlaw.fit.many.fit_many` serves several fits' requests in one
        solve)."""
        law = get_law(self.law)
        self._check_settings()
        data = FitData(law, table, target=target, input_map=input_map, group_column=self.group_column, source=source)
        limits.bootstrap(int(self.bootstrap), data.n, law.n_internal, self.memory_limit)  # before the point fit
        delta = float(self.delta if self.delta is not None else law.default_delta)
        rng = np.random.default_rng(self.random_state)
        residuals = make_residuals(law, data.x, data.y_t)
        W = torch.ones(1, data.n, dtype=torch.float64)

        start_set = build_starts(
            law,
            data,
            rng,
            use_grid=self.use_grid,
            use_guess=self.use_guess,
            starts=self.starts,
            n_random=int(self.n_random_starts),
        )
        U_all = start_set.U
        S = U_all.shape[0]
        f_init = np.concatenate(
            [
                objective_values(residuals, chunk, np.zeros(len(chunk), dtype=np.int64), W, loss=self.loss, delta=delta)
                for chunk in screen_parts(U_all, data.n)  # a large screen trims the heap between its chunks
            ]
        )
        if not np.isfinite(f_init).any():
            raise FitError(
                f"law '{law.name}': the objective is not finite at any of the {S} starts — check the data "
                f"ranges and the law's inputs ({', '.join(law.inputs)})"
            )
        polish = choose_polish(U_all, f_init, self.n_polish, self.strategy == "full")
        cap = iteration_cap(self.max_iter)
        pid0 = np.zeros(polish.size, dtype=np.int64)
        sol = yield PolishRequest(law, data.x, data.y_t, U_all[polish], W, dict(
            loss=self.loss, delta=delta, max_iter=cap, ftol=self.ftol, xtol=self.xtol, stall_tol=stall_tol_for(cap),
            stall_units=point_stall_units_for(cap), spare_best=True, callback=self._callback("fit", polish.size),
            halt=self.halt,
        ))  # fmt: skip
        kw: dict[str, Any] = dict(loss=self.loss, delta=delta, max_iter=cap, ftol=self.ftol, xtol=self.xtol)
        sol = repolish(sol, residuals, pid0, W, **kw)  # a best start stopped at the cap goes on from where it was
        status = np.array(["screened"] * S, dtype=object)
        f_final, U_final, n_iter = f_init.copy(), project_internal(law, U_all), np.zeros(S, dtype=np.int64)
        status[polish], f_final[polish], n_iter[polish] = sol.status, sol.f, sol.n_iter
        U_final[polish] = project_internal(law, sol.x)  # identity-mapped parameters reported inside their bounds
        # The usable-row rule (mixlaw.fit.uncertainty.bootstrap); a point estimate falls back to the best unfinished
        # start.
        ok = usable(sol)
        root = root_status(sol)
        candidates = ok if ok.any() else np.isfinite(sol.f)
        if not candidates.any():
            raise FitError(f"law '{law.name}': every start failed (non-finite objective or derivatives)")
        local = np.flatnonzero(candidates)
        order_local = local[np.argsort(sol.f[local], kind="stable")]
        best_local = int(order_local[0])
        best = int(polish[best_local])
        fit_status = {STATUS_CONVERGED: FitStatus.CONVERGED, STATUS_STALLED: FitStatus.STALLED}.get(
            str(root[best_local]), FitStatus.MAX_ITER
        )
        params = law.natural(U_final[best])
        message = status_message(law, fit_status, residuals, U_final[best], W, self.loss, delta, cap)
        ident = assess_fit(law, data, U_final[best], params, fit_status.value)  # what the data do not pin down
        if ident["status"] == "unidentifiable":
            fit_status, message = FitStatus.UNIDENTIFIABLE, ident["reason"]

        boot = None
        progress = self.progress
        scheme = resolve_scheme(self.bootstrap_scheme, data)
        if self.bootstrap:
            seeds = distinct(U_final[polish[order_local]], self.bootstrap_starts)
            boot = bootstrap_law(
                law,
                data,
                seeds,
                n=int(self.bootstrap),
                rng=rng,
                scheme=self.bootstrap_scheme,  # "auto" may fall back from runs to wild (bootstrap_law)
                params=params,
                loss=self.loss,
                delta=delta,
                max_iter=cap,
                ftol=self.ftol,
                xtol=self.xtol,
                progress=None if progress is None else lambda done, total: progress("bootstrap", done, total),
                clusters=self._clusters(table, data) if scheme == "sizes" else None,
                cluster_unit=self.size_column,
            )

        calib = None
        if self.calibrate or (self.calibrate is None and self.bootstrap):
            from mixlaw.fit.evaluate.calibrate import calibrate

            seeds = distinct(U_final[polish[order_local]], max(1, self.bootstrap_starts))
            size_input = next((k for k, v in data.input_map.items() if v == self.size_column), "n_params")
            clusters = self._clusters(table, data, required=False)
            calib = calibrate(
                law, data, params, seeds, size_input=size_input, clusters=clusters,
                rng=np.random.default_rng(rng.integers(2**32)),
                loss=self.loss, delta=delta, max_iter=cap, ftol=self.ftol, xtol=self.xtol,
            )  # fmt: skip

        settings = {
            "strategy": self.strategy,
            "n_grid": start_set.n_grid,
            "n_guess": start_set.n_guess,
            "n_random_starts": self.n_random_starts,
            "n_user_starts": start_set.n_user,
            "n_polish": int(polish.size),
            "max_iter": self.max_iter,
            "max_iter_cap": cap,
            "ftol": self.ftol,
            "xtol": self.xtol,
            "random_state": self.random_state,
            "bootstrap_starts": self.bootstrap_starts,
            "bootstrap_scheme": None if boot is None else boot.scheme,
            "bootstrap_fallback": None if boot is None or not boot.fallback else boot.fallback,
            **({"halted": bool(sol.halted[best_local])} if self.halt is not None and sol.halted is not None else {}),
        }
        self.result_ = FitResult(
            law_name=law.name,
            law_options=dict(law.options),
            params=params,
            objective=float(f_final[best]),
            status=fit_status,
            message=message,
            starts=self._starts_table(law, U_all, U_final, f_init, f_final, status, n_iter, polish, sol.merged_into),
            n_points=data.n,
            target=target,
            input_map=data.input_map,
            loss=self.loss,
            delta=delta,
            fit_space=law.fit_space,
            fingerprint=fingerprint(law, data, self.loss, delta),
            input_ranges=data.ranges(),
            settings=settings,
            metrics=metrics(data.y, predict_numpy(law, data, params), law.fit_space),
            bootstrap_params=None if boot is None else boot.params,
            n_bootstrap=int(self.bootstrap),
            n_failed_resamples=0 if boot is None else boot.n_failed,
            bootstrap_unit=None if boot is None else boot.unit,
            residual_sd=residual_sd(law, data, params),
            n_rescued_resamples=0 if boot is None else boot.n_rescued,
            identifiability=ident,
            calibration=None if calib is None else calib.to_dict(),
            fitted_law=law,
        )
        warn_about(law, self.result_)

    def _clusters(
        self, table: pd.DataFrame | Mapping[str, Any], data: FitData, required: bool = True
    ) -> np.ndarray | None:
        """Factorised ``size_column`` (the clusters of the ``sizes`` bootstrap and of the calibration folds)."""
        df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(dict(table))
        col = self.size_column
        if col not in df.columns and col in data.input_map:
            col = data.input_map[col]
        if col not in df.columns and not required:
            return None
        if col not in df.columns:
            raise InputError(
                f"expected a size column '{self.size_column}' for bootstrap scheme 'sizes', got columns "
                f"{list(df.columns)[:12]}",
                column=self.size_column,
            )
        return np.asarray(pd.factorize(df[col])[0], dtype=np.int64)

    def _check_settings(self) -> None:
        if self.loss not in ("huber", "l2"):
            raise InputError(f"expected loss 'huber' or 'l2', got {self.loss!r}")
        if self.strategy not in ("screen", "full"):
            raise InputError(f"expected strategy 'screen' or 'full', got {self.strategy!r}")
        if self.bootstrap_scheme not in SCHEME_CHOICES:
            raise InputError(f"expected bootstrap_scheme {', '.join(SCHEME_CHOICES)}, got {self.bootstrap_scheme!r}")
        for name in ("n_random_starts", "bootstrap"):
            if int(getattr(self, name)) < 0:
                raise InputError(f"expected a non-negative {name}, got {getattr(self, name)}")
        if self.n_polish < 1 or self.bootstrap_starts < 1:
            raise InputError("expected n_polish and bootstrap_starts of at least 1")
        if self.delta is not None and not self.delta > 0:
            raise InputError(f"expected a positive Huber delta, got {self.delta}")

    def _callback(self, stage: str, total: int) -> Callable[[int, int], None] | None:
        if self.progress is None:
            return None
        progress = self.progress

        def cb(iteration: int, n_active: int) -> None:
            progress(stage, total - n_active, total)

        return cb

    @staticmethod
    def _natural(law: Law, u: np.ndarray) -> dict[str, Any]:
        """Internal vector → natural-unit parameters in the law's canonical form."""
        return law.natural(u)

    @staticmethod
    def _starts_table(
        law: Law,
        U0: np.ndarray,
        U1: np.ndarray,
        f0: np.ndarray,
        f1: np.ndarray,
        status: np.ndarray,
        n_iter: np.ndarray,
        polish: np.ndarray,
        sol_merged_into: np.ndarray,
    ) -> pd.DataFrame:
        n0 = law.natural_rows(U0, canonical=False)
        n1 = law.natural_rows(U1, canonical=False)
        cols: dict[str, Any] = {}
        for j, name in enumerate(law.flat_names):
            cols[f"start_{name}"] = n0[:, j]
        for j, name in enumerate(law.flat_names):
            cols[name] = n1[:, j]
        cols["initial_objective"] = f0
        cols["objective"] = f1
        cols["status"] = status
        cols["n_iter"] = n_iter
        merged_into = np.full(len(U0), -1, dtype=np.int64)
        m = sol_merged_into >= 0
        merged_into[polish[m]] = polish[sol_merged_into[m]]
        cols["merged_into"] = merged_into
        return pd.DataFrame(cols)


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
    ``strategy``, ``n_polish``, ``bootstrap``, ``bootstrap_scheme``, ``group_column``, ``random_state``, ...).
    """
    law_obj = get_law(law)
    return Fitter(law_obj, **settings).fit(table, target=target, input_map=input_map, source=source).result


def objective_at(
    law: Law | str,
    table: pd.DataFrame | Mapping[str, Any],
    params: Mapping[str, Any],
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
    residuals = make_residuals(law_obj, data.x, data.y_t)
    return float(objective_values(residuals, u, np.zeros(1, dtype=np.int64), W, loss=loss, delta=d)[0])
