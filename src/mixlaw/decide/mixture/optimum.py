"""``mixlaw mix optimize``: fit the laws, build the objective, find the optimal mixture with its bootstrap band.

Objectives (laws.md §12.5–12.6)
-------------------------------
- **Weighted validation losses** (default): one mixture law per ``--target`` loss column and
  ``J(w) = Σ_v a_v L̂_v(w, M*)`` (``--weights loss=a``; default 1 each), minimised.
- **Benchmark-weighted accuracy**: ``--objective balanced|math|code|knowledge`` (the presets of
  :data:`~mixlaw.decide.mixture.objective.PRESETS`) or ``--weights <benchmark column>=c``. Each benchmark's
  accuracy column is fitted by ``benchmark_logistic`` over the observed validation losses of every run
  (``Acc_b = C_b + A_b / (1 + exp(k_bᵀ L + B_b))``, Li, Gu & Zhang 2026, arXiv:2603.08022), and the objective is
  the weighted predicted accuracy ``S(w) = Σ_b c_b Acc_b(L̂(w, M*))``, maximised (``J = −S`` is minimised).

Intervals
---------
With ``bootstrap = B`` the mixtures are resampled ``B`` times (every run of a mixture, at every size, enters or
leaves together; the same resamples for every law), every law (each loss law and each benchmark law) is refitted
on all resamples in one batched solve from its point estimate (:mod:`~mixlaw.decide.mixture.paired`: the
resampled mixtures' counts as point weights, the adaptive iteration limit with the noise-scaled stall test, failed
resamples rescued from the point and from where they stopped; those still unusable are counted per law in
``bootstrap.refits`` and in ``n_failed``, never dropped silently), and the mixture is re-optimised for each resample
from the point optimum and the uniform mixture. The result carries bias-corrected percentile intervals around the
point estimates (:func:`mixlaw.decide.mixture.intervals.bc_ends`, the rule of ``mix compare`` and the CMR decisions)
per domain weight, for the objective and for each predicted loss and accuracy at the optimum; with ``sizes``, the
optimum and its band at every target size. (Until this batched refit the resamples were refitted one by one with
one start capped at 300 iterations while the point fits converged, so the resamples sat off-centre and the paired
regret intervals were too narrow: ``examples/mixture_probe``'s uniform regret interval excluded 0, measured −0.004.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from mixlaw.decide.mixture.checks import check_mixture, mixture_groups, target_rows
from mixlaw.decide.mixture.constraints import MixtureConstraints
from mixlaw.decide.mixture.law_fits import (
    build_benchmark,
    build_mixture_law,
    camel_reduce,
    extrapolation_notes,
    fit_emitting,
    fit_summary,
)
from mixlaw.decide.mixture.objective import FittedLaw, MixtureObjective
from mixlaw.decide.mixture.optimize import optimize_mixture
from mixlaw.decide.mixture.paired import paired_bootstrap
from mixlaw.decide.mixture.targets import (
    TargetInputs,
    candidate_weights,
    split_weights,
    tokens_rule,
    unique_tokens_from_table,
)
from mixlaw.errors import InputError
from mixlaw.options import DEFAULT_SOLVER, IntervalOptions, SolverOptions

__all__ = ["optimize"]


def optimize(
    table: pd.DataFrame,
    *,
    law: str = "auto",
    domains: Sequence[str],
    target: str | Sequence[str] = "loss",
    weights: Mapping[str, float] | None = None,
    objective: str | None = None,
    target_size: float | None = None,
    target_tokens: float | None = None,
    size_column: str = "n_params",
    law_options: Mapping[str, Any] | None = None,
    constraints: Mapping[str, Any] | None = None,
    bootstrap: int = 0,
    level: float = 0.95,
    sizes: Sequence[float] | None = None,
    candidates: Mapping[str, Mapping[str, float]] | None = None,
    random_state: int = 0,
    source: str = "table",
    solver: SolverOptions = DEFAULT_SOLVER,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Fit ``law`` to each target loss (and benchmark laws), and find the feasible mixture that is best for the goal.

    ``target``: one loss column or several. ``weights``: ``{loss column: a}`` (weighted losses, minimised) or
    ``{benchmark column: c}`` (weighted accuracy, maximised); ``objective``: a benchmark preset instead (module
    docstring). ``constraints``: :class:`MixtureConstraints` keywords (``caps``, ``floors``, ``fixed``,
    ``max_epochs``, ``unique_tokens``, ``target_tokens``, ``prior``, ``kl_max``, ``kl_weight``). ``bootstrap``: the
    interval of every weight, of the objective and of the predictions (module docstring). ``sizes``: the optimum (and
    with ``bootstrap`` its band) at each of these target sizes (``vs_size``; a size-aware law only).
    ``candidates``: named mixtures to predict beside the optimum (the natural mixture, uniform, the mixture in
    production): their objective, predictions and ``regret`` (objective minus the optimum's; for a weighted
    accuracy, the optimum's score minus theirs), and with ``bootstrap`` the intervals of each and of the *paired*
    regret — the candidate and the chosen mixture evaluated under the same resampled laws.

    ``target_size``, ``target_tokens``: the target is a (model size, training tokens) pair; each law input gets its
    own value (:class:`TargetInputs`): the size input the size, a token input the tokens (default: the fitted
    runs' median tokens per parameter × the size, :func:`tokens_rule`), a unique-token input the unique tokens of
    its domain. Repetition limits (``max_epochs``) take the unique tokens per domain from the table's
    ``unique_tokens_<domain>`` columns when not given, and the token budget from ``target_tokens`` (or the rule).
    For a law with a CAMEL fit (``law="camel"``) a degenerate fit is refitted with fewer components
    (:func:`~mixlaw.decide.mixture.law_fits.camel_reduce`; ``camel_k`` in the result).

    ``progress``: called with one line per stage (each law fit, the law choice, the bootstrap), e.g. to print
    progress on stderr; ``None``: silent.

    ``law="causalmix"``: the pool-aware surrogate; ``law_options["new_pool"]`` is the new data pool, its statistics
    ``{column: value}`` or the name of a pool of the table (:mod:`~mixlaw.decide.mixture.pool_propose`;
    ``bootstrap`` then resamples the pools).

    ``solver``: iteration caps of every fit the decision makes, point fits, the law choice and the resample refits
    (:class:`~mixlaw.options.SolverOptions`, ``--max-iter``); default: the engine's adaptive limit.
    """
    from mixlaw.fit.solver.pools import threads

    # one thread in torch and BLAS: the fits and solves here are small; extra threads only spin on a shared machine
    with threads(1):
        doms = list(domains)
        targets = [target] if isinstance(target, str) else list(target)
        check_mixture(table, doms, source)
        for t in targets:
            if t not in table.columns:
                raise InputError(f"--target {t}: {source} has no column '{t}'")
        if bootstrap < 0:
            raise InputError(f"--bootstrap {bootstrap}: expected a non-negative number of resamples")
        if not 0 < level < 1:
            raise InputError(f"--level {level}: expected a number in (0, 1)")
        loss_w, bench_w = split_weights(weights, objective, targets, [str(c) for c in table.columns])
        ckw = dict(constraints or {})
        if ckw.get("target_tokens") is None and target_tokens is not None:
            ckw["target_tokens"] = float(target_tokens)
        if ckw.get("max_epochs") and not ckw.get("unique_tokens"):  # unique tokens per domain from the table
            me = ckw["max_epochs"]
            ckw["unique_tokens"] = unique_tokens_from_table(table, list(me) if isinstance(me, Mapping) else doms)
        if ckw.get("max_epochs") and ckw.get("target_tokens") is None and target_size is not None:
            ckw["target_tokens"] = tokens_rule(table, size_column)[0] * float(target_size)
        cons = MixtureConstraints(tuple(doms), **ckw)  # infeasible boxes fail before any fit
        cands = candidate_weights(candidates, doms)
        table = table.reset_index(drop=True)
        if "run_id" not in table.columns:
            table = table.assign(run_id=[f"row{i + 1}" for i in range(len(table))])
        table = table.assign(_mixture=mixture_groups(table, doms))
        rows = {t: target_rows(table, t, source)[0] for t in targets}
        choice = None
        if law == "auto":  # the law by a nested size holdout (decide/mixture/law_choice.py)
            from mixlaw.decide.mixture.law_choice import choose_law

            if law_options:
                raise InputError("--law auto: --law-option applies to one law; name the law instead of auto")
            if target_size is None:
                raise InputError("--target-size: --law auto compares size-aware laws, which need the target size")
            if progress:
                progress(f"law auto: comparing camel, mixture_additive, mixture_joint on {len(targets)} loss(es)")
            choice = choose_law(rows, doms, size_column=size_column, random_state=random_state, solver=solver,
                                progress=progress, target_size=target_size)  # fmt: skip
            law = choice.law
        if law == "causalmix":  # the pool-aware surrogate (decide/mixture/pool_propose.py)
            from mixlaw.decide.mixture.pool_propose import propose_for_pool

            if bench_w:
                raise InputError("--law causalmix: proposes for weighted losses, not benchmark weights")
            return propose_for_pool(table, opts=dict(law_options or {}), doms=doms, targets=targets, loss_w=loss_w,
                                    cons=cons, cands=cands, level=level, bootstrap=bootstrap,
                                    random_state=random_state, target_size=target_size, progress=progress)  # fmt: skip
        from mixlaw.surrogates import SURROGATES

        if law in SURROGATES:  # no parameters to optimise through: the RegMix proposer (decide/mixture/propose.py)
            if bench_w:
                raise InputError(f"--law {law}: a surrogate proposes for weighted losses, not benchmark weights")
            return _propose(table, law, dict(law_options or {}), doms, targets, loss_w, cons, cands, level,
                            random_state, target_size, progress)  # fmt: skip
        law_obj = build_mixture_law(law, law_options or {}, doms, size_column)
        tin = TargetInputs.resolve(law_obj, table, target_size, target_tokens, cons, law)  # before any fit
        if choice is not None:  # the chosen law's fits on every run, made by the choice
            fits, camel_k = dict(choice.fits), dict(choice.camel_k)
        else:
            if progress:
                progress(f"fitting {law} to {len(targets)} loss(es): {', '.join(targets)}")
            if law_obj.name == "camel":  # a degenerate fit is refitted with fewer components (its notes dropped)
                fits, camel_k = camel_reduce(law_obj, targets, rows, random_state, solver)
            else:
                fits, camel_k = {t: fit_emitting(law_obj, rows[t], t, random_state, solver) for t in targets}, {}
        bench_fits: dict[str, Any] = {}
        for b in bench_w:
            sub = table.dropna(subset=targets)
            sub, _ = target_rows(sub, b, source)
            scale = 100.0 if float(sub[b].max()) > 1.0 else 1.0
            blaw = build_benchmark(targets, b, scale)
            rows[b] = sub
            bench_fits[b] = fit_emitting(blaw, sub, b, random_state, solver)
        fixed_inputs = tin.values
        if sizes and tin.size_input is None:
            raise InputError(f"--sizes: law '{law}' has no size input, its optimum does not depend on size")

        def objective_of(losses: Mapping[str, FittedLaw], benches: Mapping[str, FittedLaw], size: float | None = None):
            at = fixed_inputs if size is None else tin.at_size(float(size))
            return MixtureObjective(
                tuple(doms), losses, loss_weights=loss_w if not bench_w else {}, benchmarks=benches,
                benchmark_weights=bench_w, fixed_inputs=at,
            )  # fmt: skip

        point_l = {t: FittedLaw.from_result(r) for t, r in fits.items()}
        point_b = {b: FittedLaw.from_result(r) for b, r in bench_fits.items()}
        obj = objective_of(point_l, point_b)
        opt = optimize_mixture(obj, cons, random_state=random_state)
        sign = -1.0 if bench_w else 1.0
        out: dict[str, Any] = {
            "law": law,
            "law_options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in law_obj.options.items()},
            "targets": targets,
            "goal": "maximise weighted accuracy" if bench_w else "minimise weighted loss",
            "objective_preset": objective,
            "loss_weights": loss_w if not bench_w else {},
            "benchmark_weights": bench_w,
            "target_size": target_size,
            "target_inputs": tin.to_dict(),
            "fits": {t: fit_summary(r, len(rows[t])) for t, r in {**fits, **bench_fits}.items()},
            **({"camel_k": camel_k} if camel_k else {}),
            **({"law_choice": choice.to_dict()} if choice is not None else {}),
            **opt.to_dict(),
            "score": sign * opt.objective,
            **obj.report(opt.w),
            "extrapolation": extrapolation_notes({**fits, **bench_fits}, doms, opt.w, fixed_inputs),
        }
        grid = [float(m) for m in sizes or ()]
        curve = [optimize_mixture(objective_of(point_l, point_b, m), cons, n_dirichlet=16) for m in grid]
        if grid:
            out["vs_size"] = [
                {"size": m, "weights": o.weights, "objective": o.objective, "score": sign * o.objective}
                for m, o in zip(grid, curve, strict=True)
            ]
        if cands:
            out["candidates"] = []
            for name, w in cands.items():
                j = float(obj(torch.as_tensor(w)).detach())
                out["candidates"].append(
                    {"name": name, "weights": dict(zip(doms, map(float, w), strict=True)), "objective": j,
                     "score": sign * j, "regret": j - opt.objective, **obj.report(w)}
                )  # fmt: skip
        from mixlaw.decide.mixture.regret_calib import nested_weights

        # the regret calibration's nested refits (below) ride along in the resamples' batched solves
        nested_w = nested_weights({t: rows[t] for t in fits}, target_size, size_column) if not bench_w else {}
        nested: dict[str, list[Any]] = {}
        if bootstrap:
            if progress:
                progress(f"paired bootstrap: refitting every law on {int(bootstrap)} resamples of the mixtures")
            iv = IntervalOptions(level=level, resamples=int(bootstrap), seed=random_state, method="bias_corrected")
            out["bootstrap"], nested = paired_bootstrap(
                iv, doms, cons, fits, bench_fits, rows, objective_of, opt, grid, curve, out, solver, nested_w
            )
        if not bench_w:  # the size-extrapolation error of regrets and levels (regret_calib.py)
            from mixlaw.decide.mixture.regret_calib import (
                calibrate_regret,
                nested_from,
                nested_refit,
                widen_candidate,
                widen_level,
            )

            def refit_nested(t: str, top: float) -> Any:
                if t in nested and float(top) == max(float(np.max(r[size_column])) for r in rows.values()):
                    return nested_from(fits[t], nested[t][0])
                return nested_refit(fits[t], rows[t], size_column, top, solver.cap(None))

            if progress and target_size is not None and not nested:
                progress("regret calibration: refitting every law below the largest fitted size")
            calib = calibrate_regret(
                rows, {t: r.law for t, r in fits.items()}, loss_w, doms, target_size, size_column=size_column,
                refit=refit_nested,
            )  # fmt: skip
            out["regret_calibration"] = calib.to_dict()
            for c in out.get("candidates") or []:
                widen_candidate(c, opt.w, calib, level)
                c["objective_interval"] = widen_level(c.get("objective_interval"), c["objective"], calib.level_sd(),
                                                      level)  # fmt: skip
            boot = out.get("bootstrap") or {}
            if boot.get("objective"):
                boot["objective"] = widen_level(boot["objective"], opt.objective, calib.level_sd(), level)
            for t, iv in (boot.get("predicted_at_optimum") or {}).items():
                if t in out["predicted_losses"]:
                    point = out["predicted_losses"][t]
                    boot["predicted_at_optimum"][t] = widen_level(iv, point, calib.level_sd(t), level)
        if out.get("candidates"):
            from mixlaw.decide.mixture.verdict import verdict_of

            unit = "points" if bench_w else "nats"
            out["verdicts"] = [verdict_of(c, level, unit).to_dict() for c in out["candidates"]]
        return out


