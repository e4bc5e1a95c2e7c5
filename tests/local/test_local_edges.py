"""Local polynomial fits at the edges: units (values near the float64 limits, shifted and scaled
keys), degree 3, empty windows under each ``empty=`` policy, output shapes and dtypes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_local import gradient, local_fit
from test_local_mixed import mixed_weights

import nadaraya
from naive import naive_weights


@pytest.mark.parametrize("factor", [1e300, 1e-300, 2.0**-1060])
@pytest.mark.parametrize("degree", [1, 2])
def test_values_near_the_float64_limits_scale_the_fit(factor, degree):
    """A local polynomial fit is linear in the values: v * c gives f * c and slopes * c, also
    where v * c or the sums of it would overflow or be subnormal."""
    rng = np.random.default_rng(41)
    X, Q = rng.uniform(size=(60, 2)), rng.uniform(0.2, 0.8, size=(7, 2))
    y = np.sin(4 * X[:, 0]) + X[:, 1] + 2.0
    h = np.array([0.3, 0.4])
    base = nadaraya.pool(Q, X, y, bandwidth=h, degree=degree)
    got = nadaraya.pool(Q, X, y * factor, bandwidth=h, degree=degree)
    np.testing.assert_allclose(got / factor, base, rtol=1e-12 if factor > 1e-305 else 1e-3)
    g = gradient(Q, X, y * factor, degree=degree, bandwidth=h)
    if factor > 1e-305:
        np.testing.assert_allclose(g / factor, gradient(Q, X, y, degree=degree, bandwidth=h), rtol=1e-10)


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
def test_shifted_and_scaled_keys(degree, kernel):
    """Translating keys and queries leaves the fit (differences k - q are exact enough); scaling
    them with the bandwidth leaves the predictions and divides the slopes."""
    rng = np.random.default_rng(43)
    X, Q = rng.uniform(size=(80, 1)), rng.uniform(0.1, 0.9, size=(9, 1))
    y = np.cos(3 * X[:, 0])
    kw = dict(kernel=kernel, degree=degree)
    base = nadaraya.pool(Q, X, y, bandwidth=0.25, **kw)
    np.testing.assert_allclose(nadaraya.pool(Q + 1e6, X + 1e6, y, bandwidth=0.25, **kw), base, rtol=1e-7)
    small = nadaraya.pool(Q * 1e-4, X * 1e-4, y, bandwidth=0.25e-4, **kw)
    np.testing.assert_allclose(small, base, rtol=1e-10)
    g = gradient(Q * 1e3, X * 1e3, y, degree=degree, kernel=kernel, bandwidth=250.0)
    np.testing.assert_allclose(g * 1e3, gradient(Q, X, y, degree=degree, kernel=kernel, bandwidth=0.25),
                               rtol=1e-9)


@pytest.mark.parametrize("d", [1, 2])
def test_degree_three_against_weighted_least_squares(d):
    """The highest degree offered: a cubic is reproduced, any data matches lstsq."""
    rng = np.random.default_rng(47 + d)
    X, Q = rng.uniform(size=(200, d)), rng.uniform(0.1, 0.9, size=(10, d))
    y = np.exp(X).sum(axis=1)
    h = np.array([0.4, 0.5])[:d]
    want, _ = local_fit(Q, X, y, naive_weights(Q, X, "tricube", h), h, 3)
    got = nadaraya.pool(Q, X, y, kernel="tricube", bandwidth=h, degree=3)
    np.testing.assert_allclose(got, want[:, 0], rtol=1e-9)
    cubic = (X**3).sum(axis=1) - 2 * X[:, 0] ** 2 * X[:, -1] + X[:, -1]
    qc = (Q**3).sum(axis=1) - 2 * Q[:, 0] ** 2 * Q[:, -1] + Q[:, -1]
    np.testing.assert_allclose(nadaraya.pool(Q, X, cubic, kernel="tricube", bandwidth=h, degree=3), qc,
                               rtol=1e-9, atol=1e-10)


# --- empty windows ---------------------------------------------------------------------------------

X1 = np.array([0.0, 0.1, 0.2, 0.3, 5.0, 5.1, 5.2])
Y1 = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0])
Q1 = np.array([0.15, 2.5, 5.1, 9.0])


@pytest.mark.parametrize("degree", [1, 2])
def test_empty_windows_follow_the_empty_policy(degree):
    """Queries with no key in the window: NaN with one EmptyWindowWarning counting them,
    the nearest key's value, the mean of all values, or an error; the others get their fit."""
    kw = dict(kernel="epanechnikov", bandwidth=0.35, degree=degree)
    inside = local_fit(Q1[[0, 2], None], X1[:, None], Y1, naive_weights(Q1[[0, 2]], X1, "epanechnikov", 0.35),
                       0.35, degree)[0][:, 0]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = nadaraya.pool(Q1, X1, Y1, **kw)
    empty = [w for w in rec if issubclass(w.category, nadaraya.EmptyWindowWarning)]
    assert len(empty) == 1 and "2 of 4 queries" in str(empty[0].message)
    assert not [w for w in rec if not issubclass(w.category, nadaraya.EmptyWindowWarning)]
    np.testing.assert_allclose(got[[0, 2]], inside, rtol=1e-12)
    assert np.isnan(got[[1, 3]]).all()
    near = nadaraya.pool(Q1, X1, Y1, empty="nearest", **kw)
    np.testing.assert_allclose(near, [inside[0], 4.0, inside[1], 8.0], rtol=1e-12)
    mean = nadaraya.pool(Q1, X1, Y1, empty="mean", **kw)
    np.testing.assert_allclose(mean, [inside[0], Y1.mean(), inside[1], Y1.mean()], rtol=1e-12)
    with pytest.raises(ValueError, match="2 of 4 queries"):
        nadaraya.pool(Q1, X1, Y1, empty="raise", **kw)


