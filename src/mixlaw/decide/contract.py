"""The Decision contract: what every decision declares, takes and returns.

A decision turns a run table into an answer a team acts on (the critical mixture ratio, the mixture to train, the
probe runs to buy). Like a law, it is one small module with a registry entry (:mod:`mixlaw.decide.registry`):

- it declares its options once, as a frozen, validated dataclass (``Options``; ``__post_init__`` raises
  :class:`~mixlaw.errors.InputError` naming the field);
- :meth:`Decision.estimate` takes a run table and returns the point answers (:class:`Estimate`);
- :meth:`Decision.decide` returns the frozen :class:`DecisionResult`: a :class:`Status`, machine-readable
  :class:`Reason` codes, named :class:`Answer` values with their intervals, the data it rests on
  (:class:`DataBasis`), the health of the fits it uses (:class:`FitHealth`) and a decision-specific ``details``
  payload; ``to_json``/``from_json`` round-trip it exactly.

A decision that only writes :meth:`~Decision.estimate` gets intervals from the contract: the run-level bootstrap of
:mod:`mixlaw.fit.uncertainty.from_draws` re-evaluates it on resampled runs and counts the resamples that gave no
answer. A decision
whose intervals need more (paired draws, resampled fits) overrides :meth:`~Decision.decide`. The CLI (``mixlaw
decide``), the JSON output and the HTML report section read only this contract, so a decision registered from a
third-party package or a user's file gets all three with no other change.

Text is rendered from reason codes (:func:`render_reason`), never parsed: code branches on ``Reason.code`` and
``Status``, and a decision registers the template of each code it emits (:func:`reason`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from mixlaw.fit.uncertainty.from_draws import Interval, bootstrap_answers, interval_from_draws
from mixlaw.options import DEFAULT_SOLVER, IntervalOptions, SolverOptions

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "SCHEMA_VERSION",
    "Answer",
    "DataBasis",
    "Decision",
    "DecisionContext",
    "DecisionResult",
    "Estimate",
    "FitHealth",
    "NoOptions",
    "REASONS",
    "Reason",
    "Status",
    "reason",
    "render_reason",
    "unpinned",
]

#: Version of the JSON a :class:`DecisionResult` writes; :meth:`DecisionResult.from_json` refuses other versions.
SCHEMA_VERSION = 1


class Status(StrEnum):
    """How far a decision's answer can be acted on."""

    OK = "ok"
    """The data support the answer; its intervals are usable."""
    WEAK = "weak"
    """An answer with a caveat the reasons name (a weak interval, an extrapolation, a fit at a bound)."""
    NO_ANSWER = "no_answer"
    """The data do not determine an answer; the reasons say why."""

    def worst(self, other: Status) -> Status:
        """The less usable of two statuses."""
        order = (Status.OK, Status.WEAK, Status.NO_ANSWER)
        return max(self, other, key=order.index)


#: Reason code → ``str.format`` template of its text (filled from the reason's ``params``).
REASONS: dict[str, str] = {}


def reason(code: str, template: str) -> str:
    """Register the text template of a reason code (idempotent for the same template); returns the code."""
    known = REASONS.get(code)
    if known is not None and known != template:
        raise ValueError(f"reason code {code!r} is already registered with another text")
    REASONS[code] = template
    return code


INTERVAL_WEAK = reason("interval_weak", "{n_unusable} of {n_resamples} resamples of {answer} gave no answer")
NO_RESAMPLES = reason("no_resamples", "no intervals: no resamples were asked for")
ESTIMATE_MISSING = reason("estimate_missing", "no estimate of {answer}")
FIT_UNHEALTHY = reason("fit_unhealthy", "fit {name} ({law}) is {status}")
FIT_UNPINNED = reason("fit_unpinned", "fit {name} ({law}) is {verdict}: the data do not pin down {params} (weakest "
                      "direction {weakest}); answers that depend on them are not determined by the data")
FIT_AT_BOUNDS = reason("fit_at_bounds", "fit {name} ({law}) has {params} on a bound")


@dataclass(frozen=True)
class Reason:
    """A machine-readable reason: a registered ``code`` and the JSON-ready ``params`` its text is rendered from."""

    code: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def text(self) -> str:
        """The rendered sentence (:func:`render_reason`)."""
        return render_reason(self)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "params": dict(self.params), "text": self.text}


