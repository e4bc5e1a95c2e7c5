"""ConditionalDensity's CDF (every kernel's exact CDF), quantiles, intervals, weights and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad

from nadaraya import ConditionalDensity, kernels
from nadaraya.density._cdf import kernel_cdf
from nadaraya.density._quantile import bracket, invert

DENSITY_KERNELS = [k for k in kernels.names() if k != "constant"]


@pytest.mark.parametrize("name", DENSITY_KERNELS)
def test_kernel_cdf_is_the_integral_of_the_profile(name: str) -> None:
    k = kernels.get(name)
    left = -1.0 if k.compact else -np.inf
    for u in np.linspace(-1.25, 1.25, 21):
        want = (
            0.0
            if u <= left
            else quad(
                lambda t: float(k(t)),
                left,
                u,
                points=[0.0, 0.5, -0.5] if k.compact else None,
                epsabs=1e-14,
                epsrel=1e-13,
                limit=200,
            )[0]
        )
        assert abs(float(kernel_cdf(name, u)) - want) <= 5e-14
    assert kernel_cdf(name, [-np.inf, np.inf]).tolist() == [0.0, 1.0]


def test_constant_kernel_has_no_density() -> None:
    with pytest.raises(ValueError, match="not integrable"):
        kernel_cdf("constant", 0.0)
    with pytest.raises(ValueError, match=r"'kernel' parameter of ConditionalDensity .* Got 'constant'"):
        ConditionalDensity(kernel="constant", bandwidth=1.0).fit([0.0, 1.0], [0.0, 1.0])


def _hetero(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    return x, np.sin(2 * np.pi * x) + (0.1 + 0.6 * x) * rng.standard_normal(n)


@pytest.mark.parametrize("name", ["gaussian", "epanechnikov", "tricube", "laplacian", "logistic", "parzen"])
def test_cdf_integrates_pdf_and_quantile_inverts_cdf(name: str) -> None:
    x, y = _hetero(120, 0)
    cd = ConditionalDensity(kernel=name, bandwidth=[0.15, 0.2]).fit(x, y)
    qx = np.array([0.1, 0.5, 0.93])
    a, b = -0.7, 0.4
    # f(. | x) is smooth between the points Y_i + h {-1, -1/2, 0, 1/2, 1} (the kernels' kinks):
    # 8-point Gauss-Legendre on each piece integrates it exactly (polynomial pieces) or nearly
    cuts = np.unique(np.clip(np.concatenate([y + 0.2 * c for c in (-1, -0.5, 0, 0.5, 1)] + [[a, b]]), a, b))
    nodes, weights = np.polynomial.legendre.leggauss(8)
    mid, half = 0.5 * (cuts[1:] + cuts[:-1]), 0.5 * np.diff(cuts)
    t = (mid[:, None] + half[:, None] * nodes).ravel()
    wt = (half[:, None] * weights).ravel()
    for j in range(qx.size):  # F(b) - F(a) is the integral of f from a to b
        area = float(cd.pdf(np.full(t.size, qx[j]), t) @ wt)
        fa, fb = cd.cdf(qx[j : j + 1], [[a]])[0], cd.cdf(qx[j : j + 1], [[b]])[0]
        assert abs((fb - fa) - area) <= 1e-10
    alpha = np.array([0.01, 0.05, 0.5, 0.95, 0.99])
    q = cd.quantile(qx, alpha)
    assert q.shape == (3, 5) and np.all(np.diff(q, axis=1) > 0)
    scale = np.std(y)
    step = 1e-10 * np.maximum(np.abs(q), scale)
    for k, lev in enumerate(alpha):
        # the quantile is inf{y: F(y) >= alpha}, to 1e-10 of the data's scale
        assert np.all(cd.cdf(qx, q[:, k]) >= lev)
        assert np.all(cd.cdf(qx, q[:, k] - 2 * step[:, k]) < lev)


def test_quantile_of_ordered_y_is_the_first_category_reaching_alpha() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, 90)
    y = np.clip(np.round(4 * x + rng.normal(0, 0.8, 90)), 0, 4)
    cd = ConditionalDensity(bandwidth=[0.2, 0.3], dep_types="o").fit(x, y)
    qx = np.linspace(0, 1, 6)
    for lev in (0.1, 0.5, 0.9):
        q = cd.quantile(qx, lev)
        levels = np.unique(y)
        F = np.stack([cd.cdf(qx, np.full(qx.size, c)) for c in levels], axis=1)
        want = np.array([levels[np.argmax(row >= lev)] if (row >= lev).any() else levels[-1] for row in F])
        np.testing.assert_array_equal(q, want)


def test_invert_and_bracket_on_a_known_cdf() -> None:
    from scipy.special import ndtr, ndtri

    alpha = np.array([1e-12, 0.3, 0.5, 1 - 1e-6])
    f = lambda rows, y: ndtr(y)  # noqa: E731
    lo, hi, f_lo, f_hi = bracket(f, alpha, np.zeros(4), np.zeros(4), 1.0)
    assert np.all(f_lo < alpha) and np.all(f_hi >= alpha)
    q = invert(f, alpha, lo, hi)
    np.testing.assert_allclose(q, ndtri(alpha), rtol=0, atol=1e-9)
    # a flat stretch: the quantile is its left end (the infimum)
    step = lambda rows, y: np.clip(y, 0, 1) * 0.5 + 0.5 * (y >= 2)  # noqa: E731
    q = invert(step, np.array([0.5, 0.75]), np.full(2, -1.0), np.full(2, 3.0))
    np.testing.assert_allclose(q, [1.0, 2.0], atol=1e-9)


def test_ninety_percent_band_covers_and_follows_the_spread() -> None:
    x, y = _hetero(600, 11)
    cd = ConditionalDensity(bandwidth=[0.05, 0.05]).fit(x, y)
    xt, yt = _hetero(800, 12)
    band = cd.predict_interval(xt, level=0.9)
    inside = (band[:, 0] <= yt) & (yt <= band[:, 1])
    assert 0.87 <= inside.mean() <= 0.95
    low, high = xt < 0.5, xt >= 0.5
    assert 0.85 <= inside[low].mean() <= 0.97 and 0.85 <= inside[high].mean() <= 0.97
    width = cd.predict_interval([0.15, 0.85], 0.9) @ np.array([-1.0, 1.0])
    assert width[1] > 2.0 * width[0]  # noise sd 0.19 at x = 0.15 and 0.61 at 0.85


def test_integer_weights_are_repeated_rows() -> None:
    x, y = _hetero(40, 2)
    w = np.random.default_rng(3).integers(1, 4, 40)
    a = ConditionalDensity(bandwidth=[0.2, 0.3]).fit(x, y, sample_weight=w)
    b = ConditionalDensity(bandwidth=[0.2, 0.3]).fit(np.repeat(x, w), np.repeat(y, w))
    qx, qy = np.linspace(0, 1, 9), np.linspace(-1, 1, 9)
    np.testing.assert_allclose(a.pdf(qx, qy), b.pdf(qx, qy), rtol=1e-12)
    np.testing.assert_allclose(a.cdf(qx, qy), b.cdf(qx, qy), rtol=1e-12)
    np.testing.assert_allclose(a.quantile(qx, 0.3), b.quantile(qx, 0.3), rtol=0, atol=1e-9)


def test_far_queries_and_empty_windows() -> None:
    x, y = _hetero(30, 4)
    cd = ConditionalDensity(bandwidth=[0.1, 0.1]).fit(x, y)
    lp = cd.log_pdf([50.0, 0.5], [0.0, 1e3])
    assert np.all(np.isfinite(lp)) and lp[1] < -1e6
    assert np.isfinite(cd.quantile([1e3], 0.5)).all()
    ep = ConditionalDensity(kernel="epanechnikov", bandwidth=[0.1, 0.1]).fit(x, y)
    assert np.isnan(ep.cdf([5.0], [0.0])).all() and np.isnan(ep.quantile([5.0], 0.5)).all()


@pytest.mark.parametrize(
    ("kwargs", "fit_args", "match"),
    [
        ({"bandwidth": [0.1]}, None, "one entry per column"),
        ({"bandwidth": [0.1, -1.0]}, None, "positive and finite"),
        ({"bandwidth": "silly"}, None, r"'bandwidth' parameter of ConditionalDensity .* Got 'silly' instead"),
        ({"bandwidth": [0.1, 0.9], "dep_types": "u"}, None, "unordered column 1"),
        ({"bandwidth": [0.1, 0.1], "var_types": "x"}, None,
         r"'var_types' parameter of ConditionalDensity .* Got 'x' instead"),
        ({"bandwidth": [0.1, 0.1]}, ([0.0, 1.0, 2.0], [0.0, 1.0]), "3 rows but y has 2"),
        ({"bandwidth": [0.1, 0.1]}, ([0.0, np.nan], [0.0, 1.0]), "NaN or inf"),
        ({"bandwidth": [0.1, 0.1], "categorical_kernel": "nope"}, None, "categorical_kernel"),
    ],
)
def test_bad_fit(kwargs: dict, fit_args: tuple | None, match: str) -> None:
    X, y = fit_args or ([0.0, 1.0, 2.0], [0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match=match):
        ConditionalDensity(**kwargs).fit(X, y)


def test_bad_queries() -> None:
    with pytest.raises(ValueError, match="not fitted"):
        ConditionalDensity().pdf([0.0], [0.0])
    cd = ConditionalDensity(bandwidth=[0.5, 0.5]).fit([0.0, 1.0, 2.0], [0.0, 1.0, 2.0])
    for bad in (0.0, 1.0, [0.5, 1.5], np.nan):
        with pytest.raises(ValueError, match="alpha"):
            cd.quantile([0.5], bad)
    with pytest.raises(ValueError, match="level"):
        cd.predict_interval([0.5], 1.0)
    with pytest.raises(ValueError, match="2 columns, but the model was fitted on 1"):
        cd.pdf([[0.0, 1.0]], [0.0])
    with pytest.raises(ValueError, match="one y per query"):
        cd.cdf([0.0, 1.0], [0.0])
    two = ConditionalDensity(bandwidth=[0.5, 0.5, 0.5]).fit(
        [0.0, 1.0, 2.0], [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]]
    )
    with pytest.raises(ValueError, match="one continuous or ordered y column"):
        two.quantile([0.5])


def test_dask_inputs_give_the_same_numbers_lazily() -> None:
    da = pytest.importorskip("dask.array")
    x, y = _hetero(60, 5)
    lazy_x, lazy_y = da.from_array(x, chunks=25), da.from_array(y, chunks=25)
    cd = ConditionalDensity(bandwidth=[0.1, 0.1]).fit(lazy_x, lazy_y)
    ref = ConditionalDensity(bandwidth=[0.1, 0.1]).fit(x, y)
    qx, qy = np.linspace(0, 1, 30), np.linspace(-1, 1, 30)
    lx, ly = da.from_array(qx, chunks=8), da.from_array(qy, chunks=11)
    for name in ("pdf", "cdf"):
        lazy = getattr(cd, name)(lx, ly)
        assert hasattr(lazy, "dask")
        # the sums of other blocks of queries may round differently (the backend and the
        # cells of y are chosen per block): equal to the last bits
        np.testing.assert_allclose(lazy.compute(), getattr(ref, name)(qx, qy), rtol=1e-14, atol=1e-15)
    # the quantiles: to their precision, 1e-10 of the data's scale
    np.testing.assert_allclose(cd.quantile(lx, [0.2, 0.8]).compute(), ref.quantile(qx, [0.2, 0.8]), rtol=0,
                               atol=2e-10 * max(1.0, float(np.std(y))))


@pytest.mark.parametrize("name", DENSITY_KERNELS)
def test_cv_ls_convolution_is_the_integral_of_the_product(name: str) -> None:
    from nadaraya.density._cond_select import convolution

    k = kernels.get(name)
    t = np.array([0.0, 0.3, 0.5, 0.99, 1.0, 1.7, 2.5, 6.0])
    got = convolution(k, t)
    lim = (-1.0, 1.0) if k.compact else (-np.inf, np.inf)
    for tj, g in zip(t, got):
        cuts = sorted({0.0, tj, 0.5, -0.5, tj - 0.5, tj + 0.5}) if k.compact else None

        def product(s: float, shift: float = tj) -> float:
            return float(k(s)) * float(k(s - shift))

        want = quad(product, *lim, points=cuts, limit=200, epsabs=1e-15, epsrel=1e-13)[0]
        assert abs(g - want) <= 1e-13
