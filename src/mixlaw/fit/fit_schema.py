"""The typed schema of a fit JSON (``mixlaw fit --out``, :meth:`mixlaw.fit.FitResult.to_json`), checked before use.

A fit file carries ``"schema": "mixlaw.fit/<version>"``. This mixlaw writes and reads version
:data:`SCHEMA_VERSION`; a file of another version is refused with the reason (newer: upgrade mixlaw; older or
unknown: refit), never half-read. A file of this version is validated field by field with strict types (no
number from a string or a boolean, no list where an object belongs) before a :class:`FitResult` is built:

- ``params``: one finite number (or a list of finite numbers, for vector parameters) per parameter of the law —
  a fit whose parameters are not finite predicts nothing meaningful and is refused;
- ``input_ranges``: ``[min, max]`` of finite numbers (a NaN range would hide the extrapolation warning);
- ``objective``, ``delta``: finite; counts: integers ≥ 0; ``status``, ``loss``, ``fit_space``: their enums;
- ``calibration``: ``lo`` and ``hi`` present (numbers; NaN where nothing was scored); ``bootstrap.params``: one
  record per draw with every flat parameter of the law (a number, or ``null`` for a failed draw);
- sizes: at most :data:`MAX_RECORDS` starts and draws; nesting, duplicate keys and integer lengths are bounded
  by the reader (:func:`mixlaw.safeio.loads_json`).

Every failure is one :class:`~mixlaw.errors.InputError` line naming the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mixlaw.errors import InputError
from mixlaw.safeio import field_error

__all__ = ["MAX_RECORDS", "SCHEMA", "SCHEMA_VERSION", "check_fit_record"]

SCHEMA_VERSION = 1
SCHEMA = f"mixlaw.fit/{SCHEMA_VERSION}"
MAX_RECORDS = 2_000_000
"""Most start rows or bootstrap draws a fit file may hold."""

Finite = Annotated[float, Field(allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=10**15)]
Cell = float | int | str | bool | None


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow", frozen=True)


class _Calibration(_Strict):
    lo: float  # NaN where no held-out size was scored (the range of the calibrated axis is then unknown)
    hi: float
    inflation: Annotated[float, Field(ge=0)] = 1.0


class _Bootstrap(_Strict):
    n_resamples: Count
    n_failed: Count
    n_rescued: Count = 0
    status: str | None = None
    scheme: str | None = None
    fallback: str | None = None
    unit: str | None = None
    params: list[dict[str, float | None]] = Field(max_length=MAX_RECORDS)


class _FitRecord(_Strict):
    schema_: str = Field(alias="schema")
    law: str = Field(min_length=1, max_length=200)
    law_options: dict[str, Any] = Field(default_factory=dict)
    params: dict[str, Finite | list[Finite]] = Field(min_length=1)
    objective: Finite
    status: Literal["converged", "stalled", "max_iter", "failed", "unidentifiable"]
    message: str = ""
    n_points: Count
    target: str
    input_map: dict[str, str] = Field(default_factory=dict)
    loss: Literal["huber", "l2"]
    delta: Annotated[float, Field(allow_inf_nan=False, gt=0)]
    fit_space: Literal["log", "raw"]
    fingerprint: str
    input_ranges: dict[str, Annotated[list[Finite], Field(min_length=2, max_length=2)]] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    residual_sd: float | None = None  # NaN with as many parameters as rows
    identifiability: dict[str, Any] | None = None
    calibration: _Calibration | None = None
    starts: list[dict[str, Cell]] = Field(default_factory=list, max_length=MAX_RECORDS)
    bootstrap: _Bootstrap | None = None


_VERSION = re.compile(r"^mixlaw\.fit/(\d{1,6})$")


def check_fit_record(d: Any, source: str) -> None:
    """Validate a parsed fit JSON against :data:`SCHEMA`; one :class:`InputError` line naming the field.

    The law-dependent checks (every parameter of the law present, every bootstrap draw with every flat
    parameter) are :func:`check_against_law`, once the law is built.
    """
    if not isinstance(d, Mapping):
        raise InputError(f"expected a fit JSON object, got a JSON {type(d).__name__}", file=source)
    schema = d.get("schema")
    if schema != SCHEMA:
        m = _VERSION.match(schema) if isinstance(schema, str) else None
        if m and int(m.group(1)) > SCHEMA_VERSION:
            why = f"written by a newer mixlaw ({schema}); this one reads {SCHEMA}: upgrade mixlaw to read it"
        elif m:
            why = f"written by an older mixlaw ({schema}); this one reads {SCHEMA}: refit to update it"
        else:
            shown = repr(schema) if schema is None or isinstance(schema, str | int | float) else "a nested value"
            why = f"not a mixlaw fit (field 'schema' is {shown[:60]}, expected {SCHEMA!r})"
        raise InputError(f"cannot read this fit: {why}", file=source)
    try:
        _FitRecord.model_validate(d)
    except ValidationError as exc:
        raise field_error(exc, source) from None


def check_against_law(d: Mapping[str, Any], names: list[str], flat_names: list[str], source: str) -> None:
    """The record's parameters are the law's (``names``) and its bootstrap draws have every flat entry."""
    params = d["params"]
    missing = [n for n in names if n not in params]
    extra = [k for k in params if k not in names]
    if missing or extra:
        what = f"missing {missing}" if missing else f"unknown {extra[:5]}"
        raise InputError(f"field 'params': expected the law's parameters {names}, {what}", file=source)
    boot = d.get("bootstrap")
    if boot:
        for i, rec in enumerate(boot["params"]):
            lack = [n for n in flat_names if n not in rec]
            if lack:
                raise InputError(f"field 'bootstrap.params.{i}': expected every parameter {flat_names}, missing "
                                 f"{lack[:5]}", file=source)  # fmt: skip
