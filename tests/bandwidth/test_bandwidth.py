"""Bandwidth selection: CV and AICc against plain formulas and statsmodels, the searches, the errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

import nadaraya
from nadaraya.bandwidth import (
    BandwidthSelection,
    BandwidthWarning,
    rule_of_thumb,
    score_bandwidth,
    select_bandwidth,
)
from naive import naive_weights


def plain_cv(X, y, h, kernel="gaussian", sw=None):
    """Leave-one-out CV written out densely: sum_i s_i (y_i - f_{-i}(x_i))^2 / sum_i s_i."""
    X = np.asarray(X, float).reshape(len(X), -1)
    y = np.asarray(y, float)
    s = np.ones(len(X)) if sw is None else np.asarray(sw, float)
    W = naive_weights(X, X, kernel, h, sample_weight=s, exclude_self=True)
    pred = W @ y / W.sum(axis=1)
    return float(np.sum(s * (y - pred) ** 2) / s.sum())


def plain_aicc(X, y, h, kernel="gaussian", sw=None):
    """Hurvich, Simonoff and Tsai (1998), local constant: log s2 + (1 + tr/n) / (1 - (tr + 2)/n)."""
    X = np.asarray(X, float).reshape(len(X), -1)
    y = np.asarray(y, float)
    s = np.ones(len(X)) if sw is None else np.asarray(sw, float)
    W = naive_weights(X, X, kernel, h, sample_weight=s)
    H = W / W.sum(axis=1, keepdims=True)
    n = s.sum()
    sigma2 = np.sum(s * (y - H @ y) ** 2) / n
    tr = np.sum(s * np.diag(H))
    return float(np.log(sigma2) + (1 + tr / n) / (1 - (tr + 2) / n))


def data(n=80, d=1, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 5, (n, d))
    y = 2 * np.sin(X[:, 0]) + X[:, 0] + rng.normal(0, 0.5, n)
    return X, y


# -- scores at a given bandwidth ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kernel", "d", "h"),
    [("gaussian", 1, 0.3), ("gaussian", 2, [0.4, 0.9]), ("epanechnikov", 1, 0.8), ("laplacian", 2, 0.5),
     ("tricube", 2, [1.5, 2.0])],
)
@pytest.mark.parametrize("weighted", [False, True])
def test_scores_equal_plain_formulas(kernel, d, h, weighted):
    X, y = data(70, d, seed=d)
    sw = np.random.default_rng(5).uniform(0.2, 3.0, len(y)) if weighted else None
    cv = score_bandwidth(X, y, h, kernel=kernel, sample_weight=sw)
    aicc = score_bandwidth(X, y, h, method="aicc", kernel=kernel, sample_weight=sw)
    assert cv == pytest.approx(plain_cv(X, y, h, kernel, sw), rel=1e-10)
    assert aicc == pytest.approx(plain_aicc(X, y, h, kernel, sw), rel=1e-10)


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_gradient_pass_and_grid_pass_score_like_the_formula(method):
    X, y = data(60, 2, seed=3)
    plain = plain_cv if method == "cv" else plain_aicc
    h = np.array([0.35, 1.3])
    score, _ = score_bandwidth(X, y, h, method=method, gradient=True)
    assert score == pytest.approx(plain(X, y, h), rel=1e-10)
    # the coarse grid computes all its bandwidths in one pass by squaring weights
    res = select_bandwidth(X[:, :1], y, method=method)
    grid = res.search["stages"] == "grid"
    assert grid.sum() > 20 and res.n_passes < grid.sum()
    for hh, sc in zip(res.search["bandwidths"][grid][::4], res.search["scores"][grid][::4]):
        assert sc == pytest.approx(plain(X[:, :1], y, hh), rel=1e-9)


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_gradient_matches_finite_differences(method):
    X, y = data(50, 3, seed=4)
    X[:, 2] *= 10.0
    v = np.log([0.5, 1.1, 6.0])
    _, grad = score_bandwidth(X, y, np.exp(v), method=method, gradient=True)
    eps = 1e-5
    fd = np.empty(3)
    for k in range(3):
        up, dn = v.copy(), v.copy()
        up[k] += eps
        dn[k] -= eps
        fd[k] = (score_bandwidth(X, y, np.exp(up), method=method)
                 - score_bandwidth(X, y, np.exp(dn), method=method)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-9 * np.abs(fd).max())


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_curvature_pass_derivatives_match_finite_differences(method):
    """The Halley steps' one pass: the criterion and its first three derivatives along log h."""
    from nadaraya.bandwidth._objective import _Objective
    from nadaraya.kernels import get

    X, y = data(80, 2, seed=11)
    Y = np.stack([y, np.cos(3 * X[:, 1])], axis=1)
    sw = np.random.default_rng(2).uniform(0.3, 2.0, len(y))
    obj = _Objective(X, Y, sw, get("gaussian"), method, "auto")
    h = np.array([0.4, 0.9])
    f, d1, d2, d3 = obj.curvature(h)
    assert f == pytest.approx(score_bandwidth(X, Y, h, method=method, sample_weight=sw), rel=1e-12)
    eps = 1e-3
    steps = (-2, -1, 0, 1, 2)
    fs = [score_bandwidth(X, Y, h * np.exp(k * eps), method=method, sample_weight=sw) for k in steps]
    fd1 = (fs[3] - fs[1]) / (2 * eps)
    fd2 = (fs[3] - 2 * fs[2] + fs[1]) / eps**2
    fd3 = (fs[4] - 2 * fs[3] + 2 * fs[1] - fs[0]) / (2 * eps**3)
    # central differences are off by about eps^2 times the next derivative
    tol = 1e-6 * (1.0 + abs(d3))
    assert d1 == pytest.approx(fd1, rel=1e-5, abs=tol)
    assert d2 == pytest.approx(fd2, rel=1e-4, abs=tol)
    assert d3 == pytest.approx(fd3, rel=1e-2)


