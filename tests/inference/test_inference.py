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
import nadaraya.inference.bands as _bands
import nadaraya.inference.training as _training
from nadaraya import NadarayaWatson
from nadaraya.inference import bootstrap as _bootstrap
from nadaraya.local import job as _job
from nadaraya.local import smoother as _smoother

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


def single_precision_bound(A, Ev):
    """The replicates are single-precision matrix products of the rows ``A`` (rounded, times the
    residuals) and the multipliers: each of the n products and the sum of n terms is off by at
    most gamma_(n+1) = (n+1) u / (1 - (n+1) u), u = 2^-24, times the sum of the absolute terms
    (Higham, Accuracy and Stability, 3.1), plus the rounding of the result itself."""
    u = 2.0**-24
    k = A.shape[1] + 2
    return k * u / (1 - k * u) * (np.abs(A) @ np.abs(Ev)) + 1e-12


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
    sigma2 = _training.noise_variance(model, variance)[:, 0]
    A = effective_weights(Q, X, var_types, bw, kernel, degree)
    np.testing.assert_allclose(mean, A @ y, rtol=1e-10, atol=1e-12)
    expected = np.sqrt((A**2) @ sigma2)
    assert rel(std, expected) < 1e-12, (std, expected)
    assert mean.shape == std.shape == (Q.shape[0],)


def test_std_with_sample_weights_takes_them_into_the_effective_weights():
    """a_i carries s_i, and a row of weight s stands for s observations (its value varies by
    sigma^2 / s): the variance is sum a_i^2 sigma_i^2 / s_i, which equals the variance of the fit
    with each row repeated s_i times."""
    X, y = data("c", n=90, seed=3)
    s = np.random.default_rng(4).integers(1, 4, X.shape[0]).astype(float)
    model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, y, sample_weight=s)
    Q = queries(X, "c")
    mean, std = model.predict(Q, return_std=True, variance="homoscedastic")
    A = effective_weights(Q, X, "c", [0.2], "gaussian", 1, sample_weight=s)
    sigma2 = _training.noise_variance(model, "homoscedastic")[:, 0]
    np.testing.assert_allclose(mean, A @ y, rtol=1e-10)
    assert rel(std, np.sqrt((A**2) @ (sigma2 / s))) < 1e-12
    # the same rows repeated: the effective weights of each copy are a_i / s_i
    reps = np.repeat(np.arange(X.shape[0]), s.astype(int))
    A_rep = effective_weights(Q, X[reps], "c", [0.2], "gaussian", 1)
    assert rel(std, np.sqrt((A_rep**2) @ sigma2[reps])) < 1e-12


def test_multi_output_std_is_per_column():
    X, y = data("c", n=70, seed=5)
    Y = np.stack([y, 3 * y + np.random.default_rng(6).normal(0, 1, y.size)], axis=1)
    model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, Y)
    Q = queries(X, "c")
    mean, std = model.predict(Q, return_std=True, variance="homoscedastic")
    assert mean.shape == std.shape == (Q.shape[0], 2)
    A = effective_weights(Q, X, "c", [0.2], "gaussian", 1)
    sigma2 = _training.noise_variance(model, "homoscedastic")
    for c in range(2):
        assert rel(std[:, c], np.sqrt((A**2) @ sigma2[:, c])) < 1e-12


@pytest.mark.parametrize(("var_types", "bw", "kernel", "degree"), CASES)
def test_homoscedastic_sigma2_is_residual_variance_over_n_minus_trace_hat(var_types, bw, kernel, degree):
    X, y = data(var_types, n=120 if var_types == "cc" else 80)
    model = NadarayaWatson(bandwidth=bw, kernel=kernel, degree=degree, var_types=var_types).fit(X, y)
    H = effective_weights(X, X, var_types, bw, kernel, degree)  # the dense hat matrix
    e = y - H @ y
    expected = (e**2).sum() / (X.shape[0] - np.trace(H))
    sigma2 = _training.noise_variance(model, "homoscedastic")
    assert sigma2.shape == (X.shape[0], 1)
    assert rel(sigma2, np.full_like(sigma2, expected)) < 1e-10
    np.testing.assert_allclose(_training.training(model).hat, np.diag(H), rtol=1e-9)


