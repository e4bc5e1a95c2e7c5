"""Inference under hostile input (issue 28, items 4, 6 and 8).

- Scale: every inference result is equivariant in ``y``: the standard errors, every band and the
  significance statistics scale with ``y``, the p-values do not, at any finite scale.
- Fallbacks: where a prediction is not the query's own local fit (the far limit, an ``empty=``
  fill, a lower degree where the system is singular, a category never seen in training), its
  standard error is that of the estimate returned, computed here plainly from the training
  data, and every band is centred on it.
- Unseen categories at ``lambda = 0`` without continuous columns: ``"nearest"`` and ``"mean"``
  predict, and the warning says what happened.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import norm

import nadaraya
import nadaraya.inference.training as _training
from nadaraya import NadarayaWatson

BANDS = [(m, k) for m in ("asymptotic", "bootstrap", "rbc") for k in ("pointwise", "simultaneous")]


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 5, n)
    X = np.column_stack([x, rng.uniform(0, 1, n)])
    y = np.sin(x) + rng.normal(0, 0.3, n) * (0.5 + x / 5)
    return X, y


def _results(X, y, degree):
    """Standard errors, every band and the significance test of one model, as flat arrays."""
    model = NadarayaWatson(bandwidth=[0.6, 0.4], degree=degree).fit(X, y)
    Q = np.array([[0.5, 0.2], [2.5, 0.5], [4.5, 0.9], [300.0, 0.5]])  # the last one far away
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.SingularFitWarning)
        out = {}
        for variance in ("heteroscedastic", "homoscedastic"):
            mean, std = model.predict(Q, return_std=True, variance=variance)
            out[f"mean {variance}"], out[f"std {variance}"] = mean, std
        for method, kind in BANDS:
            band = model.confidence_band(Q, method=method, kind=kind, n_boot=199, random_state=3)
            out[f"{method} {kind}"] = np.concatenate([band.estimate, band.lower, band.upper])
        test = model.significance_test(X, y, n_boot=99, random_state=5)
    return out, test


@pytest.mark.parametrize("degree", [0, 1])
def test_inference_is_equivariant_in_the_scale_of_y(degree):
    """At s from 1e-300 to 1e300: std and every band are s times those at s = 1, the p-values
    equal (a seeded bootstrap), the statistics s^2 times (where float64 holds them)."""
    X, y = _data()
    base, base_test = _results(X, y, degree)
    assert all(np.isfinite(v).all() and np.ptp(v) > 0 for v in base.values())
    assert np.isfinite(base_test.statistic).all() and (base_test.statistic > 0).all()
    for s in (1e-300, 1e-200, 1e-44, 1e40, 1e154, 1e160, 1e300):
        got, test = _results(X, y * s, degree)
        for name, value in got.items():
            # the bootstrap's replicates are single precision: about 1e-7 of the largest residual
            rtol = 1e-5 if name.split()[1] == "simultaneous" or name.startswith("bootstrap") else 1e-9
            np.testing.assert_allclose(value / s, base[name], rtol=rtol, err_msg=f"{name} at s={s:g}")
        np.testing.assert_array_equal(test.p_value, base_test.p_value, err_msg=f"p at s={s:g}")
        with np.errstate(over="ignore", under="ignore"):
            want = base_test.statistic * s * s
        if np.isfinite(want).all() and (want > 1e-290).all():
            np.testing.assert_allclose(test.statistic, want, rtol=1e-8)


def test_each_output_is_scaled_alone():
    """Two outputs 1e600 apart in scale: each one's std and bands are its own scale times the
    unit-scale ones (one common factor would take one of them to 0)."""
    X, y = _data(60, seed=3)
    Q = np.array([[1.0], [2.5], [4.0]])
    base = NadarayaWatson(bandwidth=0.5).fit(X[:, :1], y)
    both = NadarayaWatson(bandwidth=0.5).fit(X[:, :1], np.column_stack([y * 1e300, y * 1e-300]))
    _, want = base.predict(Q, return_std=True)
    _, got = both.predict(Q, return_std=True)
    np.testing.assert_allclose(got / [1e300, 1e-300], np.column_stack([want, want]), rtol=1e-9)
    for method in ("asymptotic", "bootstrap"):
        b0 = base.confidence_band(Q, method=method, n_boot=99, random_state=1)
        b2 = both.confidence_band(Q, method=method, n_boot=99, random_state=1)
        for lo, lo2 in ((b0.lower, b2.lower), (b0.upper, b2.upper)):
            np.testing.assert_allclose(lo2 / [1e300, 1e-300], np.column_stack([lo, lo]), rtol=1e-5)


def test_the_bootstrap_of_tiny_and_huge_responses_is_finite_and_not_degenerate():
    """The issue's cases: NaN bands at 1e40, width 0 at 1e-44, NaN std and p = 1 at 1e154 and
    1e-200, a ValueError at 1e160."""
    X, y = _data(60, seed=1)
    for s in (1e-200, 1e-44, 1e40, 1e154, 1e160):
        model = NadarayaWatson(bandwidth=0.5).fit(X[:, :1], y * s)
        band = model.confidence_band([[1.0], [3.0]], method="bootstrap", n_boot=99, random_state=0)
        width = band.upper - band.lower
        assert np.isfinite(width).all() and (width > 0).all(), s
        _, std = model.predict([[1.0]], return_std=True)
        assert np.isfinite(std).all() and (std > 0).all(), s
        p = model.significance_test(X[:, :1], y * s, n_boot=99, random_state=0).p_value
        assert p[0] < 0.05, s


# --- fallbacks: the standard error of the estimate returned ------------------------------------


def _fitted_data(model, variance="heteroscedastic"):
    """The training rows as the model holds them (sorted by the first feature), their sample
    weights (ones without) and the noise variance sigma^2 at each."""
    X, y = np.asarray(model.X_fit_), np.asarray(model.y_fit_)
    s = np.ones(len(y)) if model.sample_weight_ is None else np.asarray(model.sample_weight_, float)
    return X, y, s, _training.noise_variance(model, variance)[:, 0]


def _check_bands(model, Q, mean, std, variance="heteroscedastic"):
    """Every band is centred on the prediction at these rows (the fallbacks answer the same at
    degree + 1), the asymptotic one is mean -+ z std, none is NaN where std is finite."""
    z = norm.ppf(0.975)
    np.testing.assert_allclose(model.predict(Q), mean, rtol=1e-13)
    for method, kind in BANDS:
        band = model.confidence_band(Q, method=method, kind=kind, n_boot=99, random_state=0,
                                     variance=variance)
        np.testing.assert_array_equal(band.estimate, mean)
        assert np.isfinite(band.lower).all() and np.isfinite(band.upper).all(), (method, kind)
        assert (band.lower <= mean).all() and (mean <= band.upper).all(), (method, kind)
        if method != "bootstrap":
            np.testing.assert_allclose((band.lower + band.upper) / 2, mean, rtol=1e-12, atol=1e-12)
        if (method, kind) == ("asymptotic", "pointwise"):
            np.testing.assert_allclose(band.upper - mean, z * std, rtol=1e-12)


@pytest.mark.parametrize("degree", [0, 1, 2])
def test_far_query_gaussian_se_is_the_nearest_observations(degree):
    """Far from every key the Gaussian's weights are one-hot at the nearest key (the far limit
    predict returns at every degree): the SE is that observation's sigma."""
    X, y = _data(50, seed=2)
    model = NadarayaWatson(bandwidth=0.2, degree=degree).fit(X[:, :1], y)
    Q = np.array([[60.0], [-40.0]])
    mean, std = model.predict(Q, return_std=True)
    Xf, yf, _, sig2 = _fitted_data(model)
    near = [int(np.argmax(Xf[:, 0])), int(np.argmin(Xf[:, 0]))]
    np.testing.assert_array_equal(mean, yf[near])
    np.testing.assert_allclose(std, np.sqrt(sig2[near]), rtol=1e-12)
    _check_bands(model, Q, mean, std)
    # the bootstrap's replicates at a one-hot row are e_j v: the band's ends are mean - e_j v
    tr = _training.training(model)
    e = (tr.Y[:, 0] - tr.fits[:, 0]) * _training.residual_scale(model)
    band = model.confidence_band(Q, method="bootstrap", n_boot=99, random_state=0)
    p = 65536 * (np.sqrt(5.0) + 1) / (2 * np.sqrt(5.0))
    p = round(p) / 65536
    v = np.array([-np.sqrt((1 - p) / p), np.sqrt(p / (1 - p))])
    for i, j in enumerate(near):
        ends = np.sort(mean[i] - e[j] * v)
        np.testing.assert_allclose([band.lower[i], band.upper[i]], ends, rtol=1e-6)


