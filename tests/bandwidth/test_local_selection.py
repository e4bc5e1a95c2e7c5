"""CV and AICc of local polynomial fits and mixed data, and the searches that minimise them.

The reference is written plainly: the dense hat matrix H of the local fit (each row the
effective weights of one point's weighted least-squares fit with the product kernel, the
categorical factors included), CV from refitting without each point, AICc from tr(H) and the
in-sample residuals. The searches are checked against a dense brute-force grid.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import nadaraya
from nadaraya.bandwidth import BandwidthWarning, score_bandwidth, select_bandwidth
from nadaraya.kernels import get


def _weights(X, q, h, vt, kernel, lam_kernel="classic"):
    """Product-kernel weights of every row of X for the query q (continuous h, categorical lambda)."""
    w = np.ones(X.shape[0])
    K = get(kernel)
    for j, t in enumerate(vt):
        if t == "c":
            w = w * K.profile((q[j] - X[:, j]) / h[j])
            continue
        lam, same = h[j], X[:, j] == q[j]
        if t == "u":
            c = np.unique(X[:, j]).size
            w = w * np.where(same, 1 - lam, lam / (c - 1))
        else:
            w = w * np.where(same, 1 - lam, (1 - lam) / 2 * lam ** np.abs(X[:, j] - q[j]))
    return w


def _design(X, q, vt, degree):
    """Monomials of the continuous columns of x - q up to ``degree`` (ordered as nadaraya's)."""
    cont = [j for j, t in enumerate(vt) if t == "c"]
    Z = X[:, cont] - q[cont]
    cols = [np.ones(X.shape[0])]
    for r in range(1, degree + 1):
        for combo in itertools.combinations_with_replacement(range(len(cont)), r):
            cols.append(np.prod(Z[:, list(combo)], axis=1))
    return np.column_stack(cols)


def _hat(X, h, vt, kernel, degree, leave_out=False):
    """Rows of the (leave-one-out) smoother at the training points."""
    n = X.shape[0]
    H = np.zeros((n, n))
    for i in range(n):
        w = _weights(X, X[i], h, vt, kernel)
        if leave_out:
            w[i] = 0.0
        B = _design(X, X[i], vt, degree)
        H[i] = np.linalg.solve(B.T @ (w[:, None] * B), (B * w[:, None]).T)[0]
    return H


def _plain_scores(X, y, h, vt, kernel, degree):
    n = X.shape[0]
    cv = np.mean((y - _hat(X, h, vt, kernel, degree, leave_out=True) @ y) ** 2)
    H = _hat(X, h, vt, kernel, degree)
    tr = np.trace(H)
    sigma2 = np.mean((y - H @ y) ** 2)
    return cv, np.log(sigma2) + (1 + tr / n) / (1 - (tr + 2) / n)


def _data(vt, n=45, seed=0):
    rng = np.random.default_rng(seed)
    cols = []
    for t in vt:
        levels = 3 if t == "u" else 4
        cols.append(rng.uniform(0, 3, n) if t == "c" else rng.integers(0, levels, n).astype(float))
    X = np.column_stack(cols)
    y = np.sin(2 * X[:, 0]) + 0.2 * X.sum(axis=1) + rng.normal(0, 0.2, n)
    return X, y


CASES = [
    ("c", [0.3], "gaussian", 1),
    ("c", [0.4], "gaussian", 2),
    ("c", [0.9], "epanechnikov", 1),
    ("cc", [0.5, 0.7], "gaussian", 1),
    ("cc", [1.2, 1.5], "tricube", 1),
    ("cu", [0.4, 0.3], "gaussian", 0),
    ("cu", [0.4, 0.3], "gaussian", 1),
    ("cuo", [0.5, 0.2, 0.4], "gaussian", 1),
    ("co", [0.5, 0.3], "laplacian", 1),
]


@pytest.mark.parametrize("vt,h,kernel,degree", CASES)
def test_cv_and_aicc_equal_the_plain_formulas(vt, h, kernel, degree):
    X, y = _data(vt)
    cv, aicc = _plain_scores(X, y, np.array(h, float), vt, kernel, degree)
    kw = dict(kernel=kernel, degree=degree, var_types=None if set(vt) == {"c"} else vt)
    assert score_bandwidth(X, y, h, method="cv", **kw) == pytest.approx(cv, rel=1e-10)
    assert score_bandwidth(X, y, h, method="aicc", **kw) == pytest.approx(aicc, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("vt,h,kernel,degree", CASES[:5])
def test_loo_pool_is_the_refit_without_each_point(vt, h, kernel, degree):
    X, y = _data(vt, seed=3)
    loo = nadaraya.loo_pool(X, y, kernel=kernel, bandwidth=h, degree=degree)
    np.testing.assert_allclose(loo, _hat(X, np.array(h, float), vt, kernel, degree, leave_out=True) @ y,
                               rtol=1e-10, atol=1e-12)


def _brute(X, y, vt, degree, method, ranges):
    """The smallest criterion on a dense product grid, scored by score_bandwidth."""
    best = np.inf
    for h in itertools.product(*ranges):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = score_bandwidth(X, y, list(h), method=method, degree=degree,
                                var_types=None if set(vt) == {"c"} else vt)
        best = min(best, s)
    return best


@pytest.mark.parametrize("method", ["cv", "aicc"])
@pytest.mark.parametrize("degree", [1, 2])
def test_scalar_search_finds_the_brute_force_minimum(method, degree):
    X, y = _data("c", n=60, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BandwidthWarning)
        res = select_bandwidth(X, y, method=method, degree=degree)
    brute = _brute(X, y, "c", degree, method, [np.geomspace(0.05, 5.0, 240)])
    assert res.score <= brute + 1e-6 * abs(brute), (res.bandwidth, res.score, brute)


@pytest.mark.parametrize("vt", ["cu", "co"])
def test_mixed_search_finds_the_brute_force_minimum(vt):
    X, y = _data(vt, n=60, seed=7)
    res = select_bandwidth(X, y, var_types=vt)
    hs = np.geomspace(0.05, 3.0, 30)
    lams = np.linspace(0.0, 0.66 if vt == "cu" else 0.98, 25)
    brute = _brute(X, y, vt, 0, "cv", [hs, lams])
    assert res.score <= brute + 1e-6 * abs(brute), (res.bandwidth, res.score, brute)
    assert res.score == pytest.approx(score_bandwidth(X, y, res.bandwidth, var_types=vt), rel=1e-12)


def test_statsmodels_aic_hurvich_for_ll_uses_the_local_constant_trace():
    """Why our local-linear AICc is not compared with statsmodels': its ``aic_hurvich`` with
    ``reg_type="ll"`` takes sigma^2 from the local-linear fit but tr(H) from the local-constant
    (Nadaraya-Watson) weights. Written out, that mix reproduces statsmodels' number, and ours --
    the local-linear trace, as in the hat-matrix formula above -- differs from it."""
    KernelReg = pytest.importorskip("statsmodels.nonparametric.kernel_regression").KernelReg
    X, y = _data("c", n=40, seed=11)
    h = np.array([0.35])
    n = X.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kr = KernelReg(y, X, var_type="c", reg_type="ll", bw=h)
        theirs = float(np.ravel(kr.aic_hurvich(h))[0])
    fit_ll = _hat(X, h, "c", "gaussian", 1) @ y
    tr_lc = np.trace(_hat(X, h, "c", "gaussian", 0))
    mixed = np.log(np.mean((y - fit_ll) ** 2)) + (1 + tr_lc / n) / (1 - (tr_lc + 2) / n)
    assert theirs == pytest.approx(mixed, rel=1e-10)
    ours = score_bandwidth(X, y, h, method="aicc", degree=1)
    assert ours == pytest.approx(_plain_scores(X, y, h, "c", "gaussian", 1)[1], rel=1e-10)
    assert abs(ours - theirs) > 1e-3
