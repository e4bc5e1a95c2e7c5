"""The bandwidth search finds the minimum: select_bandwidth against a dense brute-force grid.

For every kernel (but ``constant``, which ignores the bandwidth), one bandwidth for all
features and one per feature, CV and AICc: the criterion at the selected bandwidth must be
within a stated tolerance of the smallest value over a dense grid, refined, of the criterion
written plainly here with dense NumPy (the (n, n) weight matrix, its diagonal masked for
leave-one-out, the in-sample smoother for AICc), never through the library's own scorer.
``score_bandwidth`` is checked against the same plain formula.

Tolerances (relative to the brute-force minimum), measured on five data sets like these and
chosen so that the search with its refinement switched off (the grid's best point kept, 15 %
off in h as issue 18 reports) fails them all:

- kernels with a continuous derivative (and the Gaussian, Laplacian, logistic): ``1e-6``. The
  refinement stops when the bandwidth is known to a relative 1e-3, with a last parabola step,
  so the criterion (quadratic in log h near its minimum) is within about 1e-7 of it (largest
  measured 1.1e-7); the grid's best point alone is 4e-5 to 2e-2 above it.
- kernels whose derivative jumps at ``|u| = 1`` (Epanechnikov, triangular, cosine): ``3e-4``.
  The criterion then has a kink wherever h equals a pairwise distance, hundreds of them near
  the minimum, so parabolas fit it only roughly: measured up to 1e-4; the grid's best point
  alone is 6e-4 to 2e-2 above it.
- the boxcar: its criterion is piecewise constant in h (a step at each pairwise distance); a
  grid and parabola steps land in one step's basin, measured 0.3 % to 3 % (scalar) and up to
  20 % (per feature) above the brute-force minimum. Expected failures, stated below.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize, minimize_scalar

from nadaraya import kernels
from nadaraya.bandwidth import BandwidthWarning, score_bandwidth, select_bandwidth

KERNELS = [k for k in kernels.names() if k != "constant"]
C0 = {"epanechnikov", "triangular", "cosine"}  # the derivative jumps at |u| = 1
TOL = {k: 3e-4 if k in C0 else 1e-6 for k in KERNELS}
BOXCAR = "the boxcar's criterion is piecewise constant in h: the grid and Brent land in one step's basin"

# Per feature, for kernels other than the Gaussian, the search (coordinate sweeps, L-BFGS-B
# with finite differences from several starts) misses the minimum on these data: measured
# relative excess over the brute-force minimum, and why.
PER_FEATURE_MISSES = {
    ("boxcar", "cv"): BOXCAR + " (1.8 % above)",
    ("boxcar", "aicc"): BOXCAR + " (10 % above)",
}


# -- the criteria, written plainly ------------------------------------------------------------


def _log_kernel(kernel: kernels.Kernel, u: np.ndarray) -> np.ndarray:
    """log K(u), -inf outside a compact kernel's support."""
    with np.errstate(divide="ignore"):
        return np.log(kernel.profile(u))


def _criteria(log_w: np.ndarray, y: np.ndarray, method: str) -> np.ndarray:
    """CV or AICc from log weights ``log_w`` (..., n, n) of the full smoother (diagonal included).

    CV: mean of (y_i - sum_{j != i} w_ij y_j / sum_{j != i} w_ij)^2, inf where a point has no
    neighbour. AICc (Hurvich, Simonoff and Tsai 1998): log(sigma2) + (1 + tr(H)/n) / (1 -
    (tr(H) + 2)/n) with H = w / row sums and sigma2 the mean squared in-sample residual; inf
    when the denominator is not positive. Each row is scaled by its largest weight first
    (normalising constants cancel), so that small Gaussian bandwidths do not underflow.
    """
    n = y.size
    if method == "cv":
        log_w = log_w.copy()
        log_w[..., np.arange(n), np.arange(n)] = -np.inf
    top = log_w.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        w = np.where(np.isfinite(top), np.exp(log_w - top), 0.0)
    total = w.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        fit = (w @ y) / total
        if method == "cv":
            return np.where((total > 0).all(axis=-1), np.mean((y - fit) ** 2, axis=-1), np.inf)
        trace = (np.diagonal(w, axis1=-2, axis2=-1) / total).sum(axis=-1)
        sigma2 = np.mean((y - fit) ** 2, axis=-1)
        denom = 1.0 - (trace + 2.0) / n
        return np.where((denom > 0) & (sigma2 > 0), np.log(sigma2) + (1.0 + trace / n) / denom, np.inf)


def plain_criterion(X: np.ndarray, y: np.ndarray, h: np.ndarray, kernel: str, method: str) -> float:
    """The criterion at one bandwidth h (d,) by the dense formula."""
    k = kernels.get(kernel)
    u = (X[:, None, :] - X[None, :, :]) / np.asarray(h, float)
    return float(_criteria(_log_kernel(k, u).sum(axis=-1), y, method))


# -- the data -----------------------------------------------------------------------------------


@functools.cache
def scalar_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 4, 100))
    return x[:, None], np.sin(2 * x) + 0.5 * x + rng.normal(0, 0.3, x.size)


