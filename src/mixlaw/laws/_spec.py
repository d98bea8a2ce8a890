"""What a law declares: its parameters (scalar, vector or simplex), its options and its symmetry.

These are frozen values. A :class:`~mixlaw.laws.Law` instance holds one :class:`LawSpec` built from its class
declaration and its options; the fitter, the CLI and the reports read everything they need from it.

Parameter shapes
----------------
A scalar parameter is one number. A vector parameter (``length=k``) is ``k`` numbers with the same bounds. A simplex
parameter (``simplex=True, length=k``) is ``k`` non-negative numbers summing to 1 (mixture proportions); the fitter
optimises ``k − 1`` unconstrained additive log-ratios (ALR, the last entry is the reference: ``v = softmax([u, 0])``),
but users, reports, JSON and bootstrap intervals only ever see the natural values.

Inside ``predict`` a scalar parameter broadcasts as ``(S, 1)``, ``(S, n)`` or 0-d (see :mod:`mixlaw.laws._base`); a
vector or simplex parameter carries its entries on one extra trailing axis: ``(S, 1, k)``, ``(S, n, k)`` or ``(k,)``,
so ``p["t"][..., j]`` is its ``j``-th entry with the shape of a scalar parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import torch

from mixlaw.errors import InputError

Tensor = torch.Tensor
Transform = Literal["identity", "log", "logit", "neglog", "simplex"]
ParamValue = Any
"""A natural-unit parameter value: a ``float`` (scalar parameter) or a list of floats (vector/simplex)."""

__all__ = ["REQUIRED", "LawSpec", "Option", "ParamSpec", "ParamValue", "Symmetry"]

_SIMPLEX_FLOOR = 1e-12


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a law.

    Parameters
    ----------
    name
        Name as the user sees it (natural units).
    lower, upper
        Allowed range (of every entry for a vector). The fitter optimises in an unconstrained internal space chosen
        from the bounds: ``(lower, inf)`` → ``lower + exp(u)``; ``(-inf, upper)`` → ``upper - exp(u)``; both finite →
        ``lower + (upper - lower) * sigmoid(u)``; neither → ``u``. ``transform="identity"`` forces the plain map; the
        fitter holds such a parameter to its finite bounds (:func:`mixlaw.fit.problem.data.internal_box`). A simplex
        ignores
        them.
    transform
        ``None`` (derive from the bounds, the default) or ``"identity"``.
    description
        One line for reports.
    length
        ``None`` for a scalar; ``k >= 1`` for a vector of ``k`` entries.
    simplex
        ``True``: a point of the probability simplex with ``length`` (``>= 2``) entries.
    plausible
        ``(lo, hi)``: the range where starts are drawn when the law has no start grid (scrambled Sobol points; in
        the internal space, so a positive parameter is drawn log-uniformly). Default: derived from the bounds.
    """

    name: str
    lower: float = -math.inf
    upper: float = math.inf
    transform: Literal["identity"] | None = None
    description: str = ""
    length: int | None = None
    simplex: bool = False
    plausible: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.simplex and (self.length is None or self.length < 2):
            raise TypeError(f"parameter '{self.name}': a simplex needs length >= 2")
        if self.length is not None and self.length < 1:
            raise TypeError(f"parameter '{self.name}': length must be >= 1")
        if self.plausible is not None and not self.plausible[0] < self.plausible[1]:
            raise TypeError(f"parameter '{self.name}': plausible range must be (lo, hi) with lo < hi")

    # ------------------------------------------------------------------ shape
    @property
    def is_scalar(self) -> bool:
        return self.length is None

    @property
    def size(self) -> int:
        """Number of natural entries (1 for a scalar)."""
        return 1 if self.length is None else int(self.length)

    @property
    def n_internal(self) -> int:
        """Number of unconstrained internal coordinates (``k − 1`` for a simplex)."""
        return self.size - 1 if self.simplex else self.size

    @property
    def flat_names(self) -> tuple[str, ...]:
        """Names of the natural entries: ``name`` for a scalar, ``name[0] … name[k-1]`` otherwise."""
        if self.length is None:
            return (self.name,)
        return tuple(f"{self.name}[{j}]" for j in range(self.size))

    @property
    def kind(self) -> Transform:
        if self.simplex:
            return "simplex"
        if self.transform == "identity":
            return "identity"
        lo, hi = math.isfinite(self.lower), math.isfinite(self.upper)
        if lo and hi:
            return "logit"
        if lo:
            return "log"
        if hi:
            return "neglog"
        return "identity"

    # ------------------------------------------------------------------ values
    def check_value(self, value: Any, law: str = "") -> np.ndarray:
        """A natural value as a float64 array of shape ``()`` (scalar) or ``(k,)``; ``InputError`` otherwise."""
        who = f"law '{law}': " if law else ""
        try:
            v = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{who}expected a number for parameter '{self.name}', got {value!r}") from None
        if self.length is None:
            if v.ndim != 0:
                raise InputError(f"{who}expected a number for parameter '{self.name}', got {value!r}")
            return v
        if v.shape != (self.size,):
            raise InputError(f"{who}expected {self.size} values for parameter '{self.name}', got {value!r}")
        return v

    def natural_value(self, v: np.ndarray) -> ParamValue:
        """Array → the value users see: a float or a list of floats."""
        a = np.asarray(v, dtype=np.float64)
        return float(a) if self.length is None else [float(t) for t in a.reshape(-1)]

    def to_internal(self, value: np.ndarray | float | Sequence[float]) -> np.ndarray:
        """Natural value(s) → unconstrained internal value(s); values on or past a bound are nudged inside.

        Scalars and vectors map elementwise (any shape). A simplex maps its trailing axis of ``k`` entries to
        ``k − 1`` log-ratios against the last entry (entries are floored at 1e-12 and renormalised).
        """
        v = np.asarray(value, dtype=np.float64)
        kind = self.kind
        if kind == "simplex":
            q = np.maximum(v, _SIMPLEX_FLOOR)
            q = q / q.sum(axis=-1, keepdims=True)
            return np.log(q[..., :-1]) - np.log(q[..., -1:])
        if kind == "identity":
            return v
        if kind == "log":
            d = v - self.lower  # positive subnormals stay exact; at or past the bound (not NaN): 1e-300
            return np.log(np.where(d > 0, d, np.maximum(d, 1e-300)))
        if kind == "neglog":
            d = self.upper - v
            return np.log(np.where(d > 0, d, np.maximum(d, 1e-300)))
        span = self.upper - self.lower
        q = np.clip((v - self.lower) / span, 1e-12, 1 - 1e-12)
        return np.log(q) - np.log1p(-q)

    def to_natural(self, u: Tensor) -> Tensor:
        """Internal (unconstrained) tensor → natural-unit tensor (differentiable).

        Elementwise for scalars and vectors; a simplex maps its trailing axis of ``k − 1`` log-ratios to ``k``
        proportions (``softmax([u, 0])``).
        """
        kind = self.kind
        if kind == "simplex":
            z = torch.cat([u, torch.zeros_like(u[..., :1])], dim=-1)
            return torch.softmax(z, dim=-1)
        if kind == "identity":
            return u
        if kind == "log":
            return self.lower + torch.exp(u) if self.lower != 0.0 else torch.exp(u)
        if kind == "neglog":
            return self.upper - torch.exp(u)
        return self.lower + (self.upper - self.lower) * torch.sigmoid(u)

    def at_bound(self, value: float, rtol: float = 1e-6) -> bool:
        """True when ``value`` (one entry) sits on (or past) one of the finite bounds (0 or 1 for a simplex)."""
        lower, upper = (0.0, 1.0) if self.simplex else (self.lower, self.upper)
        scale = max(1.0, abs(value))
        tol = max(rtol * scale, 1e-9) if self.simplex else rtol * scale
        for b in (lower, upper):
            if math.isfinite(b) and abs(value - b) <= tol:
                return True
        return bool(value < lower or value > upper)

    def bounds_text(self) -> str:
        return "[0, 1] (simplex)" if self.simplex else f"[{self.lower:g}, {self.upper:g}]"

    def plausible_internal(self) -> tuple[float, float]:
        """The internal-space box where default (grid-less) starts are drawn, per internal coordinate."""
        if self.simplex:
            return (-2.0, 2.0)  # proportions within a factor e^2 of each other
        if self.plausible is not None:
            a, b = (float(x) for x in self.to_internal(np.array(self.plausible)))
            return (min(a, b), max(a, b))
        kind = self.kind
        if kind == "logit":
            return (-3.0, 3.0)
        if kind in ("log", "neglog"):
            return (math.log(1e-3), math.log(1e3))
        lo = self.lower if math.isfinite(self.lower) else -3.0
        hi = self.upper if math.isfinite(self.upper) else 3.0
        if not lo < hi:
            lo, hi = lo - 1.0, lo + 1.0
        return (lo, hi)