def test_homoscedastic_sigma2_with_sample_weights():
    X, y = data("c", n=90, seed=3)
    s = np.random.default_rng(4).integers(1, 4, X.shape[0]).astype(float)
    model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, y, sample_weight=s)
    H = effective_weights(X, X, "c", [0.2], "gaussian", 1, sample_weight=s)
    e = y - H @ y
    expected = (s * e**2).sum() / (s.sum() - np.trace(H))
    assert rel(_training.noise_variance(model, "homoscedastic"), np.array([[expected]])) < 1e-10


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
    got = _training.noise_variance(model, "heteroscedastic")[:, 0]
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
    sigma2 = _training.noise_variance(model, variance)[:, 0]
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
    sigma2 = _training.noise_variance(model, variance)[:, 0]
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
    sigma2 = _training.noise_variance(model, "homoscedastic")[:, 0]
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    np.testing.assert_allclose(mean, a @ y, rtol=1e-12)
    # the log weights themselves (about -7.6e6) carry float64 rounding of |log w| * eps
    tol = 1e-12 + 8 * np.finfo(float).eps * -logw.max()
    np.testing.assert_allclose(std, np.sqrt(a**2 @ sigma2), rtol=tol)


# --- the wild bootstrap: one pass equals n_boot separate fits ---------------------------------


@pytest.mark.parametrize("kind", ["mammen", "rademacher"])
@pytest.mark.parametrize(("var_types", "bw", "degree"), [
    ("c", [0.2], 0), ("c", [0.25], 1), ("c", [0.35], 2), ("cu", [0.3, 0.3], 1),
])
def test_replicates_equal_separate_fits_on_the_bootstrap_responses(var_types, bw, degree, kind):
    X, y = data(var_types, n=30, seed=11)
    model = NadarayaWatson(bandwidth=bw, degree=degree, var_types=var_types).fit(X, y)
    Q = queries(X, var_types)
    tr = _training.training(model)
    H = effective_weights(X, X, var_types, bw, "gaussian", degree)
    np.testing.assert_allclose(tr.fits[:, 0], H @ y, rtol=1e-10, atol=1e-12)
    E = (y - H @ y) / np.sqrt(1 - 2 * np.diag(H) + (H**2).sum(axis=1))
    n_boot = 25
    job = model._job(Q, tr.X, tr.Y, tr.sw)
    dev = _bootstrap.replicates(job, E[:, None], np.random.default_rng(42), n_boot, kind)
    assert dev.shape == (Q.shape[0], 1, n_boot)
    v = _bootstrap.multipliers(np.random.default_rng(42), X.shape[0], n_boot, kind)
    assert dev.dtype == np.float32 and v.dtype == np.float32
    fit = nadaraya.pool(Q, X, tr.fits[:, 0], bandwidth=bw, degree=degree, var_types=var_types)
    bound = single_precision_bound(effective_weights(Q, X, var_types, bw, "gaussian", degree), E[:, None] * v)
    for b in range(n_boot):
        y_star = tr.fits[:, 0] + E * v[:, b]  # the bootstrap responses, fitted one at a time
        f_star = nadaraya.pool(Q, X, y_star, bandwidth=bw, degree=degree, var_types=var_types)
        assert np.all(np.abs(dev[:, 0, b] - (f_star - fit)) <= bound[:, b])