@functools.cache
def per_feature_data() -> tuple[np.ndarray, np.ndarray]:
    """Two features on different scales that both help predict y (no smoothed-out optimum)."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(0, 1, 80), rng.uniform(0, 10, 80)])
    y = np.sin(2 * np.pi * X[:, 0]) + 0.3 * np.cos(X[:, 1]) + rng.normal(0, 0.2, 80)
    return X, y


def _select(X, y, kernel, method, per_feature):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        return select_bandwidth(X, y, kernel=kernel, method=method, per_feature=per_feature)


# -- brute force ------------------------------------------------------------------------------


def brute_scalar(X, y, kernel, method, lo, hi):
    """The minimum over 400 log-spaced bandwidths in [lo, hi], refined between the best one's
    neighbours by 201 more and a bounded Brent search to 1e-9 in log h."""
    k = kernels.get(kernel)
    diff = X[:, 0][:, None] - X[:, 0][None, :]

    def on(hs):
        return _criteria(_log_kernel(k, diff[None] / hs[:, None, None]), y, method)

    hs = np.geomspace(lo, hi, 400)
    coarse = on(hs)
    i = int(np.argmin(coarse))
    a, b = hs[max(i - 1, 0)], hs[min(i + 1, hs.size - 1)]
    fine_h = np.geomspace(a, b, 201)
    fine = on(fine_h)
    j = int(np.argmin(fine))
    res = minimize_scalar(lambda v: on(np.exp([v]))[0], bounds=(np.log(a), np.log(b)), method="bounded",
                          options={"xatol": 1e-9})
    return min(float(coarse[i]), float(fine[j]), float(res.fun))


def brute_per_feature(X, y, kernel, method, bounds):
    """The minimum over a 60 x 60 log-spaced grid within ``bounds`` (d = 2), refined by a
    bounded Nelder-Mead on log h from the grid's best point."""
    k = kernels.get(kernel)
    grids = [np.geomspace(*bounds[j], 60) for j in range(2)]
    logs = [_log_kernel(k, (X[:, j][:, None] - X[:, j][None, :])[None] / grids[j][:, None, None])
            for j in range(2)]
    table = np.stack([_criteria(logs[0][a][None] + logs[1], y, method) for a in range(60)])
    a, b = np.unravel_index(np.argmin(table), table.shape)
    start = np.log([grids[0][a], grids[1][b]])
    res = minimize(lambda v: plain_criterion(X, y, np.exp(v), kernel, method), start, method="Nelder-Mead",
                   bounds=np.log(bounds), options={"xatol": 1e-7, "fatol": 1e-14, "maxiter": 2000})
    return min(float(table[a, b]), float(res.fun))


# -- the tests ----------------------------------------------------------------------------------


def test_every_kernel_has_a_stated_tolerance():
    assert set(TOL) == set(kernels.names()) - {"constant"}


def _params(per_feature: bool):
    out = []
    for kernel in KERNELS:
        for method in ("cv", "aicc"):
            marks = []
            if kernel == "boxcar" and not per_feature:
                marks = [pytest.mark.xfail(strict=True, reason=BOXCAR + " (0.3 % to 3 % above)")]
            elif per_feature and (kernel, method) in PER_FEATURE_MISSES:
                marks = [pytest.mark.xfail(strict=True, reason=PER_FEATURE_MISSES[kernel, method])]
            out.append(pytest.param(kernel, method, marks=marks, id=f"{kernel}-{method}"))
    return out


@pytest.mark.parametrize("kernel, method", _params(per_feature=False))
def test_scalar_search_finds_the_brute_force_minimum(kernel, method):
    X, y = scalar_data()
    res = _select(X, y, kernel, method, per_feature=False)
    chosen = plain_criterion(X, y, res.bandwidth, kernel, method)
    assert abs(res.score - chosen) <= 1e-10 * abs(chosen)  # the reported score is the criterion
    best = brute_scalar(X, y, kernel, method, *res.bounds[0])
    assert chosen <= best + TOL[kernel] * abs(best), (
        f"h = {res.bandwidth[0]:.6g}: criterion {chosen:.10g}, brute-force minimum {best:.10g} "
        f"(relative excess {(chosen - best) / abs(best):.2e}, tolerance {TOL[kernel]:.0e})"
    )


@pytest.mark.parametrize("kernel, method", _params(per_feature=True))
def test_per_feature_search_finds_the_brute_force_minimum(kernel, method):
    X, y = per_feature_data()
    res = _select(X, y, kernel, method, per_feature=True)
    chosen = plain_criterion(X, y, res.bandwidth, kernel, method)
    assert abs(res.score - chosen) <= 1e-10 * abs(chosen)
    best = brute_per_feature(X, y, kernel, method, res.bounds)
    assert chosen <= best + TOL[kernel] * abs(best), (
        f"h = {res.bandwidth}: criterion {chosen:.10g}, brute-force minimum {best:.10g} "
        f"(relative excess {(chosen - best) / abs(best):.2e}, tolerance {TOL[kernel]:.0e})"
    )


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_score_bandwidth_is_the_plain_formula(kernel, method):
    X, y = per_feature_data()
    for h in ([0.15, 2.0], [0.4, 0.9], [0.05, 30.0]):
        want = plain_criterion(X, y, np.array(h), kernel, method)
        got = score_bandwidth(X, y, h, kernel=kernel, method=method)
        assert got == pytest.approx(want, rel=1e-10, abs=0), h
    x1, y1 = scalar_data()
    for h in (0.1, 0.3, 1.5):
        want = plain_criterion(x1, y1, np.array([h]), kernel, method)
        assert score_bandwidth(x1[:, 0], y1, h, kernel=kernel, method=method) == pytest.approx(
            want, rel=1e-10, abs=0
        ), h
