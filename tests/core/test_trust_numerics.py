"""Trust, round 3 (issue 28): far points in the compiled leave-one-out passes, the hat diagonal
where a leave-one-out fit falls back to a lower degree, and local fits at extreme x scales."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya.backends import WITHIN_TOL
from nadaraya.bandwidth import score_bandwidth, select_bandwidth
from nadaraya.bandwidth._objective import _Objective
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


# -- item 3: the hat diagonal where a leave-one-out fit falls back to a lower degree -------
def _fallback_cases():
    """Designs where some leave-one-out local system is singular while the in-sample one is
    regular (X, y, bandwidth, degree, kernel, sample_weight, var_types)."""
    rng = np.random.default_rng(0)
    x = np.r_[0.0, 0.3, rng.uniform(3, 8, 30)]
    pair = (x[:, None], np.sin(x) + 0.1 * rng.standard_normal(x.size), 1.0, 1, "epanechnikov", None, None)
    three = (np.array([[0.0], [1.0], [2.5]]), np.array([1.0, 3.0, 2.0]), 0.7, 2, "gaussian", None, None)
    x = np.r_[0.0, 0.3, 0.5, rng.uniform(3, 8, 30)]
    triple = (x[:, None], np.cos(x) + 0.1 * rng.standard_normal(x.size), 1.0, 2, "tricube", None, None)
    x = pair[0][:, 0]
    sw = rng.uniform(0.5, 2.0, x.size)
    weighted = (x[:, None], np.cos(x) + 0.1 * rng.standard_normal(x.size), 1.0, 1, "epanechnikov", sw, None)
    X2 = np.c_[np.r_[0.0, 0.2, rng.uniform(3, 8, 40)], np.r_[0.0, 0.1, rng.uniform(3, 8, 40)]]
    plane = (X2, X2.sum(axis=1) ** 2 / 10 + 0.1 * rng.standard_normal(42), np.array([1.0, 1.0]), 1, "tricube",
             None, None)
    Xm = np.c_[np.r_[0.0, 0.3, rng.uniform(3, 8, 30)], rng.integers(0, 2, 32)]
    mixed = (Xm, np.sin(Xm[:, 0]) + Xm[:, 1] + 0.1 * rng.standard_normal(32), np.array([1.0, 0.2]), 1,
             "epanechnikov", None, "cu")
    return {"pair": pair, "n3-degree2": three, "triple-degree2": triple, "weighted": weighted, "plane": plane,
            "mixed": mixed}


_CASES = _fallback_cases()


def _smoother(X, h, degree, kernel, sw, var_types):
    """The smoother matrix by brute force: pool's predictions of the unit vectors."""
    n = X.shape[0]
    return nadaraya.pool(X, X, np.eye(n), bandwidth=h, degree=degree, kernel=kernel, sample_weight=sw,
                         var_types=var_types, backend="reference")


@pytest.mark.parametrize("case", list(_CASES))
def test_hat_diagonal_and_in_sample_fits_equal_the_brute_force_smoother(case):
    from nadaraya.inference.training import training

    X, y, h, degree, kernel, sw, vt = _CASES[case]
    S = _smoother(X, h, degree, kernel, sw, vt)
    model = nadaraya.NadarayaWatson(kernel=kernel, bandwidth=h, degree=degree, var_types=vt)
    model.fit(X, y, sample_weight=sw)
    tr = training(model)
    order = [int(np.flatnonzero(np.equal(X, row).all(axis=1))[0]) for row in tr.X]  # the model's order
    np.testing.assert_allclose(tr.hat, np.diag(S)[order], rtol=0, atol=1e-10)
    np.testing.assert_allclose(tr.fits[:, 0], (S @ y)[order], rtol=0, atol=1e-10)
    assert (np.diag(S) > 1 - 1e-12).any()  # the case does interpolate somewhere


@pytest.mark.parametrize("case", [c for c in _CASES if c != "n3-degree2"])
def test_aicc_with_a_fallback_equals_the_brute_force_formula(case):
    """AICc = log(sigma^2) + (1 + tr(S) / N) / (1 - (tr(S) + 2) / N), written out from the
    brute-force smoother (weighted means with sample weights)."""
    X, y, h, degree, kernel, sw, vt = _CASES[case]
    S = _smoother(X, h, degree, kernel, sw, vt)
    s = np.ones(len(y)) if sw is None else sw
    N = s.sum()
    sigma2 = s @ (y - S @ y) ** 2 / N
    tr = s @ np.diag(S)
    want = np.log(sigma2) + (1 + tr / N) / (1 - (tr + 2) / N)
    got = score_bandwidth(X, y, h, method="aicc", degree=degree, kernel=kernel, sample_weight=sw,
                          var_types=vt)
    assert got == pytest.approx(want, rel=1e-10)


