"""KernelDensity's cross-validated bandwidths: the objectives against plain O(n^2) sums, the
search against statsmodels' on its own objective."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from nadaraya import KernelDensity
from nadaraya.density._cv import CVProblem
from nadaraya.kernels import get


def _phi(u):
    return np.exp(-u * u / 2) / math.sqrt(2 * math.pi)


def _aa(lam, a, b, c):
    """Aitchison-Aitken: P(a | b) with c levels."""
    return np.where(a == b, 1 - lam, lam / (c - 1))


def _wr(lam, a, b):
    """Wang-van Ryzin: P(a | b)."""
    return np.where(a == b, 1 - lam, (1 - lam) / 2 * lam ** np.abs(a - b))


def _pairs(X, bw, var_types, convolved=False):
    """K_h(x_i, x_j) for every pair, written out (convolved: the kernel's self-convolution)."""
    n = len(X)
    K = np.ones((n, n))
    for j, t in enumerate(var_types):
        a, b = X[:, None, j], X[None, :, j]
        if t == "c":
            h = bw[j] * (math.sqrt(2) if convolved else 1.0)
            K *= _phi((a - b) / h) / h
            continue
        levels = np.unique(X[:, j])
        if not convolved:
            K *= _aa(bw[j], a, b, levels.size) if t == "u" else _wr(bw[j], a, b)
            continue
        K *= sum((_aa(bw[j], lv, a, levels.size) * _aa(bw[j], lv, b, levels.size)) if t == "u"
                 else _wr(bw[j], lv, a) * _wr(bw[j], lv, b) for lv in levels)
    return K


def _plain_ml(X, bw, var_types, w):
    K = _pairs(X, bw, var_types)
    np.fill_diagonal(K, 0.0)
    f = (K * w[None, :]).sum(axis=1) / (w.sum() - w)
    return float((w * np.log(f)).sum() / w.sum())


def _plain_ls(X, bw, var_types, w):
    W = w.sum()
    integral = float(w @ _pairs(X, bw, var_types, True) @ w) / W**2
    K = _pairs(X, bw, var_types)
    np.fill_diagonal(K, 0.0)
    f = (K * w[None, :]).sum(axis=1) / (W - w)
    return integral - 2 * float((w * f).sum() / W)


def _data(n, seed):
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.normal(size=n), rng.gamma(2.0, size=n), rng.integers(0, 3, n),
                            rng.integers(0, 4, n)]).astype(float)


@pytest.mark.parametrize(("var_types", "cols", "bw"), [
    ("c", [0], [0.3]), ("cc", [0, 1], [0.4, 0.7]), ("cuo", [0, 2, 3], [0.5, 0.3, 0.25]),
    ("uo", [2, 3], [0.2, 0.3]),
])
@pytest.mark.parametrize("weighted", [False, True])
def test_objectives_match_plain_sums(var_types, cols, bw, weighted):
    X = _data(80, 1)[:, cols]
    w = np.random.default_rng(2).uniform(0.1, 3.0, 80) if weighted else np.ones(80)
    problem = CVProblem(X, get("gaussian"), var_types, sample_weight=w if weighted else None)
    bw = np.array(bw)
    assert problem.cv_ml(bw) == pytest.approx(_plain_ml(X, bw, var_types, w), rel=1e-10)
    assert problem.cv_ls(bw) == pytest.approx(_plain_ls(X, bw, var_types, w), rel=1e-10)


def test_objectives_match_statsmodels():
    kd = pytest.importorskip("statsmodels.nonparametric.kernel_density")
    X = _data(60, 3)[:, [0, 2, 3]]
    bw = np.array([0.5, 0.3, 0.25])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        sm = kd.KDEMultivariate(X, "cuo", bw=bw)
        ml, ls = sm.loo_likelihood(bw, np.log), sm.imse(bw)
    problem = CVProblem(X, get("gaussian"), "cuo")
    assert -ml == pytest.approx(60 * (problem.cv_ml(bw) + math.log(59)), rel=1e-10)
    assert ls == pytest.approx(problem.cv_ls(bw), rel=1e-10)


@pytest.mark.parametrize("kernel", ["epanechnikov", "triweight", "tricube", "laplacian", "cosine"])
def test_least_squares_integral_of_other_kernels(kernel):
    """integral f^2 by quadrature between the kernel's breakpoints, against the pairwise
    self-convolution integrated plainly (a fine trapezoid per pair would be slow: the integral
    of f^2 on a very fine grid)."""
    x = np.random.default_rng(4).normal(size=(25, 1))
    problem = CVProblem(x, get(kernel), "c")
    f = KernelDensity(kernel=kernel, bandwidth=0.4).fit(x).pdf
    g = np.linspace(-9, 9, 120_001)
    want = np.trapezoid(f(g[:, None]) ** 2, g)
    assert problem.integral_sq(np.array([0.4])) == pytest.approx(want, rel=1e-7)


@pytest.mark.parametrize("method", ["cv_ml", "cv_ls"])
@pytest.mark.parametrize(("var_types", "cols"), [("cc", [0, 1]), ("cu", [0, 2])])
def test_chosen_bandwidth_no_worse_than_statsmodels(method, var_types, cols):
    kd = pytest.importorskip("statsmodels.nonparametric.kernel_density")
    n = 70 if var_types == "cc" else 50
    X = _data(n, 5)[:, cols]
    if var_types == "cu":  # a category that tells about x: the best lambda inside (0, (c-1)/c), where
        # nadaraya searches (statsmodels searches [0, 1], where Aitchison-Aitken prefers other categories)
        rng = np.random.default_rng(6)
        flip = rng.uniform(size=n) < 0.15
        X[:, 1] = np.where(flip, rng.integers(0, 3, n), (X[:, 0] > 0) + (X[:, 0] > 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sm = kd.KDEMultivariate(X, var_types, bw=method)
        ours = KernelDensity(bandwidth=method, var_types=var_types).fit(X).bandwidth_
        # statsmodels' own objectives (its lambdas may leave the kernel's range: it clips at 1)
        if method == "cv_ml":
            assert sm.loo_likelihood(ours, np.log) <= sm.loo_likelihood(sm.bw, np.log) + 1e-12
        else:
            assert sm.imse(ours) <= sm.imse(sm.bw) + 1e-12


@pytest.mark.parametrize("kernel", ["epanechnikov", "laplacian"])
@pytest.mark.parametrize("method", ["cv_ml", "cv_ls"])
def test_other_kernels_search_and_scalar_search(kernel, method):
    x = np.random.default_rng(6).normal(size=(80, 1))
    model = KernelDensity(kernel=kernel, bandwidth=method).fit(x)
    problem = CVProblem(x, get(kernel), "c")
    score = problem.cv_ml if method == "cv_ml" else (lambda h: -problem.cv_ls(h))
    best = score(model.bandwidth_)
    for factor in (0.9, 1.1):
        assert best >= score(model.bandwidth_ * factor)
    scalar = KernelDensity(kernel=kernel, bandwidth=method + "_scalar").fit(x).bandwidth_
    assert score(scalar) == pytest.approx(best, rel=1e-6)
