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
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError

__all__ = [
    "Mixture",
    "RunMeta",
    "validate_table",
    "SCHEMA_COLUMNS",
    "RUN_LEVEL_COLUMNS",
    "PHASES",
    "is_loss_column",
    "is_weight_column",
    "MIXTURE_ROW_ATOL",
]

PHASES = ("pt", "cpt")
#: Tolerance on a table row's mixture weights summing to 1 (the :class:`Mixture` itself uses 1e-9).
MIXTURE_ROW_ATOL = 1e-6
_MIXTURE_ATOL = 1e-9

#: Canonical columns and their units.
SCHEMA_COLUMNS: dict[str, str] = {
    "run_id": "run identifier",
    "step": "optimiser step",
    "tokens": "tokens",
    "lr": "learning rate",
    "loss": "nats/token",
    "loss_<evalset>": "nats/token",
    "n_params": "non-embedding parameters",
    "n_params_total": "parameters incl. embeddings",
    "w_<domain>": "mixture weight",
    "phase": "pt | cpt",
    "parent_run": "run identifier",
    "seed": "integer",
    "schedule": "JSON object",
    "unique_tokens_<domain>": "tokens",
    "tokens_<domain>": "tokens",
    "compute_flops": "FLOP",
}

#: Columns that describe a run and must be constant within it (``w_*`` and ``unique_tokens_*`` too).
RUN_LEVEL_COLUMNS = ("n_params", "n_params_total", "phase", "parent_run", "seed", "schedule")
_STRING_COLUMNS = ("run_id", "phase", "parent_run", "schedule")
_NONNEG_COLUMNS = ("step", "tokens", "lr", "n_params", "n_params_total", "compute_flops")
_INTEGER_COLUMNS = ("step", "seed")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+\-]+$")
#: Largest |value| of an integer column (``step``, ``seed``) read from a table: every value passes through float64,
#: which holds integers exactly only below 2^53 (a larger step would be rounded, one >= 2^63 would wrap).
MAX_TABLE_INT = 2**53 - 1
#: Largest |value| of an integer stored in run metadata (SQLite and NumPy integers are signed 64-bit).
MAX_META_INT = 2**63 - 1
#: Deepest nesting of a JSON value (schedule, meta) that is accepted.
MAX_JSON_DEPTH = 32
# Number-like text: decimal/scientific numbers and the words Python's float() reads as nan / inf.
# ASCII only: Python's float() and \d also read other scripts' digits ('١٢٣' -> 123), which no log means as a number.
_NUMBER_RE = r"(?a)^\s*[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|nan|NaN|NAN|inf|Inf|INF|infinity|Infinity)\s*$"
_NUMBER_MATCH = re.compile(_NUMBER_RE).match


def is_loss_column(name: str) -> bool:
    """True for ``loss`` and ``loss_<evalset>``."""
    return name == "loss" or (name.startswith("loss_") and len(name) > 5)


def is_weight_column(name: str) -> bool:
    """True for ``w_<domain>``."""
    return name.startswith("w_") and len(name) > 2


def _is_unique_tokens(name: str) -> bool:
    return name.startswith("unique_tokens_") and len(name) > len("unique_tokens_")


def _is_domain_tokens(name: str) -> bool:
    return name.startswith("tokens_") and len(name) > len("tokens_")


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError(f"expected a {what} name of letters, digits, '_', '.', '+' or '-', got {name!r}")
    return name


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


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------------------------------------------------
# RunMeta


def check_json_value(obj: Any, what: str) -> None:
    """Refuse a value the store could write but not read back: nesting deeper than :data:`MAX_JSON_DEPTH`,
    integers beyond signed 64 bits, non-finite floats, text that is not encodable as UTF-8 (lone surrogates),
    non-string keys and non-JSON types. Iterative, so a deeply nested value cannot exhaust the stack."""
    stack: list[tuple[Any, int, str]] = [(obj, 0, what)]
    while stack:
        v, depth, path = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise InputError(f"expected {what} nested at most {MAX_JSON_DEPTH} levels deep, got deeper at {path}")
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, int | np.integer):
            if abs(int(v)) > MAX_META_INT:
                raise InputError(f"expected integers with |value| < 2^63 in {what}, got {_fmt(int(v))} at {path}")
        elif isinstance(v, float | np.floating):
            if not math.isfinite(float(v)):
                raise InputError(f"expected finite numbers in {what}, got {float(v)!r} at {path}")
        elif isinstance(v, str):
            _check_text(v, f"{what} at {path}")
        elif isinstance(v, list | tuple):
            stack.extend((x, depth + 1, f"{path}[{i}]") for i, x in enumerate(v))
        elif isinstance(v, Mapping):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise InputError(f"expected string keys in {what}, got {_fmt(k)} at {path}")
                _check_text(k, f"{what} key at {path}")
                stack.append((x, depth + 1, f"{path}.{k}"[:200]))
        else:
            raise InputError(f"expected JSON values (numbers, text, lists, objects) in {what}, got {type(v).__name__}")