@pytest.mark.parametrize("degree", [0, 1])
def test_far_query_laplacian_se_is_that_of_the_far_limit(degree):
    """The Laplacian's far limit is not one-hot: right of every key its weights tend to
    ``exp((x_i - max x) / h)``, normalised; the SE is that average's."""
    X, y = _data(40, seed=12)
    h = 0.7
    model = NadarayaWatson(kernel="laplacian", bandwidth=h, degree=degree).fit(X[:, :1], y)
    mean, std = model.predict([[1e6]], return_std=True)
    Xf, yf, _, sig2 = _fitted_data(model)
    a = np.exp((Xf[:, 0] - Xf[:, 0].max()) / h)
    a /= a.sum()
    np.testing.assert_allclose(mean, [a @ yf], rtol=1e-10)
    np.testing.assert_allclose(std, [np.sqrt(a**2 @ sig2)], rtol=1e-10)
    _check_bands(model, np.array([[1e6]]), mean, std)


@pytest.mark.parametrize("degree", [0, 1])
def test_empty_nearest_se_is_the_nearest_observations_with_ties_and_weights(degree):
    """empty="nearest" with a compact kernel: one nearest key -> its sigma / sqrt(s); two
    equally near keys -> the SE of their sample-weighted mean."""
    x = np.array([0.0, 0.125, 0.25, 0.375, 1.0, 1.125, 1.25, 1.5, 3.0, 3.125, 3.25, 3.5])  # sorted
    rng = np.random.default_rng(4)
    y = np.cos(x) + rng.normal(0, 0.2, x.size)
    s = rng.uniform(0.5, 3.0, x.size)
    model = NadarayaWatson(kernel="epanechnikov", bandwidth=0.25, degree=degree)
    model.fit(x[:, None], y, sample_weight=s)
    Q = np.array([[2.25], [5.0], [-4.0]])  # 2.25: midway between 1.5 and 3.0, exactly
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "nearest" fills silently, as documented
        mean, std = model.predict(Q, return_std=True)
    _, _, _, sig2 = _fitted_data(model)
    pair = np.array([7, 8])
    a = s[pair] / s[pair].sum()
    np.testing.assert_allclose(mean, [a @ y[pair], y[11], y[0]], rtol=1e-12)
    want = [np.sqrt(a**2 @ (sig2[pair] / s[pair])), np.sqrt(sig2[11] / s[11]), np.sqrt(sig2[0] / s[0])]
    np.testing.assert_allclose(std, want, rtol=1e-10)
    _check_bands(model, Q, mean, std)