def test_bootstrap_band_is_the_basic_bootstrap_of_separate_fits():
    """confidence_band(method="bootstrap") with a seed: [f - q_hi(d), f - q_lo(d)], d the
    deviations of fits on y* = fits + e / sqrt(1 - 2 H_ii + sum_j H_ij^2) v, v Mammen's multipliers
    of that seed (the in-sample residual's standard deviation in units of sigma)."""
    X, y = data("c", n=40, seed=12)
    model = NadarayaWatson(bandwidth=0.2, degree=1).fit(X, y)
    Q = queries(X, "c")
    n_boot = 39
    band = model.confidence_band(Q, method="bootstrap", n_boot=n_boot, random_state=7, level=0.9)
    H = effective_weights(X, X, "c", [0.2], "gaussian", 1)
    A = effective_weights(Q, X, "c", [0.2], "gaussian", 1)
    E = (y - H @ y) / np.sqrt(1 - 2 * np.diag(H) + (H**2).sum(axis=1))
    v = _bootstrap.multipliers(np.random.default_rng(7), X.shape[0], n_boot)
    d = np.stack([A @ (E * v[:, b]) for b in range(n_boot)], axis=1)
    f = A @ y
    np.testing.assert_allclose(band.estimate, f, rtol=1e-10)
    # a quantile moves by at most the largest change of the sample: the replicates' bound
    bound = single_precision_bound(A, E[:, None] * v).max(axis=1)
    assert np.all(np.abs(band.lower - (f - np.quantile(d, 0.95, axis=1))) <= bound)
    assert np.all(np.abs(band.upper - (f - np.quantile(d, 0.05, axis=1))) <= bound)


def test_replicates_stream_in_blocks_of_outputs_within_the_working_memory():
    """A tiny working memory splits the replicates into many blocks; they still are the
    smoother applied to E v, v drawn block after block from the same generator."""
    X, y = data("c", n=10000, seed=13)
    model = NadarayaWatson(bandwidth=0.1, degree=1).fit(X, y)
    Q = queries(X, "c")
    tr = _training.training(model)
    job = model._job(Q, tr.X, tr.Y, tr.sw)
    E = np.ones((X.shape[0], 1))
    with nadaraya.config_context(working_memory=1):  # 1 MiB: blocks of 3 columns of n = 10000
        dev = _bootstrap.replicates(job, E, np.random.default_rng(3), 10, "rademacher")
    rng = np.random.default_rng(3)
    v = np.concatenate([_bootstrap.multipliers(rng, X.shape[0], b, "rademacher") for b in (3, 3, 3, 1)], 1)
    A = effective_weights(Q, X, "c", [0.1], "gaussian", 1)
    assert np.all(np.abs(dev[:, 0, :] - A @ v) <= single_precision_bound(A, v))


def test_replicates_take_keys_and_queries_in_any_order(monkeypatch):
    """Shuffled keys and queries, a bandwidth small enough that blocks of queries leave keys
    out: replicate b at query j is still sum_i A_ji E_i v_ib, row r of the multipliers going to
    key ``key_order(job)[r]`` (the keys sorted along the first column)."""
    rng = np.random.default_rng(5)
    X, y = data("c", n=300, seed=5)
    perm = rng.permutation(300)
    Xs, ys = X[perm], y[perm]
    Q = rng.uniform(-0.1, 1.1, (57, 1))
    job = _job.prepare(Q, Xs, ys, kernel="gaussian", bandwidth=0.02, sample_weight=None, degree=1,
                       var_types=None, categorical_kernel="classic")
    E = rng.normal(size=(300, 1))
    monkeypatch.setattr(_bootstrap, "ROWS", 0.05)  # blocks of a few queries each
    dev = _bootstrap.replicates(job, E, np.random.default_rng(4), 40, "mammen")
    order = _bootstrap.key_order(job)
    np.testing.assert_array_equal(order, np.argsort(Xs[:, 0], kind="stable"))
    v = np.empty((300, 40), dtype=np.float32)
    v[order] = _bootstrap.multipliers(np.random.default_rng(4), 300, 40)
    A = effective_weights(Q, Xs, "c", [0.02], "gaussian", 1)
    Ev = E * v
    assert np.all(np.abs(dev[:, 0, :] - A @ Ev) <= single_precision_bound(A, Ev))
    # the keys left out of a block are there: far from the block's queries
    sorted_job, _, _ = _bootstrap._sorted(job)
    spans = [_bootstrap._span(rows) for _, _, rows in _smoother.blocks(sorted_job, memory=0.05)]
    assert any(hi - lo < 300 for lo, hi in spans)