def test_empty_policies_with_categorical_columns():
    """Mixed data: "nearest" takes the nearest key in the continuous columns, "mean" pools with
    the constant kernel there and keeps the categorical factors."""
    X = np.column_stack([X1, [0, 1, 0, 1, 0, 1, 1]])
    Q = np.column_stack([Q1, [0, 1, 0, 1]])
    bw = [0.35, 0.2]
    kw = dict(kernel="epanechnikov", bandwidth=bw, var_types="cu", degree=1)
    near = nadaraya.pool(Q, X, Y1, empty="nearest", **kw)
    np.testing.assert_allclose(near[[1, 3]], [4.0, 8.0], rtol=1e-12)
    mean = nadaraya.pool(Q, X, Y1, empty="mean", **kw)
    w = mixed_weights(Q[[1, 3]], X, "cu", bw, "constant")
    np.testing.assert_allclose(mean[[1, 3]], w @ Y1 / w.sum(axis=1), rtol=1e-12)


# --- shapes and dtypes ------------------------------------------------------------------------------


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("var_types", [None, "cu"])
def test_shapes_and_dtypes(degree, var_types):
    """(n,) values give (m,), (n, 1) give (m, 1), (n, 3) give (m, 3); all-float32 input stays float32,
    any float64 input gives float64."""
    rng = np.random.default_rng(53)
    X = np.column_stack([rng.uniform(size=40), rng.integers(0, 3, 40)])
    Q = np.column_stack([rng.uniform(size=6), rng.integers(0, 3, 6)])
    if var_types is None:
        X, Q = X[:, :1], Q[:, :1]
    bw = [0.3, 0.2] if var_types else 0.3
    kw = dict(bandwidth=bw, var_types=var_types, degree=degree)
    y = np.sin(X[:, 0])
    assert nadaraya.pool(Q, X, y, **kw).shape == (6,)
    assert nadaraya.pool(Q, X, y[:, None], **kw).shape == (6, 1)
    three = nadaraya.pool(Q, X, np.column_stack([y, 2 * y, y**2]), **kw)
    assert three.shape == (6, 3)
    np.testing.assert_allclose(three[:, 1], 2 * three[:, 0], rtol=1e-12)
    assert nadaraya.loo_pool(X, y[:, None], **kw).shape == (40, 1)
    f32 = [a.astype(np.float32) for a in (Q, X, y)]
    assert nadaraya.pool(*f32, **kw).dtype == np.float32
    assert nadaraya.loo_pool(f32[1], f32[2], **kw).dtype == np.float32
    assert nadaraya.pool(f32[0], f32[1], y, **kw).dtype == np.float64


# --- leave-one-out and the hat matrix ---------------------------------------------------------------


@pytest.mark.parametrize("degree", [1, 2])
@pytest.mark.parametrize("var_types", [None, "cu"])
def test_a_row_of_zero_weight_is_its_own_leave_one_out(degree, var_types):
    """Leaving out a key of sample weight 0 changes nothing: its LOO answer is pool's at it."""
    rng = np.random.default_rng(59)
    X = np.column_stack([rng.uniform(size=50), rng.integers(0, 3, 50)])
    if var_types is None:
        X = X[:, :1]
    y = np.sin(5 * X[:, 0]) + X[:, -1]
    sw = rng.uniform(0.5, 1.5, size=50)
    sw[::5] = 0.0
    bw = [0.2, 0.3] if var_types else 0.2
    kw = dict(bandwidth=bw, var_types=var_types, degree=degree, sample_weight=sw)
    loo = nadaraya.loo_pool(X, y, **kw)
    np.testing.assert_allclose(loo[::5], nadaraya.pool(X[::5], X, y, **kw), rtol=1e-12)
    assert not np.allclose(loo[1::5], nadaraya.pool(X[1::5], X, y, **kw), rtol=1e-6)


@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("var_types", [None, "ccuo"])
def test_hat_matrix_diagonal_from_inverse00(degree, var_types):
    """H_ii = (own weight / sum of weights) * inverse00: the weight the fit at key i puts on v_i,
    computed densely by fitting the unit vector e_i (the AICc trace uses this)."""
    from nadaraya.local import fit as _fit
    from nadaraya.local import job as _job

    rng = np.random.default_rng(61)
    X = np.column_stack([rng.uniform(size=(40, 2)), rng.integers(0, 3, 40), rng.integers(0, 4, 40)])
    vt = var_types or "cc"
    if var_types is None:
        X = X[:, :2]
    y = rng.normal(size=40)
    bw = np.array([0.4, 0.5, 0.3, 0.4])[: len(vt)]
    job = _job.prepare(None, X, y, kernel="gaussian", bandwidth=bw, sample_weight=None, degree=degree,
                       var_types=var_types, categorical_kernel="classic")
    parts = _fit.partials(job)
    _, fit = _fit.fitted(job, parts, "nan")
    assert (fit.degree == degree).all()
    w = mixed_weights(X, X, vt, bw)
    cont = [j for j, t in enumerate(vt) if t == "c"]
    hii = np.array([local_fit(X[i : i + 1, cont], X[:, cont], np.eye(40)[i], w[i : i + 1], bw[cont],
                              degree)[0][0, 0] for i in range(40)])
    np.testing.assert_allclose(np.diag(w) / w.sum(axis=1) * fit.inverse00, hii, rtol=1e-9)
