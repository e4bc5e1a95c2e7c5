"""Trust, round 3 (issue 28): far points in the compiled leave-one-out passes, the hat diagonal
where a leave-one-out fit falls back to a lower degree, and local fits at extreme x scales."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya.bandwidth import score_bandwidth, select_bandwidth
from nadaraya.bandwidth.criteria import _Objective
from nadaraya.kernels import get as get_kernel


# -- item 2: a point far from all others --------------------------------------------------
def _far_data(seed: int = 0, n: int = 500, far: float = 1e10):
    """The issue's data: 500 points on [0, 5] and one at ``far``."""
    rng = np.random.default_rng(seed)
    x = np.r_[rng.uniform(0, 5, n), far]
    return x, np.sin(x) + 0.1 * rng.standard_normal(x.size)


def _plain_cv(x, y, h):
    """Leave-one-out CV of the Nadaraya-Watson estimate written out: each row's log weights less
    their maximum (a far point's nearest neighbour weighs one), the own term left out."""
    x = np.asarray(x, dtype=np.float64).reshape(len(y), -1)
    u = (x[:, None, :] - x[None, :, :]) / np.asarray(h, dtype=np.float64)
    logw = -0.5 * (u**2).sum(axis=2)
    np.fill_diagonal(logw, -np.inf)
    w = np.exp(logw - logw.max(axis=1, keepdims=True))
    pred = w @ y / w.sum(axis=1)
    return float(np.mean((y - pred) ** 2))