def test_empty_mean_se_is_the_se_of_the_weighted_mean():
    x = np.array([0.0, 0.1, 0.2, 0.3, 1.0, 1.1, 1.2, 1.3])  # sorted
    rng = np.random.default_rng(5)
    y = x + rng.normal(0, 0.2, x.size)
    s = rng.uniform(0.5, 3.0, x.size)
    model = NadarayaWatson(kernel="tricube", bandwidth=0.3, empty="mean").fit(x[:, None], y, sample_weight=s)
    Q = np.array([[0.6], [9.0]])
    mean, std = model.predict(Q, return_std=True, variance="homoscedastic")
    _, _, _, sig2 = _fitted_data(model, "homoscedastic")
    np.testing.assert_allclose(mean, s @ y / s.sum(), rtol=1e-12)
    np.testing.assert_allclose(std, np.sqrt(s @ sig2) / s.sum(), rtol=1e-10)
    _check_bands(model, Q, mean, std, "homoscedastic")


def test_empty_nan_gives_nan_std_and_bands():
    x = np.linspace(0, 1, 20)
    model = NadarayaWatson(kernel="epanechnikov", bandwidth=0.2, empty="nan").fit(x[:, None], np.sin(x))
    with pytest.warns(nadaraya.EmptyWindowWarning):
        mean, std = model.predict([[0.5], [4.0]], return_std=True)
    assert np.isfinite([mean[0], std[0]]).all() and np.isnan([mean[1], std[1]]).all()
    for method, kind in BANDS:
        with pytest.warns(nadaraya.EmptyWindowWarning):
            band = model.confidence_band([[0.5], [4.0]], method=method, kind=kind, n_boot=99, random_state=0)
        assert np.isfinite([band.lower[0], band.upper[0]]).all()
        assert np.isnan([band.lower[1], band.upper[1]]).all()


