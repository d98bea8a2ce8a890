"""The feasible set of a mixture: the simplex cut by floors, caps, fixed weights, repetition limits and a KL bound.

A mixture ``w`` over domains ``d`` is feasible when ``Σ_d w_d = 1`` and ``lo_d <= w_d <= hi_d`` with

- ``lo_d = max(floor_d, fixed_d)``, ``hi_d = min(cap_d, fixed_d, E_d · U_d / D_target)``: a domain with ``U_d``
  unique tokens may be repeated at most ``E_d`` times over a target budget of ``D_target`` tokens
  (``w_d · D_target <= E_d · U_d``);
- optionally ``KL(w ‖ prior) <= kl_max`` (a constraint) or ``kl_weight · KL(w ‖ prior)`` added to the objective
  (a penalty).

Every infeasible combination is a one-line :class:`~mixlaw.errors.InputError` naming the constraint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mixlaw.errors import InputError

__all__ = ["MixtureConstraints", "kl_divergence", "project_box_simplex"]

_TOL = 1e-9


def kl_divergence(w: np.ndarray, prior: np.ndarray) -> float:
    """``KL(w ‖ prior) = Σ_d w_d log(w_d / prior_d)`` (0 log 0 = 0)."""
    w = np.asarray(w, dtype=np.float64)
    q = np.asarray(prior, dtype=np.float64)
    pos = w > 0
    return float(np.sum(w[pos] * (np.log(w[pos]) - np.log(q[pos]))))


def project_box_simplex(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``v`` onto ``{lo <= w <= hi, Σ w = 1}`` (bisection on the shift; assumed non-empty)."""
    v = np.asarray(v, dtype=np.float64)
    a, b = float(np.min(v - hi)) - 1.0, float(np.max(v - lo)) + 1.0
    for _ in range(200):
        tau = 0.5 * (a + b)
        s = np.clip(v - tau, lo, hi).sum()
        if s > 1.0:
            a = tau
        else:
            b = tau
        if b - a < 1e-15:
            break
    return np.clip(v - 0.5 * (a + b), lo, hi)