REQUIRED: Any = object()
"""Default of an :class:`Option` the user must give."""


@dataclass(frozen=True)
class Option:
    """One option of a law (``Law(**options)``, ``--law-option key=value``).

    Parameters
    ----------
    name
        Keyword name.
    default
        Value when not given, or :data:`REQUIRED`.
    help
        One line for ``mixlaw laws`` and error messages.
    choices
        Allowed values, if a closed set.
    check
        ``check(value) -> value``: validate and normalise a given value; raise :class:`InputError` (or
        ``TypeError``/``ValueError``, turned into one) on a bad value. Not applied to the default.
    """

    name: str
    default: Any = REQUIRED
    help: str = ""
    choices: tuple[Any, ...] | None = None
    check: Callable[[Any], Any] | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def describe(self) -> str:
        if self.required:
            head = f"{self.name} (required)"
        else:
            head = f"{self.name}={self.default!r}"
        if self.choices:
            head += " {" + "|".join(str(c) for c in self.choices) + "}"
        return head

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "default": None if self.required else self.default,
            "required": self.required,
            "choices": None if self.choices is None else list(self.choices),
            "help": self.help,
        }


def resolve_options(law: str, schema: Sequence[Option], given: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``given`` against ``schema``; return every option with defaults filled in (one-line ``InputError``)."""
    known = {o.name: o for o in schema}

    def listing() -> str:
        return "; its options: " + (", ".join(o.describe() for o in schema) if schema else "none")

    unknown = [k for k in given if k not in known]
    if unknown:
        raise InputError(f"law '{law}' has no option {', '.join(repr(k) for k in unknown)}{listing()}")
    out: dict[str, Any] = {}
    for opt in schema:
        if opt.name not in given:
            if opt.required:
                raise InputError(f"law '{law}' needs option '{opt.name}' ({opt.help or 'no default'}){listing()}")
            out[opt.name] = opt.default
            continue
        value = given[opt.name]
        if opt.check is not None:
            try:
                value = opt.check(value)
            except InputError as exc:
                raise InputError(f"law '{law}', option '{opt.name}': {exc}") from None
            except (TypeError, ValueError) as exc:
                raise InputError(f"law '{law}', option '{opt.name}': bad value {given[opt.name]!r} ({exc})") from None
        if opt.choices is not None and value not in opt.choices:
            allowed = ", ".join(repr(c) for c in opt.choices)
            raise InputError(f"law '{law}', option '{opt.name}': expected one of {allowed}, got {value!r}")
        out[opt.name] = value
    return out


@dataclass(frozen=True)
class Symmetry:
    """Interchangeable components of a law, declared once; the engine reports every fit and draw canonically.

    Parameters
    ----------
    components
        Scalar-parameter components that can swap places without changing the prediction, e.g.
        ``(("s2", "alpha2"), ("s3", "alpha3"))`` for two power terms: each tuple is one component, all of the
        same length, listing the parameters in the same roles. Canonical form: components sorted by the value of
        their first parameter (``s2 <= s3``).
    indexed
        Vector/simplex parameters whose entries can be permuted together (entry ``j`` of each is component ``j``),
        e.g. ``("t", "b")`` for intrinsic domains. Canonical form: entries sorted by the first parameter's values.
    """

    components: tuple[tuple[str, ...], ...] = ()
    indexed: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.components and len({len(c) for c in self.components}) != 1:
            raise TypeError("symmetric components must list the same number of parameters")

    def names(self) -> set[str]:
        return {n for c in self.components for n in c} | set(self.indexed)

    def canonical(self, params: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
        """``params`` with the interchangeable components in canonical order (a new dict)."""
        out = dict(params)
        if self.components and all(c[0] in out for c in self.components):
            order = sorted(range(len(self.components)), key=lambda i: float(out[self.components[i][0]]))
            values = [[params[n] for n in self.components[i]] for i in order]
            for slot, vals in zip(self.components, values, strict=True):
                for n, v in zip(slot, vals, strict=True):
                    out[n] = v
        if self.indexed and all(n in out for n in self.indexed):
            key = np.asarray(out[self.indexed[0]], dtype=np.float64)
            perm = np.argsort(key, kind="stable")
            for n in self.indexed:
                out[n] = [float(v) for v in np.asarray(out[n], dtype=np.float64)[perm]]
        return out


@dataclass(frozen=True)
class LawSpec:
    """The frozen description of one configured law (what ``Law(**options)`` builds).

    Attributes
    ----------
    name
        Registry key.
    options
        Every option with its value (defaults filled in), read-only.
    inputs
        Canonical input columns (e.g. ``n_params``, ``tokens``, one ``w_<domain>`` per mixture domain).
    params
        The parameters in a fixed order.
    example_params
        A realistic parameter set (docs, simulations, tests), natural units.
    formula, citation
        Shown by ``mixlaw laws`` and in reports.
    fit_space, default_delta, target
        Residual space (``"log"`` or ``"raw"``), default Huber δ and the default target column.
    symmetry
        Interchangeable components, or ``None``.
    output_range
        ``(lo, hi)``: the values the output can take (default unbounded); intervals are clipped to it.
    """

    name: str
    inputs: tuple[str, ...]
    params: tuple[ParamSpec, ...]
    example_params: Mapping[str, ParamValue]
    formula: str
    citation: str
    fit_space: Literal["log", "raw"]
    default_delta: float
    target: str
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    symmetry: Symmetry | None = None
    output_range: tuple[float, float] = (-math.inf, math.inf)

    def __post_init__(self) -> None:
        names = [p.name for p in self.params]
        if not self.output_range[0] < self.output_range[1]:
            raise TypeError(f"law '{self.name}': output_range must be (lo, hi) with lo < hi")
        if len(set(names)) != len(names):
            raise TypeError(f"law '{self.name}': duplicate parameter names {names}")
        if len(set(self.inputs)) != len(self.inputs):
            raise TypeError(f"law '{self.name}': duplicate inputs {list(self.inputs)}")
        if self.fit_space not in ("log", "raw"):
            raise TypeError(f"law '{self.name}': fit_space must be 'log' or 'raw'")
        if self.symmetry is not None and not self.symmetry.names() <= set(names):
            raise TypeError(f"law '{self.name}': symmetry names unknown parameters")
        if self.example_params and set(self.example_params) != set(names):
            raise TypeError(
                f"law '{self.name}': example_params must name exactly the parameters {names}, "
                f"got {sorted(self.example_params)}"
            )
