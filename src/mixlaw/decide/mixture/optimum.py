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
on all resamples in one batched solve from its point estimate (:func:`_draws`: the resampled mixtures' counts as
point weights, the adaptive iteration limit with the noise-scaled stall test, failed resamples rescued from the
point and from where they stopped; those still unusable are counted per law in ``bootstrap.refits`` and in
``n_failed``, never dropped silently), and the mixture is re-optimised for each resample from the point optimum
and the uniform mixture. The result carries bias-corrected percentile intervals around the point estimates
(:func:`mixlaw.decide.mixture.intervals.bc_ends`, the rule of ``mix compare`` and the CMR decisions) per domain
weight, for the objective and for each predicted loss and accuracy at the optimum; with ``sizes``, the optimum and
its band at every target size. (Until this batched refit the resamples were refitted one by one with one start
capped at 300 iterations while the point fits converged, so the resamples sat off-centre and the paired regret
intervals were too narrow: ``examples/mixture_probe``'s uniform regret interval excluded 0, measured −0.004.)
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from mixlaw.decide.mixture.checks import check_mixture, mixture_groups, target_rows
from mixlaw.decide.mixture.constraints import MixtureConstraints
from mixlaw.decide.mixture.objective import PRESETS, FittedLaw, MixtureObjective
from mixlaw.decide.mixture.optimize import optimize_mixture
from mixlaw.errors import InputError

__all__ = ["DEFAULT_TOKENS_PER_PARAM", "TargetInputs", "optimize", "split_weights", "tokens_rule"]


def split_weights(
    weights: Mapping[str, float] | None, objective: str | None, targets: Sequence[str], columns: Sequence[str]
) -> tuple[dict[str, float], dict[str, float]]:
    """``(loss_weights, benchmark_weights)`` from ``--weights`` and ``--objective`` (one-line errors otherwise)."""
    loss_w: dict[str, float] = {}
    bench_w: dict[str, float] = {}
    for k, v in (weights or {}).items():
        if k in targets:
            loss_w[k] = float(v)
        elif k in columns:
            bench_w[k] = float(v)
        else:
            raise InputError(
                f"--weights {k}: not one of the --target columns ({', '.join(targets)}) nor a benchmark column"
            )
    if objective is not None:
        if objective not in PRESETS:
            raise InputError(f"--objective {objective}: expected one of {', '.join(PRESETS)}")
        if bench_w:
            raise InputError(f"--objective {objective} and benchmark --weights: give one of them")
        bench_w = dict(PRESETS[objective])
        missing = [b for b in bench_w if b not in columns]
        if missing:
            raise InputError(
                f"--objective {objective}: the table has no accuracy column '{missing[0]}' (the preset weighs "
                f"{', '.join(bench_w)}; map yours with --map {missing[0]}=COLUMN)"
            )
    if bench_w and loss_w:
        raise InputError("--weights: weigh either validation losses or benchmarks, not both")
    for k, v in {**loss_w, **bench_w}.items():
        if not np.isfinite(v) or v < 0:
            raise InputError(f"--weights {k}={v}: expected a finite non-negative weight")
    if not bench_w and not loss_w:
        loss_w = {t: 1.0 for t in targets}
    return loss_w, bench_w


def _build(law_name: str, law_options: Mapping[str, Any], domains: Sequence[str], size_column: str) -> Any:
    from mixlaw.decide.mixture.compare import build_model

    law = build_model(law_name, law_options, domains, size_column)
    if not any(str(c).startswith("w_") for c in law.inputs):
        raise InputError(f"--law {law_name}: not a mixture law (it reads no w_<domain> column)")
    return law


def _fit_recorded(law: Any, rows: pd.DataFrame, target: str, random_state: int) -> tuple[Any, list[Any]]:
    """The fit and the warnings it raised (recorded, not emitted)."""
    from mixlaw.fit import fit_law
    from mixlaw.fit.solver.refine import decision_max_iter

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = fit_law(law, rows, target=target, random_state=random_state, max_iter=decision_max_iter())
    return res, list(caught)


def _emit(law: Any, target: str, caught: Sequence[Any]) -> None:
    for w in caught:  # re-emit once, naming the law (boundary notes are expected on small fits)
        warnings.warn(f"{law.name} on {target}: {w.message}", w.category, stacklevel=4)


def _fit(law: Any, rows: pd.DataFrame, target: str, random_state: int) -> Any:
    res, caught = _fit_recorded(law, rows, target, random_state)
    _emit(law, target, caught)
    return res


def _draws(res: Any, rows: pd.DataFrame, counts: np.ndarray) -> tuple[list[FittedLaw | None], dict[str, Any]]:
    """Refit ``res``'s law on every resample of the mixtures in ONE batched solve, from the point estimate.

    ``counts`` ``(B, n_mix)`` says how often each mixture was drawn; every row of a mixture gets its count as its
    weight (the same objective as duplicating the rows). The resamples run under the adaptive limit with the
    noise-scaled stall test (:mod:`mixlaw.fit.solver.refine`), the failed ones are rescued from the point and from where
    they stopped (:func:`mixlaw.fit.uncertainty.bootstrap.refit_resamples`); those still unusable are ``None`` and
    counted in
    the returned ``{"n_unusable", "n_rescued", "status"}`` (a resample without any row of this target is unusable).
    """
    from mixlaw.fit.problem.data import FitData
    from mixlaw.fit.solver.batch import threads
    from mixlaw.fit.solver.refine import decision_max_iter
    from mixlaw.fit.uncertainty.bootstrap import refit_resamples

    law = res.law
    data = FitData(law, rows, target=res.target, input_map=res.input_map, group_column=None)
    W = counts[:, rows["_mixture"].to_numpy()].astype(np.float64)
    seeds = np.asarray(law.to_internal(res.params), dtype=np.float64)[None, :]
    with threads(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resample fits: boundary notes are not the point
        boot = refit_resamples(
            law, data, data.y, W, seeds, params=res.params, scheme="mixtures", unit="mixtures", loss=res.loss,
            delta=res.delta, max_iter=decision_max_iter(),
        )  # fmt: skip
    ok = boot.ok & (W.sum(axis=1) > 0)
    it = iter(boot.params.to_numpy(dtype=np.float64))
    out: list[FittedLaw | None] = []
    for b in range(len(W)):
        row = next(it) if boot.ok[b] else None
        out.append(FittedLaw(law, law.unflatten(row)) if ok[b] and row is not None else None)
    status = {str(k): int(v) for k, v in zip(*np.unique(boot.status.astype(str), return_counts=True), strict=True)}
    return out, {"n_unusable": int((~ok).sum()), "n_rescued": boot.n_rescued, "status": status}


def _q(values: np.ndarray, level: float, point: float) -> list[float]:
    """The BC percentile interval of bootstrap ``values`` around ``point`` (it always contains the point)."""
    from mixlaw.decide.mixture.intervals import bc_ends

    lo, hi, _ = bc_ends(np.asarray(values, dtype=np.float64)[:, None], np.array([float(point)]), level)
    return [float(lo[0]), float(hi[0])]


def optimize(
    table: pd.DataFrame,
    *,
    law: str = "camel",
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
    max_iter: int | None = None,
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
    (:func:`_camel_reduce`; ``camel_k`` in the result).

    ``progress``: called with one line per stage (each law fit, the law choice, the bootstrap), e.g. to print
    progress on stderr; ``None``: silent.

    ``max_iter``: iteration cap of every fit the decision makes (``--max-iter``;
    :func:`mixlaw.fit.solver.refine.decision_iterations`); ``None`` (default): their own limits.
    """
    from mixlaw.fit.solver.pools import threads
    from mixlaw.fit.solver.refine import decision_iterations

    # one thread in torch and BLAS: the fits and solves here are small; extra threads only spin on a shared machine
    with decision_iterations(max_iter), threads(1):
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
        cands = _candidates(candidates, doms)
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
            choice = choose_law(rows, doms, size_column=size_column, random_state=random_state)
            law = choice.law
        from mixlaw.surrogates import SURROGATES

        if law in SURROGATES:  # no parameters to optimise through: the RegMix proposer (decide/mixture/propose.py)
            if bench_w:
                raise InputError(f"--law {law}: a surrogate proposes for weighted losses, not benchmark weights")
            return _propose(table, law, dict(law_options or {}), doms, targets, loss_w, cons, cands, level,
                            random_state, target_size, progress)  # fmt: skip
        law_obj = _build(law, law_options or {}, doms, size_column)
        tin = TargetInputs.resolve(law_obj, table, target_size, target_tokens, cons, law)  # before any fit
        if progress:
            progress(f"fitting {law} to {len(targets)} loss(es): {', '.join(targets)}")
        if law_obj.name == "camel":  # a degenerate fit is refitted with fewer components (its notes dropped)
            fits, camel_k = _camel_reduce(law_obj, targets, rows, random_state)
        else:
            fits, camel_k = {t: _fit(law_obj, rows[t], t, random_state) for t in targets}, {}
        bench_fits: dict[str, Any] = {}
        for b in bench_w:
            sub = table.dropna(subset=targets)
            sub, _ = target_rows(sub, b, source)
            scale = 100.0 if float(sub[b].max()) > 1.0 else 1.0
            blaw = _build_benchmark(targets, b, scale)
            rows[b] = sub
            bench_fits[b] = _fit(blaw, sub, b, random_state)
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
            "fits": {t: _fit_summary(r, len(rows[t])) for t, r in {**fits, **bench_fits}.items()},
            **({"camel_k": camel_k} if camel_k else {}),
            **({"law_choice": choice.to_dict()} if choice is not None else {}),
            **opt.to_dict(),
            "score": sign * opt.objective,
            **obj.report(opt.w),
            "extrapolation": _extrapolation({**fits, **bench_fits}, doms, opt.w, fixed_inputs),
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
        if bootstrap:
            if progress:
                progress(f"paired bootstrap: refitting every law on {int(bootstrap)} resamples of the mixtures")
            out["bootstrap"] = _bootstrap(
                int(bootstrap), level, random_state, doms, cons, fits, bench_fits, rows, objective_of, opt, grid, curve,
                out,
            )
        if out.get("candidates"):
            from mixlaw.decide.mixture.verdict import verdict_of

            unit = "points" if bench_w else "nats"
            out["verdicts"] = [verdict_of(c, level, unit).to_dict() for c in out["candidates"]]
        return out


#: Tokens per parameter when the table has no token counts to take the ratio from (Hoffmann et al. 2022).
DEFAULT_TOKENS_PER_PARAM = 20.0


def tokens_rule(table: pd.DataFrame, size_column: str, tokens_column: str = "tokens") -> tuple[float, str]:
    """The tokens-per-parameter rule of the target: ``(ratio, what it is)``.

    The median ``tokens / size`` of the table's runs (their final rows: the largest token count per run) when the
    table has both columns, else :data:`DEFAULT_TOKENS_PER_PARAM`.
    """
    if tokens_column in table.columns and size_column in table.columns:
        t = pd.to_numeric(table[tokens_column], errors="coerce")
        n = pd.to_numeric(table[size_column], errors="coerce")
        if "run_id" in table.columns:
            last = t.groupby(table["run_id"]).transform("max")
            keep = (t == last).to_numpy()
            t, n = t[keep], n[keep]
        r = (t / n).to_numpy(dtype=np.float64)
        r = r[np.isfinite(r) & (r > 0)]
        if r.size:
            return float(np.median(r)), f"the median tokens per parameter of the fitted runs ({r.size} runs)"
    return DEFAULT_TOKENS_PER_PARAM, f"{DEFAULT_TOKENS_PER_PARAM:g} tokens per parameter (no token counts in the table)"


def unique_tokens_from_table(table: pd.DataFrame, domains: Sequence[str]) -> dict[str, float]:
    """``{domain: unique tokens}`` from the table's ``unique_tokens_<domain>`` columns (their largest value)."""
    out = {}
    for d in domains:
        c = f"unique_tokens_{d}"
        if c in table.columns:
            v = pd.to_numeric(table[c], errors="coerce").max()
            if np.isfinite(v) and v > 0:
                out[d] = float(v)
    if not out:
        raise InputError("--max-epochs: give --unique-tokens domain=U (the table has no unique_tokens_<domain> column)")
    return out


@dataclass(frozen=True)
class TargetInputs:
    """The non-mixture inputs of the laws at the target: model size, training tokens, unique tokens.

    ``values``: ``{input column: value}``; ``sources``: ``{input column: how it was set}`` (the option given, or the
    rule used, e.g. the tokens-per-parameter ratio of the fitted runs).
    """

    values: Mapping[str, float]
    sources: Mapping[str, str]
    size_input: str | None = None
    tokens_input: str | None = None
    tokens_per_param: float | None = None
    """Set when the tokens came from the tokens-per-parameter rule: the tokens then scale with the size."""

    @classmethod
    def resolve(
        cls, law: Any, table: pd.DataFrame, target_size: float | None, target_tokens: float | None,
        cons: MixtureConstraints, law_name: str,
    ) -> TargetInputs:  # fmt: skip
        """Each non-mixture input of ``law`` from ``--target-size``, ``--target-tokens`` (default: the rule of
        :func:`tokens_rule` times the size), or the unique tokens of the law's domain (``--unique-tokens`` or the
        table's single value); any other input is a one-line error naming it."""
        opts = law.options
        size_col = opts.get("size")
        tok_col = opts.get("tokens", opts.get("volume"))
        uniq_col = opts.get("unique")
        values: dict[str, float] = {}
        sources: dict[str, str] = {}
        tpp = None
        for c in law.inputs:
            c = str(c)
            if c.startswith("w_"):
                continue
            if c == size_col:
                if target_size is None:
                    raise InputError(f"--target-size: law '{law_name}' needs the target model size (its input '{c}')")
                values[c], sources[c] = float(target_size), "--target-size"
            elif c == tok_col:
                if target_tokens is not None:
                    values[c], sources[c] = float(target_tokens), "--target-tokens"
                elif target_size is not None:
                    size_of = str(size_col) if size_col in table.columns else "n_params"
                    tpp, what = tokens_rule(table, size_of, c)
                    values[c] = tpp * float(target_size)
                    sources[c] = f"{tpp:.4g} tokens per parameter × --target-size ({what})"
                else:
                    raise InputError(
                        f"--target-tokens: law '{law_name}' needs the target's training tokens (its input '{c}')"
                    )
            elif c == uniq_col:
                dom = str(opts.get("domain", ""))
                if dom in cons.unique_tokens:
                    values[c], sources[c] = float(cons.unique_tokens[dom]), "--unique-tokens"
                elif c in table.columns and pd.to_numeric(table[c], errors="coerce").nunique() == 1:
                    values[c] = float(pd.to_numeric(table[c], errors="coerce").iloc[0])
                    sources[c] = "the table (one value)"
                else:
                    raise InputError(
                        f"--unique-tokens {dom}=U: law '{law_name}' needs the unique tokens of '{dom}' (input '{c}')"
                    )
            else:
                raise InputError(f"law '{law_name}' needs a value for its input '{c}' at the target")
        return cls(values, sources, size_col if size_col in values else None,
                   tok_col if tok_col in values else None, tpp)  # fmt: skip

    def at_size(self, size: float) -> dict[str, float]:
        """The inputs at another model size (tokens scale with it when they came from the tokens rule)."""
        out = dict(self.values)
        if self.size_input is not None:
            out[self.size_input] = size
        if self.tokens_input is not None and self.tokens_per_param is not None:
            out[self.tokens_input] = self.tokens_per_param * size
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"values": dict(self.values), "sources": dict(self.sources)}


def _candidates(candidates: Mapping[str, Mapping[str, float]] | None, doms: Sequence[str]) -> dict[str, np.ndarray]:
    """Named candidate mixtures as weight vectors in ``doms`` order; a one-line error names a bad one."""
    out: dict[str, np.ndarray] = {}
    for name, mix in (candidates or {}).items():
        extra = sorted(set(mix) - set(doms))
        if extra:
            raise InputError(f"--evaluate {name}: domain '{extra[0]}' is not in --domains")
        w = np.array([float(mix.get(d, 0.0)) for d in doms], dtype=np.float64)
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InputError(f"--evaluate {name}: expected non-negative weights, got {dict(mix)}")
        if abs(float(w.sum()) - 1.0) > 1e-6:
            raise InputError(f"--evaluate {name}: weights sum to {w.sum():.6g}, expected 1 (within 1e-6)")
        out[str(name)] = w
    return out


def _build_benchmark(losses: Sequence[str], benchmark: str, scale: float) -> Any:
    from mixlaw.laws import get_law

    return get_law("benchmark_logistic", losses=tuple(losses), benchmark=benchmark, scale=scale)


def _extrapolation(
    fits: Mapping[str, Any], doms: Sequence[str], w: Any, fixed: Mapping[str, float]
) -> dict[str, str]:
    """Per fitted target, how far the optimum (its mixture at the fixed inputs, e.g. the target size) lies beyond
    the fitted range of each input (:mod:`mixlaw.fit.evaluate.extrapolation`; targets predicted inside every range are
    left out): "×2.2 in n_params beyond the largest fitted (1.13e+05)"."""
    from mixlaw.fit.evaluate.extrapolation import extrapolation_of

    at = {f"w_{d}": [float(v)] for d, v in zip(doms, np.asarray(w, dtype=np.float64), strict=True)}
    at |= {k: [float(v)] for k, v in fixed.items()}
    out = {}
    for t, res in fits.items():
        try:
            e = extrapolation_of(res, at)[0]
        except InputError:  # a benchmark law whose inputs are not the mixture's: nothing to say
            continue
        if e is not None:
            out[t] = str(e["text"])
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


def _camel_reduce(
    law: Any, targets: Sequence[str], rows: Mapping[str, pd.DataFrame], random_state: int
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Fit CAMEL to every target, check each fit's health, refit a degenerate one with fewer components.

    A fit whose components are switched off or at the exponential limit
    (:func:`mixlaw.decide.mixture.camel_k.camel_health`) is not a ``k``-component CAMEL law: it is refitted with
    ``k − 1`` components (or as many as were CAMEL components, if fewer) until the fit is healthy or ``k = 1``;
    only the kept fit's warnings are emitted. Returns the kept fits and per target ``{"k_requested", "k",
    "status", "health", "dropped": [health of each refused fit]}`` (``status``: ``healthy``, ``reduced`` or
    ``degenerate``, the last when even ``k = 1`` is degenerate).
    """
    from mixlaw.decide.mixture.camel_k import FitStatus, camel_health

    fits: dict[str, Any] = {}
    out: dict[str, dict[str, Any]] = {}
    for t in targets:
        cur, caught = _fit_recorded(law, rows[t], t, random_state)
        health = camel_health(cur.law, cur.params, rows[t])
        dropped: list[dict[str, Any]] = []
        while health.status is FitStatus.DEGENERATE and cur.law.k > 1:
            dropped.append(health.to_dict())
            k = max(1, min(cur.law.k - 1, health.k_effective))
            smaller = _build("camel", {**dict(cur.law.options), "k": k}, law.domains, cur.law.size_col)
            cur, caught = _fit_recorded(smaller, rows[t], t, random_state)
            health = camel_health(cur.law, cur.params, rows[t])
        _emit(cur.law, t, caught)
        fits[t] = cur
        status = "degenerate" if health.status is FitStatus.DEGENERATE else ("reduced" if dropped else "healthy")
        out[t] = {"k_requested": law.k, "k": cur.law.k, "status": status, "health": health.to_dict(),
                  "dropped": dropped}  # fmt: skip
    return fits, out


def _fit_summary(res: Any, n_rows: int) -> dict[str, Any]:
    return {
        "law": res.law_name,
        "params": res.params,
        "n_points": res.n_points,
        "n_rows": n_rows,
        "status": str(res.status),
        "r2": res.metrics.get("r2"),
    }


def _bootstrap(
    B: int,
    level: float,
    seed: int,
    doms: list[str],
    cons: MixtureConstraints,
    fits: Mapping[str, Any],
    bench_fits: Mapping[str, Any],
    rows: Mapping[str, pd.DataFrame],
    objective_of: Any,
    opt: Any,
    grid: list[float],
    curve: list[Any],
    out: dict[str, Any],
) -> dict[str, Any]:
    """Refit every law on ``B`` run resamples (same draws for every law), re-optimise each (module docstring)."""
    rng = np.random.default_rng(seed + 1)
    n_mix = int(max(int(r["_mixture"].max()) for r in rows.values())) + 1
    picks = [rng.integers(0, n_mix, n_mix) for _ in range(B)]  # the same mixtures for every law
    counts = np.stack([np.bincount(p, minlength=n_mix) for p in picks])
    refits = {t: _draws(r, rows[t], counts) for t, r in {**fits, **bench_fits}.items()}
    draws = {t: d for t, (d, _) in refits.items()}
    sign = -1.0 if bench_fits else 1.0
    W, J, S, P = [], [], [], []
    cand = {c["name"]: np.array(list(c["weights"].values())) for c in out.get("candidates", [])}
    CJ: dict[str, list[float]] = {k: [] for k in cand}
    CR: dict[str, list[float]] = {k: [] for k in cand}
    band: list[list[np.ndarray]] = [[] for _ in grid]
    n_failed = 0
    uniform = np.full(len(doms), 1.0 / len(doms))
    for b in range(B):
        laws = {t: d[b] for t, d in draws.items()}
        if any(v is None for v in laws.values()):
            n_failed += 1
            continue
        ls = {t: laws[t] for t in fits}
        bs = {t: laws[t] for t in bench_fits}
        try:
            ob = objective_of(ls, bs)
            o = optimize_mixture(ob, cons, starts=np.stack([opt.w, uniform]))
            at_sizes = [
                optimize_mixture(objective_of(ls, bs, m), cons, starts=np.stack([curve[j].w, uniform])).w
                for j, m in enumerate(grid)
            ]
        except (InputError, ValueError, RuntimeError):
            n_failed += 1
            continue
        for j, w in enumerate(at_sizes):
            band[j].append(w)
        W.append(o.w)
        J.append(o.objective)
        S.append(sign * o.objective)
        rep = ob.report(opt.w)  # the predictions at the chosen mixture, under the resampled laws
        P.append({**rep["predicted_losses"], **rep["predicted_accuracies"]})
        if cand:
            with torch.no_grad():
                at_opt = float(ob(torch.as_tensor(opt.w)))
                for k, w in cand.items():
                    jc = float(ob(torch.as_tensor(w)))
                    CJ[k].append(jc)
                    CR[k].append(jc - at_opt)
    fits_info = {t: info for t, (_, info) in refits.items()}  # per law: unusable and rescued resamples
    from mixlaw.fit.uncertainty.resampling import interval_status

    status = interval_status(n_failed, B)  # weak when the bands rest on <= 80 % of the resamples
    if not W:
        return {"n": 0, "n_failed": n_failed, "status": status, "level": level, "refits": fits_info}
    Wa = np.array(W)
    at_point = {**out["predicted_losses"], **out["predicted_accuracies"]}
    res: dict[str, Any] = {
        "n": len(W),
        "n_failed": n_failed,
        "status": status,
        "refits": fits_info,
        "level": level,
        "unit": "mixtures",
        "weights": {d: _q(Wa[:, j], level, opt.w[j]) for j, d in enumerate(doms)},
        "objective": _q(np.array(J), level, opt.objective),
        "score": _q(np.array(S), level, sign * opt.objective),
        "predicted_at_optimum": {k: _q(np.array([p[k] for p in P]), level, at_point[k]) for k in P[0]},
    }
    for c in out.get("candidates", []):
        c["objective_interval"] = _q(np.array(CJ[c["name"]]), level, c["objective"])
        c["regret_interval"] = _q(np.array(CR[c["name"]]), level, c["regret"])
        c["p_better_than_chosen"] = float(np.mean(np.array(CR[c["name"]]) < 0))
    if grid:
        for j, row in enumerate(out["vs_size"]):
            arr = np.array(band[j])
            row["band"] = {d: _q(arr[:, i], level, curve[j].w[i]) for i, d in enumerate(doms)}
    return res
