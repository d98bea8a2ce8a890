"""The RunTable: canonical columns, the :class:`Mixture` and :class:`RunMeta` value objects, and the one
validator.

The RunTable is the one tidy shape every law reads: one row per ``(run_id, step)`` evaluation, wide over eval
sets, long over steps. Column names carry their units:

==========================  =========================================================================
column                      meaning (unit)
==========================  =========================================================================
``run_id``                  run identifier (string, required)
``step``                    optimiser step (integer >= 0)
``tokens``                  training tokens seen by this run up to ``step`` (tokens >= 0)
``lr``                      learning rate at ``step`` (>= 0)
``loss`` / ``loss_<set>``   evaluation loss on an eval set (nats/token >= 0); at least one is required
``n_params``                non-embedding parameters (count >= 0), constant per run
``n_params_total``          all parameters incl. embeddings (count >= 0), constant per run
``w_<domain>``              training-mixture weight of a domain (>= 0, a row's weights sum to 1)
``phase``                   ``"pt"`` (pre-training) or ``"cpt"`` (continual pre-training), per run
``parent_run``              run this one continues from (CPT), per run
``seed``                    random seed (integer), per run
``schedule``                LR schedule as a JSON object (a spec or ``{"kind": "table", "lr": [...]}``)
``unique_tokens_<domain>``  unique tokens available in a domain (tokens >= 0), per run
``tokens_<domain>``         tokens of a domain seen up to ``step`` (tokens >= 0)
``compute_flops``           training compute up to ``step`` (FLOP >= 0)
==========================  =========================================================================

Any other column passes through: numeric columns as evaluations, string columns as per-run metadata.

Row numbers in error messages
-----------------------------
Every :class:`~mixlaw.errors.InputError` raised here reads ``expected ..., got ... in FILE:ROW:COLUMN``.
``ROW`` is
what the caller passes in ``rows``; the readers in :mod:`mixlaw.runs.io` pass the **line number in the file**
for
CSV (the header is line 1, so the first data row is line 2) and JSONL (first record = line 1). For DataFrames,
Parquet and TensorBoard sources it is the **1-based data row** (first data row = 1).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mixlaw.errors import InputError
from mixlaw.runs.validate import validate_table
from mixlaw.runs.values import (  # re-exported: these names lived here before the split
    _INTEGER_COLUMNS,
    _MIXTURE_ATOL,
    _NAME_RE,
    _NONNEG_COLUMNS,
    _NUMBER_MATCH,
    _NUMBER_RE,
    _STRING_COLUMNS,
    MAX_JSON_DEPTH,
    MAX_META_INT,
    MAX_TABLE_INT,
    MIXTURE_ROW_ATOL,
    PHASES,
    RUN_LEVEL_COLUMNS,
    SCHEMA_COLUMNS,
    _check_name,
    _check_text,
    _fail,
    _fmt,
    _is_domain_tokens,
    _is_missing,
    _is_unique_tokens,
    _json_clone,
    _short,
    _to_float,
    check_json_value,
    is_loss_column,
    is_weight_column,
    validate_schedule,
)

__all__ = [
    "Mixture",
    "RunMeta",
    "validate_table",
    "validate_schedule",
    "check_json_value",
    "SCHEMA_COLUMNS",
    "RUN_LEVEL_COLUMNS",
    "PHASES",
    "is_loss_column",
    "is_weight_column",
    "MIXTURE_ROW_ATOL",
    "MAX_TABLE_INT",
    "MAX_META_INT",
    "MAX_JSON_DEPTH",
]
_REEXPORTED = (_INTEGER_COLUMNS, _NAME_RE, _NONNEG_COLUMNS, _NUMBER_MATCH, _NUMBER_RE, _STRING_COLUMNS, _fail)
_REEXPORTED_FUNCS = (_is_domain_tokens, _is_unique_tokens)


# ------------------------------------------------------------------------------------------------------------
# Mixture


class Mixture(Mapping[str, float]):
    """An immutable mixture of named domains: non-negative weights that sum to one.

    Parameters
    ----------
    weights
        Mapping domain name -> weight. Weights must be finite and non-negative and sum to 1 within ``atol``;
        they
        are then divided by their sum so the stored weights sum to 1 (to rounding).
    atol
        Tolerance on the sum (default 1e-9). Table rows are checked at 1e-6 (``MIXTURE_ROW_ATOL``).

    Raises
    ------
    InputError
        Empty mixture, bad domain name, negative / non-finite weight, or a sum off by more than ``atol``.

    Examples
    --------
    >>> mix = Mixture({"general": 0.75, "code": 0.25})
    >>> mix["code"], mix.domains
    (0.25, ('general', 'code'))
    """

    __slots__ = ("_weights", "_hash")

    def __init__(self, weights: Mapping[str, float], *, atol: float = _MIXTURE_ATOL) -> None:
        if isinstance(weights, Mixture):
            weights = weights.to_dict()
        if not isinstance(weights, Mapping) or len(weights) == 0:
            raise InputError(f"expected a non-empty mapping domain -> weight, got {weights!r}")
        clean: dict[str, float] = {}
        for name, w in weights.items():
            _check_name(name, "domain")
            if isinstance(w, bool) or not isinstance(w, int | float | np.integer | np.floating):
                raise InputError(f"expected a number as the weight of domain {name!r}, got {w!r}")
            wf = float(w)
            if not math.isfinite(wf) or wf < 0:
                raise InputError(f"expected a finite non-negative weight for domain {name!r}, got {wf!r}")
            clean[name] = wf
        total = math.fsum(clean.values())
        if abs(total - 1.0) > atol:
            raise InputError(f"expected mixture weights summing to 1 (within {atol:g}), got sum {total!r}")
        self._weights: dict[str, float] = {k: v / total for k, v in clean.items()}
        # Equality ignores zero-weight domains: {"a": 1} and {"a": 1, "b": 0} are the same training mixture.
        self._hash = hash(frozenset((k, v) for k, v in self._weights.items() if v != 0.0))

    # Mapping protocol
    def __getitem__(self, domain: str) -> float:
        try:
            return self._weights[domain]
        except KeyError:
            raise KeyError(f"domain {domain!r} not in mixture {self.domains}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._weights)

    def __len__(self) -> int:
        return len(self._weights)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mixture):
            return {k: v for k, v in self._weights.items() if v != 0.0} == {
                k: v for k, v in other._weights.items() if v != 0.0
            }
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_hash"):
            raise AttributeError("Mixture is immutable")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: {v:.6g}" for k, v in self._weights.items())
        return f"Mixture({{{inner}}})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Mixture, (dict(self._weights),))

    @property
    def domains(self) -> tuple[str, ...]:
        """Domain names in insertion order."""
        return tuple(self._weights)

    def to_dict(self) -> dict[str, float]:
        """A plain ``{domain: weight}`` copy (JSON-ready)."""
        return dict(self._weights)

    def as_columns(self) -> dict[str, float]:
        """``{"w_<domain>": weight}`` as in the RunTable."""
        return {f"w_{k}": v for k, v in self._weights.items()}

    @classmethod
    def from_columns(cls, row: Mapping[str, Any], *, atol: float = MIXTURE_ROW_ATOL) -> Mixture | None:
        """Build a mixture from a row's ``w_<domain>`` entries; ``None`` if it has none or all are missing."""
        ws = {k[2:]: row[k] for k in row if is_weight_column(str(k))}
        present = {k: v for k, v in ws.items() if v is not None and not _is_missing(v)}
        if not present:
            return None
        return cls({k: float(v) for k, v in present.items()}, atol=atol)


