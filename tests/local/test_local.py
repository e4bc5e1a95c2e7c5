"""Local polynomial fits on the primitive (degrees 1, 2): statsmodels, plain least squares, properties.

The oracle here, :func:`local_fit`, is the textbook definition written densely: per query, the
weighted least-squares fit of the values on the monomials of ``z = (k - q) / h`` (continuous
columns only) with ``np.linalg.lstsq`` on the square-root-weighted design. The other
``test_local_*`` files import it.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import nadaraya
from nadaraya.local import fit as _fit
from nadaraya.local import job as _job
from nadaraya.local.job import SingularFitWarning
from naive import PLAIN_KERNELS, naive_pool, naive_weights


def design(z: np.ndarray, degree: int) -> np.ndarray:
    """The monomials of z (n, d) of total degree <= degree: 1, z_a, z_a z_b (a <= b), ..."""
    cols = [np.ones(z.shape[0])]
    for r in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(z.shape[1]), r):
            cols.append(np.prod(z[:, list(combo)], axis=1))
    return np.column_stack(cols)


def local_fit(queries, keys, values, weights, bandwidth, degree):
    """Dense weighted least squares per query: (estimate (m, p), slope (m, d, p)).

    ``weights`` is the (m, n) matrix of kernel weights (any factors included); ``keys`` and
    ``bandwidth`` are the continuous columns only. Slopes are the linear coefficients over h.
    """
    q = np.asarray(queries, float).reshape(len(queries), -1)
    k = np.asarray(keys, float).reshape(len(keys), -1)
    v = np.asarray(values, float).reshape(len(values), -1)
    h = np.broadcast_to(np.asarray(bandwidth, float), (k.shape[1],))
    m, d, p = q.shape[0], k.shape[1], v.shape[1]
    est, slope = np.full((m, p), np.nan), np.full((m, d, p), np.nan)
    for i in range(m):
        w = weights[i]
        on = w > 0
        if not on.any():
            continue
        B = design((k[on] - q[i]) / h, degree)
        sw = np.sqrt(w[on])
        beta = np.linalg.lstsq(B * sw[:, None], v[on] * sw[:, None], rcond=None)[0]
        est[i] = beta[0]
        if degree >= 1:
            slope[i] = beta[1 : d + 1] / h[:, None]
    return est, slope


def gradient(queries, keys, values, *, degree, kernel="gaussian", bandwidth=1.0, var_types=None,
             sample_weight=None, categorical_kernel="classic", **kw):
    """nadaraya.local.fit.gradient on a prepared job, (m, d, p)."""
    job = _job.prepare(queries, keys, values, kernel=kernel, bandwidth=bandwidth, sample_weight=sample_weight,
                       degree=degree, var_types=var_types, categorical_kernel=categorical_kernel)
    return _fit.gradient(job, **kw)


def _kernel_reg(y, X, var_type, reg_type, bw):
    from statsmodels.nonparametric.kernel_regression import KernelReg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # statsmodels' own rng deprecation notice
        return KernelReg(y, X, var_type, reg_type=reg_type, bw=bw)


# --- statsmodels ----------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("scale", [0.08, 0.3, 1.5])
def test_local_linear_matches_statsmodels(d, scale):
    """statsmodels KernelReg(reg_type="ll") predictions and marginal effects to 1e-8.

    Only all-continuous data: statsmodels' ll puts every column, categorical ones too, into the
    local linear design, whereas nadaraya's local terms use the continuous columns only.
    Queries inside, at the edge of and outside the data; per-feature bandwidths.
    """
    rng = np.random.default_rng(100 + d)
    X = rng.uniform(size=(70, d))
    y = np.sin(3 * X).sum(axis=1) + X[:, 0] ** 2 + 0.1 * rng.normal(size=70)
    Q = np.vstack([rng.uniform(-0.2, 1.2, size=(20, d)), X.min(axis=0), X.max(axis=0)])
    h = scale * (1.0 + 0.25 * np.arange(d))
    mean, mfx = _kernel_reg(y, X, "c" * d, "ll", h).fit(Q)
    ours = nadaraya.pool(Q, X, y, bandwidth=h, degree=1)
    np.testing.assert_allclose(ours, mean, rtol=1e-8, atol=1e-8 * np.abs(mean).max())
    slopes = gradient(Q, X, y, degree=1, bandwidth=h)[:, :, 0]
    np.testing.assert_allclose(slopes, mfx, rtol=1e-8, atol=1e-8 * np.abs(mfx).max())


def test_local_linear_loo_matches_statsmodels_cv():
    """statsmodels' cv_loo at a fixed bandwidth is the mean squared error of our loo_pool."""
    rng = np.random.default_rng(5)
    X = rng.uniform(size=(40, 2))
    y = X[:, 0] - np.cos(4 * X[:, 1]) + 0.1 * rng.normal(size=40)
    h = np.array([0.2, 0.35])
    kr = _kernel_reg(y, X, "cc", "ll", h)
    want = kr.cv_loo(h, kr._est_loc_linear)
    got = np.mean((y - nadaraya.loo_pool(X, y, bandwidth=h, degree=1)) ** 2)
    assert got == pytest.approx(want, rel=1e-10)