def _per_domain(what: str, values: Mapping[str, float] | None, domains: Sequence[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for d, v in (values or {}).items():
        if d not in domains:
            raise InputError(f"{what} {d}={v}: unknown domain '{d}'; the domains are {', '.join(domains)}")
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise InputError(f"{what} {d}={v!r}: expected a number") from None
        if not math.isfinite(x) or x < 0:
            raise InputError(f"{what} {d}={v}: expected a finite non-negative number")
        out[d] = x
    return out


@dataclass(frozen=True)
class MixtureConstraints:
    """Constraints on a mixture over ``domains`` (see the module docstring).

    Parameters
    ----------
    domains
        Domain names, in the order of the weight vector.
    floors, caps, fixed
        ``{domain: weight}``; floors and caps are bounds, fixed weights are both.
    max_epochs, unique_tokens, target_tokens
        Repetition limit: ``w_d · target_tokens <= max_epochs[d] · unique_tokens[d]`` for every domain in both maps
        (``max_epochs`` may be one number for all domains given in ``unique_tokens``).
    prior, kl_max, kl_weight
        Prior mixture ``{domain: weight}`` (normalised); ``kl_max``: the constraint ``KL(w ‖ prior) <= kl_max``;
        ``kl_weight``: the penalty ``kl_weight · KL`` added to a minimised objective.
    """

    domains: tuple[str, ...]
    floors: Mapping[str, float] = field(default_factory=dict)
    caps: Mapping[str, float] = field(default_factory=dict)
    fixed: Mapping[str, float] = field(default_factory=dict)
    max_epochs: Mapping[str, float] | float | None = None
    unique_tokens: Mapping[str, float] = field(default_factory=dict)
    target_tokens: float | None = None
    prior: Mapping[str, float] | None = None
    kl_max: float | None = None
    kl_weight: float = 0.0

    def __post_init__(self) -> None:
        doms = tuple(self.domains)
        if len(doms) < 2 or len(set(doms)) != len(doms):
            raise InputError(f"expected at least two distinct domains, got {', '.join(doms) or 'none'}")
        object.__setattr__(self, "domains", doms)
        object.__setattr__(self, "floors", _per_domain("--floor", self.floors, doms))
        object.__setattr__(self, "caps", _per_domain("--cap", self.caps, doms))
        object.__setattr__(self, "fixed", _per_domain("--fix", self.fixed, doms))
        object.__setattr__(self, "unique_tokens", _per_domain("--unique-tokens", self.unique_tokens, doms))
        if isinstance(self.max_epochs, int | float):
            epochs = {d: float(self.max_epochs) for d in self.unique_tokens}
        else:
            epochs = _per_domain("--max-epochs", self.max_epochs, doms)
        object.__setattr__(self, "max_epochs", epochs)
        for what, m in (("--floor", self.floors), ("--cap", self.caps), ("--fix", self.fixed)):
            for d, v in m.items():
                if v > 1:
                    raise InputError(f"{what} {d}={v}: a weight must lie in [0, 1]")
        if epochs or self.unique_tokens:
            missing = sorted(set(epochs) ^ set(self.unique_tokens))
            if missing:
                raise InputError(
                    f"repetition limit: domain(s) {', '.join(missing)} need both --max-epochs and --unique-tokens"
                )
            if self.target_tokens is None or not float(self.target_tokens) > 0:
                raise InputError("repetition limit: --target-tokens (the target token budget, > 0) is required")
        if self.prior is not None:
            p = _per_domain("--prior", self.prior, doms)
            if set(p) != set(doms) or sum(p.values()) <= 0:
                raise InputError(f"--prior: expected a weight for every domain ({', '.join(doms)})")
            total = sum(p.values())
            object.__setattr__(self, "prior", {d: p[d] / total for d in doms})
        if (self.kl_max is not None or self.kl_weight) and self.prior is None:
            raise InputError("--kl-max / --kl-weight need a --prior mixture")
        if self.kl_max is not None and not float(self.kl_max) >= 0:
            raise InputError(f"--kl-max {self.kl_max}: expected a non-negative number")
        if self.kl_max is not None and self.prior is not None:
            bad = [d for d in doms if self.prior[d] == 0]
            if bad:
                raise InputError(f"--prior: a KL bound needs every prior weight > 0 (zero for {', '.join(bad)})")
        self._check_box()

    # ------------------------------------------------------------------ the box
    @property
    def n(self) -> int:
        return len(self.domains)

    def repetition_caps(self) -> dict[str, float]:
        """``{domain: E_d · U_d / D_target}`` for the domains with a repetition limit."""
        if not self.unique_tokens or self.target_tokens is None:
            return {}
        epochs = self.max_epochs if isinstance(self.max_epochs, Mapping) else {}
        return {d: epochs[d] * self.unique_tokens[d] / float(self.target_tokens) for d in self.unique_tokens}

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` per domain, every box constraint combined."""
        lo = np.zeros(self.n)
        hi = np.ones(self.n)
        rep = self.repetition_caps()
        for j, d in enumerate(self.domains):
            lo[j] = max(self.floors.get(d, 0.0), self.fixed.get(d, 0.0))
            hi[j] = min(self.caps.get(d, 1.0), rep.get(d, 1.0), self.fixed.get(d, 1.0))
        return lo, hi

    def _check_box(self) -> None:
        lo, hi = self.bounds()
        rep = self.repetition_caps()
        for j, d in enumerate(self.domains):
            if lo[j] > hi[j] + _TOL:
                why = [f"--floor {d}={self.floors[d]:g}"] if d in self.floors else []
                why += [f"--fix {d}={self.fixed[d]:g}"] if d in self.fixed else []
                why += [f"--cap {d}={self.caps[d]:g}"] if d in self.caps else []
                why += [f"repetition limit {d} <= {rep[d]:.4g}"] if d in rep else []
                raise InputError(f"infeasible constraints on domain '{d}': {' vs '.join(why)}")
        if lo.sum() > 1 + _TOL:
            raise InputError(f"infeasible constraints: the floors and fixed weights sum to {lo.sum():.6g} > 1")
        if hi.sum() < 1 - _TOL:
            raise InputError(
                f"infeasible constraints: the caps, fixed weights and repetition limits allow at most "
                f"{hi.sum():.6g} < 1 in total"
            )

    def prior_vector(self) -> np.ndarray | None:
        return None if self.prior is None else np.array([self.prior[d] for d in self.domains])

    # ------------------------------------------------------------------ checks
    def violations(self, w: np.ndarray, tol: float = 1e-7) -> list[str]:
        """The constraints ``w`` violates (beyond ``tol``), each in one phrase; ``[]`` when feasible."""
        w = np.asarray(w, dtype=np.float64)
        lo, hi = self.bounds()
        out = []
        if abs(w.sum() - 1) > tol:
            out.append(f"weights sum to {w.sum():.9g}")
        for j, d in enumerate(self.domains):
            if w[j] < lo[j] - tol:
                out.append(f"{d} = {w[j]:.6g} < lower bound {lo[j]:.6g}")
            if w[j] > hi[j] + tol:
                out.append(f"{d} = {w[j]:.6g} > upper bound {hi[j]:.6g}")
        q = self.prior_vector()
        if self.kl_max is not None and q is not None:
            kl = kl_divergence(w, q)
            if kl > float(self.kl_max) + tol:
                out.append(f"KL(w || prior) = {kl:.6g} > {self.kl_max:g}")
        return out

    def active(self, w: np.ndarray, tol: float = 1e-6) -> list[str]:
        """The constraints active at ``w`` (bounds met with equality, KL bound reached), named as the user set them."""
        w = np.asarray(w, dtype=np.float64)
        lo, hi = self.bounds()
        rep = self.repetition_caps()
        out: list[str] = []
        for j, d in enumerate(self.domains):
            if d in self.fixed:
                out.append(f"fix {d}={self.fixed[d]:g}")
                continue
            if w[j] <= lo[j] + tol:
                out.append(f"floor {d}={lo[j]:g}" if lo[j] > 0 else f"{d} >= 0")
            if w[j] >= hi[j] - tol and hi[j] < 1:
                if d in rep and abs(hi[j] - rep[d]) <= 1e-12:
                    out.append(f"repetition {d}<={hi[j]:.4g}")
                else:
                    out.append(f"cap {d}={hi[j]:g}")
        q = self.prior_vector()
        if self.kl_max is not None and q is not None and kl_divergence(w, q) >= float(self.kl_max) - tol:
            out.append(f"KL(w || prior) = {self.kl_max:g}")
        return out
