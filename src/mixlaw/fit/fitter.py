"""The fitting engine: robust multi-start fits of any registered law, batched across starts and resamples.

The pieces live beside this module — :mod:`~mixlaw.fit.problem.data` (validated inputs, residuals),
:mod:`~mixlaw.fit.problem.starts` (the start design), :mod:`~mixlaw.fit.solver.solve` (the batched solver),
:mod:`~mixlaw.fit.uncertainty.bootstrap` (the usable-row rule and the one bootstrap), :mod:`~mixlaw.fit.solver.batch`
(:func:`fit_batch`), :mod:`~mixlaw.fit.diagnostics` (metrics, messages, warnings) and
:mod:`~mixlaw.fit.result` (:class:`FitResult`). This module puts them together; its old names stay importable.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import Any, Literal, cast

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
from mixlaw.fit.solver.refits import Loss, root_status, usable
from mixlaw.fit.solver.settings import SolveSettings
from mixlaw.fit.solver.solve import STATUS_CONVERGED, STATUS_STALLED, SolveResult, objective_values
from mixlaw.fit.uncertainty.bootstrap import Scheme, bootstrap_law, resolve_scheme
from mixlaw.fit.uncertainty.identify import assess_fit
from mixlaw.fit.uncertainty.intervals import residual_sd
from mixlaw.laws import Law, get_law
from mixlaw.limits import MemoryLimit
from mixlaw.options import FitOptions

#: The options of a fit given none.
DEFAULT_FIT = FitOptions()

Strategy = Literal["screen", "full"]
Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)`` — called by long fits (the CLI draws a progress bar with it)."""

__all__ = ["BatchFit", "FitOptions", "Fitter", "fit_batch", "fit_law", "objective_at", "prepare_data", "FitData"]


