"""What ``mix optimize`` optimises for: the objective's weights, the target's law inputs and the named candidates.

- :func:`split_weights`: ``--weights`` and ``--objective`` as loss weights (minimised) or benchmark weights
  (maximised);
- :class:`TargetInputs`: each non-mixture input of a law at the target — the model size, the training tokens (given,
  or :func:`tokens_rule`: the fitted runs' tokens per parameter times the size), the unique tokens of a domain;
- :func:`candidate_weights`: named mixtures (``--evaluate``) as weight vectors, checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.decide.mixture.constraints import MixtureConstraints
from mixlaw.decide.mixture.objective import PRESETS
from mixlaw.errors import InputError

__all__ = [
    "DEFAULT_TOKENS_PER_PARAM",
    "TargetInputs",
    "candidate_weights",
    "split_weights",
    "tokens_rule",
    "unique_tokens_from_table",
]


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
            elif c == uniq_col or (uniq_col and c.startswith(str(uniq_col)) and c[len(str(uniq_col)):] in
                                   tuple(map(str, opts.get("domains", ())))):  # fmt: skip
                # one unique-token input (``unique``, with ``domain``) or one per domain (``unique`` a prefix)
                dom = str(opts.get("domain", "")) if c == uniq_col else c[len(str(uniq_col)) :]
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


def candidate_weights(
    candidates: Mapping[str, Mapping[str, float]] | None, doms: Sequence[str]
) -> dict[str, np.ndarray]:
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
