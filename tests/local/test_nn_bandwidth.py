"""Nearest-neighbour bandwidths (R np's generalized_nn and adaptive_nn) against plain formulas."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaWatson
from nadaraya.bandwidth.nn import choose_k, score_k, walk_scores
from nadaraya.kernels import get as get_kernel
from nadaraya.local.neighbours import Geometry

# ---------------------------------------------------------------------------------------------
# plain formulas: k-th distances by sorting, weights and weighted least squares written out


def kth(values: np.ndarray, q: float, k: int, skip: list[int] = ()) -> float:
    """The k-th smallest |q - x| over ``values`` less the rows ``skip``; 0 -> nearest positive."""
    keep = np.delete(values, list(skip))
    dist = np.sort(np.abs(keep - q))
    r = dist[min(k, dist.size) - 1]
    return r if r > 0 else dist[dist > 0][0]


def kth_raw(values: np.ndarray, q: float, k: int, skip: list[int]) -> float:
    keep = np.delete(values, list(skip))
    return np.sort(np.abs(keep - q))[k - 1]


def plain_h(X, Q, k, kind, loo_row=None):
    """Per query, the (n, d) bandwidths of every key (np's rules, by sorting)."""
    n, d = X.shape
    out = np.empty((Q.shape[0], n, d))
    for b, q in enumerate(Q):
        for f in range(d):
            if kind == "generalized_nn":
                skip = [] if loo_row is None else [loo_row[b]]
                out[b, :, f] = kth(X[:, f], q[f], k, skip)
                continue
            for j in range(n):
                if loo_row is None:
                    out[b, j, f] = kth(X[:, f], X[j, f], k, [j])
                else:
                    i = loo_row[b]
                    r = kth_raw(X[:, f], X[j, f], k, [j, i])  # the k-th other once x_i is left out
                    out[b, j, f] = r if r > 0 else kth(X[:, f], X[j, f], 1, [j])
    return out


def plain_fit(X, y, Q, k, kind, kernel, degree, sw=None, loo=False):
    """The local polynomial fit at each query from weights written out (lstsq per query)."""
    n, d = X.shape
    K = get_kernel(kernel).profile
    s = np.ones(n) if sw is None else sw
    rows = np.arange(n) if loo else None
    H = plain_h(X, Q, k, kind, rows)
    key_h = plain_h(X, X[:1], k, kind)[0]
    out = np.empty(Q.shape[0])
    for b, q in enumerate(Q):
        U = (X - q) / H[b]
        w = s * np.prod(K(U), axis=1)
        if kind == "adaptive_nn":
            w = w / np.prod(H[b], axis=1)
        if loo:
            w[b] = 0.0
        # the offsets in units of the query's bandwidth (adaptive: the keys' median bandwidth)
        Z = (X - q) / (H[b][0] if kind == "generalized_nn" else np.median(key_h, axis=0))
        cols = [np.ones(n)]
        if degree >= 1:
            cols += [Z[:, f] for f in range(d)]
        if degree >= 2:
            cols += [Z[:, f] * Z[:, g] for f in range(d) for g in range(f, d)]
        D = np.column_stack(cols)
        M = D.T @ (w[:, None] * D)
        if degree == 0 or not w.sum() > 0 or np.linalg.cond(M) >= 1e10:  # singular: degree 0
            out[b] = w @ y / w.sum()
            continue
        sq = np.sqrt(w)
        out[b] = np.linalg.lstsq(D * sq[:, None], y * sq, rcond=None)[0][0]
    return out


def data(n=40, d=1, seed=0, ties=True):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    if ties:
        X[3] = X[4]
        X[10:13, 0] = X[10, 0]
    y = np.sin(5 * X[:, 0]) + X[:, -1] + rng.normal(0, 0.1, n)
    return X, y


# ---------------------------------------------------------------------------------------------
# the k-th distances


@pytest.mark.parametrize("k", [1, 2, 3, 7, 39])
def test_kth_distances_by_sorting(k):
    X, _ = data(40, 2)
    Q = np.vstack([X[:6], np.random.default_rng(1).uniform(-0.5, 1.5, (6, 2))])
    g = Geometry(X, np.array([k, min(k + 1, 39)]), "generalized_nn")
    h, _ = g.query_h(Q)
    want = np.array([[kth(X[:, f], q[f], g.k[f]) for f in range(2)] for q in Q])
    np.testing.assert_array_equal(h, want)
    h_loo, _ = g.query_h(X, loo=True)
    want_loo = np.array([[kth(X[:, f], X[i, f], g.k[f], [i]) for f in range(2)] for i in range(40)])
    np.testing.assert_array_equal(h_loo, want_loo)
    if k <= 38:
        a = Geometry(X, np.array([k, k]), "adaptive_nn")
        np.testing.assert_array_equal(a.key_h(), plain_h(X, X[:1], k, "adaptive_nn")[0])
        rows = np.array([0, 3, 11])
        got, want = a.donor_h(rows), plain_h(X, X[rows], k, "adaptive_nn", rows)
        got[np.arange(3), rows] = want[np.arange(3), rows] = 0.0  # the left-out key's own: unused
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# fits against the plain formula


@pytest.mark.parametrize("kind", ["generalized_nn", "adaptive_nn"])
@pytest.mark.parametrize(("kernel", "degree", "d"), [
    ("gaussian", 0, 1), ("tricube", 1, 1), ("epanechnikov", 2, 1), ("gaussian", 1, 2), ("biweight", 0, 2),
])
def test_predictions_and_leave_one_out_match_the_plain_formula(kind, kernel, degree, d):
    X, y = data(30 if d == 1 else 36, d, seed=d)
    sw = np.random.default_rng(2).uniform(0.5, 2.0, X.shape[0])
    k = 8 if d == 1 else 14
    Q = np.random.default_rng(3).uniform(0.05, 0.95, (7, d))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.SingularFitWarning)
        got = nadaraya.pool(Q, X, y, kernel=kernel, bandwidth=k, bandwidth_type=kind, degree=degree,
                            sample_weight=sw, empty="nan")
        want = plain_fit(X, y, Q, k, kind, kernel, degree, sw)
        ok = np.isfinite(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=0, atol=1e-10)
        model = NadarayaWatson(kernel=kernel, bandwidth=k, bandwidth_type=kind, degree=degree).fit(X, y, sw)
        np.testing.assert_allclose(model.predict(Q)[ok], want[ok], rtol=0, atol=1e-10)
        got_loo = nadaraya.loo_pool(X, y, kernel=kernel, bandwidth=k, bandwidth_type=kind, degree=degree,
                                    sample_weight=sw, empty="nan")
        want_loo = plain_fit(X, y, X, k, kind, kernel, degree, sw, loo=True)
    ok = np.isfinite(want_loo) & np.isfinite(got_loo)
    assert ok.sum() >= X.shape[0] // 2
    np.testing.assert_allclose(got_loo[ok], want_loo[ok], rtol=0, atol=1e-9)