def test_gradient_pass_reuses_old_neighbours_and_recovers_from_overflow():
    """A new direction of h takes the shift from the last direction's nearest neighbours;
    where that neighbour is now far (its weight would overflow the others'), the pass is
    redone with exact shifts. Either way the results equal a fresh computation."""
    from nadaraya.bandwidth._objective import _Objective
    from nadaraya.kernels import get

    rng = np.random.default_rng(4)
    X = np.stack([np.repeat(np.arange(20.0), 2), np.tile([0.0, 50.0], 20)], axis=1)
    X += rng.normal(0, 1e-3, X.shape)
    y = np.sin(X[:, 0]) + X[:, 1] / 50
    # first direction: feature 1 ignored, each point's nearest is its twin 50 away in feature 1;
    # second: feature 1 matters (h = 0.5), the twin is g = 5000 away while the next point is 2
    pairs = [([1.0, 1e4], [1.0, 0.5]), ([0.7, 3.0], [0.9, 2.0])]
    for h1, h2 in (tuple(map(np.array, p)) for p in pairs):
        obj = _Objective(X, y[:, None], None, get("gaussian"), "cv", "auto")
        obj.with_gradient(h1)
        score, grad = obj.with_gradient(h2)
        fresh = _Objective(X, y[:, None], None, get("gaussian"), "cv", "auto")
        fresh_score, fresh_grad = fresh.with_gradient(h2)
        assert np.isfinite(score) and score == pytest.approx(fresh_score, rel=1e-12)
        np.testing.assert_allclose(grad, fresh_grad, rtol=1e-9, atol=1e-15)
        assert score == pytest.approx(plain_cv(X, y, h2), rel=1e-10)


def test_grid_pass_skips_far_tiles_exactly():
    """Clusters far apart (in units of the finer bandwidths): the grid pass skips their
    tiles at the finer levels, and every level still equals the plain formula."""
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.uniform(0, 1, 300), rng.uniform(40, 41, 300), rng.uniform(90, 90.5, 200)])
    y = np.sin(x) + rng.normal(0, 0.1, x.size)
    perm = rng.permutation(x.size)  # the search sorts the points itself
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        res = select_bandwidth(x[perm], y[perm])
    grid = res.search["stages"] == "grid"
    for hh, sc in zip(res.search["bandwidths"][grid], res.search["scores"][grid]):
        assert sc == pytest.approx(plain_cv(x, y, hh), rel=1e-9)


