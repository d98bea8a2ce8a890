"""Several domains side by side: the options are checked once, in the caller's process, into a frozen
:class:`~mixlaw.decide.cmr.main.CMRRequest` per domain, and that typed request is what a worker receives."""

from __future__ import annotations

import dataclasses
import math
import pickle

import pytest

from mixlaw.decide.cmr import CMRSettings, critical_mixture_ratio, critical_mixture_ratio_by_domain
from mixlaw.decide.cmr.main import CMRRequest
from mixlaw.design.simulate_cmr import simulate_cmr_runs
from mixlaw.errors import InputError
from mixlaw.options import SolverOptions

UNIT = 2e8
P460 = {"alpha4": 0.22524761, "s4": 0.26944345, "beta3": -0.48139982}  # laws.md §6.6


def test_bad_options_fail_in_the_caller_before_any_worker() -> None:
    runs = simulate_cmr_runs((0.125, 0.25, 0.5), P460, token_unit=UNIT, random_state=0)
    with pytest.raises(InputError, match="unexpected keyword argument 'epsilom'"):
        critical_mixture_ratio_by_domain(runs, general_eval="general", domain_evals=["code"], epsilom=0.1)
    with pytest.raises(InputError, match="epsilon"):
        critical_mixture_ratio_by_domain(runs, general_eval="general", domain_evals=["code"],
                                         settings=CMRSettings(epsilon=-1.0))
    with pytest.raises(InputError, match="ratio-column"):
        critical_mixture_ratio_by_domain(runs, general_eval="general", domain_evals=["code", "legal"],
                                         ratio_column="w_code")  # fmt: skip


def test_the_request_is_frozen_and_travels_whole() -> None:
    req = CMRRequest(general_eval="general", domain_eval="code", sensitivity_lambdas=[100, math.inf],  # type: ignore[arg-type]
                     settings=CMRSettings(epsilon=0.02, solver=SolverOptions(max_iter=4)))  # fmt: skip
    assert req.sensitivity_lambdas == (100.0, math.inf)  # a sequence given as a list is kept as a tuple
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.bootstrap = 10  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        req.settings.epsilon = 0.1  # type: ignore[misc]
    back = pickle.loads(pickle.dumps(req))  # what a worker process receives
    assert back == req and back.settings == req.settings and back.settings.solver.max_iter == 4
    assert req.settings.epsilon == 0.02 and req.settings.lagrange_mult == math.inf


def test_by_domain_in_process_is_the_single_domain_decision_with_the_spawned_seed() -> None:
    """One worker: the same decision as :func:`critical_mixture_ratio` with the domain's spawned generator."""
    import numpy as np

    runs = simulate_cmr_runs((0.125, 0.2, 0.25, 1 / 3, 0.5), P460, token_unit=UNIT, noise=1e-5, random_state=1)
    kw = dict(settings=CMRSettings(token_unit=UNIT), bootstrap=3, sensitivity_lambdas=(math.inf,),
              sensitivity_epsilons=())  # fmt: skip
    (got,) = critical_mixture_ratio_by_domain(runs, general_eval="general", domain_evals=["code"], workers=1,
                                              random_state=7, **kw).values()  # type: ignore[arg-type]  # fmt: skip
    (seed,) = np.random.SeedSequence(7).spawn(1)
    want = critical_mixture_ratio(runs, general_eval="general", domain_eval="code",
                                  random_state=np.random.default_rng(seed), **kw)  # type: ignore[arg-type]  # fmt: skip
    assert [s.cmr for s in got.sizes] == [s.cmr for s in want.sizes]
    assert [s.ci for s in got.sizes] == [s.ci for s in want.sizes] and got.sizes[0].ci is not None