@pytest.mark.parametrize("kind", ["generalized_nn", "adaptive_nn"])
@pytest.mark.parametrize("kernel", ["gaussian", "tricube", "epanechnikov"])
def test_a_line_is_reproduced_exactly(kind, kernel):
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 10, (50, 1))
    y = 3.0 * X[:, 0] - 2.0
    model = NadarayaWatson(kernel=kernel, bandwidth=0.2, bandwidth_type=kind, degree=1).fit(X, y)
    Q = np.linspace(0.5, 9.5, 13)[:, None]
    np.testing.assert_allclose(model.predict(Q), 3.0 * Q[:, 0] - 2.0, rtol=0, atol=1e-10)
    np.testing.assert_allclose(model.gradient(Q)[:, 0], 3.0, rtol=0, atol=1e-9)
    assert model.bandwidth_.tolist() == [10.0]


def test_degree_zero_gradient_is_the_derivative_of_the_fit():
    X, y = data(40, 1, ties=False)
    for kind in ("generalized_nn", "adaptive_nn"):
        model = NadarayaWatson(kernel="gaussian", bandwidth=9, bandwidth_type=kind).fit(X, y)
        q = np.array([[0.31], [0.52], [0.77]])
        eps = 1e-6
        fd = (model.predict(q + eps) - model.predict(q - eps)) / (2 * eps)
        np.testing.assert_allclose(model.gradient(q)[:, 0], fd, rtol=1e-5, atol=1e-6)