class Fitter:
    """Robust multi-start fitter for one registered law (scikit-learn estimator contract).

    Parameters
    ----------
    law
        Law name or instance.
    options
        :class:`mixlaw.options.FitOptions`: the objective (loss, Huber δ), the starts (the law's design, its
        data-informed guesses, random and given starts; ``"screen"``: the ``n_polish`` best distinct starts are
        optimised), the solver (iteration cap, tolerances; ``max_iter=None`` is the adaptive limit of
        :mod:`mixlaw.fit.solver.refine`: a start runs while its objective still falls measurably, and a best start
        stopped at a cap is re-polished), the bootstrap (:mod:`mixlaw.fit.uncertainty.bootstrap`; the scheme that
        ran is ``result.settings["bootstrap_scheme"]``) and the seed. ``None``: every default. An unset
        ``bootstrap.calibrate`` is ``False`` here (internal fits of decisions do not pay for the calibration model;
        :func:`mixlaw.api.fit`, and so ``mixlaw fit``, asks for it whenever it bootstraps).
    n_threads
        Threads of torch and of every BLAS / OpenMP pool during the fit (:func:`mixlaw.fit.solver.pools.threads`;
        restored afterwards). The batched problems are small and memory-bound, and
        the machines this runs on are often shared: one thread is the fastest and most predictable default.
    progress
        ``progress(stage, done, total)``, called by long fits (the CLI draws a progress bar with it).
    memory_limit
        The memory the bootstrap may plan to use (:class:`mixlaw.limits.MemoryLimit`, default 4 GiB): a larger
        request (:func:`mixlaw.limits.bootstrap_bytes`: resamples × rows × parameters) stops before the point fit
        with one line naming ``--max-memory``.
    halt
        ``halt(U) -> settled`` on internal points: the point fit stops a problem once every start still running is
        settled and holds the lowest objective (:mod:`mixlaw.fit.solver.halt`; a fit run to learn what kind of optimum
        it reaches, e.g. a CAMEL fit at the exponential limit); ``settings["halted"]`` says whether it did.

    Which solver rows count is the usable-row rule of :mod:`mixlaw.fit.uncertainty.bootstrap`: the point estimate is the
    lowest-objective ``converged``/``stalled`` start (falling back, with a warning, to the best ``max_iter`` one).
    """

    def __init__(
        self,
        law: Law | str,
        options: FitOptions | None = None,
        *,
        n_threads: int | None = 1,
        progress: Progress | None = None,
        memory_limit: MemoryLimit | None = None,
        halt: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> None:
        if options is not None and not isinstance(options, FitOptions):
            raise InputError(f"expected options to be a FitOptions, got {options!r}", column="options")
        self.law = law
        self.options = DEFAULT_FIT if options is None else options
        self.n_threads = n_threads
        self.progress = progress
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
        o = self.options
        obj, st, sv, bs = o.objective, o.starts, o.solver, o.bootstrap
        loss = cast(Loss, obj.loss)
        data = FitData(law, table, target=target, input_map=input_map, group_column=bs.group_column, source=source)
        limits.bootstrap(bs.resamples, data.n, law.n_internal, self.memory_limit)  # before the point fit
        delta = float(obj.delta if obj.delta is not None else law.default_delta)
        rng = np.random.default_rng(o.seed)
        residuals = make_residuals(law, data.x, data.y_t)
        W = torch.ones(1, data.n, dtype=torch.float64)

        start_set = build_starts(
            law,
            data,
            rng,
            use_grid=st.use_grid,
            use_guess=st.use_guess,
            starts=st.given,
            n_random=st.n_random,
        )
        U_all = start_set.U
        S = U_all.shape[0]
        f_init = np.concatenate(
            [
                objective_values(residuals, chunk, np.zeros(len(chunk), dtype=np.int64), W, loss=loss, delta=delta)
                for chunk in screen_parts(U_all, data.n)  # a large screen trims the heap between its chunks
            ]
        )
        if not np.isfinite(f_init).any():
            raise FitError(
                f"law '{law.name}': the objective is not finite at any of the {S} starts — check the data "
                f"ranges and the law's inputs ({', '.join(law.inputs)})"
            )
        polish = choose_polish(U_all, f_init, st.n_polish, st.strategy == "full")
        cap = iteration_cap(sv.max_iter)
        pid0 = np.zeros(polish.size, dtype=np.int64)
        point = SolveSettings(loss=loss, delta=delta, max_iter=cap, ftol=sv.ftol, xtol=sv.xtol,
                              stall_tol=stall_tol_for(cap), stall_units=point_stall_units_for(cap), spare_best=True)
        sol = yield PolishRequest(law, data.x, data.y_t, U_all[polish], W, point,
                                  callback=self._callback("fit", polish.size), halt=self.halt)  # fmt: skip
        sol = repolish(sol, residuals, pid0, W, point)  # a best start stopped at the cap goes on from where it was
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
        message = status_message(law, fit_status, residuals, U_final[best], W, loss, delta, cap)
        ident = assess_fit(law, data, U_final[best], params, fit_status.value)  # what the data do not pin down
        if ident["status"] == "unidentifiable":
            fit_status, message = FitStatus.UNIDENTIFIABLE, ident["reason"]

        boot = None
        progress = self.progress
        scheme = resolve_scheme(cast(Scheme, bs.scheme), data)
        if bs.resamples:
            seeds = distinct(U_final[polish[order_local]], bs.refit_starts)
            boot = bootstrap_law(
                law,
                data,
                seeds,
                n=bs.resamples,
                rng=rng,
                scheme=cast(Scheme, bs.scheme),  # "auto" may fall back from runs to wild (bootstrap_law)
                params=params,
                loss=loss,
                delta=delta,
                max_iter=cap,
                ftol=sv.ftol,
                xtol=sv.xtol,
                progress=None if progress is None else lambda done, total: progress("bootstrap", done, total),
                clusters=self._clusters(table, data) if scheme == "sizes" else None,
                cluster_unit=bs.size_column,
            )

        calib = None
        if bs.calibrate:  # None (unset) is False here (the class docstring)
            from mixlaw.fit.evaluate.calibrate import calibrate

            seeds = distinct(U_final[polish[order_local]], max(1, bs.refit_starts))
            size_input = next((k for k, v in data.input_map.items() if v == bs.size_column), "n_params")
            clusters = self._clusters(table, data, required=False)
            calib = calibrate(
                law, data, params, seeds, size_input=size_input, clusters=clusters,
                rng=np.random.default_rng(rng.integers(2**32)),
                loss=loss, delta=delta, max_iter=cap, ftol=sv.ftol, xtol=sv.xtol,
            )  # fmt: skip

        settings = {
            "strategy": st.strategy,
            "n_grid": start_set.n_grid,
            "n_guess": start_set.n_guess,
            "n_random_starts": st.n_random,
            "n_user_starts": start_set.n_user,
            "n_polish": int(polish.size),
            "max_iter": sv.max_iter,
            "max_iter_cap": cap,
            "ftol": sv.ftol,
            "xtol": sv.xtol,
            "random_state": o.seed,
            "bootstrap_starts": bs.refit_starts,
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
            loss=loss,
            delta=delta,
            fit_space=law.fit_space,
            fingerprint=fingerprint(law, data, loss, delta),
            input_ranges=data.ranges(),
            settings=settings,
            metrics=metrics(data.y, predict_numpy(law, data, params), law.fit_space),
            bootstrap_params=None if boot is None else boot.params,
            n_bootstrap=bs.resamples,
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
        size_column = self.options.bootstrap.size_column
        col = size_column
        if col not in df.columns and col in data.input_map:
            col = data.input_map[col]
        if col not in df.columns and not required:
            return None
        if col not in df.columns:
            raise InputError(
                f"expected a size column '{size_column}' for bootstrap scheme 'sizes', got columns "
                f"{list(df.columns)[:12]}",
                column=size_column,
            )
        return np.asarray(pd.factorize(df[col])[0], dtype=np.int64)

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
    options: FitOptions | None = None,
    *,
    target: str = "loss",
    input_map: Mapping[str, str] | None = None,
    source: str = "table",
    n_threads: int | None = 1,
    progress: Progress | None = None,
    memory_limit: MemoryLimit | None = None,
    halt: Callable[[np.ndarray], np.ndarray] | None = None,
) -> FitResult:
    """Fit a registered law to a table and return the :class:`FitResult`.

    ``options`` is a :class:`mixlaw.options.FitOptions` (``None``: every default), e.g.
    ``fit_law("chinchilla", t, FitOptions(bootstrap=BootstrapOptions(resamples=200), seed=0))``; the runtime
    hooks ``n_threads``, ``progress``, ``memory_limit`` and ``halt`` are those of :class:`Fitter`.
    """
    fitter = Fitter(get_law(law), options, n_threads=n_threads, progress=progress, memory_limit=memory_limit, halt=halt)
    return fitter.fit(table, target=target, input_map=input_map, source=source).result


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
