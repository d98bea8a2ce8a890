"""Objectives over a mixture built from fitted laws: weighted predicted losses and benchmark-weighted accuracies.

A fitted mixture law (``camel``, ``dml``, any law reading ``w_<domain>`` columns) predicts a loss at a mixture
``w`` and the other inputs held fixed (the target size for ``camel``). :class:`MixtureObjective` is

.. math:: J(w) = \\sum_v a_v \\hat L_v(w) - \\sum_b c_b \\widehat{\\mathrm{Acc}}_b(\\hat L(w))

(minimised), where each benchmark law (``benchmark_logistic``) reads the predicted losses by column name.
The benchmark presets of laws.md §12.5 are in :data:`PRESETS` (the weights are unverified).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from mixlaw.errors import InputError
from mixlaw.laws import Law

__all__ = ["FittedLaw", "MixtureObjective", "PRESETS"]

#: Benchmark-weighted objectives of the CAMEL paper (laws.md §12.5, unverified).
PRESETS: dict[str, dict[str, float]] = {
    "balanced": {
        "mmlu": 0.20, "arc_c": 0.10, "bbh": 0.15, "gsm8k": 0.15, "math": 0.15, "humaneval": 0.15, "ceval": 0.10,
    },
    "math": {"mmlu": 0.12, "arc_c": 0.08, "bbh": 0.12, "gsm8k": 0.15, "math": 0.30, "humaneval": 0.15, "ceval": 0.08},
    "code": {"mmlu": 0.10, "arc_c": 0.10, "bbh": 0.10, "gsm8k": 0.15, "math": 0.15, "humaneval": 0.25, "ceval": 0.15},
    "knowledge": {
        "mmlu": 0.30, "arc_c": 0.16, "bbh": 0.14, "gsm8k": 0.10, "math": 0.04, "humaneval": 0.04, "ceval": 0.22,
    },
}  # fmt: skip


@dataclass(frozen=True)
class FittedLaw:
    """One law with its parameters (natural units), e.g. from a :class:`~mixlaw.fit.FitResult`."""

    law: Law
    params: Mapping[str, Any]

    @classmethod
    def from_result(cls, res: Any) -> FittedLaw:
        return cls(res.law, dict(res.params))

    def tensors(self) -> dict[str, torch.Tensor]:
        vals = self.law.check_params(self.params)
        return {k: torch.as_tensor(v, dtype=torch.float64) for k, v in vals.items()}


@dataclass
class MixtureObjective:
    """``J(w) = Σ_v a_v L_v(w) − Σ_b c_b Acc_b(L(w))`` over domains ``domains`` (minimised).

    Parameters
    ----------
    domains
        Mixture domains; the laws read ``w_<domain>``.
    losses
        ``{loss column: fitted mixture law}``.
    loss_weights
        ``{loss column: a_v}`` (default: 1 for each loss when there are no benchmarks, else none).
    benchmarks
        ``{benchmark: fitted benchmark law}`` whose inputs are loss columns of ``losses``.
    benchmark_weights
        ``{benchmark: c_b}``.
    fixed_inputs
        Values of the laws' other inputs (``{"n_params": 7e9}``).
    """

    domains: tuple[str, ...]
    losses: Mapping[str, FittedLaw]
    loss_weights: Mapping[str, float] = field(default_factory=dict)
    benchmarks: Mapping[str, FittedLaw] = field(default_factory=dict)
    benchmark_weights: Mapping[str, float] = field(default_factory=dict)
    fixed_inputs: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.domains = tuple(self.domains)
        w_cols = {f"w_{d}" for d in self.domains}
        if not self.loss_weights and not self.benchmarks:
            self.loss_weights = {v: 1.0 for v in self.losses}
        for v in self.loss_weights:
            if v not in self.losses:
                raise InputError(f"objective weight for '{v}', which has no fitted loss law")
        for name, fl in self.losses.items():
            for c in fl.law.inputs:
                if c.startswith("w_") and c not in w_cols:
                    raise InputError(f"law '{fl.law.name}' for '{name}' reads {c}, not one of the mixture domains")
                if not c.startswith("w_") and c not in self.fixed_inputs:
                    raise InputError(f"law '{fl.law.name}' for '{name}' needs a value for input '{c}'")
        for b, fl in self.benchmarks.items():
            missing = [c for c in fl.law.inputs if c not in self.losses]
            if missing:
                raise InputError(f"benchmark '{b}' reads {', '.join(missing)}: fit a mixture law for each")
        for b in self.benchmark_weights:
            if b not in self.benchmarks:
                raise InputError(f"objective weight for benchmark '{b}', which has no fitted benchmark law")
        self._p = {k: fl.tensors() for k, fl in {**self.losses, **self.benchmarks}.items()}

    def predicted_losses(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        x: dict[str, torch.Tensor] = {f"w_{d}": w[j].reshape(1) for j, d in enumerate(self.domains)}
        for k, v in self.fixed_inputs.items():
            x[k] = torch.tensor([float(v)], dtype=torch.float64)
        return {name: fl.law.predict(x, self._p[name]).reshape(()) for name, fl in self.losses.items()}

    def predicted_accuracies(self, losses: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = {}
        for b, fl in self.benchmarks.items():
            x = {c: losses[c].reshape(1) for c in fl.law.inputs}
            out[b] = fl.law.predict(x, self._p[b]).reshape(())
        return out

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        losses = self.predicted_losses(w)
        total = torch.zeros((), dtype=torch.float64)
        for v, a in self.loss_weights.items():
            total = total + float(a) * losses[v]
        if self.benchmark_weights:
            acc = self.predicted_accuracies(losses)
            for b, c in self.benchmark_weights.items():
                total = total - float(c) * acc[b]
        return total

    def report(self, w: Sequence[float] | np.ndarray) -> dict[str, Any]:
        """Predicted losses (and accuracies) at ``w``, as floats."""
        with torch.no_grad():
            wt = torch.as_tensor(np.asarray(w, dtype=np.float64))
            losses = self.predicted_losses(wt)
            acc = self.predicted_accuracies(losses)
        return {
            "predicted_losses": {k: float(v) for k, v in losses.items()},
            "predicted_accuracies": {k: float(v) for k, v in acc.items()},
        }
