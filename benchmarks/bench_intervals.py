"""Prediction intervals: jackknife+ computed in one pass against MAPIE's n refits (issue 33).

Workloads, y = sin x + N(0, 0.3^2) on x ~ U(0, 10):

- J1, n = 300, 40 queries, Gaussian kernel, h = 0.3: MAPIE's
  ``CrossConformalRegressor(NadarayaWatson(bandwidth=h), cv=LeaveOneOut(), method="plus")``
  (fit_conformalize + predict_interval, run once) against ``fit`` + ``prediction_interval``
  (best of three); the ratio and the largest difference of the bounds (targets: at least 100x,
  at most 1e-10).
- J2, n = 1e5, 1e4 queries, Epanechnikov kernel, h = 0.05: nadaraya's time, run once
  (target: at most 10 s). MAPIE would fit 1e5 models; it is not run.

    python benchmarks/bench_intervals.py           # full sizes
    python benchmarks/bench_intervals.py --quick   # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from _timing import timed
from nadaraya import NadarayaWatson


def row(name: str, impl_name: str, seconds: float, note: str = "") -> None:
    print(f"{name:<24}{impl_name:<34}{seconds:>10.4f}  {note}", flush=True)


def data(n: int, m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, (n, 1))
    return X, np.sin(X[:, 0]) + rng.normal(0.0, 0.3, n), rng.uniform(0.0, 10.0, (m, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    from mapie.regression import CrossConformalRegressor
    from sklearn.model_selection import LeaveOneOut

    n1, m1 = 300, 40
    n2, m2 = (10_000, 1000) if args.quick else (100_000, 10_000)
    X, y, Q = data(n1, m1)
    for kernel in ("gaussian", "epanechnikov"):  # compile
        NadarayaWatson(kernel=kernel, bandwidth=0.3).fit(X, y).prediction_interval(Q)
    print(f"{'workload':<24}{'implementation':<34}{'seconds':>10}  note")

    def ours() -> tuple[np.ndarray, np.ndarray]:
        return NadarayaWatson(bandwidth=0.3).fit(X, y).prediction_interval(Q, level=0.9)

    def theirs() -> np.ndarray:
        ref = CrossConformalRegressor(NadarayaWatson(bandwidth=0.3), confidence_level=0.9, cv=LeaveOneOut(),
                                      method="plus")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref.fit_conformalize(X, y)
        return ref.predict_interval(Q)[1]

    t_mapie, iv = timed(theirs, repeat=1)
    t_nd, (lo, hi) = timed(ours, repeat=3)
    err = max(float(np.max(np.abs(lo - iv[:, 0, 0]))), float(np.max(np.abs(hi - iv[:, 1, 0]))))
    name = f"J1 n={n1} m={m1}"
    row(name, "MAPIE jackknife+ (LOO, plus)", t_mapie, "run once")
    row(name, "nadaraya prediction_interval", t_nd,
        f"{t_mapie / t_nd:.0f}x MAPIE (target >= 100x); max diff {err:.1e} (target 1e-10)")

    X, y, Q = data(n2, m2, seed=1)
    t0 = time.perf_counter()
    lo, hi = NadarayaWatson(kernel="epanechnikov", bandwidth=0.05).fit(X, y).prediction_interval(Q, level=0.9)
    t_big = time.perf_counter() - t0
    row(f"J2 n={n2:.0e} m={m2:.0e}", "nadaraya prediction_interval", t_big,
        f"run once, Epanechnikov h=0.05 (target <= 10 s); mean width {float(np.mean(hi - lo)):.3f}")


if __name__ == "__main__":
    main()