# --- local quadratic against plain weighted least squares ---------------------------------------


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube", "laplacian"])
@pytest.mark.parametrize("d", [1, 2])
@pytest.mark.parametrize("degree", [1, 2])
def test_local_polynomial_against_weighted_least_squares(kernel, d, degree):
    """Predictions and slopes of degree 1 and 2 equal np.linalg.lstsq per query, two outputs."""
    rng = np.random.default_rng(7 * d + degree)
    X = rng.uniform(size=(150, d))
    V = np.column_stack([np.sin(4 * X).sum(axis=1), (X**3).sum(axis=1) - X[:, 0]])
    Q = rng.uniform(0.05, 0.95, size=(25, d))
    h = np.array([0.4, 0.55])[:d]
    w = naive_weights(Q, X, kernel, h)
    want, want_slope = local_fit(Q, X, V, w, h, degree)
    got = nadaraya.pool(Q, X, V, kernel=kernel, bandwidth=h, degree=degree, backend="reference")
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)
    slope = gradient(Q, X, V, degree=degree, kernel=kernel, bandwidth=h)
    np.testing.assert_allclose(slope, want_slope, rtol=1e-8, atol=1e-8)


def test_local_quadratic_with_sample_weights_and_scalar_output():
    """Degree 2 with sample weights (zeros among them) equals lstsq with weights s_i K_i."""
    rng = np.random.default_rng(11)
    X = rng.uniform(size=(80, 2))
    y = np.exp(X[:, 0]) * X[:, 1]
    sw = rng.integers(0, 4, size=80).astype(float)
    Q = rng.uniform(0.1, 0.9, size=(15, 2))
    h = np.array([0.5, 0.6])
    want, _ = local_fit(Q, X, y, naive_weights(Q, X, "biweight", h, sw), h, 2)
    got = nadaraya.pool(Q, X, y, kernel="biweight", bandwidth=h, degree=2, sample_weight=sw)
    assert got.shape == (15,)
    np.testing.assert_allclose(got, want[:, 0], rtol=1e-9, atol=1e-11)


# --- leave-one-out --------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov"])
@pytest.mark.parametrize("degree", [1, 2])
def test_loo_against_refitting_without_each_row(kernel, degree):
    """loo_pool: each point's local fit on the other rows, O(n^2) in the test (repeated keys kept)."""
    rng = np.random.default_rng(13)
    X = rng.uniform(size=(60, 1))
    X[10] = X[11]  # a duplicate key: the other copy stays in
    y = np.column_stack([np.sin(5 * X[:, 0]), X[:, 0] ** 2])
    sw = rng.uniform(0.5, 2.0, size=60)
    h = 0.35
    want = np.empty_like(y)
    for i in range(60):
        rest = np.arange(60) != i
        w = naive_weights(X[i : i + 1], X[rest], kernel, h, sw[rest])
        want[i] = local_fit(X[i : i + 1], X[rest], y[rest], w, h, degree)[0][0]
    got = nadaraya.loo_pool(X, y, kernel=kernel, bandwidth=h, degree=degree, sample_weight=sw)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


# --- properties ----------------------------------------------------------------------------------

_kernels = st.sampled_from(["gaussian", "epanechnikov", "triangular", "tricube", "laplacian"])