def test_standard_errors_and_band_are_those_of_the_rows():
    X, y = data(35, 1)
    model = NadarayaWatson(kernel="tricube", bandwidth=10, bandwidth_type="generalized_nn", degree=1)
    model.fit(X, y)
    Q = np.array([[0.2], [0.6]])
    n = X.shape[0]
    A = np.array([plain_fit(X, np.eye(n)[j], Q, 10, "generalized_nn", "tricube", 1) for j in range(n)]).T
    H = np.array([plain_fit(X, np.eye(n)[j], X, 10, "generalized_nn", "tricube", 1) for j in range(n)]).T
    sigma2 = np.sum((y - H @ y) ** 2) / (n - np.trace(H))
    mean, std = model.predict(Q, return_std=True, variance="homoscedastic")
    np.testing.assert_allclose(mean, A @ y, atol=1e-10)
    np.testing.assert_allclose(std, np.sqrt((A**2).sum(axis=1) * sigma2), rtol=1e-9)
    band = model.confidence_band(Q, level=0.9, variance="homoscedastic")
    np.testing.assert_allclose(band.upper - band.estimate, 1.6448536269514722 * std, rtol=1e-9)
    boot = model.confidence_band(Q, method="bootstrap", n_boot=199, random_state=0)
    assert np.all(boot.lower < boot.estimate) and np.all(boot.estimate < boot.upper)
    simul = model.confidence_band(Q, kind="simultaneous", n_boot=199, random_state=0,
                                  variance="homoscedastic")
    assert np.all(simul.upper - simul.lower >= band.upper - band.lower - 1e-12)


# ---------------------------------------------------------------------------------------------
# choosing k


@pytest.mark.parametrize(("kernel", "degree"), [("tricube", 0), ("tricube", 1), ("epanechnikov", 1),
                                                ("boxcar", 0), ("triangular", 1)])
def test_cv_of_every_k_in_one_walk_matches_a_brute_force_grid(kernel, degree):
    X, y = data(32, 1)
    sw = np.random.default_rng(5).uniform(0.5, 2.0, 32)
    order = np.argsort(X[:, 0], kind="stable")
    X, y, sw = X[order], y[order], sw[order]
    K = get_kernel(kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.SingularFitWarning)
        fast = walk_scores(X[:, 0], y, sw, K, degree)
        brute = np.array([score_k(X, y[:, None], sw, K, degree, "generalized_nn", k) for k in range(1, 32)])
        model = NadarayaWatson(kernel=kernel, bandwidth="cv", bandwidth_type="generalized_nn",
                               degree=degree).fit(X, y, sw)
    well = np.arange(1, 32) >= 4  # small windows are nearly singular: their rounding is amplified
    np.testing.assert_allclose(fast[well], brute[well], rtol=1e-9)
    assert model.bandwidth_[0] == 1 + int(np.argmin(brute))


@pytest.mark.parametrize("kind", ["generalized_nn", "adaptive_nn"])
@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_search_over_k_matches_the_plain_formula(kind, method):
    X, y = data(18 if method == "cv" else 12, 1, seed=6)
    order = np.argsort(X[:, 0], kind="stable")
    X, y = X[order], y[order]
    n = X.shape[0]
    top = n - 1 if kind == "generalized_nn" else n - 2
    scores = []
    for k in range(1, top + 1):
        if method == "cv":
            loo = plain_fit(X, y, X, k, kind, "gaussian", 1, loo=True)
            scores.append(np.mean((y - loo) ** 2))
        else:
            H = np.array([plain_fit(X, np.eye(n)[j], X, k, kind, "gaussian", 1) for j in range(n)]).T
            tr = np.trace(H)
            ok = n - tr - 2 > 0
            scores.append(np.log(np.mean((y - H @ y) ** 2)) + (n + tr) / (n - tr - 2) if ok else np.inf)
    found = choose_k(X, y[:, None], None, get_kernel("gaussian"), 1, kind, method)
    np.testing.assert_allclose(found["scores"], scores, rtol=1e-8)
    assert found["k"] == 1 + int(np.argmin(scores))