def test_halley_search_from_a_concave_start_and_at_the_bracket():
    from nadaraya.bandwidth.optimise import halley

    def f(x):  # a double well: concave near 0, minima at -1 and +1 (the right one lower)
        return (x**4 - 2 * x**2 - 0.2 * x, 4 * x**3 - 4 * x - 0.2, 12 * x**2 - 4, 24 * x)

    xs = (-0.2, 0.05, 1.6)
    x, fx, ok = halley(f, xs, tuple(f(v)[0] for v in xs), 1e-6)
    # the minimum inside the bracket that the slope leads to, to the tolerance
    assert ok and abs(f(x)[1]) < 1e-4 and 0.9 < x < 1.1
    assert fx == pytest.approx(f(x)[0])


def test_multi_output_is_the_mean_over_outputs():
    X, y = data(40)
    Y = np.stack([y, np.cos(X[:, 0])], axis=1)
    both = score_bandwidth(X, Y, 0.4)
    assert both == pytest.approx((plain_cv(X, y, 0.4) + plain_cv(X, Y[:, 1], 0.4)) / 2, rel=1e-10)


def test_compact_kernel_empty_window_scores_inf():
    X = np.array([0.0, 0.1, 0.2, 5.0, 5.1, 9.0])  # 9.0 has no neighbour within 0.5
    y = np.array([1.0, 2.0, 1.5, 0.0, 0.3, 1.0])
    assert score_bandwidth(X, y, 0.5, kernel="epanechnikov") == np.inf
    assert np.isfinite(score_bandwidth(X, y, 4.0, kernel="epanechnikov"))


# -- the searches ------------------------------------------------------------------------------


def test_scalar_search_finds_the_minimum_of_the_curve():
    X, y = data(120, seed=7)
    res = select_bandwidth(X, y)
    assert isinstance(res, BandwidthSelection)
    h = res.bandwidth[0]
    # a fine scan near the optimum: nothing better than relative 1e-3 away
    for f in (0.99, 0.995, 0.999, 1.001, 1.005, 1.01):
        assert plain_cv(X, y, h * f) >= res.score * (1 - 1e-9)
    assert res.score == pytest.approx(plain_cv(X, y, h), rel=1e-10)
    # and nothing on a wide scan beats it (the grid step guards against local minima)
    wide = [plain_cv(X, y, t) for t in np.geomspace(h / 20, h * 20, 81)]
    assert min(wide) >= res.score * (1 - 1e-9)


def _statsmodels_kernelreg(X, y, bw):
    sm = pytest.importorskip("statsmodels.nonparametric.kernel_regression")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sm.KernelReg(y, X, var_type="c" * X.shape[1], reg_type="lc", bw=bw)


@pytest.mark.parametrize("d", [1, 2])
def test_cv_against_statsmodels(d):
    X, y = data(70 if d == 1 else 60, d, seed=10 + d)
    if d == 2:
        y = y + np.cos(2 * X[:, 1])
    kr = _statsmodels_kernelreg(X, y, "cv_ls")
    theirs_h = np.abs(kr.bw)  # Nelder-Mead may return a negative h; the kernel is even in h
    res = select_bandwidth(X, y, per_feature=d > 1)
    # statsmodels' own CV function (mean squared leave-one-out residual), at both optima
    ours_sm = kr.cv_loo(res.bandwidth, kr._est_loc_constant)
    theirs_sm = kr.cv_loo(theirs_h, kr._est_loc_constant)
    assert res.score == pytest.approx(ours_sm, rel=1e-10)
    assert ours_sm <= theirs_sm * (1 + 1e-6)
    if abs(ours_sm - theirs_sm) <= 1e-6 * theirs_sm:  # the same minimum: the same bandwidth
        np.testing.assert_allclose(res.bandwidth, theirs_h, rtol=2e-3)