def _check_text(v: str, what: str) -> None:
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"expected UTF-8 text in {what}, got a lone surrogate {v[exc.start]!r}") from None


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON: {type(v).__name__}")


def _json_clone(obj: Any, what: str) -> Any:
    check_json_value(obj, what)
    try:
        return json.loads(json.dumps(obj, allow_nan=False, sort_keys=True, default=_json_default))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InputError(f"expected JSON-serialisable {what}, got {_fmt(obj)} ({exc})") from None


def validate_schedule(schedule: Any) -> dict[str, Any] | None:
    """Check a schedule: ``None``, a spec dict with a string ``kind``, or ``{"kind": "table", "lr": [...]}``.

    A table schedule holds the learning rate of every step ``0 .. len(lr) - 1`` (finite, non-negative).
    """
    if schedule is None:
        return None
    if hasattr(schedule, "to_dict") and not isinstance(schedule, Mapping):
        schedule = schedule.to_dict()
    if not isinstance(schedule, Mapping) or not isinstance(schedule.get("kind"), str):
        raise InputError(f"expected a schedule dict with a string 'kind', got {_fmt(schedule)}")
    clone = _json_clone(dict(schedule), "schedule")
    if clone["kind"] == "table":
        lr = clone.get("lr")
        if not isinstance(lr, list) or not lr:
            raise InputError(f"expected a non-empty list 'lr' in a table schedule, got {_fmt(lr)}")
        for i, v in enumerate(lr):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise InputError(f"expected a finite non-negative lr at step {i} of the table schedule, got {v!r}")
        clone["lr"] = [float(v) for v in lr]
    return clone


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


def _short(v: Any) -> str:
    try:
        s = repr(v)
    except ValueError:  # int repr over the interpreter's digit limit
        s = f"<an integer of about {int(v.bit_length() * 0.30103)} digits>"
    return s if len(s) <= 60 else s[:57] + "..."


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


def _to_float(v: Any) -> float:
    """``float(v)``; an integer too large for a float (``10**400``) is ``inf``, not an OverflowError."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _reserved_column(key: str) -> bool:
    return (
        key in ("run_id", "step", "tokens", "lr", "status", "message", "n_evals", "last_step", "schedule_kind")
        or key in RUN_LEVEL_COLUMNS
        or is_loss_column(key)
        or is_weight_column(key)
    )


# ------------------------------------------------------------------------------------------------------------
# The validator


def _where(source: str, row: int | None, column: str | None) -> str:
    return ":".join(str(p) for p in (source, row, column) if p is not None)


def _fail(expected: str, got: str, source: str, row: int | None, column: str | None) -> InputError:
    # InputError formats "... in FILE:ROW:COLUMN" itself and keeps file/row/column as attributes for callers.
    return InputError(f"expected {expected}, got {got}", file=source, row=row, column=column)


def _fmt(v: Any) -> str:
    """A short, printable rendering of a cell for a one-line message (never raises)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 128:
        return f"an integer of about {int(v.bit_length() * 0.30103) + 1} digits"
    try:
        s = repr(v)
    except RecursionError:
        return "a deeply nested value"
    s = s.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(s) <= 40:
        return s
    return s[:37] + ("...'" if isinstance(v, str) else "...")


def _all_str(obj: np.ndarray) -> bool:
    return all(type(v) is str for v in obj)