@st.composite
def _design(draw, d_max=2, n_min=3):
    d = draw(st.integers(1, d_max))
    n = draw(st.integers(n_min, 30))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n, d)) * draw(st.sampled_from([1e-3, 1.0, 50.0]))
    return X, rng


def _exact_where_full(job, degree, expect, scale):
    parts = _fit.partials(job)
    out, fit = _fit.fitted(job, parts, "nan")
    full = fit.degree == degree
    np.testing.assert_allclose(out[full, 0], expect[full], rtol=1e-7, atol=1e-7 * scale)
    return full


@settings(max_examples=60)
@given(_design(), _kernels, st.floats(0.3, 3.0))
def test_degree1_reproduces_linear_functions(design_, kernel, rel_h):
    """A linear function is fitted exactly wherever the local system is regular: inside, at the
    boundary (the data's min and max) and outside the data; with the Gaussian every query is."""
    X, rng = design_
    d = X.shape[1]
    span = np.ptp(X, axis=0).max() or 1.0
    a, b = rng.normal(size=d), rng.normal()
    y = X @ a + b
    Q = np.vstack([X.min(axis=0), X.max(axis=0), X[0], X.min(axis=0) - 0.3 * span,
                   rng.uniform(X.min(axis=0), X.max(axis=0), size=(5, d))])
    h = rel_h * span
    job = _job.prepare(Q, X, y, kernel=kernel, bandwidth=h, sample_weight=None, degree=1,
                       var_types=None, categorical_kernel="classic")
    scale = np.abs(Q @ a).max() + abs(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)  # compact kernels outside the data
        full = _exact_where_full(job, 1, Q @ a + b, scale)
    if kernel == "gaussian" and np.linalg.matrix_rank(X - X.mean(axis=0), tol=1e-9 * span) == d:
        assert full.all()


@settings(max_examples=60)
@given(_design(n_min=6), _kernels, st.floats(0.5, 3.0))
def test_degree2_reproduces_quadratics(design_, kernel, rel_h):
    """Degree 2 fits any quadratic exactly where its system is regular (boundary included)."""
    X, rng = design_
    d = X.shape[1]
    span = np.ptp(X, axis=0).max() or 1.0
    c = rng.normal(size=(d, d))
    a, b = rng.normal(size=d), rng.normal()

    def f(Z):
        return np.einsum("ia,ab,ib->i", Z, c, Z) / span + Z @ a + b * span

    Q = np.vstack([X.min(axis=0), X.max(axis=0), rng.uniform(X.min(axis=0), X.max(axis=0), size=(4, d))])
    job = _job.prepare(Q, X, f(X), kernel=kernel, bandwidth=rel_h * span, sample_weight=None, degree=2,
                       var_types=None, categorical_kernel="classic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)
        full = _exact_where_full(job, 2, f(Q), np.abs(f(np.vstack([X, Q]))).max() + span)
    if kernel == "gaussian" and np.unique(X, axis=0).shape[0] == X.shape[0] and d == 1:
        assert full.all()


@settings(max_examples=40)
@given(_design(), _kernels, st.integers(1, 2), st.floats(0.2, 2.0))
def test_invariant_to_the_order_of_training_rows(design_, kernel, degree, rel_h):
    X, rng = design_
    span = np.ptp(X, axis=0).max() or 1.0
    y = np.sin(X.sum(axis=1) / span * 3)
    Q = rng.uniform(X.min(axis=0), X.max(axis=0), size=(6, X.shape[1]))
    perm = rng.permutation(X.shape[0])
    kw = dict(kernel=kernel, bandwidth=rel_h * span, degree=degree)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        a = nadaraya.pool(Q, X, y, **kw)
        b = nadaraya.pool(Q, X[perm], y[perm], **kw)
    np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-9)


@settings(max_examples=40)
@given(_design(), _kernels, st.integers(1, 2), st.floats(0.3, 2.0))
def test_integer_sample_weights_equal_repeated_rows(design_, kernel, degree, rel_h):
    X, rng = design_
    span = np.ptp(X, axis=0).max() or 1.0
    y = np.cos(X.sum(axis=1) / span * 2)
    reps = rng.integers(0, 4, size=X.shape[0])
    reps[0] = max(reps[0], 1)
    Q = rng.uniform(X.min(axis=0), X.max(axis=0), size=(6, X.shape[1]))
    kw = dict(kernel=kernel, bandwidth=rel_h * span, degree=degree)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        a = nadaraya.pool(Q, X, y, sample_weight=reps.astype(float), **kw)
        b = nadaraya.pool(Q, np.repeat(X, reps, axis=0), np.repeat(y, reps), **kw)
    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