def test_aicc_against_statsmodels():
    X, y = data(60, seed=21)
    kr = _statsmodels_kernelreg(X, y, [0.3])

    def theirs(h):
        with warnings.catch_warnings():  # it builds a KernelReg inside, which warns about its rng
            warnings.simplefilter("ignore", FutureWarning)
            return float(np.ravel(kr.aic_hurvich(np.array([h])))[0])

    for h in (0.1, 0.3, 1.0):
        assert score_bandwidth(X, y, h, method="aicc") == pytest.approx(theirs(h), rel=1e-10)
    res = select_bandwidth(X, y, method="aicc")
    assert res.score <= min(theirs(t) for t in np.geomspace(0.05, 3, 40)) + 1e-12


def test_per_feature_smooths_out_an_irrelevant_feature():
    # CV smooths an irrelevant feature out with high probability, not with certainty (Hall, Li
    # and Racine 2007): a noise feature can have a genuine interior CV minimum. The search
    # tries smoothing out first, which found the plateau for all 6 seeds we tried here; the
    # data set is fixed by its seed.
    rng = np.random.default_rng(2)
    n = 250
    X = np.column_stack([rng.uniform(0, 5, n), rng.normal(0, 2.0, n)])
    y = 2 * np.sin(X[:, 0]) + X[:, 0] + rng.normal(0, 0.5, n)
    with warnings.catch_warnings():  # smoothing a feature out is an outcome, recorded, not warned about
        warnings.simplefilter("error", BandwidthWarning)
        res = select_bandwidth(X, y, per_feature=True)
    assert res.bandwidth[1] >= 10 * np.std(X[:, 1])
    assert res.smoothed_out.tolist() == [False, True]
    assert res.bandwidth[0] < np.std(X[:, 0])
    # per-feature beats the scalar search on such data, and the score is the formula's
    scalar = select_bandwidth(X, y)
    assert res.score < scalar.score
    assert res.score == pytest.approx(plain_cv(X, y, res.bandwidth), rel=1e-9)
    assert set(res.search["stages"]) == {"grid", "per_feature"}