def test_singular_system_se_is_that_of_the_lower_degree_fit():
    """Degree 2 where the window holds two distinct keys: the fit is local linear on them, and
    so is its SE (the plain weighted least squares written out here)."""
    x = np.array([0.0, 0.05, 1.0, 1.1, 2.0, 2.05, 2.1, 2.2, 2.3])  # sorted
    rng = np.random.default_rng(6)
    y = x**2 + rng.normal(0, 0.1, x.size)
    model = NadarayaWatson(kernel="epanechnikov", bandwidth=0.2, degree=2).fit(x[:, None], y)
    q = 1.03
    with pytest.warns(nadaraya.SingularFitWarning):
        mean, std = model.predict([[q]], return_std=True, variance="homoscedastic")
    u = (x - q) / 0.2
    w = np.where(np.abs(u) < 1, 0.75 * (1 - u**2), 0.0)
    B = np.column_stack([np.ones_like(x), x - q])
    a = np.linalg.solve(B.T @ (w[:, None] * B), B.T * w)[0]  # the local linear effective weights
    _, _, _, sig2 = _fitted_data(model, "homoscedastic")
    np.testing.assert_allclose(mean, a @ y, rtol=1e-10)
    np.testing.assert_allclose(std, np.sqrt(a**2 @ sig2), rtol=1e-8)