@settings(max_examples=60)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 25), st.integers(0, 2**31), _kernels)
def test_never_nan_nor_linalg_error_where_a_key_has_weight(d, degree, n, seed, kernel):
    """Keys on a coarse grid (many duplicates, collinear in 2-D): every query whose
    Nadaraya-Watson weights are not all zero gets a finite answer, whatever the degree."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 3, size=(n, d)).astype(float)
    if d == 2 and seed % 2:
        X[:, 1] = 2 * X[:, 0]  # collinear
    y = rng.normal(size=n)
    Q = rng.uniform(-1, 3, size=(10, d))
    h = 0.8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularFitWarning)
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        got = nadaraya.pool(Q, X, y, kernel=kernel, bandwidth=h, degree=degree)
    has = naive_weights(Q, X, kernel, h).sum(axis=1) > 0
    assert np.isfinite(got[has]).all()
    assert np.isnan(got[~has]).all()


# --- weights and partials sanity ------------------------------------------------------------------


def test_partials_carry_the_plain_moments():
    """The merged partials: weight and value sums and the first moments sum_i w_i (k_i - q),
    sum_i w_i (k_i - q) v_i, up to the common factor exp(shift)."""
    rng = np.random.default_rng(17)
    X, Q = rng.uniform(size=(50, 2)), rng.uniform(size=(7, 2))
    y = rng.normal(size=50)
    h = np.array([0.3, 0.4])
    job = _job.prepare(Q, X, y, kernel="gaussian", bandwidth=h, sample_weight=None, degree=1,
                       var_types=None, categorical_kernel="classic")
    parts = _fit.partials(job, backend="reference")
    w = naive_weights(Q, X, "gaussian", h)
    f = np.exp(parts.shift)
    np.testing.assert_allclose(parts.weight * f, w.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(parts.value[:, 0] * f, w @ y, rtol=1e-12)
    diff = X[None, :, :] - Q[:, None, :]
    # the order of reference.moment_shapes(1, d, p): sum w u, sum w u u^T, sum w u v^T
    assert [m.shape[1:] for m in parts.moments] == [(2,), (2, 2), (2, 1)]
    np.testing.assert_allclose(parts.moments[0] * f[:, None], np.einsum("mn,mnd->md", w, diff), rtol=1e-11)
    s2 = np.einsum("mn,mnd,mne->mde", w, diff, diff)
    np.testing.assert_allclose(parts.moments[1] * f[:, None, None], s2, rtol=1e-11)
    np.testing.assert_allclose(parts.moments[2][:, :, 0] * f[:, None], np.einsum("mn,mnd,n->md", w, diff, y),
                               rtol=1e-11, atol=1e-13)
    _, fit = _fit.fitted(job, parts, "nan")
    assert (fit.degree == 1).all()
    # the hat-matrix diagonal: own weight share times (M / sum w)^-1 [0, 0] is the weight that
    # the local linear fit at a key puts on its own value
    jobk = _job.prepare(None, X, y, kernel="gaussian", bandwidth=h, sample_weight=None, degree=1,
                        var_types=None, categorical_kernel="classic")
    pk = _fit.partials(jobk, backend="reference")
    _, fk = _fit.fitted(jobk, pk, "nan")
    wk = naive_weights(X, X, "gaussian", h)
    hii = np.empty(50)
    for i in range(50):
        e = np.zeros(50)
        e[i] = 1.0
        hii[i] = local_fit(X[i : i + 1], X, e, wk[i : i + 1], h, 1)[0][0, 0]
    np.testing.assert_allclose(np.diag(wk) / wk.sum(axis=1) * fk.inverse00, hii, rtol=1e-9)


def test_degree_zero_equals_nadaraya_watson():
    rng = np.random.default_rng(19)
    X, Q = rng.uniform(size=(40, 2)), rng.uniform(size=(9, 2))
    y = rng.normal(size=40)
    got = nadaraya.pool(Q, X, y, kernel="triweight", bandwidth=0.5, degree=0, var_types="cc")
    np.testing.assert_allclose(got, naive_pool(Q, X, y, "triweight", 0.5), rtol=1e-12)


# --- singular local systems --------------------------------------------------------------------


def _one_singular_warning(record, count, m):
    mine = [w for w in record if issubclass(w.category, SingularFitWarning)]
    assert len(mine) == 1, [str(w.message) for w in record]
    assert f"{count} of {m} queries" in str(mine[0].message)


def test_one_distinct_key_in_a_window_falls_back_to_nadaraya_watson():
    """Degree 1 with one distinct key in a window: the Nadaraya-Watson answer, one warning."""
    X = np.array([0.0, 0.0, 5.0, 5.6, 6.1, 7.0])
    y = np.array([1.0, 3.0, 0.0, 1.0, 4.0, 2.0])
    Q = np.array([0.1, -0.2, 5.8, 6.5])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = nadaraya.pool(Q, X, y, kernel="epanechnikov", bandwidth=0.6, degree=1)
    _one_singular_warning(rec, 2, 4)
    np.testing.assert_allclose(got[:2], [2.0, 2.0], rtol=1e-14)
    want, _ = local_fit(Q[2:, None], X[:, None], y, naive_weights(Q[2:], X, "epanechnikov", 0.6), 0.6, 1)
    np.testing.assert_allclose(got[2:], want[:, 0], rtol=1e-12)


def test_two_distinct_keys_give_degree_two_the_local_linear_fit():
    X = np.array([0.0, 0.0, 0.5, 3.0, 3.2, 3.3, 3.7])
    y = np.array([1.0, 1.2, 2.0, 0.0, 1.0, 0.5, 2.0])
    Q = np.array([0.2, 0.3, 3.4])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = nadaraya.pool(Q, X, y, kernel="biweight", bandwidth=0.9, degree=2)
        lin = nadaraya.pool(Q, X, y, kernel="biweight", bandwidth=0.9, degree=1)
    assert sum(issubclass(w.category, SingularFitWarning) for w in rec) == 1
    _one_singular_warning(rec, 2, 3)
    np.testing.assert_allclose(got[:2], lin[:2], rtol=1e-12)
    # the line through the two distinct keys' weighted means
    np.testing.assert_allclose(got[:2], 1.1 + 0.9 / 0.5 * Q[:2], rtol=1e-12)
    want, _ = local_fit(Q[2:, None], X[:, None], y, naive_weights(Q[2:], X, "biweight", 0.9), 0.9, 2)
    np.testing.assert_allclose(got[2], want[0, 0], rtol=1e-10)


def test_collinear_keys_in_two_dimensions_fall_back():
    """Keys on a line in 2-D: degree 1 and 2 systems are singular; degree 1 gets
    Nadaraya-Watson, finite, with one warning counting every query."""
    t = np.linspace(0, 1, 12)
    X = np.column_stack([t, 1 - 2 * t])
    y = np.sin(3 * t)
    Q = np.array([[0.5, 0.0], [0.2, 0.7], [0.9, -0.5]])
    for degree in (1, 2):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            got = nadaraya.pool(Q, X, y, bandwidth=0.4, degree=degree)
        _one_singular_warning(rec, 3, 3)
        np.testing.assert_allclose(got, naive_pool(Q, X, y, "gaussian", 0.4), rtol=1e-12)
        with pytest.warns(SingularFitWarning):
            slope = gradient(Q, X, y, degree=degree, bandwidth=0.4)
        assert np.isnan(slope).all()  # a degree-0 fallback has no local slope


def test_regular_systems_do_not_warn_and_far_queries_get_a_finite_answer():
    rng = np.random.default_rng(23)
    X = rng.uniform(size=(30, 1))
    y = X[:, 0] * 2 + 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nadaraya.pool(rng.uniform(size=5), X, y, bandwidth=0.2, degree=1)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        far = nadaraya.pool([1e6], X, y, bandwidth=0.01, degree=1)
    assert np.isfinite(far).all()
    _one_singular_warning(rec, 1, 1)


# --- hostile input -------------------------------------------------------------------------------


@pytest.mark.parametrize("degree", [-1, 1.5, True, "1", 4, None])
@pytest.mark.parametrize("fn", ["pool", "loo_pool"])
def test_bad_degree_is_refused_naming_it(degree, fn):
    X = np.linspace(0, 1, 8)
    args = (X, X, X) if fn == "pool" else (X, X)
    with pytest.raises(ValueError, match="degree") as err:
        getattr(nadaraya, fn)(*args, bandwidth=0.3, degree=degree)
    assert repr(degree) in str(err.value)


@pytest.mark.parametrize("degree", [0.0, False, 1.0])
@pytest.mark.parametrize("fn", ["pool", "loo_pool"])
def test_degree_lookalikes_are_refused(degree, fn):
    """0.0 and False are not the integer 0 (they once took the degree-0 path unchecked)."""
    X = np.linspace(0, 1, 8)
    args = (X, X, X) if fn == "pool" else (X, X)
    with pytest.raises(ValueError, match="degree") as err:
        getattr(nadaraya, fn)(*args, bandwidth=0.3, degree=degree)
    assert repr(degree) in str(err.value)


def test_numpy_integer_degrees_are_accepted():
    X = np.linspace(0, 1, 8)
    np.testing.assert_array_equal(nadaraya.pool(X, X, 2 * X, bandwidth=0.3, degree=np.int64(1)),
                                  nadaraya.pool(X, X, 2 * X, bandwidth=0.3, degree=1))
    np.testing.assert_array_equal(nadaraya.pool(X, X, X**2, bandwidth=0.3, degree=np.int32(0)),
                                  nadaraya.pool(X, X, X**2, bandwidth=0.3))


def test_plain_kernels_are_the_libraries():
    """The oracle's kernels are the library's profiles up to their normalising constants."""
    from nadaraya.kernels import get

    u = np.linspace(-1.5, 1.5, 31)
    for name in ("gaussian", "epanechnikov", "tricube", "laplacian", "biweight", "triangular"):
        plain = PLAIN_KERNELS[name](u)
        on = plain > 0
        ratio = get(name).profile(u)[on] / plain[on]
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)
        assert (get(name).profile(u)[~on] == 0).all()


# --- degree-0 derivative --------------------------------------------------------------------------


SMOOTH = ["gaussian", "epanechnikov", "biweight", "tricube", "laplacian", "logistic"]


@pytest.mark.parametrize("kernel", SMOOTH)
def test_degree_zero_gradient_is_the_derivative_of_the_ratio(kernel):
    """Central differences of pool, two features and two outputs, sample weights; mixed data
    (a categorical column: its entry NaN, the continuous ones still the derivative)."""
    rng = np.random.default_rng(29)
    X, Q = rng.uniform(size=(60, 2)), rng.uniform(0.1, 0.9, size=(8, 2))
    V = np.column_stack([np.sin(3 * X[:, 0]) * X[:, 1], X.sum(axis=1)])
    sw = rng.uniform(0.2, 1.0, size=60)
    h = np.array([0.35, 0.5])
    g = gradient(Q, X, V, degree=0, kernel=kernel, bandwidth=h, sample_weight=sw)
    eps = 1e-6
    for a in range(2):
        step = np.zeros(2)
        step[a] = eps
        fd = (nadaraya.pool(Q + step, X, V, kernel=kernel, bandwidth=h, sample_weight=sw)
              - nadaraya.pool(Q - step, X, V, kernel=kernel, bandwidth=h, sample_weight=sw)) / (2 * eps)
        np.testing.assert_allclose(g[:, a, :], fd, rtol=1e-6, atol=1e-6)
    Xm, Qm = np.column_stack([X[:, 0], X[:, 1] > 0.5]), np.column_stack([Q[:, 0], Q[:, 1] > 0.5])
    gm = gradient(Qm, Xm, V, degree=0, kernel=kernel, bandwidth=[0.35, 0.3], var_types="cu")
    assert np.isnan(gm[:, 1]).all()
    step = np.array([eps, 0.0])
    fd = (nadaraya.pool(Qm + step, Xm, V, kernel=kernel, bandwidth=[0.35, 0.3], var_types="cu")
          - nadaraya.pool(Qm - step, Xm, V, kernel=kernel, bandwidth=[0.35, 0.3], var_types="cu")) / (2 * eps)
    np.testing.assert_allclose(gm[:, 0], fd, rtol=1e-6, atol=1e-6)
