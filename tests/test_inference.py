"""Inference on fitted models (issue 15): standard errors against dense effective weights written
plainly here, the noise variance formulas, the wild bootstrap's one-pass replicates against
separate fits, properties of the bands and of the significance test, and hostile input.

The dense reference: a local polynomial fit at ``x`` is ``f(x) = sum_i a_i(x) y_i`` with
``a(x)^T = e_0^T (B^T W B)^-1 B^T W``, ``W`` the product-kernel weights (continuous kernel times
the categorical factors, times the sample weights) and ``B`` the monomials of ``(x_i - x) / h``
in the continuous columns; its standard error given the design is
``sqrt(sum_i a_i(x)^2 sigma_i^2)``.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaWatson
from nadaraya import _inference

KERNELS = {
    "gaussian": lambda u: np.exp(-(u**2) / 2),
    "epanechnikov": lambda u: np.clip(1 - u**2, 0, None),
}


def basis(Z, degree):
    """Monomials of the rows of Z (n, dc) of total degree <= degree: 1, z_a, z_a z_b (a <= b)."""
    cols = [np.ones(Z.shape[0])]
    for r in range(1, degree + 1):
        for idx in itertools.combinations_with_replacement(range(Z.shape[1]), r):
            cols.append(np.prod(Z[:, list(idx)], axis=1))
    return np.stack(cols, axis=1)


def kernel_weights(q, X, var_types, bw, kernel, sample_weight=None):
    """Product-kernel weights of the rows of X at the query q (Aitchison-Aitken for 'u')."""
    w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, float).copy()
    for j, t in enumerate(var_types):
        if t == "c":
            w = w * KERNELS[kernel]((X[:, j] - q[j]) / bw[j])
        else:
            c = np.unique(X[:, j]).size
            w = w * np.where(X[:, j] == q[j], 1 - bw[j], bw[j] / (c - 1))
    return w


def effective_weights(Q, X, var_types, bw, kernel, degree, sample_weight=None, row=0):
    """Dense (m, n) effective weights of the intercept (row=0) or of row ``row`` of beta."""
    cont = [j for j, t in enumerate(var_types) if t == "c"]
    h = np.asarray(bw, float)[cont]
    A = np.empty((Q.shape[0], X.shape[0]))
    for r, q in enumerate(Q):
        w = kernel_weights(q, X, var_types, bw, kernel, sample_weight)
        B = basis((X[:, cont] - q[cont]) / h, degree)
        A[r] = np.linalg.solve(B.T @ (w[:, None] * B), B.T * w)[row]
    return A


def nw_slope_weights(Q, X, h):
    """Degree 0, Gaussian, one feature: d f / d x = sum_i c_i y_i, c_i = w_i ((x_i - x)/h^2 - D/S)/S."""
    A = np.empty((Q.shape[0], X.shape[0]))
    for r, q in enumerate(Q[:, 0]):
        w = np.exp(-(((X[:, 0] - q) / h) ** 2) / 2)
        S, D = w.sum(), (w * (X[:, 0] - q)).sum() / h**2
        A[r] = w * ((X[:, 0] - q) / h**2 - D / S) / S
    return A


def data(var_types, n=80, seed=0):
    rng = np.random.default_rng(seed)
    cols = [rng.uniform(0, 1, n) if t == "c" else rng.integers(0, 3, n).astype(float) for t in var_types]
    X = np.stack(cols, axis=1)
    # sorted by the first column, as the model stores its training rows (X_fit_): the noise
    # variances of ``_inference.noise_variance`` are in that order
    X = X[np.argsort(X[:, 0], kind="stable")]
    y = np.sin(4 * X[:, 0]) + 0.3 * X[:, -1] + rng.normal(0, 0.2 + 0.3 * X[:, 0], n)
    return X, y


def queries(X, var_types):
    """Interior and boundary points (and every category)."""
    grid = [np.array([0.0, 0.02, 0.5, 0.97, 1.0]) if t == "c" else np.unique(X[:, j])
            for j, t in enumerate(var_types)]
    return np.array(list(itertools.product(*grid)), dtype=float)


def rel(a, b):
    return float(np.max(np.abs(a - b) / np.abs(b)))


# --- exactness of the standard errors ---------------------------------------------------------

CASES = [
    # var_types, bandwidth, kernel, degree
    ("c", [0.15], "gaussian", 0),
    ("c", [0.15], "gaussian", 1),
    ("c", [0.2], "gaussian", 2),
    ("c", [0.3], "epanechnikov", 0),
    ("c", [0.3], "epanechnikov", 1),
    ("c", [0.45], "epanechnikov", 2),
    ("cc", [0.3, 0.4], "gaussian", 1),
    ("cc", [0.4, 0.5], "gaussian", 2),
    ("cu", [0.2, 0.3], "gaussian", 0),
    ("cu", [0.2, 0.3], "gaussian", 1),
    ("cu", [0.3, 0.3], "gaussian", 2),
    ("cu", [0.35, 0.2], "epanechnikov", 1),
]


@pytest.mark.parametrize("variance", ["homoscedastic", "heteroscedastic"])
@pytest.mark.parametrize(("var_types", "bw", "kernel", "degree"), CASES)
def test_std_is_the_dense_sum_of_squared_effective_weights(var_types, bw, kernel, degree, variance):
    X, y = data(var_types, n=120 if var_types == "cc" else 80)
    model = NadarayaWatson(bandwidth=bw, kernel=kernel, degree=degree, var_types=var_types).fit(X, y)
    assert np.array_equal(model.X_fit_, X)
    Q = queries(X, var_types)
    mean, std = model.predict(Q, return_std=True, variance=variance)
    sigma2 = _inference.noise_variance(model, variance)[:, 0]
    A = effective_weights(Q, X, var_types, bw, kernel, degree)
    np.testing.assert_allclose(mean, A @ y, rtol=1e-10, atol=1e-12)
    expected = np.sqrt((A**2) @ sigma2)
    assert rel(std, expected) < 1e-12, (std, expected)
    assert mean.shape == std.shape == (Q.shape[0],)


def test_std_with_sample_weights_takes_them_into_the_effective_weights():
    """a_i carries s_i; the variance is sum a_i^2 sigma_i^2 (the documented formula)."""
    X, y = data("c", n=90, seed=3)
    s = np.random.default_rng(4).integers(1, 4, X.shape[0]).astype(float)
    model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, y, sample_weight=s)
    Q = queries(X, "c")
    mean, std = model.predict(Q, return_std=True, variance="homoscedastic")
    A = effective_weights(Q, X, "c", [0.2], "gaussian", 1, sample_weight=s)
    sigma2 = _inference.noise_variance(model, "homoscedastic")[:, 0]
    np.testing.assert_allclose(mean, A @ y, rtol=1e-10)
    assert rel(std, np.sqrt((A**2) @ sigma2)) < 1e-12


def test_multi_output_std_is_per_column():
    X, y = data("c", n=70, seed=5)
    Y = np.stack([y, 3 * y + np.random.default_rng(6).normal(0, 1, y.size)], axis=1)
    model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, Y)
    Q = queries(X, "c")
    mean, std = model.predict(Q, return_std=True, variance="homoscedastic")
    assert mean.shape == std.shape == (Q.shape[0], 2)
    A = effective_weights(Q, X, "c", [0.2], "gaussian", 1)
    sigma2 = _inference.noise_variance(model, "homoscedastic")
    for c in range(2):
        assert rel(std[:, c], np.sqrt((A**2) @ sigma2[:, c])) < 1e-12


@pytest.mark.parametrize(("var_types", "bw", "kernel", "degree"), CASES)
def test_homoscedastic_sigma2_is_residual_variance_over_n_minus_trace_hat(var_types, bw, kernel, degree):
    X, y = data(var_types, n=120 if var_types == "cc" else 80)
    model = NadarayaWatson(bandwidth=bw, kernel=kernel, degree=degree, var_types=var_types).fit(X, y)
    H = effective_weights(X, X, var_types, bw, kernel, degree)  # the dense hat matrix
    e = y - H @ y
    expected = (e**2).sum() / (X.shape[0] - np.trace(H))
    sigma2 = _inference.noise_variance(model, "homoscedastic")
    assert sigma2.shape == (X.shape[0], 1)
    assert rel(sigma2, np.full_like(sigma2, expected)) < 1e-10
    np.testing.assert_allclose(_inference.training(model).hat, np.diag(H), rtol=1e-9)


def test_homoscedastic_sigma2_with_sample_weights():
    X, y = data("c", n=90, seed=3)
    s = np.random.default_rng(4).integers(1, 4, X.shape[0]).astype(float)
    model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, y, sample_weight=s)
    H = effective_weights(X, X, "c", [0.2], "gaussian", 1, sample_weight=s)
    e = y - H @ y
    expected = (s * e**2).sum() / (s.sum() - np.trace(H))
    assert rel(_inference.noise_variance(model, "homoscedastic"), np.array([[expected]])) < 1e-10


def test_heteroscedastic_sigma2_is_a_smooth_of_squared_loo_residuals():
    """The NW smooth of (y_i - f_{-i}(x_i))^2 at the CV bandwidth of those squares."""
    X, y = data("c", n=100, seed=7)
    model = NadarayaWatson(bandwidth=0.15, degree=1).fit(X, y)
    H = effective_weights(X, X, "c", [0.15], "gaussian", 1)
    loo = (H @ y - np.diag(H) * y) / (1 - np.diag(H))  # a linear smoother's leave-one-out
    r2 = (y - loo) ** 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h2 = nadaraya.select_bandwidth(X, r2).bandwidth
    w = np.exp(-(((X[:, 0, None] - X[None, :, 0]) / np.asarray(h2)[0]) ** 2) / 2)
    expected = (w @ r2) / w.sum(axis=1)
    got = _inference.noise_variance(model, "heteroscedastic")[:, 0]
    assert rel(got, expected) < 1e-9
    assert np.all(got >= 0)


@pytest.mark.parametrize("variance", ["homoscedastic", "heteroscedastic"])
@pytest.mark.parametrize(("var_types", "bw", "kernel"), [
    ("c", [0.15], "gaussian"), ("c", [0.3], "epanechnikov"), ("cc", [0.3, 0.4], "gaussian"),
    ("cu", [0.2, 0.3], "gaussian"),
])
def test_gradient_std_of_degree_one_is_the_dense_slope_weights(var_types, bw, kernel, variance):
    X, y = data(var_types, n=120 if var_types == "cc" else 80)
    model = NadarayaWatson(bandwidth=bw, kernel=kernel, degree=1, var_types=var_types).fit(X, y)
    Q = queries(X, var_types)
    g, std = model.gradient(Q, return_std=True, variance=variance)
    sigma2 = _inference.noise_variance(model, variance)[:, 0]
    cont = [j for j, t in enumerate(var_types) if t == "c"]
    for a, j in enumerate(cont):
        C = effective_weights(Q, X, var_types, bw, kernel, 1, row=1 + a) / bw[j]
        np.testing.assert_allclose(g[:, j], C @ y, rtol=1e-9, atol=1e-12)
        assert rel(std[:, j], np.sqrt((C**2) @ sigma2)) < 1e-12
    for j, t in enumerate(var_types):
        if t != "c":
            assert np.isnan(g[:, j]).all() and np.isnan(std[:, j]).all()


@pytest.mark.parametrize("variance", ["homoscedastic", "heteroscedastic"])
def test_gradient_std_of_nadaraya_watson_gaussian_is_the_dense_ratio_derivative(variance):
    X, y = data("c", n=80, seed=1)
    model = NadarayaWatson(bandwidth=0.12).fit(X, y)
    Q = queries(X, "c")
    g, std = model.gradient(Q, return_std=True, variance=variance)
    C = nw_slope_weights(Q, X, 0.12)
    sigma2 = _inference.noise_variance(model, variance)[:, 0]
    np.testing.assert_allclose(g[:, 0], C @ y, rtol=1e-9, atol=1e-12)
    assert rel(std[:, 0], np.sqrt((C**2) @ sigma2)) < 1e-12


def test_gradient_std_of_nadaraya_watson_needs_the_gaussian():
    X, y = data("c", n=60, seed=1)
    model = NadarayaWatson(bandwidth=0.3, kernel="epanechnikov").fit(X, y)
    with pytest.raises(ValueError, match="Gaussian"):
        model.gradient([[0.5]], return_std=True)


def test_std_far_from_the_data_is_finite_in_the_log_domain():
    """A Gaussian query far from every key (plain weights underflow to 0/0): the softmax of the
    log weights, written densely, gives the effective weights; the std is finite and exact."""
    X, y = data("c", n=60, seed=2)
    model = NadarayaWatson(bandwidth=0.01).fit(X, y)
    mean, std = model.predict([[40.0]], return_std=True, variance="homoscedastic")
    logw = -(((40.0 - X[:, 0]) / 0.01) ** 2) / 2
    a = np.exp(logw - logw.max())
    a /= a.sum()
    sigma2 = _inference.noise_variance(model, "homoscedastic")[:, 0]
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    np.testing.assert_allclose(mean, a @ y, rtol=1e-12)
    # the log weights themselves (about -7.6e6) carry float64 rounding of |log w| * eps
    np.testing.assert_allclose(std, np.sqrt(a**2 @ sigma2), rtol=1e-12 + 8 * np.finfo(float).eps * -logw.max())