def test_unseen_category_with_a_continuous_column_se_is_the_nearest_observations():
    """lambda = 0 and a category never seen: "nearest" takes the nearest key in x / h; its SE
    is that observation's, and the bands are centred on it."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 5, 40)
    c = rng.integers(0, 3, 40).astype(float)
    y = np.sin(x) + c + rng.normal(0, 0.2, 40)
    X = np.column_stack([x, c])
    model = NadarayaWatson(bandwidth=[0.5, 0.0], var_types="cu", degree=1).fit(X, y)
    Q = np.array([[2.0, 9.0]])
    with pytest.warns(nadaraya.EmptyWindowWarning, match="category"):
        mean, std = model.predict(Q, return_std=True)
    Xf, yf, _, sig2 = _fitted_data(model)
    j = int(np.argmin(np.abs(Xf[:, 0] - 2.0)))
    np.testing.assert_array_equal(mean, [yf[j]])
    np.testing.assert_allclose(std, np.sqrt(sig2[[j]]), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        _check_bands(model, Q, mean, std)


# --- unseen categories without continuous columns --------------------------------------------


def _categorical(seed=8):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, 3, 60), rng.integers(0, 4, 60)]).astype(float)
    y = X[:, 0] + 0.5 * X[:, 1] + rng.normal(0, 0.3, 60)
    s = rng.uniform(0.5, 2.0, 60)
    return X, y, s


@pytest.mark.parametrize("ck", ["classic", "li-racine"])
def test_unseen_category_nearest_is_the_nearest_keys_under_the_categorical_distance(ck):
    """Columns "uo" at lambda = 0, query (unseen, 2): the nearest keys are those with the
    ordered column equal to 2 (distance 1: the unordered mismatch); their weighted mean,
    and the SE of that mean."""
    X, y, s = _categorical()
    model = NadarayaWatson(bandwidth=[0.0, 0.0], var_types="uo", categorical_kernel=ck)
    model.fit(X, y, sample_weight=s)
    with pytest.warns(nadaraya.EmptyWindowWarning) as rec:
        mean, std = model.predict([[7.0, 2.0], [7.0, 9.0]], return_std=True)
    text = " ".join(str(r.message) for r in rec)
    assert "category" in text and "leave-one-out" not in text
    X, y, s, sig2 = _fitted_data(model)
    tie = X[:, 1] == 2
    a = s[tie] / s[tie].sum()
    # (7, 9): every key differs in column 0; column 1's nearest is 3, at distance 6
    far = X[:, 1] == 3
    b = s[far] / s[far].sum()
    np.testing.assert_allclose(mean, [a @ y[tie], b @ y[far]], rtol=1e-12)
    want = [np.sqrt(a**2 @ (sig2[tie] / s[tie])), np.sqrt(b**2 @ (sig2[far] / s[far]))]
    np.testing.assert_allclose(std, want, rtol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        np.testing.assert_array_equal(model.predict([[7.0, 2.0]]), mean[:1])


def test_unseen_category_mean_is_the_weighted_mean_of_y():
    X, y, s = _categorical(9)
    model = NadarayaWatson(bandwidth=[0.0, 0.0], var_types="uu", empty="mean").fit(X, y, sample_weight=s)
    with pytest.warns(nadaraya.EmptyWindowWarning, match="never|no training key") as rec:
        mean, std = model.predict([[5.0, 1.0], [0.0, 1.0]], return_std=True, variance="homoscedastic")
    assert all("leave-one-out" not in str(r.message) for r in rec)
    X, y, s, sig2 = _fitted_data(model, "homoscedastic")
    np.testing.assert_allclose(mean[0], s @ y / s.sum(), rtol=1e-12)
    np.testing.assert_allclose(std[0], np.sqrt(s @ sig2) / s.sum(), rtol=1e-10)
    same = (X[:, 0] == 0) & (X[:, 1] == 1)  # a seen combination: its own cell
    np.testing.assert_allclose(mean[1], s[same] @ y[same] / s[same].sum(), rtol=1e-12)


def test_unseen_category_nan_and_raise_say_what_happened():
    X, y, _ = _categorical(10)
    model = NadarayaWatson(bandwidth=[0.0, 0.0], var_types="uu", empty="nan").fit(X, y)
    with pytest.warns(nadaraya.EmptyWindowWarning, match="category") as rec:
        got = model.predict([[5.0, 1.0]])
    assert np.isnan(got).all() and all("leave-one-out" not in str(r.message) for r in rec)
    model = NadarayaWatson(bandwidth=[0.0, 0.0], var_types="uu", empty="raise").fit(X, y)
    with pytest.raises(ValueError, match="category"):
        model.predict([[5.0, 1.0]])


@pytest.mark.parametrize("vt", ["uo", "uu", "ou"])
@pytest.mark.parametrize("empty", ["nearest", "mean", "nan"])
def test_unseen_category_fills_on_dask_match_numpy(vt, empty):
    """The Dask pool fills unseen categories as the single-machine pool does (key chunks
    that split the tied nearest keys included)."""
    da = pytest.importorskip("dask.array")
    X, y, s = _categorical(11)
    Q = np.array([[7.0, 2.0], [7.0, 9.0], [1.0, 1.0], [2.0, 7.0]])
    kw = dict(bandwidth=[0.0, 0.0], var_types=vt, empty=empty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nadaraya.EmptyWindowWarning)
        want = nadaraya.pool(Q, X, y, sample_weight=s, **kw)
    got = nadaraya.pool(da.from_array(Q, chunks=3), da.from_array(X, chunks=17), da.from_array(y, chunks=17),
                        sample_weight=da.from_array(s, chunks=17), **kw).compute()
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)
    assert np.isnan(want).any() == (empty == "nan")
