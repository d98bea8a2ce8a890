"""The one place where the fitting verbs (``mixlaw fit``, ``mixlaw validate``) turn their flags into the engine's
option groups (:class:`mixlaw.options.FitOptions`); the flags themselves are declared by each verb."""

from __future__ import annotations

from mixlaw.options import BootstrapOptions, FitOptions, ObjectiveOptions, SolverOptions, StartOptions

__all__ = ["fit_options"]


def fit_options(
    *,
    loss: str = "huber",
    delta: float | None = None,
    n_starts: int = 0,
    n_polish: int = 32,
    strategy: str = "screen",
    bootstrap: int = 0,
    resample: str = "auto",
    max_iter: int | None = None,
    random_state: int | None = None,
) -> FitOptions:
    """``--loss --delta`` → objective, ``--n-starts --n-polish --strategy`` → starts, ``--max-iter`` → solver,
    ``--bootstrap --resample`` → bootstrap, ``--random-state`` → seed (each group checks its fields)."""
    return FitOptions(
        objective=ObjectiveOptions(loss=loss, delta=delta),
        starts=StartOptions(n_random=n_starts, n_polish=n_polish, strategy=strategy),
        solver=SolverOptions(max_iter=max_iter),
        bootstrap=BootstrapOptions(resamples=bootstrap, scheme=resample),
        seed=random_state,
    )