def _parse_numbers(obj: np.ndarray) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(float values, missing mask, position of the first non-numeric cell or None) of an object array.

    Empty cells (None, '', whitespace, pandas NA) are missing; numbers and number-like text (incl. 'nan',
    'inf')
    are values; anything else (other text, booleans, containers) is non-numeric.
    """
    n = len(obj)
    if n and _all_str(obj):  # the CSV path: vectorised, per-cell work only for the few unusual cells
        stripped = pd.Series(obj, dtype=object).str.strip()
        missing = (stripped == "").to_numpy(dtype=bool, copy=True)
        # The regex decides what is a number (pd.to_numeric / float() accept more, e.g. other scripts' digits).
        number = stripped.str.match(_NUMBER_RE).to_numpy(dtype=bool, na_value=False)
        not_number = np.flatnonzero(~missing & ~number)
        vals = pd.to_numeric(stripped.where(~missing & number, None), errors="coerce").to_numpy(
            dtype="float64", na_value=np.nan, copy=True
        )
        if len(not_number):
            return vals, missing, int(not_number[0])
        for j in np.flatnonzero(np.isnan(vals) & ~missing):
            v = str(stripped.iloc[int(j)])
            if _NUMBER_MATCH(v):
                vals[j] = float(v)
            else:
                return vals, missing, int(j)
        return vals, missing, None
    vals = np.empty(n, dtype="float64")
    missing = np.zeros(n, dtype=bool)
    for i, v in enumerate(obj):
        if isinstance(v, bool | np.bool_):
            return vals, missing, i
        if isinstance(v, int | float | np.integer | np.floating):
            vals[i] = _to_float(v)  # a 400-digit JSON integer is +-inf (refused as not finite), not an OverflowError
        elif isinstance(v, str):
            t = v.strip()
            if t == "":
                missing[i] = True
                vals[i] = math.nan
            elif _NUMBER_MATCH(t):
                vals[i] = float(t)
            else:
                return vals, missing, i
        elif _is_missing(v):
            missing[i] = True
            vals[i] = math.nan
        else:
            return vals, missing, i
    return vals, missing, None


def _numeric_column(
    s: pd.Series, name: str, source: str, rows: np.ndarray, *, allow_nan: bool, allow_missing: bool
) -> pd.Series:
    """Convert a column to float64, refusing non-numeric cells; returns floats with NaN for missing cells."""
    if pd.api.types.is_bool_dtype(s.dtype):
        i = 0
        raise _fail("a number", _fmt(s.iloc[i]), source, int(rows[i]), name)
    if pd.api.types.is_numeric_dtype(s.dtype):
        out = pd.Series(s.to_numpy(dtype="float64", na_value=np.nan), index=s.index, name=name)
        # A typed frame cannot tell an empty cell from NaN: NaN counts as missing only where that is allowed.
        missing = np.isnan(out.to_numpy()) if allow_missing else np.zeros(len(s), dtype=bool)
    else:
        obj = s.astype(object).to_numpy()
        vals, missing, bad_at = _parse_numbers(obj)
        if bad_at is not None:
            v = obj[bad_at]
            raise _fail("a number", _fmt(bool(v) if isinstance(v, np.bool_) else v), source, int(rows[bad_at]), name)
        out = pd.Series(vals, index=s.index, name=name)
    arr = out.to_numpy()
    bad = ~np.isfinite(arr)
    if bad.any():
        for j in np.flatnonzero(bad):
            i = int(j)
            if missing[i]:
                if not allow_missing and not allow_nan:
                    raise _fail("a value", "an empty cell", source, int(rows[i]), name)
            elif np.isinf(arr[i]) and allow_nan:
                # NaN marks a value that is not there; an infinite value cannot be stored or fitted.
                raise _fail("a finite number or NaN (--allow-nan admits NaN, not inf)", _fmt(float(arr[i])), source,
                            int(rows[i]), name)  # fmt: skip
            elif not allow_nan:
                raise _fail("a finite number", _fmt(float(arr[i])), source, int(rows[i]), name)
    return out


def _string_column(s: pd.Series, name: str, source: str, rows: np.ndarray, *, required: bool) -> pd.Series:
    obj = s.astype(object).to_numpy()
    if len(obj) and _all_str(obj):
        stripped = pd.Series(obj, dtype=object).str.strip()
        empty = (stripped == "").to_numpy(dtype=bool)
        if required and empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise _fail("a non-empty value", "an empty cell", source, int(rows[i]), name)
        res = stripped.to_numpy(dtype=object, copy=True)
        res[empty] = None
        _check_cells_text(res, name, source, rows)
        return pd.Series(res, index=s.index, name=name, dtype=object)
    out: list[str | None] = []
    for i, v in enumerate(obj):
        if _is_missing(v) or (isinstance(v, str) and v.strip() == ""):
            if required:
                raise _fail("a non-empty value", "an empty cell", source, int(rows[i]), name)
            out.append(None)
        elif isinstance(v, bool | np.bool_):
            raise _fail("a string", _fmt(bool(v)), source, int(rows[i]), name)
        elif isinstance(v, float | np.floating) and not math.isfinite(float(v)):
            raise _fail("a string", _fmt(float(v)), source, int(rows[i]), name)
        elif isinstance(v, float | np.floating) and float(v) == round(float(v)):
            out.append(str(int(v)))  # "3.0" from a numeric CSV column means run 3
        elif isinstance(v, str | float | np.floating) or (
            isinstance(v, int | np.integer) and int(v).bit_length() < 256
        ):
            out.append(str(v).strip())
        else:
            raise _fail("a string", _fmt(v), source, int(rows[i]), name)
    _check_cells_text(np.asarray(out, dtype=object), name, source, rows)
    return pd.Series(out, index=s.index, name=name, dtype=object)


def _check_cells_text(cells: np.ndarray, name: str, source: str, rows: np.ndarray) -> None:
    """Every text cell is encodable as UTF-8 (SQLite and every printer need that; JSON "\\ud800" is not)."""
    texts = [v for v in cells if isinstance(v, str)]
    try:
        "\x1f".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        for i, v in enumerate(cells):
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    raise _fail("UTF-8 text", f"{_fmt(v)} (a lone surrogate)", source, int(rows[i]), name) from None


def _looks_numeric(s: pd.Series) -> tuple[bool, int | None]:
    """(any numeric cell?, position of the first non-empty non-numeric cell or None)."""
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        return True, None
    obj = s.astype(object).to_numpy()
    _, missing, bad_at = _parse_numbers(obj)
    if bad_at is None:
        return bool((~missing).any()), None
    if _all_str(obj):
        any_num = bool(pd.Series(obj, dtype=object).str.match(_NUMBER_RE).any())
    else:
        any_num = any(_is_number_cell(v) for v in obj)
    return any_num, bad_at


def _is_number_cell(v: Any) -> bool:
    if isinstance(v, bool | np.bool_):
        return False
    if isinstance(v, int | float | np.integer | np.floating):
        return True
    return isinstance(v, str) and bool(_NUMBER_MATCH(v.strip()))


def validate_table(
    df: pd.DataFrame,
    source: str = "<table>",
    *,
    allow_nan: bool = False,
    allow_missing: bool = False,
    rows: Sequence[int] | np.ndarray | None = None,
    require_loss: bool = True,
) -> pd.DataFrame:
    """Validate a RunTable and return a clean copy with canonical dtypes.

    Every table that enters mixlaw (readers, :meth:`RunStore.ingest_table`, :meth:`RunStore.append_evals`)
    goes
    through this function. Checks, each raising one :class:`~mixlaw.errors.InputError`
    ``expected ..., got ... in FILE:ROW:COLUMN``:

    - columns: names are unique non-empty strings; ``run_id`` is present; at least one ``loss`` /
      ``loss_<set>``
      column (unless ``require_loss=False``); ``step`` is present, or absent with each run having exactly one
      row
      (then ``step = 0``);
    - numeric columns (canonical numeric columns, ``w_*``, ``loss*`` and every extra column holding numbers):
      every cell a number; finite (NaN / inf refused unless ``allow_nan``); empty cells refused unless
      ``allow_missing`` (sparse logs) or ``allow_nan``;
    - ``step``, ``tokens``, ``lr``, ``n_params``, ``n_params_total``, ``compute_flops``, ``unique_tokens_*``,
      ``tokens_*`` and losses non-negative; ``step`` and ``seed`` integers;
    - mixture weights ``w_*``: non-negative and summing to 1 within 1e-6 per row. A row whose weights are all
      empty
      has no recorded mixture (e.g. a base checkpoint trained elsewhere); some empty and some not is an error;
    - ``phase`` is ``pt`` or ``cpt`` (case-insensitive); ``schedule`` cells are JSON objects;
    - no duplicate ``(run_id, step)``.

    Extra columns pass through: numeric ones as float64, all-text ones as strings (per-run metadata in the
    store).

    Parameters
    ----------
    df
        The table (canonical column names; map foreign names first, see :func:`mixlaw.runs.io.read_table`).
    source
        File name (or label) used in messages.
    allow_nan
        Accept NaN / inf values and empty cells in numeric columns.
    allow_missing
        Accept empty cells (but not explicit NaN / inf) in numeric columns.
    rows
        The row number a user sees for each row of ``df`` (see the module docstring); default ``1 ..
        len(df)``.
    require_loss
        Require a loss column (``False`` for evaluation chunks that only carry e.g. ``lr``).

    Returns
    -------
    pandas.DataFrame
        A new frame with a fresh RangeIndex: ``run_id`` (str), ``step`` (int64), numeric columns float64,
        ``phase`` / ``parent_run`` / extra text columns as object (None where empty).
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(f"expected a table (pandas DataFrame), got {type(df).__name__} in {source}")
    n = len(df)
    row_nums = np.arange(1, n + 1) if rows is None else np.asarray(rows, dtype=np.int64)
    if len(row_nums) != n:
        raise InputError(f"expected {n} row numbers, got {len(row_nums)} in {source}")
    names: list[str] = []
    for c in df.columns:
        if not isinstance(c, str):
            c = str(c)
        c = c.strip()
        if not c:
            raise _fail("a column name", "an empty header cell", source, None, None)
        try:
            c.encode("utf-8")
        except UnicodeEncodeError:
            raise _fail("a UTF-8 column name", f"{_fmt(c)} (a lone surrogate)", source, None, None) from None
        if c in names:
            raise _fail("unique column names", f"{c!r} twice", source, None, c)
        names.append(c)
    df = df.copy()
    df.columns = names
    if "run_id" not in names:
        raise _fail(
            "a column 'run_id' (map one with --map run_id=COLUMN, or use --run-id / --run-id-from-row)",
            f"columns {_short(names)}",
            source,
            None,
            "run_id",
        )
    losses = [c for c in names if is_loss_column(c)]
    if require_loss and not losses:
        raise _fail(
            "a loss column 'loss' or 'loss_<evalset>' (map one with --map loss_<evalset>=COLUMN)",
            f"columns {_short(names)}",
            source,
            None,
            "loss",
        )
    if n == 0:
        raise InputError(f"expected at least one data row, got none in {source}")
    out: dict[str, pd.Series] = {}
    out["run_id"] = _string_column(df["run_id"], "run_id", source, row_nums, required=True)
    weight_cols: list[str] = []
    for c in names:
        if c == "run_id":
            continue
        s = df[c]
        if c in ("phase", "parent_run"):
            col = _string_column(s, c, source, row_nums, required=False)
            if c == "phase":
                for i, v in enumerate(col.to_numpy()):
                    if v is not None and v.lower() not in PHASES:
                        raise _fail("phase 'pt' or 'cpt'", _fmt(v), source, int(row_nums[i]), c)
                col = col.map(lambda v: v.lower() if isinstance(v, str) else None).astype(object)
            out[c] = col
            continue
        if c == "schedule":
            vals: list[str | None] = []
            for i, v in enumerate(s.astype(object).to_numpy()):
                if _is_missing(v) or (isinstance(v, str) and not v.strip()):
                    vals.append(None)
                    continue
                try:
                    parsed = json.loads(v) if isinstance(v, str) else v
                    sched = validate_schedule(parsed)
                except (ValueError, RecursionError, InputError) as exc:
                    msg = str(exc) if isinstance(exc, InputError) else "unparsable or too deeply nested JSON"
                    raise _fail("a JSON schedule object", f"{_fmt(v)} ({msg})", source, int(row_nums[i]), c) from None
                vals.append(json.dumps(sched, sort_keys=True))
            out[c] = pd.Series(vals, index=df.index, dtype=object)
            continue
        canonical_numeric = (
            c in ("step", "tokens", "lr", "n_params", "n_params_total", "seed", "compute_flops")
            or is_loss_column(c)
            or is_weight_column(c)
            or _is_unique_tokens(c)
            or _is_domain_tokens(c)
        )
        if not canonical_numeric:
            any_num, first_bad = _looks_numeric(s)
            if not any_num:
                out[c] = _string_column(s, c, source, row_nums, required=False)
                continue
            if first_bad is not None:
                raise _fail(
                    "a number (column holds numbers elsewhere; drop it with --drop if it is a label)",
                    _fmt(s.iloc[first_bad]),
                    source,
                    int(row_nums[first_bad]),
                    c,
                )
        if is_weight_column(c):
            _check_name(c[2:], "domain")
            weight_cols.append(c)
        col = _numeric_column(
            s, c, source, row_nums, allow_nan=allow_nan, allow_missing=allow_missing or is_weight_column(c)
        )
        arr = col.to_numpy()
        nonneg = c in _NONNEG_COLUMNS or is_loss_column(c) or is_weight_column(c) or _is_unique_tokens(c)
        nonneg = nonneg or _is_domain_tokens(c)
        if nonneg:
            with np.errstate(invalid="ignore"):
                neg = np.flatnonzero(arr < 0)
            if len(neg):
                i = int(neg[0])
                raise _fail("a non-negative value", _fmt(float(arr[i])), source, int(row_nums[i]), c)
        if c in _INTEGER_COLUMNS:
            with np.errstate(invalid="ignore"):
                frac = np.flatnonzero(np.isfinite(arr) & (arr != np.round(arr)))
                big = np.flatnonzero(np.abs(arr) > MAX_TABLE_INT)
            if len(frac):
                i = int(frac[0])
                raise _fail("an integer", _fmt(float(arr[i])), source, int(row_nums[i]), c)
            if len(big):
                i = int(big[0])
                raise _fail(
                    f"an integer {c} with |{c}| < 2^53 (larger ones do not survive float64 exactly)",
                    _fmt(float(arr[i])),
                    source,
                    int(row_nums[i]),
                    c,
                )
        out[c] = col
    # step: required unless one row per run
    if "step" not in out:
        counts = out["run_id"].value_counts()
        if (counts > 1).any():
            rid = counts.index[counts > 1][0]
            first = int(row_nums[np.flatnonzero(out["run_id"].to_numpy() == rid)[1]])
            raise _fail(
                "a column 'step' (or one row per run)",
                f"run {rid!r} with {int(counts[rid])} rows and no step column",
                source,
                first,
                "step",
            )
        out["step"] = pd.Series(np.zeros(n, dtype=np.int64), index=df.index)
    else:
        st = out["step"].to_numpy()
        if np.isnan(st).any():
            i = int(np.flatnonzero(np.isnan(st))[0])
            raise _fail("a step", "an empty cell", source, int(row_nums[i]), "step")
        out["step"] = pd.Series(st.astype(np.int64), index=df.index)
    # mixtures per row
    if weight_cols:
        W = np.column_stack([out[c].to_numpy() for c in weight_cols])
        isn = np.isnan(W)
        all_missing = isn.all(axis=1)
        partial = np.flatnonzero(isn.any(axis=1) & ~all_missing)
        if len(partial):
            i = int(partial[0])
            j = int(np.flatnonzero(isn[i])[0])
            raise _fail(
                "all or none of a row's mixture weights",
                "an empty cell",
                source,
                int(row_nums[i]),
                weight_cols[j],
            )
        sums = np.where(all_missing, 1.0, np.nansum(W, axis=1))
        off = np.flatnonzero(np.abs(sums - 1.0) > MIXTURE_ROW_ATOL)
        if len(off):
            i = int(off[0])
            raise _fail(
                f"mixture weights summing to 1 (within {MIXTURE_ROW_ATOL:g})",
                f"sum {float(sums[i])!r} over {', '.join(weight_cols)}",
                source,
                int(row_nums[i]),
                weight_cols[-1],
            )
    # duplicates
    key = pd.DataFrame({"run_id": out["run_id"].to_numpy(), "step": out["step"].to_numpy()})
    dup = key.duplicated(keep=False).to_numpy()
    if dup.any():
        second = key.duplicated(keep="first").to_numpy()
        i = int(np.flatnonzero(second)[0])
        rid, st = key.iloc[i]["run_id"], int(key.iloc[i]["step"])
        firsts = np.flatnonzero(dup & (key["run_id"].to_numpy() == rid) & (key["step"].to_numpy() == st))
        raise _fail(
            "one row per (run_id, step)",
            f"a second row for ({rid!r}, {st}) (first at row {int(row_nums[firsts[0]])})",
            source,
            int(row_nums[i]),
            "step",
        )
    order = ["run_id", "step"] + [c for c in names if c not in ("run_id", "step")]
    res = pd.DataFrame({c: out[c].to_numpy() for c in order})
    for c in res.columns:
        if c not in ("run_id",) and out[c].dtype == object:
            res[c] = res[c].astype(object)
    res["run_id"] = res["run_id"].astype(object)
    res.attrs["rows"] = [int(r) for r in row_nums]
    return res
