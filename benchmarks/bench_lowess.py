"""LOWESS: nadaraya.lowess against statsmodels' lowess, ratios taken in this run (issue 31).

Workloads, y = sin x + N(0, 0.3^2) on x ~ U(0, 10), frac = 0.3, it = 3:

- W1, n = 2e4: statsmodels (run once) against nadaraya (best of three), the ratio and the
  largest difference of the fits over max|y| (targets: at least 100x, at most 1e-10).
- W3, n = 1e4: ``NadarayaWatson(bandwidth_type="generalized_nn", bandwidth="cv")`` (tricube,
  local linear) scores every k from 1 to n - 1 in one walk per point (run once) against a plain
  search over k: each k's exact leave-one-out CV from the smoother's dense rows (O(n^2) per k,
  as R np computes it), timed at the chosen k (run once) and multiplied by the number of k --
  an EXTRAPOLATED figure, over every k and over a 40-point grid in log k (target: >= 100x the
  search over every k).
- W2, n = 1e6: nadaraya's time (run once; target: about 3 s). statsmodels is O(n k) = O(frac
  n^2): its time at n = 1e5 (run once) times (1e6 / 1e5)^2 is the *extrapolated* figure the
  ratio is taken against (the fits' accuracy at size is tests/local/test_lowess.py's and W1's).
- W4, n = m = 1e5: ``nadaraya.pool(..., bandwidth_type="generalized_nn" | "adaptive_nn",
  bandwidth=100)`` (local linear): generalized_nn with the tricube through LOWESS's sliding
  moments, with the Epanechnikov kernel and adaptive_nn over each query's window of keys;
  against the dense rows (O(m n), as before), timed on the first 400 queries and multiplied by
  m / 400 -- an EXTRAPOLATED figure -- and the largest difference on those queries (no target).
- W5, n = 2e5, heavy tails: nadaraya.lowess on Cauchy x against uniform x (frac = 0.3, it = 3;
  each best of two), and the part of the fits whose sliding moments' rounding bound sends them
  to the blocks' moments, or to the direct O(k) sum (no target).

The run ends with a table of the targets, met or not met.

    python benchmarks/bench_lowess.py           # full sizes (statsmodels at 1e5 takes minutes)
    python benchmarks/bench_lowess.py --quick   # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import nadaraya
from _timing import timed

TARGETS: list[tuple[str, str, str, bool]] = []


def target(name: str, goal: str, measured: str, met: bool) -> None:
    TARGETS.append((name, goal, measured, met))


def row(name: str, impl_name: str, seconds: float, note: str = "") -> None:
    print(f"{name:<24}{impl_name:<34}{seconds:>10.4f}  {note}", flush=True)


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 10.0, n)
    return x, np.sin(x) + rng.normal(0.0, 0.3, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    from statsmodels.nonparametric.smoothers_lowess import lowess as sm_lowess

    frac, it = 0.3, 3
    n1, n_big, n_sm = (2000, 20000, 2000) if args.quick else (20000, 1_000_000, 100_000)
    nadaraya.lowess(np.sin(np.arange(200.0)), np.arange(200.0), frac=frac, it=it)  # compile
    print(f"{'workload':<24}{'implementation':<34}{'seconds':>10}  note")

    x, y = data(n1)
    t_sm, want = timed(lambda: sm_lowess(y, x, frac=frac, it=it), repeat=1)
    t_nd, got = timed(lambda: nadaraya.lowess(y, x, frac=frac, it=it), repeat=3)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(y)))
    name = f"W1 n={n1:.0e}"
    row(name, "statsmodels lowess", t_sm)
    row(name, "nadaraya.lowess", t_nd,
        f"{t_sm / t_nd:.0f}x statsmodels (target >= 100x); max diff {err:.1e} of max|y| (target 1e-10)")
    target(name, ">= 100x statsmodels", f"{t_sm / t_nd:.0f}x", t_sm / t_nd >= 100)
    target(name, "same fits to 1e-10 of max|y|", f"{err:.1e}", err <= 1e-10)

    nn_cv(2000 if args.quick else 10000)

    x, y = data(n_sm, seed=2)
    t_sm, _ = timed(lambda: sm_lowess(y, x, frac=frac, it=it), repeat=1)
    x, y = data(n_big, seed=3)
    t0 = time.perf_counter()
    nadaraya.lowess(y, x, frac=frac, it=it)
    t_nd = time.perf_counter() - t0
    extrapolated = t_sm * (n_big / n_sm) ** 2
    name = f"W2 n={n_big:.0e}"
    row(name, f"statsmodels lowess at n={n_sm:.0e}", t_sm, "measured, run once")
    row(name, "statsmodels lowess (extrapolated)", extrapolated,
        f"EXTRAPOLATED: {t_sm:.1f} s at n={n_sm:.0e} x ({n_big:.0e}/{n_sm:.0e})^2, O(n k) = O(frac n^2)")
    row(name, "nadaraya.lowess", t_nd,
        f"run once (target about 3 s); {extrapolated / t_nd:.0f}x the EXTRAPOLATED statsmodels")
    target(name, "<= 3 s", f"{t_nd:.2f} s ({extrapolated / t_nd:.0f}x statsmodels, EXTRAPOLATED)",
           t_nd <= 3.0)

    nn_predict(20000 if args.quick else 100_000)
    heavy_tails(20000 if args.quick else 200_000, frac, it)

    print("\ntargets (one run; the machine may be shared, so times are noisy)")
    print(f"{'workload':<14}{'target':<32}{'measured':<48}result")
    for name, goal, measured, met in TARGETS:
        print(f"{name:<14}{goal:<32}{measured:<48}{'met' if met else 'NOT MET'}")


def nn_predict(n: int, k: int = 100, sub: int = 400) -> None:
    """W4: nearest-neighbour predictions over each query's window of keys against the dense rows."""
    from nadaraya.kernels import get as get_kernel
    from nadaraya.local.neighbours import Geometry, rows

    x, y = data(n, seed=5)
    q = np.random.default_rng(6).uniform(0.0, 10.0, n)
    name = f"W4 n=m={n:.0e}"
    routes = [("generalized_nn", "tricube", "LOWESS's moments"),
              ("generalized_nn", "epanechnikov", "windows"), ("adaptive_nn", "tricube", "windows")]
    for kind, kernel, how in routes:
        def fast(kind: str = kind, kernel: str = kernel) -> np.ndarray:
            return nadaraya.pool(q, x, y, kernel=kernel, bandwidth=k, degree=1, bandwidth_type=kind)

        fast()  # the first call loads the modules
        t_fast, got = timed(fast, repeat=2)
        geom = Geometry(x[:, None], np.array([k]), kind)

        def dense(geom: Geometry = geom, kernel: str = kernel) -> np.ndarray:
            blocks = rows(geom, q[:sub, None], None, get_kernel(kernel), 1)
            return np.concatenate([A @ y for _, A, _, _ in blocks])

        t_sub, want = timed(dense, repeat=1)
        t_dense = t_sub * n / sub
        err = float(np.max(np.abs(got[:sub] - want)) / np.max(np.abs(y)))
        label = f"{'gnn' if kind == 'generalized_nn' else 'ann'} {kernel}"
        row(name, f"{label} dense (extrap.)", t_dense,
            f"EXTRAPOLATED: {t_sub:.2f} s for {sub} queries x {n}/{sub}")
        row(name, f"{label} {how}", t_fast,
            f"k={k}: {t_dense / t_fast:.0f}x the EXTRAPOLATED dense rows; max diff {err:.0e} of max|y| "
            f"on {sub} queries")


