"""Robustness iterations of the estimator (statsmodels' ``it``) and lowess's bands."""

from __future__ import annotations

import re

import numpy as np
import pytest

import nadaraya
from nadaraya import NadarayaWatson


def data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    y = np.sin(x) + rng.normal(0, 0.3, n)
    y[7] += 6.0
    return x, y


@pytest.mark.parametrize(("frac", "it"), [(0.2, 0), (0.3, 1), (0.5, 3), (0.9, 4)])
def test_the_estimator_with_a_span_and_robustness_is_statsmodels_lowess(frac, it):
    lowess = pytest.importorskip("statsmodels.nonparametric.smoothers_lowess").lowess
    x, y = data()
    model = NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn", bandwidth=frac,
                           robust_iterations=it).fit(x[:, None], y)
    want = lowess(y, x, frac=frac, it=it, return_sorted=False)
    np.testing.assert_allclose(model.predict(x[:, None]), want, rtol=0, atol=1e-10 * np.abs(y).max())
    xv = np.linspace(0.5, 9.5, 7)
    want_at = lowess(y, x, frac=frac, it=it, xvals=xv)
    np.testing.assert_allclose(model.predict(xv[:, None]), want_at, rtol=0, atol=1e-10 * np.abs(y).max())


def test_robustness_weights_are_the_bisquare_of_the_previous_fit():
    x, y = data(80, 1)
    X = x[:, None]
    sw = np.random.default_rng(2).uniform(0.5, 2.0, 80)
    plain = NadarayaWatson(bandwidth=0.6, degree=1).fit(X, y, sw)
    robust = NadarayaWatson(bandwidth=0.6, degree=1, robust_iterations=1).fit(X, y, sw)
    e = y - plain.predict(X)
    u = np.minimum(np.abs(e) / (6.0 * np.median(np.abs(e))), 1.0)
    r = (1.0 - u**2) ** 2
    order = robust.fit_order_
    np.testing.assert_allclose(robust.robustness_weights_, r[order], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(robust.sample_weight_, (sw * r)[order], rtol=1e-12, atol=1e-14)
    assert plain.robustness_weights_ is None


@pytest.mark.parametrize("kind", ["fixed", "generalized_nn", "adaptive_nn"])
def test_an_outliers_influence_vanishes_with_two_iterations(kind):
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0, 1, 60))
    y = 2.0 * x + rng.normal(0, 0.05, 60)
    bw = 0.15 if kind == "fixed" else 20
    clean = NadarayaWatson(kernel="tricube", degree=1, bandwidth=bw, bandwidth_type=kind,
                           robust_iterations=2).fit(
        np.delete(x, 30)[:, None], np.delete(y, 30)).predict(x[:, None])
    for outlier in (5.0, 50.0):
        y2 = y.copy()
        y2[30] += outlier
        gaps = []
        for it in (0, 2):
            model = NadarayaWatson(kernel="tricube", degree=1, bandwidth=bw, bandwidth_type=kind,
                                   robust_iterations=it).fit(x[:, None], y2)
            gaps.append(np.abs(model.predict(x[:, None]) - clean).max())
        assert model.robustness_weights_[np.flatnonzero(model.fit_order_ == 30)[0]] == 0.0
        assert gaps[0] > 0.1 * outlier and gaps[1] < 0.02, gaps  # 0.02: under half the noise sd


def test_lowess_bands_have_the_documented_shapes_and_values():
    x, y = data(100, 4)
    out = nadaraya.lowess(y, x, frac=0.4, it=2, return_band=0.9)
    assert out.shape == (100, 4)
    np.testing.assert_allclose(out[:, :2], nadaraya.lowess(y, x, frac=0.4, it=2), rtol=0, atol=0)
    model = NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn", bandwidth=0.4,
                           robust_iterations=2).fit(x[:, None], y)
    band = model.confidence_band(out[:, :1], level=0.9, variance="homoscedastic")
    np.testing.assert_allclose(out[:, 2], band.lower, rtol=0, atol=1e-10)
    np.testing.assert_allclose(out[:, 3], band.upper, rtol=0, atol=1e-10)
    unsorted = nadaraya.lowess(y, x, frac=0.4, it=2, return_sorted=False, return_band=0.9)
    assert unsorted.shape == (100, 3)
    order = np.argsort(x)
    np.testing.assert_allclose(unsorted[order], out[:, 1:], rtol=0, atol=1e-12)
    xv = np.array([2.0, np.nan, 7.0])
    at = nadaraya.lowess(y, x, frac=0.4, it=2, xvals=xv, return_band=0.9)
    assert at.shape == (3, 3) and np.isnan(at[1]).all()
    assert np.all(at[[0, 2], 1] < at[[0, 2], 0]) and np.all(at[[0, 2], 0] < at[[0, 2], 2])


@pytest.mark.parametrize("bad", [-1, 1.5, True, 101])
def test_bad_robust_iterations_are_named(bad):
    x, y = data(30)
    with pytest.raises(ValueError, match=rf"'robust_iterations' parameter of NadarayaWatson must be an int "
                                         rf"in the range \[0, 100\]\. Got {re.escape(repr(bad))} instead"):
        NadarayaWatson(bandwidth=1.0, robust_iterations=bad).fit(x[:, None], y)


def test_robust_iterations_refuse_several_outputs_and_bad_band_levels():
    x, y = data(30)
    with pytest.raises(ValueError, match="y has 2 columns"):
        NadarayaWatson(bandwidth=1.0, robust_iterations=1).fit(x[:, None], np.c_[y, y])
    for level in (0.0, 1.0, "0.9", True):
        with pytest.raises(ValueError, match="return_band must be None or a level"):
            nadaraya.lowess(y, x, return_band=level)


def test_the_report_offers_lowess_with_its_span_by_cv():
    from nadaraya import report
    from nadaraya.report._html import _table

    study = report.textbook_study(kernels=["gaussian"], slider=[0.5], learnable=False, degrees=(1,))
    row = next(r for r in study.rows if r.model == "LOWESS")
    n = study.split.x_train.size
    k = round(row.bandwidth * n)
    assert 2 <= k < n and f"span = {k} of {n} points" in row.note
    model = NadarayaWatson(kernel="tricube", degree=1, bandwidth_type="generalized_nn", bandwidth=k)
    pred = model.fit(study.split.x_train[:, None], study.split.y_train).predict(study.split.x_val[:, None])
    assert row.mse == pytest.approx(float(np.mean((pred - study.split.y_val) ** 2)), rel=1e-12)
    assert "LOWESS" in _table(study, {})