# ---------------------------------------------------------------------------------------------
# persistence and bad input


def test_saved_and_pickled_models_predict_the_same(tmp_path):
    X, y = data(30, 1)
    model = NadarayaWatson(kernel="tricube", bandwidth=0.4, bandwidth_type="adaptive_nn", degree=1,
                           robust_iterations=2).fit(X, y)
    Q = np.array([[0.25], [0.5]])
    again = nadaraya.load(model.save(tmp_path / "m.npz"))
    assert again.bandwidth_type == "adaptive_nn" and again.robust_iterations == 2
    np.testing.assert_array_equal(again.predict(Q), model.predict(Q))
    np.testing.assert_array_equal(again.robustness_weights_, model.robustness_weights_)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).predict(Q), model.predict(Q))


@pytest.mark.parametrize(("params", "match"), [
    (dict(bandwidth_type="knn"), r"'bandwidth_type' parameter of NadarayaWatson .* Got 'knn' instead"),
    (dict(bandwidth_type="generalized_nn", bandwidth=0), r"'bandwidth' parameter .* Got 0 instead"),
    (dict(bandwidth_type="generalized_nn", bandwidth=1.5), "a fraction must be in"),
    (dict(bandwidth_type="generalized_nn", bandwidth=31), "asks for 31 neighbours of 30"),
    (dict(bandwidth_type="adaptive_nn", bandwidth=30), "at most 29"),
    (dict(bandwidth_type="generalized_nn", bandwidth="scott"), "bandwidth='scott' with bandwidth_type"),
    (dict(bandwidth_type="generalized_nn", bandwidth=[3, 4]), "one value or 1"),
    (dict(bandwidth_type="generalized_nn", bandwidth=True), r"'bandwidth' parameter .* Got True instead"),
])
def test_bad_input_is_named(params, match):
    X, y = data(30, 1)
    with pytest.raises(ValueError, match=match):
        NadarayaWatson(**params).fit(X, y)


def test_categorical_columns_and_attention_weights_are_refused():
    X, y = data(30, 2)
    X[:, 1] = np.arange(30) % 3
    with pytest.raises(ValueError, match="continuous columns only"):
        NadarayaWatson(bandwidth=5, bandwidth_type="generalized_nn", var_types="cu").fit(X, y)
    model = NadarayaWatson(bandwidth=5, bandwidth_type="generalized_nn").fit(X, y)
    with pytest.raises(NotImplementedError, match="bandwidth_type='generalized_nn'"):
        model.attention_weights(X[:2])


def test_significance_test_is_refused_with_nn_bandwidths():
    X, y = data(30, 1)
    model = NadarayaWatson(bandwidth=5, bandwidth_type="adaptive_nn").fit(X, y)
    with pytest.raises(NotImplementedError, match="significance_test needs a fixed bandwidth"):
        model.significance_test(X, y, n_boot=19)


def test_dask_queries_are_computed_and_dask_training_data_refused():
    da = pytest.importorskip("dask.array")
    X, y = data(30, 1)
    model = NadarayaWatson(bandwidth=6, bandwidth_type="generalized_nn").fit(X, y)
    Q = np.array([[0.3], [0.7]])
    np.testing.assert_array_equal(model.predict(da.from_array(Q)), model.predict(Q))
    with pytest.raises(ValueError, match="need NumPy input"):
        NadarayaWatson(bandwidth=6, bandwidth_type="generalized_nn").fit(da.from_array(X), da.from_array(y))


def test_cv_results_of_a_search_over_k():
    X, y = data(25, 1)
    model = NadarayaWatson(kernel="epanechnikov", bandwidth="cv", bandwidth_type="generalized_nn").fit(X, y)
    res = model.cv_results_
    assert res["k"].tolist() == list(range(1, 25))
    assert res["k"][res["rank"] == 1][0] == model.bandwidth_[0]
    assert res["score"][res["rank"] == 1][0] == res["score"].min()