# --- properties of the bands ------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted():
    X, y = data("c", n=150, seed=21)
    return X, y, NadarayaWatson(bandwidth=0.12, degree=1).fit(X, y)


@pytest.mark.parametrize("variance", ["homoscedastic", "heteroscedastic"])
def test_asymptotic_pointwise_band_is_estimate_plus_minus_z_std(fitted, variance):
    from scipy.stats import norm

    X, _y, model = fitted
    Q = queries(X, "c")
    mean, std = model.predict(Q, return_std=True, variance=variance)
    for level in (0.8, 0.95, 0.99):
        band = model.confidence_band(Q, level=level, variance=variance)
        z = norm.ppf(0.5 + level / 2)
        np.testing.assert_allclose(band.estimate, mean, rtol=1e-12)
        np.testing.assert_allclose(band.lower, mean - z * std, rtol=1e-12)
        np.testing.assert_allclose(band.upper, mean + z * std, rtol=1e-12)
    assert isinstance(band, nadaraya.Band) and band._fields == ("estimate", "lower", "upper")


@pytest.mark.parametrize("degree", [0, 1])
def test_rbc_band_is_the_degree_p_plus_one_fit_and_its_dense_std(degree):
    """rbc: centre the degree p + 1 fit at the same bandwidth, half-width z * sqrt(sum a^2 sigma^2)
    with a the degree p + 1 effective weights and sigma^2 the model's; estimate the model's own."""
    from scipy.stats import norm

    X, y = data("c", n=120, seed=22)
    model = NadarayaWatson(bandwidth=0.15, degree=degree).fit(X, y)
    Q = queries(X, "c")
    band = model.confidence_band(Q, method="rbc", variance="homoscedastic")
    A1 = effective_weights(Q, X, "c", [0.15], "gaussian", degree + 1)
    sd = np.sqrt((A1**2) @ _training.noise_variance(model, "homoscedastic")[:, 0])
    z = norm.ppf(0.975)
    np.testing.assert_allclose(band.estimate, model.predict(Q), rtol=1e-12)
    np.testing.assert_allclose(band.lower, A1 @ y - z * sd, rtol=1e-10)
    np.testing.assert_allclose(band.upper, A1 @ y + z * sd, rtol=1e-10)


@pytest.mark.parametrize("method", ["asymptotic", "bootstrap", "rbc"])
def test_simultaneous_band_contains_the_pointwise_one_and_is_reproducible(fitted, method):
    _X, _y, model = fitted
    Q = np.linspace(0, 1, 25)[:, None]
    point = model.confidence_band(Q, method=method, n_boot=199, random_state=1)
    simul = model.confidence_band(Q, method=method, kind="simultaneous", n_boot=199, random_state=1)
    again = model.confidence_band(Q, method=method, kind="simultaneous", n_boot=199,
                                  random_state=np.random.default_rng(1))
    assert np.all(simul.lower < point.lower) and np.all(point.upper < simul.upper)
    for a, b in zip(simul, again):
        np.testing.assert_array_equal(a, b)
    # symmetric about the (degree p + 1 for rbc) centre, a constant multiple of the scale
    centre = (simul.lower + simul.upper) / 2
    if method != "bootstrap":
        mean, std = _bands.predict_std(model, Q, "heteroscedastic",
                                           degree=model.degree + 1 if method == "rbc" else None)
        np.testing.assert_allclose(centre, mean[:, 0], rtol=1e-10)
        crit = (simul.upper - centre) / std[:, 0]
        np.testing.assert_allclose(crit, crit[0], rtol=1e-10)
        assert 2.0 < crit[0] < 4.0  # between the pointwise 1.96 and Bonferroni's 3.1 for 25 points


