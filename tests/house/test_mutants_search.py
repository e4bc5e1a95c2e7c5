"""Tests that kill the bandwidth search's last survivors of ``make mutants`` (bandwidth/search.py).

Each compares the search with a plain computation written here (the grid's points, the
leave-one-out CV and AICc of product kernels) or checks what a user sees (where a warning
points, which warning comes, which error). docs/testing.md lists each mutant and its test.
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pytest

import nadaraya.bandwidth.search as search_module
from nadaraya.bandwidth import BandwidthWarning, rule_of_thumb, select_bandwidth

#: under mutmut the functions of search.py sit behind trampolines, extra stack frames that move
#: where any fixed ``stacklevel`` points: a test of the warning's location cannot pass there
_TRAMPOLINED = hasattr(search_module, "_mutmut_mutated")

_PROFILES = {
    "epanechnikov": lambda u: np.where(np.abs(u) <= 1, 1.0 - u**2, 0.0),
    "biweight": lambda u: np.where(np.abs(u) <= 1, (1.0 - u**2) ** 2, 0.0),
    "triangular": lambda u: np.clip(1.0 - np.abs(u), 0.0, None),
}


def _plain_weights(X, h, kernel):
    """The product-kernel weights of every pair, own terms included (constants cancel)."""
    return np.prod(_PROFILES[kernel]((X[:, None, :] - X[None, :, :]) / h), axis=2)


def _plain_cv(X, y, h, kernel):
    """Leave-one-out CV, written out: the mean squared residual of each point's average of the others."""
    w = _plain_weights(X, h, kernel)
    np.fill_diagonal(w, 0.0)
    return float(np.mean((y - w @ y / w.sum(axis=1)) ** 2))


def _plain_aicc(X, y, h, kernel):
    """AICc of Hurvich, Simonoff and Tsai: log sigma^2 + (1 + tr H / n) / (1 - (tr H + 2) / n), inf
    past its pole."""
    w = _plain_weights(X, h, kernel)
    H = w / w.sum(axis=1, keepdims=True)
    n, tr = y.size, float(np.trace(H))
    sigma2 = float(np.mean((y - H @ y) ** 2))
    denom = 1.0 - (tr + 2.0) / n
    return math.log(sigma2) + (1.0 + tr / n) / denom if denom > 0 and sigma2 > 0 else math.inf


