"""Fit speed: mixlaw vs a fair scipy reference on the Epoch Chinchilla replication (4,500-start grid).

Reference: a Python loop of ``scipy.optimize.minimize(method="L-BFGS-B")`` over the same 4,500 starts, with an
analytic gradient and a numpy-vectorised objective (the usual way this fit is done; ≈ 9 ms per start on an idle
core). Both sides use the same data (240 points: the 5 highest losses dropped, D = C / 6N), the same
parameterisation (a, b, e = log A, log B, log E; alpha, beta free), Huber δ = 1e-3 with sum reduction.

Both sides are warmed up on a tiny problem first, so one-time import / first-call costs are not timed on either.
mixlaw runs its default strategy (every start screened in one batched evaluation, the best 32 distinct starts
optimised to convergence in one batched solve) and, for transparency, its ``full`` strategy (every start
optimised). The last line is ``ratio=<reference time / mixlaw default time>``.

Usage: ``python benchmarks/fit_speed.py [--bootstrap 4000] [--skip-full]``
"""

from __future__ import annotations

import os

from mixlaw.options import BootstrapOptions, FitOptions, StartOptions

# One BLAS thread for the reference: scipy's L-BFGS-B calls BLAS on tiny vectors, and multi-threaded OpenBLAS
# spinning on a shared 2-core machine made it ~30x slower here (13 ms instead of 0.5 ms per evaluation). Set before
# numpy is imported so the reference gets its best speed; mixlaw runs with one torch thread too.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from scipy.optimize import minimize  # noqa: E402
from scipy.special import logsumexp  # noqa: E402

from mixlaw.fit import fit_law  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "external" / "analyzing-chinchilla"
DELTA = 1e-3


def load() -> pd.DataFrame:
    raw = pd.read_csv(DATA / "svg_extracted_data.csv").sort_values("loss", kind="stable").iloc[:-5]
    n = raw["Model Size"].to_numpy()
    return pd.DataFrame(
        {"run_id": np.arange(len(raw)).astype(str), "n_params": n, "tokens": raw["Training FLOP"].to_numpy() / (6 * n),
         "loss": raw["loss"].to_numpy()}
    )


def reference_objective(df: pd.DataFrame):  # noqa: ANN201 - returns a closure
    log_n = np.log(df["n_params"].to_numpy())
    log_d = np.log(df["tokens"].to_numpy())
    log_y = np.log(df["loss"].to_numpy())

    def f(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, e, alpha, beta = theta
        t = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
        lse = logsumexp(t, axis=0)
        r = lse - log_y
        ar = np.abs(r)
        quad = ar <= DELTA
        loss = np.where(quad, 0.5 * r * r, DELTA * (ar - 0.5 * DELTA)).sum()
        psi = np.where(quad, r, DELTA * np.sign(r))
        w = np.exp(t - lse)  # softmax weights: d lse / d term
        grad = np.array(
            [
                (psi * w[0]).sum(),
                (psi * w[1]).sum(),
                (psi * w[2]).sum(),
                (psi * w[0] * -log_n).sum(),
                (psi * w[1] * -log_d).sum(),
            ]
        )
        return float(loss), grad

    return f


def grid() -> np.ndarray:
    a = np.arange(0, 26, 5.0)
    e = np.arange(-1, 1.01, 0.5)
    al = np.arange(0, 2.01, 0.5)
    return np.array(np.meshgrid(a, a, e, al, al, indexing="ij")).reshape(5, -1).T  # (4500, 5): a, b, e, alpha, beta


def run_reference(df: pd.DataFrame, starts: np.ndarray) -> tuple[float, np.ndarray, float]:
    f = reference_objective(df)
    best, best_x = np.inf, None
    t0 = time.perf_counter()
    for s in starts:
        r = minimize(f, s, jac=True, method="L-BFGS-B")
        if np.isfinite(r.fun) and r.fun < best:
            best, best_x = r.fun, r.x
    return time.perf_counter() - t0, best_x, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap", type=int, default=4000, help="resamples for the bootstrap timing (0 = skip)")
    ap.add_argument("--skip-full", action="store_true", help="skip timing mixlaw's full (all-starts) strategy")
    args = ap.parse_args()
    torch.set_num_threads(1)
    df = load()
    starts = grid()

    # Warm-up of both sides on a tiny problem.
    run_reference(df.iloc[:30], starts[:3])
    fit_law("chinchilla", df.iloc[:30], FitOptions(starts=StartOptions(n_polish=2)))

    t_ref, x_ref, f_ref = run_reference(df, starts)
    print(f"reference scipy L-BFGS-B loop: {t_ref:.2f} s for {len(starts)} starts "
          f"({1e3 * t_ref / len(starts):.2f} ms/start), objective {f_ref:.10f}")
    a, b, e, alpha, beta = x_ref
    print(f"  params A={np.exp(a):.2f} B={np.exp(b):.2f} E={np.exp(e):.4f} alpha={alpha:.5f} beta={beta:.5f}")

    t0 = time.perf_counter()
    res = fit_law("chinchilla", df)
    t_mix = time.perf_counter() - t0
    print(f"mixlaw (screen {res.n_starts} starts, polish {res.settings['n_polish']}): {t_mix:.3f} s, "
          f"objective {res.objective:.10f}, status {res.status.value}")
    print("  params " + " ".join(f"{k}={v:.5g}" for k, v in res.params.items()))

    if not args.skip_full:
        t0 = time.perf_counter()
        full = fit_law("chinchilla", df, FitOptions(starts=StartOptions(strategy="full")))
        t_full = time.perf_counter() - t0
        print(f"mixlaw full (optimise all {full.n_starts} starts in one batched solve): {t_full:.2f} s, "
              f"objective {full.objective:.10f}, {full.n_converged} converged; ratio_full={t_ref / t_full:.1f}")

    no_worse = res.objective <= f_ref * (1 + 1e-9)
    print(f"objective no worse than reference: {no_worse} (mixlaw {res.objective:.12f} vs {f_ref:.12f})")

    if args.bootstrap:
        t0 = time.perf_counter()
        boot = fit_law("chinchilla", df, FitOptions(bootstrap=BootstrapOptions(resamples=args.bootstrap), seed=42))
        t_boot = time.perf_counter() - t0
        ci = boot.ci()
        print(f"bootstrap {args.bootstrap} resamples (incl. the point fit): {t_boot:.1f} s, "
              f"{boot.n_failed_resamples} failed")
        for p in ("alpha", "beta", "E", "A", "B"):
            print(f"  95% CI {p}: [{ci[p][0]:.4g}, {ci[p][1]:.4g}]")
        print("  published (4,000 resamples): alpha 0.317-0.373, beta 0.331-0.415, E 1.769-1.871, "
              "A 285.2-743.6, B 1042.4-5810.3")
    print(f"ratio={t_ref / t_mix:.1f}")


if __name__ == "__main__":
    main()
