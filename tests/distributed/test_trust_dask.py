"""Issue 28, item 1: every inference method gives on Dask what it gives on NumPy.

A model fitted on Dask arrays, or given Dask queries, must not return the lazy mean where the
standard errors were asked for, nor accept an unknown ``variance``.
"""

from __future__ import annotations

import numpy as np
import pytest

import nadaraya

da = pytest.importorskip("dask.array")

RTOL = 1e-10  # the Dask model keeps the caller's order of the training rows: sums in another order


def _data(p: int = 1, d: int = 1, n: int = 90, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 4, (n, d))
    y = np.sin(2 * X[:, 0])[:, None] + rng.normal(0, 0.2 + 0.1 * X[:, :1], (n, p))
    return X, (y[:, 0] if p == 1 else y)


def _models(degree: int, p: int = 1, d: int = 1):
    X, y = _data(p, d)
    h = [0.35, 0.8][:d]
    plain = nadaraya.NadarayaWatson(bandwidth=h, degree=degree).fit(X, y)
    lazy = nadaraya.NadarayaWatson(bandwidth=h, degree=degree).fit(
        da.from_array(X, chunks=(25, d)), da.from_array(y, chunks=25)
    )
    return X, y, plain, lazy


def _same(got, want):
    assert not isinstance(got, da.Array)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=1e-12)


Q = np.array([[0.3], [1.1], [2.0], [3.7]])


@pytest.mark.parametrize("variance", ["heteroscedastic", "homoscedastic"])
@pytest.mark.parametrize("degree", [0, 1])
def test_predict_return_std_on_dask_equals_numpy(degree, variance):
    _, _, plain, lazy = _models(degree)
    want_mean, want_std = plain.predict(Q, return_std=True, variance=variance)
    assert np.all(want_std > 0)
    for model, queries in (
        (lazy, Q),
        (lazy, da.from_array(Q, chunks=2)),
        (plain, da.from_array(Q, chunks=2)),
    ):
        out = model.predict(queries, return_std=True, variance=variance)
        assert isinstance(out, tuple) and len(out) == 2  # not two predictions unpacked as (mean, std)
        mean, std = out
        assert mean.shape == std.shape == (len(Q),)
        _same(mean, want_mean)
        _same(std, want_std)


def test_two_queries_do_not_unpack_as_mean_and_std():
    _, _, plain, lazy = _models(0)
    mean, std = lazy.predict([[1.0], [2.0]], return_std=True)
    want_mean, want_std = plain.predict([[1.0], [2.0]], return_std=True)
    _same(mean, want_mean)
    _same(std, want_std)
    assert not np.allclose(std, mean)


def test_two_outputs_std_on_dask():
    _, _, plain, lazy = _models(1, p=2)
    mean, std = lazy.predict(Q, return_std=True)
    want_mean, want_std = plain.predict(Q, return_std=True)
    assert mean.shape == std.shape == (len(Q), 2)
    _same(mean, want_mean)
    _same(std, want_std)


def test_without_std_still_lazy_and_equal():
    _, _, plain, lazy = _models(1)
    got = lazy.predict(Q)
    assert isinstance(got, da.Array)
    np.testing.assert_allclose(got.compute(), plain.predict(Q), rtol=RTOL)


@pytest.mark.parametrize("queries", ["numpy", "dask"])
@pytest.mark.parametrize("bogus", ["bogus", "Homoscedastic", None, 1])
def test_unknown_variance_refused_on_dask(queries, bogus):
    _, _, plain, lazy = _models(0)
    q = Q if queries == "numpy" else da.from_array(Q, chunks=2)
    for model in (lazy, plain):
        for return_std in (False, True):
            with pytest.raises(ValueError, match=r"variance=.*not valid.*heteroscedastic.*homoscedastic"):
                model.predict(q, return_std=return_std, variance=bogus)


@pytest.mark.parametrize(
    "method,kind",
    [
        ("asymptotic", "pointwise"),
        ("rbc", "pointwise"),
        ("bootstrap", "pointwise"),
        ("asymptotic", "simultaneous"),
        ("bootstrap", "simultaneous"),
    ],
)
def test_confidence_band_on_dask_equals_numpy(method, kind):
    _, _, plain, lazy = _models(1)
    want = plain.confidence_band(Q, method=method, kind=kind, n_boot=199, random_state=3)
    for model, queries in (
        (lazy, Q),
        (lazy, da.from_array(Q, chunks=2)),
        (plain, da.from_array(Q, chunks=2)),
    ):
        got = model.confidence_band(queries, method=method, kind=kind, n_boot=199, random_state=3)
        for g, w in zip(got, want):
            # the replicates are single precision: their quantiles agree to its resolution
            np.testing.assert_allclose(
                g, w, rtol=1e-5 if method == "bootstrap" or kind != "pointwise" else RTOL
            )
        assert np.all(got.lower < got.estimate) and np.all(got.estimate < got.upper)


