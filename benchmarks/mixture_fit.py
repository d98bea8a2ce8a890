"""CAMEL fit and a bootstrap of the optimal mixture: mixlaw's batched engine against a plain scipy loop.

Data: the 7-domain SlimPajama table (``Explaining-Data-Mixing-Scaling-Laws``), the final checkpoint of every run at
sizes <= 937M, target ``openhermes_loss``. Law: ``camel`` with k = 3 intrinsic domains (28 free parameters).

- **mixlaw**: :func:`mixlaw.fit.fit_law` (the start design screened, the best starts polished in one batched solve)
  with ``bootstrap=B`` (the engine's one bootstrap over runs, all resamples in one batched solve), then the optimal
  mixture re-optimised for every resample.
- **scipy**: the same model written in numpy, ``scipy.optimize.least_squares`` (Huber, ``f_scale`` = 1e-3 on log
  residuals, as the engine) started from **the same starts** mixlaw polished, one start after the other; then ``B``
  resamples of the runs drawn the same way (multiplicities from the engine's ``resample_weights``), each refitted
  by ``least_squares`` from the point estimate, and
  the optimum re-optimised by the same optimiser as mixlaw's.

Both sides fit with the adaptive limit (mixlaw: ``max_iter=None``, the noise-scaled stall test of
:mod:`mixlaw.fit.solver.refine`; scipy: ``max_nfev`` = 3000 per fit). Prints both wall times, the objectives reached
(the
same Huber sum: scipy's ``cost`` with ``f_scale`` = δ equals the engine's objective, so they must agree for the
ratio to mean anything), the usable-resample count of both, the optima, the process CPU time of both sides
(``time.process_time()``, all threads; the scipy side's extrapolated parts scaled like its wall time), then
``wall_ratio=<scipy wall time / mixlaw wall time>`` and last ``ratio=<scipy CPU / mixlaw CPU>`` — wall times move
with the machine's load (until 2026-12-04 ``ratio=`` was the wall ratio and ``cpu_ratio=`` the CPU one).
``--quick K`` refits only ``K`` resamples on the scipy side and extrapolates its bootstrap time linearly to
``--bootstrap``; ``--quick-starts K`` polishes only ``K`` of its starts and scales that time (both said so in the
output).
Run: ``PYTHONPATH=src nice -n 5 python benchmarks/mixture_fit.py [--bootstrap 200] [--quick 20] [--quick-starts 8]``.

Measured on the shared 2-core machine, 2026-12-01, ``--bootstrap 200 --quick 10``:

- before the geodesic step rule (load 12-16): mixlaw 1608 s, point objective 0.0012863288 (stalled), 200 of 200
  resamples usable; scipy 1610 s (268 s for the 32 starts, 6.7 s per resample measured on 10, extrapolated to
  200), objective 0.0012831642; ``ratio=1.00``. The CAMEL rows crawled: the ∞-norm step cap was hijacked by
  coordinates whose Jacobian column had died (see :mod:`mixlaw.fit.solver.solve`).
- with the geodesic step rule (Moré-scaled damping ladder, geodesic acceleration, the old steps as candidates;
  commit "Solver: the old rule's two steps stay candidates", load 5-7): mixlaw **182 s**, point objective
  **0.0012831126** (4.0e-5 below scipy's; every row finished; status ``unidentifiable``: the identifiability
  check flags it, a component's K runs to 0), 200 of 200 resamples usable (all 200 through the rescue refit: the
  seeds sit where a component's derivatives underflow, so every resample's first solve fails at once); scipy
  2302 s (89 s for 10 resamples, extrapolated), 7 of 10 resamples converged; ``ratio=12.65``. An earlier commit
  of the same rule (without the old steps) measured mixlaw 287 s against scipy 4822 s at a heavier load,
  ``ratio=16.82``: the scipy side's time moves with the load (1610 s in the first run). The goal of 20 is not
  met.

- with the Jacobian repair (commit "Bootstrap resamples seeded at the CAMEL point no longer fail on their first
  iteration"). **Why every resample went through the rescue**: the point fit ends with ``K_0 = exp(-716.6)``, a
  subnormal number (``alpha_0`` = 366 carries the component). The law computes ``log K`` of ``K = exp(u)``;
  reverse mode differentiates ``log`` at a subnormal as ``1/K`` = inf, so at every resample's seed the Jacobian
  column of ``u_K0`` was ``inf`` at 197 of the 200 data points while every residual and the objective (1.24e-3 to
  1.36e-3) were finite. The solver's finiteness check (``finite`` on the gradient and ``JᵀΩJ``) then marked the row
  ``failed`` on iteration 1: the "edge" exception (a finite objective with overflowed derivatives stops as
  ``stalled``) needs more than 30 iterations of real descent, which is how the point fit itself had stopped there.
  The rescue then restarted from ``law.to_internal(params)``, which floored ``K_0`` at 1e-300: objective 4.3 instead
  of 1.28e-3, so every resample was refitted from a far-off start. Now such Jacobian entries are central
  differences (``mixlaw.fit.solver.steps.repair_jacobian``), ``to_internal`` keeps positive subnormals, and the rescue
  starts from the fitter's exact internal point. Two runs, both with other jobs on the 2 cores:

  - load 3.6-5.6: mixlaw **120.2 s** wall, 69.2 s CPU, objective 0.001283112, **200 of 200 resamples usable, 0
    through the rescue**; scipy 2616 s wall, 1324.6 s CPU (92.7 s for 10 resamples, extrapolated), objective
    0.0012831642 (mixlaw 4.07e-5 lower), 7 of 10 resamples converged; ``cpu_ratio=19.14``, ``ratio=21.77``.
  - with camel's ``<t_i, r>`` by einsum, load 4.0-6.3 (and this session's other measurements running beside the
    mixlaw side): mixlaw 221.0 s wall, **65.9 s CPU**, objective 0.0012831119, 200 of 200 usable, 0 rescued;
    scipy 2077 s wall, 1149.4 s CPU, same objective as before; ``cpu_ratio=17.45``, ``ratio=9.40`` (the mixlaw
    side's wall time doubled under the contention; its CPU time did not).

  - after the stalled-estimate re-polish (commit "Point fits: an estimate that stalled is re-polished once"), on a
    quiet machine (load 1.2, nothing else running): mixlaw **60.7 s** wall, 60.6 s CPU, objective 0.0012831119,
    200 of 200 usable, 0 rescued; scipy 1020.7 s wall, 1020.0 s CPU (206 s for the 32 starts, 40.7 s for 10
    resamples, extrapolated), objective 0.0012831642, 7 of 10 converged; **``cpu_ratio=16.82``, ``ratio=16.82``**.
    This is the figure to quote: the loaded runs above inflate the scipy side's wall time more than mixlaw's.

  Where mixlaw's CPU seconds go (one profiled run): the point fit 14 s, the bootstrap's batched solve of 200
  resamples 39 s (121 iterations with 100-200 rows active take 85 % of it; per iteration the 32 trial points of
  the damping ladder, the geodesic steps and the old rule's steps cost more than the Jacobian), re-optimising the
  optimum per resample 11.5 s (SLSQP, 9,800 objective evaluations with autograd). The ratio is 16.8 on a quiet
  machine (17-19 in CPU time under load): **the goal of 20 is not met**; the 21.77 of the first run is the load.

- issue 10 item 7, this session (2026-12-02). Re-profiled first (load 0.3-0.7, cProfile on): mixlaw 48.6 s CPU —
  point fit 10.1 s (32 rows, 562 iterations), bootstrap solve 27.3 s (200 rows, 310 iterations, 24,216
  row-iterations, 1.2 ms each), per-resample optimum 10.9 s; a replay of the bootstrap solve alone 29.8 s. Per
  iteration of 200 rows the Jacobian took 90 ms (two thirds of it the internal → natural map run on one copy of
  the parameters per data point), the 22 trial points and 10 geodesic evaluations about 85 ms together; of the
  accepted steps of the full ladder, 88 % were won by the rungs 0.1, 1 and 10. Two changes:

  - the Jacobian by the chain rule through the natural parameters (:func:`mixlaw.fit.solver.steps.split_jacobian`,
    equal to the one-pass Jacobian to 1e-11, overflowed columns still repaired): 90 → 55 ms per iteration;
  - the lazy ladder for resample refits (``ladder="lazy"``: the rungs 0.1, 1, 10 with their accelerations and
    the old steps first, the rungs 1e3, 1e6 only for rows those did not improve). Replay of the bootstrap solve:
    31.9 s (full ladder, chain-rule Jacobian) → **19.6 s** CPU, 23,318 row-iterations, 200 of 200 usable.

  **What the lazy ladder changes, and what it does not**: the resample fits are multimodal and stop on the
  noise-scaled stall test, so their ends depend on the path. Rounding alone (the chain-rule Jacobian, same
  ladder) moves the per-resample objective by up to 0.24 % and the per-resample optimum at 7B by more than 0.1 in
  some weight for 11 of 200 resamples (stackexchange's 2.5 % end 0.061 → 0.053, arxiv's median 0.065 → 0.007);
  the lazy ladder against the full one: up to ±4 % in objective (both directions; mean +1.6e-4 relative), 10 of
  200 optima moved by more than 0.1 (stackexchange's 2.5 % end 0.053 → 0.014, the other band ends within 0.035).
  So the band's ends are only as stable as that path dependence, with or without the lazy ladder; the point fit
  (full ladder) and its optimum are unchanged (objective 0.0012831119858 against 0.0012831119397: the rounding of
  the chain-rule Jacobian moves its path, 562 → 595 iterations, +3.6e-8 relative; optimum 0.220/0.566/0.214 the
  same).
  An attempt not taken: the point fit on the lazy ladder too (not measured on the other laws; it stays full).

  The benchmark with both changes (the last three runs also with the symmetric edge rule), ``--bootstrap 200
  --quick 10``; every run: mixlaw
  objective 0.001283112, 200 of 200 resamples usable, 0 rescued, point optimum arxiv 0.220 / c4 0.566 /
  stackexchange 0.214; scipy 0.0012831642 (mixlaw 4.07e-5 lower), 7 of 10 converged; the mixlaw band
  arxiv [0, 0.487], c4 [0, 0.877], commoncrawl [0, 0.788], stackexchange [0.014, 0.589], the rest [0, 0]:

  - load 3-4 (another engineer's suite beside it): mixlaw 107.2 s wall, 52.7 s CPU; scipy 1786 s wall, 1144.8 s
    CPU; ``cpu_ratio=21.73``, ``ratio=16.67``;
  - load 4-5 (this session's tests and other jobs beside the mixlaw side): mixlaw 244.7 s wall, 75.0 s CPU; scipy
    1771.6 s wall, 1102.2 s CPU; ``cpu_ratio=14.70``, ``ratio=7.24`` — contention inflates CPU time too;
  - load 3-4 falling to 0.5: mixlaw 72.8 s wall, 48.7 s CPU; scipy 1251.6 s wall, 1130.1 s CPU;
    ``cpu_ratio=23.21``, ``ratio=17.19``;
  - **quiet (load 0.5-1.0, nothing else of this session running)**: mixlaw **51.0 s** wall, 51.0 s CPU (60.7 s on
    main, quiet); scipy 1370.4 s wall, 1370.1 s CPU (218 s for the 32 starts, 57.6 s for 10 resamples,
    extrapolated ×20); **``cpu_ratio=26.84``, ``ratio=26.86``**.

  The figure to quote is the quiet one, with this caveat: the scipy side's own time moves between quiet runs
  (1020.7 s last session, 1370.4 s here: its 10 measured resamples took 40.7 s there and 57.6 s here, and the
  extrapolation multiplies that by 20). Against last session's scipy figure the same mixlaw time gives 20.0. So
  the goal of 20 is met on this run, and only just against the slower of the two scipy measurements; mixlaw's own
  gain is 60.7 → 51.0 s (−16 %), less than the replay of the bootstrap solve promised (29.8 → 19.6 s), because
  the point fit took 562 → 595 iterations (the Jacobian's rounding) and the per-resample optimum (about 11 s,
  SLSQP with autograd, 2 starts per resample) is unchanged. Not done: batching that re-optimisation.

- re-measured by the lead on main after the merge (commit 7d0a99a, load 1.0 falling to 0.1, nothing else running):
  mixlaw **52.82 s** wall, 53.1 s CPU, objective 0.001283112, 200 of 200 usable, 0 rescued, same point optimum and
  band as above; scipy 1172.52 s wall, 1171.6 s CPU (47.2 s for 10 resamples, extrapolated ×20), 7 of 10
  converged; **``cpu_ratio=22.08``, ``ratio=22.20``**. Three quiet runs of the scipy side now span 1020.7-1370.4 s
  (its 10 measured resamples 40.7-57.6 s); the same-run ratio is ≥ 20 in both quiet runs of this code (22.2, 26.9).

- issue 9, the noise-scaled stall test over two windows (``mixlaw.fit.solver.solve.UNITS_WINDOWS``; a new machine, AMD
  EPYC, on which the whole test suite takes about twice as long as before, so seconds are not comparable with the
  runs above; load < 1, nothing else running): mixlaw 63.07 s wall, 63.2 s CPU, objective 0.001283112, 200 of 200
  usable, 0 rescued, the same point optimum, band arxiv [0, 0.473], c4 [0, 0.820], commoncrawl [0, 0.559],
  stackexchange [0.038, 0.479]; scipy 1909.16 s (78.4 s for 10 resamples, extrapolated ×20), 7 of 10 converged;
  **``cpu_ratio=30.19``, ``ratio=30.27``**. The second window costs the resample refits time (100 resamples: 19 s →
  36 s CPU) and buys fewer resamples stopped short (``docs/laws.md``, "Fits that finish").

- issue 25 item 8 (2026-12-04, the shared 2-core machine at load 4-7 with two other sessions' jobs). Three changes to
  the measurement: ``ratio=`` is now the ratio of **CPU** seconds (``process_time``, one torch/BLAS thread: run with
  ``OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``), the wall-time ratio is printed as
  ``wall_ratio=`` — the quoted runs above moved 9.4-30.3 in wall time with the load, and either side's wall time
  inflates with whatever else runs; ``--quick-starts K`` polishes only ``K`` of the 32 starts on the scipy side
  (evenly spaced in mixlaw's order) and scales that part ×32/K, said so in the output; and the resamples' optima
  are re-optimised without the Newton polish on both sides, as ``mix optimize``'s paired bootstrap now does (SLSQP's
  end; the point optimum keeps it). ``--bootstrap 200 --quick-starts 8``, both runs: mixlaw objective 0.001283112,
  200 of 200 usable, 0 rescued, point optimum arxiv 0.220 / c4 0.566 / stackexchange 0.214, band arxiv [0, 0.452],
  c4 [0, 0.820], commoncrawl [0, 0.569], stackexchange [0.038, 0.507]; scipy's best of 8 starts 0.0012831656:

  - ``--quick 5`` (load 5.8-7.0): mixlaw 99.2 s wall, **41.2 s CPU**; scipy 855.5 s CPU (2276 s wall: 44.9 s for
    5 resamples ×40, 8 starts ×4); ``wall_ratio=22.95``, **``ratio=20.74``**;
  - ``--quick 10`` (load 3.6-5.2): mixlaw 72.4 s wall, **43.4 s CPU**; scipy 829.9 s CPU (1374 s wall: 54.6 s for
    10 resamples ×20); ``wall_ratio=18.96``, **``ratio=19.12``**.

  mixlaw's side is 41-43 s of CPU (48-63 s in the runs above; the unpolished resample optima), of which, profiled,
  the point fit about 11 s, the bootstrap's batched solve 23.6 s and the 201 optima 8.5 s (456 SLSQP solves, 7,719
  objective evaluations of about 1 ms each, half of it torch's backward pass). **The goal of 20 is met on one of the
  two runs, not reliably**: the ratio sits at 19-21, and the scipy side's own measurement moves by about 10 % between
  runs (its 5-10 measured resamples are extrapolated ×20-40). What would move it clear of 20 is mixlaw's side: the
  bootstrap solve (the solver's per-iteration cost) and an objective gradient without autograd for the optima.

- issue 25 item 8, continued (2026-12-04): mixlaw's side made cheaper, neither side's work changed. Profiled
  (cProfile, ``--quick-starts 1 --quick 1``): CAMEL's forward evaluations of the trial points were the largest item
  (torch's float64 ``exp``/``log``/``logsumexp`` are not vectorised on this CPU: ``logsumexp`` alone 7.8 s of 92 s),
  then the Jacobian's reverse passes over per-point copies, then torch's ``bmm``/``einsum`` of small blocks. Changes:
  CAMEL's value without autograd in numpy, the trial rows in cache-sized blocks (:mod:`mixlaw.laws._camel_numpy`: a
  2,800-row trial batch 23 -> 11 ms), used wherever no tensor needs a gradient; its analytic derivatives in the
  natural parameters and the closed-form ``∂θ/∂u`` (:func:`mixlaw.fit.problem.data.natural_jacobian`) instead of the
  reverse passes (equal to autograd to 1e-10, hypothesis-drawn: ``tests/test_camel_numpy.py``; the 200-row Jacobian
  about 16 -> 7 ms); ``JᵀΩJ``, the chain products and the geodesic contractions by numpy's batched matmul (taken back
  out, below); the repair's full scan skipped when ``J`` sums finite. The mixlaw side alone, this branch against its
  base (c6b9734) alternated at load 3-4: **38.9 -> 27.7 s CPU** (fit 32.9 -> 21.7 s; the 201 optima, about 6 s, SLSQP
  with autograd, unchanged). Numerics: point objective 0.00128311195517 -> 0.00128311198961 (+2.7e-8 relative, the
  rounding moves the path), 200 of 200 usable, 0 rescued, point optimum 0.2201 / 0.5662 / 0.2137 the same to 4
  decimals; the band ends move within the path dependence described above (arxiv's upper end 0.452 -> 0.467,
  stackexchange's 0.507 -> 0.511). ``--bootstrap 200 --quick-starts 8 --quick 5``, twice, quiet machine (load 0.3-1.0,
  nothing else of this session running): mixlaw **28.3 s** and **28.1 s** CPU; scipy 660.3 s and 695.2 s CPU (12.7 s
  and 13.6 s for its 5 resamples, x40; best of 8 starts 0.0012831656, mixlaw 4.18e-5 lower, 4 of 5 resamples
  converged); ``wall_ratio=23.30`` and ``24.70``, **``ratio=23.32`` and ``24.72``**; a third run ten minutes later
  (load 0.2-0.8): mixlaw 28.4 s, scipy 795.2 s (15.3 s for its 5 resamples), **``ratio=28.05``**. The scipy side moves
  by 20 % between quiet runs (660-795 s; 830-855 s in the loaded runs above), mixlaw's by 1 %: the ratio sits at
  23-28, at least 23 on every run of this code.
- the same, as merged (2026-12-04): the batched-matmul ``JᵀΩJ`` and geodesic contractions are taken back out. They
  change the rounding of every law's solve, and two tests that pin outcomes sensitive to it failed: a power-law row
  ending ``stalled`` at its optimum's objective (equal to 1e-15) where it had ended ``converged``, and an
  unidentified ``R_D*`` left at 1 instead of 20, whose profiled interval then covered 89 % of the held-out runs
  instead of 100 %. Without them, twice, at load 2-3 (the test suite running on the other core): mixlaw
  **25.0 s** and **27.3 s** CPU, scipy 699.4 s and 798.6 s; **``ratio=27.95`` and ``29.24``**.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from mixlaw.options import BootstrapOptions, FitOptions, SolverOptions

DOMAINS = ("arxiv", "book", "c4", "github", "commoncrawl", "stackexchange", "wikipedia")
DATA = Path(__file__).resolve().parents[2] / "shared/data/external/Explaining-Data-Mixing-Scaling-Laws/data"
K = 3


def load() -> pd.DataFrame:
    d = pd.read_csv(DATA / "dmsl_llm_slimpajama.csv")
    d = d.rename(columns={f"weight_{x}": f"w_{x}" for x in DOMAINS} | {"model_size": "n_params", "n_tokens": "tokens"})
    d = d[d["n_params"] <= 9.37e8]
    d = d[d["tokens"] == d.groupby("n_params")["tokens"].transform("max")].dropna(subset=["openhermes_loss"])
    return d.reset_index(drop=True).assign(run_id=lambda t: [f"r{i}" for i in range(len(t))])


def unpack(theta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """numpy parameterisation: log C, then per component log K, log alpha, log beta, 6 logits (first domain 0)."""
    n = len(DOMAINS)
    c = float(np.exp(theta[0]))
    rest = theta[1:].reshape(K, 3 + n - 1)
    logits = np.concatenate([np.zeros((K, 1)), rest[:, 3:]], axis=1)
    t = np.exp(logits - logits.max(axis=1, keepdims=True))
    return c, np.exp(rest[:, 0]), np.exp(rest[:, 1]), np.exp(rest[:, 2]), t / t.sum(axis=1, keepdims=True)


def pack(p: dict) -> np.ndarray:
    out = [np.log(p["C"])]
    for i in range(K):
        t = np.maximum(np.asarray(p[f"t_{i}"], dtype=np.float64), 1e-12)
        out += [np.log(p[f"K_{i}"]), np.log(p[f"alpha_{i}"]), np.log(p[f"beta_{i}"]), *(np.log(t[1:] / t[0]))]
    return np.array(out)


def predict(theta: np.ndarray, w: np.ndarray, m: np.ndarray) -> np.ndarray:
    c, k, a, b, t = unpack(theta)
    share = w @ t.T  # (rows, K)
    return c + (k * share ** (-a) * (m[:, None] / 1e8) ** (-b)).sum(axis=1)


def scipy_fit(theta0: np.ndarray, w: np.ndarray, m: np.ndarray, y: np.ndarray, mult: np.ndarray) -> tuple:
    from scipy.optimize import least_squares

    sw = np.sqrt(mult)
    keep = mult > 0

    def res(th: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            r = (np.log(predict(th, w[keep], m[keep])) - np.log(y[keep])) * sw[keep]
        return np.where(np.isfinite(r), r, 1e3)

    sol = least_squares(res, theta0, loss="huber", f_scale=1e-3, method="trf", max_nfev=3000)
    return sol.x, float(sol.cost), int(sol.status)


def optimum(law, params, cons, start):  # type: ignore[no-untyped-def]
    """The optimum at 7B; a resample's (``start`` given) without the Newton polish, as ``mix optimize``'s paired
    bootstrap re-optimises (its weights feed percentile bands), on both sides alike."""
    from mixlaw.decide.mixture import FittedLaw, MixtureObjective, optimize_mixture

    obj = MixtureObjective(DOMAINS, {"loss": FittedLaw(law, params)}, fixed_inputs={"n_params": 7e9})
    return optimize_mixture(obj, cons, starts=start, polish=start is None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--quick", type=int, default=0, help="scipy side: refit only this many resamples, extrapolate")
    ap.add_argument("--quick-starts", type=int, default=0,
                    help="scipy side: polish only this many of the starts (evenly spaced), extrapolate")  # fmt: skip
    args = ap.parse_args()
    from mixlaw.decide.mixture import MixtureConstraints
    from mixlaw.fit import fit_law
    from mixlaw.fit.uncertainty.bootstrap import resample_weights
    from mixlaw.laws import get_law

    df = load()
    law = get_law("camel", domains=DOMAINS, k=K)
    cons = MixtureConstraints(DOMAINS)
    uniform = np.full(len(DOMAINS), 1 / len(DOMAINS))
    print(f"{len(df)} runs (sizes {sorted(df['n_params'].unique())}), camel k={K}: {law.n_internal} parameters")

    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():  # boundary and identifiability notes of a 28-parameter fit: the status says it
        warnings.simplefilter("ignore")
        res = fit_law(
            law,
            df,
            FitOptions(
                solver=SolverOptions(max_iter=None), bootstrap=BootstrapOptions(resamples=args.bootstrap), seed=0
            ),
            target="openhermes_loss",
        )
    opt = optimum(law, res.params, cons, None)
    draws = res.bootstrap_params.to_numpy(dtype=np.float64) if res.bootstrap_params is not None else np.zeros((0,))
    w_boot = [optimum(law, law.unflatten(row), cons, np.stack([opt.w, uniform])).w for row in draws]
    t_mix, c_mix = time.perf_counter() - t0, time.process_time() - c0
    print(f"mixlaw: {t_mix:.2f} s; objective {res.objective:.8g} ({res.status.value}); "
          f"{len(draws)} of {args.bootstrap} resamples usable ({res.n_rescued_resamples} after the rescue refit)",
          flush=True)  # fmt: skip

    polished = res.starts[res.starts["status"] != "screened"]
    starts = [law.unflatten(np.array([r[f"start_{n}"] for n in law.flat_names])) for _, r in polished.iterrows()]
    w = df[[f"w_{d}" for d in DOMAINS]].to_numpy(dtype=np.float64)
    m = df["n_params"].to_numpy(dtype=np.float64)
    y = df["openhermes_loss"].to_numpy(dtype=np.float64)
    n_all = len(starts)
    if 0 < args.quick_starts < n_all:
        starts = [starts[i] for i in np.linspace(0, n_all - 1, args.quick_starts).round().astype(int)]
    t0, c0 = time.perf_counter(), time.process_time()
    best, best_cost = None, np.inf
    for s in starts:
        th, cost, _ = scipy_fit(pack(law.canonical(s)), w, m, y, np.ones(len(y)))
        if cost < best_cost:
            best, best_cost = th, cost
    assert best is not None
    t_point, c_point = time.perf_counter() - t0, time.process_time() - c0
    t_point, c_point = t_point * n_all / len(starts), c_point * n_all / len(starts)  # x1 unless --quick-starts
    n_sp = min(args.quick, args.bootstrap) if args.quick > 0 else args.bootstrap
    mult = resample_weights(None, len(y), args.bootstrap, np.random.default_rng(1))
    sp_boot = []
    usable_sp = 0  # least_squares status >= 1: a convergence test met (0: max_nfev reached)
    t1, c1 = time.perf_counter(), time.process_time()
    for b in range(n_sp):
        th, _, code = scipy_fit(best, w, m, y, mult[b])
        usable_sp += code >= 1
        c, kk, a, bb, t = unpack(th)
        p = {"C": c} | {f"{n}_{i}": v[i] for i in range(K) for n, v in (("K", kk), ("alpha", a), ("beta", bb))}
        p |= {f"t_{i}": list(t[i]) for i in range(K)}
        sp_boot.append(optimum(law, law.canonical(p), cons, np.stack([opt.w, uniform])).w)
    t_boot, c_boot = time.perf_counter() - t1, time.process_time() - c1
    scale = args.bootstrap / max(n_sp, 1)
    t_sp, c_sp = t_point + t_boot * scale, c_point + c_boot * scale
    extra = f" (bootstrap measured on {n_sp} resamples, {t_boot:.1f} s, extrapolated x{scale:.1f})"
    if len(starts) < n_all:
        extra += (f" (point fit measured on {len(starts)} of the {n_all} starts, evenly spaced, extrapolated "
                  f"x{n_all / len(starts):.1f}; the resamples start from the best of those)")  # fmt: skip
    shown = extra if n_sp < args.bootstrap or len(starts) < n_all else ""
    print(f"scipy: {t_sp:.2f} s over {n_all} starts and {args.bootstrap} resamples"
          f"{shown}; Huber cost {best_cost:.8g} (mixlaw's objective "
          f"{res.objective:.8g}, relative difference {(best_cost - res.objective) / res.objective:+.2e}); "
          f"{usable_sp} of {n_sp} resamples converged")  # fmt: skip
    for name, ws in (("mixlaw", w_boot), ("scipy", sp_boot)):
        if ws:
            q = np.quantile(np.array(ws), [0.025, 0.975], axis=0)
            band = ", ".join(f"{d} [{lo:.3f}, {hi:.3f}]" for d, lo, hi in zip(DOMAINS, q[0], q[1], strict=True))
            print(f"{name} optimum at 7B: 95% band {band}")
    print("point optimum at 7B: " + ", ".join(f"{d} {v:.3f}" for d, v in opt.weights.items()))
    print(f"CPU time (process_time, all threads): mixlaw {c_mix:.1f} s, scipy {c_sp:.1f} s")
    print(f"wall_ratio={t_sp / t_mix:.2f}")
    print(f"ratio={c_sp / c_mix:.2f}")  # CPU seconds: the wall time of either side moves with the machine's load


if __name__ == "__main__":
    main()