def render_reason(r: Reason) -> str:
    """The sentence of a reason: its code's template filled from its params (the code itself when unregistered)."""
    template = REASONS.get(r.code)
    if template is None:
        return r.code + (f" ({', '.join(f'{k}={v}' for k, v in r.params.items())})" if r.params else "")
    try:
        return template.format(**r.params)
    except (KeyError, IndexError, ValueError):
        return f"{r.code} ({dict(r.params)})"


@dataclass(frozen=True)
class Answer:
    """One named answer: its value (``None``: no answer), unit and interval."""

    name: str
    value: float | None
    unit: str = ""
    interval: Interval | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "value": _finite(self.value), "unit": self.unit,
            "interval": None if self.interval is None else self.interval.to_dict(),
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Answer:
        iv = d.get("interval")
        v = d.get("value")
        return cls(str(d["name"]), None if v is None else float(v), str(d.get("unit", "")),
                   None if iv is None else Interval.from_dict(iv))  # fmt: skip


@dataclass(frozen=True)
class DataBasis:
    """The data a decision rests on: rows, runs, the columns it read and a fingerprint of their content."""

    n_rows: int
    n_runs: int
    columns: tuple[str, ...] = ()
    fingerprint: str = ""

    @classmethod
    def of(cls, table: pd.DataFrame, columns: Sequence[str] | None = None) -> DataBasis:
        """The basis of ``table`` (``columns``: those the decision read; default every column)."""
        cols = tuple(c for c in (columns if columns is not None else table.columns) if c in table.columns)
        runs = int(table["run_id"].astype(str).nunique()) if "run_id" in table.columns else len(table)
        h = hashlib.sha256()
        for c in cols:
            h.update(str(c).encode())
            h.update(table[c].astype(str).str.cat(sep="\x1f").encode())
        return cls(len(table), runs, cols, h.hexdigest()[:16])


@dataclass(frozen=True)
class FitHealth:
    """The health of one fit a decision uses: its status and what the data do not pin down.

    ``identifiability`` is the fit's own verdict (:mod:`mixlaw.fit.uncertainty.identify`): ``"ok"``, ``"weak"``
    (a direction determined only weakly, or a parameter running off to where the data no longer constrain it) or
    ``"unidentifiable"``; ``""`` when the fit did not say. ``weakest`` is the least determined direction,
    ``running_off`` the parameters the data do not bound, ``at_bounds`` those on a declared bound.
    """

    name: str
    law: str
    status: str
    identifiable: bool | None = None
    at_bounds: tuple[str, ...] = ()
    identifiability: str = ""
    weakest: str = ""
    running_off: tuple[str, ...] = ()
    weak: tuple[str, ...] = ()
    moves_answer: bool = True
    """Whether the decision reads the fit where what the data do not pin down moves its predictions: ``False``
    when profiling every unpinned parameter over its plausible range moves no prediction the decision uses beyond
    twice the noise (:meth:`assess` with ``at``); such a fit is reported, and does not weaken the decision."""

    @classmethod
    def of(cls, name: str, result: Any) -> FitHealth:
        """The health of a :class:`~mixlaw.fit.FitResult` (read through its status, identifiability and bounds)."""
        info = dict(getattr(result, "identifiability", None) or {})
        verdict = str(info.get("status", ""))
        at_bounds = getattr(result, "at_bounds", None)
        return cls(
            name=name,
            law=str(getattr(result, "law_name", "")),
            status=str(getattr(result, "status", "")),
            identifiable=None if not verdict else verdict != "unidentifiable",
            at_bounds=tuple(at_bounds()) if callable(at_bounds) else (),
            identifiability=verdict,
            weakest=str(info.get("weakest", "") or ""),
            running_off=tuple(str(p) for p in info.get("running_off", ()) or ()),
            weak=tuple(str(p) for p in (*info.get("undetermined", ()), *info.get("weak", ()))),
        )

    @classmethod
    def assess(
        cls, name: str, law: Any, x: Mapping[str, Any], y: Any, params: Mapping[str, Any], status: str = "converged",
        at: Mapping[str, Any] | None = None,
    ) -> FitHealth:
        """The health of a fit known only by its parameters and the rows it was fitted to (an engine that keeps
        no :class:`~mixlaw.fit.FitResult`, e.g. the CMR's profiled curve fits): the identifiability verdict of
        :func:`mixlaw.fit.uncertainty.identify.assess` at ``params`` on ``x``, ``y`` (rank and conditioning of the
        column-scaled Jacobian), the parameters on a declared bound, and those the data do not bound
        (:func:`mixlaw.fit.uncertainty.profile.loose_parameters`, scanned when there are more rows than
        parameters) — the same verdict :meth:`of` reads from a fit that made it itself.

        ``at``: the inputs the decision evaluates the fit at. When given, an unpinned fit is profiled there
        (:func:`mixlaw.fit.uncertainty.profile.profile_envelope`: each unpinned parameter over the range the data
        allow, the others at the estimate); ``moves_answer`` is false when no prediction moves beyond twice the
        residual noise. Inside the fitted rows that is the rule (the data do not see the direction); where the
        decision extrapolates it is the question. Without ``at``, or without a noise estimate, it is true."""
        from mixlaw.decide.health import assess_fit

        return assess_fit(cls, name, law, x, y, params, status, at)

    @property
    def pinned(self) -> bool:
        """Whether the data pin the fit down (no weak or unidentified direction, nothing running off)."""
        return self.identifiability not in ("weak", "unidentifiable") and self.identifiable is not False and not (
            self.running_off
        )

    @property
    def healthy(self) -> bool:
        return self.status == "converged" and self.pinned and not self.at_bounds

    def reason(self) -> Reason | None:
        """Why this fit qualifies a decision (``None`` when healthy): what the data do not pin down first."""
        if self.healthy:
            return None
        if not self.pinned:
            loose = self.running_off or self.weak
            return Reason(FIT_UNPINNED, {"name": self.name, "law": self.law,
                                         "verdict": self.identifiability or "unidentifiable",
                                         "params": ", ".join(loose) or "some parameters",
                                         "weakest": self.weakest or "unknown"})  # fmt: skip
        if self.at_bounds:
            return Reason(FIT_AT_BOUNDS, {"name": self.name, "law": self.law, "params": ", ".join(self.at_bounds)})
        return Reason(FIT_UNHEALTHY, {"name": self.name, "law": self.law, "status": self.status})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, f: Mapping[str, Any]) -> FitHealth:
        return cls(str(f["name"]), str(f["law"]), str(f["status"]), f.get("identifiable"),
                   tuple(f.get("at_bounds", ())), str(f.get("identifiability", "")), str(f.get("weakest", "")),
                   tuple(f.get("running_off", ())), tuple(f.get("weak", ())),
                   bool(f.get("moves_answer", True)))  # fmt: skip