# ------------------------------------------------------------------------------------------------------------
# RunMeta


@dataclass(frozen=True, eq=True)
class RunMeta:
    """Metadata of one run, stored once per run in the :class:`~mixlaw.runs.store.RunStore`.

    Parameters
    ----------
    run_id
        Unique run identifier.
    phase
        ``"pt"`` or ``"cpt"``.
    n_params, n_params_total
        Non-embedding and total parameter counts (``None`` = unknown); stored as ``int`` when integral, as a
        float otherwise (e.g. sizes digitised from a plot).
    mixture
        Training mixture (:class:`Mixture`, or a plain mapping that is validated into one; ``None`` =
        unknown).
    parent_run
        Run this one continues from (CPT).
    seed
        Random seed.
    schedule
        LR schedule: a spec dict (``Schedule.to_dict()``) or ``{"kind": "table", "lr": [lr_step0, lr_step1,
        ...]}``.
    meta
        Any JSON object (size name, tokenizer, ``unique_tokens_<domain>``, ...). Scalar entries appear as
        columns
        of the RunTable, so keys may not shadow RunTable columns.
    """

    run_id: str
    phase: str = "pt"
    n_params: int | float | None = None
    n_params_total: int | float | None = None
    mixture: Mixture | None = None
    parent_run: str | None = None
    seed: int | None = None
    schedule: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id.strip():
            raise InputError(f"expected a non-empty string run_id, got {_fmt(self.run_id)}")
        _check_text(self.run_id, "run_id")
        if self.phase not in PHASES:
            raise InputError(f"expected phase 'pt' or 'cpt', got {self.phase!r} for run {self.run_id!r}")
        for name in ("n_params", "n_params_total"):
            object.__setattr__(self, name, _as_size(getattr(self, name), name, self.run_id))
        object.__setattr__(self, "seed", _as_count(self.seed, "seed", self.run_id, nonneg=False))
        if self.mixture is not None and not isinstance(self.mixture, Mixture):
            object.__setattr__(self, "mixture", Mixture(self.mixture))
        if self.parent_run is not None and (not isinstance(self.parent_run, str) or not self.parent_run):
            raise InputError(f"expected a string parent_run, got {_fmt(self.parent_run)} for run {self.run_id!r}")
        if self.parent_run is not None:
            _check_text(self.parent_run, f"parent_run of run {self.run_id!r}")
        object.__setattr__(self, "schedule", validate_schedule(self.schedule))
        if not isinstance(self.meta, Mapping):
            raise InputError(f"expected a dict meta, got {type(self.meta).__name__} for run {self.run_id!r}")
        meta = _json_clone(dict(self.meta), "meta")
        for key in meta:
            if _reserved_column(key):
                raise InputError(
                    f"expected a meta key that is not a RunTable column, got {key!r} for run {self.run_id!r}"
                )
        object.__setattr__(self, "meta", meta)

    def __hash__(self) -> int:
        return hash(self.to_json())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (mixture as ``{domain: weight}``)."""
        return {
            "run_id": self.run_id,
            "phase": self.phase,
            "n_params": self.n_params,
            "n_params_total": self.n_params_total,
            "mixture": None if self.mixture is None else self.mixture.to_dict(),
            "parent_run": self.parent_run,
            "seed": self.seed,
            "schedule": self.schedule,
            "meta": self.meta,
        }

    def to_json(self) -> str:
        """Canonical JSON (sorted keys)."""
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunMeta:
        """Inverse of :meth:`to_dict`; unknown keys are an :class:`InputError`."""
        if not isinstance(d, Mapping):
            raise InputError(f"expected a run metadata object, got {type(d).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        extra = set(d) - known
        if extra:
            raise InputError(f"expected run metadata keys {sorted(known)}, got unknown {sorted(extra)}")
        kw = dict(d)
        if kw.get("mixture") is not None:
            kw["mixture"] = Mixture(kw["mixture"])
        if kw.get("meta") is None:
            kw["meta"] = {}
        return cls(**kw)

    @classmethod
    def from_json(cls, s: str) -> RunMeta:
        """Inverse of :meth:`to_json`."""
        try:
            d = json.loads(s)
        except ValueError as exc:
            raise InputError(f"expected run metadata JSON, got unparsable text ({exc})") from None
        return cls.from_dict(d)

    def merge(self, other: RunMeta) -> RunMeta:
        """Combine two descriptions of the same run; a field given on one side only is taken from it.

        Raises
        ------
        InputError
            If a field (or meta key) is given on both sides with different values.
        """
        conflicts = self.conflicts(other)
        if conflicts:
            raise InputError(f"expected consistent metadata for run {self.run_id!r}, got conflicting {conflicts[0]}")
        a, b = self.to_dict(), other.to_dict()
        merged = {k: (a[k] if a[k] is not None else b[k]) for k in a}
        if a["phase"] == "pt" and b["phase"] == "cpt":
            merged["phase"] = "cpt"
        merged["meta"] = {**b["meta"], **a["meta"]}
        return RunMeta.from_dict(merged)

    def conflicts(self, other: RunMeta) -> list[str]:
        """Human-readable list of fields given on both sides with different values."""
        out: list[str] = []
        a, b = self.to_dict(), other.to_dict()
        for k in a:
            if k in ("meta", "run_id"):
                continue
            if k == "phase":
                # "pt" is the default, so only an explicit disagreement on a CPT run counts when both are set.
                if a[k] != b[k] and a.get("parent_run") is not None and b.get("parent_run") is not None:
                    out.append(f"phase ({a[k]!r} vs {b[k]!r})")
                continue
            if a[k] is not None and b[k] is not None and a[k] != b[k]:
                out.append(f"{k} ({_short(a[k])} vs {_short(b[k])})")
        if a["run_id"] != b["run_id"]:
            out.insert(0, f"run_id ({a['run_id']!r} vs {b['run_id']!r})")
        for k in set(a["meta"]) & set(b["meta"]):
            if a["meta"][k] != b["meta"][k]:
                out.append(f"meta[{k!r}] ({_short(a['meta'][k])} vs {_short(b['meta'][k])})")
        return out


def _as_size(v: Any, name: str, run_id: str) -> int | float | None:
    """A parameter count: an int when integral, else a float (digitised data gives fractional counts)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
        raise InputError(f"expected a number {name}, got {v!r} for run {run_id!r}")
    fv = _to_float(v)
    if not math.isfinite(fv) or fv < 0:
        raise InputError(f"expected a finite non-negative {name}, got {_short(v)} for run {run_id!r}")
    return int(fv) if fv == round(fv) and abs(fv) < 2**53 else fv


def _as_count(v: Any, name: str, run_id: str, *, nonneg: bool) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
        raise InputError(f"expected an integer {name}, got {v!r} for run {run_id!r}")
    fv = _to_float(v)
    if not math.isfinite(fv) or fv != round(fv) or (nonneg and fv < 0):
        kind = "non-negative integer" if nonneg else "integer"
        raise InputError(f"expected a {kind} {name}, got {_short(v)} for run {run_id!r}")
    iv = int(v) if isinstance(v, int | np.integer) else int(fv)
    if abs(iv) > MAX_META_INT:
        raise InputError(f"expected an integer {name} with |{name}| < 2^63, got {_short(iv)} for run {run_id!r}")
    return iv


def _reserved_column(key: str) -> bool:
    return (
        key in ("run_id", "step", "tokens", "lr", "status", "message", "n_evals", "last_step", "schedule_kind")
        or key in RUN_LEVEL_COLUMNS
        or is_loss_column(key)
        or is_weight_column(key)
    )