def test_gradient_summary_weights_and_test_on_dask_equal_numpy():
    X, y, plain, lazy = _models(1, d=2)
    q2 = np.array([[0.5, 1.0], [2.0, 3.0]])
    g, s = lazy.gradient(da.from_array(q2, chunks=1), return_std=True)
    gw, sw = plain.gradient(q2, return_std=True)
    _same(g, gw)
    _same(s, sw)
    a, b = lazy.summary(), plain.summary()
    assert (a.n, a.degree) == (b.n, b.degree)
    np.testing.assert_allclose(
        [a.r_squared, a.residual_variance], [b.r_squared, b.residual_variance], rtol=RTOL
    )
    dX, dy = da.from_array(X, chunks=(30, 2)), da.from_array(y, chunks=30)
    t1 = lazy.significance_test(dX, dy, n_boot=39, random_state=1)
    t2 = plain.significance_test(X, y, n_boot=39, random_state=1)
    np.testing.assert_allclose(t1.statistic, t2.statistic, rtol=1e-8)
    np.testing.assert_array_equal(t1.p_value, t2.p_value)


def test_attention_weights_on_dask_equal_numpy():
    X, y = _data()
    plain = nadaraya.NadarayaWatson(bandwidth=0.3).fit(X, y)
    lazy = nadaraya.NadarayaWatson(bandwidth=0.3).fit(
        da.from_array(X, chunks=(25, 1)), da.from_array(y, chunks=25)
    )
    W = lazy.attention_weights(da.from_array(Q, chunks=2))
    assert isinstance(W, np.ndarray) and W.shape == (len(Q), len(y))
    np.testing.assert_allclose(W @ y, plain.predict(Q), rtol=RTOL)  # the Dask model keeps the rows' order


# ------------------------------------------------------------------ item 9: small chunks


def test_one_row_chunks_are_merged_before_the_graph_is_built():
    """Chunks of one row at n = 300 built a task per pair of chunks (105,300 tasks, 33 s)."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, 300)
    y = np.sin(6 * x) + rng.normal(0, 0.1, 300)
    want = nadaraya.loo_pool(x, y, bandwidth=0.05)
    got = nadaraya.loo_pool(da.from_array(x, chunks=1), da.from_array(y, chunks=1), bandwidth=0.05)
    tasks = len(dict(got.__dask_graph__()))
    assert tasks < 20 * 300, tasks  # linear in the chunks (about 1,900), not quadratic
    assert got.chunks[0] == (1,) * 300  # the caller's chunks come back
    np.testing.assert_allclose(got.compute(), want, rtol=1e-12, atol=1e-15)
    q = rng.uniform(0, 1, 300)
    lazy = nadaraya.pool(da.from_array(q, chunks=1), da.from_array(x, chunks=1), y, bandwidth=0.05)
    assert len(dict(lazy.__dask_graph__())) < 20 * 300
    np.testing.assert_allclose(lazy.compute(), nadaraya.pool(q, x, y, bandwidth=0.05), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("variance,rtol", [("homoscedastic", RTOL), ("heteroscedastic", 1e-6)])
def test_mixed_columns_on_dask_equal_numpy(variance, rtol):
    """Categorical columns and degree 1: the heteroscedastic rule's own bandwidth search (L-BFGS-B
    over the mixed bandwidths) meets the rows in another order, within its tolerance."""
    rng = np.random.default_rng(0)
    X = np.c_[rng.uniform(0, 4, 90), rng.integers(0, 3, 90)]
    y = np.sin(X[:, 0]) + X[:, 1] + rng.normal(0, 0.2, 90)
    kw = dict(bandwidth=[0.5, 0.2], var_types="cu", degree=1)
    plain = nadaraya.NadarayaWatson(**kw).fit(X, y)
    lazy = nadaraya.NadarayaWatson(**kw).fit(da.from_array(X, chunks=(30, 2)), da.from_array(y, chunks=30))
    Qm = np.array([[1.0, 0.0], [2.0, 2.0], [3.0, 1.0]])
    mean, std = lazy.predict(da.from_array(Qm, chunks=2), return_std=True, variance=variance)
    want_mean, want_std = plain.predict(Qm, return_std=True, variance=variance)
    _same(mean, want_mean)
    np.testing.assert_allclose(std, want_std, rtol=rtol)
    got, want = (
        lazy.confidence_band(Qm, method="rbc", variance=variance),
        plain.confidence_band(Qm, method="rbc", variance=variance),
    )
    np.testing.assert_allclose(got.lower, want.lower, rtol=rtol)