def unpinned(fits: Sequence[FitHealth]) -> tuple[Reason, ...]:
    """The :data:`FIT_UNPINNED` reasons of the fits the data do not pin down where the decision reads them
    (``moves_answer``): a decision resting on one is weak."""
    return tuple(r for f in fits if not f.pinned and f.moves_answer for r in (f.reason(),) if r is not None)


@dataclass(frozen=True)
class Estimate:
    """What :meth:`Decision.estimate` returns: point answers and what qualifies them."""

    values: Mapping[str, float | None]
    status: Status = Status.OK
    reasons: tuple[Reason, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    fits: tuple[FitHealth, ...] = ()
    units: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NoOptions:
    """The options of a decision that has none."""


@dataclass(frozen=True)
class DecisionContext:
    """What the caller sets for every decision: solver effort, intervals and a progress callback."""

    solver: SolverOptions = DEFAULT_SOLVER
    intervals: IntervalOptions = IntervalOptions()
    progress: Callable[[str, int, int], None] | None = None


def _finite(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _jsonable(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        return _finite(v.item())
    if isinstance(v, float):
        return _finite(v)
    if v is None or isinstance(v, (str, int, bool)):
        return v
    return str(v)


@dataclass(frozen=True)
class DecisionResult:
    """The frozen result of every decision (module docstring)."""

    decision: str
    status: Status
    answers: tuple[Answer, ...]
    reasons: tuple[Reason, ...] = ()
    data: DataBasis | None = None
    fits: tuple[FitHealth, ...] = ()
    options: Any = field(default_factory=dict)
    """The decision's options (given as its dataclass or a mapping; stored as their JSON mapping)."""
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", MappingProxyType(dict(_jsonable(self.options))))
        object.__setattr__(self, "details", MappingProxyType(dict(_jsonable(self.details))))

    def answer(self, name: str) -> Answer:
        """The answer called ``name`` (``KeyError`` otherwise)."""
        for a in self.answers:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def reason_codes(self) -> tuple[str, ...]:
        return tuple(r.code for r in self.reasons)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the shape of ``--json``)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "decision": self.decision,
            "status": self.status.value,
            "reasons": [r.to_dict() for r in self.reasons],
            "answers": [a.to_dict() for a in self.answers],
            "data": None if self.data is None else _jsonable(self.data),
            "fits": [_jsonable(f) for f in self.fits],
            "options": dict(self.options),
            "details": _plain(self.details),
        }

    def to_json(self, **dumps: Any) -> str:
        """JSON text; :meth:`from_json` reads it back to an equal result."""
        return json.dumps(self.to_dict(), allow_nan=False, **dumps)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DecisionResult:
        from mixlaw.errors import InputError

        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise InputError(f"expected a decision result of schema version {SCHEMA_VERSION}, got {version!r}",
                             column="schema_version")  # fmt: skip
        try:
            data = d.get("data")
            return cls(
                decision=str(d["decision"]),
                status=Status(d["status"]),
                answers=tuple(Answer.from_dict(a) for a in d["answers"]),
                reasons=tuple(Reason(str(r["code"]), dict(r.get("params", {}))) for r in d.get("reasons", ())),
                data=None if data is None else DataBasis(
                    int(data["n_rows"]), int(data["n_runs"]), tuple(data.get("columns", ())),
                    str(data.get("fingerprint", ""))),
                fits=tuple(FitHealth.from_dict(f) for f in d.get("fits", ())),
                options=dict(d.get("options", {})),
                details=dict(d.get("details", {})),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"expected a decision result, got a malformed one ({type(exc).__name__}: {exc})") from None

    @classmethod
    def from_json(cls, text: str) -> DecisionResult:
        return cls.from_dict(json.loads(text))


def _plain(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


class Decision(ABC):
    """Base class of every decision (module docstring). Subclass, set the class attributes, write
    :meth:`estimate` (and, for intervals of your own, :meth:`decide`), and decorate with
    :func:`mixlaw.decide.registry.register_decision`."""

    name: ClassVar[str] = ""
    """Registry name (``mixlaw decide NAME``)."""
    summary: ClassVar[str] = ""
    """One line for ``mixlaw decisions``."""
    Options: ClassVar[type] = NoOptions
    """Frozen dataclass of the decision's options (validated in ``__post_init__``)."""
    columns: ClassVar[tuple[str, ...] | None] = None
    """Columns the decision reads (for :class:`DataBasis`; ``None``: all)."""
    needs_table: ClassVar[bool] = True
    """False for a decision that plans from its options alone (the probe planner): it is called with ``None``."""

    @abstractmethod
    def estimate(self, table: pd.DataFrame, options: Any, ctx: DecisionContext) -> Estimate:
        """The point answers on ``table``."""

    def decide(self, table: pd.DataFrame, options: Any, ctx: DecisionContext) -> DecisionResult:
        """The result: :meth:`estimate` on the table, intervals from a bootstrap over runs (``ctx.intervals``)."""
        import numpy as np

        est = self.estimate(table, options, ctx)
        names = [k for k, v in est.values.items() if v is not None]
        iv_opts = ctx.intervals
        intervals: dict[str, Interval | None] = {}
        reasons = list(est.reasons)
        status = est.status
        if iv_opts.resamples > 0 and names and status is not Status.NO_ANSWER and table is not None:
            rng = np.random.default_rng(iv_opts.seed)

            def statistic(t: pd.DataFrame) -> Mapping[str, float | None]:
                return self.estimate(t, options, ctx).values

            draws = bootstrap_answers(table, statistic, names, iv_opts.resamples, rng, progress=ctx.progress)
            for j, n in enumerate(names):
                iv = interval_from_draws(draws[:, j], est.values[n], iv_opts.level, iv_opts.method)
                intervals[n] = iv
                if iv is None or iv.weak:
                    bad = iv_opts.resamples if iv is None else iv.n_unusable
                    reasons.append(Reason(INTERVAL_WEAK, {"answer": n, "n_unusable": bad,
                                                          "n_resamples": iv_opts.resamples}))  # fmt: skip
                    status = status.worst(Status.WEAK)
        for f in est.fits:
            why = f.reason()
            if why is not None:
                reasons.append(why)
                status = status.worst(Status.WEAK)
        answers = tuple(
            Answer(k, None if v is None else float(v), est.units.get(k, ""), intervals.get(k))
            for k, v in est.values.items()
        )
        return DecisionResult(
            decision=self.name, status=status, answers=answers, reasons=tuple(reasons),
            data=None if table is None else DataBasis.of(table, self.columns), fits=est.fits, options=options,
            details=est.details,
        )  # fmt: skip
