"""Prediction intervals: jackknife+, CV+ and split conformal against MAPIE, a plain refit loop,
coverage in a seeded simulation, and bad input."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from sklearn.model_selection import KFold, LeaveOneOut

from nadaraya import NadarayaWatson


def _data(n: int = 80, d: int = 1, seed: int = 1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    y = np.sin(6 * X[:, 0]) + rng.normal(0, 0.1 + 0.3 * X[:, 0], n)
    return X, y


def _refit_jackknife(X, y, Q, level, sample_weight=None, **params):
    """Jackknife+ written out: n refits, the ceil(level (n + 1))-th order statistics."""
    n = len(y)
    mu = np.empty((len(Q), n))
    R = np.empty(n)
    for i in range(n):
        keep = np.arange(n) != i
        sw = None if sample_weight is None else sample_weight[keep]
        m = NadarayaWatson(**params).fit(X[keep], y[keep], sample_weight=sw)
        mu[:, i] = m.predict(Q)
        R[i] = abs(y[i] - m.predict(X[i : i + 1])[0])
    k = math.ceil(level * (n + 1))  # the k-th smallest upper value, the k-th largest lower value
    upper = np.sort(mu + R, axis=1)[:, k - 1]
    lower = np.sort(mu - R, axis=1)[:, n - k]
    return lower, upper


@pytest.mark.parametrize("kernel, h", [("gaussian", 0.05), ("epanechnikov", 0.06), ("gaussian", 0.002)])
def test_jackknife_plus_equals_mapie_loo(kernel, h):
    mapie = pytest.importorskip("mapie.regression")
    X, y = _data()
    Q = np.r_[np.linspace(-0.2, 1.2, 25)[:, None], [[3.0], [-2.0]]]  # far queries too
    lo, hi = NadarayaWatson(kernel=kernel, bandwidth=h).fit(X, y).prediction_interval(Q, level=0.9)
    ref = mapie.CrossConformalRegressor(NadarayaWatson(kernel=kernel, bandwidth=h), confidence_level=0.9,
                                        cv=LeaveOneOut(), method="plus")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.fit_conformalize(X, y)
    _, iv = ref.predict_interval(Q)
    np.testing.assert_allclose(lo, iv[:, 0, 0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(hi, iv[:, 1, 0], rtol=0, atol=1e-10)


def test_cv_plus_equals_mapie_kfold():
    mapie = pytest.importorskip("mapie.regression")
    X, y = _data(seed=2)
    Q = np.linspace(0, 1, 20)[:, None]
    folds = KFold(4, shuffle=True, random_state=3)
    model = NadarayaWatson(bandwidth=0.07).fit(X, y)
    lo, hi = model.prediction_interval(Q, level=0.8, method="cv+", cv=folds)
    ref = mapie.CrossConformalRegressor(NadarayaWatson(bandwidth=0.07), confidence_level=0.8, cv=folds,
                                        method="plus")
    ref.fit_conformalize(X, y)
    _, iv = ref.predict_interval(Q)
    np.testing.assert_allclose(lo, iv[:, 0, 0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(hi, iv[:, 1, 0], rtol=0, atol=1e-10)


@pytest.mark.parametrize("case", ["weights", "two_features", "degree1", "boxcar", "cosine", "ties",
                                  "boxcar2d"])
def test_jackknife_plus_equals_refit_loop(case):
    two = case in ("two_features", "boxcar2d")
    X, y = _data(n=40, d=2 if two else 1, seed=4)
    params: dict = {"bandwidth": [0.15, 0.3] if two else 0.1}
    if case == "ties":  # many equal residuals and equal keys: the bracketed order statistics count ties
        X, y = np.round(X * 8) / 8, np.round(y)
        params["kernel"] = "boxcar"
    if case == "boxcar2d":
        params = {"bandwidth": [0.25, 0.5], "kernel": "boxcar"}
    sw = None
    if case == "weights":
        sw = np.random.default_rng(5).uniform(0.2, 3.0, len(y))
    if case == "degree1":
        params["degree"] = 1
    if case in ("boxcar", "cosine"):
        params["kernel"] = case
    Q = np.random.default_rng(6).uniform(-0.1, 1.1, (15, X.shape[1]))
    lo, hi = NadarayaWatson(**params).fit(X, y, sample_weight=sw).prediction_interval(Q, level=0.75)
    rlo, rhi = _refit_jackknife(X, y, Q, 0.75, sample_weight=sw, **params)
    np.testing.assert_allclose(lo, rlo, rtol=0, atol=1e-10)
    np.testing.assert_allclose(hi, rhi, rtol=0, atol=1e-10)


def test_a_model_fitted_on_dask_arrays_gives_the_same_intervals():
    dask_array = pytest.importorskip("dask.array")
    X, y = _data(n=50, seed=9)
    Q = np.linspace(0, 1, 11)[:, None]
    for kernel in ("epanechnikov", "gaussian"):
        lazy = NadarayaWatson(kernel=kernel, bandwidth=0.1).fit(dask_array.from_array(X, chunks=20),
                                                                 dask_array.from_array(y, chunks=20))
        eager = NadarayaWatson(kernel=kernel, bandwidth=0.1).fit(X, y)
        for a, b in zip(lazy.prediction_interval(Q), eager.prediction_interval(Q), strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_split_is_the_calibration_fold_order_statistic():
    X, y = _data(n=60, seed=7)
    Q = np.linspace(0, 1, 9)[:, None]
    folds = KFold(3, shuffle=True, random_state=0)
    model = NadarayaWatson(bandwidth=0.08).fit(X, y)
    lo, hi = model.prediction_interval(Q, level=0.8, method="split", cv=folds)
    train, cal = next(folds.split(X))
    m = NadarayaWatson(bandwidth=0.08).fit(X[train], y[train])
    scores = np.sort(np.abs(y[cal] - m.predict(X[cal])))
    q = scores[math.ceil(0.8 * (len(cal) + 1)) - 1]
    np.testing.assert_allclose(lo, m.predict(Q) - q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(hi, m.predict(Q) + q, rtol=0, atol=1e-12)


def test_cv_bandwidth_conditions_on_the_bandwidth_chosen_on_all_points():
    X, y = _data(n=50, seed=8)
    Q = np.linspace(0, 1, 7)[:, None]
    model = NadarayaWatson().fit(X, y)
    fixed = NadarayaWatson(bandwidth=model.bandwidth_).fit(X, y)
    for a, b in zip(model.prediction_interval(Q), fixed.prediction_interval(Q), strict=True):
        np.testing.assert_array_equal(a, b)


def _simulate(seed: int, n: int, m: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n + m, 1))
    sd = np.where(X[:, 0] < 0.5, 0.05, 0.5)  # quiet left half, noisy right half
    y = np.sin(4 * X[:, 0]) + rng.normal(0, sd)
    return X[:n], y[:n], X[n:], y[n:]


def test_coverage_at_the_nominal_rate_marginally_and_adaptive_in_each_half():
    hits: dict[str, list] = {"plain": [], "adaptive": [], "cv+": []}
    halves = []
    for seed in range(4):
        X, y, Xt, yt = _simulate(seed, 300, 1000)
        model = NadarayaWatson(bandwidth=0.05).fit(X, y)
        for key, kw in (("plain", {}), ("adaptive", {"adaptive": True}), ("cv+", {"method": "cv+"})):
            lo, hi = model.prediction_interval(Xt, level=0.9, random_state=seed, **kw)
            hits[key].append((lo <= yt) & (yt <= hi))
        halves.append(Xt[:, 0] < 0.5)
    quiet = np.concatenate(halves)
    for key, h in hits.items():
        cover = np.concatenate(h)
        assert 0.88 <= cover.mean() <= 0.93, (key, cover.mean())  # 4000 points: sd 0.005
    adaptive = np.concatenate(hits["adaptive"])
    plain = np.concatenate(hits["plain"])
    for half in (quiet, ~quiet):
        assert 0.86 <= adaptive[half].mean() <= 0.95, adaptive[half].mean()
    assert plain[~quiet].mean() < 0.85 < 0.97 < plain[quiet].mean()  # without it: too narrow, too wide


def test_adaptive_intervals_widen_where_the_noise_does():
    X, y, _, _ = _simulate(0, 300, 0)
    lo, hi = NadarayaWatson(bandwidth=0.05).fit(X, y).prediction_interval([[0.25], [0.75]], adaptive=True)
    width = hi - lo
    assert width[1] > 4 * width[0]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"level": 1.5}, ValueError, "level"),
    ({"level": True}, ValueError, "level"),
    ({"level": "0.9"}, ValueError, "level"),
    ({"method": "jackknife"}, ValueError, "method='jackknife'"),
    ({"adaptive": "yes"}, TypeError, "adaptive"),
    ({"method": "cv+", "cv": 1}, ValueError, "cv=1"),
    ({"method": "cv+", "cv": "folds"}, TypeError, "cv"),
    ({"method": "cv+", "cv": 50}, ValueError, "cv=50"),
    ({"level": 0.99}, ValueError, "level=0.99"),
])
def test_bad_input(kwargs, error, match):
    X, y = _data(n=20)
    model = NadarayaWatson(bandwidth=0.1).fit(X, y)
    with pytest.raises(error, match=match):
        model.prediction_interval(X[:3], **kwargs)


def test_bad_queries_and_models():
    X, y = _data(n=20)
    with pytest.raises(Exception, match="not fitted"):
        NadarayaWatson().prediction_interval(X)
    model = NadarayaWatson(bandwidth=0.1).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        model.prediction_interval(np.zeros((2, 3)))
    multi = NadarayaWatson(bandwidth=0.1).fit(X, np.c_[y, y])
    with pytest.raises(ValueError, match="one output"):
        multi.prediction_interval(X[:2])