def test_per_feature_without_gradient_for_other_kernels():
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, (120, 2))
    y = np.sin(6 * X[:, 0]) + 0.3 * X[:, 1] + rng.normal(0, 0.1, 120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        res = select_bandwidth(X, y, kernel="epanechnikov", per_feature=True)
        scalar = select_bandwidth(X, y, kernel="epanechnikov")
    assert np.isfinite(res.score) and res.score <= scalar.score
    assert res.score == pytest.approx(plain_cv(X, y, res.bandwidth, "epanechnikov"), rel=1e-10)


def test_compact_kernel_search_stays_where_every_point_has_a_neighbour():
    rng = np.random.default_rng(3)
    x = np.sort(rng.uniform(0, 5, 60))
    x[30:] += 3.0  # a gap: small windows leave points alone
    y = np.sin(x) + rng.normal(0, 0.2, 60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        res = select_bandwidth(x, y, kernel="biweight")
    assert np.isfinite(res.score)
    assert res.bandwidth[0] > np.max(np.minimum(np.abs(np.diff(x, prepend=-np.inf)),
                                                np.abs(np.diff(x, append=np.inf))))
    assert np.isinf(res.search["scores"]).sum() == 0


def test_textbook_learnable_w_is_cv_over_one_over_h():
    """The textbook's f(x) = sum softmax(-((x - x_i) w)^2 / 2) y_i, trained on the leave-one-out
    loss over w, has its optimum at w = 1 / h of the CV search."""
    from nadaraya.datasets import textbook

    s = textbook(n=50, noise=0.5, seed=0)
    x, y = np.ravel(s.x_train), np.ravel(s.y_train)

    def loo_loss(w):
        logits = -(((x[:, None] - x[None, :]) * w) ** 2) / 2
        np.fill_diagonal(logits, -np.inf)
        a = np.exp(logits - logits.max(axis=1, keepdims=True))
        a /= a.sum(axis=1, keepdims=True)
        return np.mean((a @ y - y) ** 2)

    ws = np.geomspace(0.1, 100, 600)
    w0 = ws[np.argmin([loo_loss(w) for w in ws])]
    best = minimize_scalar(lambda lw: loo_loss(np.exp(lw)), bounds=(np.log(w0 / 1.02), np.log(w0 * 1.02)),
                           method="bounded", options={"xatol": 1e-7})
    w_star = np.exp(best.x)
    res = select_bandwidth(x, y)
    assert 1 / res.bandwidth[0] == pytest.approx(w_star, rel=2e-3)
    assert res.score == pytest.approx(best.fun, rel=1e-6)


def test_sample_weights_zero_rows_and_scaling():
    X, y = data(60, seed=8)
    sw = np.random.default_rng(0).uniform(0.5, 2.0, 60)
    sw[::7] = 0.0
    keep = sw > 0
    for method, factor in (("cv", 3.0), ("aicc", 1.0)):
        # zero-weight rows add nothing; scaling every weight changes nothing in CV (AICc counts
        # N = sum of the weights, so there it would: weights are frequencies)
        a = score_bandwidth(X, y, 0.4, method=method, sample_weight=sw)
        b = score_bandwidth(X[keep], y[keep], 0.4, method=method, sample_weight=factor * sw[keep])
        assert a == pytest.approx(b, rel=1e-10)
    a = select_bandwidth(X, y, sample_weight=sw)
    b = select_bandwidth(X[keep], y[keep], sample_weight=3.0 * sw[keep])
    np.testing.assert_allclose(a.bandwidth, b.bandwidth, rtol=2e-3)
    assert a.score == pytest.approx(b.score, rel=1e-6)
    # integer weights: the sums are those of repeated rows
    reps = np.random.default_rng(1).integers(1, 4, 60)
    rep = score_bandwidth(X, y, 0.4, method="aicc", sample_weight=reps)
    assert rep == pytest.approx(plain_aicc(X, y, 0.4, sw=reps), rel=1e-10)


# -- errors ---------------------------------------------------------------------------------


def test_errors_are_clear():
    X, y = data(20)
    with pytest.raises(ValueError, match="at least 3 samples"):
        select_bandwidth([0.0, 1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least 3 samples"):
        select_bandwidth(X[:4], y[:4], sample_weight=[1.0, 0.0, 0.0, 1.0])
    Xn = X.copy()
    Xn[3, 0] = np.nan
    with pytest.raises(ValueError, match=r"X contains NaN.*row 3"):
        select_bandwidth(Xn, y)
    yn = y.copy()
    yn[5] = np.nan
    with pytest.raises(ValueError, match=r"y contains NaN.*row 5"):
        select_bandwidth(X, yn)
    with pytest.raises(ValueError, match=r"y has 10 rows, but X has 20"):
        select_bandwidth(X, y[:10])
    with pytest.raises(ValueError, match="method='loocv' is not valid"):
        select_bandwidth(X, y, method="loocv")
    with pytest.raises(ValueError, match="kernel='gauss' is not a known kernel"):
        select_bandwidth(X, y, kernel="gauss")
    with pytest.raises(ValueError, match="feature 1 has zero spread"):
        select_bandwidth(np.column_stack([X[:, 0], np.ones(20)]), y)
    with pytest.raises(ValueError, match="Gaussian kernel only"):
        score_bandwidth(X, y, 0.3, kernel="epanechnikov", gradient=True)
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        score_bandwidth(X, y, -0.3)


def test_constant_y_returns_the_rule_of_thumb_with_a_warning():
    X, _ = data(30)
    with pytest.warns(BandwidthWarning, match="y is constant"):
        res = select_bandwidth(X, np.full(30, 2.5))
    np.testing.assert_allclose(res.bandwidth, rule_of_thumb(X, "scott"))


# -- the estimator ----------------------------------------------------------------------------


def test_estimator_cv_and_aicc():
    X, y = data(80, seed=9)
    model = nadaraya.NadarayaWatson(bandwidth="cv").fit(X, y)
    res = select_bandwidth(X, y)
    np.testing.assert_allclose(model.bandwidth_, res.bandwidth)
    assert isinstance(model.selection_, BandwidthSelection) and model.selection_.method == "cv"
    aicc = nadaraya.NadarayaWatson(bandwidth="aicc").fit(X, y)
    assert aicc.selection_.method == "aicc"
    assert nadaraya.NadarayaWatson(bandwidth=0.3).fit(X, y).selection_ is None
    assert model.get_params()["bandwidth"] == "cv"  # the user's value is never replaced
    with pytest.raises(ValueError, match=r"'bandwidth' parameter of NadarayaWatson .* \{'aicc', 'cv', "
                                         r".*'scott', 'silverman'\}\. Got 'loo' instead"):
        nadaraya.NadarayaWatson(bandwidth="loo").fit(X, y)


def test_estimator_cv_per_feature_in_several_dimensions_and_grid_search():
    from sklearn.model_selection import GridSearchCV

    X, y = data(90, 2, seed=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        model = nadaraya.NadarayaWatson(bandwidth="cv").fit(X, y)
        assert model.selection_.per_feature and model.bandwidth_.shape == (2,)
        candidates = [0.2, 0.5, "cv", "scott"]
        search = GridSearchCV(nadaraya.NadarayaWatson(), {"bandwidth": candidates}, cv=3)
        search.fit(X, y)
        # the same three folds (KFold, unshuffled: consecutive thirds) and R^2 written out
        folds = np.array_split(np.arange(len(y)), 3)
        plain = []
        for c in candidates:
            r2 = []
            for test in folds:
                train = np.setdiff1d(np.arange(len(y)), test)
                pred = nadaraya.NadarayaWatson(bandwidth=c).fit(X[train], y[train]).predict(X[test])
                yt = y[test]
                r2.append(1.0 - np.sum((yt - pred) ** 2) / np.sum((yt - yt.mean()) ** 2))
            plain.append(np.mean(r2))
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], plain, rtol=1e-12)
    assert search.best_params_["bandwidth"] == candidates[int(np.argmax(plain))]
    # the scores differ enough that the winner is not a tie decided by rounding
    assert np.sort(plain)[-1] - np.sort(plain)[-2] > 1e-6


@pytest.mark.parametrize("n", [2, 3, 10, 500])
def test_nearest_neighbour_shifts_in_1d_equal_the_kd_tree(n):
    from scipy.spatial import cKDTree

    from nadaraya.bandwidth._passes import shifts

    z = np.random.default_rng(n).normal(size=(1, n))
    z[0, -1] = z[0, 0]  # a tie at distance 0
    c, nearest = shifts(z)
    dist, _ = cKDTree(z.T).query(z.T, k=2)
    np.testing.assert_allclose(c, dist[:, 1] ** 2, rtol=1e-15, atol=0)
    np.testing.assert_allclose(np.abs(z[0] - z[0, nearest]), dist[:, 1], rtol=1e-15, atol=0)
    assert (nearest != np.arange(n)).all()


@pytest.mark.parametrize("d, p", [(1, 1), (3, 1), (3, 2), (9, 1)])
def test_gradient_pass_equals_plain_sums(d, p):
    """The gradient pass (generated per number of features for one output, general
    otherwise) against its sums written out."""
    from nadaraya.bandwidth._gradient import loo_gradient
    from nadaraya.bandwidth._passes import shifts

    rng = np.random.default_rng(d + p)
    n = 300
    zt = np.ascontiguousarray(rng.normal(size=(d, n)) * 2.0)
    s = rng.uniform(0.5, 2.0, n)
    sy = np.ascontiguousarray(rng.normal(size=(p, n)) * s)
    c, nearest = shifts(zt)
    S, T, A, B = loo_gradient(zt, c, nearest, s, sy)
    g = (zt[:, :, None] - zt[:, None, :]) ** 2  # (d, n, n)
    W = np.exp(c[:, None] - g.sum(axis=0))
    np.fill_diagonal(W, 0.0)
    np.testing.assert_allclose(S, W @ s, rtol=1e-12)
    np.testing.assert_allclose(T, W @ sy.T, rtol=1e-11, atol=1e-12 * np.abs(W @ np.abs(sy.T)).max())
    # the moments are taken of g less the nearest neighbour's, feature by feature
    A = A + 2 * (zt - zt[:, nearest]).T ** 2 * S[:, None]
    B = B + 2 * ((zt - zt[:, nearest]).T ** 2)[:, :, None] * T[:, None, :]
    for k in range(d):
        np.testing.assert_allclose(A[:, k], 2 * (W * g[k]) @ s, rtol=1e-11, atol=1e-300)
        Bk = 2 * (W * g[k]) @ sy.T
        scale = (2 * (W * g[k]) @ np.abs(sy.T)).max()
        np.testing.assert_allclose(B[:, k], Bk, rtol=1e-10, atol=1e-12 * scale)


@pytest.mark.parametrize("method", ["cv", "aicc"])
def test_readme_gaussian_search_takes_three_passes_at_n_2000(method):
    """README: the whole grid is one pass for the Gaussian, and two Halley passes reach a
    relative 1e-3 (its table: "1-D, n = 2000 ... (3 passes)"), on its workload."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 5, 2000)
    y = 2 * np.sin(x) + x + rng.normal(0, 0.5, 2000)
    res = select_bandwidth(x, y, method=method)
    assert res.n_passes <= 3 and res.converged, (res.n_passes, res.message)
    stages = list(res.search["stages"])
    assert stages.count("grid") == 25 and "Halley" in res.message
    # the bandwidth to the stated relative 1e-3: the criterion no lower 0.1 % either side
    h = res.bandwidth[0]
    assert res.score <= min(score_bandwidth(x, y, h * f, method=method) for f in (0.999, 1.001))


def test_aicc_curvature_where_no_residual_is_left_is_an_infinite_score() -> None:
    """At a bandwidth where every point is alone (h far below the spacing) the in-sample fit
    interpolates, sigma^2 = 0 and AICc is undefined: the curvature pass says inf with no slope,
    as the criterion does, instead of dividing by zero."""
    from nadaraya.bandwidth._objective import _Objective
    from nadaraya.kernels import get

    x = np.arange(10.0)[:, None]
    obj = _Objective(x, np.sin(x), None, get("gaussian"), "aicc", "auto")
    assert obj.curvature(np.array([0.01])) == (math.inf, 0.0, 0.0, 0.0)
    score, d1, _, _ = obj.curvature(np.array([2.0]))
    assert math.isfinite(score) and math.isfinite(d1)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_the_gradient_pass_scores_points_far_apart_as_the_criterion_does(d: int) -> None:
    """Points hundreds of bandwidths from their nearest neighbour (the leave-one-out weights are
    exp(-500000) before the shift): the gradient pass once counted each point's own, left-out
    term as an overflow, scored inf and returned 0/0 predictions. CV against the plain
    log-domain leave-one-out softmax written out here; AICc is inf there (no residual left: every
    fitted value is its own), with no slope and no warning."""
    rng = np.random.default_rng(d)
    x = np.column_stack([np.arange(6.0) * 10.0] + [rng.uniform(0, 1, 6) for _ in range(d - 1)])
    y = np.array([1.0, 2.0, 0.5, 3.0, -1.0, 0.25])
    h = np.full(d, 0.01)
    lw = -0.5 * ((((x[:, None, :] - x[None, :, :]) / h) ** 2).sum(axis=2))
    np.fill_diagonal(lw, -np.inf)
    w = np.exp(lw - lw.max(axis=1, keepdims=True))
    plain = float(np.mean((y - w @ y / w.sum(axis=1)) ** 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        score, grad = score_bandwidth(x, y, h, method="cv", gradient=True)
        assert score == pytest.approx(plain, rel=1e-9) and np.isfinite(grad).all()
        assert score_bandwidth(x, y, h, method="cv") == pytest.approx(plain, rel=1e-12)
        score, grad = score_bandwidth(x, y, h, method="aicc", gradient=True)
        assert score == math.inf and np.array_equal(grad, np.zeros(d))
        assert score_bandwidth(x, y, h, method="aicc") == math.inf
