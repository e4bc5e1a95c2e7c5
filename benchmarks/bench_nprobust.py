"""Robust bias-corrected bands with nprobust's plug-in bandwidth: nadaraya against nprobust (issue 33).

Workload: y = sin(4x) + N(0, (0.2 + 0.3x)^2) on x ~ U(0, 1); degree 1, Epanechnikov kernel,
``imse-dpi`` bandwidths (h and b), nearest-neighbour variance (nnmatch = 3), 95% rbc bands at 30
evenly spaced points. nadaraya: ``NadarayaWatson(bandwidth="imse-dpi").fit`` then
``confidence_band(method="rbc", bias_bandwidth="auto", variance="nn")``; nprobust:
``lpbwselect(bwselect="imse-dpi")`` then ``lprobust(h=h, b=b)`` at the same points.

- W1, n = 1e4: both measured in this run (nprobust once, nadaraya best of three); the largest
  relative differences of h, b, the band centres and standard errors (where lprobust's bwcheck
  leaves h and b as chosen).
- W2, n = 1e5 (the target: nadaraya at least 20x faster): nadaraya measured once; nprobust's
  time is its W1 time x 10 (EXTRAPOLATED, linearly in n). That is a lower bound: nprobust counts
  ties in x with a loop over the points that compares each with all (O(n^2)) once per grid
  point, and its nearest-neighbour residuals are a Python loop over the points of each window.

    python benchmarks/bench_nprobust.py           # full sizes (nprobust at 1e4 takes a minute or more)
    python benchmarks/bench_nprobust.py --quick   # small sizes, a smoke run
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from _timing import timed
from nadaraya import NadarayaWatson


def row(name: str, impl_name: str, seconds: float, note: str = "") -> None:
    print(f"{name:<20}{impl_name:<40}{seconds:>10.3f}  {note}", flush=True)


def data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, n)
    return x, np.sin(4 * x) + rng.normal(0.0, 0.2 + 0.3 * x, n)


def ours(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> tuple[NadarayaWatson, object]:
    model = NadarayaWatson(bandwidth="imse-dpi", degree=1, kernel="epanechnikov").fit(x[:, None], y)
    band = model.confidence_band(grid[:, None], method="rbc", bias_bandwidth="auto", variance="nn")
    return model, band


def theirs(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> tuple[float, float, np.ndarray]:
    from nprobust import lpbwselect, lprobust

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        _, h, b = lpbwselect(y, x, bwselect="imse-dpi").bws[0]
        est = lprobust(y, x, eval=grid, h=h, b=b).Estimate
    return h, b, est


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    n1, n2 = (1000, 5000) if args.quick else (10_000, 100_000)
    grid = np.linspace(0.05, 0.95, 30)
    for n in (500, n1):  # compile (the engine's backend may change with n)
        ours(*data(n, seed=9), grid)
    print(f"{'workload':<20}{'implementation':<40}{'seconds':>10}  note")

    x, y = data(n1)
    t0 = time.perf_counter()
    h, b, est = theirs(x, y, grid)
    t_np = time.perf_counter() - t0
    t_nd, (model, band) = timed(lambda: ours(x, y, grid), repeat=3)
    same = (est[:, 1] == h) & (est[:, 2] == b)  # lprobust's bwcheck left h and b as chosen
    d_h = abs(model.bandwidth_[0] / h - 1)
    d_b = abs(model.bias_bandwidth_ / b - 1)
    d_c = float(np.max(np.abs(band.center[same] / est[same, 5] - 1)))
    d_s = float(np.max(np.abs(band.se[same] / est[same, 7] - 1)))
    name = f"W1 n={n1:.0e}"
    row(name, "nprobust lpbwselect + lprobust", t_np, "run once")
    row(
        name,
        "nadaraya imse-dpi + rbc band",
        t_nd,
        f"{t_np / t_nd:.0f}x nprobust; rel. diff h {d_h:.1e}, b {d_b:.1e}, center {d_c:.1e}, se {d_s:.1e} "
        f"({int(same.sum())}/30 points)",
    )

    x, y = data(n2, seed=1)
    t0 = time.perf_counter()
    ours(x, y, grid)
    t_big = time.perf_counter() - t0
    scaled = t_np * n2 / n1
    name = f"W2 n={n2:.0e}"
    row(
        name,
        "nprobust (extrapolated)",
        scaled,
        f"EXTRAPOLATED: {t_np:.1f} s at n={n1:.0e} x {n2 / n1:.0f} (linear in n: a lower bound)",
    )
    row(
        name,
        "nadaraya imse-dpi + rbc band",
        t_big,
        f"run once; {scaled / t_big:.0f}x the EXTRAPOLATED nprobust (target >= 20x)",
    )


if __name__ == "__main__":
    main()