def test_aicc_of_three_points_at_degree_2_is_undefined():
    """n = 3 at degree 2 interpolates: tr(H) = 3 and AICc's denominator 1 - 5/3 < 0."""
    X, y, h, degree, kernel, _, _ = _CASES["n3-degree2"]
    assert np.allclose(np.diag(_smoother(X, h, degree, kernel, None, None)), 1.0)
    assert score_bandwidth(X, y, h, method="aicc", degree=degree, kernel=kernel) == np.inf


@pytest.mark.parametrize("case", ["pair", "triple-degree2", "weighted", "n3-degree2"])
def test_bootstrap_band_with_a_fallback_is_finite_and_sane(case):
    """Where the in-sample fit interpolates, its residual is 0: the wild bootstrap's replicates
    stay within the data's range (the wrong H_ii made them 1e5 wide)."""
    X, y, h, degree, kernel, sw, vt = _CASES[case]
    model = nadaraya.NadarayaWatson(kernel=kernel, bandwidth=h, degree=degree, var_types=vt)
    model.fit(X, y, sample_weight=sw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        band = model.confidence_band(X, method="bootstrap", n_boot=199, random_state=0)
    span = np.ptp(y)
    assert np.isfinite(band.lower).all() and np.isfinite(band.upper).all()
    assert (band.upper - band.lower).max() < 2 * span
    assert band.lower.min() > y.min() - span and band.upper.max() < y.max() + span


# -- item 5: local fits at extreme x scales ------------------------------------------------
_SCALES = [1e-200, 1e-160, 1e-60, 1e60, 1e160, 1e200]


def _local_backends():
    """(backend, kernel, degrees) for every registered backend that serves local fits here."""
    from nadaraya import backends

    have = set(backends.available())
    out = [("reference", "gaussian", (1, 2, 3)), ("reference", "epanechnikov", (1, 2, 3)),
           ("fused", "gaussian", (1, 2, 3)), ("fused", "tricube", (1, 2, 3)),
           ("windowed", "epanechnikov", (1, 2, 3)), ("truncated", "gaussian", (1, 2)),
           ("taylor", "gaussian", (1, 2)), ("dask", "gaussian", (1, 2, 3)), ("torch", "gaussian", (1, 2, 3))]
    return [pytest.param(*case, id=f"{case[0]}-{case[1]}") for case in out if case[0] in have]


def _curve(n=60, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 1, n))
    return x, np.sin(3 * x) + x**2


@pytest.mark.parametrize(("backend", "kernel", "degrees"), _local_backends())
def test_local_fits_are_scale_equivariant_in_x(backend, kernel, degrees):
    """pool(q s, k s, v, bandwidth=h s) equals the s = 1 fit, with no warning, for s from
    1e-200 to 1e200 (the moment sums were taken in the units of x and overflowed or
    underflowed beyond 1e+-155 / 77 / 50 at degree 1 / 2 / 3)."""
    x, v = _curve()
    q = np.linspace(0.05, 0.95, 9)
    tol = 1e-10 if backend in WITHIN_TOL else None  # the series refuses tol=None (exact)
    for degree in degrees:
        base = nadaraya.pool(q, x, v, bandwidth=0.2, degree=degree, kernel=kernel, backend=backend, tol=tol)
        for s in _SCALES:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got = nadaraya.pool(q * s, x * s, v, bandwidth=0.2 * s, degree=degree, kernel=kernel,
                                    backend=backend, tol=tol)
            np.testing.assert_allclose(got, base, rtol=1e-12, atol=1e-12 * np.abs(base).max(),
                                       err_msg=f"degree {degree}, s = {s}")


