"""The one immutable result of a fit: named parameters in natural units, objective, status, every start."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, overload

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.laws import Law, get_law

SCHEMA = "mixlaw.fit/1"
"""The fit JSON schema this mixlaw writes and reads (:mod:`mixlaw.fit.fit_schema` validates it)."""


class FitStatus(StrEnum):
    """Outcome of a fit. ``converged``: the best start met the convergence test; ``max_iter``: the best start ran
    out of iterations, ``stalled``: it stopped in a flat valley where the objective no longer decreased measurably
    (in both cases the parameters are usable but not certified); ``failed``: no start gave a finite
    objective; ``unidentifiable``: the data do not determine some parameters (fewer rows than parameters, a
    constant input the law needs variation in; :mod:`mixlaw.fit.uncertainty.identify`), whatever the solver said."""

    CONVERGED = "converged"
    STALLED = "stalled"
    MAX_ITER = "max_iter"
    FAILED = "failed"
    UNIDENTIFIABLE = "unidentifiable"


@dataclass(frozen=True)
class FitResult:
    """Result of :func:`mixlaw.fit.fit_law`.

    Attributes
    ----------
    law_name, law_options
        The fitted law (rebuilt with :func:`mixlaw.laws.get_law`).
    params
        Best parameters in natural units: a float per scalar parameter, a list per vector or simplex parameter
        (``{"t": [0.2, 0.5, 0.3]}``), never internal (logit) values.
    objective
        Objective at ``params`` (Huber sum with ``delta``, or half the sum of squares, in ``fit_space``).
    status, message
        :class:`FitStatus` and a human sentence.
    starts
        One row per start: ``start_<p>`` and ``<p>`` (final) values (flat entries ``t[0]``, … for vectors),
        ``initial_objective``, ``objective``, ``status`` (``converged``, ``max_iter``, ``failed``, ``merged``, or
        ``screened`` for starts that were only evaluated), ``n_iter``.
    n_points, target, input_map, loss, delta, fit_space
        What was fitted and how.
    fingerprint
        SHA-256 of the fitted inputs, target and settings: equal fingerprints mean the same fit problem.
    input_ranges
        ``{input: [min, max]}`` of the fitted data (for extrapolation checks).
    bootstrap_params
        One row per successful bootstrap resample (columns ``law.flat_names``, natural units), or ``None``.
    n_bootstrap, n_failed_resamples, bootstrap_unit, n_rescued_resamples
        Bootstrap bookkeeping; ``bootstrap_unit`` is what was resampled (a column, ``"row"``, residuals, ...);
        ``n_failed_resamples`` counts the resamples still unusable after the rescue refit, ``n_rescued_resamples``
        those the rescue recovered. Every interval is printed with the unusable count beside it.
    settings
        Solver settings (grid size, random starts, polish count, tolerances, random_state).
    metrics
        Fit quality on the fitted points: ``r2``, ``mse``, ``mae``, ``mre`` (mean relative error), ``rmse_log``.
    """

    law_name: str
    law_options: dict[str, Any]
    params: dict[str, Any]
    objective: float
    status: FitStatus
    message: str
    starts: pd.DataFrame
    n_points: int
    target: str
    input_map: dict[str, str]
    loss: str
    delta: float
    fit_space: str
    fingerprint: str
    input_ranges: dict[str, list[float]]
    settings: dict[str, Any]
    metrics: dict[str, float] = field(default_factory=dict)
    bootstrap_params: pd.DataFrame | None = None
    n_bootstrap: int = 0
    n_failed_resamples: int = 0
    bootstrap_unit: str | None = None
    residual_sd: float | None = None
    """Residual standard deviation in the law's fit space, ``sqrt(Σ r² / (n − p))`` at the point estimate (the
    noise a prediction interval adds, :mod:`mixlaw.fit.uncertainty.intervals`); ``None`` in fits saved before it
    existed."""
    n_rescued_resamples: int = 0
    identifiability: dict[str, Any] | None = None
    """What the data pin down (:func:`mixlaw.fit.uncertainty.identify.assess`): ``status`` ok / weak / unidentifiable,
    ``reason``, ``condition``, ``rank``, ``undetermined``, ``weak``, ``solver_status``; ``None`` in older fits."""
    calibration: dict[str, Any] | None = None
    """The out-of-sample error model behind calibrated prediction intervals (:mod:`mixlaw.fit.evaluate.calibrate`), or
    ``None`` (fits without a bootstrap, or saved before it existed: their prediction intervals are ``bootstrap``)."""
    fitted_law: Law | None = field(default=None, repr=False, compare=False)
    """The law instance that was fitted (not serialised; a result read from JSON rebuilds it by name)."""

    # ------------------------------------------------------------------ derived
    @property
    def law(self) -> Law:
        if self.fitted_law is not None:
            return self.fitted_law
        return get_law(self.law_name, **self.law_options)

    @property
    def n_starts(self) -> int:
        return len(self.starts)

    @property
    def n_converged(self) -> int:
        return int((self.starts["status"] == "converged").sum()) if len(self.starts) else 0

    @property
    def converged(self) -> bool:
        return self.status is FitStatus.CONVERGED

    @property
    def interval_status(self) -> str:
        """``"ok"``, ``"weak: …"`` when more than 20 % of the bootstrap resamples are unusable (the intervals then
        describe a selection of them; :func:`mixlaw.fit.uncertainty.resampling.interval_status`), ``"none"`` without a
        bootstrap.
        Separate from :attr:`status`, which is the point fit's."""
        from mixlaw.fit.uncertainty.resampling import interval_status

        return interval_status(self.n_failed_resamples, self.n_bootstrap)

    def flat_params(self) -> dict[str, float]:
        """The parameters entry by entry: ``{"A": 1.0, "t[0]": 0.2, "t[1]": 0.8}`` (scalars keep their names)."""
        out: dict[str, float] = {}
        for name, v in self.params.items():
            if isinstance(v, list | tuple | np.ndarray):
                out.update({f"{name}[{j}]": float(x) for j, x in enumerate(v)})
            else:
                out[name] = float(v)
        return out

    def ci(self, level: float = 0.95) -> dict[str, tuple[float, float]]:
        """Percentile bootstrap intervals ``{entry: (lo, hi)}`` in natural units (empty without a bootstrap).

        Keys are the flat entries of :meth:`flat_params` (``t[0]``, … for a vector parameter)."""
        if self.bootstrap_params is None or len(self.bootstrap_params) == 0:
            return {}
        if not 0 < level < 1:
            raise InputError(f"expected a level in (0, 1), got {level}")
        q = [(1 - level) / 2, (1 + level) / 2]
        out: dict[str, tuple[float, float]] = {}
        for name in self.flat_params():
            lo, hi = np.quantile(self.bootstrap_params[name].to_numpy(), q)
            out[name] = (float(lo), float(hi))
        return out

    def bootstrap_se(self) -> dict[str, float]:
        """Bootstrap standard errors (empty without a bootstrap)."""
        if self.bootstrap_params is None or len(self.bootstrap_params) < 2:
            return {}
        return {n: float(self.bootstrap_params[n].std(ddof=1)) for n in self.flat_params()}

    def at_bounds(self) -> list[str]:
        """Names of parameter entries that sit on a bound of their declared range."""
        law = self.law
        return [n for n, v in self.flat_params().items() if law.spec(n).at_bound(v)]

    @overload
    def predict(self, data: pd.DataFrame | Mapping[str, Any], interval: None = None) -> np.ndarray: ...

    @overload
    def predict(
        self,
        data: pd.DataFrame | Mapping[str, Any],
        interval: float,
        *,
        kind: str = "confidence",
        method: str = "auto",
    ) -> pd.DataFrame: ...

    def predict(
        self,
        data: pd.DataFrame | Mapping[str, Any],
        interval: float | None = None,
        *,
        kind: str = "confidence",
        method: str = "auto",
    ) -> np.ndarray | pd.DataFrame:
        """Predicted target at the rows of ``data`` (law inputs looked up through ``input_map``).

        With ``interval`` (a level, e.g. ``0.95``): a tidy frame, one row per row of ``data``, with the law's
        inputs, ``predicted``, ``lo`` and ``hi`` — the ``kind`` interval (``"confidence"`` for the law's curve,
        ``"prediction"`` for a new observation) from the fit's bootstrap draws, as ``mixlaw.api.predict`` and
        ``mixlaw predict`` give it (:func:`mixlaw.fit.uncertainty.intervals.band`). A fit without bootstrap draws has no
        interval (an error says so: fit with ``bootstrap=N``)."""
        if interval is None:
            return self._point(data)
        from mixlaw.fit.uncertainty.intervals import band, inputs_of

        x = inputs_of(self, data)
        b = band(self, x, level=float(interval), kind=kind, method=method)  # type: ignore[arg-type]
        if b is None:
            raise InputError(
                f"expected a fit with bootstrap draws for a {interval:g} interval, got none (fit with bootstrap=N)"
            )
        out = pd.DataFrame({self.input_map.get(k, k): v for k, v in x.items()})
        out["predicted"] = self._point(data)
        out["lo"], out["hi"] = b.lo, b.hi
        out.attrs.update({"level": b.level, "kind": b.kind, "method": b.method, "n_draws": b.n_draws})
        return out

    def _point(self, data: pd.DataFrame | Mapping[str, Any]) -> np.ndarray:
        law = self.law
        x: dict[str, np.ndarray] = {}
        for name in law.inputs:
            col = self.input_map.get(name, name)
            if col not in data and name in data:
                col = name
            if col not in data:
                raise InputError(f"expected input column '{col}' for law '{law.name}', got {sorted(data)}")
            x[name] = np.asarray(data[col], dtype=np.float64)
        return np.asarray(law.evaluate(x, self.params), dtype=np.float64).reshape(-1)

    # ------------------------------------------------------------------ reporting
    def report(self) -> str:
        """A plain-text report: parameters (with intervals), objective, starts, flags."""
        law = self.law
        lines = [
            f"law        {law.name}: {law.formula}",
            f"citation   {law.citation}",
            f"target     {self.target} ({self.n_points} points, {self.loss} loss, delta={self.delta:g}, "
            f"{self.fit_space} space)",
            f"status     {self.status.value}: {self.message}",
            f"objective  {self.objective:.10g}",
            f"starts     {self.n_starts} ({self.n_converged} converged, "
            f"{int((self.starts['status'] == 'screened').sum())} screened only, "
            f"{int((self.starts['status'] == 'failed').sum())} failed)",
        ]
        if self.metrics:
            lines.append("fit        " + ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items()))
        if self.identifiability:
            from mixlaw.fit.uncertainty.identify import identify_summary

            lines.append(f"identify   {identify_summary(self.identifiability)}")
        ci = self.ci()
        unusable = f"   ({self.n_failed_resamples}/{self.n_bootstrap} resamples unusable)" if self.n_bootstrap else ""
        bounds = set(self.at_bounds())
        lines.append("parameters")
        for name, v in self.params.items():
            if isinstance(v, list | tuple):
                lines.append(f"  {name:<12} [{', '.join(f'{x:.6g}' for x in v)}]")
        for name, value in self.flat_params().items():
            s = f"  {name:<12} {value:.6g}"
            if name in ci:
                s += f"   95% CI [{ci[name][0]:.6g}, {ci[name][1]:.6g}]{unusable}"
            if name in bounds:
                s += f"   AT BOUND {law.spec(name).bounds_text()} — widen the bound or check the data"
            lines.append(s)
        if self.n_bootstrap:
            scheme = self.settings.get("bootstrap_scheme") or "runs"
            over = self.bootstrap_unit if scheme == "residuals" else f"{scheme}: over {self.bootstrap_unit}"
            lines.append(
                f"bootstrap  {self.n_bootstrap} resamples ({over}), {self.n_failed_resamples} unusable after "
                f"refitting ({self.n_rescued_resamples} rescued); intervals {self.interval_status}"
            )
            if self.settings.get("bootstrap_fallback"):
                lines.append(f"           auto: {self.settings['bootstrap_fallback']}")
        if self.residual_sd is not None:
            lines.append(f"noise      residual sd {self.residual_sd:.4g} in {self.fit_space} space")
        return "\n".join(lines)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        from mixlaw._provenance import provenance  # package version and git SHA of the code that fitted

        d: dict[str, Any] = {
            "schema": SCHEMA,
            "provenance": dict(provenance()),
            "law": self.law_name,
            "law_options": self.law_options,
            "params": self.params,
            "objective": self.objective,
            "status": self.status.value,
            "message": self.message,
            "n_points": self.n_points,
            "n_starts": self.n_starts,
            "n_converged": self.n_converged,
            "target": self.target,
            "input_map": self.input_map,
            "loss": self.loss,
            "delta": self.delta,
            "fit_space": self.fit_space,
            "fingerprint": self.fingerprint,
            "input_ranges": self.input_ranges,
            "settings": self.settings,
            "metrics": self.metrics,
            "residual_sd": self.residual_sd,
            "identifiability": self.identifiability,
            "calibration": self.calibration,
            "at_bounds": self.at_bounds(),
            "starts": _records(self.starts),
        }
        if self.bootstrap_params is not None:
            d["ci"] = {k: list(v) for k, v in self.ci().items()}
            d["bootstrap"] = {
                "n_resamples": self.n_bootstrap,
                "n_failed": self.n_failed_resamples,
                "n_rescued": self.n_rescued_resamples,
                "status": self.interval_status,
                "scheme": self.settings.get("bootstrap_scheme"),
                "fallback": self.settings.get("bootstrap_fallback"),  # why "auto" ran another scheme than runs
                "unit": self.bootstrap_unit,
                "params": _records(self.bootstrap_params),
            }
        return d

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=True)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "fit JSON") -> FitResult:
        """A fit from its JSON record, validated first (:mod:`mixlaw.fit.fit_schema`: schema version, strict
        types, finite parameters and ranges, the law's parameters and bootstrap columns); one line naming the
        field when it is not a valid fit of this schema version."""
        from mixlaw.fit.fit_schema import check_against_law, check_fit_record

        check_fit_record(d, source)
        try:
            law = get_law(d["law"], **dict(d.get("law_options", {})))
        except InputError:
            law = None  # an unregistered law (its --law-file not loaded): the record is read, the law built later
        except TypeError as exc:
            raise InputError(f"field 'law_options': expected the law's options, got {exc}", file=source) from None
        if law is not None:
            check_against_law(d, list(law.param_names), list(law.flat_names), source)
        try:
            boot = d.get("bootstrap")
            return cls(
                law_name=d["law"],
                law_options=dict(d.get("law_options", {})),
                params={k: _param_value(v) for k, v in d["params"].items()},
                objective=float(d["objective"]),
                status=FitStatus(d["status"]),
                message=d.get("message", ""),
                starts=pd.DataFrame.from_records(d.get("starts", [])),
                n_points=int(d["n_points"]),
                target=d["target"],
                input_map=dict(d.get("input_map", {})),
                loss=d["loss"],
                delta=float(d["delta"]),
                fit_space=d["fit_space"],
                fingerprint=d["fingerprint"],
                input_ranges={k: list(v) for k, v in d.get("input_ranges", {}).items()},
                settings=dict(d.get("settings", {})),
                metrics={k: float(v) for k, v in d.get("metrics", {}).items()},
                bootstrap_params=None if boot is None else pd.DataFrame.from_records(boot["params"]),
                n_bootstrap=0 if boot is None else int(boot["n_resamples"]),
                n_failed_resamples=0 if boot is None else int(boot["n_failed"]),
                bootstrap_unit=None if boot is None else boot["unit"],
                residual_sd=None if d.get("residual_sd") is None else float(d["residual_sd"]),
                n_rescued_resamples=0 if boot is None else int(boot.get("n_rescued", 0)),
                identifiability=None if d.get("identifiability") is None else dict(d["identifiability"]),
                calibration=None if d.get("calibration") is None else dict(d["calibration"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"expected a complete fit record, got a malformed one ({exc}) in {source}") from None

    @classmethod
    def from_json(cls, text: str, source: str = "fit JSON") -> FitResult:
        """A fit from JSON text: parsed strictly (:func:`mixlaw.safeio.loads_json`: duplicate keys, depth and
        integer sizes bounded), then :meth:`from_dict`."""
        from mixlaw.safeio import loads_json

        return cls.from_dict(loads_json(text, source), source)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FitResult):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]


def _param_value(v: Any) -> Any:
    """A JSON parameter value: a number, or a list of numbers (vector/simplex parameter)."""
    if isinstance(v, list):
        return [float(x) for x in v]
    return float(v)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    out = []
    for rec in df.to_dict(orient="records"):
        clean = {}
        for k, v in rec.items():
            if isinstance(v, np.generic):
                v = v.item()
            if isinstance(v, float) and math.isinf(v):
                v = None
            clean[str(k)] = v
        out.append(clean)
    return out
