"""The one place where the fitting verbs (``mixlaw fit``, ``mixlaw validate``) turn their flags into the engine's
option groups (:class:`mixlaw.options.FitOptions`); the flags themselves are declared by each verb."""

from __future__ import annotations

from mixlaw.errors import InputError
from mixlaw.options import BootstrapOptions, FitOptions, ObjectiveOptions, SolverOptions, StartOptions

__all__ = ["fit_options"]

#: The flag of every option field a fitting verb sets (a bad value is reported under the flag the user typed).
FLAGS = {"loss": "--loss", "delta": "--delta", "n_random": "--n-starts", "n_polish": "--n-polish",
         "strategy": "--strategy", "resamples": "--bootstrap", "bootstrap_scheme": "--resample",
         "max_iter": "--max-iter", "seed": "--random-state"}  # fmt: skip


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
    ``--bootstrap --resample`` → bootstrap, ``--random-state`` → seed. Each group checks its fields; a bad value
    is one line that starts with the flag (``--n-polish: expected n_polish in [1, 100000], got 0``)."""
    try:
        return FitOptions(
            objective=ObjectiveOptions(loss=loss, delta=delta),
            starts=StartOptions(n_random=n_starts, n_polish=n_polish, strategy=strategy),
            solver=SolverOptions(max_iter=max_iter),
            bootstrap=BootstrapOptions(resamples=bootstrap, scheme=resample),
            seed=random_state,
        )
    except InputError as exc:
        flag = FLAGS.get(exc.column or "")
        if flag is None:
            raise
        raise InputError(f"{flag}: {str(exc).removesuffix(f' in {exc.column}')}") from None