def _propose(
    table: pd.DataFrame, law: str, opts: dict[str, Any], doms: list[str], targets: list[str],
    loss_w: Mapping[str, float], cons: MixtureConstraints, cands: Mapping[str, np.ndarray], level: float,
    random_state: int, target_size: float | None, progress: Callable[[str], None] | None,
) -> dict[str, Any]:  # fmt: skip
    """``mix optimize`` with a surrogate: the Dirichlet top-k proposal, the candidates under the same surrogates."""
    from mixlaw.decide.mixture.propose import DirichletProposer, propose
    from mixlaw.decide.mixture.verdict import verdict_of

    prop_keys = {"n_samples": int, "top_k": int, "temperature": float}
    popts = {k: conv(opts.pop(k)) for k, conv in prop_keys.items() if k in opts}
    proposer = DirichletProposer(**popts)
    q = cons.prior_vector()
    if q is None and "natural" in cands:  # RegMix samples around the token prior
        q = np.asarray(cands["natural"], dtype=np.float64)
    if progress:
        progress(f"{law}: fitting {len(targets)} surrogate(s), ranking {proposer.n_samples} Dirichlet samples")
    res = propose(table, surrogate=law, surrogate_options=opts, domains=doms, targets=targets, loss_weights=loss_w,
                  cons=cons, prior=q, options=proposer, random_state=random_state)  # fmt: skip
    fits = res.pop("_fits")
    w = np.array([res["weights"][d] for d in doms])
    out: dict[str, Any] = {
        "law": law, "law_options": opts, "targets": targets, "goal": "minimise weighted loss",
        "objective_preset": None, "loss_weights": dict(loss_w), "benchmark_weights": {}, "target_size": target_size,
        "fits": res["fits"], "weights": res["weights"], "objective": res["objective"], "score": res["objective"],
        "penalised_objective": res["objective"], "active_constraints": cons.active(w), "kkt": None,
        "predicted_losses": res["predicted_losses"], "predicted_accuracies": {}, "proposer": res["proposer"],
        "extrapolation": {}, "domains": doms, "n_starts": 0, "n_feasible": 0, "n_distinct": 1,
    }  # fmt: skip
    if cands:
        frame = pd.DataFrame(list(cands.values()), columns=[f"w_{d}" for d in doms])
        preds = {t: np.asarray(f.predict(frame), dtype=np.float64) for t, f in fits.items()}
        out["candidates"] = []
        for i, (name, cw) in enumerate(cands.items()):
            pl = {t: float(p[i]) for t, p in preds.items()}
            j = float(sum(float(loss_w.get(t, 0.0)) * v for t, v in pl.items()))
            out["candidates"].append({"name": name, "weights": dict(zip(doms, map(float, cw), strict=True)),
                                      "objective": j, "score": j, "regret": j - res["objective"],
                                      "predicted_losses": pl, "predicted_accuracies": {}})  # fmt: skip
        out["verdicts"] = [verdict_of(c, level).to_dict() for c in out["candidates"]]
    return out
