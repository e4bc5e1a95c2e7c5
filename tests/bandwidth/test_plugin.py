"""Plug-in bandwidths (mse/imse, dpi/rot) against nprobust's lpbwselect; the estimator's bandwidth= hook."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import NadarayaWatson
from nadaraya.bandwidth.plugin import plugin_bandwidth

nprobust = pytest.importorskip("nprobust")

N = 120


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    x = rng.uniform(0, 1, N)
    y = np.sin(5 * x) + rng.normal(0, 0.3, N)
    return x, y, rng.integers(0, 12, N)


def _ref(x, y, method, **kw):
    with np.errstate(all="ignore"):
        return nprobust.lpbwselect(y, x, bwselect=method, **kw).bws[0]


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_imse_dpi_equals_lpbwselect(data, degree):
    x, y, _ = data
    _, h, b = _ref(x, y, "imse-dpi", p=degree)
    got = plugin_bandwidth(x, y, "imse-dpi", degree=degree)
    assert got.h == pytest.approx(h, rel=1e-6)
    assert got.b == pytest.approx(b, rel=1e-6)
    if degree == 1:  # lpbwselect's defaults, through the estimator
        model = NadarayaWatson(bandwidth="imse-dpi", degree=1, kernel="epanechnikov").fit(x[:, None], y)
        assert model.bandwidth_[0] == pytest.approx(h, rel=1e-6)
        assert model.bias_bandwidth_ == pytest.approx(b, rel=1e-6)


def test_the_estimators_hook(data):
    x, y, _ = data
    refit = NadarayaWatson(bandwidth=0.2).fit(x[:, None], y)
    assert not hasattr(refit, "bias_bandwidth_")
    at_median = NadarayaWatson(bandwidth="mse-dpi", degree=2).fit(x[:, None], y)
    h, b = plugin_bandwidth(x, y, "mse-dpi", degree=2, at=float(np.median(x)), kernel="gaussian")
    assert (at_median.bandwidth_[0], at_median.bias_bandwidth_) == (h, b)


@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("method", ["mse-dpi", "mse-rot"])
def test_pointwise_methods(data, method, degree):
    x, y, _ = data
    at = np.array([0.1, 0.5, 0.93])
    ref = np.array([_ref(x, y, method, p=degree, eval=np.array([c]))[1:] for c in at])
    got = plugin_bandwidth(x, y, method, degree=degree, at=at)
    np.testing.assert_allclose(got.h, ref[:, 0], rtol=1e-6)
    np.testing.assert_allclose(got.b, ref[:, 1], rtol=1e-6)
    one = plugin_bandwidth(x, y, method, degree=degree, at=0.5)
    assert isinstance(one.h, float) and one.h == pytest.approx(ref[1, 0], rel=1e-12)


@pytest.mark.parametrize("degree", [1])
def test_imse_rot(data, degree):
    x, y, _ = data
    _, h, b = _ref(x, y, "imse-rot", p=degree)
    got = plugin_bandwidth(x, y, "imse-rot", degree=degree)
    assert (got.h, got.b) == (pytest.approx(h, rel=1e-6), pytest.approx(b, rel=1e-6))


def test_variances_clusters_and_kernels(data):
    x, y, groups = data
    _, h, b = _ref(x, y, "imse-dpi", vce="hc3", cluster=groups)
    got = plugin_bandwidth(x, y, "imse-dpi", variance="hc3", clusters=groups)
    assert (got.h, got.b) == (pytest.approx(h, rel=1e-6), pytest.approx(b, rel=1e-6))
    _, h, b = _ref(x, y, "mse-dpi", kernel="gau", vce="hc1", eval=np.array([0.7]))
    got = plugin_bandwidth(x, y, "mse-dpi", kernel="gaussian", variance="hc1", at=0.7)
    assert (got.h, got.b) == (pytest.approx(h, rel=1e-6), pytest.approx(b, rel=1e-6))
    for kernel, short in (("triangular", "tri"), ("boxcar", "uni")):
        _, h, b = _ref(x, y, "mse-dpi", kernel=short, eval=np.array([0.4]))
        got = plugin_bandwidth(x, y, "mse-dpi", kernel=kernel, at=0.4)
        assert (got.h, got.b) == (pytest.approx(h, rel=1e-6), pytest.approx(b, rel=1e-6))


def test_bad_input(data):
    x, y, _ = data
    with pytest.raises(ValueError, match="method='imse'"):
        plugin_bandwidth(x, y, "imse")
    with pytest.raises(ValueError, match="degree=3"):
        plugin_bandwidth(x, y, degree=3)
    with pytest.raises(ValueError, match="kernel='cosine'"):
        plugin_bandwidth(x, y, kernel="cosine")
    with pytest.raises(ValueError, match="variance='homoscedastic'"):
        plugin_bandwidth(x, y, variance="homoscedastic")
    with pytest.raises(ValueError, match="one feature"):
        plugin_bandwidth(np.c_[x, x], y)
    with pytest.raises(ValueError, match="y has shape"):
        plugin_bandwidth(x, y[:-1])
    with pytest.raises(ValueError, match="finite"):
        plugin_bandwidth(np.r_[np.nan, x[1:]], y)
    with pytest.raises(ValueError, match="distinct x"):
        plugin_bandwidth(x[:8], y[:8])
    with pytest.raises(ValueError, match="clusters has shape"):
        plugin_bandwidth(x, y, clusters=np.zeros(3))
    with pytest.raises(ValueError, match="one continuous feature"):
        NadarayaWatson(bandwidth="mse-dpi").fit(np.c_[x, x], y)
    with pytest.raises(ValueError, match="sample_weight"):
        NadarayaWatson(bandwidth="imse-rot").fit(x[:, None], y, sample_weight=np.ones(N))
    with pytest.raises(ValueError, match="did you mean 'imse-dpi'"):
        NadarayaWatson(bandwidth="imse-dp").fit(x[:, None], y)