def test_band_levels_nest_and_shapes_follow_the_outputs(fitted):
    X, y, model = fitted
    Q = queries(X, "c")
    for method in ("asymptotic", "bootstrap", "rbc"):
        narrow = model.confidence_band(Q, level=0.8, method=method, n_boot=199, random_state=0)
        wide = model.confidence_band(Q, level=0.99, method=method, n_boot=199, random_state=0)
        assert np.all(wide.lower < narrow.lower) and np.all(narrow.upper < wide.upper)
        assert narrow.lower.shape == (Q.shape[0],)
    Y = np.stack([y, -2 * y], axis=1)
    two = NadarayaWatson(bandwidth=0.12, degree=1).fit(X, Y)
    band = two.confidence_band(Q, method="bootstrap", n_boot=99, random_state=0, variance="homoscedastic")
    assert all(a.shape == (Q.shape[0], 2) for a in band)
    one = model.confidence_band(Q, method="bootstrap", n_boot=99, random_state=0, variance="homoscedastic")
    # the second column's residuals are -2 times the first's: its band is the mirror, twice as wide
    np.testing.assert_allclose(band.upper[:, 1] - band.lower[:, 1], 2 * (one.upper - one.lower), rtol=1e-9)


# --- the significance test --------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed():
    rng = np.random.default_rng(31)
    n = 120
    X = np.stack([rng.uniform(0, 1, n), rng.uniform(0, 1, n), rng.integers(0, 3, n).astype(float)], axis=1)
    X = X[np.argsort(X[:, 0], kind="stable")]
    y = np.sin(5 * X[:, 0]) + 0.8 * (X[:, 2] == 1) + rng.normal(0, 0.3, n)
    model = NadarayaWatson(bandwidth=[0.1, 0.3, 0.2], degree=1, var_types="ccu").fit(X, y)
    return X, y, model


def test_significance_statistics_are_mean_squared_slopes_and_category_changes(mixed):
    X, y, model = mixed
    res = model.significance_test(X, y, features=[0, 1, 2, (0, 2)], n_boot=19, random_state=0)
    g = model.gradient(X)
    assert res.statistic[0] == pytest.approx(np.mean(g[:, 0] ** 2), rel=1e-9)
    assert res.statistic[1] == pytest.approx(np.mean(g[:, 1] ** 2), rel=1e-9)
    base = model.predict(X)
    change = 0.0
    for level in np.unique(X[:, 2]):
        moved = X.copy()
        moved[:, 2] = level
        change += np.mean((model.predict(moved) - base) ** 2)
    assert res.statistic[2] == pytest.approx(change, rel=1e-9)
    assert res.statistic[3] == pytest.approx(res.statistic[0] + res.statistic[2], rel=1e-12)
    assert res.features == ((0,), (1,), (2,), (0, 2))
    assert res.names == ("x0", "x1", "x2", "x0 & x2")
    # p-values are (1 + #exceed) / (1 + n_boot)
    k = res.p_value * (res.n_boot + 1) - 1
    np.testing.assert_allclose(k, np.round(k), atol=1e-9)
    assert np.all((res.p_value > 0) & (res.p_value <= 1))


def test_significance_test_separates_relevant_from_irrelevant_and_prints_a_table(mixed):
    X, y, model = mixed
    res = model.significance_test(X, y, n_boot=99, random_state=0)
    again = model.significance_test(X, y, n_boot=99, random_state=0)
    np.testing.assert_array_equal(res.p_value, again.p_value)
    assert res.p_value[0] == pytest.approx(0.01) and res.p_value[2] == pytest.approx(0.01)
    assert res.p_value[1] > 0.05
    text = str(res)
    assert "99" in text and text.count("\n") >= 5
    for name in ("x0", "x1", "x2"):
        assert name in text
    assert "***" not in text.splitlines()[4]  # x1's row: no stars


# --- hostile input ----------------------------------------------------------------------------


@pytest.mark.parametrize("level", [0, 1, -0.5, 1.5, float("nan"), "0.95", None, True])
def test_level_outside_the_open_unit_interval_is_refused(fitted, level):
    _X, _y, model = fitted
    import re

    with pytest.raises(ValueError, match=r"level.*" + re.escape(repr(level))):
        model.confidence_band([[0.5]], level=level)


