"""KernelDensity: against statsmodels' KDEMultivariate, plain sums, integrals, tol, far queries, weights."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nadaraya import KernelDensity

#: every density kernel written out plainly, on |u| <= 1 for the compact ones
PLAIN = {
    "gaussian": lambda u: np.exp(-u * u / 2) / math.sqrt(2 * math.pi),
    "epanechnikov": lambda u: np.where(abs(u) <= 1, 0.75 * (1 - u * u), 0.0),
    "boxcar": lambda u: np.where(abs(u) <= 1, 0.5, 0.0),
    "triangular": lambda u: np.where(abs(u) <= 1, 1 - abs(u), 0.0),
    "biweight": lambda u: np.where(abs(u) <= 1, 15 / 16 * (1 - u * u) ** 2, 0.0),
    "triweight": lambda u: np.where(abs(u) <= 1, 35 / 32 * (1 - u * u) ** 3, 0.0),
    "tricube": lambda u: np.where(abs(u) <= 1, 70 / 81 * (1 - abs(u) ** 3) ** 3, 0.0),
    "cosine": lambda u: np.where(abs(u) <= 1, math.pi / 4 * np.cos(math.pi * u / 2), 0.0),
    "parzen": lambda u: np.where(abs(u) <= 0.5, 4 / 3 - 8 * u * u + 8 * abs(u) ** 3,
                                 np.where(abs(u) <= 1, 8 / 3 * (1 - abs(u)) ** 3, 0.0)),
    "laplacian": lambda u: np.exp(-abs(u)) / 2,
    "logistic": lambda u: 1 / (np.exp(u) + 2 + np.exp(-u)),
}


def _plain(Q, X, h, kernel, w=None):
    w = np.ones(len(X)) if w is None else np.asarray(w, float)
    u = (Q[:, None, :] - X[None, :, :]) / h
    return (PLAIN[kernel](u).prod(axis=2) / np.prod(h) * w).sum(axis=1) / w.sum()


def _mixed_data(n, rng):
    return np.column_stack([rng.normal(size=n), rng.normal(size=n) * 2, rng.integers(0, 3, n),
                            rng.integers(0, 4, n)]).astype(float)


@pytest.mark.parametrize(("var_types", "cols", "bw"), [
    ("c", [0], [0.4]), ("cc", [0, 1], [0.4, 0.9]), ("cuo", [0, 2, 3], [0.4, 0.3, 0.2]),
    ("co", [0, 3], [0.5, 0.4]),
])
def test_pdf_matches_statsmodels(var_types, cols, bw):
    kd = pytest.importorskip("statsmodels.nonparametric.kernel_density")
    rng = np.random.default_rng(1)
    X, Q = _mixed_data(120, rng)[:, cols], _mixed_data(40, rng)[:, cols]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = kd.KDEMultivariate(X, var_types, bw=bw).pdf(Q)
    got = KernelDensity(bandwidth=bw, var_types=var_types).fit(X).pdf(Q)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=0)


@pytest.mark.parametrize("kernel", sorted(PLAIN))
def test_every_kernel_matches_a_plain_sum(kernel):
    rng = np.random.default_rng(2)
    X, Q = rng.normal(size=(60, 2)), rng.normal(size=(30, 2)) * 1.5
    h = np.array([0.7, 1.1])
    w = rng.uniform(0.2, 3.0, 60)
    model = KernelDensity(kernel=kernel, bandwidth=h).fit(X, sample_weight=w)
    want = _plain(Q, X, h, kernel, w)
    got = model.pdf(Q)
    np.testing.assert_allclose(got[want > 0], want[want > 0], rtol=1e-10)
    assert (got[want == 0] == 0).all()


def test_li_racine_probabilities_written_out():
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.normal(size=50), rng.integers(0, 3, 50), rng.integers(0, 4, 50)]).astype(float)
    Q = X[:10] + np.array([0.1, 0.0, 0.0])
    h, lu, lo = 0.6, 0.3, 0.4
    model = KernelDensity(bandwidth=[h, lu, lo], var_types="cuo", categorical_kernel="li-racine").fit(X)
    levels_o = np.unique(X[:, 2])
    pu = np.where(Q[:, None, 1] == X[None, :, 1], 1.0, lu) / (1 + 2 * lu)  # 3 levels
    norm_o = (lo ** np.abs(levels_o[:, None] - X[None, :, 2])).sum(axis=0)
    po = lo ** np.abs(Q[:, None, 2] - X[None, :, 2]) / norm_o
    want = (PLAIN["gaussian"]((Q[:, None, 0] - X[None, :, 0]) / h) / h * pu * po).mean(axis=1)
    np.testing.assert_allclose(model.pdf(Q), want, rtol=1e-10)


@pytest.mark.parametrize("kernel", ["gaussian", "epanechnikov", "tricube", "laplacian", "parzen"])
def test_integrates_to_one_in_1d(kernel):
    x = np.random.default_rng(4).normal(size=(40, 1))
    model = KernelDensity(kernel=kernel, bandwidth=0.5).fit(x)
    grid = np.linspace(-12, 12, 48_001)
    assert abs(np.trapezoid(model.pdf(grid[:, None]), grid) - 1) < 1e-6


@pytest.mark.parametrize("kernel", ["gaussian", "biweight"])
def test_integrates_to_one_in_2d(kernel):
    x = np.random.default_rng(5).normal(size=(30, 2))
    model = KernelDensity(kernel=kernel, bandwidth=[0.6, 0.9]).fit(x)
    g = np.linspace(-7, 7, 401)
    gx, gy = np.meshgrid(g, g, indexing="ij")
    f = model.pdf(np.column_stack([gx.ravel(), gy.ravel()])).reshape(gx.shape)
    assert abs(np.trapezoid(np.trapezoid(f, g, axis=1), g) - 1) < 1e-4


def test_mixed_density_sums_and_integrates_to_one():
    """A continuous column with an unordered one (Aitchison-Aitken probabilities sum to 1)."""
    rng = np.random.default_rng(6)
    X = np.column_stack([rng.normal(size=40), rng.integers(0, 3, 40)]).astype(float)
    model = KernelDensity(bandwidth=[0.5, 0.3], var_types="cu").fit(X)
    g = np.linspace(-10, 10, 40_001)
    total = sum(np.trapezoid(model.pdf(np.column_stack([g, np.full_like(g, c)])), g) for c in (0, 1, 2))
    assert abs(total - 1) < 1e-6


def test_far_queries_are_finite_and_exact():
    x = np.random.default_rng(7).normal(size=(50, 1))
    for kernel, h in (("gaussian", 0.3), ("laplacian", 0.3), ("logistic", 0.3)):
        model = KernelDensity(kernel=kernel, bandwidth=h).fit(x)
        q = np.array([[40.0], [-300.0], [5e3]])
        got = model.score_samples(q)
        assert np.isfinite(got).all()
        u = (q - x.T) / h
        logk = {"gaussian": -u * u / 2 - 0.5 * math.log(2 * math.pi), "laplacian": -abs(u) - math.log(2),
                "logistic": -abs(u) - 2 * np.log1p(np.exp(-abs(u)))}[kernel]
        top = logk.max(axis=1, keepdims=True)
        want = (top + np.log(np.exp(logk - top).sum(axis=1, keepdims=True)))[:, 0] - math.log(50 * h)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_compact_kernel_outside_every_window_is_minus_inf():
    model = KernelDensity(kernel="epanechnikov", bandwidth=0.5).fit([[0.0], [1.0]])
    assert model.score_samples([[10.0]])[0] == -np.inf


def test_integer_weights_are_repeated_rows():
    rng = np.random.default_rng(8)
    X = np.column_stack([rng.normal(size=30), rng.integers(0, 3, 30)]).astype(float)
    w = rng.integers(0, 4, 30)
    Q = X[:12] + np.array([0.05, 0.0])
    a = KernelDensity(bandwidth=[0.5, 0.2], var_types="cu").fit(X, sample_weight=w).score_samples(Q)
    b = KernelDensity(bandwidth=[0.5, 0.2], var_types="cu").fit(np.repeat(X, w, axis=0)).score_samples(Q)
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_float32_follows_float64():
    x = np.random.default_rng(9).normal(size=(200, 2))
    a = KernelDensity(bandwidth=[0.4, 0.5]).fit(x).score_samples(x[:50])
    b = KernelDensity(bandwidth=[0.4, 0.5]).fit(x.astype(np.float32)).score_samples(x[:50].astype(np.float32))
    assert b.dtype == np.float64
    np.testing.assert_allclose(b, a, rtol=1e-5)


@settings(max_examples=25)
@given(n=st.integers(2, 60), h=st.floats(0.01, 3.0), tol=st.sampled_from([1e-3, 1e-6, 1e-10]),
       seed=st.integers(0, 2**16), far=st.floats(0.0, 200.0))
def test_tol_is_honoured_on_every_query(n, h, tol, seed, far):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1)) * rng.uniform(0.1, 10)
    q = np.vstack([rng.normal(size=(30, 1)) * 3, [[x.max() + far * h]]])
    exact = KernelDensity(bandwidth=h).fit(x).score_samples(q)
    fast = KernelDensity(bandwidth=h, tol=tol, backend="taylor").fit(x).score_samples(q)
    assert (np.abs(fast - exact) <= math.log1p(tol)).all()


def test_tol_with_categories_and_the_auto_choice():
    rng = np.random.default_rng(10)
    X = np.column_stack([rng.normal(size=3000), rng.integers(0, 2, 3000)]).astype(float)
    Q = np.column_stack([np.linspace(-6, 6, 3000), np.tile([0.0, 1.0], 1500)])
    for model_args in (dict(bandwidth=[0.05, 0.2], var_types=vt) for vt in ("cu", "co")):
        exact = KernelDensity(**model_args).fit(X).score_samples(Q)
        for backend in ("auto", "taylor"):
            fast = KernelDensity(tol=1e-8, backend=backend, **model_args).fit(X).score_samples(Q)
            assert (np.abs(fast - exact) <= math.log1p(1e-8)).all()


def test_every_exact_backend_agrees():
    from nadaraya import backends

    rng = np.random.default_rng(11)
    x, q = rng.normal(size=(300, 1)), rng.normal(size=(40, 1)) * 2
    cases = [("gaussian", "fused"), ("gaussian", "truncated"), ("epanechnikov", "fused"),
             ("epanechnikov", "windowed"), ("tricube", "windowed"), ("laplacian", "laplace"),
             ("logistic", "fused")]  # (torch: its own tests; the import alone takes seconds)
    for kernel, name in cases:
        if name not in backends.available():
            continue
        want = KernelDensity(kernel=kernel, bandwidth=0.3, backend="reference").fit(x).score_samples(q)
        got = KernelDensity(kernel=kernel, bandwidth=0.3, backend=name).fit(x).score_samples(q)
        np.testing.assert_allclose(got, want, rtol=1e-10)
    with pytest.raises(ValueError, match="binned"):
        KernelDensity(kernel="logistic", bandwidth=0.3, backend="binned", tol=1e-6).fit(x).score_samples(q)


def test_dask_queries_and_data():
    da = pytest.importorskip("dask.array")
    x = np.random.default_rng(12).normal(size=(200, 2))
    model = KernelDensity(bandwidth=[0.4, 0.6]).fit(x)
    lazy = model.score_samples(da.from_array(x, chunks=(64, 2)))
    np.testing.assert_allclose(lazy.compute(), model.score_samples(x), rtol=1e-12)
    again = KernelDensity(bandwidth=[0.4, 0.6]).fit(da.from_array(x, chunks=(50, 2)))
    np.testing.assert_allclose(again.score_samples(x), model.score_samples(x), rtol=1e-12)


def test_sample_follows_the_density_and_score_sums():
    rng = np.random.default_rng(13)
    x = rng.normal(size=(300, 1))
    for kernel in sorted(PLAIN):
        model = KernelDensity(kernel=kernel, bandwidth=0.5).fit(x)
        s = model.sample(20_000, random_state=0)
        assert s.shape == (20_000, 1)
        # the sample's variance is the data's plus h^2 times the kernel's second moment
        from nadaraya.kernels import get

        want = x.var() + 0.25 * get(kernel).second_moment
        assert abs(s.var() - want) < 0.05 * want, kernel
    assert model.score(x[:7]) == pytest.approx(model.score_samples(x[:7]).sum(), rel=1e-14)
    np.testing.assert_array_equal(model.sample(5, random_state=1), model.sample(5, random_state=1))


def test_sample_of_categories_stays_on_the_levels():
    rng = np.random.default_rng(14)
    X = np.column_stack([rng.normal(size=100), rng.integers(0, 3, 100), rng.integers(2, 6, 100)])
    model = KernelDensity(bandwidth=[0.4, 0.2, 0.3], var_types="cuo").fit(X)
    s = model.sample(2000, random_state=0)
    assert set(np.unique(s[:, 1])) <= {0.0, 1.0, 2.0}
    assert set(np.unique(s[:, 2])) <= {2.0, 3.0, 4.0, 5.0}
    # unordered, lambda = 0.2: P(c) = 0.8 p_c + 0.1 (1 - p_c), p_c the training share
    p = np.array([np.mean(X[:, 1] == c) for c in (0, 1, 2)])
    got = np.array([np.mean(s[:, 1] == c) for c in (0, 1, 2)])
    np.testing.assert_allclose(got, 0.8 * p + 0.1 * (1 - p), atol=0.03)


def test_rules_of_thumb():
    x = np.random.default_rng(15).normal(size=(500, 2)) * [1.0, 3.0]
    ref = KernelDensity(bandwidth="normal_reference").fit(x).bandwidth_
    np.testing.assert_allclose(ref, 1.06 * x.std(axis=0) * 500 ** (-1 / 6), rtol=1e-12)
    scott = KernelDensity(bandwidth="scott").fit(x).bandwidth_
    assert scott.shape == (2,) and scott[1] > 2 * scott[0]


@pytest.mark.parametrize(("args", "fit_x", "match"), [
    (dict(kernel="constant"), None, r"'kernel' parameter of KernelDensity .* Got 'constant' instead"),
    (dict(kernel="nope"), None, r"'kernel' parameter of KernelDensity .* Got 'nope' instead"),
    (dict(bandwidth=-1.0), None, "bandwidth"),
    (dict(bandwidth=[0.1, 0.2, 0.3]), None, "bandwidth"),
    (dict(bandwidth="magic"), None, r"'bandwidth' parameter of KernelDensity .* Got 'magic' instead"),
    (dict(var_types="cx"), None, "var_types"),
    (dict(var_types="cu", bandwidth=[0.5, 0.9]), None, "lambda"),
    (dict(var_types="cu", bandwidth=0.5), None, "scalar"),
    (dict(categorical_kernel="odd"), None, "categorical_kernel"),
    (dict(tol=5.0), None, "tol"),
    (dict(bandwidth=0.5), [[np.nan, 1.0], [1.0, 2.0]], "NaN"),
    (dict(bandwidth=0.5), [[1.0, 2.0]], "1 sample"),
])
def test_bad_input_is_refused(args, fit_x, match):
    X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 2.0]]) if fit_x is None else np.array(fit_x)
    with pytest.raises(ValueError, match=match):
        KernelDensity(**args).fit(X)


def test_scoring_refuses_wrong_shapes_and_unfitted():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        KernelDensity().score_samples([[0.0]])
    model = KernelDensity(bandwidth=0.5).fit(np.random.default_rng(0).normal(size=(20, 2)))
    with pytest.raises(ValueError, match="features"):
        model.score_samples([[0.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match="n_samples"):
        model.sample(-1)
    with pytest.raises(ValueError, match="sample_weight"):
        KernelDensity(bandwidth=0.5).fit([[0.0], [1.0]], sample_weight=[1.0, -1.0])


def test_sklearn_clone_and_grid_search():
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV

    x = np.random.default_rng(16).normal(size=(120, 1))
    model = KernelDensity(bandwidth=0.5, kernel="epanechnikov")
    assert clone(model).get_params() == model.get_params()
    search = GridSearchCV(KernelDensity(), {"bandwidth": [0.05, 0.4, 3.0]}, cv=3).fit(x)
    assert search.best_params_["bandwidth"] == 0.4


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_sklearn_check_estimator():
    from sklearn.utils.estimator_checks import check_estimator

    check_estimator(KernelDensity())


def test_duplicated_points_keep_a_positive_bandwidth():
    """Leave-one-out likelihood grows without bound as h -> 0 on copies: the search stays in reach."""
    x = np.repeat(np.arange(5.0), 3)[:, None]
    h = KernelDensity(bandwidth="cv_ml").fit(x).bandwidth_
    assert np.isfinite(h).all() and (h > 0).all()
