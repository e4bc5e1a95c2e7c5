"""Robust bias correction with a bias bandwidth of its own (rho = h / b != 1): center and se
equal nprobust's lprobust tau.bc and se.rb, for every variance and with clusters."""

from __future__ import annotations

import numpy as np
import pytest

from nadaraya import NadarayaWatson

nprobust = pytest.importorskip("nprobust")

N = 100
KERNELS = {"epanechnikov": "epa", "gaussian": "gau", "triangular": "tri", "boxcar": "uni"}
EVAL = np.array([0.02, 0.33, 0.61, 0.95])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    x = np.round(rng.uniform(0, 1, N), 2)
    y = np.cos(5 * x) + x + rng.normal(0, 0.1 + 0.3 * x, N)
    return x, y, rng.integers(0, 10, N)


def _ref(x, y, h, b, p, kernel, vce, clusters, **kw):
    with np.errstate(all="ignore"):
        return nprobust.lprobust(
            y, x, eval=EVAL, h=h, b=b, p=p, kernel=KERNELS[kernel], vce=vce, cluster=clusters, **kw
        ).Estimate


@pytest.mark.parametrize(("kernel", "h", "b"), [("epanechnikov", 0.25, 0.4), ("gaussian", 0.2, 0.15)])
@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("rule", ["hc0", "hc1", "hc2", "hc3", "nn"])
@pytest.mark.parametrize("clustered", [False, True])
def test_center_and_se_equal_lprobust(data, kernel, degree, rule, clustered, h, b):
    x, y, groups = data
    cl = groups if clustered else None
    model = NadarayaWatson(bandwidth=h, degree=degree, kernel=kernel).fit(x[:, None], y)
    band = model.confidence_band(
        EVAL[:, None], method="rbc", bias_bandwidth=b, variance=rule, clusters=cl, level=0.95
    )
    ref = _ref(x, y, h, b, degree, kernel, rule, cl, bwcheck=None)
    np.testing.assert_allclose(band.center, ref[:, 5], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(band.se, ref[:, 7], rtol=1e-8)
    np.testing.assert_allclose(band.estimate, ref[:, 4], rtol=1e-10, atol=1e-12)
    z = 1.959963984540054
    np.testing.assert_allclose(band.lower, band.center - z * band.se, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(band.upper, band.center + z * band.se, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel", ["triangular", "boxcar"])
def test_other_kernels(data, kernel):
    x, y, groups = data
    model = NadarayaWatson(bandwidth=0.3, degree=1, kernel=kernel).fit(x[:, None], y)
    band = model.confidence_band(
        EVAL[:, None], method="rbc", bias_bandwidth=0.5, variance="hc2", clusters=groups
    )
    ref = _ref(x, y, 0.3, 0.5, 1, kernel, "hc2", groups, bwcheck=None)
    np.testing.assert_allclose(band.center, ref[:, 5], rtol=1e-8)
    np.testing.assert_allclose(band.se, ref[:, 7], rtol=1e-8)


def test_quadratic_truth_is_corrected_exactly():
    """Degree 1 with a quadratic mean: the bias estimate (degree 2) is exact, so center is the truth."""
    x = np.linspace(0, 1, 40)
    model = NadarayaWatson(bandwidth=0.3, degree=1).fit(x[:, None], 1 + 2 * x**2)
    band = model.confidence_band([[0.2], [0.5]], method="rbc", bias_bandwidth=0.45, variance="hc0")
    np.testing.assert_allclose(band.center, 1 + 2 * np.array([0.2, 0.5]) ** 2, rtol=1e-12)
    assert np.all(np.abs(band.estimate - band.center) > 1e-3)


def test_auto_bias_bandwidth_is_lprobust_with_imse_dpi(data):
    """bandwidth='imse-dpi' with bias_bandwidth='auto' is lprobust at lpbwselect's imse-dpi h and b
    (with lprobust's defaults, bwcheck included: it changes nothing at these points)."""
    x, y, _ = data
    ev = np.array([0.33, 0.61])
    model = NadarayaWatson(bandwidth="imse-dpi", degree=1, kernel="epanechnikov").fit(x[:, None], y)
    band = model.confidence_band(ev[:, None], method="rbc", bias_bandwidth="auto", variance="nn")
    with np.errstate(all="ignore"):
        _, h, b = nprobust.lpbwselect(y, x, bwselect="imse-dpi").bws[0]
        ref = nprobust.lprobust(y, x, eval=ev, h=h, b=b).Estimate
    np.testing.assert_array_equal(ref[:, 1], h)
    np.testing.assert_allclose(model.bandwidth_[0], ref[:, 1], rtol=1e-6)
    assert model.bias_bandwidth_ == pytest.approx(ref[0, 2], rel=1e-6)
    np.testing.assert_allclose(band.center, ref[:, 5], rtol=1e-7)
    np.testing.assert_allclose(band.se, ref[:, 7], rtol=1e-7)


def test_noise_rules_take_a_bias_bandwidth_too(data):
    """variance='homoscedastic' with bias_bandwidth: the same centre; se scales with y."""
    x, y, _ = data
    model = NadarayaWatson(bandwidth=0.3, degree=1, kernel="epanechnikov").fit(x[:, None], y)
    band = model.confidence_band(EVAL[:, None], method="rbc", bias_bandwidth=0.45, variance="homoscedastic")
    ref = _ref(x, y, 0.3, 0.45, 1, "epanechnikov", "hc0", None, bwcheck=None)
    np.testing.assert_allclose(band.center, ref[:, 5], rtol=1e-8)
    assert np.all(np.isfinite(band.se)) and np.all(band.se > 0)
    three = NadarayaWatson(bandwidth=0.3, degree=1, kernel="epanechnikov").fit(x[:, None], 3 * y)
    again = three.confidence_band(EVAL[:, None], method="rbc", bias_bandwidth=0.45, variance="homoscedastic")
    np.testing.assert_allclose(again.se, 3 * band.se, rtol=1e-10)


def test_bad_bias_bandwidth(data):
    x, y, _ = data
    model = NadarayaWatson(bandwidth=0.3, degree=1).fit(x[:, None], y)
    q = EVAL[:, None]
    for bad in (-1.0, 0.0, np.inf):
        with pytest.raises(ValueError, match="bias_bandwidth="):
            model.confidence_band(q, method="rbc", bias_bandwidth=bad)
    with pytest.raises(ValueError, match="bias_bandwidth='big'"):
        model.confidence_band(q, method="rbc", bias_bandwidth="big")
    with pytest.raises(TypeError, match="bias_bandwidth="):
        model.confidence_band(q, method="rbc", bias_bandwidth=[1, 2])
    with pytest.raises(ValueError, match="method='asymptotic' has no bias correction"):
        model.confidence_band(q, bias_bandwidth=0.4)


def test_auto_on_a_numeric_bandwidth_takes_imse_dpis_b(data):
    from nadaraya.bandwidth.plugin import plugin_bandwidth

    x, y, groups = data
    model = NadarayaWatson(bandwidth=0.3, degree=1, kernel="epanechnikov").fit(x[:, None], y)
    b = plugin_bandwidth(x, y, "imse-dpi", variance="hc1", clusters=groups).b
    q = EVAL[:, None]
    auto = model.confidence_band(q, method="rbc", bias_bandwidth="auto", variance="hc1", clusters=groups)
    given = model.confidence_band(q, method="rbc", bias_bandwidth=b, variance="hc1", clusters=groups)
    np.testing.assert_array_equal(auto.center, given.center)
    np.testing.assert_array_equal(auto.se, given.se)
