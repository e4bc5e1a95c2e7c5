"""The bandwidth package after the house move (issue 13): its public face, the trusting entry
points the estimator calls, the rules as pure functions, the one parabola vertex, and the numba
plumbing in nadaraya._support.jit."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import nadaraya.bandwidth as bw
from nadaraya.bandwidth.optimise import brent, halley, parabola_vertex
from nadaraya.bandwidth.rules import _robust_scale, _rule_of_thumb
from nadaraya.bandwidth.search import _select_bandwidth
from nadaraya.kernels import get

PUBLIC = ("METHODS", "RULES", "BandwidthSelection", "BandwidthWarning", "check_rule_input", "robust_scale",
          "rule_factor", "rule_of_thumb", "score_bandwidth", "select_bandwidth")


def test_the_public_face_keeps_every_name_and_the_recorded_module():
    assert set(bw.__all__) == set(PUBLIC)
    for name in PUBLIC:
        assert getattr(bw, name) is not None
    # model files and warning filters name them by this module
    assert bw.BandwidthSelection.__module__ == "nadaraya.bandwidth"
    assert bw.BandwidthWarning.__module__ == "nadaraya.bandwidth"
    assert tuple(bw.RULES) == ("scott", "silverman") and bw.METHODS == ("cv", "aicc")


def _data(n=90, d=2, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 4, (n, d))
    y = np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=n)
    return X, y, rng.uniform(0.0, 2.0, n)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("per_feature", [False, True])
def test_trusting_select_equals_the_public_one(kernel, per_feature):
    X, y, sw = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bw.BandwidthWarning)
        public = bw.select_bandwidth(X, y, kernel=kernel, per_feature=per_feature, sample_weight=sw)
        trusted = _select_bandwidth(X, y[:, None], sw, get(kernel), "cv", per_feature)
    np.testing.assert_array_equal(trusted.bandwidth, public.bandwidth)
    assert trusted.score == public.score and trusted.n_passes == public.n_passes


def test_trusting_select_on_points_sorted_already_gives_the_same_search():
    """The estimator sorts once; the search does not sort again, and the result is the same."""
    X, y, sw = _data(seed=5)
    order = np.argsort(X[:, 0], kind="stable")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bw.BandwidthWarning)
        a = _select_bandwidth(X, y[:, None], sw, get("gaussian"), "aicc", True)
        b = _select_bandwidth(X[order], y[order, None], sw[order], get("gaussian"), "aicc", True)
    np.testing.assert_array_equal(a.bandwidth, b.bandwidth)
    assert a.score == b.score


def test_trusting_select_still_checks_the_data():
    X, y, _ = _data(n=5)
    with pytest.raises(ValueError, match="at least 3 samples"):
        _select_bandwidth(X, y[:, None], np.array([1.0, 1.0, 0.0, 0.0, 0.0]), get("gaussian"), "cv", False)
    X[:, 1] = 2.5
    with pytest.raises(ValueError, match="feature 1 has zero spread"):
        _select_bandwidth(X, y[:, None], None, get("gaussian"), "cv", False)


def test_trusting_rules_equal_the_public_ones():
    X, _, sw = _data(n=70, d=3)
    np.testing.assert_array_equal(_robust_scale(X, sw), bw.robust_scale(X, sw))
    np.testing.assert_array_equal(_rule_of_thumb(X, "silverman", get("biweight"), sw),
                                  bw.rule_of_thumb(X, "silverman", kernel="biweight", sample_weight=sw))


@pytest.mark.parametrize("d", [1, 2, 5])
def test_rules_are_scipys_gaussian_kde_factors(d):
    from scipy.stats import gaussian_kde

    kde = gaussian_kde(np.random.default_rng(d).normal(size=(d, 40)))
    assert bw.RULES["scott"](40.0, d) == pytest.approx(kde.scotts_factor(), rel=1e-14)
    assert bw.RULES["silverman"](40.0, d) == pytest.approx(kde.silverman_factor(), rel=1e-14)


def test_parabola_vertex_against_a_fitted_parabola():
    xs, fs = (0.3, 1.1, 2.9), (2.0, 0.7, 1.9)
    a2, a1, _ = np.polyfit(xs, fs, 2)
    assert parabola_vertex(xs, fs) == pytest.approx(-a1 / (2 * a2), rel=1e-12)
    assert math.isnan(parabola_vertex((0.0, 1.0, 2.0), (0.0, 1.0, 2.0)))  # collinear
    assert math.isnan(parabola_vertex((0.0, 1.0, 2.0), (math.inf, 1.0, 2.0)))


def test_halley_and_brent_find_the_minimum_of_a_smooth_function():
    def f(x):
        return (math.cosh(x - 0.3), math.sinh(x - 0.3), math.cosh(x - 0.3), math.sinh(x - 0.3))

    xs = (-1.0, 0.0, 1.0)
    fs = tuple(f(x)[0] for x in xs)
    x, _, ok = halley(f, xs, fs, 1e-8)
    assert ok and x == pytest.approx(0.3, abs=1e-7)
    x, _, ok = brent(lambda t: f(t)[0], xs, fs, 1e-6)
    assert ok and x == pytest.approx(0.3, abs=2e-6)


def test_run_ranges_covers_every_row_once_on_several_threads():
    import numba

    from nadaraya._support.jit import run_ranges, threads_for

    @numba.njit(nogil=True)
    def task(a, b, out):  # pragma: no cover - compiled
        for i in range(a, b):
            out[i] += i

    out = np.zeros(1000)
    run_ranges(task, (), 1000, (out,))
    np.testing.assert_array_equal(out, np.arange(1000.0))
    before = numba.get_num_threads()
    with threads_for(10):
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before


def test_generated_runs_the_source_once_per_number_of_features():
    import numba

    from nadaraya._support.jit import generated

    calls = []

    def source(k):
        calls.append(k)
        return f"K = {k}"

    cache: dict = {}
    for k in (2, 3, 2):
        assert generated(cache, numba.types.IntegerLiteral(k), source, "demo", {})["K"] == k
    assert calls == [2, 3]
    assert generated(cache, numba.types.int64, source, "demo", {}) is None  # not a constant
