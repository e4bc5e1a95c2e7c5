"""nprobust's variances (hc0-hc3, nn, clusters) on predict(return_std=True) and confidence_band:
against nprobust's lprobust and against the sandwich formulas written out plainly here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nadaraya import NadarayaWatson

nprobust = pytest.importorskip("nprobust")

N = 90
RULES = ("hc0", "hc1", "hc2", "hc3", "nn")
KERNELS = {"epanechnikov": "epa", "gaussian": "gau", "triangular": "tri", "boxcar": "uni"}
EVAL = np.array([0.05, 0.3, 0.52, 0.9])


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    x = np.round(rng.uniform(0, 1, N), 2)  # rounded: ties in x, which the nn residuals match as groups
    y = np.sin(4 * x) + rng.normal(0, 0.2 + 0.4 * x, N)
    return x, y, rng.integers(0, 9, N)


def _lprobust(x, y, h, b, p, kernel, vce, clusters):
    with np.errstate(all="ignore"):
        return nprobust.lprobust(
            y, x, eval=EVAL, h=h, b=b, p=p, kernel=KERNELS[kernel], vce=vce, cluster=clusters, bwcheck=None
        ).Estimate


def _plain_se(x, y, c, h, p, kernel, rule, clusters=None):
    """The sandwich standard error of the degree-p fit at c, every step written out."""
    K = {
        "epanechnikov": lambda u: np.where(np.abs(u) <= 1, 0.75 * (1 - u**2), 0.0),
        "gaussian": lambda u: np.exp(-(u**2) / 2),
    }[kernel]
    w_all = K((x - c) / h)
    keep = w_all > 0
    xs, ys, w = x[keep], y[keep], w_all[keep]
    n = xs.size
    Xd = np.column_stack([(xs - c) ** j for j in range(p + 1)])
    A = Xd.T @ (w[:, None] * Xd)
    Ainv = np.linalg.inv(A)
    beta = Ainv @ (Xd.T @ (w * ys))
    e = ys - Xd @ beta
    hii = np.array([w[i] * Xd[i] @ Ainv @ Xd[i] for i in range(n)])
    if rule == "hc0":
        r = e
    elif rule == "hc1":
        r = e * math.sqrt(n / (n - p - 1))
    elif rule == "hc2":
        r = e / np.sqrt(1 - hii)
    elif rule == "hc3":
        r = e / (1 - hii)
    else:  # nearest neighbours: every point within the distance of the 3rd nearest other point
        r = np.zeros(n)
        for i in range(n):
            dist = np.abs(xs - xs[i])
            others = np.delete(np.arange(n), i)
            dstar = np.sort(dist[others])[min(3, n - 1) - 1]
            J = others[dist[others] <= dstar]
            r[i] = math.sqrt(J.size / (J.size + 1)) * (ys[i] - ys[J].mean())
    S = (w * r)[:, None] * Xd
    if clusters is None:
        meat = S.T @ S
    else:
        g = clusters[keep]
        labels = np.unique(g)
        meat = sum(np.outer(S[g == k].sum(0), S[g == k].sum(0)) for k in labels)
        meat = meat * (n - 1) / (n - p - 1) * len(labels) / (len(labels) - 1)
    return math.sqrt((Ainv @ meat @ Ainv)[0, 0])


@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
@pytest.mark.parametrize("degree", [0, 1, 2])
@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("clustered", [False, True])
def test_predict_std_equals_nprobust_and_the_plain_sandwich(data, kernel, degree, rule, clustered):
    x, y, groups = data
    cl = groups if clustered else None
    h = 0.3
    model = NadarayaWatson(bandwidth=h, degree=degree, kernel=kernel).fit(x[:, None], y)
    mean, std = model.predict(EVAL[:, None], return_std=True, variance=rule, clusters=cl)
    ref = _lprobust(x, y, h, h, degree, kernel, rule, cl)
    np.testing.assert_allclose(mean, ref[:, 4], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(std, ref[:, 6], rtol=1e-8)
    plain = [_plain_se(x, y, c, h, degree, kernel, rule, cl) for c in EVAL]
    np.testing.assert_allclose(std, plain, rtol=1e-8)
    band = model.confidence_band(EVAL[:, None], variance=rule, clusters=cl, level=0.9)
    np.testing.assert_allclose(band.se, std, rtol=1e-12)
    np.testing.assert_array_equal(band.center, band.estimate)
    z = 1.6448536269514722
    np.testing.assert_allclose(band.upper - band.lower, 2 * z * std, rtol=1e-10)


@pytest.mark.parametrize("kernel", ["triangular", "boxcar"])
def test_other_nprobust_kernels(data, kernel):
    x, y, groups = data
    model = NadarayaWatson(bandwidth=0.35, degree=1, kernel=kernel).fit(x[:, None], y)
    for rule in ("hc1", "nn"):
        _, std = model.predict(EVAL[:, None], return_std=True, variance=rule, clusters=groups)
        np.testing.assert_allclose(std, _lprobust(x, y, 0.35, 0.35, 1, kernel, rule, groups)[:, 6], rtol=1e-8)


def test_clusters_follow_the_rows_given_to_fit(data):
    """fit sorts its rows; the labels are read in the order given."""
    x, y, groups = data
    perm = np.random.default_rng(1).permutation(N)
    a = NadarayaWatson(bandwidth=0.3, degree=1).fit(x[:, None], y)
    b = NadarayaWatson(bandwidth=0.3, degree=1).fit(x[perm, None], y[perm])
    sa = a.predict(EVAL[:, None], return_std=True, variance="hc0", clusters=groups)[1]
    sb = b.predict(EVAL[:, None], return_std=True, variance="hc0", clusters=groups[perm])[1]
    np.testing.assert_allclose(sa, sb, rtol=1e-12)
    labels = np.array([f"g{k}" for k in groups], dtype=object)
    np.testing.assert_allclose(
        a.predict(EVAL[:, None], return_std=True, variance="hc0", clusters=labels)[1], sa
    )


def test_each_output_alone(data):
    x, y, _ = data
    Y = np.column_stack([y, 3 * y**2])
    both = NadarayaWatson(bandwidth=0.3, degree=1).fit(x[:, None], Y)
    _, std = both.predict(EVAL[:, None], return_std=True, variance="hc3")
    for k in range(2):
        one = NadarayaWatson(bandwidth=0.3, degree=1).fit(x[:, None], Y[:, k])
        np.testing.assert_allclose(std[:, k], one.predict(EVAL[:, None], return_std=True, variance="hc3")[1])


def test_band_fields_for_the_other_methods(data):
    x, y, _ = data
    model = NadarayaWatson(bandwidth=0.3, degree=1).fit(x[:, None], y)
    est, _, _ = band = model.confidence_band(EVAL[:, None], variance="homoscedastic")
    _, std = model.predict(EVAL[:, None], return_std=True, variance="homoscedastic")
    np.testing.assert_array_equal(band.center, est)
    np.testing.assert_allclose(band.se, std)
    boot = model.confidence_band(EVAL[:, None], method="bootstrap", n_boot=99, random_state=0)
    assert boot.se.shape == est.shape and np.all(boot.se > 0)
    old = model.confidence_band(EVAL[:, None], method="rbc", variance="homoscedastic")
    np.testing.assert_allclose((old.lower + old.upper) / 2, old.center)


def test_bad_input(data):
    x, y, groups = data
    model = NadarayaWatson(bandwidth=0.3, degree=1).fit(x[:, None], y)
    q = EVAL[:, None]
    with pytest.raises(ValueError, match="variance='hc4'"):
        model.predict(q, return_std=True, variance="hc4")
    with pytest.raises(ValueError, match="clusters= needs one label per training row"):
        model.predict(q, return_std=True, variance="hc0", clusters=groups[:-1])
    with pytest.raises(ValueError, match="clusters= has NaN"):
        model.predict(q, return_std=True, variance="hc0", clusters=np.r_[np.nan, groups[1:].astype(float)])
    with pytest.raises(ValueError, match="variance='heteroscedastic' has no residuals"):
        model.predict(q, return_std=True, clusters=groups)
    with pytest.raises(ValueError, match="kind='simultaneous'"):
        model.confidence_band(q, variance="nn", kind="simultaneous")
    with pytest.raises(ValueError, match="method='bootstrap'"):
        model.confidence_band(q, variance="nn", method="bootstrap")
    with pytest.raises(ValueError, match="gradient"):
        model.gradient(q, return_std=True, variance="hc0")
    two = NadarayaWatson(bandwidth=0.3).fit(np.column_stack([x, x**2]), y)
    with pytest.raises(ValueError, match="one continuous feature"):
        two.predict(np.c_[EVAL, EVAL], return_std=True, variance="hc1")
    weighted = NadarayaWatson(bandwidth=0.3).fit(x[:, None], y, sample_weight=np.ones(N))
    with pytest.raises(ValueError, match="sample_weight"):
        weighted.predict(q, return_std=True, variance="nn")