@pytest.mark.parametrize(("argument", "value"), [
    ("method", "wild"), ("method", None), ("kind", "uniform"), ("kind", 1), ("variance", "robust"),
    ("variance", "Homoscedastic"),
])
def test_unknown_method_kind_or_variance_is_refused_naming_it(fitted, argument, value):
    import re

    _X, _y, model = fitted
    pattern = re.escape(f"{argument}={value!r}")
    with pytest.raises(ValueError, match=pattern):
        model.confidence_band([[0.5]], **{argument: value})
    if argument == "variance":
        with pytest.raises(ValueError, match=pattern):
            model.predict([[0.5]], return_std=True, variance=value)
        with pytest.raises(ValueError, match=pattern):
            model.gradient([[0.5]], return_std=True, variance=value)


@pytest.mark.parametrize("n_boot", [18, 0, -5, 19.0, 99.5, "99", True, None])
def test_n_boot_below_19_or_not_an_integer_is_refused(fitted, mixed, n_boot):
    import re

    _X, _y, model = fitted
    pattern = "n_boot.*" + re.escape(repr(n_boot))
    for kw in ({"method": "bootstrap"}, {"kind": "simultaneous"}):  # the bands that draw replicates
        with pytest.raises(ValueError, match=pattern):
            model.confidence_band([[0.5]], n_boot=n_boot, **kw)
    if isinstance(n_boot, int) and not isinstance(n_boot, bool):  # unused by a pointwise asymptotic band
        model.confidence_band([[0.5]], n_boot=n_boot)
    else:  # but never anything but a count
        with pytest.raises(ValueError, match=pattern):
            model.confidence_band([[0.5]], n_boot=n_boot)
    Xm, ym, mm = mixed
    with pytest.raises(ValueError, match=pattern):
        mm.significance_test(Xm, ym, n_boot=n_boot)


def test_n_boot_of_19_and_numpy_integers_are_accepted(fitted):
    _X, _y, model = fitted
    band = model.confidence_band([[0.5]], method="bootstrap", n_boot=np.int64(19), random_state=0)
    assert band.lower[0] < band.upper[0]


@pytest.mark.parametrize("features", [[3], [-1], [(0, 3)], [()], [[]]])
def test_features_out_of_range_are_refused_naming_them(mixed, features):
    import re

    X, y, model = mixed
    with pytest.raises(ValueError, match="features.*" + re.escape(repr(features[0]))):
        model.significance_test(X, y, features=features, n_boot=19)


def test_significance_test_refuses_data_of_the_wrong_shape(mixed):
    X, y, model = mixed
    with pytest.raises(ValueError, match="features"):
        model.significance_test(X[:, :2], y, n_boot=19)
    with pytest.raises(ValueError, match="y"):
        model.significance_test(X, y[:-1], n_boot=19)


@pytest.mark.parametrize("features", [[1.5], ["a"], 0, [True], [(0, 0)]])
def test_features_that_are_not_column_numbers_are_refused_naming_them(mixed, features):
    X, y, model = mixed
    with pytest.raises(ValueError, match="features"):
        model.significance_test(X, y, features=features, n_boot=19)


def test_a_smoothed_out_categorical_column_is_not_significant():
    rng = np.random.default_rng(1)
    n = 100
    X = np.stack([rng.uniform(0, 1, n), rng.integers(0, 3, n).astype(float)], axis=1)
    y = np.sin(2 * np.pi * X[:, 0]) + rng.normal(0, 0.5, n)
    model = NadarayaWatson(bandwidth=[0.07, 2 / 3], degree=1, var_types="cu").fit(X, y)
    moved = X.copy()
    moved[:, 1] = (moved[:, 1] + 1) % 3
    np.testing.assert_allclose(model.predict(moved), model.predict(X), rtol=1e-12)  # smoothed out
    for seed in range(3):
        res = model.significance_test(X, y, features=[1], n_boot=19, random_state=seed)
        assert res.statistic[0] == 0 and res.p_value[0] == 1, (res.statistic, res.p_value)
