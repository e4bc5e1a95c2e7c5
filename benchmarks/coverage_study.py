"""Coverage study of the inference of issue 15: the simulations of tests/inference/test_coverage.py with more
replicates (a script, not collected by pytest and not part of `make bench`).

    python benchmarks/coverage_study.py           # the full study (about 2 minutes on 2 cores)
    python benchmarks/coverage_study.py --quick   # a smoke run

Designs (the x design fixed, n = 300 on U(0, 1) unless said; 95 % bands; +- is 3 binomial
standard errors of the rate):

- pointwise bands of the smoothed function E[f(x) | X] at x = 0, 0.03, 0.5, 1: m = sin(pi x),
  h = 0.1, noise sd 0.3 (variance="homoscedastic") or 0.1 + 0.4 x (variance="heteroscedastic");
- joint coverage over a 30-point grid by the simultaneous (sup-t) and the pointwise band;
- rbc against the plain band for the true m = sin(2 pi x) at x = 0, 0.25, 0.5, 0.75, 1, the
  bandwidth a pilot CV bandwidth held fixed, or selected by CV in every replicate;
- the significance test of an irrelevant second feature (n = 100, m = sin(2 pi x0), noise sd 0.5,
  bandwidths [0.08, 0.5] continuous, [0.1, 0.3] categorical), and its power; beside it, the same
  test re-implemented plainly with leverage-corrected residuals e_i / sqrt(1 - 2 H_ii + |H_i|^2).

What it printed once (2026-11-24, after the leverage-corrected wild bootstrap landed; 2 cores)::

    pointwise coverage of E[f(x) | X] at x = 0, 0.03, 0.5, 1; 95 % +- 0.021 (R = 1000)
      degree 0 homoscedastic    asymptotic  0.959  0.956  0.946  0.957
      degree 0 homoscedastic    bootstrap   0.955  0.955  0.934  0.958
      degree 1 homoscedastic    asymptotic  0.953  0.952  0.942  0.950
      degree 1 homoscedastic    bootstrap   0.929  0.931  0.935  0.930
      degree 1 heteroscedastic  asymptotic  0.985  0.986  0.946  0.930
      degree 1 heteroscedastic  bootstrap   0.933  0.926  0.930  0.929
    joint coverage over 30 points, 95 % +- 0.029 (R = 500)
      simultaneous asymptotic 0.940, simultaneous bootstrap 0.914, pointwise 0.638
    coverage of the true m(x) at x = 0, 0.25, 0.5, 0.75, 1 (plain asymptotic / rbc)
      degree 1, h = 0.0419 (pilot CV, fixed), R = 1000, +- 0.021
        plain 0.950  0.900  0.945  0.870  0.940
        rbc   0.947  0.947  0.937  0.946  0.943
      degree 0, h = 0.0280 (pilot CV, fixed), R = 1000, +- 0.021
        plain 0.635  0.942  0.938  0.940  0.413
        rbc   0.950  0.941  0.938  0.939  0.947
      degree 1, h = 0.0420 (CV per replicate, median), R = 300, +- 0.038
        plain 0.930  0.887  0.940  0.830  0.923
        rbc   0.937  0.953  0.937  0.943  0.957
      degree 0, h = 0.0294 (CV per replicate, median), R = 300, +- 0.038
        plain 0.583  0.933  0.937  0.923  0.377
        rbc   0.937  0.933  0.933  0.917  0.940
    significance test at 5 % (R = 500 designs under the null, +- 0.029; R = 100 for power, one design)
      continuous   rejection under the null 0.052, power 1.000
      categorical  rejection under the null 0.046, power 1.000
      continuous, leverage-corrected residuals (a plain re-implementation): rejection under the null 0.048
    (78 s)
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_coverage import (
    POINTS,
    RBC_POINTS,
    curved,
    heteroscedastic,
    homoscedastic,
    joint_coverage,
    noise_band,
    pointwise_coverage,
    rbc_coverage,
    rejections,
)
from test_inference import effective_weights

from nadaraya import NadarayaWatson
from nadaraya.inference import mixin as _inference


def leverage_corrected_rejections(R, n=100, bandwidth=(0.08, 0.5), n_boot=99, seed=5, level=0.05):
    """The test of an irrelevant continuous x1 (the design of ``rejections``, drawn anew in every
    replicate), written plainly with the wild-bootstrap residuals e_i / sqrt(1 - 2 H_ii +
    sum_j H_ij^2) (dense hat matrix) instead of the raw e_i."""
    rng = np.random.default_rng(seed)
    rejected = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(R):
            X = np.stack([rng.uniform(0, 1, n), rng.uniform(0, 1, n)], axis=1)
            X = X[np.argsort(X[:, 0], kind="stable")]
            H = effective_weights(X, X, "cc", list(bandwidth), "gaussian", 1)
            y = curved(X[:, 0]) + 0.5 * rng.standard_normal(n)
            model = NadarayaWatson(bandwidth=list(bandwidth), degree=1).fit(X, y)
            observed = np.mean(model.gradient(X)[:, 1] ** 2)
            null = NadarayaWatson(bandwidth=[bandwidth[0]], degree=1).fit(X[:, :1], y).predict(X[:, :1])
            e = (y - H @ y) / np.sqrt(1 - 2 * np.diag(H) + (H**2).sum(axis=1))
            v = _inference.multipliers(np.random.default_rng(r), n, n_boot)
            boot = NadarayaWatson(bandwidth=list(bandwidth), degree=1).fit(X, null[:, None] + e[:, None] * v)
            stats = np.mean(boot.gradient(X)[:, 1, :] ** 2, axis=0)
            rejected += (1 + (stats >= observed).sum()) / (1 + n_boot) <= level
    return rejected / R


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few replicates, a smoke run")
    quick = parser.parse_args().quick
    big, mid, small = (40, 30, 20) if quick else (1000, 500, 300)
    start = time.perf_counter()
    where = ", ".join(f"{v:g}" for v in POINTS[:, 0])
    print(f"pointwise coverage of E[f(x) | X] at x = {where}; 95 % +- {noise_band(big):.3f} (R = {big})")
    for degree, variance, sd in ((0, "homoscedastic", homoscedastic), (1, "homoscedastic", homoscedastic),
                                 (1, "heteroscedastic", heteroscedastic)):
        cover = pointwise_coverage(big, 300, 0.1, degree, variance, sd)
        for name, row in zip(("asymptotic", "bootstrap"), cover):
            print(f"  degree {degree} {variance:<16} {name:<11} " + "  ".join(f"{c:.3f}" for c in row))
    joint = joint_coverage(mid)
    print(f"joint coverage over 30 points, 95 % +- {noise_band(mid):.3f} (R = {mid})")
    print(f"  simultaneous asymptotic {joint[0]:.3f}, simultaneous bootstrap {joint[1]:.3f}, "
          f"pointwise {joint[2]:.3f}")
    where = ", ".join(f"{v:g}" for v in RBC_POINTS[:, 0])
    print(f"coverage of the true m(x) at x = {where} (plain asymptotic / rbc)")
    for degree, per, R in ((1, False, big), (0, False, big), (1, True, small), (0, True, small)):
        (plain, rbc), h = rbc_coverage(R, degree, per_replicate=per)
        how = "CV per replicate, median" if per else "pilot CV, fixed"
        print(f"  degree {degree}, h = {h:.4f} ({how}), R = {R}, +- {noise_band(R):.3f}")
        print("    plain " + "  ".join(f"{c:.3f}" for c in plain))
        print("    rbc   " + "  ".join(f"{c:.3f}" for c in rbc))
    print(f"significance test at 5 % (R = {mid} designs under the null, +- {noise_band(mid, 0.05):.3f}; "
          f"R = {small // 3} for power, one design)")
    for vt, bw in (("cc", [0.08, 0.5]), ("cu", [0.1, 0.3])):
        size = rejections(mid, 100, bw, vt, relevant=False, redraw=True)
        power = rejections(small // 3, 100, bw, vt, relevant=True)
        kind = "continuous" if vt == "cc" else "categorical"
        print(f"  {kind:<12} rejection under the null {size:.3f}, power {power:.3f}")
    print(f"  continuous, leverage-corrected residuals (a plain re-implementation): rejection under "
          f"the null {leverage_corrected_rejections(mid):.3f}")
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