@pytest.mark.parametrize("far", [1e10, -1e12])
def test_far_point_gets_its_limit_in_every_compiled_degree_0_pass(far):
    """The grid's levels, the Halley curvature pass, the gradient pass and the primitive's
    leave-one-out pass score a bandwidth as the reference backend does (and as the plain
    formula does), with one point 1e10 bandwidths from all others."""
    x, y = _far_data(far=far)
    obj = _Objective(x[:, None], y[:, None], None, get_kernel("gaussian"), "cv", "auto")
    hs = 1.0 * 2.0 ** (-np.arange(6) / 2)
    levels = obj.levels(np.array([1.0]), hs.size)
    for h, lev in zip(hs, levels):
        ref = score_bandwidth(x, y, h, backend="reference")
        plain = _plain_cv(x, y, h)
        assert ref == pytest.approx(plain, rel=1e-10)
        assert lev == pytest.approx(ref, rel=1e-10)
        assert obj.curvature(np.array([h]))[0] == pytest.approx(ref, rel=1e-10)
        assert score_bandwidth(x, y, h, gradient=True)[0] == pytest.approx(ref, rel=1e-10)
        assert score_bandwidth(x, y, h) == pytest.approx(ref, rel=1e-10)
        for be in ("fused", "auto"):
            aicc = score_bandwidth(x, y, h, method="aicc", backend=be)
            ref_aicc = score_bandwidth(x, y, h, method="aicc", backend="reference")
            assert aicc == pytest.approx(ref_aicc, rel=1e-10)


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_far_point_derivatives_of_the_compiled_passes_match_finite_differences(method):
    """The curvature pass's first two derivatives along log h and the per-feature gradient stay
    those of the reference scores (the far point's moments no longer cancel at 1e20)."""
    x, y = _far_data()
    obj = _Objective(x[:, None], y[:, None], None, get_kernel("gaussian"), method, "auto")

    def ref(t):
        return score_bandwidth(x, y, np.exp(t), method=method, backend="reference")

    t, e = np.log(0.3), 1e-4
    _, d1, d2, d3 = obj.curvature(np.array([np.exp(t)]))
    fd1 = (ref(t + e) - ref(t - e)) / (2 * e)
    fd2 = (ref(t + e) - 2 * ref(t) + ref(t - e)) / e**2
    assert d1 == pytest.approx(fd1, rel=1e-5, abs=1e-9)
    assert d2 == pytest.approx(fd2, rel=1e-3, abs=1e-6)
    assert np.isfinite(d3) and abs(d3) < 1e3

    rng = np.random.default_rng(3)
    X = np.c_[x, rng.uniform(0, 1, x.size)]
    X[-1, 1] = 0.5
    y2 = y + X[:, 1]
    h = np.array([0.2, 0.3])
    score, grad = score_bandwidth(X, y2, h, gradient=True, method=method)
    assert score == pytest.approx(score_bandwidth(X, y2, h, method=method, backend="reference"), rel=1e-10)
    for k in range(2):
        step = np.zeros(2)
        step[k] = e
        up = score_bandwidth(X, y2, h * np.exp(step), method=method, backend="reference")
        down = score_bandwidth(X, y2, h * np.exp(-step), method=method, backend="reference")
        assert grad[k] == pytest.approx((up - down) / (2 * e), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_far_point_local_fit_passes_match_the_reference_backend(degree, method):
    x, y = _far_data()
    for h in np.geomspace(0.02, 2.0, 7):
        got = score_bandwidth(x, y, h, degree=degree, method=method)
        assert np.isfinite(got)
        ref = score_bandwidth(x, y, h, degree=degree, method=method, backend="reference")
        assert got == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("degree", [0, 1])
def test_far_point_mixed_data_pass_matches_the_reference_backend(degree):
    x, y = _far_data()
    rng = np.random.default_rng(4)
    X = np.c_[x, rng.integers(0, 3, x.size)]
    y3 = y + X[:, 1]
    for h in ([0.2, 0.3], [1.0, 0.1]):
        got = score_bandwidth(X, y3, h, degree=degree, var_types="cu")
        ref = score_bandwidth(X, y3, h, degree=degree, var_types="cu", backend="reference")
        assert got == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_far_point_leaves_the_default_search_near_the_best_bandwidth(degree):
    """The search's bandwidth scores (by the reference backend) within 10 % of the best of a
    fine grid scored by the reference backend: the far point no longer makes every finite
    bandwidth inf."""
    x, y = _far_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = select_bandwidth(x, y, degree=degree)
    got = score_bandwidth(x, y, res.bandwidth, degree=degree, backend="reference")
    grid = [score_bandwidth(x, y, h, degree=degree, backend="reference") for h in np.geomspace(0.02, 5, 40)]
    assert np.isfinite(res.score)
    assert got <= 1.1 * min(grid)


def test_far_point_pool_leave_one_out_takes_the_nearest_neighbour():
    """A leave-one-out prediction at the far point is its nearest neighbour's value, in the
    fused backend as in the reference one."""
    x, y = _far_data()
    for be in ("fused", "reference"):
        got = nadaraya.loo_pool(x[:, None], y, bandwidth=0.2, backend=be)
        assert got[-1] == pytest.approx(y[np.argmax(x[:-1])], rel=1e-12)


@pytest.mark.parametrize("far", [1e10, 1e150])
def test_far_point_levels_pass_takes_the_exact_nearest_neighbour_limit(far):
    """Beyond where ``g - c`` rounds to noise (c ~ 1e20 here; 1e300 at 1e150), every level's
    prediction at the far point is its nearest neighbour's value, and the other rows' are
    those of the plain sums without it."""
    from nadaraya.bandwidth._passes import loo_levels, shifts

    x, y = _far_data(far=far)
    zt = np.ascontiguousarray(x[None] / np.sqrt(2.0))
    c, ref = shifts(zt)
    S, T = loo_levels(zt, c, ref, np.ones(x.size), np.ascontiguousarray(y[None]), 6)
    pred = T[:, :, 0] / S
    assert np.all(pred[:, -1] == y[np.argmax(x[:-1])])
    for lev in range(6):
        h = 2.0 ** (-lev / 2)
        u = (x[:-1, None] - x[None, :-1]) / h
        w = np.exp(-0.5 * u**2)
        np.fill_diagonal(w, 0.0)
        np.testing.assert_allclose(pred[lev, :-1], w @ y[:-1] / w.sum(axis=1), rtol=1e-11)