def heavy_tails(n: int, frac: float, it: int) -> None:
    """W5: LOWESS on Cauchy x against uniform x, and how many fits the blocks and the direct sums took."""
    from nadaraya.local import lowess as lowess_module

    rng = np.random.default_rng(7)
    states: list[np.ndarray] = []
    inner = lowess_module._regressions

    def counted(*a: object) -> tuple[np.ndarray, np.ndarray]:
        out, state = inner(*a)  # type: ignore[arg-type]
        states.append(state)
        return out, state

    name = f"W5 n={n:.0e}"
    for label, x in (("uniform", rng.uniform(0.0, 1.0, n)), ("Cauchy", rng.standard_cauchy(n))):
        y = np.sin(3 * np.arctan(x)) + rng.normal(0.0, 0.3, n)
        lowess_module._regressions = counted
        try:
            states.clear()
            t, _ = timed(lambda x=x, y=y: nadaraya.lowess(y, x, frac=frac, it=it), repeat=2, slow=60)
        finally:
            lowess_module._regressions = inner
        routes = np.concatenate(states)
        row(name, f"nadaraya.lowess, {label} x", t,
            f"{np.mean(routes == 4):.2%} of the fits from the blocks' moments, "
            f"{np.mean(routes == 2):.3%} summed directly (O(k))")


def nn_cv(n: int) -> None:
    """W3: the CV choice of k of a generalized_nn bandwidth against a plain search over k."""
    from nadaraya import NadarayaWatson
    from nadaraya.bandwidth.nn import GRID, score_k
    from nadaraya.kernels import get as get_kernel

    def model() -> NadarayaWatson:
        return NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn", bandwidth="cv")

    x, y = data(300, seed=4)
    model().fit(x[:, None], y)  # compile
    x, y = data(n, seed=4)
    t_walk, fitted = timed(lambda: model().fit(x[:, None], y), repeat=1)
    k = int(fitted.bandwidth_[0])
    order = np.argsort(x, kind="stable")
    X, Y = x[order][:, None], y[order][:, None]
    t_k, score = timed(lambda: score_k(X, Y, None, get_kernel("tricube"), 1, "generalized_nn", k), repeat=1)
    err = abs(score - float(fitted._nn_search["scores"][k - 1])) / score
    every, grid = t_k * (n - 1), t_k * GRID
    name = f"W3 n={n:.0e}"
    row(name, "plain CV of one k (dense rows)", t_k, f"measured at the chosen k={k}, run once")
    row(name, "plain search, every k (extrap.)", every, f"EXTRAPOLATED: {t_k:.1f} s x {n - 1} k")
    row(name, f"plain search, {GRID} k (extrap.)", grid, f"EXTRAPOLATED: {t_k:.1f} s x {GRID} k")
    row(name, "nadaraya generalized_nn cv", t_walk,
        f"every k scored; {every / t_walk:.0f}x the plain search over every k (target >= 100x), "
        f"{grid / t_walk:.1f}x a {GRID}-k grid; CV at k={k} agrees to {err:.0e}")
    target(name, ">= 100x a plain search over k", f"{every / t_walk:.0f}x (plain search EXTRAPOLATED)",
           every / t_walk >= 100)


if __name__ == "__main__":
    main()