def _quiet(*args, **kwargs):
    """select_bandwidth with every warning recorded (RuntimeWarnings raised) and returned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", RuntimeWarning)
        res = select_bandwidth(*args, **kwargs)
    return res, [str(w.message) for w in caught]


# -- where the warning points: `_emit` 6, 9, 10, `select_bandwidth` 34, 47, 59, 68 and
# -- `_select_bandwidth` 136 -----------------------------------------------------------------


@pytest.mark.skipif(_TRAMPOLINED, reason="mutmut's trampolines add stack frames (docs/testing.md)")
@pytest.mark.parametrize("case", ["lower bound", "constant y"])
def test_the_searchs_one_warning_points_at_the_callers_own_line(case):
    """The one BandwidthWarning of a call points at the line that called select_bandwidth: this
    file and that line, not search.py (a stacklevel too small, or the warning raised inside the
    search) nor the frame above the caller (one too large: pytest's own file here)."""
    e = np.array([-0.02, 0.0, 0.02])
    x = (np.arange(5.0)[:, None] + e).ravel()  # triples of close points
    if case == "lower bound":  # y linear within each triple: CV's choice is the lower bound
        y = (np.array([0.0, 5.0, 0.0, 5.0, 0.0])[:, None] + 10 * e).ravel()
    else:
        y = np.full(x.size, 2.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        select_bandwidth(x, y)
    ours = [w for w in caught if issubclass(w.category, BandwidthWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert case in str(ours[0].message) or (case == "constant y" and "y is constant" in str(ours[0].message))
    assert (ours[0].filename, ours[0].lineno) == (__file__, line)


# -- the compact kernel's floor on the grid: `_grid` 70, 72, 73, 75 ----------------------------


def test_grid_keeps_a_point_just_above_the_floor_and_does_not_append_the_floor():
    """A compact kernel's CV grid keeps the points above the floor (the largest distance from a
    point to its nearest neighbour, plus 1e-9 relative) and appends the floor only where the
    lowest of them is more than 1 % above it. Here one grid point lies 0.5 % above the floor:
    the grid is the sqrt 2 steps down to that point, and no more."""
    from scipy.optimize import brentq

    def data(gap):  # ten points one apart, and one `gap` beyond the last: the floor is `gap`
        return np.append(np.arange(10.0), 9.0 + gap)

    def rot(gap):
        return float(rule_of_thumb(data(gap), "scott", kernel="epanechnikov")[0])

    # a gap with a grid point rot * 2^(k/2) at 1.005 times the floor gap * (1 + 1e-9)
    k = math.floor(2 * math.log2(2.0 / rot(2.0)))
    gap = brentq(lambda g: math.log(rot(g) * 2.0 ** (k / 2) / (g * (1 + 1e-9) * 1.005)), 1.0, 30.0,
                 xtol=1e-14)
    x = data(gap)
    y = np.sin(x)
    res, _ = _quiet(x, y, kernel="epanechnikov")
    grid = res.search["bandwidths"][res.search["stages"] == "grid", 0]
    floor = gap * (1 + 1e-9)
    r = float(res.rule_of_thumb[0])
    assert r == pytest.approx(rot(gap), rel=1e-12)
    n_above = max(10, math.ceil(2 * math.log2(3 * np.ptp(x) / r)))
    plain = [r * 2.0 ** (j / 2) for j in range(n_above, -13, -1) if r * 2.0 ** (j / 2) > floor]
    assert floor < plain[-1] <= 1.01 * floor  # the case this test is about
    np.testing.assert_allclose(grid, plain, rtol=1e-12)


# -- the second L-BFGS-B run after features are smoothed out: `_per_feature` 111, 116 and
# -- `_smooth_out` 21 ------------------------------------------------------------------------


def test_per_feature_cv_keeps_the_second_lbfgsb_run_after_smoothing_out():
    """Three features, the second a noisy copy of the first: the first L-BFGS-B run leaves the
    third feature past its range but short of its upper bound; smoothed out there it scores no
    worse, and a second run from that point improves CV a little (5e-6 relative). The result is
    that run's end: the best bandwidth evaluated, scored by the plain leave-one-out CV."""
    rng = np.random.default_rng(195)
    n = int(rng.integers(20, 45))
    X = rng.uniform(0, 1, (n, 3))
    X[:, 1] = X[:, 0] + rng.normal(0, 0.2, n)
    y = np.sin(6 * X[:, 0]) + 0.3 * X[:, 1] + rng.normal(0, 0.1, n)
    res, caught = _quiet(X, y, kernel="triangular", per_feature=True)
    assert not caught and res.smoothed_out.tolist() == [False, False, True]
    assert res.score == pytest.approx(float(res.search["scores"].min()), rel=1e-7)
    assert res.score == pytest.approx(_plain_cv(X, y, res.bandwidth, "triangular"), rel=1e-9)


def _biweight_aicc_data():
    """Three features, only the first useful, 30 points: the per-feature AICc of the biweight
    kernel meets its pole (tr H + 2 >= n) at small bandwidths."""
    rng = np.random.default_rng(58)
    X = rng.uniform(0, 1, (30, 3))
    return X, np.sin(6 * X[:, 0]) + rng.normal(0, 0.1, 30)


def test_per_feature_aicc_ends_where_a_plain_minimiser_finds_nothing_better():
    """After the first L-BFGS-B run a feature past its range is smoothed out, and L-BFGS-B runs
    again from there: the result is a minimum of the plain AICc (scipy's Nelder-Mead on log h,
    started there with steps of 10 % and held inside the bounds, gains less than 1e-6; without
    the second run it would gain 0.05), scored by the plain AICc."""
    from scipy.optimize import minimize

    X, y = _biweight_aicc_data()
    res, caught = _quiet(X, y, kernel="biweight", per_feature=True, method="aicc")
    assert not caught
    assert res.score == pytest.approx(_plain_aicc(X, y, res.bandwidth, "biweight"), rel=1e-9)
    lo, hi = np.log(res.bounds[:, 0]), np.log(res.bounds[:, 1])
    v0 = np.log(res.bandwidth)
    plain = minimize(lambda v: _plain_aicc(X, y, np.exp(np.clip(v, lo, hi)), "biweight"), v0,
                     method="Nelder-Mead", bounds=list(zip(lo, hi)),
                     options={"initial_simplex": v0 + np.vstack([np.zeros(3), 0.1 * np.eye(3)]),
                              "xatol": 1e-4, "fatol": 1e-8})
    assert plain.fun > res.score - 1e-6


def test_per_feature_aicc_past_its_pole_is_quiet():
    """Where L-BFGS-B steps past AICc's pole the criterion is inf and its finite differences are
    inf - inf: L-BFGS-B steps back from them, and no RuntimeWarning reaches the caller."""
    X, y = _biweight_aicc_data()
    res, _ = _quiet(X, y, kernel="biweight", per_feature=True, method="aicc")  # RuntimeWarnings raise
    scores = res.search["scores"]
    assert np.isinf(scores).any() and np.isfinite(res.score)  # the pole was met


# -- the upper-bound note only on the bound: `_per_feature` 141 ---------------------------------


def test_per_feature_bandwidth_short_of_its_upper_bound_gets_no_note():
    """A feature that ends past its range but short of its upper bound (triangular kernel,
    AICc) is neither on its upper bound nor smoothed out (its weights still vary by more than
    1 %): no note, no warning."""
    rng = np.random.default_rng(15)
    X = rng.uniform(0, 1, (30, 2))
    y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.1, 30)
    res, caught = _quiet(X, y, kernel="triangular", per_feature=True, method="aicc")
    ranges = res.bandwidth[1] / np.ptp(X[:, 1])
    assert ranges > 1 and res.bandwidth[1] < res.bounds[1, 1] / math.e  # the case
    assert not res.smoothed_out[1]
    assert caught == []


# -- the mixed search's backend: `_select_bandwidth` 22 -----------------------------------------


def test_mixed_search_passes_the_backend_on():
    """With a categorical column and more points than its dense pass takes (2048), each pass of
    the mixed search runs on the backend asked for: an unknown one is refused by name."""
    rng = np.random.default_rng(0)
    n = 2100
    X = np.column_stack([rng.uniform(0, 1, n), rng.integers(0, 3, n)])
    y = np.sin(6 * X[:, 0]) + X[:, 1] + rng.normal(0, 0.1, n)
    with pytest.raises(ValueError, match="backend='nope' is not known"):
        select_bandwidth(X, y, var_types="cu", backend="nope")