def test_issue_example_at_1e_minus_160_is_exact():
    """A line through the keys is fitted exactly at degree 1, also at x ~ 1e-160."""
    x = np.linspace(-1.0, 1.0, 41)
    for s in (1.0, 1e-160, 1e160):
        got = nadaraya.pool([0.0], x * s, x, bandwidth=0.1 * s, degree=1)
        assert abs(got[0]) < 1e-14


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_gradient_is_scale_equivariant_in_x(degree, kernel):
    """d f / d x at x s is the s = 1 slope divided by s; its standard error too."""
    x, v = _curve()
    q = np.linspace(0.1, 0.9, 7)[:, None]
    std = degree > 0 or kernel == "gaussian"  # (a degree-0 slope's SE needs the Gaussian kernel)
    model = nadaraya.NadarayaWatson(bandwidth=0.2, degree=degree, kernel=kernel).fit(x[:, None], v)
    g, se = model.gradient(q, return_std=True) if std else (model.gradient(q), None)
    for s in _SCALES:
        scaled = nadaraya.NadarayaWatson(bandwidth=0.2 * s, degree=degree, kernel=kernel)
        scaled.fit(x[:, None] * s, v)
        gs, ses = scaled.gradient(q * s, return_std=True) if std else (scaled.gradient(q * s), None)
        np.testing.assert_allclose(gs * s, g, rtol=1e-10, atol=1e-10 * np.abs(g).max(), err_msg=f"s = {s}")
        if std:
            np.testing.assert_allclose(ses * s, se, rtol=1e-8, err_msg=f"s = {s}")


@pytest.mark.parametrize("degree", [1, 2])
def test_mixed_and_dask_local_fits_are_scale_equivariant_in_x(degree):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(5)
    x, v = _curve()
    X = np.c_[x, rng.integers(0, 2, x.size)]
    Q = np.c_[np.linspace(0.05, 0.95, 7), np.ones(7)]
    base = nadaraya.pool(Q, X, v, bandwidth=[0.2, 0.3], degree=degree, var_types="cu")
    plain = nadaraya.pool(Q[:, 0], x, v, bandwidth=0.2, degree=degree)
    for s in (1e-200, 1e200):
        f = np.array([s, 1.0])
        got = nadaraya.pool(Q * f, X * f, v, bandwidth=[0.2 * s, 0.3], degree=degree, var_types="cu")
        np.testing.assert_allclose(got, base, rtol=1e-12)
        lazy = nadaraya.pool(da.from_array(Q * f, chunks=3), da.from_array(X * f, chunks=20), v,
                             bandwidth=[0.2 * s, 0.3], degree=degree, var_types="cu").compute()
        np.testing.assert_allclose(lazy, base, rtol=1e-12)
        lazy = nadaraya.pool(da.from_array(Q[:, 0] * s, chunks=3), da.from_array(x * s, chunks=20), v,
                             bandwidth=0.2 * s, degree=degree).compute()
        np.testing.assert_allclose(lazy, plain, rtol=1e-12)


@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_local_bandwidth_scores_are_scale_equivariant_in_x(degree, method):
    rng = np.random.default_rng(6)
    x = np.sort(rng.uniform(0, 1, 60))
    y = np.sin(3 * x) + 0.1 * rng.standard_normal(60)
    base = score_bandwidth(x, y, 0.2, degree=degree, method=method)
    for s in _SCALES:
        got = score_bandwidth(x * s, y, 0.2 * s, degree=degree, method=method)
        assert got == pytest.approx(base, rel=1e-12)


@pytest.mark.parametrize("s", [1e-160, 1e160])
def test_significance_test_p_values_are_scale_invariant_in_x(s):
    """The p-values do not depend on the units of x; the statistic (mean squared slope) scales
    as 1 / s^2 (inf or subnormal where that leaves float64)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (80, 2))
    y = np.sin(3 * x[:, 0]) + 0.1 * rng.standard_normal(80)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = nadaraya.NadarayaWatson(bandwidth=[0.2, 0.3], degree=1).fit(x, y)
        want = base.significance_test(x, y, n_boot=99, random_state=0)
        model = nadaraya.NadarayaWatson(bandwidth=[0.2 * s, 0.3 * s], degree=1).fit(x * s, y)
        got = model.significance_test(x * s, y, n_boot=99, random_state=0)
    np.testing.assert_array_equal(got.p_value, want.p_value)
    assert want.p_value[0] < 0.05 < want.p_value[1]
    if s < 1:  # about 1e320: beyond float64
        assert np.isinf(got.statistic).all()
    else:  # about 1e-320: subnormal, a few digits left
        np.testing.assert_allclose(np.log(got.statistic), np.log(want.statistic) - 2 * np.log(s), atol=0.1)
